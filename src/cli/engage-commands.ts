import { EngageAdmin } from '../admin/engage-admin.js';
import type { ComputationKind, Store } from '../store/store.js';
import { parseArgs } from './args.js';
import { readJsonInput as readJson } from './input-file.js';
import type { CliKit } from './delivery-commands.js';

export const ENGAGE_USAGE = `  audiences list                 audiences with their sizes
  audiences create FILE          create an audience from a JSON file {name, key?, definition, destinations?} (- reads stdin)
  audiences get ID | delete ID   one audience; delete one (it stops syncing)
  audiences update ID FILE       change its name, definition or destinations
  audiences members ID [--limit N] [--cursor C]
                                 current members, paged
  computed-traits list | create FILE | get ID | update ID FILE | delete ID
                                 the same for computed traits
  profiles get IDENTIFIER        a profile, e.g. user_id:u1 or anonymous_id:a1
  profiles events IDENTIFIER [--limit N]
                                 its recent messages, newest first
`;

/**
 * `switchyard audiences|computed-traits|profiles …`, on the store directly.
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
  const admin = (store: Store): EngageAdmin => new EngageAdmin(store, { now: Date.now });
  if (group === 'profiles') {
    switch (action) {
      case 'get':
        return kit.withStore(flags, (store) => admin(store).profile(need(id, 'IDENTIFIER')));
      case 'events':
        return kit.withStore(flags, (store) => admin(store).events(need(id, 'IDENTIFIER'), { limit: own['limit'] }));
      default:
        throw kit.usageError(`unknown profiles command ${JSON.stringify(action ?? '')}`);
    }
  }
  const kind: ComputationKind = group === 'audiences' ? 'audience' : 'trait';
  switch (action) {
    case 'list':
      return kit.withStore(flags, (store) => admin(store).list(kind));
    case 'create': {
      const body = await readJson(need(id, 'FILE'));
      return kit.withStore(flags, (store) => admin(store).create(kind, body));
    }
    case 'get':
      return kit.withStore(flags, (store) => admin(store).get(kind, need(id, 'ID')));
    case 'update': {
      const body = await readJson(need(file, 'FILE'));
      return kit.withStore(flags, (store) => admin(store).update(kind, need(id, 'ID'), body));
    }
    case 'delete':
      return kit.withStore(flags, async (store) => {
        await admin(store).remove(kind, need(id, 'ID'));
        return { deleted: id };
      });
    case 'members':
      if (kind !== 'audience') break;
      return kit.withStore(flags, (store) => admin(store).members(need(id, 'ID'), { limit: own['limit'], cursor: own['cursor'] }));
    default:
      break;
  }
  throw kit.usageError(`unknown ${group} command ${JSON.stringify(action ?? '')}`);
}
