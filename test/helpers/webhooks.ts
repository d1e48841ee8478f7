import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import type { ReceivedRequest } from './receiver.js';
import { type TestSwitchyard, eventually } from './switchyard.js';

/** `serve` flags for delivery tests: loopback receivers allowed, retries fast and short. */
export const FAST_RETRIES: Readonly<Record<string, string>> = {
  'allow-private-receivers': 'true',
  'retry-base-ms': '20',
  'retry-max-delay-ms': '200',
  'retry-window-ms': '1500',
};

/** Creates a source whose Webhooks destination posts to `urls`. */
export async function sourceWithWebhooks(
  sy: TestSwitchyard,
  urls: readonly string[],
  options: { sharedSecret?: string; headers?: Record<string, string> } = {},
): Promise<{ id: string; writeKey: string }> {
  const source = await sy.createSource('webhooks-test');
  const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
    enabled: true,
    settings: {
      webhooks: urls.map((url) => ({ url, ...(options.headers !== undefined && { headers: options.headers }) })),
      ...(options.sharedSecret !== undefined && { sharedSecret: options.sharedSecret }),
    },
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  return source;
}

/**
 * Checks `X-Signature` exactly as Segment tells receivers to: parse the body,
 * re-stringify it, HMAC-SHA1 it with the shared secret, compare hex.
 */
export function segmentSignatureMatches(request: ReceivedRequest, sharedSecret: string): boolean {
  const body: unknown = JSON.parse(request.body);
  const expected = createHmac('sha1', sharedSecret).update(JSON.stringify(body)).digest('hex');
  return request.headers['x-signature'] === expected;
}

/** The source's deliveries, newest first, through the admin API. */
export async function listDeliveries(sy: TestSwitchyard, sourceId: string, status?: string): Promise<any[]> {
  const query = `sourceId=${encodeURIComponent(sourceId)}${status === undefined ? '' : `&status=${status}`}&limit=1000`;
  const listed = await sy.admin('GET', `/deliveries?${query}`);
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  return listed.body.deliveries;
}

/** Waits for a delivery to reach `status`; resolves its detail (with attempts). */
export async function waitForDelivery(sy: TestSwitchyard, id: number, status: string, timeoutMs = 10_000): Promise<any> {
  return eventually(
    async () => {
      const detail = await sy.admin('GET', `/deliveries/${id}`);
      return detail.body?.status === status ? detail.body : undefined;
    },
    timeoutMs,
    `delivery ${id} to be ${status}`,
  );
}

/** Waits for the source's only delivery to reach `status`. */
export async function waitForOnlyDelivery(sy: TestSwitchyard, sourceId: string, status: string, timeoutMs = 10_000): Promise<any> {
  const [delivery] = await eventually(async () => {
    const all = await listDeliveries(sy, sourceId);
    return all.length > 0 ? all : undefined;
  }, timeoutMs, 'a delivery');
  return waitForDelivery(sy, delivery.id, status, timeoutMs);
}
