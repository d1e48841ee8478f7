/** Records of function destinations (see `FunctionStore` below). */

/** A function destination without its code. */
export interface FunctionDestinationRecord {
  readonly id: string;
  readonly sourceId: string;
  /** Unique per source: the `integrations` key. */
  readonly name: string;
  readonly enabled: boolean;
  /** The object the handlers get as `settings` (stored unmasked). */
  readonly settings: Readonly<Record<string, unknown>>;
  /** Cap of calls per second (undefined: none). */
  readonly maxRequestsPerSecond: number | undefined;
  /** The current version of the code (1, 2, …). */
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface NewFunctionDestination {
  readonly id: string;
  readonly sourceId: string;
  readonly name: string;
  readonly enabled: boolean;
  readonly settings: Readonly<Record<string, unknown>>;
  readonly maxRequestsPerSecond: number | undefined;
  readonly code: string;
  readonly at: number;
}

/** What an update changes; `code` makes a new version. `maxRequestsPerSecond: null` removes the cap. */
export interface FunctionDestinationPatch {
  readonly name?: string | undefined;
  readonly enabled?: boolean | undefined;
  readonly settings?: Readonly<Record<string, unknown>> | undefined;
  readonly maxRequestsPerSecond?: number | null | undefined;
  readonly code?: string | undefined;
}

export interface FunctionCodeRecord {
  readonly functionId: string;
  readonly version: number;
  readonly code: string;
  readonly createdAt: number;
}

/** Why an insert or update wrote nothing. */
export type FunctionWriteRefusal = 'limit' | 'name_taken';

export interface FunctionStore {
  /**
   * Stores a function destination with version 1 of its code, in one commit
   * that bumps the config version; refuses (writing nothing) when the
   * source already has `maxPerSource` of them or one with that name. Safe
   * against concurrent inserts on several nodes (the source's row is locked).
   */
  insertFunctionDestination(fn: NewFunctionDestination, maxPerSource: number): Promise<FunctionDestinationRecord | FunctionWriteRefusal>;
  /** Applies a patch (new code: the next version); undefined when there is none with that id. */
  updateFunctionDestination(id: string, patch: FunctionDestinationPatch, at: number): Promise<FunctionDestinationRecord | FunctionWriteRefusal | undefined>;
  /** One source's function destinations (every source's when undefined), oldest first. */
  listFunctionDestinations(sourceId?: string): Promise<FunctionDestinationRecord[]>;
  getFunctionDestination(id: string): Promise<FunctionDestinationRecord | undefined>;
  /** One version of the code (undefined version: the current one). */
  getFunctionCode(id: string, version?: number): Promise<FunctionCodeRecord | undefined>;
  /** Deletes it with its versions (pending deliveries then fail, saying so); false when absent. */
  deleteFunctionDestination(id: string): Promise<boolean>;
}
