/**
 * The input error: what the user asked for cannot be done (a bad spec, a refused reference, a
 * credential that does not resolve). It fails the migration with `errors`, each naming its field; it is
 * never retried, because the same input fails the same way.
 */
export class MigrationInputError extends Error {
  override readonly name = "MigrationInputError";
  constructor(readonly errors: string[]) {
    super(errors.join("; "));
  }
}
