import { type JsonObject } from './message.js';
import { type CallContext, prepareCall, stampCall } from './normalize.js';

/** A sample event of a test run (`POST /transformations/test`, `POST /functions/test`), as the code gets it. */
export interface TestEvent {
  /** The event as given, with {@link filled} added: what the code runs on. */
  readonly event: JsonObject;
  /** The fields ingest would have added that the event lacked (missing, null or ""), with the values given them. */
  readonly filled: JsonObject;
  /** Why ingest would have rejected the event, so that no code would ever see it; the test runs it anyway. */
  readonly ingestRejects?: string;
}

/** What a test run takes of ingest's context: the time it stands for and how to make ids. */
export type TestCallContext = Pick<CallContext, 'receivedAt' | 'receivedAtIso' | 'newMessageId'>;

/**
 * An event as ingest would have stored it from a Tracking API call: sample
 * events are often written by hand, and code that reads `messageId` or
 * `timestamp` (the docs' split example, `messageId + ':' + i`) got
 * `undefined` in a test though never live. Fields the event has are kept
 * as given (an event copied from the debugger keeps its times; ingest would
 * stamp a new receivedAt); only the missing ones are filled, as
 * {@link prepareCall} fills them. No `context.ip`: a test has no client
 * request. An event ingest would reject is stamped alike and says why.
 */
export function asIngested(raw: JsonObject, ctx: TestCallContext): TestEvent {
  const call: CallContext = { ...ctx, ip: undefined, pathType: undefined };
  const prepared = prepareCall(raw, call);
  let stored: JsonObject;
  if (prepared.ok) stored = prepared.message;
  else {
    stored = Object.assign({}, raw);
    stampCall(stored, undefined, call);
  }
  const filled: JsonObject = {};
  for (const [key, value] of Object.entries(stored)) {
    const given = raw[key];
    if (given === undefined || given === null || given === '') filled[key] = value;
  }
  return { event: Object.assign({}, raw, filled), filled, ...(prepared.ok ? {} : { ingestRejects: prepared.reason }) };
}
