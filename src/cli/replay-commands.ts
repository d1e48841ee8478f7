import type { CliKit } from './admin-client.js';
import { parseArgs } from './args.js';

export const REPLAY_USAGE = `  replays create SOURCE_ID --from ISO-TIME --to ISO-TIME [--type T …] [--event E …] [--receiver URL …]
                                 re-deliver the stored messages of a time range (a running server sends them)
  replays list SOURCE_ID         the source's replays with their counts
  replays get ID                 one replay
  replays cancel ID              stop a replay: nothing more is sent
`;

type Repeated = 'type' | 'event' | 'receiver';
const OWN_FLAGS = ['from', 'to', 'limit'];

/**
 * `switchyard replays …`, on a running server or the store. Creating one stores it; the
 * running server's replay runner (any node, on a shared store) picks it up
 * within a couple of seconds and sends it.
 */
export async function replayCommand(argv: readonly string[], kit: CliKit): Promise<void> {
  const repeated: Record<Repeated, string[]> = { type: [], event: [], receiver: [] };
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const match = /^--(type|event|receiver)(?:=([\s\S]*))?$/.exec(argv[i]!);
    if (match === null) {
      rest.push(argv[i]!);
      continue;
    }
    const value = match[2] ?? argv[++i];
    if (value === undefined) throw kit.usageError(`--${match[1]} needs a value`);
    repeated[match[1] as Repeated].push(value);
  }
  const { words, flags } = parseArgs(rest, new Set());
  const own: Record<string, string | undefined> = {};
  for (const name of OWN_FLAGS) {
    const value = flags[name];
    if (value === true) throw kit.usageError(`--${name} needs a value`);
    own[name] = value;
    delete flags[name];
  }
  const [, action, id] = words;
  const need = (value: string | undefined, what: string): string => {
    if (value === undefined) throw kit.usageError(`missing ${what}`);
    return value;
  };
  const list = (values: string[]): string[] | undefined => (values.length === 0 ? undefined : values);
  switch (action) {
    case 'create':
      return kit.withAdmin(flags, (admin) =>
        admin.replays.create(need(id, 'SOURCE_ID'), {
          from: own['from'],
          to: own['to'],
          types: list(repeated.type),
          events: list(repeated.event),
          receivers: list(repeated.receiver),
        }),
      );
    case 'list':
      return kit.withAdmin(flags, (admin) => admin.replays.list(need(id, 'SOURCE_ID'), { limit: own['limit'] }));
    case 'get':
      return kit.withAdmin(flags, (admin) => admin.replays.get(need(id, 'ID')));
    case 'cancel':
      return kit.withAdmin(flags, (admin) => admin.replays.cancel(need(id, 'ID')));
    default:
      throw kit.usageError(`unknown replays command ${JSON.stringify(action ?? '')}`);
  }
}
