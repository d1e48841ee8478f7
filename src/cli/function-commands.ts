import { readFile } from 'node:fs/promises';
import { ApiError } from '../errors.js';
import type { CliKit } from './admin-client.js';
import { parseArgs } from './args.js';
import { InputFileError, readJsonInput } from './input-file.js';

export const FUNCTION_USAGE = `  functions list SOURCE_ID       the source's function destinations (settings' secrets masked)
  functions create SOURCE_ID NAME FILE [--settings SETTINGS.json] [--disabled] [--max-rps N]
                                 add a function destination from a JavaScript file (- reads stdin); the code is loaded first
  functions update SOURCE_ID ID [--code FILE] [--name NAME] [--settings SETTINGS.json] [--enable | --disable] [--max-rps N|none]
                                 new code is a new version; settings sent masked or left out keep their stored values
  functions get SOURCE_ID ID     one function destination with its current code
  functions delete SOURCE_ID ID  remove it (its pending deliveries fail, saying why)
  functions test FILE EVENTS_FILE [--settings SETTINGS.json]
                                 run code on the JSON list of events in EVENTS_FILE with the real network rules; nothing is stored
`;

/** Flags of these commands rather than of the store's config. */
const OWN_FLAGS = ['settings', 'name', 'code', 'max-rps', 'enable', 'disable', 'disabled'];
const BOOLEAN_FLAGS = new Set(['allow-private-receivers', 'trust-proxy', 'enable', 'disable', 'disabled']);

/** Code files: at most this large (the code's own limit, 256 KB, is checked by the admin service). */
const MAX_CODE_BYTES = 1024 * 1024;

/**
 * `switchyard functions …`, on a running server or the store. A change bumps
 * the config version, so running servers (every node) route to it within
 * their config poll.
 */
export async function functionCommand(argv: readonly string[], kit: CliKit): Promise<void> {
  const { words, flags } = parseArgs(argv, BOOLEAN_FLAGS);
  const own: Record<string, string | true | undefined> = {};
  for (const name of OWN_FLAGS) {
    own[name] = flags[name];
    delete flags[name];
  }
  const ownString = (name: string): string | undefined => {
    const value = own[name];
    if (value === true) throw kit.usageError(`--${name} needs a value`);
    return value;
  };
  const need = (value: string | undefined, what: string): string => {
    if (value === undefined) throw kit.usageError(`missing ${what}`);
    return value;
  };
  const settingsFile = ownString('settings');
  const settings = settingsFile === undefined ? undefined : await readJsonInput(settingsFile);
  const rate = maxRequestsPerSecond(ownString('max-rps'), kit);
  const [, action, first, second, third] = words;
  switch (action) {
    case 'list': {
      const sourceId = need(first, 'SOURCE_ID');
      return kit.withAdmin(flags, (admin) => admin.functions.list(sourceId));
    }
    case 'create': {
      const sourceId = need(first, 'SOURCE_ID');
      const name = need(second, 'NAME');
      const code = await readCode(need(third, 'FILE'));
      if (own['enable'] !== undefined || own['disable'] !== undefined) throw kit.usageError('create takes --disabled (enabled otherwise)');
      const input = { name, code, ...(settings !== undefined && { settings }), ...(own['disabled'] === true && { enabled: false }), ...(rate !== undefined && { maxRequestsPerSecond: rate }) };
      return kit.withAdmin(flags, (admin) => admin.functions.create(sourceId, input));
    }
    case 'update': {
      const sourceId = need(first, 'SOURCE_ID');
      const id = need(second, 'ID');
      if (own['enable'] === true && (own['disable'] === true || own['disabled'] === true)) throw kit.usageError('give --enable or --disable, not both');
      const codeFile = ownString('code');
      const code = codeFile === undefined ? undefined : await readCode(codeFile);
      const name = ownString('name');
      const enabled = own['enable'] === true ? true : own['disable'] === true || own['disabled'] === true ? false : undefined;
      const input = {
        ...(code !== undefined && { code }),
        ...(name !== undefined && { name }),
        ...(settings !== undefined && { settings }),
        ...(enabled !== undefined && { enabled }),
        ...(rate !== undefined && { maxRequestsPerSecond: rate }),
      };
      if (Object.keys(input).length === 0) throw kit.usageError('update needs at least one of --code, --name, --settings, --enable, --disable, --max-rps');
      return kit.withAdmin(flags, (admin) => admin.functions.update(sourceId, id, input));
    }
    case 'get': {
      const sourceId = need(first, 'SOURCE_ID');
      const id = need(second, 'ID');
      return kit.withAdmin(flags, (admin) => admin.functions.get(sourceId, id));
    }
    case 'delete': {
      const sourceId = need(first, 'SOURCE_ID');
      const id = need(second, 'ID');
      return kit.withAdmin(flags, async (admin) => {
        await admin.functions.delete(sourceId, id);
        return { deleted: id };
      });
    }
    case 'test': {
      const code = await readCode(need(first, 'FILE'));
      const events = await readJsonInput(need(second, 'EVENTS_FILE'));
      return kit.withAdmin(flags, (admin) => admin.functions.test({ code, events, ...(settings !== undefined && { settings }) }));
    }
    default:
      throw kit.usageError(`unknown functions command ${JSON.stringify(action ?? '')}`);
  }
}

/** `--max-rps N` sets the cap, `--max-rps none` removes it; the admin service checks the range. */
function maxRequestsPerSecond(value: string | undefined, kit: CliKit): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'none') return null;
  if (!/^\d{1,6}$/.test(value)) throw kit.usageError('--max-rps takes a whole number of calls per second, or none');
  return Number(value);
}

async function readCode(file: string): Promise<string> {
  let text: string;
  if (file === '-') {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of process.stdin) {
      size += (chunk as Buffer).length;
      if (size > MAX_CODE_BYTES) break;
      chunks.push(chunk as Buffer);
    }
    text = Buffer.concat(chunks).toString('utf8');
    if (size > MAX_CODE_BYTES) throw new ApiError('invalid_request', `the code on stdin is larger than ${MAX_CODE_BYTES} bytes`);
  } else {
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      throw new InputFileError(`cannot read ${file}: ${(error as Error).message}`, { cause: error });
    }
  }
  if (text.length > MAX_CODE_BYTES) throw new ApiError('invalid_request', `${file} is larger than ${MAX_CODE_BYTES} bytes`);
  return text;
}
