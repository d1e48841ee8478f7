import { type JsonObject, isJsonObject } from './message.js';

/**
 * What the browser libraries load before they send anything, pointed back
 * at Switchyard so that nothing reaches Segment's or RudderStack's servers.
 */

/** Longest Host header taken: a DNS name is at most 253 characters, plus a port. */
const MAX_HOST_LENGTH = 260;
const DNS_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const IPV6 = /^\[[0-9A-Fa-f:.]{2,45}\]$/;

/**
 * Whether a Host header is a host name, IPv4 or bracketed IPv6 address with
 * an optional port: it goes into URLs and a script's settings, so nothing
 * else (a slash, a quote, a user name) may pass.
 */
export function isValidHost(host: string): boolean {
  if (host.length === 0 || host.length > MAX_HOST_LENGTH) return false;
  const match = /^(\[[^\]]*\]|[^:]+)(?::(\d{1,5}))?$/.exec(host);
  if (match === null) return false;
  const [, name, port] = match;
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65_535)) return false;
  if (name!.startsWith('[')) return IPV6.test(name!);
  const labels = name!.replace(/\.$/, '').split('.');
  return labels.length > 0 && labels.every((label) => DNS_LABEL.test(label));
}

/**
 * The base URL browsers reach this server at: the configured public URL, or
 * the request's scheme and Host. Undefined for a Host that
 * {@link isValidHost} refuses.
 */
export function publicBaseUrl(configured: string | undefined, protocol: string, host: string | undefined): string | undefined {
  if (configured !== undefined) return configured;
  if (host === undefined || !isValidHost(host)) return undefined;
  return `${protocol === 'https' ? 'https' : 'http'}://${host.toLowerCase()}`;
}

/** `https://collect.example.com/prefix` → `{protocol: 'https', hostAndPath: 'collect.example.com/prefix'}`. */
function splitBase(base: string): { protocol: 'http' | 'https'; hostAndPath: string } {
  const https = base.startsWith('https://');
  return { protocol: https ? 'https' : 'http', hostAndPath: base.slice(https ? 'https://'.length : 'http://'.length) };
}

/**
 * The settings analytics.js (`@segment/analytics-next`) reads from
 * `GET /v1/projects/:writeKey/settings` (its `CDNSettings`), with only the
 * `Segment.io` integration, so it loads no other destination's code:
 * - `apiHost` is the Tracking API without a scheme, as analytics.js builds
 *   `${protocol}://${apiHost}/t` (its default is `api.segment.io/v1`);
 * - `metrics` point here too, with a sample rate of 0: analytics.js would
 *   otherwise post its own counters, and to `https://` whatever the
 *   protocol, since its loader passes only the page's protocol option;
 * - no plan, middleware, remote plugins or edge function: each would make
 *   it fetch more code.
 */
export function segmentSettings(writeKey: string, base: string): JsonObject {
  const { protocol, hostAndPath } = splitBase(base);
  const apiHost = `${hostAndPath}/v1`;
  return {
    integrations: {
      'Segment.io': {
        apiKey: writeKey,
        apiHost,
        protocol,
        unbundledIntegrations: [],
        addBundledMetadata: true,
        maybeBundledConfigIds: {},
        versionSettings: { componentTypes: [] },
      },
    },
    plan: { track: { __default: { enabled: true, integrations: {} } }, identify: { __default: { enabled: true } }, group: { __default: { enabled: true } } },
    edgeFunction: {},
    analyticsNextEnabled: true,
    middlewareSettings: {},
    enabledMiddleware: {},
    metrics: { sampleRate: 0, host: apiHost, protocol },
    legacyVideoPluginsEnabled: false,
    remotePlugins: [],
  };
}

export interface RudderSource {
  readonly id: string;
  readonly name: string;
  readonly enabled: boolean;
}

/**
 * The source config RudderStack's JS SDK v3 reads from `GET /sourceConfig/`
 * (it checks `source.id`, `source.config` and a `destinations` array). No
 * destinations, so it loads no device-mode code; error and metrics
 * reporting off, so it posts nothing to a metrics service. Where events go
 * is the SDK's `dataPlaneUrl`, which the site sets to Switchyard.
 * `enabled` is always true: a disabled source's messages are still taken
 * (and kept as rejected, visible in the debugger), as on the Tracking API.
 */
export function rudderSourceConfig(source: RudderSource): JsonObject {
  return {
    isHosted: false,
    source: {
      id: source.id,
      name: source.name,
      enabled: true,
      workspaceId: 'switchyard',
      config: { statsCollection: { errors: { enabled: false }, metrics: { enabled: false } } },
      destinations: [],
    },
  };
}

/** Longest `AnonymousId` header read; ids are at most 1 KB anyway. */
const MAX_ANONYMOUS_ID_HEADER = 2_048;

/**
 * The anonymous id of RudderStack's `AnonymousId` header, which its JS SDK
 * sends base64-encoded. A value that is not base64 of printable text is
 * taken as is (an HTTP client that sends the id itself).
 */
export function anonymousIdFromHeader(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  if (value === '' || value.length > MAX_ANONYMOUS_ID_HEADER) return undefined;
  if (/^[A-Za-z0-9+/]+={0,2}$/.test(value) && value.length % 4 === 0) {
    const decoded = Buffer.from(value, 'base64');
    const text = decoded.toString('utf8');
    // eslint-disable-next-line no-control-regex
    if (decoded.toString('base64') === value && text !== '' && !/[\u0000-\u001f\u007f\ufffd]/.test(text)) return text;
  }
  return value;
}

/** What request headers say about the calls when their bodies do not. */
export interface HeaderDefaults {
  /** From `AnonymousId`: a single call's anonymous id. */
  readonly anonymousId: string | undefined;
  /** From `SentAt`: when the client sent the request. */
  readonly sentAt: string | undefined;
}

/**
 * Fills a body's missing `anonymousId` and `sentAt` from RudderStack's
 * request headers, in place; a field the body has always wins. The
 * anonymous id applies to a single call only: in a batch, RudderStack's SDK
 * sends the header of its first event, which need not be every element's.
 * `sentAt` applies, when the batch has none of its own, to each element
 * without one.
 */
export function applyHeaderDefaults(body: JsonObject, kind: 'call' | 'batch', defaults: HeaderDefaults): void {
  const sentAt = defaults.sentAt !== undefined && defaults.sentAt.length <= 64 ? defaults.sentAt : undefined;
  if (kind === 'call') {
    if (body['anonymousId'] === undefined && defaults.anonymousId !== undefined) body['anonymousId'] = defaults.anonymousId;
    if (body['sentAt'] === undefined && sentAt !== undefined) body['sentAt'] = sentAt;
    return;
  }
  if (body['sentAt'] !== undefined || sentAt === undefined) return;
  const batch = body['batch'];
  if (!Array.isArray(batch)) return;
  for (const element of batch) {
    if (isJsonObject(element) && element['sentAt'] === undefined) element['sentAt'] = sentAt;
  }
}
