import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nestedValueBound } from '../../src/ingest/build-entries.js';

/** The exact figure the bound stands in for: the largest element of `batch`, serialized, in UTF-8 bytes. */
function largestElement(text: string): number {
  const body = JSON.parse(text) as { batch: unknown[] };
  return Math.max(0, ...body.batch.map((element) => Buffer.byteLength(JSON.stringify(element))));
}

function bound(text: string): number {
  return nestedValueBound(text, Buffer.byteLength(text) === text.length ? 1 : 3);
}

describe('the bound ingest reads off a batch body instead of serializing each element', () => {
  const cases: Record<string, string> = {
    'plain elements': JSON.stringify({ batch: [{ type: 'track', event: 'a', properties: { n: 1 } }, { type: 'identify', userId: 'u' }], context: { x: 1 } }),
    'numbers that serialize longer than written': '{"batch":[{"a":[1e20,9E20,1e300,-1.5e-300,5e1]}, {"b":1}]}',
    'escapes, quotes and backslashes in strings': '{"batch":[{"k\\"ey":"a\\\\\\"b\\u00e9\\n\\/","e":"\\\\"},"\\"]}"]}',
    'non-ASCII text': JSON.stringify({ batch: [{ event: 'é'.repeat(300) + '😀'.repeat(100) }, { event: '中文' }] }),
    'whitespace and nesting': '{ "batch" : [ { "a" : [ [ 1 , 2 ] , { "b" : true , "c" : false , "d" : null } ] } , [ ] , "s" , 12 ] , "context" : { "p" : [ 1 ] } }',
    'a repeated key, the last wins': '{"batch":[{"a":"' + 'x'.repeat(5000) + '"}],"batch":[{"b":1}]}',
  };
  for (const [name, text] of Object.entries(cases)) {
    it(`is never below the exact size: ${name}`, () => {
      assert.ok(bound(text) >= largestElement(text), `bound ${bound(text)} < exact ${largestElement(text)}`);
    });
  }

  it('stays close to the exact size for ordinary ASCII batches (so the exact check is skipped)', () => {
    const element = { type: 'track', event: 'Order Completed', userId: 'user-1', properties: { total: 12.5, sku: 'abc' } };
    const text = JSON.stringify({ batch: Array.from({ length: 100 }, () => element) });
    assert.ok(bound(text) < 2 * largestElement(text));
  });
});
