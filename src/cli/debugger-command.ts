import { setTimeout as sleep } from 'node:timers/promises';
import { DebuggerAdmin, type DebuggerEntry, viewMessage } from '../admin/debugger-admin.js';
import type { Store } from '../store/store.js';
import { parseArgs } from './args.js';

export const DEBUGGER_USAGE = `  debugger SOURCE_ID [--limit N] [--follow]
                                 a source's recent messages, one line each (time, status, type, reason, JSON);
                                 --follow then prints new ones as they arrive, until Ctrl-C
`;

/** What the CLI's entry point lends this command. */
export interface DebuggerKit {
  /** Opens the store the flags point at, runs `run`, prints its JSON result (none here), closes the store. */
  readonly withStore: (flags: Record<string, string | true>, run: (store: Store) => Promise<unknown>) => Promise<void>;
  readonly usageError: (message: string) => Error;
}

const BOOLEAN_FLAGS = new Set(['follow', 'allow-private-receivers', 'trust-proxy']);
const FOLLOW_POLL_MS = 500;
const FOLLOW_PAGE = 500;
const SHORT_JSON = 160;

/**
 * `switchyard debugger SOURCE_ID`: the source's debugger on the store
 * directly, oldest of the recent messages first so that `--follow` reads on
 * like `tail -f`. Following polls the store (another process writes it, so
 * there are no notifications to wait for).
 */
export async function debuggerCommand(argv: readonly string[], kit: DebuggerKit): Promise<void> {
  const { words, flags } = parseArgs(argv, BOOLEAN_FLAGS);
  const [, sourceId, extra] = words;
  if (sourceId === undefined) throw kit.usageError('missing SOURCE_ID');
  if (extra !== undefined) throw kit.usageError(`unexpected ${JSON.stringify(extra)}`);
  const { limit, follow } = flags;
  delete flags['limit'];
  delete flags['follow'];
  if (limit === true) throw kit.usageError('--limit needs a value');
  if (follow !== undefined && follow !== true) throw kit.usageError('--follow takes no value');

  return kit.withStore(flags, async (store) => {
    const admin = new DebuggerAdmin(store);
    const { messages } = await admin.list(sourceId, { limit });
    for (const entry of messages.toReversed()) process.stdout.write(`${debuggerLine(entry)}\n`);
    if (follow !== true) return undefined;
    await followMessages(store, sourceId, messages[0]?.seq ?? (await admin.streamCursor(sourceId, undefined)));
    return undefined;
  });
}

/** Prints new messages every {@link FOLLOW_POLL_MS} until SIGINT or SIGTERM. */
async function followMessages(store: Store, sourceId: string, afterSeq: number): Promise<void> {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    let cursor = afterSeq;
    while (!stop.signal.aborted) {
      const page = await store.listMessagesAfter(sourceId, cursor, FOLLOW_PAGE);
      for (const message of page) {
        process.stdout.write(`${debuggerLine(viewMessage(message))}\n`);
        cursor = message.seq;
      }
      if (page.length < FOLLOW_PAGE) await sleep(FOLLOW_POLL_MS, undefined, { signal: stop.signal }).catch(() => undefined);
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** `time  status  type  reason  {json…}`, the JSON cut to one screen line. */
export function debuggerLine(entry: DebuggerEntry): string {
  let json = JSON.stringify(entry.message) ?? '';
  if (json.length > SHORT_JSON) json = `${json.slice(0, SHORT_JSON - 1)}…`;
  const reason = entry.reason === undefined ? '' : `${entry.reason}  `;
  return `${entry.receivedAt}  ${entry.status.padEnd(10)} ${(entry.type ?? '-').padEnd(9)} ${reason}${json}`;
}
