import { ControllerError } from "./controllerError";

/**
 * The input error: what the user asked for cannot be done (a bad spec, a refused reference, a
 * credential that does not resolve). It fails the migration with `errors`, each naming its field; it is
 * never retried, because the same input fails the same way.
 */
export class MigrationInputError extends ControllerError {
  override readonly name = "MigrationInputError";
  readonly disposition = "input";
  constructor(readonly errors: string[]) {
    super(errors.join("; "));
  }
}
