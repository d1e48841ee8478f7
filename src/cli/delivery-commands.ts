import { ApiError } from '../errors.js';
import type { CliKit } from './admin-client.js';
import { parseArgs } from './args.js';
import { readJsonInput } from './input-file.js';

export const DELIVERY_USAGE = `  webhooks set SOURCE_ID --url URL [--url URL2 …] [--header NAME=VALUE …] [--secret S] [--disabled | --enabled]
                 [--transformation ID[@VERSION] | --transformation none] [--ordering user|none]
                                 set the source's Webhooks destination (1-5 receivers; headers go to every receiver);
                                 attach a transformation (its latest version, or that one) or detach it; order per user;
                                 what is not given stays as it is, enabled or disabled included
  webhooks get SOURCE_ID         show it (secret masked)
  webhooks delete SOURCE_ID      remove it (pending deliveries fail, saying why)
  webhooks filters SOURCE_ID FILE
                                 set the destination's filters to the JSON list in FILE (- for stdin; [] removes them)
  webhooks standard-secret SOURCE_ID
                                 show the Standard Webhooks secret
  webhooks rotate-secret SOURCE_ID [--overlap-seconds N]
                                 a new Standard Webhooks secret; the old one signs too for N s (default 86400)
  deliveries list [--source ID] [--status pending|succeeded|failed] [--user-id ID] [--message-id ID] [--limit N] [--before-id ID]
                                 deliveries, newest first (those of the messages with that userId / messageId)
  deliveries get ID              one delivery with every attempt
  deliveries retry ID            put a failed delivery back in the queue
  deliveries retry-all [--source ID] [--since ISO-TIME]
                                 put every failed delivery (of a source, failed since a time) back
`;

/** Flags of these commands rather than of the store's config (`--url` of `webhooks set` and `--header` may repeat). */
const OWN_FLAGS = ['secret', 'transformation', 'ordering', 'source', 'status', 'since', 'limit', 'disabled', 'enabled', 'overlap-seconds', 'user-id', 'message-id', 'before-id'];
const BOOLEAN_FLAGS = new Set(['allow-private-receivers', 'trust-proxy', 'disabled', 'enabled']);

/**
 * `switchyard webhooks …` and `switchyard deliveries …`, on a running server
 * or on the store directly (validating exactly as the admin API does, with the
 * same admin classes, private-address check included). `argv` is everything
 * after the program.
 */
export async function deliveryCommand(argv: readonly string[], kit: CliKit): Promise<void> {
  const { words, flags, own, repeated } = splitArgs(argv, kit);
  const [command, action, id] = words;
  // `--url` names the receivers of `webhooks set` (as it always has; the server comes from SWITCHYARD_URL there), and the server everywhere else.
  if (!(command === 'webhooks' && action === 'set') && repeated.url.length > 0) {
    if (repeated.url.length > 1) throw kit.usageError('--url names one server');
    flags['url'] = repeated.url[0]!;
  }
  const need = (value: string | undefined, what: string): string => {
    if (value === undefined) throw kit.usageError(`missing ${what}`);
    return value;
  };
  const ownString = (name: string): string | undefined => {
    const value = own[name];
    if (value === true) throw kit.usageError(`--${name} needs a value`);
    return value;
  };

  if (command === 'webhooks') {
    switch (action) {
      case 'set': {
        const sourceId = need(id, 'SOURCE_ID');
        const headers = Object.fromEntries(repeated.header.map((h) => splitHeader(h, kit)));
        const secret = ownString('secret');
        const transformation = transformationRef(ownString('transformation'), kit);
        const ordering = ownString('ordering');
        if (own['disabled'] === true && own['enabled'] === true) throw kit.usageError('give --disabled or --enabled, not both');
        return kit.withAdmin(flags, async (admin) => {
          // What is not given stays as it is: the secrets (masked values keep them), filters, receivers.
          const current = await admin.webhooks
            .get(sourceId)
            .catch((error: unknown) => {
              if (error instanceof ApiError && error.code === 'not_found') return undefined;
              throw error;
            });
          if (repeated.url.length === 0 && current === undefined) throw kit.usageError('webhooks set needs at least one --url for a new destination');
          const receivers =
            repeated.url.length > 0 ? repeated.url.map((url) => ({ url, ...(repeated.header.length > 0 && { headers }) })) : current!.settings.webhooks;
          const settings: Record<string, unknown> = { ...current?.settings, webhooks: receivers, ...(secret !== undefined && { sharedSecret: secret }) };
          if (transformation === null) delete settings['transformation'];
          else if (transformation !== undefined) settings['transformation'] = transformation;
          if (ordering !== undefined) settings['ordering'] = ordering;
          return admin.webhooks.put(sourceId, {
            // Neither flag: as it is (a disabled destination is not turned back on by changing its secret), or on for a new one.
            enabled: own['disabled'] === true ? false : own['enabled'] === true ? true : (current?.enabled ?? true),
            settings,
            ...(current !== undefined && { filters: current.filters }),
          });
        });
      }
      case 'delete': {
        const sourceId = need(id, 'SOURCE_ID');
        return kit.withAdmin(flags, async (admin) => {
          await admin.webhooks.delete(sourceId);
          return { deleted: true };
        });
      }
      case 'get':
        return kit.withAdmin(flags, (admin) => admin.webhooks.get(need(id, 'SOURCE_ID')));
      case 'filters': {
        const sourceId = need(id, 'SOURCE_ID');
        const filters = await readJsonInput(need(words[3], 'FILE'));
        return kit.withAdmin(flags, async (admin) => {
          // The settings as they are (secrets masked, which keeps them), with the new filters.
          const current = await admin.webhooks.get(sourceId);
          return admin.webhooks.put(sourceId, { enabled: current.enabled, settings: current.settings, filters });
        });
      }
      case 'standard-secret':
        return kit.withAdmin(flags, (admin) => admin.webhooks.standardSecret(need(id, 'SOURCE_ID')));
      case 'rotate-secret': {
        const overlap = ownString('overlap-seconds');
        const body = overlap === undefined ? {} : { overlapSeconds: Number(overlap) };
        return kit.withAdmin(flags, (admin) => admin.webhooks.rotateStandardSecret(need(id, 'SOURCE_ID'), body));
      }
      default:
        throw kit.usageError(`unknown webhooks command ${JSON.stringify(action ?? '')}`);
    }
  }

  switch (action) {
    case 'list':
      return kit.withAdmin(flags, (admin) =>
        admin.deliveries.list({
          sourceId: ownString('source'),
          status: ownString('status'),
          limit: ownString('limit'),
          beforeId: ownString('before-id'),
          userId: ownString('user-id'),
          messageId: ownString('message-id'),
        }),
      );
    case 'get':
      return kit.withAdmin(flags, (admin) => admin.deliveries.get(need(id, 'ID')));
    case 'retry':
      return kit.withAdmin(flags, (admin) => admin.deliveries.retry(need(id, 'ID')));
    case 'retry-all':
      return kit.withAdmin(flags, (admin) => admin.deliveries.retryAll({ sourceId: ownString('source'), since: ownString('since') }));
    default:
      throw kit.usageError(`unknown deliveries command ${JSON.stringify(action ?? '')}`);
  }
}

/** `--transformation ID`, `ID@VERSION` or `none` (null: detach it). */
function transformationRef(value: string | undefined, kit: CliKit): { id: string; version?: number } | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'none') return null;
  const at = /^(.+)@(\d{1,9})$/.exec(value);
  if (at !== null) return { id: at[1]!, version: Number(at[2]) };
  if (value.includes('@')) throw kit.usageError(`--transformation takes ID, ID@VERSION or none, got ${JSON.stringify(value.slice(0, 60))}`);
  return { id: value };
}

interface SplitArgs {
  readonly words: string[];
  /** Flags for the config (where the store is). */
  readonly flags: Record<string, string | true>;
  readonly own: Record<string, string | true | undefined>;
  readonly repeated: { readonly url: string[]; readonly header: string[] };
}

function splitArgs(argv: readonly string[], kit: CliKit): SplitArgs {
  const repeated: SplitArgs['repeated'] = { url: [], header: [] };
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    const match = /^--(url|header)(?:=([\s\S]*))?$/.exec(arg);
    if (match === null) {
      rest.push(arg);
      continue;
    }
    const value = match[2] ?? argv[++i];
    if (value === undefined) throw kit.usageError(`--${match[1]} needs a value`);
    repeated[match[1] as 'url' | 'header'].push(value);
  }
  const { words, flags } = parseArgs(rest, BOOLEAN_FLAGS);
  const own: Record<string, string | true | undefined> = {};
  for (const name of OWN_FLAGS) {
    own[name] = flags[name];
    delete flags[name];
  }
  return { words, flags, own, repeated };
}

function splitHeader(text: string, kit: CliKit): [string, string] {
  const eq = text.indexOf('=');
  if (eq <= 0) throw kit.usageError(`--header takes NAME=VALUE, got ${JSON.stringify(text.slice(0, 60))}`);
  return [text.slice(0, eq), text.slice(eq + 1)];
}
