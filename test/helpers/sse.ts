/** One Server-Sent Events block: an event (with id and data) or a comment line. */
export type SseBlock = { readonly kind: 'event'; readonly id: string | undefined; readonly data: string } | { readonly kind: 'comment'; readonly text: string };

/**
 * Reads a Server-Sent Events response body block by block, only when asked,
 * so a test can stop reading (a slow client) and go on later.
 */
export class SseReader {
  private buffer = '';
  private readonly decoder = new TextDecoder();
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;

  constructor(
    readonly response: Response,
    private readonly abort: AbortController,
  ) {
    if (response.body === null) throw new Error('the response has no body');
    this.reader = response.body.getReader();
  }

  /** Opens `url` as an event stream with the given headers. */
  static async open(url: string, headers: Record<string, string>): Promise<SseReader> {
    const abort = new AbortController();
    const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
    return new SseReader(response, abort);
  }

  /** The next block; rejects after `timeoutMs` or when the stream ends. */
  async next(timeoutMs = 10_000): Promise<SseBlock> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const end = this.buffer.indexOf('\n\n');
      if (end !== -1) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        return parseBlock(block);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no event within ${timeoutMs} ms`);
      let timer: NodeJS.Timeout | undefined;
      const chunk = await Promise.race([
        this.reader.read(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no event within ${timeoutMs} ms`)), left);
        }),
      ]).finally(() => clearTimeout(timer));
      if (chunk.done) throw new StreamEnded();
      this.buffer += this.decoder.decode(chunk.value, { stream: true });
    }
  }

  /** Blocks until one satisfies `match`; the others are dropped. */
  async until(match: (block: SseBlock) => boolean, timeoutMs = 10_000): Promise<SseBlock> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const block = await this.next(Math.max(1, deadline - Date.now()));
      if (match(block)) return block;
    }
  }

  /** Events only (comments are skipped), `count` of them. */
  async events(count: number, timeoutMs = 10_000): Promise<Array<{ id: string | undefined; data: any }>> {
    const out: Array<{ id: string | undefined; data: any }> = [];
    const deadline = Date.now() + timeoutMs;
    while (out.length < count) {
      const block = await this.until((b) => b.kind === 'event', Math.max(1, deadline - Date.now()));
      if (block.kind === 'event') out.push({ id: block.id, data: JSON.parse(block.data) });
    }
    return out;
  }

  close(): void {
    this.abort.abort();
  }
}

export class StreamEnded extends Error {
  override readonly name = 'StreamEnded';
  constructor() {
    super('the event stream ended');
  }
}

function parseBlock(block: string): SseBlock {
  let id: string | undefined;
  const data: string[] = [];
  const comments: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) comments.push(line.slice(1).trim());
    else if (line.startsWith('id:')) id = line.slice(3).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  if (data.length === 0) return { kind: 'comment', text: comments.join('\n') };
  return { kind: 'event', id, data: data.join('\n') };
}
