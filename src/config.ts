import { availableParallelism } from 'node:os';
import path from 'node:path';
import { closest } from './domain/closest-name.js';
import { type TracingSettings, TracingSettingsError, tracingSettingsFromEnv } from './domain/tracing-settings.js';
import { DEFAULT_SANDBOX_LIMITS, SANDBOX_SETTING_BOUNDS, type SandboxSettings } from './sandbox/sandbox-limits.js';
import { VERSION } from './version.js';

export { closest };

/**
 * Every setting of `switchyard serve`, validated once and frozen.
 *
 * Each setting has an environment variable and a `serve` flag (flags win); the
 * names are part of the public interface (README, "Configuration"). Nothing here runs at import time.
 */
export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  /** `postgres://…` to use PostgreSQL; undefined for the embedded SQLite store. */
  readonly databaseUrl: string | undefined;
  /** Fixed admin token from the environment; undefined means "generate once and store". */
  readonly adminToken: string | undefined;
  readonly allowPrivateReceivers: boolean;
  readonly deliveryTimeoutMs: number;
  /** Calls of one function destination in flight at once on this node (they share its isolate). */
  readonly functionConcurrency: number;
  /** Time and memory of transformations' and function destinations' calls. */
  readonly sandbox: SandboxSettings;
  readonly retryWindowMs: number;
  readonly retryBaseMs: number;
  readonly retryMaxDelayMs: number;
  readonly userAgent: string;
  readonly durability: 'process' | 'fsync';
  /** Trust `X-Forwarded-For` from a reverse proxy when deriving `context.ip`. */
  readonly trustProxy: boolean;
  /** TCP connections the HTTP server holds at once; one more is answered 503 and closed. */
  readonly maxConnections: number;
  /** The same from one peer address (an IPv6 one by its /64); 0: no cap per address. */
  readonly maxConnectionsPerAddress: number;
  /** How long stored messages and finished deliveries are kept. */
  readonly retentionMs: number;
  readonly logLevel: string;
  /**
   * The URL browsers reach this server at (`https://collect.example.com`),
   * used in what the browser libraries are told; undefined: taken from each
   * request's Host.
   */
  readonly publicUrl: string | undefined;
  /**
   * Threads beside the ingest thread for the background stages (delivery,
   * deletions, replays, Engage, pruning); 0 runs everything on the main thread.
   * Today the stages share one thread, so values above 1 use 1.
   */
  readonly workers: number;
  /**
   * OpenTelemetry tracing, from the standard `OTEL_*` variables (no flags:
   * they are the variables every OpenTelemetry SDK reads). Off unless an
   * OTLP endpoint is set; see docs/operations.md, "Tracing".
   */
  readonly tracing: TracingSettings;
}

/** As many as the Webhooks destination sends at once to one receiver. */
export const DEFAULT_FUNCTION_CONCURRENCY = 64;

/**
 * Connections held at once. Each costs about 15 KB that no other bound
 * counts, so 10,000 is about 150 MB at most, far below what the open-file
 * limit alone allowed (20,000 on our hosts, 300 MB), and far above what
 * SDKs need: a server library keeps a few connections per process, a
 * browser one per page, and a reverse proxy reuses its own.
 */
export const DEFAULT_MAX_CONNECTIONS = 10_000;
/**
 * Connections held at once from one address: a tenth of the total, so
 * that one client (or one NAT) cannot take every connection, with room
 * for a busy office or a fleet of servers behind one NAT address.
 */
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 1_000;

/** pino's levels. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

interface SettingSpec {
  readonly flag: string;
  readonly env: string;
  /** For `serve --help`: what it sets and its default. */
  readonly help: string;
}

export const SETTINGS = {
  port: { flag: 'port', env: 'PORT', help: 'port to listen on (default 8080)' },
  host: { flag: 'host', env: 'HOST', help: 'address to listen on (default 0.0.0.0)' },
  dataDir: { flag: 'data-dir', env: 'SWITCHYARD_DATA_DIR', help: 'folder of the embedded SQLite store (default ./data)' },
  databaseUrl: { flag: 'database-url', env: 'DATABASE_URL', help: 'PostgreSQL instead of the embedded store' },
  adminToken: { flag: 'admin-token', env: 'SWITCHYARD_ADMIN_TOKEN', help: 'admin API bearer token, at least 16 characters (default: generated once)' },
  allowPrivateReceivers: { flag: 'allow-private-receivers', env: 'SWITCHYARD_ALLOW_PRIVATE_RECEIVERS', help: 'allow receivers on loopback and private addresses (default false)' },
  deliveryTimeoutMs: { flag: 'delivery-timeout-ms', env: 'SWITCHYARD_DELIVERY_TIMEOUT_MS', help: 'receiver answer timeout (default 5000)' },
  functionConcurrency: { flag: 'function-concurrency', env: 'SWITCHYARD_FUNCTION_CONCURRENCY', help: 'calls of one function destination in flight at once (default 64)' },
  transformTimeoutMs: { flag: 'transform-timeout-ms', env: 'SWITCHYARD_TRANSFORM_TIMEOUT_MS', help: 'time of one transformation or function call, ms (default 4000)' },
  transformMemoryMb: { flag: 'transform-memory-mb', env: 'SWITCHYARD_TRANSFORM_MEMORY_MB', help: 'heap of one transformation or function isolate, MB (default 128)' },
  transformTotalMemoryMb: { flag: 'transform-total-memory-mb', env: 'SWITCHYARD_TRANSFORM_TOTAL_MEMORY_MB', help: 'heap of all isolates of one stage together, MB (default 2048)' },
  retryWindowMs: { flag: 'retry-window-ms', env: 'SWITCHYARD_RETRY_WINDOW_MS', help: 'how long failed deliveries are retried (default 14400000)' },
  retryBaseMs: { flag: 'retry-base-ms', env: 'SWITCHYARD_RETRY_BASE_MS', help: 'first retry delay (default 1000)' },
  retryMaxDelayMs: { flag: 'retry-max-delay-ms', env: 'SWITCHYARD_RETRY_MAX_DELAY_MS', help: 'longest retry delay (default 600000)' },
  userAgent: { flag: 'user-agent', env: 'SWITCHYARD_USER_AGENT', help: 'User-Agent of deliveries (default Switchyard/<version>)' },
  durability: { flag: 'durability', env: 'SWITCHYARD_DURABILITY', help: 'process: a 200 survives a crash; fsync: also power loss (default process)' },
  trustProxy: { flag: 'trust-proxy', env: 'SWITCHYARD_TRUST_PROXY', help: 'take the client IP and scheme from X-Forwarded-* (default false)' },
  maxConnections: { flag: 'max-connections', env: 'SWITCHYARD_MAX_CONNECTIONS', help: 'connections held at once; one more gets 503 (default 10000)' },
  maxConnectionsPerAddress: { flag: 'max-connections-per-address', env: 'SWITCHYARD_MAX_CONNECTIONS_PER_ADDRESS', help: 'the same from one address; 0: no cap (default 1000, 0 with --trust-proxy)' },
  retentionHours: { flag: 'retention-hours', env: 'SWITCHYARD_RETENTION_HOURS', help: 'how long messages and finished deliveries are kept (default 168)' },
  logLevel: { flag: 'log-level', env: 'LOG_LEVEL', help: 'fatal, error, warn, info, debug, trace or silent (default info)' },
  publicUrl: { flag: 'public-url', env: 'SWITCHYARD_PUBLIC_URL', help: 'the URL browsers reach this server at (default: each request\'s)' },
  workers: { flag: 'workers', env: 'SWITCHYARD_WORKERS', help: 'threads for the background stages; 0: all on one thread (default cores - 1)' },
} as const satisfies Record<string, SettingSpec>;

/** `serve --help`: every setting with its flag, environment variable and meaning, from the table above. */
export function serveHelp(): string {
  const rows = Object.values(SETTINGS).map((s) => [`--${s.flag}`, s.env, s.help] as const);
  const flagWidth = Math.max(...rows.map(([flag]) => flag.length));
  const envWidth = Math.max(...rows.map(([, env]) => env.length));
  return rows.map(([flag, env, help]) => `  ${flag.padEnd(flagWidth)}  ${env.padEnd(envWidth)}  ${help}`).join('\n');
}

/**
 * Builds the config from flags (already split into `name → value`) and the
 * environment. Throws {@link ConfigError} naming the setting on any bad value.
 */
export function loadConfig(
  flags: Readonly<Record<string, string | true>>,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Config {
  const known = new Set<string>(Object.values(SETTINGS).map((s) => s.flag));
  for (const flag of Object.keys(flags)) {
    if (!known.has(flag)) {
      const meant = closest(flag, [...known]);
      throw new ConfigError(`unknown flag --${flag}${meant === undefined ? '' : ` (did you mean --${meant}?)`}`);
    }
  }

  const raw = (spec: SettingSpec): string | undefined => {
    const fromFlag = flags[spec.flag];
    if (fromFlag === true) return 'true';
    if (fromFlag !== undefined) return fromFlag;
    const fromEnv = env[spec.env];
    return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
  };
  const describe = (spec: SettingSpec): string => `--${spec.flag} / ${spec.env}`;

  const integer = (spec: SettingSpec, fallback: number, min: number, max: number): number => {
    const value = raw(spec);
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new ConfigError(`${describe(spec)} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };
  const boolean = (spec: SettingSpec, fallback: boolean): boolean => {
    const value = raw(spec);
    if (value === undefined) return fallback;
    if (/^(1|true|yes|on)$/i.test(value)) return true;
    if (/^(0|false|no|off)$/i.test(value)) return false;
    throw new ConfigError(`${describe(spec)} must be true or false, got ${JSON.stringify(value)}`);
  };

  const databaseUrl = raw(SETTINGS.databaseUrl);
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError(`${describe(SETTINGS.databaseUrl)} must start with postgres:// or postgresql://`);
  }
  const logLevel = raw(SETTINGS.logLevel) ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`${describe(SETTINGS.logLevel)} must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`);
  }
  const durability = raw(SETTINGS.durability) ?? 'process';
  if (durability !== 'process' && durability !== 'fsync') {
    throw new ConfigError(`${describe(SETTINGS.durability)} must be "process" or "fsync", got ${JSON.stringify(durability)}`);
  }
  const adminToken = raw(SETTINGS.adminToken);
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError(`${describe(SETTINGS.adminToken)} must be at least 16 characters`);
  }
  const DAY_MS = 24 * 3_600_000;
  const publicUrlValue = raw(SETTINGS.publicUrl);
  const publicUrl = publicUrlValue === undefined ? undefined : parsePublicUrl(publicUrlValue);
  if (publicUrl === null) {
    throw new ConfigError(`${describe(SETTINGS.publicUrl)} must be an http:// or https:// URL with no query, fragment or user, like https://collect.example.com, got ${JSON.stringify(publicUrlValue)}`);
  }

  let tracing: TracingSettings;
  try {
    tracing = tracingSettingsFromEnv(env);
  } catch (error) {
    if (error instanceof TracingSettingsError) throw new ConfigError(error.message, { cause: error });
    throw error;
  }

  const trustProxy = boolean(SETTINGS.trustProxy, false);

  return Object.freeze({
    port: integer(SETTINGS.port, 8080, 0, 65_535),
    host: raw(SETTINGS.host) ?? '0.0.0.0',
    dataDir: path.resolve(raw(SETTINGS.dataDir) ?? './data'),
    databaseUrl,
    adminToken,
    allowPrivateReceivers: boolean(SETTINGS.allowPrivateReceivers, false),
    deliveryTimeoutMs: integer(SETTINGS.deliveryTimeoutMs, 5_000, 1, 600_000),
    functionConcurrency: integer(SETTINGS.functionConcurrency, DEFAULT_FUNCTION_CONCURRENCY, 1, 256),
    sandbox: Object.freeze({
      timeoutMs: integer(SETTINGS.transformTimeoutMs, DEFAULT_SANDBOX_LIMITS.timeoutMs, ...SANDBOX_SETTING_BOUNDS.timeoutMs),
      memoryMb: integer(SETTINGS.transformMemoryMb, DEFAULT_SANDBOX_LIMITS.memoryMb, ...SANDBOX_SETTING_BOUNDS.memoryMb),
      totalMemoryMb: integer(SETTINGS.transformTotalMemoryMb, DEFAULT_SANDBOX_LIMITS.totalMemoryMb, ...SANDBOX_SETTING_BOUNDS.totalMemoryMb),
    }),
    retryWindowMs: integer(SETTINGS.retryWindowMs, 4 * 3_600_000, 0, 30 * DAY_MS),
    retryBaseMs: integer(SETTINGS.retryBaseMs, 1_000, 1, DAY_MS),
    retryMaxDelayMs: integer(SETTINGS.retryMaxDelayMs, 600_000, 1, DAY_MS),
    userAgent: raw(SETTINGS.userAgent) ?? `Switchyard/${VERSION}`,
    durability,
    trustProxy,
    maxConnections: integer(SETTINGS.maxConnections, DEFAULT_MAX_CONNECTIONS, 1, 1_000_000),
    // Behind a trusted proxy every connection comes from the proxy (the
    // client's address is in X-Forwarded-For, which is read only with the
    // request, after the connection is taken): a cap per address would cap
    // the proxy, that is every client at once. So it is off unless set; the
    // total cap still applies, and the body budget shares by the forwarded
    // address. Set, it applies to the peers (several proxies, or clients
    // connecting directly as well).
    maxConnectionsPerAddress: integer(SETTINGS.maxConnectionsPerAddress, trustProxy ? 0 : DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, 0, 1_000_000),
    retentionMs: integer(SETTINGS.retentionHours, 7 * 24, 25, 10 * 365 * 24) * 3_600_000,
    logLevel,
    publicUrl,
    // The cores it finds: one is ingest's, the rest may run stages.
    workers: integer(SETTINGS.workers, availableParallelism() - 1, 0, 256),
    tracing,
  });
}

/**
 * A URL of this service as clients reach it (the browser libraries, the
 * CLI's `--url`): scheme, host, optional port and path prefix (a proxy may
 * serve Switchyard under one), no trailing slash. Null when it is not such a
 * URL, and when it holds credentials.
 */
export function parsePublicUrl(value: string): string | null {
  if (value.length > 2_000) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '' || value.includes('?') || value.includes('#')) return null;
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}
