import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface ScratchDatabase {
  /** URL of the new database, for the server's DATABASE_URL. */
  readonly url: string;
  readonly name: string;
  drop(): Promise<void>;
}

/**
 * Creates an empty database `switchyard_bench_<random>` through the admin
 * connection `adminUrl`, so a run never measures (or disturbs) someone
 * else's data and starts from the same empty state every time.
 */
export async function createScratchDatabase(adminUrl: string): Promise<ScratchDatabase> {
  const name = `switchyard_bench_${randomBytes(6).toString('hex')}`;
  try {
    await withClient(adminUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  } catch (error) {
    const where = new URL(adminUrl);
    where.password = '';
    throw new Error(`could not create the scratch database ${name} through ${where.toString()}: ${String(error)}`, { cause: error });
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    // FORCE: a server killed mid-run may leave connections behind that would block the drop.
    drop: () => withClient(adminUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

async function withClient<T>(url: string, action: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await action(client);
  } finally {
    await client.end();
  }
}
