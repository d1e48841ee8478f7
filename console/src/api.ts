/**
 * The console's only way to the admin API: same origin, the admin token as a
 * bearer header (never in a URL), kept in sessionStorage so it goes when the
 * tab does.
 */
const TOKEN_KEY = 'switchyard.adminToken';
const API = '/admin/v1';

export function storedToken(): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

export function storeToken(token: string | undefined): void {
  if (token === undefined) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** An admin API error answer: `{"error": {code, message}}`, or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }

  /**
   * The body field a validation message starts with, e.g.
   * `settings.webhooks[1].url` from "settings.webhooks[1].url is not a valid
   * URL", so a form can show the message beside that field.
   */
  get field(): string | undefined {
    return /^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\d+\])*/.exec(this.message)?.[0];
  }
}

/** Called when the API answers 401: the token was wrong or was rotated. */
let onUnauthorized: () => void = () => undefined;
export function whenUnauthorized(listener: () => void): void {
  onUnauthorized = listener;
}

function headers(token: string, json: boolean): Record<string, string> {
  return json ? { authorization: `Bearer ${token}`, 'content-type': 'application/json' } : { authorization: `Bearer ${token}` };
}

async function errorOf(response: Response): Promise<ApiError> {
  try {
    const body = (await response.json()) as { error?: { code?: string; message?: string } };
    return new ApiError(response.status, body.error?.code ?? 'error', body.error?.message ?? response.statusText);
  } catch {
    return new ApiError(response.status, 'error', `${response.status} ${response.statusText}`);
  }
}

/** Calls the admin API with a given token (sign-in checks it this way). */
export async function callWith<T>(token: string, method: string, route: string, body?: unknown): Promise<T> {
  let response: Response;
  try {
    response = await fetch(API + route, {
      method,
      headers: headers(token, body !== undefined),
      body: body === undefined ? null : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch (error) {
    throw new ApiError(0, 'network', `the server did not answer (${String(error)})`);
  }
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

/** Calls the admin API with the signed-in token; a 401 signs out. */
export async function api<T>(method: string, route: string, body?: unknown): Promise<T> {
  const token = storedToken();
  if (token === undefined) {
    onUnauthorized();
    throw new ApiError(401, 'unauthorized', 'not signed in');
  }
  try {
    return await callWith<T>(token, method, route, body);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) onUnauthorized();
    throw error;
  }
}

export interface StreamEvent {
  readonly id: string | undefined;
  readonly data: string;
  /** The text of a comment-only block (`: skipped 120 messages; …`); data is then empty. */
  readonly comment?: string;
}

/**
 * Reads a Server-Sent Events route with fetch, since EventSource cannot send
 * the Authorization header and the token must not go in the query string.
 * Resolves when the stream ends or `signal` aborts; `onEvents` gets every
 * event parsed from one network chunk at once, so a burst is one update.
 */
export async function readEventStream(
  route: string,
  lastEventId: string | undefined,
  signal: AbortSignal,
  onEvents: (events: StreamEvent[]) => void,
  onOpen: () => void = () => undefined,
): Promise<void> {
  const token = storedToken();
  if (token === undefined) throw new ApiError(401, 'unauthorized', 'not signed in');
  const streamHeaders: Record<string, string> = { ...headers(token, false), accept: 'text/event-stream' };
  if (lastEventId !== undefined) streamHeaders['last-event-id'] = lastEventId;
  const response = await fetch(API + route, { headers: streamHeaders, signal, cache: 'no-store' });
  if (response.status === 401) onUnauthorized();
  if (!response.ok) throw await errorOf(response);
  if (response.body === null) return;
  onOpen();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      const blocks = buffer.split('\n\n');
      buffer = blocks.pop() ?? '';
      const events: StreamEvent[] = [];
      for (const block of blocks) {
        let id: string | undefined;
        let comment: string | undefined;
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('id:')) id = line.slice(3).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
          else if (line.startsWith(':')) comment = line.slice(1).trim();
        }
        if (data.length > 0) events.push({ id, data: data.join('\n') });
        else if (comment !== undefined) events.push({ id, data: '', comment });
      }
      if (events.length > 0) onEvents(events);
    }
  } finally {
    reader.releaseLock();
  }
}

// --- the admin API's shapes, as the console uses them ------------------------------------

export interface Source {
  readonly id: string;
  readonly name: string;
  readonly writeKey: string;
  readonly enabled: boolean;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface Receiver {
  url: string;
  headers?: Record<string, string>;
  maxRequestsPerSecond?: number;
}

export interface WebhookDestination {
  readonly sourceId: string;
  readonly enabled: boolean;
  readonly settings: {
    webhooks: Receiver[];
    sharedSecret?: string;
    standardWebhooks?: { secret: string; previousValidUntil?: string };
    transformation?: TransformationRef;
    ordering?: 'user';
  };
  readonly filters: unknown[];
  readonly updatedAt: string;
}

export interface DebuggerEntry {
  readonly seq: number;
  readonly receivedAt: string;
  readonly type: string | null;
  readonly status: string;
  readonly reason?: string;
  readonly message: unknown;
  /** The transformation that ran on it (recorded by the transform stage, after the message is stored). */
  readonly transformation?: { readonly id: string; readonly name: string; readonly version: number; readonly logs: readonly string[] };
}

export interface Delivery {
  readonly id: number;
  readonly sourceId: string;
  /** `webhooks`, or `function` with `functionId`. */
  readonly destination: string;
  readonly functionId?: string;
  readonly messageSeq: number;
  readonly messageId?: string;
  /** The message's call type, a track's event and its user, while the message is stored. */
  readonly type?: string;
  readonly event?: string;
  readonly userId?: string;
  readonly anonymousId?: string;
  readonly status: 'pending' | 'succeeded' | 'failed';
  readonly attemptCount: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly nextAttemptAt?: string;
  readonly lastError?: string;
  /** Pending behind this earlier delivery of the same user (ordered delivery, replays). */
  readonly waitingFor?: number;
}

export interface Attempt {
  readonly at: string;
  readonly url: string;
  readonly statusCode?: number;
  readonly error?: string;
  readonly durationMs: number;
  /** The receiver's answer: two headers and the first 1 KB of the body. */
  readonly response?: { readonly contentType?: string; readonly retryAfter?: string; readonly body: string; readonly bodyTruncated?: boolean };
  /** A function destination's call (its `url` is then `function:<id>`). */
  readonly function?: FunctionRun;
}

/** One `fetch` a function made. */
export interface FunctionFetch {
  readonly method: string;
  readonly url: string;
  readonly status?: number;
  readonly error?: string;
  readonly durationMs: number;
}

export type FunctionOutcome = 'delivered' | 'retry' | 'failed';

/** What one call of a function did, as an attempt records it. */
export interface FunctionRun {
  readonly version: number;
  readonly outcome: FunctionOutcome;
  readonly errorType?: string;
  readonly fetches: readonly FunctionFetch[];
  readonly logs: readonly string[];
}

/** A function destination; `code` on a single read only. Secret-looking settings read as `********`. */
export interface FunctionDestination {
  readonly id: string;
  readonly sourceId: string;
  readonly name: string;
  readonly version: number;
  readonly enabled: boolean;
  readonly settings: Record<string, unknown>;
  readonly maxRequestsPerSecond?: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly code?: string;
}

/** One event of `POST /functions/test`. */
export interface FunctionTestResult {
  readonly input: unknown;
  /** What the event lacked that ingest would have filled (messageId, receivedAt, timestamp…), as the code got it. */
  readonly filled?: Readonly<Record<string, unknown>>;
  /** Why ingest would have refused the event (the test runs it anyway). */
  readonly ingestRejects?: string;
  readonly outcome: FunctionOutcome;
  readonly error?: string;
  readonly errorType?: string;
  readonly fetches: readonly FunctionFetch[];
  readonly logs: readonly string[];
  readonly durationMs: number;
}

export interface Regulation {
  readonly id: string;
  readonly regulationType: string;
  readonly subjectCount: number;
  readonly sourceIds: string[] | null;
  readonly status: string;
  readonly createdAt: string;
  /** In a list, the first 20 by source id; `sourceCounts` counts them all. */
  readonly sources: Array<{ sourceId: string; status: string; error?: string }>;
  readonly sourceCounts: { total: number; pending: number; finished: number; failed: number };
}

export type ComputationKind = 'trait' | 'audience';

/** A computed trait or an audience (`size` for audiences only). */
export interface Computation {
  readonly id: string;
  readonly name: string;
  readonly key: string;
  readonly definition: unknown;
  readonly destinations: string[];
  readonly status: 'computing' | 'live';
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly size?: number;
}

export interface AudienceMember {
  readonly profileId: string;
  readonly userId?: string;
  readonly anonymousId?: string;
  readonly since: string;
}

export interface Profile {
  readonly id: string;
  readonly identifiers: string[];
  readonly traits: Record<string, unknown>;
  readonly computedTraits: Record<string, unknown>;
  readonly audiences: string[];
}

export interface ProfileEvent {
  readonly seq: number;
  readonly sourceId: string;
  readonly type: string | null;
  readonly receivedAt: string;
  readonly message: unknown;
}

/** `settings.transformation` of a Webhooks destination: no version means the latest. */
export interface TransformationRef {
  readonly id: string;
  readonly version?: number;
}

export interface TransformationSummary {
  readonly id: string;
  readonly name: string;
  /** The latest version. */
  readonly version: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface TransformationVersion {
  readonly id: string;
  readonly name: string;
  readonly version: number;
  readonly code: string;
  readonly createdAt: string;
}

export interface TransformationTestResult {
  readonly input: unknown;
  /** What the event lacked that ingest would have filled (messageId, receivedAt, timestamp…), as the code got it. */
  readonly filled?: Readonly<Record<string, unknown>>;
  /** Why ingest would have refused the event (the test runs it anyway). */
  readonly ingestRejects?: string;
  readonly output?: unknown;
  readonly dropped?: true;
  readonly error?: string;
  readonly logs: readonly string[];
}

/**
 * A destination's settings as read, ready to PUT back unchanged: the masks
 * stand for the stored secrets, and only `secret` of `standardWebhooks` goes
 * back (the API refuses the read-only `previousValidUntil` of a rotation).
 */
export function settingsToPutBack(settings: WebhookDestination['settings']): WebhookDestination['settings'] {
  const { standardWebhooks, ...rest } = settings;
  return { ...rest, ...(standardWebhooks !== undefined && { standardWebhooks: { secret: standardWebhooks.secret } }) };
}
