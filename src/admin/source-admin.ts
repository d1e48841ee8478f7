import { ApiError } from '../errors.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { SourceRecord, Store } from '../store/store.js';
import { newSourceId, newWriteKey } from '../util/ids.js';
import { optionalBoolean, rejectUnknownFields, requireName, requireObject } from './validate.js';

/** A source as the admin API and the CLI show it. */
export interface SourceView {
  readonly id: string;
  readonly name: string;
  readonly writeKey: string;
  readonly enabled: boolean;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export function viewSource(source: SourceRecord): SourceView {
  return {
    id: source.id,
    name: source.name,
    writeKey: source.writeKey,
    enabled: source.enabled,
    createdAt: new Date(source.createdAt).toISOString(),
    updatedAt: new Date(source.updatedAt).toISOString(),
  };
}

/**
 * Source management, shared by the admin HTTP routes and the CLI. Inputs are
 * untrusted (parsed JSON); errors are {@link ApiError}s naming the field.
 */
export class SourceAdmin {
  constructor(
    private readonly store: Store,
    private readonly now: () => number,
    /** Present in a serving process, so its own changes apply at once. */
    private readonly directory?: SourceDirectory,
  ) {}

  async create(input: unknown): Promise<SourceView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['name', 'enabled']);
    const at = this.now();
    const source: SourceRecord = {
      id: newSourceId(),
      name: requireName(body['name']),
      writeKey: newWriteKey(),
      enabled: optionalBoolean(body['enabled'], 'enabled') ?? true,
      createdAt: at,
      updatedAt: at,
    };
    await this.store.insertSource(source);
    await this.directory?.reload();
    return viewSource(source);
  }

  async list(): Promise<SourceView[]> {
    return (await this.store.listSources()).map(viewSource);
  }

  async get(id: string): Promise<SourceView> {
    return viewSource(await this.require(id));
  }

  /** The source, or a 404 {@link ApiError}. */
  async require(id: string): Promise<SourceRecord> {
    const source = await this.store.getSource(id);
    if (source === undefined) throw new ApiError('not_found', `no source with id ${JSON.stringify(id.slice(0, 60))}`);
    return source;
  }

  async update(id: string, input: unknown): Promise<SourceView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['name', 'enabled']);
    const patch = {
      ...(body['name'] !== undefined && { name: requireName(body['name']) }),
      ...(body['enabled'] !== undefined && { enabled: optionalBoolean(body['enabled'], 'enabled')! }),
    };
    if (Object.keys(patch).length === 0) throw new ApiError('invalid_request', 'send "name" and/or "enabled" to change');
    const updated = await this.store.updateSource(id, patch, this.now());
    if (updated === undefined) throw new ApiError('not_found', `no source with id ${JSON.stringify(id.slice(0, 60))}`);
    await this.directory?.reload();
    return viewSource(updated);
  }

  async delete(id: string): Promise<void> {
    if (!(await this.store.deleteSource(id))) throw new ApiError('not_found', `no source with id ${JSON.stringify(id.slice(0, 60))}`);
    await this.directory?.reload();
  }
}
