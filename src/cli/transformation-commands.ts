import { readFile } from 'node:fs/promises';
import { ApiError } from '../errors.js';
import type { CliKit } from './admin-client.js';
import { parseArgs } from './args.js';

export const TRANSFORMATION_USAGE = `  transformations list           transformations with their latest version numbers
  transformations create NAME FILE
                                 create one from a JavaScript file (- reads stdin); the code is compiled first
  transformations update ID FILE [--name NAME]
                                 save a new version
  transformations get ID [VERSION]
                                 the latest version (or that one) with its code
  transformations delete ID      delete it (refused while a destination uses it)
  transformations test FILE EVENTS_FILE
                                 run code on the JSON list of events in EVENTS_FILE; nothing is stored
`;

/** Code and event files: at most this large (the code's own limit, 256 KB, is checked by the admin service). */
const MAX_FILE_BYTES = 1024 * 1024;

/** `switchyard transformations …`, on a running server or the store (the running servers read versions from the store). */
export async function transformationCommand(argv: readonly string[], kit: CliKit): Promise<void> {
  const { words, flags } = parseArgs(argv, new Set());
  const own: Record<string, string | undefined> = {};
  for (const name of ['name']) {
    const value = flags[name];
    if (value === true) throw kit.usageError(`--${name} needs a value`);
    own[name] = value;
    delete flags[name];
  }
  const [, action, first, second] = words;
  const need = (value: string | undefined, what: string): string => {
    if (value === undefined) throw kit.usageError(`missing ${what}`);
    return value;
  };
  switch (action) {
    case 'list':
      return kit.withAdmin(flags, (admin) => admin.transformations.list());
    case 'create': {
      const name = need(first, 'NAME');
      const code = await readText(need(second, 'FILE'));
      return kit.withAdmin(flags, (admin) => admin.transformations.create({ name, code }));
    }
    case 'update': {
      const id = need(first, 'ID');
      const code = await readText(need(second, 'FILE'));
      return kit.withAdmin(flags, (admin) => admin.transformations.update(id, { code, ...(own['name'] !== undefined && { name: own['name'] }) }));
    }
    case 'get': {
      const id = need(first, 'ID');
      return kit.withAdmin(flags, (admin) => (second === undefined ? admin.transformations.get(id) : admin.transformations.getVersion(id, second)));
    }
    case 'delete': {
      const id = need(first, 'ID');
      return kit.withAdmin(flags, async (admin) => {
        await admin.transformations.delete(id);
        return { deleted: id };
      });
    }
    case 'test': {
      const code = await readText(need(first, 'FILE'));
      const eventsText = await readText(need(second, 'EVENTS_FILE'));
      let events: unknown;
      try {
        events = JSON.parse(eventsText);
      } catch {
        throw new ApiError('invalid_request', `${second} is not valid JSON`);
      }
      return kit.withAdmin(flags, (admin) => admin.transformations.test({ code, events }));
    }
    default:
      throw kit.usageError(`unknown transformations command ${JSON.stringify(action ?? '')}`);
  }
}

async function readText(file: string): Promise<string> {
  let text: string;
  if (file === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    text = await readFile(file, 'utf8');
  }
  if (text.length > MAX_FILE_BYTES) throw new ApiError('invalid_request', `${file} is larger than ${MAX_FILE_BYTES} bytes`);
  return text;
}
