import type { Database } from 'better-sqlite3';
import { storedId } from '../../domain/normalize.js';
import { SchemaTooNewError } from '../schema-error.js';

/**
 * Schema versions, applied in order; `PRAGMA user_version` records the last
 * one applied. Append new versions, never edit a released one.
 */
const MIGRATIONS: readonly string[] = [
  // 1: sources, destinations, messages, deliveries
  `
  CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
  ) WITHOUT ROWID;
  INSERT INTO settings (key, value) VALUES ('config_version', '1');

  CREATE TABLE sources (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    write_key      TEXT NOT NULL,
    write_key_hash TEXT NOT NULL UNIQUE,
    enabled        INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
  ) WITHOUT ROWID;

  CREATE TABLE destinations (
    source_id  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    enabled    INTEGER NOT NULL,
    settings   TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (source_id, kind)
  ) WITHOUT ROWID;

  CREATE TABLE messages (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    source_id   TEXT NOT NULL,
    status      TEXT NOT NULL,
    reason      TEXT,
    type        TEXT,
    message_id  TEXT,
    user_id     TEXT,
    received_at INTEGER NOT NULL,
    body        TEXT NOT NULL
  );
  -- No index by user: only deletion requests look messages up by user, and
  -- they scan one source's rows; an index on random user ids would cost
  -- every insert about as much as the insert itself.
  CREATE INDEX messages_by_source ON messages (source_id, seq);

  -- key: the first 64 bits of SHA-256(source_id, message_id). An integer key
  -- inserts several times faster than a text one; the full pair is kept to
  -- tell a (vanishingly rare) hash collision from a duplicate. No index on
  -- seen_at for the same reason: pruning scans the table by key in chunks.
  CREATE TABLE dedupe_keys (
    key        INTEGER PRIMARY KEY,
    source_id  TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seen_at    INTEGER NOT NULL
  );

  -- While a delivery is leased, next_attempt_at is when its lease expires, so
  -- a crashed worker's deliveries fall due again by themselves.
  CREATE TABLE deliveries (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    source_id        TEXT NOT NULL,
    message_seq      INTEGER NOT NULL,
    destination      TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempt_count    INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER,
    first_attempt_at INTEGER,
    lease_owner      TEXT,
    retry_urls       TEXT,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
  );
  CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
  CREATE INDEX deliveries_by_source ON deliveries (source_id, id);
  CREATE INDEX deliveries_by_message ON deliveries (message_seq);

  CREATE TABLE delivery_attempts (
    id          INTEGER PRIMARY KEY,
    delivery_id INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    url         TEXT NOT NULL,
    status_code INTEGER,
    error       TEXT,
    duration_ms INTEGER NOT NULL
  );
  CREATE INDEX delivery_attempts_by_delivery ON delivery_attempts (delivery_id);
  `,
  // 2: regulations (deletion and suppression requests) and suppressions
  `
  -- subject_ids and source_ids are JSON arrays; source_ids NULL means every source.
  CREATE TABLE regulations (
    id              TEXT PRIMARY KEY,
    regulation_type TEXT NOT NULL,
    subject_ids     TEXT NOT NULL,
    subject_count   INTEGER NOT NULL,
    source_ids      TEXT,
    status          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX regulations_by_age ON regulations (created_at, id);

  -- One row per affected source: the step that erases and sends deletes there.
  CREATE TABLE regulation_sources (
    regulation_id TEXT NOT NULL,
    source_id     TEXT NOT NULL,
    status        TEXT NOT NULL,
    error         TEXT,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (regulation_id, source_id)
  ) WITHOUT ROWID;
  CREATE INDEX regulation_sources_pending ON regulation_sources (regulation_id) WHERE status = 'PENDING';

  -- source_id '*' means every source, present and future.
  CREATE TABLE suppressions (
    user_id       TEXT NOT NULL,
    source_id     TEXT NOT NULL,
    regulation_id TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (user_id, source_id)
  ) WITHOUT ROWID;
  `,
  // 3: de-duplication moves to an in-memory index rebuilt from messages (see dedupe-index.ts)
  `
  DROP TABLE dedupe_keys;
  `,
  // 4: replays (re-delivering a time range of stored messages)
  `
  -- receivers, types and events are JSON arrays; NULL means all.
  CREATE TABLE replays (
    id          TEXT PRIMARY KEY,
    source_id   TEXT NOT NULL,
    from_at     INTEGER NOT NULL,
    to_at       INTEGER NOT NULL,
    receivers   TEXT,
    types       TEXT,
    events      TEXT,
    status      TEXT NOT NULL,
    cursor_seq  INTEGER NOT NULL,
    queued      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX replays_by_source ON replays (source_id, created_at);

  ALTER TABLE deliveries ADD COLUMN replay_id TEXT;
  CREATE INDEX deliveries_by_replay ON deliveries (replay_id, status) WHERE replay_id IS NOT NULL;
  `,
  // 5: Engage (computed traits, audiences, profiles)
  `
  -- definition and destinations are JSON; version grows with each definition change.
  CREATE TABLE computations (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    name         TEXT NOT NULL,
    key          TEXT NOT NULL UNIQUE,
    definition   TEXT NOT NULL,
    destinations TEXT NOT NULL,
    status       TEXT NOT NULL,
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
  ) WITHOUT ROWID;

  -- state: the profile's Engage state (JSON, bounded by the domain);
  -- version: bumped by every write, checked by the next (no lost update);
  -- recent_seqs: its latest messages (JSON array), for the events listing.
  CREATE TABLE profiles (
    id          TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    version     INTEGER NOT NULL,
    recent_seqs TEXT NOT NULL,
    next_expiry INTEGER,
    updated_at  INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX profiles_by_expiry ON profiles (next_expiry) WHERE next_expiry IS NOT NULL;

  CREATE TABLE profile_identifiers (
    identifier TEXT PRIMARY KEY,
    profile_id TEXT NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX profile_identifiers_by_profile ON profile_identifiers (profile_id);

  -- A row per audience member and per profile with a computed trait value
  -- (since 7: audience members only).
  CREATE TABLE profile_outputs (
    computation_id TEXT NOT NULL,
    profile_id     TEXT NOT NULL,
    value          TEXT NOT NULL,
    since          INTEGER NOT NULL,
    PRIMARY KEY (computation_id, profile_id)
  ) WITHOUT ROWID;
  CREATE INDEX profile_outputs_by_profile ON profile_outputs (profile_id);

  -- The evaluator: the last message seq applied, and the lease of the node that runs it.
  CREATE TABLE engage_state (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    cursor_seq       INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER NOT NULL
  );
  INSERT INTO engage_state (id, cursor_seq, lease_owner, lease_expires_at) VALUES (1, 0, NULL, 0);
  `,
  // 6: per-minute traffic counters for the console's overview (src/domain/traffic.ts)
  `
  CREATE TABLE traffic_minutes (
    minute INTEGER NOT NULL,
    metric TEXT NOT NULL,
    status TEXT NOT NULL,
    count  INTEGER NOT NULL,
    PRIMARY KEY (minute, metric, status)
  ) WITHOUT ROWID;
  `,
  // 7: computed trait values move onto the profile row (profile_outputs keeps
  // audience members only), and profiles becomes a rowid table: in a WITHOUT
  // ROWID table a row longer than about 1 KB spills into overflow pages, and
  // a profile's state often is (a rowid table keeps up to about 4 KB of a row
  // on its own page).
  `
  CREATE TABLE profiles_v7 (
    id              TEXT PRIMARY KEY,
    version         INTEGER NOT NULL,
    next_expiry     INTEGER,
    updated_at      INTEGER NOT NULL,
    recent_seqs     TEXT NOT NULL,
    -- JSON object: the value of each computed trait that has one, by computation id.
    computed_traits TEXT NOT NULL,
    state           TEXT NOT NULL
  );
  INSERT INTO profiles_v7 (id, version, next_expiry, updated_at, recent_seqs, computed_traits, state)
    SELECT p.id, p.version, p.next_expiry, p.updated_at, p.recent_seqs,
      COALESCE((SELECT json_group_object(o.computation_id, json(o.value)) FROM profile_outputs o
                JOIN computations c ON c.id = o.computation_id AND c.kind = 'trait'
                WHERE o.profile_id = p.id), '{}'),
      p.state
    FROM profiles p;
  DROP TABLE profiles;
  ALTER TABLE profiles_v7 RENAME TO profiles;
  CREATE INDEX profiles_by_expiry ON profiles (next_expiry) WHERE next_expiry IS NOT NULL;
  DELETE FROM profile_outputs WHERE computation_id IN (SELECT id FROM computations WHERE kind = 'trait');
  `,
  // 8: raw Tracking API requests, stored before the 200 and made into
  // messages by the processing stage, which deletes each row in the
  // transaction that stores its messages.
  `
  CREATE TABLE raw_requests (
    seq            INTEGER PRIMARY KEY,
    source_id      TEXT NOT NULL,
    route          TEXT NOT NULL,
    received_at    INTEGER NOT NULL,
    ip             TEXT,
    config_version INTEGER NOT NULL,
    message_count  INTEGER NOT NULL,
    headers        TEXT,
    body           TEXT NOT NULL
  );
  CREATE INDEX raw_requests_by_time ON raw_requests (received_at, message_count);
  `,
  // 9: each regulation records the highest raw request seq when it was
  // stored, and its deletion waits for the raw rows up to it (not for those
  // with received_at <= created_at, which on PostgreSQL come from different
  // nodes' clocks; one rule on both stores). raw_requests becomes
  // AUTOINCREMENT so that a seq is never handed out twice: without it, a
  // table emptied by processing starts again at 1, below the marks of
  // deletions still waiting, which would then wait for requests that came
  // after them. A request stored before gets the highest seq of now: no lower
  // than what it would have recorded, so it waits for no fewer requests.
  `
  CREATE TABLE raw_requests_v9 (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    source_id      TEXT NOT NULL,
    route          TEXT NOT NULL,
    received_at    INTEGER NOT NULL,
    ip             TEXT,
    config_version INTEGER NOT NULL,
    message_count  INTEGER NOT NULL,
    headers        TEXT,
    body           TEXT NOT NULL
  );
  INSERT INTO raw_requests_v9 (seq, source_id, route, received_at, ip, config_version, message_count, headers, body)
    SELECT seq, source_id, route, received_at, ip, config_version, message_count, headers, body FROM raw_requests;
  DROP TABLE raw_requests;
  ALTER TABLE raw_requests_v9 RENAME TO raw_requests;
  CREATE INDEX raw_requests_by_time ON raw_requests (received_at, message_count);

  ALTER TABLE regulations ADD COLUMN raw_seq_mark INTEGER NOT NULL DEFAULT 0;
  UPDATE regulations SET raw_seq_mark = (SELECT coalesce(max(seq), 0) FROM raw_requests);
  `,
  // transformations (issue 24): each save is a new version; a delivery of a
  // destination with a transformation is created 'transforming' (not
  // claimable) until the transform stage stores its output body on it (NULL
  // body: the message's own). transform_failed marks a delivery failed by its
  // transformation, which a retry puts back to 'transforming', not
  // 'pending'. messages.transform: what ran, for the debugger (JSON).
  `
  CREATE TABLE transformations (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    latest_version INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE transformation_versions (
    transformation_id TEXT NOT NULL,
    version           INTEGER NOT NULL,
    code              TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    PRIMARY KEY (transformation_id, version)
  ) WITHOUT ROWID;
  ALTER TABLE deliveries ADD COLUMN body TEXT;
  ALTER TABLE deliveries ADD COLUMN transform_failed INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE messages ADD COLUMN transform TEXT;
  CREATE INDEX deliveries_transforming ON deliveries (id) WHERE status = 'transforming';
  `,
  // tracking plans (issue 26): versions per source, the newest current; a row without a plan is a deletion
  `
  CREATE TABLE tracking_plans (
    source_id  text NOT NULL,
    version    INTEGER NOT NULL,
    id         text NOT NULL,
    plan       text,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (source_id, version)
  );
  `,
  // Ordered delivery (settings.ordering "user", and replays): a delivery
  // links to the delivery of its key before it (after_id) and waits, pending
  // with no next attempt, until that one has its final outcome; the outcome's
  // commit makes it due. delivery_tails holds each key's latest delivery per
  // scope (a source's Webhooks destination, or a replay), so creating one
  // finds its predecessor by primary key. See docs/architecture.md.
  `
  ALTER TABLE deliveries ADD COLUMN after_id INTEGER;
  CREATE INDEX deliveries_waiting ON deliveries (after_id) WHERE status = 'pending' AND next_attempt_at IS NULL;
  CREATE TABLE delivery_tails (
    scope       TEXT NOT NULL,
    order_key   TEXT NOT NULL,
    delivery_id INTEGER NOT NULL,
    PRIMARY KEY (scope, order_key)
  ) WITHOUT ROWID;
  `,
  // The receiver's answer per attempt (issue 30): JSON {contentType?, retryAfter?, body, bodyTruncated?}, body at most 1 KB.
  `
  ALTER TABLE delivery_attempts ADD COLUMN response TEXT;
  `,
  // Engage syncs are chained per computation, source and receiver key: a
  // sync's delivery names them, and waits (parked: pending, due at the end
  // of time) while an older one of the same chain is in flight. See
  // src/store/engage-sync-chain.ts.
  `
  ALTER TABLE deliveries ADD COLUMN sync_computation_id TEXT;
  ALTER TABLE deliveries ADD COLUMN sync_key TEXT;
  CREATE INDEX deliveries_engage_chain ON deliveries (sync_computation_id, sync_key) WHERE status = 'pending' AND sync_computation_id IS NOT NULL;
  `,
  // The observed schema (per source and UTC day: events, and paths with
  // their JSON types as bits) and the tracking-plan violation counts (per
  // source and hour, with the latest example), added to by processing. A
  // row with type '' counts what the caps left unrecorded. See
  // src/domain/observed-schema.ts and src/domain/plan-violation-counts.ts.
  `
  CREATE TABLE observed_events (
    source_id       TEXT NOT NULL,
    day             INTEGER NOT NULL,
    type            TEXT NOT NULL,
    event           TEXT NOT NULL,
    count           INTEGER NOT NULL,
    paths_truncated INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (source_id, day, type, event)
  ) WITHOUT ROWID;
  CREATE INDEX observed_events_day ON observed_events (day);
  CREATE TABLE observed_paths (
    source_id TEXT NOT NULL,
    day       INTEGER NOT NULL,
    type      TEXT NOT NULL,
    event     TEXT NOT NULL,
    path      TEXT NOT NULL,
    types     INTEGER NOT NULL,
    count     INTEGER NOT NULL,
    PRIMARY KEY (source_id, day, type, event, path)
  ) WITHOUT ROWID;
  CREATE INDEX observed_paths_day ON observed_paths (day);
  CREATE TABLE plan_violations (
    source_id           TEXT NOT NULL,
    hour                INTEGER NOT NULL,
    type                TEXT NOT NULL,
    event               TEXT NOT NULL,
    violation           TEXT NOT NULL,
    count               INTEGER NOT NULL,
    example_message_id  TEXT NOT NULL,
    example_received_at INTEGER NOT NULL,
    example             TEXT NOT NULL,
    PRIMARY KEY (source_id, hour, type, event, violation)
  ) WITHOUT ROWID;
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
    enabled                 INTEGER NOT NULL,
    settings                TEXT NOT NULL,
    max_requests_per_second INTEGER,
    latest_version          INTEGER NOT NULL,
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL,
    UNIQUE (source_id, name)
  );
  CREATE TABLE function_versions (
    function_id TEXT NOT NULL,
    version     INTEGER NOT NULL,
    code        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
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
  // Deliveries by user and by messageId (issue 30): message_keys finds the
  // messages with a given messageId or userId, and the admin list reaches
  // their deliveries by deliveries_by_message. Not B-tree indexes on
  // messages: each random id dirties a page of its own, and the two cost
  // about 75 µs of CPU more per stored message on a store of a million
  // (appendMessages, 500 a call: ~20 µs a message without them), growing
  // with the store. FTS5 keeps a transaction's keys in memory and writes
  // them as one segment, merged with others later: about 20 µs more, however
  // large the store. Contentless (the ids stay in messages), one token per
  // id, m<hex of the messageId> and u<hex of the userId>, so that a match is
  // exact; the triggers keep it in step with every insert and delete of a
  // message (pruning, deletion requests, a source's removal).
  `
  CREATE VIRTUAL TABLE message_keys USING fts5(keys, content='', contentless_delete=1, detail=none, tokenize='ascii');
  INSERT INTO message_keys (rowid, keys)
    SELECT seq, concat_ws(' ', CASE WHEN message_id <> '' THEN 'm' || hex(message_id) END, CASE WHEN user_id <> '' THEN 'u' || hex(user_id) END)
    FROM messages WHERE message_id <> '' OR user_id <> '';
  CREATE TRIGGER message_keys_insert AFTER INSERT ON messages WHEN new.message_id <> '' OR new.user_id <> '' BEGIN
    INSERT INTO message_keys (rowid, keys)
    VALUES (new.seq, concat_ws(' ', CASE WHEN new.message_id <> '' THEN 'm' || hex(new.message_id) END, CASE WHEN new.user_id <> '' THEN 'u' || hex(new.user_id) END));
  END;
  CREATE TRIGGER message_keys_delete AFTER DELETE ON messages BEGIN
    DELETE FROM message_keys WHERE rowid = old.seq;
  END;
  `,
  // message_keys written in batches instead of by a trigger per message
  // (message-keys.ts): FTS5 writes a segment per transaction, so a commit
  // of a few messages (processing at low rates, Engage's syncs) paid 25-45
  // µs more per message; ingest.track stored 5,600-5,800 req/s with the
  // trigger and 7,900-8,000 without. Every message up to indexed_seq is in
  // message_keys; those after it are found by scanning them (fewer than two
  // batches). Seqs never repeat (AUTOINCREMENT), so a deleted message is
  // never indexed later; only an indexed one has a row to delete.
  `
  CREATE TABLE message_keys_state (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_seq INTEGER NOT NULL
  );
  INSERT INTO message_keys_state (id, indexed_seq) SELECT 1, COALESCE(MAX(seq), 0) FROM messages;
  DROP TRIGGER message_keys_insert;
  DROP TRIGGER message_keys_delete;
  CREATE TRIGGER message_keys_delete AFTER DELETE ON messages WHEN old.seq <= (SELECT indexed_seq FROM message_keys_state WHERE id = 1) BEGIN
    DELETE FROM message_keys WHERE rowid = old.seq;
  END;
  `,
  // The unprocessed backlog read in two key lookups instead of a scan
  // (raw-queries.ts, backlogNow): each raw request carries the running
  // total of messages up to and including it, so the backlog is the last
  // row's total less what the first row's total counted before it. The
  // ingest thread read it every 200 ms by scanning an index of every
  // unprocessed row (5 ms at 100,000 rows); that index, kept for this
  // read alone, cost every ingest insert and processing delete one more
  // B-tree write.
  `
  ALTER TABLE raw_requests ADD COLUMN message_total INTEGER NOT NULL DEFAULT 0;
  UPDATE raw_requests SET message_total = running.total
    FROM (SELECT seq, sum(message_count) OVER (ORDER BY seq) AS total FROM raw_requests) AS running
    WHERE running.seq = raw_requests.seq;
  DROP INDEX raw_requests_by_time;
  `,
  // deliveries.cancelled: why a pending delivery must not be sent any more
  // (its Engage computation was deleted while its sync waited in an ordered
  // key's chain): its next claim ends it failed with this reason, unsent,
  // and what waits behind it is released as after any final outcome
  // (engage-queries.ts, deleteComputation).
  // engage_state.erasures: regulation steps run so far; a stream commit
  // names the count it read with its cursor and is refused when a step ran
  // since (its page may hold an erased user's messages: a profile made of
  // them would outlive the erasure, and its syncs follow the delete).
  `
  ALTER TABLE deliveries ADD COLUMN cancelled TEXT;
  ALTER TABLE engage_state ADD COLUMN erasures INTEGER NOT NULL DEFAULT 0;
  `,
  // Ids stored before ingest replaced U+0000 with U+FFFD (storedId in
  // src/domain/normalize.ts): only SQLite could hold them (PostgreSQL text
  // refuses U+0000, and its columns always had U+FFFD). Everything that now
  // matches an id (deletion and suppression subjects, the deliveries
  // filters, profile lookups, Engage's identifiers, ordering keys) names it
  // with U+FFFD, so such a row was missed: a deletion of the user left their
  // old messages. Each column that held an id as sent gets the stored form:
  //  - messages.user_id and message_id (the in-memory de-duplication index
  //    is rebuilt from message_id; dedupe_keys is gone since version 3);
  //    message_keys' entries of those already indexed (seq <= indexed_seq)
  //    are deleted and inserted again from the new columns, as
  //    message-keys.ts writes them; later ones are indexed from the new
  //    columns by the next batch;
  //  - suppressions.user_id: a suppressed user's new messages (U+FFFD) were
  //    let through, and a lift named the new form and missed the row;
  //  - regulations.subject_ids (JSON, where U+0000 is written \u0000): a
  //    deletion still running erases what its subjects name;
  //  - profile_identifiers.identifier: Engage looks identifiers up in the
  //    new form;
  //  - delivery_tails.order_key and the sync_key of pending Engage syncs
  //    (deliveries.sync_key, read only while pending, through the partial
  //    index deliveries_engage_chain): a new delivery of the key waits for
  //    (or supersedes) the older ones of its key.
  // Message bodies are left as stored: every reader of an id in a body
  // names it through storedId, and a body is what receivers get.
  // switchyard_stored_id is storedId itself, registered by migrate():
  // SQLite's replace() cannot do it, as it returns its input unchanged
  // when the pattern starts with U+0000 (char(0) reads as '').
  // Where two stored ids become one in a primary key (the old form and one
  // sent since with U+FFFD, or two ids holding U+0000 in different places),
  // one row is kept, the one the current version would have written last:
  //  - suppressions: the newest (created_at), as a second suppression of a
  //    user replaces the first;
  //  - delivery_tails: the latest delivery (highest id), the one a new
  //    delivery of the key would wait for; the other chain goes on by its
  //    own after_id links;
  //  - profile_identifiers: the row already in the stored form, which
  //    Engage has been reading and writing since ingest made new messages
  //    U+FFFD; the old form's row goes. If it named another profile, that
  //    profile keeps its other identifiers, and Engage merges the two when a
  //    message names both, as for any two profiles of one person.
  `
  CREATE TEMP TABLE nul_messages AS
    SELECT seq FROM messages WHERE instr(user_id, char(0)) > 0 OR instr(message_id, char(0)) > 0;
  DELETE FROM message_keys WHERE rowid IN (
    SELECT seq FROM nul_messages WHERE seq <= (SELECT indexed_seq FROM message_keys_state WHERE id = 1));
  UPDATE messages SET user_id = switchyard_stored_id(user_id), message_id = switchyard_stored_id(message_id)
    WHERE seq IN (SELECT seq FROM nul_messages);
  INSERT INTO message_keys (rowid, keys)
    SELECT seq, concat_ws(' ', CASE WHEN message_id <> '' THEN 'm' || hex(message_id) END, CASE WHEN user_id <> '' THEN 'u' || hex(user_id) END)
    FROM messages
    WHERE seq IN (SELECT seq FROM nul_messages WHERE seq <= (SELECT indexed_seq FROM message_keys_state WHERE id = 1))
      AND (message_id <> '' OR user_id <> '');
  DROP TABLE nul_messages;

  DELETE FROM suppressions WHERE (user_id, source_id) IN (
    SELECT user_id, source_id FROM (
      SELECT user_id, source_id, row_number() OVER (
        PARTITION BY switchyard_stored_id(user_id), source_id ORDER BY created_at DESC, instr(user_id, char(0)) > 0, user_id) AS n
      FROM suppressions
      WHERE switchyard_stored_id(user_id) IN (SELECT switchyard_stored_id(user_id) FROM suppressions WHERE instr(user_id, char(0)) > 0))
    WHERE n > 1);
  UPDATE suppressions SET user_id = switchyard_stored_id(user_id) WHERE instr(user_id, char(0)) > 0;

  UPDATE regulations SET
    subject_ids = (SELECT json_group_array(id) FROM (
      SELECT switchyard_stored_id(value) AS id, min(key) AS first FROM json_each(regulations.subject_ids) GROUP BY 1 ORDER BY first)),
    subject_count = (SELECT count(DISTINCT switchyard_stored_id(value)) FROM json_each(regulations.subject_ids))
    WHERE instr(subject_ids, '\\u0000') > 0;

  DELETE FROM profile_identifiers WHERE identifier IN (
    SELECT identifier FROM (
      SELECT identifier, row_number() OVER (
        PARTITION BY switchyard_stored_id(identifier) ORDER BY instr(identifier, char(0)) > 0, identifier) AS n
      FROM profile_identifiers
      WHERE switchyard_stored_id(identifier) IN (SELECT switchyard_stored_id(identifier) FROM profile_identifiers WHERE instr(identifier, char(0)) > 0))
    WHERE n > 1);
  UPDATE profile_identifiers SET identifier = switchyard_stored_id(identifier) WHERE instr(identifier, char(0)) > 0;

  DELETE FROM delivery_tails WHERE (scope, order_key) IN (
    SELECT scope, order_key FROM (
      SELECT scope, order_key, row_number() OVER (PARTITION BY scope, switchyard_stored_id(order_key) ORDER BY delivery_id DESC) AS n
      FROM delivery_tails
      WHERE switchyard_stored_id(order_key) IN (SELECT switchyard_stored_id(order_key) FROM delivery_tails WHERE instr(order_key, char(0)) > 0))
    WHERE n > 1);
  UPDATE delivery_tails SET order_key = switchyard_stored_id(order_key) WHERE instr(order_key, char(0)) > 0;

  UPDATE deliveries SET sync_key = switchyard_stored_id(sync_key)
    WHERE status = 'pending' AND sync_computation_id IS NOT NULL AND instr(sync_key, char(0)) > 0;
  `,
  // Replay times into the range the admin API takes since it checks them
  // (timeParam, src/admin/validate.ts: 1970-01-01T00:00:00.000Z to
  // 9999-12-31T23:59:59.999Z, 0 to 253402300799999 ms). Before, a from or to
  // of any number was stored (1e20 as a REAL here), and one past what a
  // JavaScript Date holds made the source's replay list answer 500 for
  // good. Clamped rather than ended or deleted: every message's receivedAt
  // lies within the range, so the replay selects the same messages and
  // runs (or ended) as it did, and the list shows the nearest time the API
  // takes. (A running one with a to far ahead still follows live traffic
  // until it is cancelled, as before.) PostgreSQL's twin does the same.
  `
  UPDATE replays SET from_at = max(0, min(from_at, 253402300799999)), to_at = max(0, min(to_at, 253402300799999))
    WHERE from_at NOT BETWEEN 0 AND 253402300799999 OR to_at NOT BETWEEN 0 AND 253402300799999;
  `,
  // A replay's range by receivedAt (src/store/sqlite/replay-queries.ts):
  // where it starts and ends in seq order is read from the entries of its
  // window alone, exactly, whatever the clock did. Before, a replay read
  // the source from its first message (a hostile-client review: 18 s for a
  // window of 4 s on a source of 60,000). received_at grows with time, so
  // inserts append to each source's end of the index, as messages_by_source
  // does (not random pages as an id's index would). Built inside the
  // migration's transaction: on a large store, writes wait while it is built.
  `
  CREATE INDEX messages_by_source_time ON messages (source_id, received_at);
  `,
  // Suppressions are read by what changed, not whole: each node held them
  // in memory and read every row again on any config change (renaming a
  // source blocked the event loop for seconds with 55,000 suppressed
  // users). Each row gets a seq, the highest so far each time it changes
  // (written as max(seq) + 1 under SQLite's single writer), and a lift keeps
  // the row, marked lifted with a new seq, so that a reader following the
  // seqs sees removals too (see SuppressionList). The rows there already are
  // numbered in the order they were written.
  `
  ALTER TABLE suppressions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE suppressions ADD COLUMN lifted INTEGER NOT NULL DEFAULT 0;
  UPDATE suppressions SET seq = numbered.n
    FROM (SELECT user_id AS u, source_id AS s, row_number() OVER (ORDER BY created_at, user_id, source_id) AS n FROM suppressions) AS numbered
    WHERE user_id = numbered.u AND source_id = numbered.s;
  CREATE UNIQUE INDEX suppressions_by_seq ON suppressions (seq);
  `,
  // A request's source rows counted on its row, kept as its steps end, so
  // that the list of requests need not read them all: 151 requests over 997
  // sources made a 9 MB list that held the event loop for 2.9 s. And the
  // table is rebuilt with the ids last: SQLite reaches a column by walking
  // the overflow pages of every column before it, so the list's status and
  // times, stored after subject_ids (up to 5,000 ids of 1 KB), read all of
  // them (eleven such requests made a list of 164 take 1.7 s). With a rowid
  // now: a WITHOUT ROWID table keeps whole rows in its b-tree's inner pages
  // too, and a search through them reads each large row it passes.
  `
  CREATE TABLE regulations_rebuilt (
    id              TEXT PRIMARY KEY,
    regulation_type TEXT NOT NULL,
    subject_count   INTEGER NOT NULL,
    status          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    raw_seq_mark    INTEGER NOT NULL,
    source_count    INTEGER NOT NULL,
    pending_count   INTEGER NOT NULL,
    failed_count    INTEGER NOT NULL DEFAULT 0,
    source_ids      TEXT,
    subject_ids     TEXT NOT NULL
  );
  INSERT INTO regulations_rebuilt
    SELECT r.id, r.regulation_type, r.subject_count, r.status, r.created_at, r.updated_at, r.raw_seq_mark,
           coalesce(c.total, 0), coalesce(c.pending, 0), coalesce(c.failed, 0), r.source_ids, r.subject_ids
    FROM regulations r LEFT JOIN (
      SELECT regulation_id, count(*) AS total, sum(status = 'PENDING') AS pending, sum(status = 'FAILED') AS failed
      FROM regulation_sources GROUP BY regulation_id) AS c ON c.regulation_id = r.id;
  DROP TABLE regulations;
  ALTER TABLE regulations_rebuilt RENAME TO regulations;
  CREATE INDEX regulations_by_age ON regulations (created_at, id);
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Brings the schema to {@link SCHEMA_VERSION} (`upTo`: an older version, for
 * tests of an upgrade). Runs under an immediate transaction, so two
 * processes starting at once apply each version once.
 */
export function migrate(db: Database, upTo = SCHEMA_VERSION): void {
  // An id as ingest stores it, for the migration that rewrites older ones (see there).
  db.function('switchyard_stored_id', { deterministic: true }, (id: unknown) => (typeof id === 'string' ? storedId(id) : id));
  db.transaction(() => {
    const current = db.pragma('user_version', { simple: true }) as number;
    if (current > SCHEMA_VERSION) {
      throw new SchemaTooNewError(current, SCHEMA_VERSION);
    }
    for (let version = current; version < upTo; version++) {
      db.exec(MIGRATIONS[version]!);
    }
    if (current < upTo) db.pragma(`user_version = ${upTo}`);
  }).immediate();
}
