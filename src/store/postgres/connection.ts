import pg from 'pg';

/**
 * Connection settings shared by the pool and the LISTEN connection.
 *
 * - int8 (bigint) columns come back as numbers, not strings: they hold epoch
 *   milliseconds, ids and counts, all far below 2^53. The parser is set per
 *   client, not on pg's global `types`, so other pg users in the process are
 *   unaffected.
 * - `application_name` lets a DBA tell Switchyard's sessions apart in
 *   `pg_stat_activity`; one given in the URL wins.
 * - TCP keep-alive so a connection to a vanished server (failover, cable) is
 *   noticed even while idle, which matters most for the LISTEN connection.
 * - Server settings for each session (`options` in the URL replaces them):
 *   a transaction left open by a node that hangs or loses its network is
 *   ended after a minute, so the rows it locked (a dedupe key, the config
 *   version) do not stall every other node. Switchyard's own transactions
 *   never wait on anything but the database.
 */
export function clientConfig(connectionString: string, durability: 'process' | 'fsync'): pg.ClientConfig {
  return {
    connectionString,
    application_name: 'switchyard',
    keepAlive: true,
    connectionTimeoutMillis: 10_000,
    types: { getTypeParser },
    options: [
      '-c idle_in_transaction_session_timeout=60000',
      // `fsync` promises that an acknowledged message survives power loss:
      // hold every session to a flushed commit even if the server's default
      // is `synchronous_commit = off`. `process` keeps the server's setting.
      ...(durability === 'fsync' ? ['-c synchronous_commit=on'] : []),
    ].join(' '),
  };
}

const parseInt8 = (value: string): number => Number(value);

const getTypeParser: pg.CustomTypesConfig['getTypeParser'] = (oid, format) =>
  oid === pg.types.builtins.INT8 && format !== 'binary' ? parseInt8 : (pg.types.getTypeParser(oid, format) as unknown);

/**
 * PostgreSQL `text` cannot hold U+0000, which a client can put in a JSON
 * string (`"userId":"a\u0000b"`) and a receiver in an error. Columns that
 * copy such strings serve lookups and display, so there it becomes U+FFFD.
 * Message bodies are JSON text, where the character is always escaped, and
 * are stored unchanged.
 */
export function textColumn(value: string | undefined): string | null {
  return value === undefined ? null : value.replaceAll('\u0000', '\uFFFD');
}

/** `host:port/database` of a URL, for messages: never the password. */
export function describeDatabase(connectionString: string): string {
  try {
    const url = new URL(connectionString);
    return `${url.hostname || 'localhost'}:${url.port || '5432'}${url.pathname || '/'}`;
  } catch {
    return 'the configured database';
  }
}

/**
 * Runs `work` in one transaction on one pooled connection: COMMIT when it
 * resolves, ROLLBACK when it throws. A connection whose ROLLBACK fails is
 * in an unknown state, so it is destroyed rather than returned to the pool.
 * `begin`: what starts it, e.g. BEGIN with SET LOCALs in the same round trip.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(begin);
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackError: unknown) => {
      broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
    });
    throw error;
  } finally {
    client.release(broken);
  }
}
