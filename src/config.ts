import { availableParallelism } from 'node:os';
import path from 'node:path';
import { VERSION } from './version.js';

/**
 * Every setting of `switchyard serve`, validated once and frozen.
 *
 * Each setting has an environment variable and a `serve` flag (flags win); the
 * names are fixed by INTERFACE.md. Nothing here runs at import time.
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
  readonly retryWindowMs: number;
  readonly retryBaseMs: number;
  readonly retryMaxDelayMs: number;
  readonly userAgent: string;
  readonly durability: 'process' | 'fsync';
  /** Trust `X-Forwarded-For` from a reverse proxy when deriving `context.ip`. */
  readonly trustProxy: boolean;
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
}

/** pino's levels. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

interface SettingSpec {
  readonly flag: string;
  readonly env: string;
}

const SETTINGS = {
  port: { flag: 'port', env: 'PORT' },
  host: { flag: 'host', env: 'HOST' },
  dataDir: { flag: 'data-dir', env: 'SWITCHYARD_DATA_DIR' },
  databaseUrl: { flag: 'database-url', env: 'DATABASE_URL' },
  adminToken: { flag: 'admin-token', env: 'SWITCHYARD_ADMIN_TOKEN' },
  allowPrivateReceivers: { flag: 'allow-private-receivers', env: 'SWITCHYARD_ALLOW_PRIVATE_RECEIVERS' },
  deliveryTimeoutMs: { flag: 'delivery-timeout-ms', env: 'SWITCHYARD_DELIVERY_TIMEOUT_MS' },
  retryWindowMs: { flag: 'retry-window-ms', env: 'SWITCHYARD_RETRY_WINDOW_MS' },
  retryBaseMs: { flag: 'retry-base-ms', env: 'SWITCHYARD_RETRY_BASE_MS' },
  retryMaxDelayMs: { flag: 'retry-max-delay-ms', env: 'SWITCHYARD_RETRY_MAX_DELAY_MS' },
  userAgent: { flag: 'user-agent', env: 'SWITCHYARD_USER_AGENT' },
  durability: { flag: 'durability', env: 'SWITCHYARD_DURABILITY' },
  trustProxy: { flag: 'trust-proxy', env: 'SWITCHYARD_TRUST_PROXY' },
  retentionHours: { flag: 'retention-hours', env: 'SWITCHYARD_RETENTION_HOURS' },
  logLevel: { flag: 'log-level', env: 'LOG_LEVEL' },
  publicUrl: { flag: 'public-url', env: 'SWITCHYARD_PUBLIC_URL' },
  workers: { flag: 'workers', env: 'SWITCHYARD_WORKERS' },
} as const satisfies Record<string, SettingSpec>;

/** The `serve` flags this config understands, for the CLI's help text. */
export const SERVE_FLAGS: readonly string[] = Object.values(SETTINGS).map((s) => `--${s.flag}`);

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
    if (!known.has(flag)) throw new ConfigError(`unknown flag --${flag}`);
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

  return Object.freeze({
    port: integer(SETTINGS.port, 8080, 0, 65_535),
    host: raw(SETTINGS.host) ?? '0.0.0.0',
    dataDir: path.resolve(raw(SETTINGS.dataDir) ?? './data'),
    databaseUrl,
    adminToken,
    allowPrivateReceivers: boolean(SETTINGS.allowPrivateReceivers, false),
    deliveryTimeoutMs: integer(SETTINGS.deliveryTimeoutMs, 5_000, 1, 600_000),
    retryWindowMs: integer(SETTINGS.retryWindowMs, 4 * 3_600_000, 0, 30 * DAY_MS),
    retryBaseMs: integer(SETTINGS.retryBaseMs, 1_000, 1, DAY_MS),
    retryMaxDelayMs: integer(SETTINGS.retryMaxDelayMs, 600_000, 1, DAY_MS),
    userAgent: raw(SETTINGS.userAgent) ?? `Switchyard/${VERSION}`,
    durability,
    trustProxy: boolean(SETTINGS.trustProxy, false),
    retentionMs: integer(SETTINGS.retentionHours, 7 * 24, 25, 10 * 365 * 24) * 3_600_000,
    logLevel,
    publicUrl,
    // The cores it finds: one is ingest's, the rest may run stages.
    workers: integer(SETTINGS.workers, availableParallelism() - 1, 0, 256),
  });
}

/**
 * A public URL as the browser libraries get it: scheme, host, optional port
 * and path prefix (a proxy may serve Switchyard under one), no trailing slash.
 * Null when it is not such a URL.
 */
function parsePublicUrl(value: string): string | null {
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
