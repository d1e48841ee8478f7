import type { ComputationKind } from '../store/store.js';
import type { CliKit } from './admin-client.js';
import { parseArgs } from './args.js';
import { readJsonInput as readJson } from './input-file.js';

export const ENGAGE_USAGE = `  audiences list                 audiences with their sizes
  audiences create FILE          create an audience from a JSON file {name, key?, definition, destinations?} (- reads stdin)
  audiences get ID | delete ID   one audience; delete one (it stops syncing)
  audiences update ID FILE       change its name, definition or destinations
  audiences members ID [--limit N] [--cursor C]
                                 current members in the order they joined, paged
  computed-traits list | create FILE | get ID | update ID FILE | delete ID
                                 the same for computed traits
  profiles get IDENTIFIER        a profile, e.g. user_id:u1 or anonymous_id:a1
  profiles events IDENTIFIER [--limit N]
                                 its recent messages, newest first
`;

/**
 * `switchyard audiences|computed-traits|profiles …`, on a running server or the store.
 * A created or changed definition is computed by the running server's
 * evaluator within a second or so.
 */
export async function engageCommand(argv: readonly string[], kit: CliKit): Promise<void> {
  const { words, flags } = parseArgs(argv, new Set());
  const own: Record<string, string | undefined> = {};
  for (const name of ['limit', 'cursor']) {
    const value = flags[name];
    if (value === true) throw kit.usageError(`--${name} needs a value`);
    own[name] = value;
    delete flags[name];
  }
  const [group, action, id, file] = words;
  const need = (value: string | undefined, what: string): string => {
    if (value === undefined) throw kit.usageError(`missing ${what}`);
    return value;
  };
  if (group === 'profiles') {
    switch (action) {
      case 'get':
        return kit.withAdmin(flags, (admin) => admin.engage.profile(need(id, 'IDENTIFIER')));
      case 'events':
        return kit.withAdmin(flags, (admin) => admin.engage.events(need(id, 'IDENTIFIER'), { limit: own['limit'] }));
      default:
        throw kit.usageError(`unknown profiles command ${JSON.stringify(action ?? '')}`);
    }
  }
  const kind: ComputationKind = group === 'audiences' ? 'audience' : 'trait';
  switch (action) {
    case 'list':
      return kit.withAdmin(flags, (admin) => admin.engage.list(kind));
    case 'create': {
      const body = await readJson(need(id, 'FILE'));
      return kit.withAdmin(flags, (admin) => admin.engage.create(kind, body));
    }
    case 'get':
      return kit.withAdmin(flags, (admin) => admin.engage.get(kind, need(id, 'ID')));
    case 'update': {
      const body = await readJson(need(file, 'FILE'));
      return kit.withAdmin(flags, (admin) => admin.engage.update(kind, need(id, 'ID'), body));
    }
    case 'delete':
      return kit.withAdmin(flags, async (admin) => {
        await admin.engage.remove(kind, need(id, 'ID'));
        return { deleted: id };
      });
    case 'members':
      if (kind !== 'audience') break;
      return kit.withAdmin(flags, (admin) => admin.engage.members(need(id, 'ID'), { limit: own['limit'], cursor: own['cursor'] }));
    default:
      break;
  }
  throw kit.usageError(`unknown ${group} command ${JSON.stringify(action ?? '')}`);
}
