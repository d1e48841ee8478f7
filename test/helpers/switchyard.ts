import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { loadConfig } from '../../src/config.js';
import { type RunningSwitchyard, startSwitchyard } from '../../src/serve.js';
import type { Store } from '../../src/store/store.js';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface TestSwitchyard {
  readonly url: string;
  readonly port: number;
  readonly store: Store;
  readonly dataDir: string;
  /** Calls the admin API with the test token; resolves status and parsed JSON. */
  admin(method: string, route: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** Creates a source through the admin API. */
  createSource(name?: string): Promise<{ id: string; writeKey: string }>;
  /**
   * POSTs JSON to the Tracking API with the write key as Basic auth; after a
   * 200, waits until the processing stage has made messages of it (a 200
   * means stored raw; see {@link waitForProcessing}).
   */
  send(route: string, writeKey: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  /** Waits until every request answered so far is processed into messages. */
  processed(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts a real Switchyard in this process on a free loopback port, on a fresh
 * data folder, with the given `serve` flags (e.g. `{ 'retry-base-ms': '20' }`).
 */
export async function startTestSwitchyard(flags: Record<string, string> = {}): Promise<TestSwitchyard> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'switchyard-test-'));
  const config = loadConfig(
    { port: '0', host: '127.0.0.1', 'data-dir': dataDir, 'admin-token': TEST_ADMIN_TOKEN, ...flags },
    {},
  );
  let running: RunningSwitchyard;
  try {
    running = await startSwitchyard(config, pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' }));
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  const url = `http://127.0.0.1:${running.port}`;

  const request = async (method: string, route: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; body: any }> => {
    const response = await fetch(url + route, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : (JSON.parse(text) as unknown) };
  };

  const server: TestSwitchyard = {
    url,
    port: running.port,
    store: running.store,
    dataDir,
    admin: (method, route, body) => request(method, `/admin/v1${route}`, body, { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }),
    async createSource(name = 'test') {
      const created = await server.admin('POST', '/sources', { name });
      if (created.status !== 201) throw new Error(`creating a source: ${created.status} ${JSON.stringify(created.body)}`);
      return created.body as { id: string; writeKey: string };
    },
    async send(route, writeKey, body, headers = {}) {
      const answer = await request('POST', route, body, { authorization: basicAuth(writeKey), ...headers });
      if (answer.status === 200) await waitForProcessing(running.store);
      return answer;
    },
    processed: () => waitForProcessing(running.store),
    async close() {
      await running.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return server;
}

export function basicAuth(writeKey: string): string {
  return `Basic ${Buffer.from(`${writeKey}:`).toString('base64')}`;
}

/**
 * Waits until the processing stage has made messages of every raw request
 * acknowledged before the call: what a test that reads a message right after
 * its 200 must wait for, since the 200 means stored raw.
 */
export async function waitForProcessing(store: Pick<Store, 'highestRawSeq' | 'hasRawRequestsUpTo'>, timeoutMs = 20_000): Promise<void> {
  const mark = await store.highestRawSeq();
  await eventually(async () => ((await store.hasRawRequestsUpTo(mark)) ? undefined : true), timeoutMs, 'the processing of acknowledged requests');
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Makes `send` again while it answers 401: a node learns of a source made
 * on another node by NOTIFY or, on a loaded machine, its config poll, and
 * a 401 stores nothing, so sending again is safe. Resolves the first other
 * answer.
 */
export function untilKeyKnown<T extends { readonly status: number }>(url: string, send: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  return eventually(async () => {
    const answer = await send();
    return answer.status === 401 ? undefined : answer;
  }, timeoutMs, `${url} knowing the write key`);
}

/** {@link untilKeyKnown} for a node of this process. */
export function sendWhenKnown(node: TestSwitchyard, route: string, writeKey: string, body: unknown, timeoutMs = 10_000): Promise<{ status: number; body: any }> {
  return untilKeyKnown(node.url, () => node.send(route, writeKey, body), timeoutMs);
}
