import { STATUS_CODES } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Dispatcher, request as undiciRequest } from 'undici';
import type { DebuggerEntry } from '../admin/debugger-admin.js';
import type { SourceView } from '../admin/source-admin.js';
import { ApiError, ERROR_CODES, type ErrorCode } from '../errors.js';
import type { ComputationKind } from '../store/store.js';
import type { AdminClient } from './admin-client.js';

/** A running server's admin API, as the flags and environment name it. */
export interface AdminServer {
  /** Scheme, host, port and any path prefix a proxy serves it under; no trailing slash, no credentials. */
  readonly url: string;
  readonly token: string;
  /** Where the URL came from, for messages: `--url` or `SWITCHYARD_URL`. */
  readonly urlSetting: string;
  /** Where the token came from, for messages: `--token` or `SWITCHYARD_ADMIN_TOKEN`. */
  readonly tokenSetting: string;
}

/** A failure of a call to the server: one line, exit code 1. */
export class ServerError extends Error {}

/** No admin call takes this long; a hung proxy or server should not hang the CLI forever. */
const REQUEST_TIMEOUT_MS = 60_000;
/** The largest answer read: admin answers are paged far below this. */
const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;
/** The longest debugger event the follower buffers (a stored message is at most 32 KB, its JSON a little more). */
const MAX_EVENT_BYTES = 1024 * 1024;
const RECONNECT_MS = 1_000;

type Query = Readonly<Record<string, unknown>>;

const COLLECTIONS: Record<ComputationKind, string> = { audience: '/audiences', trait: '/computed-traits' };

/**
 * The admin API of a running server behind the {@link AdminClient} methods:
 * the routes the console uses, answers unwrapped to what the services return.
 */
export function httpAdminClient(server: AdminServer): AdminClient {
  const call = <T>(method: string, route: string, options: { query?: Query; body?: unknown } = {}): Promise<T> => request<T>(server, method, route, options);
  const get = <T>(route: string, query?: Query): Promise<T> => call<T>('GET', route, { query });
  const remove = async (route: string): Promise<void> => {
    await call<undefined>('DELETE', route);
  };
  const at = (id: unknown): string => encodeURIComponent(String(id));
  const webhooks = (sourceId: string): string => `/sources/${at(sourceId)}/destinations/webhooks`;
  const functions = (sourceId: string): string => `/sources/${at(sourceId)}/destinations/functions`;
  const computation = (kind: ComputationKind, id: string): string => `${COLLECTIONS[kind]}/${at(id)}`;
  return {
    sources: {
      list: async () => (await get<{ sources: SourceView[] }>('/sources')).sources,
      create: (input) => call('POST', '/sources', { body: input }),
      get: (id) => get(`/sources/${at(id)}`),
      update: (id, input) => call('PATCH', `/sources/${at(id)}`, { body: input }),
      delete: (id) => remove(`/sources/${at(id)}`),
    },
    webhooks: {
      get: (sourceId) => get(webhooks(sourceId)),
      put: (sourceId, input) => call('PUT', webhooks(sourceId), { body: input }),
      delete: (sourceId) => remove(webhooks(sourceId)),
      standardSecret: (sourceId) => get(`${webhooks(sourceId)}/standard-webhooks/secret`),
      rotateStandardSecret: (sourceId, input) => call('POST', `${webhooks(sourceId)}/standard-webhooks/rotate`, { body: input }),
    },
    deliveries: {
      list: (query) => get('/deliveries', query),
      get: (id) => get(`/deliveries/${at(id)}`),
      retry: (id) => call('POST', `/deliveries/${at(id)}/retry`),
      retryAll: (input) => call('POST', '/deliveries/retry', { body: input }),
    },
    replays: {
      create: (sourceId, input) => call('POST', `/sources/${at(sourceId)}/replays`, { body: input }),
      list: (sourceId, query) => get(`/sources/${at(sourceId)}/replays`, query),
      get: (id) => get(`/replays/${at(id)}`),
      cancel: (id) => call('POST', `/replays/${at(id)}/cancel`),
    },
    engage: {
      list: (kind) => get(COLLECTIONS[kind]),
      create: (kind, input) => call('POST', COLLECTIONS[kind], { body: input }),
      get: (kind, id) => get(computation(kind, id)),
      update: (kind, id, input) => call('PATCH', computation(kind, id), { body: input }),
      remove: (kind, id) => remove(computation(kind, id)),
      members: (id, query) => get(`/audiences/${at(id)}/members`, query),
      profile: (identifier, query) => get(`/profiles/${at(identifier)}`, query),
      events: (identifier, query) => get(`/profiles/${at(identifier)}/events`, query),
    },
    debugger: {
      list: (sourceId, query) => get(`/sources/${at(sourceId)}/debugger`, query),
      follow: (sourceId, afterSeq, print, signal) => followStream(server, `/sources/${at(sourceId)}/debugger/stream`, afterSeq, print, signal),
    },
    trackingPlans: {
      get: (sourceId) => get(`/sources/${at(sourceId)}/tracking-plan`),
      put: (sourceId, input) => call('PUT', `/sources/${at(sourceId)}/tracking-plan`, { body: input }),
      delete: (sourceId) => remove(`/sources/${at(sourceId)}/tracking-plan`),
      violations: (sourceId, query) => get(`/sources/${at(sourceId)}/tracking-plan/violations`, query),
      observedSchema: (sourceId, query) => get(`/sources/${at(sourceId)}/schema`, query),
      draftFromSchema: (sourceId, query) => call('POST', `/sources/${at(sourceId)}/tracking-plan/from-schema`, { query }),
    },
    transformations: {
      list: () => get('/transformations'),
      create: (input) => call('POST', '/transformations', { body: input }),
      update: (id, input) => call('PUT', `/transformations/${at(id)}`, { body: input }),
      get: (id) => get(`/transformations/${at(id)}`),
      getVersion: (id, version) => get(`/transformations/${at(id)}/versions/${at(version)}`),
      delete: (id) => remove(`/transformations/${at(id)}`),
      test: (input) => call('POST', '/transformations/test', { body: input }),
    },
    functions: {
      list: (sourceId) => get(functions(sourceId)),
      create: (sourceId, input) => call('POST', functions(sourceId), { body: input }),
      get: (sourceId, id) => get(`${functions(sourceId)}/${at(id)}`),
      update: (sourceId, id, input) => call('PUT', `${functions(sourceId)}/${at(id)}`, { body: input }),
      delete: (sourceId, id) => remove(`${functions(sourceId)}/${at(id)}`),
      test: (input) => call('POST', '/functions/test', { body: input }),
    },
  };
}

function adminUrl(server: AdminServer, route: string, query: Query = {}): URL {
  const url = new URL(`${server.url}/admin/v1${route}`);
  // The CLI passes on the strings it was given; anything else goes as its JSON (a number as itself).
  for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, typeof value === 'string' ? value : JSON.stringify(value));
  return url;
}

/** A server's answer as the CLI reads it: status, where a redirect points, and the body still to read (bounded by the reader). */
interface ServerAnswer {
  readonly status: number;
  readonly statusText: string;
  readonly ok: boolean;
  /** The `Location` of a redirect, which is never followed. */
  readonly location: string | undefined;
  readonly body: Dispatcher.ResponseData['body'];
}

/**
 * The token goes in the Authorization header only: never in the URL, never in a message.
 *
 * undici's `request`, not `fetch`: `fetch` refuses the ports browsers block
 * (6000, 6665-6669, …), on which a server may well run (`PORT=6000`), and
 * this is the user's own server, not a page's request. Like `fetch` here, it
 * verifies TLS certificates (undici's defaults) and follows no redirect (a
 * redirect would carry the token to wherever it points): a 3xx is answered
 * as it is. Bounded by `signal` and by the reader of its body.
 */
async function send(server: AdminServer, method: string, url: URL, init: { body?: unknown; headers?: Record<string, string>; signal: AbortSignal }): Promise<ServerAnswer> {
  try {
    const answer = await undiciRequest(url, {
      method,
      headers: {
        authorization: `Bearer ${server.token}`,
        ...(init.body !== undefined && { 'content-type': 'application/json' }),
        ...init.headers,
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      signal: init.signal,
    });
    const location = answer.headers['location'];
    return {
      status: answer.statusCode,
      statusText: STATUS_CODES[answer.statusCode] ?? '',
      ok: answer.statusCode >= 200 && answer.statusCode < 300,
      location: Array.isArray(location) ? location[0] : location,
      body: answer.body,
    };
  } catch (error) {
    throw unreachable(server, error);
  }
}

async function request<T>(server: AdminServer, method: string, route: string, options: { query?: Query; body?: unknown }): Promise<T> {
  const signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  const response = await send(server, method, adminUrl(server, route, options.query), { body: options.body, signal });
  let text: string;
  try {
    text = await readBounded(response, MAX_RESPONSE_BYTES);
  } catch (error) {
    if (error instanceof ServerError) throw error;
    throw unreachable(server, error);
  }
  if (!response.ok) throw refusal(server, response, text);
  if (text === '') return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ServerError(`the server at ${server.url} (${server.urlSetting}) answered ${response.status} with something other than JSON: is it a Switchyard server?`);
  }
}

/** One line for an answer other than 2xx: the API's own {error: {code, message}} when it has one. */
function refusal(server: AdminServer, response: ServerAnswer, text: string): ServerError | ApiError {
  const where = `the server at ${server.url} (${server.urlSetting})`;
  if (response.status === 401) {
    return new ServerError(`${where} refused the admin token (401): set ${server.tokenSetting} to the server's admin token`);
  }
  if (response.status >= 300 && response.status < 400) {
    const location = (response.location ?? '').slice(0, 200);
    return new ServerError(`${where} answered ${response.status}, a redirect to ${JSON.stringify(location)}; redirects are not followed (they would carry the token): give the final URL`);
  }
  const body = parseError(text);
  // As an ApiError, the commands treat it as they treat the services' own (webhooks set: a missing destination is a new one).
  if (body !== undefined && Object.hasOwn(ERROR_CODES, body.code)) return new ApiError(body.code as ErrorCode, `${body.message} (${response.status} ${body.code})`);
  if (body !== undefined) return new ServerError(`${body.message} (${response.status} ${body.code})`);
  const excerpt = text.replace(/\s+/g, ' ').trim().slice(0, 200);
  return new ServerError(`${where} answered ${response.status} ${response.statusText}${excerpt === '' ? '' : `: ${excerpt}`} (is it a Switchyard server?)`);
}

function parseError(text: string): { code: string; message: string } | undefined {
  try {
    const error = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    if (typeof error?.code === 'string' && typeof error.message === 'string') return { code: error.code, message: error.message };
  } catch {
    // Not the admin API's JSON: described by the caller.
  }
  return undefined;
}

const REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused (is `switchyard serve` running there?)',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name did not resolve',
  ECONNRESET: 'the connection was reset',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  UND_ERR_SOCKET: 'the connection closed before an answer',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'its TLS certificate is self-signed',
  SELF_SIGNED_CERT_IN_CHAIN: 'its TLS certificate chain is self-signed',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'its TLS certificate cannot be verified',
  CERT_HAS_EXPIRED: 'its TLS certificate has expired',
  ERR_TLS_CERT_ALTNAME_INVALID: 'its TLS certificate is for another host name',
};

function unreachable(server: AdminServer, error: unknown): ServerError {
  const where = `the server at ${server.url} (${server.urlSetting})`;
  const name = (error as { name?: unknown }).name;
  if (name === 'TimeoutError') return new ServerError(`${where} did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`);
  // undici's own errors carry their code; a `fetch`-style error carries it in its cause.
  const own = error as { code?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } };
  const detail = typeof own.code === 'string' ? own : (own.cause ?? own);
  const code = typeof detail.code === 'string' ? detail.code : undefined;
  const reason = (code === undefined ? undefined : REASONS[code]) ?? (typeof detail.message === 'string' ? detail.message : String(error));
  return new ServerError(`cannot reach ${where}: ${reason}`, { cause: error });
}

async function readBounded(response: ServerAnswer, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      response.body.destroy();
      throw new ServerError(`the server's answer is larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The debugger's Server-Sent Events: one `id:`/`data:` event per message.
 * When the server ends the stream (a restart), it connects again from the
 * last id it printed, as a browser's EventSource does.
 */
async function followStream(
  server: AdminServer,
  route: string,
  afterSeq: number | undefined,
  print: (entry: DebuggerEntry) => void,
  signal: AbortSignal,
): Promise<void> {
  const position = { cursor: afterSeq };
  while (!signal.aborted) {
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream', ...(position.cursor !== undefined && { 'last-event-id': String(position.cursor) }) };
      const response = await send(server, 'GET', adminUrl(server, route), { headers, signal });
      if (!response.ok) throw refusal(server, response, await readBounded(response, MAX_RESPONSE_BYTES));
      await readEvents(response, position, print);
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ServerError || error instanceof ApiError) throw error;
      // The stream broke off (a restart, a proxy's idle timeout): connect again from the last id printed.
    }
    await sleep(RECONNECT_MS, undefined, { signal }).catch(() => undefined);
  }
}

/** Prints each event of the stream until it ends, keeping `position.cursor` at the last id printed. */
async function readEvents(response: ServerAnswer, position: { cursor: number | undefined }, print: (entry: DebuggerEntry) => void): Promise<void> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of response.body as AsyncIterable<Buffer>) {
    pending += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = pending.indexOf('\n\n')) !== -1) {
      const event = pending.slice(0, end);
      pending = pending.slice(end + 2);
      let id: number | undefined;
      let data: string | undefined;
      for (const line of event.split('\n')) {
        if (line.startsWith('id: ')) id = Number(line.slice(4));
        else if (line.startsWith('data: ')) data = line.slice(6);
      }
      if (data === undefined) continue; // a comment: ": heartbeat"
      print(parseEvent(data));
      if (id !== undefined && Number.isSafeInteger(id)) position.cursor = id;
    }
    if (pending.length > MAX_EVENT_BYTES) throw new ServerError(`the server sent a debugger event larger than ${MAX_EVENT_BYTES} bytes`);
  }
}

function parseEvent(data: string): DebuggerEntry {
  try {
    return JSON.parse(data) as DebuggerEntry;
  } catch {
    throw new ServerError('the server sent a debugger event that is not JSON: is it a Switchyard server?');
  }
}
