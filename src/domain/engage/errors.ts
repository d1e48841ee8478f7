/** An invalid definition; `field` is its JSON path, e.g. `definition.where[0].op`, and the message names it. */
export class DefinitionError extends Error {
  override readonly name = 'DefinitionError';
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`${field} ${problem}`);
  }
}
