/**
 * Request bodies for the ingest benches. Every message carries a messageId
 * never sent before: Switchyard answers a repeated messageId on a cheaper
 * path (a duplicate is not routed), which would flatter the result.
 *
 * Bodies are stitched from a pre-serialized template because the load
 * generator has one CPU; JSON.stringify per message would make it the
 * bottleneck of the batch bench.
 */

export type PayloadSpec =
  | { readonly kind: 'track' }
  | { readonly kind: 'batch'; readonly size: number };

export function payloadPath(spec: PayloadSpec): string {
  return spec.kind === 'track' ? '/v1/track' : '/v1/batch';
}

export function messagesPerRequest(spec: PayloadSpec): number {
  return spec.kind === 'track' ? 1 : spec.size;
}

// A control character cannot occur in the template's own text, so it marks the placeholders safely.
const MARK = '\u0001';
const MARK_ESCAPED = '\\u0001';
const ID = `${MARK}id${MARK}`;
const USER = `${MARK}user${MARK}`;
const TIME = `${MARK}time${MARK}`;

/**
 * A realistic e-commerce track call, about 600 bytes once filled in, split
 * on its placeholders: even slots are literal JSON text, odd slots name the
 * placeholder (`id`, `user`, `time`). Exported for load generators that
 * stitch bodies themselves (wrk's Lua script).
 */
export function messageTemplate(withType: boolean): string[] {
  const message = {
    ...(withType ? { type: 'track' } : {}),
    messageId: ID,
    userId: USER,
    event: 'Order Completed',
    properties: {
      orderId: `ord-${ID}`,
      affiliation: 'web-store',
      total: 129.99,
      revenue: 114.5,
      shipping: 7.5,
      tax: 8.49,
      discount: 10,
      coupon: 'WINTER10',
      currency: 'EUR',
      products: [{ productId: 'sku-4711', name: 'Trail Runner GTX', category: 'Footwear', price: 119.99, quantity: 1 }],
    },
    context: {
      library: { name: 'analytics-node', version: '3.1.0' },
      locale: 'de-DE',
      userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
    },
    timestamp: TIME,
  };
  // JSON.stringify escapes the control character, so split on its escape sequence.
  return JSON.stringify(message).split(MARK_ESCAPED);
}

/**
 * A function returning the next body. `idPrefix` must differ between
 * load-generator processes so that ids stay unique across phases and rounds.
 */
export function bodyFactory(spec: PayloadSpec, idPrefix: string): () => string {
  let sequence = 0;
  const parts = messageTemplate(spec.kind === 'batch');
  // Splitting yields [text, 'id', text, 'user', ...]: odd slots are placeholder names.
  const message = (time: string): string => {
    sequence += 1;
    let out = '';
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      if (i % 2 === 0) out += part;
      else if (part === 'id') out += `${idPrefix}-${sequence}`;
      else if (part === 'user') out += `user-${sequence % 5000}`;
      else out += time;
    }
    return out;
  };

  if (spec.kind === 'track') return () => message(new Date().toISOString());
  const size = spec.size;
  return () => {
    const time = new Date().toISOString();
    const elements: string[] = new Array<string>(size);
    for (let i = 0; i < size; i++) elements[i] = message(time);
    return `{"batch":[${elements.join(',')}],"sentAt":"${time}"}`;
  };
}
