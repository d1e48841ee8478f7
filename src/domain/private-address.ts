/**
 * Which IP addresses a webhook must never reach unless private receivers are
 * allowed: anything that is not a public unicast address. Pure parsing, no
 * DNS; the delivery guard resolves names and asks this about each address.
 */

type Range4 = readonly [base: number, prefix: number];

const IPV4_BLOCKED: readonly Range4[] = [
  [ipv4(0, 0, 0, 0), 8], // "this network"
  [ipv4(10, 0, 0, 0), 8], // private
  [ipv4(100, 64, 0, 0), 10], // carrier-grade NAT
  [ipv4(127, 0, 0, 0), 8], // loopback
  [ipv4(169, 254, 0, 0), 16], // link-local, incl. cloud metadata 169.254.169.254
  [ipv4(172, 16, 0, 0), 12], // private
  [ipv4(192, 0, 0, 0), 24], // IETF protocol assignments (incl. some metadata endpoints)
  [ipv4(192, 0, 2, 0), 24], // documentation
  [ipv4(192, 88, 99, 0), 24], // 6to4 relay anycast
  [ipv4(192, 168, 0, 0), 16], // private
  [ipv4(198, 18, 0, 0), 15], // benchmarking
  [ipv4(198, 51, 100, 0), 24], // documentation
  [ipv4(203, 0, 113, 0), 24], // documentation
  [ipv4(224, 0, 0, 0), 4], // multicast
  [ipv4(240, 0, 0, 0), 4], // reserved, incl. broadcast
];

/** Whether `address` (an IPv4 or IPv6 literal, brackets allowed) is not a public unicast address. Unparseable input counts as private. */
export function isPrivateAddress(address: string): boolean {
  const text = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const v4 = parseIpv4(text);
  if (v4 !== undefined) return isPrivateIpv4(v4);
  const v6 = parseIpv6(text);
  if (v6 === undefined) return true;
  return isPrivateIpv6(v6);
}

/** Whether `text` is an IPv4 or IPv6 literal (brackets allowed), as opposed to a host name. */
export function isIpLiteral(text: string): boolean {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  return parseIpv4(bare) !== undefined || parseIpv6(bare) !== undefined;
}

function isPrivateIpv4(value: number): boolean {
  return IPV4_BLOCKED.some(([base, prefix]) => inRange4(value, base, prefix));
}

function isPrivateIpv6(groups: readonly number[]): boolean {
  const g = (i: number): number => groups[i]!;
  const embedded4 = (g(6) << 16 >>> 0) + g(7);
  const zeroUpTo = (n: number): boolean => groups.slice(0, n).every((x) => x === 0);

  if (zeroUpTo(8)) return true; // :: unspecified
  if (zeroUpTo(7) && g(7) === 1) return true; // ::1 loopback
  // IPv4-mapped ::ffff:a.b.c.d and IPv4-compatible ::a.b.c.d: judged by the IPv4 address.
  if (zeroUpTo(5) && g(5) === 0xffff) return isPrivateIpv4(embedded4);
  if (zeroUpTo(6)) return isPrivateIpv4(embedded4);
  // NAT64 64:ff9b::/96 reaches the embedded IPv4 address; 64:ff9b:1::/48 is local-use.
  if (g(0) === 0x64 && g(1) === 0xff9b && groups.slice(2, 6).every((x) => x === 0)) return isPrivateIpv4(embedded4);
  if (g(0) === 0x64 && g(1) === 0xff9b && g(2) === 1) return true;
  // 6to4 2002::/16 tunnels to the IPv4 address in bits 16-47.
  if (g(0) === 0x2002) return isPrivateIpv4(((g(1) << 16) >>> 0) + g(2));
  if (g(0) === 0x2001 && g(1) === 0) return true; // Teredo: tunnels to an obfuscated IPv4 address
  if (g(0) === 0x2001 && g(1) === 0xdb8) return true; // documentation
  if (g(0) === 0x100 && zeroUpTo(4)) return true; // 100::/64 discard
  if ((g(0) & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local, incl. fd00:ec2::254 metadata
  if ((g(0) & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((g(0) & 0xffc0) === 0xfec0) return true; // fec0::/10 site-local (deprecated)
  if ((g(0) & 0xff00) === 0xff00) return true; // multicast
  return false;
}

function ipv4(a: number, b: number, c: number, d: number): number {
  return ((a << 24) >>> 0) + (b << 16) + (c << 8) + d;
}

function inRange4(value: number, base: number, prefix: number): boolean {
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return ((value & mask) >>> 0) === ((base & mask) >>> 0);
}

/** Strict dotted-quad IPv4 (what URL parsing and DNS answers produce). */
function parseIpv4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined;
    const n = Number(part);
    if (n > 255) return undefined;
    value = value * 256 + n;
  }
  return value;
}

/** IPv6 text to eight 16-bit groups; handles `::`, a trailing dotted IPv4 and a `%zone`. */
function parseIpv6(text: string): number[] | undefined {
  const zone = text.indexOf('%');
  let rest = zone === -1 ? text : text.slice(0, zone);
  if (!rest.includes(':')) return undefined;
  const lastColon = rest.lastIndexOf(':');
  const last = rest.slice(lastColon + 1);
  if (last.includes('.')) {
    // ::ffff:1.2.3.4 → ::ffff:102:304
    const v4 = parseIpv4(last);
    if (v4 === undefined) return undefined;
    rest = `${rest.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = rest.split('::');
  if (halves.length > 2) return undefined;
  const head = parseGroups(halves[0]!);
  const tail = halves.length === 2 ? parseGroups(halves[1]!) : [];
  if (head === undefined || tail === undefined) return undefined;
  const explicit = head.length + tail.length;
  if (halves.length === 1) return explicit === 8 ? head : undefined;
  if (explicit > 7) return undefined;
  return [...head, ...new Array<number>(8 - explicit).fill(0), ...tail];
}

function parseGroups(text: string): number[] | undefined {
  if (text === '') return [];
  const out: number[] = [];
  for (const group of text.split(':')) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return undefined;
    out.push(parseInt(group, 16));
  }
  return out;
}
