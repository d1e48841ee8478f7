import { existsSync } from 'node:fs';
import path from 'node:path';
import { type Config, ConfigError, loadConfig, parsePublicUrl } from '../config.js';
import { openStore } from '../serve.js';
import { SQLITE_FILE } from '../store/sqlite/sqlite-store.js';
import type { Store } from '../store/store.js';
import { type AdminClient, storeAdminClient } from './admin-client.js';
import { type AdminServer, httpAdminClient } from './http-admin-client.js';

/** The running server the admin commands talk to, when set (the `--url` flag wins). */
export const SERVER_URL_ENV = 'SWITCHYARD_URL';
/** The server's own name for its admin token, so one exported variable serves both. */
export const ADMIN_TOKEN_ENV = 'SWITCHYARD_ADMIN_TOKEN';

/** Flags that name a store, which a server URL replaces. */
const STORE_FLAGS = new Set(['data-dir', 'database-url']);

type Flags = Record<string, string | true>;
type Env = Readonly<Record<string, string | undefined>>;

/**
 * Runs one admin operation on the running server that `--url` or
 * SWITCHYARD_URL names, else on the store directly, saying on stderr which
 * one (a command that silently read another store than the server's was the
 * trap this closes), and prints its JSON result.
 */
export async function withAdmin(flags: Flags, run: (admin: AdminClient) => Promise<unknown>, env: Env = process.env): Promise<void> {
  const { url: urlFlag, token: tokenFlag, ...rest } = flags;
  const server = adminServer(urlFlag, tokenFlag, rest, env);
  if (server === undefined) {
    if (tokenFlag !== undefined) throw new ConfigError(`--token is a server's admin token: name the server with --url or ${SERVER_URL_ENV}`);
    return withStore(rest, (store, config) => run(storeAdminClient(store, config)));
  }
  process.stderr.write(`switchyard: using server ${server.url}\n`);
  printResult(await run(httpAdminClient(server)));
}

/**
 * Runs one operation on the store the flags and environment name (never
 * creating one: an empty store would answer `[]` from the wrong folder),
 * saying which on stderr, and prints its JSON result.
 */
export async function withStore(flags: Flags, run: (store: Store, config: Config) => Promise<unknown>): Promise<void> {
  const config = loadConfig(flags);
  if (config.databaseUrl === undefined && !existsSync(path.resolve(config.dataDir, SQLITE_FILE))) {
    throw new ConfigError(
      `no Switchyard store in ${config.dataDir} (SWITCHYARD_DATA_DIR / --data-dir): to use a running server give --url or ${SERVER_URL_ENV} ` +
        `with ${ADMIN_TOKEN_ENV}; to use its store, run this where \`serve\` runs or point --data-dir or DATABASE_URL at it`,
    );
  }
  process.stderr.write(`switchyard: using ${describeStore(config)}\n`);
  const store = await openStore(config);
  try {
    printResult(await run(store, config));
  } finally {
    await store.close();
  }
}

function printResult(result: unknown): void {
  if (result !== undefined) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

/** `store /abs/data (SQLite)` or `PostgreSQL postgres://user@host:5432/db`: never a password. */
function describeStore(config: Config): string {
  if (config.databaseUrl === undefined) return `store ${config.dataDir} (SQLite)`;
  try {
    const url = new URL(config.databaseUrl);
    // The query string may hold a password too (?password=…): left out with it.
    const user = url.username === '' ? '' : `${url.username}@`;
    return `PostgreSQL ${url.protocol}//${user}${url.host}${url.pathname}`;
  } catch {
    return 'PostgreSQL (DATABASE_URL)';
  }
}

/** The server `--url` / SWITCHYARD_URL names, with its token; undefined for the store. A flag wins over the environment. */
function adminServer(urlFlag: string | true | undefined, tokenFlag: string | true | undefined, rest: Flags, env: Env): AdminServer | undefined {
  if (urlFlag === true) throw new ConfigError('--url needs a value: the server, like http://127.0.0.1:8080');
  if (tokenFlag === true) throw new ConfigError(`--token needs a value (better: set ${ADMIN_TOKEN_ENV}, which no process list shows)`);
  const storeFlag = Object.keys(rest).find((flag) => STORE_FLAGS.has(flag));
  if (urlFlag !== undefined && storeFlag !== undefined) throw new ConfigError(`--url names a server and --${storeFlag} a store: give one of them`);
  const envUrl = nonEmpty(env[SERVER_URL_ENV]);
  // An explicit store flag wins over a server in the environment, as flags win over variables everywhere.
  const value = urlFlag ?? (storeFlag === undefined ? envUrl : undefined);
  if (value === undefined) return undefined;
  const urlSetting = urlFlag !== undefined ? '--url' : SERVER_URL_ENV;

  const parsed = parsePublicUrl(value);
  if (parsed === null) {
    // A URL with credentials is not repeated: they are what must not be printed.
    const shown = /@/.test(value) ? '' : `, got ${JSON.stringify(value.slice(0, 200))}`;
    throw new ConfigError(
      `${urlSetting} must be an http:// or https:// URL with no user, password, query or fragment, like http://127.0.0.1:8080 (the token goes in ${ADMIN_TOKEN_ENV})${shown}`,
    );
  }
  // Unknown flags are reported as everywhere; known ones set up a store or a server, which the server's own settings replace.
  loadConfig(rest, {});
  const setting = Object.keys(rest)[0];
  if (setting !== undefined) throw new ConfigError(`--${setting} has no effect with ${urlSetting}: the server's own settings apply`);

  const token = typeof tokenFlag === 'string' ? tokenFlag : nonEmpty(env[ADMIN_TOKEN_ENV]);
  if (token === undefined) throw new ConfigError(`${urlSetting} needs the server's admin token: set ${ADMIN_TOKEN_ENV} (or give --token)`);
  return {
    // Given as the admin API's own address, it is the same server.
    url: parsed.replace(/\/admin\/v1$/, ''),
    token,
    urlSetting,
    tokenSetting: tokenFlag !== undefined ? '--token' : ADMIN_TOKEN_ENV,
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
