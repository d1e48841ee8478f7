import type pg from 'pg';
import { SchemaTooNewError } from '../schema-error.js';
import { inTransaction } from './connection.js';

/**
 * Schema versions, applied in order; `schema_migrations` records each one
 * applied. Append new versions, never edit a released one.
 *
 * Mirrors the SQLite schema (src/store/sqlite/migrations.ts), with these
 * choices of its own:
 * - message bodies are `text`, not `jsonb`: jsonb re-orders keys, drops
 *   duplicate keys and rejects `\u0000`, and a body must be delivered byte for
 *   byte as it was stored;
 * - times are `bigint` epoch milliseconds, like everywhere else in the store;
 * - no foreign keys, as in SQLite: deleteSource removes dependants itself, and
 *   the hot inserts stay free of referential checks;
 * - BRIN indexes on the append-only time columns that prune filters on: a few
 *   pages instead of a B-tree written on every insert;
 * - eager autovacuum on `deliveries`, the one table rewritten all day.
 */
const MIGRATIONS: readonly string[] = [
  // 1: sources, destinations, messages, deliveries
  `
  CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
  );
  INSERT INTO settings (key, value) VALUES ('config_version', '1');

  CREATE TABLE sources (
    id             text PRIMARY KEY,
    name           text NOT NULL,
    write_key      text NOT NULL,
    write_key_hash text NOT NULL UNIQUE,
    enabled        boolean NOT NULL,
    created_at     bigint NOT NULL,
    updated_at     bigint NOT NULL
  );

  CREATE TABLE destinations (
    source_id  text NOT NULL,
    kind       text NOT NULL,
    enabled    boolean NOT NULL,
    settings   text NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (source_id, kind)
  );

  CREATE TABLE messages (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_id   text NOT NULL,
    status      text NOT NULL,
    reason      text,
    type        text,
    message_id  text,
    user_id     text,
    received_at bigint NOT NULL,
    body        text NOT NULL
  );
  CREATE INDEX messages_by_source ON messages (source_id, seq);
  CREATE INDEX messages_by_user ON messages (user_id, source_id) WHERE user_id IS NOT NULL;
  CREATE INDEX messages_by_age ON messages USING brin (received_at);

  CREATE TABLE dedupe_keys (
    source_id  text NOT NULL,
    message_id text NOT NULL,
    seen_at    bigint NOT NULL,
    PRIMARY KEY (source_id, message_id)
  );
  CREATE INDEX dedupe_keys_by_age ON dedupe_keys (seen_at);

  -- While a delivery is leased, next_attempt_at is when its lease expires, so
  -- a crashed worker's deliveries fall due again by themselves.
  CREATE TABLE deliveries (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_id        text NOT NULL,
    message_seq      bigint NOT NULL,
    destination      text NOT NULL,
    status           text NOT NULL,
    attempt_count    integer NOT NULL DEFAULT 0,
    next_attempt_at  bigint,
    first_attempt_at bigint,
    lease_owner      text,
    retry_urls       text,
    last_error       text,
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL
  );
  CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
  CREATE INDEX deliveries_by_source ON deliveries (source_id, id);
  CREATE INDEX deliveries_by_message ON deliveries (message_seq);
  CREATE INDEX deliveries_by_age ON deliveries USING brin (created_at);
  -- A queue table: every delivery is updated at least twice (leased,
  -- finished) and leaves dead row versions behind in deliveries_due. Vacuum
  -- and analyze after 2% of the rows changed rather than the default 20%, so
  -- claims keep scanning a clean index with a plan fitted to the backlog.
  ALTER TABLE deliveries SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

  CREATE TABLE delivery_attempts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id bigint NOT NULL,
    at          bigint NOT NULL,
    url         text NOT NULL,
    status_code integer,
    error       text,
    duration_ms integer NOT NULL
  );
  CREATE INDEX delivery_attempts_by_delivery ON delivery_attempts (delivery_id);
  `,
  // 2: regulations (deletion and suppression requests) and suppressions
  `
  -- Ids here are opaque: COLLATE "C" orders them by their bytes, as SQLite
  -- does, whatever the database's locale, and lets the indexes serve the
  -- ORDER BYs of the lists.
  -- subject_ids and source_ids are text[] rather than jsonb: node-postgres
  -- passes a JavaScript string[] as text[] and reads it back as one, in
  -- order, with no JSON on either side; the statements that suppress and
  -- erase take the same ids as text[] parameters (unnest, = ANY); and nothing
  -- queries inside them, which is what jsonb would be for. jsonb rejects
  -- U+0000 outright and text[] cannot hold it either, so user ids are stored
  -- as messages.user_id stores them, U+0000 as U+FFFD, and erasing matches.
  -- source_ids NULL means every source.
  CREATE TABLE regulations (
    id              text COLLATE "C" PRIMARY KEY,
    regulation_type text NOT NULL,
    subject_ids     text[] NOT NULL,
    subject_count   integer NOT NULL,
    source_ids      text[],
    status          text NOT NULL,
    created_at      bigint NOT NULL,
    updated_at      bigint NOT NULL
  );
  CREATE INDEX regulations_by_age ON regulations (created_at, id);

  -- One row per affected source: the step that erases and sends deletes there.
  CREATE TABLE regulation_sources (
    regulation_id text COLLATE "C" NOT NULL,
    source_id     text COLLATE "C" NOT NULL,
    status        text NOT NULL,
    error         text,
    updated_at    bigint NOT NULL,
    PRIMARY KEY (regulation_id, source_id)
  );
  CREATE INDEX regulation_sources_pending ON regulation_sources (regulation_id) WHERE status = 'PENDING';

  -- source_id '*' means every source, present and future.
  CREATE TABLE suppressions (
    user_id       text NOT NULL,
    source_id     text NOT NULL,
    regulation_id text NOT NULL,
    created_at    bigint NOT NULL,
    PRIMARY KEY (user_id, source_id)
  );
  `,
  // 4: replays (re-delivering a time range of stored messages)
  `
  -- receivers, types and events are JSON arrays; NULL means all.
  CREATE TABLE replays (
    id          text PRIMARY KEY,
    source_id   text NOT NULL,
    from_at     bigint NOT NULL,
    to_at       bigint NOT NULL,
    receivers   text,
    types       text,
    events      text,
    status      text NOT NULL,
    cursor_seq  bigint NOT NULL,
    queued      bigint NOT NULL,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
  );
  CREATE INDEX replays_by_source ON replays (source_id, created_at);

  ALTER TABLE deliveries ADD COLUMN replay_id text;
  CREATE INDEX deliveries_by_replay ON deliveries (replay_id, status) WHERE replay_id IS NOT NULL;
  `,
  // 5: Engage (computed traits, audiences, profiles); see the SQLite schema for what each column holds
  `
  CREATE TABLE computations (
    id           text PRIMARY KEY,
    kind         text NOT NULL,
    name         text NOT NULL,
    key          text NOT NULL UNIQUE,
    definition   text NOT NULL,
    destinations text NOT NULL,
    status       text NOT NULL,
    version      bigint NOT NULL,
    created_at   bigint NOT NULL,
    updated_at   bigint NOT NULL
  );

  CREATE TABLE profiles (
    id          text PRIMARY KEY,
    state       text NOT NULL,
    version     bigint NOT NULL,
    recent_seqs text NOT NULL,
    next_expiry bigint,
    updated_at  bigint NOT NULL
  );
  CREATE INDEX profiles_by_expiry ON profiles (next_expiry) WHERE next_expiry IS NOT NULL;

  CREATE TABLE profile_identifiers (
    identifier text PRIMARY KEY,
    profile_id text NOT NULL
  );
  CREATE INDEX profile_identifiers_by_profile ON profile_identifiers (profile_id);

  CREATE TABLE profile_outputs (
    computation_id text NOT NULL,
    profile_id     text NOT NULL,
    value          text NOT NULL,
    since          bigint NOT NULL,
    PRIMARY KEY (computation_id, profile_id)
  );
  CREATE INDEX profile_outputs_by_profile ON profile_outputs (profile_id);

  CREATE TABLE engage_state (
    id               integer PRIMARY KEY CHECK (id = 1),
    cursor_seq       bigint NOT NULL,
    lease_owner      text,
    lease_expires_at bigint NOT NULL
  );
  INSERT INTO engage_state (id, cursor_seq, lease_owner, lease_expires_at) VALUES (1, 0, NULL, 0);
  `,
  // 6: per-minute traffic counters for the console's overview (src/domain/traffic.ts),
  // sharded so that nodes counting the same minute do not wait on one row.
  `
  CREATE TABLE traffic_minutes (
    minute bigint NOT NULL,
    metric text NOT NULL,
    status text NOT NULL,
    shard  smallint NOT NULL,
    count  bigint NOT NULL,
    PRIMARY KEY (minute, metric, status, shard)
  );
  `,
  // 7 (schema version 6 here: SQLite's 3 has no counterpart): computed trait
  // values move onto the profile row; profile_outputs keeps audience members
  // only (a new profile writes one row per membership instead of one per
  // trait value too).
  `
  ALTER TABLE profiles ADD COLUMN computed_traits text NOT NULL DEFAULT '{}';
  UPDATE profiles p SET computed_traits = t.trait_values
    FROM (SELECT o.profile_id, json_object_agg(o.computation_id, o.value::json)::text AS trait_values
          FROM profile_outputs o JOIN computations c ON c.id = o.computation_id AND c.kind = 'trait'
          GROUP BY o.profile_id) t
    WHERE p.id = t.profile_id;
  DELETE FROM profile_outputs o USING computations c WHERE c.id = o.computation_id AND c.kind = 'trait';
  `,
  // 8 (schema version 7 here): raw Tracking API requests, stored before the 200 and made into
  // messages by the processing stage of one node (FOR UPDATE SKIP LOCKED),
  // which deletes each row in the transaction that stores its messages.
  `
  CREATE TABLE raw_requests (
    seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_id      text NOT NULL,
    route          text NOT NULL,
    received_at    bigint NOT NULL,
    ip             text,
    config_version bigint NOT NULL,
    message_count  integer NOT NULL,
    headers        text,
    body           text NOT NULL
  );
  CREATE INDEX raw_requests_by_time ON raw_requests (received_at, message_count);
  `,
  // 9 (schema version 8 here): each regulation records the highest raw
  // request seq when it was stored, and its deletion waits for the raw rows up
  // to it, instead of for those with received_at <= created_at: those two
  // times come from the clocks of different nodes. A request stored before
  // gets the highest seq of now, which is no lower than what it would have
  // recorded (any raw row acknowledged before it and still unprocessed is
  // here); it may wait for a few later requests too, never for fewer.
  `
  ALTER TABLE regulations ADD COLUMN raw_seq_mark bigint;
  UPDATE regulations SET raw_seq_mark = (SELECT coalesce(max(seq), 0) FROM raw_requests);
  ALTER TABLE regulations ALTER COLUMN raw_seq_mark SET NOT NULL;
  `,
  // transformations (issue 24): each save is a new version; a delivery of a
  // destination with a transformation is created 'transforming' (not
  // claimable) until the transform stage stores its output body on it (NULL
  // body: the message's own). transform_failed marks a delivery failed by its
  // transformation, which a retry puts back to 'transforming', not
  // 'pending'. messages.transform: what ran, for the debugger (JSON).
  `
  CREATE TABLE transformations (
    id             text PRIMARY KEY,
    name           text NOT NULL,
    latest_version integer NOT NULL,
    created_at     bigint NOT NULL,
    updated_at     bigint NOT NULL
  );
  CREATE TABLE transformation_versions (
    transformation_id text NOT NULL,
    version           integer NOT NULL,
    code              text NOT NULL,
    created_at        bigint NOT NULL,
    PRIMARY KEY (transformation_id, version)
  );
  ALTER TABLE deliveries ADD COLUMN body text;
  ALTER TABLE deliveries ADD COLUMN transform_failed boolean NOT NULL DEFAULT false;
  ALTER TABLE messages ADD COLUMN transform text;
  CREATE INDEX deliveries_transforming ON deliveries (id) WHERE status = 'transforming';
  `,
  // tracking plans (issue 26): versions per source, the newest current; a row without a plan is a deletion
  `
  CREATE TABLE tracking_plans (
    source_id  text NOT NULL,
    version    integer NOT NULL,
    id         text NOT NULL,
    plan       text,
    created_at bigint NOT NULL,
    PRIMARY KEY (source_id, version)
  );
  `,
  // Ordered delivery (settings.ordering "user", and replays): a delivery
  // links to the delivery of its key before it (after_id) and waits, pending
  // with no next attempt, until that one has its final outcome; the outcome's
  // commit makes it due. delivery_tails holds each key's latest delivery per
  // scope (a source's Webhooks destination, or a replay); prev_id is what an
  // upsert replaced, read back in the same statement. See docs/architecture.md.
  `
  ALTER TABLE deliveries ADD COLUMN after_id bigint;
  CREATE INDEX deliveries_waiting ON deliveries (after_id) WHERE status = 'pending' AND next_attempt_at IS NULL;
  CREATE TABLE delivery_tails (
    scope       text NOT NULL,
    order_key   text NOT NULL,
    delivery_id bigint NOT NULL,
    prev_id     bigint,
    PRIMARY KEY (scope, order_key)
  );
  `,
  // The receiver's answer per attempt (issue 30): JSON {contentType?, retryAfter?, body, bodyTruncated?}, body at most 1 KB.
  `
  ALTER TABLE delivery_attempts ADD COLUMN response text;
  `,
  // Engage syncs are chained per computation, source and receiver key: a
  // sync's delivery names them, and waits (parked: pending, due at the end
  // of time) while an older one of the same chain is in flight. See
  // src/store/engage-sync-chain.ts.
  `
  ALTER TABLE deliveries ADD COLUMN sync_computation_id text;
  ALTER TABLE deliveries ADD COLUMN sync_key text;
  CREATE INDEX deliveries_engage_chain ON deliveries (sync_computation_id, sync_key) WHERE status = 'pending' AND sync_computation_id IS NOT NULL;
  `,
  // The Engage lease names its holder's LISTEN session (pid@backend_start):
  // gone from pg_stat_activity, the holder is dead and the lease free at once.
  `
  ALTER TABLE engage_state ADD COLUMN lease_backend text;
  `,
  // The observed schema (per source and UTC day: events, and paths with
  // their JSON types as bits) and the tracking-plan violation counts (per
  // source and hour, with the latest example), added to by processing. A
  // row with type '' counts what the caps left unrecorded. See
  // src/domain/observed-schema.ts and src/domain/plan-violation-counts.ts.
  `
  CREATE TABLE observed_events (
    source_id       text NOT NULL,
    day             bigint NOT NULL,
    type            text NOT NULL,
    event           text NOT NULL,
    count           bigint NOT NULL,
    paths_truncated boolean NOT NULL DEFAULT false,
    PRIMARY KEY (source_id, day, type, event)
  );
  CREATE INDEX observed_events_day ON observed_events (day);
  CREATE TABLE observed_paths (
    source_id text NOT NULL,
    day       bigint NOT NULL,
    type      text NOT NULL,
    event     text NOT NULL,
    path      text NOT NULL,
    types     integer NOT NULL,
    count     bigint NOT NULL,
    PRIMARY KEY (source_id, day, type, event, path)
  );
  CREATE INDEX observed_paths_day ON observed_paths (day);
  CREATE TABLE plan_violations (
    source_id           text NOT NULL,
    hour                bigint NOT NULL,
    type                text NOT NULL,
    event               text NOT NULL,
    violation           text NOT NULL,
    count               bigint NOT NULL,
    example_message_id  text NOT NULL,
    example_received_at bigint NOT NULL,
    example             text NOT NULL,
    PRIMARY KEY (source_id, hour, type, event, violation)
  );
  CREATE INDEX plan_violations_hour ON plan_violations (hour);
  `,
  // The W3C traceparent of the span that processed a message (tracing on
  // only, see src/telemetry/): its deliveries' spans are children of it.
  `
  ALTER TABLE messages ADD COLUMN traceparent TEXT;
  `,
  // Function destinations (issue 25): up to five per source beside its
  // Webhooks destination, each with its versions of code. A delivery to one
  // has destination 'function:<id>'; its attempts record the call
  // (delivery_attempts.function_run: JSON {version, outcome, errorType?,
  // fetches, logs}).
  `
  CREATE TABLE function_destinations (
    id                      TEXT PRIMARY KEY,
    source_id               TEXT NOT NULL,
    name                    TEXT NOT NULL,
    enabled                 boolean NOT NULL,
    settings                TEXT NOT NULL,
    max_requests_per_second INTEGER,
    latest_version          INTEGER NOT NULL,
    created_at              bigint NOT NULL,
    updated_at              bigint NOT NULL,
    UNIQUE (source_id, name)
  );
  CREATE TABLE function_versions (
    function_id TEXT NOT NULL,
    version     INTEGER NOT NULL,
    code        TEXT NOT NULL,
    created_at  bigint NOT NULL,
    PRIMARY KEY (function_id, version)
  );
  ALTER TABLE delivery_attempts ADD COLUMN function_run TEXT;
  `,
  // Ordered deliveries of a destination with a transformation: a delivery
  // its transformation drops or fails on hands its place in the key's order
  // to its predecessor, relinking the deliveries that wait for it, among
  // them ones still waiting for their own transformation (those pending are
  // found through deliveries_waiting). See docs/architecture.md.
  `
  CREATE INDEX deliveries_transforming_after ON deliveries (after_id) WHERE status = 'transforming' AND after_id IS NOT NULL;
  `,
  // An audience's members are listed in the order they joined.
  `
  CREATE INDEX profile_outputs_by_join ON profile_outputs (computation_id, since, profile_id);
  `,
  // Deliveries by messageId (issue 30): the admin list's filter starts from
  // the messages with that id and reaches their deliveries by
  // deliveries_by_message; the filter by user starts from messages_by_user.
  // Built inside the migration's transaction: on a large messages table,
  // writes to it wait while the index is built (see docs/operations.md).
  `
  CREATE INDEX messages_by_message_id ON messages (message_id) WHERE message_id IS NOT NULL;
  `,
  // deliveries.cancelled and engage_state.erasures (see the SQLite twin).
  `
  ALTER TABLE deliveries ADD COLUMN cancelled text;
  ALTER TABLE engage_state ADD COLUMN erasures bigint NOT NULL DEFAULT 0;
  `,
  // Replay times into the range the admin API takes, 0 to 253402300799999
  // ms (see the SQLite twin for why clamped). A bigint from or to past what
  // a JavaScript Date holds made the source's replay list answer 500.
  `
  UPDATE replays SET from_at = LEAST(GREATEST(from_at, 0), 253402300799999), to_at = LEAST(GREATEST(to_at, 0), 253402300799999)
    WHERE from_at NOT BETWEEN 0 AND 253402300799999 OR to_at NOT BETWEEN 0 AND 253402300799999;
  `,
  // A replay's range by receivedAt (see the SQLite twin); seq is in the
  // index so that the range's first and last seq are read from it alone.
  // Built inside the migration's transaction: on a large messages table,
  // writes to it wait while the index is built (see docs/operations.md).
  `
  CREATE INDEX messages_by_source_time ON messages (source_id, received_at, seq);
  `,
  // Suppressions are read by what changed, not whole (see the SQLite twin):
  // each row takes the sequence's next value whenever it changes, and a lift
  // keeps the row, marked lifted. Suppression writes queue on the config
  // version's row lock (PostgresStore.configChange) before taking a value,
  // so values are taken in commit order and a reader that has seen one has
  // seen every lower one.
  `
  CREATE SEQUENCE suppressions_seq;
  ALTER TABLE suppressions ADD COLUMN lifted boolean NOT NULL DEFAULT false;
  ALTER TABLE suppressions ADD COLUMN seq bigint;
  UPDATE suppressions SET seq = nextval('suppressions_seq');
  ALTER TABLE suppressions ALTER COLUMN seq SET DEFAULT nextval('suppressions_seq'), ALTER COLUMN seq SET NOT NULL;
  ALTER SEQUENCE suppressions_seq OWNED BY suppressions.seq;
  CREATE UNIQUE INDEX suppressions_by_seq ON suppressions (seq);
  `,
  // A request's source rows counted on its row (see the SQLite twin).
  `
  ALTER TABLE regulations
    ADD COLUMN source_count integer NOT NULL DEFAULT 0,
    ADD COLUMN pending_count integer NOT NULL DEFAULT 0,
    ADD COLUMN failed_count integer NOT NULL DEFAULT 0;
  UPDATE regulations r SET source_count = c.total, pending_count = c.pending, failed_count = c.failed
    FROM (SELECT regulation_id, count(*) AS total, count(*) FILTER (WHERE status = 'PENDING') AS pending,
                 count(*) FILTER (WHERE status = 'FAILED') AS failed
          FROM regulation_sources GROUP BY regulation_id) c
    WHERE r.id = c.regulation_id;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Key of the transaction-level advisory lock that serializes migrations.
 * Advisory locks are per database, so unrelated databases on one server do
 * not wait for each other. (The number is arbitrary; it only has to stay fixed.)
 */
const MIGRATION_LOCK = 7_230_465_011;

/**
 * Brings the schema to {@link SCHEMA_VERSION} in one transaction that holds
 * `pg_advisory_xact_lock`: nodes starting at once queue on the lock, the first
 * applies each missing version and the others then find nothing to do. DDL is
 * transactional in PostgreSQL, so a failed migration leaves no half-made
 * schema behind. Throws {@link SchemaTooNewError} when a newer Switchyard has
 * migrated the database further than this one knows. `upTo`: an older
 * version, for tests of an upgrade.
 */
export async function migrate(pool: pg.Pool, upTo = SCHEMA_VERSION): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version    integer PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
    const { rows } = await client.query<{ current: number }>('SELECT COALESCE(MAX(version), 0) AS current FROM schema_migrations');
    const current = rows[0]!.current;
    if (current > SCHEMA_VERSION) throw new SchemaTooNewError(current, SCHEMA_VERSION);
    for (let version = current; version < upTo; version++) {
      await client.query(MIGRATIONS[version]!);
      await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [version + 1]);
    }
  });
}
