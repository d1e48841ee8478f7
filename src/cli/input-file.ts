import { open } from 'node:fs/promises';
import { jsonBoundsError } from '../admin/validate.js';

/** Largest JSON file the CLI reads: definitions and filters are bounded far below this. */
export const MAX_INPUT_BYTES = 1024 * 1024;

/** A file argument the CLI cannot use: one line, exit code 2, never a stack trace. */
export class InputFileError extends Error {}

const REASONS: Record<string, string> = {
  ENOENT: 'no such file',
  EISDIR: 'it is a folder',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
};

/** Reads and parses a JSON file, or standard input for "-", reading at most MAX_INPUT_BYTES + 1 bytes. */
export async function readJsonInput(file: string): Promise<unknown> {
  const name = file === '-' ? 'standard input' : file;
  const bytes = file === '-' ? await readBounded(process.stdin) : await readFileBounded(file);
  if (bytes.length > MAX_INPUT_BYTES) throw new InputFileError(`${name} is larger than ${MAX_INPUT_BYTES} bytes`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8')) as unknown;
  } catch (error) {
    throw new InputFileError(`${name} is not JSON: ${(error as Error).message}`);
  }
  // Nested too deep or a number out of range: refused before any recursive walk, as the admin API does.
  const outOfBounds = jsonBoundsError(parsed);
  if (outOfBounds !== undefined) throw outOfBounds;
  return parsed;
}

async function readFileBounded(file: string): Promise<Buffer> {
  try {
    const handle = await open(file, 'r');
    try {
      return await readBounded(handle.createReadStream({ end: MAX_INPUT_BYTES }));
    } finally {
      await handle.close();
    }
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const reason = typeof code === 'string' ? REASONS[code] : undefined;
    if (reason === undefined) throw error;
    throw new InputFileError(`cannot read ${file}: ${reason}`, { cause: error });
  }
}

async function readBounded(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
    if (size > MAX_INPUT_BYTES) break;
  }
  return Buffer.concat(chunks);
}
