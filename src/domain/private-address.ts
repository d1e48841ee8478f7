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

/**
 * IPv6 is judged by an allow-list: only global unicast (2000::/3) may be
 * reached, minus its special blocks. Forms that carry an IPv4 address
 * (mapped, translated, compatible, NAT64, 6to4) are judged by that address,
 * since packets to them reach it: `[::ffff:0:7f00:1]` is 127.0.0.1.
 */
function isPrivateIpv6(groups: readonly number[]): boolean {
  const g = (i: number): number => groups[i]!;
  const embedded4 = (g(6) << 16 >>> 0) + g(7);
  const zero = (from: number, to: number): boolean => groups.slice(from, to).every((x) => x === 0);

  if (zero(0, 7) && g(7) <= 1) return true; // :: unspecified, ::1 loopback
  if (zero(0, 5) && g(5) === 0xffff) return isPrivateIpv4(embedded4); // IPv4-mapped ::ffff:a.b.c.d
  if (zero(0, 4) && g(4) === 0xffff && g(5) === 0) return isPrivateIpv4(embedded4); // IPv4-translated ::ffff:0:a.b.c.d (SIIT)
  if (zero(0, 6)) return isPrivateIpv4(embedded4); // IPv4-compatible ::a.b.c.d (deprecated)
  if (g(0) === 0x64 && g(1) === 0xff9b && zero(2, 6)) return isPrivateIpv4(embedded4); // NAT64 well-known prefix 64:ff9b::/96
  if ((g(0) & 0xe000) !== 0x2000) return true; // outside 2000::/3: 100::/64 discard, 64:ff9b:1::/48, fc00::/7, fe80::/10, ff00::/8, …
  if (g(0) === 0x2002) return isPrivateIpv4(((g(1) << 16) >>> 0) + g(2)); // 6to4 2002::/16 tunnels to the IPv4 address in bits 16-47
  if (g(0) === 0x2001 && g(1) === 0) return true; // Teredo 2001::/32: tunnels to an obfuscated IPv4 address
  if (g(0) === 0x2001 && g(1) === 0xdb8) return true; // documentation 2001:db8::/32
  if (g(0) === 0x2001 && g(1) === 2 && g(2) === 0) return true; // benchmarking 2001:2::/48
  if (g(0) === 0x3fff && g(1) < 0x1000) return true; // documentation 3fff::/20
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
export function parseIpv6(text: string): number[] | undefined {
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
