import pg from 'pg';
import type { StoreTopic } from '../store.js';

/**
 * One NOTIFY channel per store topic. Writers notify inside the transaction
 * that made the change, so a notification is never seen before the change is
 * visible, and a rolled-back change notifies nobody. The payload is the id of
 * the writing node, so each node can skip its own notifications (it has
 * already told its own subscribers).
 */
export const CHANNELS: Readonly<Record<StoreTopic, string>> = {
  deliveries: 'switchyard_deliveries',
  config: 'switchyard_config',
  messages: 'switchyard_messages',
  raw: 'switchyard_raw',
};

const TOPIC_OF_CHANNEL = new Map<string, StoreTopic>(
  (Object.entries(CHANNELS) as Array<[StoreTopic, string]>).map(([topic, channel]) => [channel, topic]),
);

/** `SELECT pg_notify(…)` for the given topics, sent as one statement. */
export function notifyStatement(topics: readonly StoreTopic[], nodeId: string): { text: string; values: string[] } {
  const { calls, values } = notifyCalls(topics, nodeId, 0);
  return { text: `SELECT ${calls}`, values };
}

/**
 * The `pg_notify(…)` calls for the given topics, to put in a select list of
 * a bigger statement: their parameters are numbered after the statement's
 * own `parametersBefore`, and their values go after the statement's.
 */
export function notifyCalls(topics: readonly StoreTopic[], nodeId: string, parametersBefore: number): { calls: string; values: string[] } {
  const node = `$${parametersBefore + 1}`;
  const calls = topics.map((topic, i) => `pg_notify($${parametersBefore + i + 2}, ${node})`);
  return { calls: calls.join(', '), values: [nodeId, ...topics.map((topic) => CHANNELS[topic])] };
}

/** This session's `pid@backend_start` (ms), the form {@link LIVE_BACKEND_SQL} matches. */
const BACKEND_KEY_QUERY = `SELECT pid || '@' || floor(extract(epoch FROM backend_start) * 1000)::bigint AS key
  FROM pg_stat_activity WHERE pid = pg_backend_pid()`;

/**
 * SQL that is true while the session a {@link ChangeListener.backend} key
 * names (in the column or expression `key`) is connected. pid and
 * backend_start are readable in pg_stat_activity by every role; the start
 * time guards against a pid the server reused for a new session.
 */
export function liveBackendSql(key: string): string {
  return `EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = split_part(${key}, '@', 1)::int
    AND floor(extract(epoch FROM a.backend_start) * 1000)::bigint = split_part(${key}, '@', 2)::bigint)`;
}

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5_000;

/**
 * Holds one dedicated connection (outside the pool) that LISTENs on every
 * channel and passes other nodes' notifications on as topics. When the
 * connection drops it reconnects with backoff; notifications sent while it
 * was down are lost, so after reconnecting it reports every topic once and
 * subscribers re-check whatever they watch.
 */
export class ChangeListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private delayMs = RECONNECT_MIN_MS;
  private started = false;
  private stopped = false;
  private connectedBefore = false;
  private backendKey: string | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly nodeId: string,
    private readonly onTopic: (topic: StoreTopic) => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  /**
   * `pid@backend_start` of the LISTEN connection while it is up: PostgreSQL
   * drops a session the moment its client process dies (kill -9 closes the
   * socket), so while this key is in `pg_stat_activity` the node is alive.
   * Leases record it so that a restarted node need not wait for a dead
   * one's lease to run out (see engage-queries.ts claimLease).
   */
  backend(): string | undefined {
    return this.backendKey;
  }

  /** Starts listening in the background; idempotent. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {
      // Ending a connection that is already broken: nothing left to release.
    });
  }

  private connect(): void {
    const client = new pg.Client(this.config);
    this.client = client;
    let failed = false;
    const fail = (error: unknown): void => {
      if (failed) return;
      failed = true;
      client.removeAllListeners('notification');
      client.end().catch(() => {
        // Already broken; the new connection below replaces it.
      });
      if (this.stopped || this.client !== client) return;
      this.client = undefined;
      this.backendKey = undefined;
      this.onError(new Error('the PostgreSQL LISTEN connection was lost; reconnecting', { cause: error }));
      this.timer = setTimeout(() => this.connect(), this.delayMs);
      this.delayMs = Math.min(this.delayMs * 2, RECONNECT_MAX_MS);
    };
    client.on('error', fail);
    client.on('end', () => fail(new Error('connection ended')));
    client.on('notification', (message) => {
      const topic = TOPIC_OF_CHANNEL.get(message.channel);
      if (topic !== undefined && message.payload !== this.nodeId) this.onTopic(topic);
    });
    client
      .connect()
      // The session's key first: LISTEN stays the session's last statement,
      // which is how operators (and the tests) find it in pg_stat_activity.
      .then(() => client.query<{ key: string }>(BACKEND_KEY_QUERY))
      .then(async ({ rows }) => {
        await client.query(Object.values(CHANNELS).map((channel) => `LISTEN ${channel}`).join('; '));
        if (this.client !== client) return;
        this.backendKey = rows[0]?.key;
        this.delayMs = RECONNECT_MIN_MS;
        if (this.connectedBefore) for (const topic of Object.keys(CHANNELS) as StoreTopic[]) this.onTopic(topic);
        this.connectedBefore = true;
      })
      .catch(fail);
  }
}
