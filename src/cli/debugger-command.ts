import type { DebuggerEntry } from '../admin/debugger-admin.js';
import type { CliKit } from './admin-client.js';
import { parseArgs } from './args.js';

export const DEBUGGER_USAGE = `  debugger SOURCE_ID [--limit N] [--follow]
                                 a source's recent messages, one line each (time, status, type, reason, JSON);
                                 --follow then prints new ones as they arrive, until Ctrl-C
`;

const BOOLEAN_FLAGS = new Set(['follow', 'allow-private-receivers', 'trust-proxy']);
const SHORT_JSON = 160;

/**
 * `switchyard debugger SOURCE_ID`: the source's debugger, oldest of the
 * recent messages first so that `--follow` reads on like `tail -f` (from a
 * server's live stream, or by polling the store).
 */
export async function debuggerCommand(argv: readonly string[], kit: CliKit): Promise<void> {
  const { words, flags } = parseArgs(argv, BOOLEAN_FLAGS);
  const [, sourceId, extra] = words;
  if (sourceId === undefined) throw kit.usageError('missing SOURCE_ID');
  if (extra !== undefined) throw kit.usageError(`unexpected ${JSON.stringify(extra)}`);
  const { limit, follow } = flags;
  delete flags['limit'];
  delete flags['follow'];
  if (limit === true) throw kit.usageError('--limit needs a value');
  if (follow !== undefined && follow !== true) throw kit.usageError('--follow takes no value');

  return kit.withAdmin(flags, async (admin) => {
    const { messages } = await admin.debugger.list(sourceId, { limit });
    const print = (entry: DebuggerEntry): void => void process.stdout.write(`${debuggerLine(entry)}\n`);
    messages.toReversed().forEach(print);
    if (follow !== true) return undefined;
    const stop = new AbortController();
    const onSignal = (): void => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      await admin.debugger.follow(sourceId, messages[0]?.seq, print, stop.signal);
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    return undefined;
  });
}

/** `time  status  type  reason  {json…}`, the JSON cut to one screen line. */
export function debuggerLine(entry: DebuggerEntry): string {
  let json = JSON.stringify(entry.message) ?? '';
  if (json.length > SHORT_JSON) json = `${json.slice(0, SHORT_JSON - 1)}…`;
  const reason = entry.reason === undefined ? '' : `${entry.reason}  `;
  return `${entry.receivedAt}  ${entry.status.padEnd(10)} ${(entry.type ?? '-').padEnd(9)} ${reason}${json}`;
}
