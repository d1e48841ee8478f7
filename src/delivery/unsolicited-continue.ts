import type { Duplex } from 'node:stream';

/**
 * Receivers may answer `100 Continue` before their final answer although
 * Switchyard never sends `Expect: 100-continue` (some frameworks and proxies
 * always do). RFC 9110 §15.2 says a client must parse such 1xx answers and may
 * ignore them, but undici 7 destroys the connection on an unexpected 100
 * ("bad response"): the receiver had the POST and answered 200, yet the
 * delivery counted as failed and was sent again, up to ten times.
 *
 * undici does skip every other 1xx (102, 103, …) and waits for the final
 * answer. So the status of a `100` status line coming from the receiver is
 * read as `102`: the same length, so no framing moves. The rewrite may also
 * touch the same bytes inside a response body, which Switchyard reads only to
 * drop.
 */
export class ContinueRewriter {
  private matched = 0;

  /** Rewrites `chunk` in place; a status line split across chunks is still found. */
  rewrite(chunk: Uint8Array): void {
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (matchesAt(this.matched, byte)) {
        this.matched++;
        if (this.matched === STATUS_100.length) {
          chunk[i] = DIGIT_2;
          this.matched = 0;
        }
      } else {
        // "H" occurs only at the start of the pattern, so a failed match restarts there.
        this.matched = matchesAt(0, byte) ? 1 : 0;
      }
    }
  }
}

/** `HTTP/1.x 100`, where x is any minor version digit. */
const STATUS_100 = Buffer.from('HTTP/1.? 100', 'latin1');
const ANY_DIGIT_AT = 7;
const DIGIT_2 = 0x32;

function matchesAt(index: number, byte: number): boolean {
  if (index === ANY_DIGIT_AT) return byte >= 0x30 && byte <= 0x39;
  return STATUS_100[index] === byte;
}

/**
 * Makes an undici connection (plain or TLS) read unsolicited `100 Continue`
 * answers as ignorable 1xx ones. Hooks the socket's `push`, through which
 * Node hands every chunk read from the network (decrypted, for TLS) to the
 * stream that undici reads.
 */
export function tolerateUnsolicitedContinue(socket: Duplex): void {
  const rewriter = new ContinueRewriter();
  const push = socket.push.bind(socket);
  socket.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
    if (chunk instanceof Uint8Array) rewriter.rewrite(chunk);
    return push(chunk, encoding);
  };
}
