import { MAX_ID_BYTES } from '../domain/normalize.js';
import { MAX_SUPPRESSION_PAIRS } from '../domain/regulation.js';
import { MAX_REPLAY_AHEAD_MS, MAX_RUNNING_REPLAYS } from '../domain/replay.js';
import { MAX_DEBUGGER_STREAMS } from './debugger-stream.js';
import { LIST_SOURCES } from './regulation-admin.js';
import { type JsonSchema, documented } from '../route-documentation.js';
import { idParams, ok, stringList, time, timeInput } from './schema-parts.js';

/**
 * The schemas of the admin routes of sources, Webhooks destinations,
 * deliveries, deletions, the debugger, replays and the overview: Fastify
 * validates request bodies with them before a handler runs (the admin
 * services then check what JSON Schema cannot say, naming the field), and
 * the OpenAPI document is built from the same objects. Times are ISO-8601
 * strings. The later route groups (Engage, transformations, function
 * destinations, tracking plans) keep their schemas beside their routes.
 */


const source: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    writeKey: { type: 'string' },
    enabled: { type: 'boolean' },
    createdAt: time,
    updatedAt: time,
  },
};

const condition: JsonSchema = {
  type: 'object',
  description: '{"field": <dotted path>, "op": "=|!=|>|>=|<|<=|contains|exists", "value"?} or {"and": […]}, {"or": […]}, {"not": …}',
};

const receiver: JsonSchema = {
  type: 'object',
  properties: {
    url: { type: 'string', description: 'A full http:// or https:// URL' },
    headers: { type: 'object', additionalProperties: { type: 'string' } },
    maxRequestsPerSecond: { type: 'integer', minimum: 1, maximum: 10_000 },
  },
  required: ['url'],
};

const webhooks: JsonSchema = {
  type: 'object',
  properties: {
    enabled: { type: 'boolean' },
    settings: {
      type: 'object',
      properties: {
        webhooks: { type: 'array', items: receiver, description: '1 to 5 receivers' },
        sharedSecret: { type: 'string', description: 'Key of the X-Signature HMAC-SHA1; shown masked' },
        standardWebhooks: { type: 'object', properties: { secret: { type: 'string' } }, description: '{} generates a whsec_ secret' },
        ordering: {
          type: 'string',
          enum: ['none', 'user'],
          description: '"user": each user\'s (userId, else anonymousId) messages reach each receiver one at a time, in processing order; default "none"',
        },
      },
    },
    filters: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          title: { type: 'string' },
          if: condition,
          action: { description: '"drop", "keep" or {"dropFields": [paths]}' },
        },
        required: ['title', 'action'],
      },
    },
  },
};

const attempt: JsonSchema = {
  type: 'object',
  properties: {
    at: time,
    url: { type: 'string' },
    statusCode: { type: 'integer' },
    error: { type: 'string' },
    durationMs: { type: 'integer' },
    response: {
      type: 'object',
      description: "The receiver's answer: its content-type and retry-after headers and the first 1 KB of its body",
      properties: { contentType: { type: 'string' }, retryAfter: { type: 'string' }, body: { type: 'string' }, bodyTruncated: { type: 'boolean' } },
    },
    function: {
      type: 'object',
      description: "A function destination's call (the attempt's url is function:<id>)",
      properties: {
        version: { type: 'integer' },
        outcome: { enum: ['delivered', 'retry', 'failed'] },
        errorType: { type: 'string' },
        fetches: {
          type: 'array',
          items: { type: 'object', properties: { method: { type: 'string' }, url: { type: 'string' }, status: { type: 'integer' }, error: { type: 'string' }, durationMs: { type: 'number' } } },
        },
        logs: { type: 'array', items: { type: 'string' } },
      },
    },
  },
};

const delivery: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    sourceId: { type: 'string' },
    destination: { enum: ['webhooks', 'function'] },
    functionId: { type: 'string', description: "The function destination's id, when destination is function" },
    messageSeq: { type: 'integer' },
    messageId: { type: 'string' },
    type: { type: 'string', description: "The message's call type (absent once the message is gone, as are event, userId and anonymousId)" },
    event: { type: 'string', description: "A track's event" },
    userId: { type: 'string' },
    anonymousId: { type: 'string' },
    status: { enum: ['pending', 'succeeded', 'failed'] },
    attemptCount: { type: 'integer' },
    createdAt: time,
    updatedAt: time,
    nextAttemptAt: time,
    firstAttemptAt: time,
    lastError: { type: 'string' },
    replayId: { type: 'string' },
    waitingFor: { type: 'integer', description: 'pending behind this delivery of the same user (ordered delivery or a replay)' },
  },
};

const regulation: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    regulationType: { enum: ['DELETE_ONLY', 'SUPPRESS_WITH_DELETE', 'SUPPRESS_ONLY', 'UNSUPPRESS'] },
    subjectType: { const: 'USER_ID' },
    subjectIds: { type: 'array', items: { type: 'string' } },
    subjectCount: { type: 'integer' },
    sourceIds: { type: ['array', 'null'], items: { type: 'string' } },
    status: { type: 'string' },
    createdAt: time,
    updatedAt: time,
    sources: {
      type: 'array',
      description: `Status per source, by source id: in a list the first ${LIST_SOURCES}, reading one a page (sourcesAfter, sourcesLimit); sourceCounts counts them all`,
      items: { type: 'object', properties: { sourceId: { type: 'string' }, status: { type: 'string' }, error: { type: 'string' } } },
    },
    sourceCounts: {
      type: 'object',
      properties: { total: { type: 'integer' }, pending: { type: 'integer' }, finished: { type: 'integer' }, failed: { type: 'integer' } },
    },
    nextSourcesAfter: { type: 'string', description: 'Reading one: more sources follow; pass it as sourcesAfter' },
  },
};

const replay: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    sourceId: { type: 'string' },
    from: time,
    to: time,
    receivers: stringList('Receiver URLs and function destination ids; absent: the Webhooks destination, all'),
    types: stringList('Message types; absent: all'),
    events: stringList('Track event names; absent: all'),
    status: { enum: ['running', 'done', 'cancelled'] },
    queued: { type: 'integer' },
    delivered: { type: 'integer' },
    failed: { type: 'integer' },
    createdAt: time,
    updatedAt: time,
  },
};

const debuggerEntry: JsonSchema = {
  type: 'object',
  properties: {
    seq: { type: 'integer' },
    receivedAt: time,
    type: { type: ['string', 'null'] },
    status: { enum: ['accepted', 'rejected', 'duplicate', 'suppressed', 'filtered', 'blocked'] },
    reason: { type: 'string' },
    message: { type: 'object' },
  },
};

export const SOURCE_SCHEMAS = documented({
  create: {
    summary: 'Create a source',
    tags: ['sources'],
    body: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
    'x-responses': { 201: ok('The new source with its write key', source) },
    'x-errors': ['invalid_request'],
  },
  list: {
    summary: 'List sources',
    tags: ['sources'],
    'x-responses': { 200: ok('Every source', { type: 'object', properties: { sources: { type: 'array', items: source } } }) },
  },
  get: { summary: 'Read a source', tags: ['sources'], params: idParams, 'x-responses': { 200: ok('The source', source) }, 'x-errors': ['not_found'] },
  update: {
    summary: 'Rename, enable or disable a source',
    tags: ['sources'],
    params: idParams,
    body: { type: 'object', properties: { name: { type: 'string' }, enabled: { type: 'boolean' } } },
    'x-responses': { 200: ok('The source', source) },
    'x-errors': ['invalid_request', 'not_found'],
  },
  delete: {
    summary: 'Delete a source with everything stored for it',
    tags: ['sources'],
    params: idParams,
    'x-responses': { 204: ok('Deleted') },
    'x-errors': ['not_found'],
  },
});

export const WEBHOOK_SCHEMAS = documented({
  put: {
    summary: "Set the source's Webhooks destination",
    tags: ['webhooks'],
    params: idParams,
    body: webhooks,
    'x-responses': { 200: ok('The destination, secrets masked', webhooks) },
    'x-errors': ['invalid_request', 'invalid_receivers', 'private_receiver', 'invalid_filter', 'not_found'],
    'x-validation-codes': { settings: 'invalid_receivers', filters: 'invalid_filter' },
  },
  get: {
    summary: "Read the source's Webhooks destination (secrets masked)",
    tags: ['webhooks'],
    params: idParams,
    'x-responses': { 200: ok('The destination', webhooks) },
    'x-errors': ['not_found'],
  },
  delete: {
    summary: "Remove the source's Webhooks destination (its pending deliveries fail, saying why)",
    tags: ['webhooks'],
    params: idParams,
    'x-responses': { 204: ok('Removed') },
    'x-errors': ['not_found'],
  },
  standardSecret: {
    summary: 'Read the Standard Webhooks secret',
    tags: ['webhooks'],
    params: idParams,
    'x-responses': { 200: ok('The secret', { type: 'object', properties: { secret: { type: 'string' } } }) },
    'x-errors': ['not_found', 'standard_webhooks_not_enabled'],
  },
  test: {
    summary: 'Send a test message to every receiver now and show their answers (nothing is stored or retried)',
    tags: ['webhooks'],
    params: idParams,
    'x-responses': {
      200: ok('One answer per receiver', {
        type: 'object',
        properties: {
          answers: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                url: { type: 'string' },
                statusCode: { type: 'integer' },
                error: { type: 'string' },
                durationMs: { type: 'integer' },
                body: { type: 'string', description: 'The first 2 KB of the answer' },
                bodyTruncated: { type: 'boolean' },
              },
            },
          },
        },
      }),
    },
    'x-errors': ['not_found'],
  },
  rotateStandardSecret: {
    summary: 'Rotate the Standard Webhooks secret; the old one keeps signing for overlapSeconds',
    tags: ['webhooks'],
    params: idParams,
    body: { type: 'object', properties: { overlapSeconds: { type: 'integer', minimum: 0, default: 86_400 } } },
    'x-body-optional': true,
    'x-responses': { 200: ok('The new secret', { type: 'object', properties: { secret: { type: 'string' }, previousValidUntil: time } }) },
    'x-errors': ['invalid_request', 'not_found', 'standard_webhooks_not_enabled'],
  },
});

export const DELIVERY_SCHEMAS = documented({
  list: {
    summary: 'List deliveries, newest first',
    tags: ['deliveries'],
    querystring: {
      type: 'object',
      properties: {
        sourceId: { type: 'string' },
        status: { enum: ['pending', 'succeeded', 'failed'] },
        limit: { type: 'string', description: 'An integer, 1 to 1000' },
        beforeId: { type: 'string', description: 'Only deliveries with a lower id (paging)' },
        // Bounded in bytes by the service, as ingest bounds ids: JSON Schema's maxLength counts characters.
        userId: { type: 'string', description: `Only deliveries of messages with this userId (exact): 1 to ${MAX_ID_BYTES} bytes of UTF-8` },
        messageId: { type: 'string', description: `Only deliveries of messages with this messageId (exact): 1 to ${MAX_ID_BYTES} bytes of UTF-8` },
      },
    },
    'x-nul-mapped': ['userId', 'messageId'],
    'x-responses': { 200: ok('Deliveries', { type: 'object', properties: { deliveries: { type: 'array', items: delivery } } }) },
    'x-errors': ['invalid_request'],
  },
  get: {
    summary: 'One delivery with every attempt',
    tags: ['deliveries'],
    params: idParams,
    'x-responses': {
      200: ok('The delivery', {
        ...delivery,
        properties: {
          ...(delivery['properties'] as object),
          message: { type: 'object', description: 'The message as stored (before any transformation); absent once it is gone' },
          attempts: { type: 'array', items: attempt },
          heldBy: {
            type: 'array',
            description:
              "A pending delivery's targets whose circuit breaker on this node (each node has its own) holds them: deliveries to them wait in the queue with no attempt recorded. Absent when none does",
            items: {
              type: 'object',
              properties: {
                reason: { enum: ['circuit-open'] },
                target: { type: 'string', description: "The receiver's origin (scheme, host, port) or function:<id>" },
                state: { enum: ['open', 'half-open'], description: 'open: held until `until`, then the next delivery goes as a probe; half-open: that probe is in flight' },
                until: time,
              },
            },
          },
        },
      }),
    },
    'x-errors': ['invalid_request', 'not_found'],
  },
  retry: {
    summary: 'Put a failed delivery back in the queue',
    tags: ['deliveries'],
    params: idParams,
    'x-responses': { 200: ok('How many were requeued', { type: 'object', properties: { requeued: { type: 'integer' } } }) },
    'x-errors': ['invalid_request', 'not_found', 'delivery_not_failed'],
  },
  retryAll: {
    summary: 'Put every failed delivery (of a source, failed since a time) back in the queue',
    tags: ['deliveries'],
    body: { type: 'object', properties: { sourceId: { type: 'string' }, since: timeInput } },
    'x-body-optional': true,
    'x-responses': { 200: ok('How many were requeued', { type: 'object', properties: { requeued: { type: 'integer' } } }) },
    'x-errors': ['invalid_request'],
  },
});

export const REGULATION_SCHEMAS = documented({
  create: {
    summary: 'Request a deletion or suppression',
    tags: ['regulations'],
    body: {
      type: 'object',
      properties: {
        regulationType: { enum: ['DELETE_ONLY', 'SUPPRESS_WITH_DELETE', 'SUPPRESS_ONLY', 'UNSUPPRESS'] },
        subjectType: { const: 'USER_ID' },
        subjectIds: {
          type: 'array',
          minItems: 1,
          maxItems: 5_000,
          // Bounded in bytes by the service, as ingest bounds userIds: JSON Schema's maxLength counts characters.
          items: { type: 'string', description: `A userId: 1 to ${MAX_ID_BYTES} bytes of UTF-8` },
        },
        sourceIds: {
          type: 'array',
          minItems: 1,
          maxItems: 1_000,
          items: { type: 'string' },
          description: `Omit to mean every source. A request that suppresses or lifts may name at most ${MAX_SUPPRESSION_PAIRS.toLocaleString('en-US')} subjectIds × sourceIds pairs, and an UNSUPPRESS without sourceIds may lift at most ${MAX_SUPPRESSION_PAIRS.toLocaleString('en-US')} suppressions in force (400 invalid_request beyond)`,
        },
      },
      required: ['regulationType', 'subjectType', 'subjectIds'],
    },
    'x-responses': { 201: ok('The request', { type: 'object', properties: { id: { type: 'string' }, status: { type: 'string' } } }) },
    'x-errors': ['invalid_request', 'not_found'],
  },
  list: {
    summary: 'List deletion and suppression requests',
    tags: ['regulations'],
    querystring: { type: 'object', properties: { status: { type: 'string' }, limit: { type: 'string' } } },
    'x-responses': { 200: ok('Requests', { type: 'object', properties: { regulations: { type: 'array', items: regulation } } }) },
    'x-errors': ['invalid_request'],
  },
  get: {
    summary: 'One request with its status per source',
    tags: ['regulations'],
    params: idParams,
    querystring: {
      type: 'object',
      properties: {
        sourcesAfter: { type: 'string', description: 'The sources after this id (a nextSourcesAfter)' },
        sourcesLimit: { type: 'string', description: 'Sources per page, 1 to 1000 (default 1000)' },
      },
    },
    'x-responses': { 200: ok('The request', regulation) },
    'x-errors': ['invalid_request', 'not_found'],
  },
});

export const DEBUGGER_SCHEMAS = documented({
  list: {
    summary: "The source's recent messages, newest first",
    tags: ['debugger'],
    params: idParams,
    querystring: { type: 'object', properties: { limit: { type: 'string' } } },
    'x-responses': { 200: ok('Messages', { type: 'object', properties: { messages: { type: 'array', items: debuggerEntry } } }) },
    'x-errors': ['invalid_request', 'not_found'],
  },
  get: {
    summary: "One of the source's messages by its seq (a delivery's messageSeq), as it is now",
    tags: ['debugger'],
    params: { type: 'object', properties: { id: { type: 'string' }, seq: { type: 'string' } }, required: ['id', 'seq'] },
    'x-responses': { 200: ok('The message', debuggerEntry) },
    'x-errors': ['invalid_request', 'not_found'],
  },
  stream: {
    summary: "The source's messages, live, as Server-Sent Events",
    tags: ['debugger'],
    params: idParams,
    description: `At most ${MAX_DEBUGGER_STREAMS} streams are open at once on one node; past that, 503 overloaded with Retry-After.`,
    'x-responses': { 200: ok('text/event-stream: one "message" event per stored message, its data shaped as a debugger entry') },
    'x-errors': ['invalid_request', 'not_found', 'overloaded'],
  },
});

export const REPLAY_SCHEMAS = documented({
  create: {
    summary: 'Re-deliver the stored messages of a time range',
    description: `The stored messages with from <= receivedAt < to. A replay runs until its to has passed, so to may be at most ${MAX_REPLAY_AHEAD_MS / 3_600_000} hours ahead of the server's time (400 invalid_request beyond). At most ${MAX_RUNNING_REPLAYS.perSource} replays of a source, and ${MAX_RUNNING_REPLAYS.total} in all, run at once (409 too_many_replays beyond: cancel one or wait for one to finish).`,
    tags: ['replays'],
    params: idParams,
    body: {
      type: 'object',
      properties: {
        from: { ...timeInput, description: 'Included: an ISO-8601 time, or epoch milliseconds; from 1970-01-01 (UTC)' },
        to: { ...timeInput, description: `Not included, at most ${MAX_REPLAY_AHEAD_MS / 3_600_000} hours ahead of the server's time: an ISO-8601 time, or epoch milliseconds` },
        receivers: stringList("Receiver URLs of the Webhooks destination and/or the source's function destination ids (fn_…); absent: the Webhooks destination's receivers, all"),
        types: stringList('Message types; absent: all'),
        events: stringList('Only tracks with these event names'),
      },
      required: ['from', 'to'],
    },
    'x-responses': { 201: ok('The replay, running', replay) },
    'x-errors': ['invalid_request', 'unknown_receiver', 'not_found', 'too_many_replays'],
  },
  list: {
    summary: "The source's replays, newest first",
    tags: ['replays'],
    params: idParams,
    querystring: { type: 'object', properties: { limit: { type: 'string' } } },
    'x-responses': { 200: ok('Replays', { type: 'object', properties: { replays: { type: 'array', items: replay } } }) },
    'x-errors': ['invalid_request', 'not_found'],
  },
  get: { summary: 'One replay with its counts', tags: ['replays'], params: idParams, 'x-responses': { 200: ok('The replay', replay) }, 'x-errors': ['not_found'] },
  cancel: {
    summary: 'Stop a replay: nothing more is sent',
    tags: ['replays'],
    params: idParams,
    'x-responses': { 200: ok('The replay, cancelled', replay) },
    'x-errors': ['not_found'],
  },
});

const perMinute: JsonSchema = { type: 'object', additionalProperties: { type: 'array', items: { type: 'integer' } } };

export const OVERVIEW_SCHEMAS = documented({
  traffic: {
    summary: 'Messages received per minute by status, and delivery rounds per minute by outcome (every node counted)',
    tags: ['overview'],
    querystring: { type: 'object', properties: { minutes: { type: 'string', description: 'How many minutes back, 1 to 1440 (default 60)' } } },
    'x-responses': {
      200: ok('One count per minute of the range, oldest first', {
        type: 'object',
        properties: {
          from: time,
          to: time,
          minutes: { type: 'array', items: time },
          messages: {
            type: 'object',
            properties: {
              total: { type: 'integer' },
              byStatus: {
                ...perMinute,
                description:
                  'accepted, rejected, duplicate, suppressed, filtered, blocked, failed: each message once, under the status the debugger shows (a transformation\'s drop counts as filtered, its failure as failed)',
              },
            },
          },
          deliveries: {
            type: 'object',
            properties: { total: { type: 'integer' }, byOutcome: { ...perMinute, description: 'succeeded, retried (will be tried again), failed (gave up)' } },
          },
        },
      }),
    },
    'x-errors': ['invalid_request'],
  },
});
