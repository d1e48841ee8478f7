/**
 * The store's schema is newer than this build knows: another node (or a
 * rollback of this one) ran later migrations. Starting anyway could misread
 * or corrupt data, so the store refuses; the fix is to upgrade Switchyard.
 */
export class SchemaTooNewError extends Error {
  override readonly name = 'SchemaTooNewError';

  constructor(
    readonly found: number,
    readonly known: number,
  ) {
    super(`the database schema is version ${found}, newer than this Switchyard knows (${known}); upgrade Switchyard`);
  }
}
