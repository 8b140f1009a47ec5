/**
 * The one error for a missing or malformed setting of any deployable (phase function, trigger, relay,
 * local controller, CLI): the message names the variable and what is wrong with it, so an operator can
 * fix it without reading code. The phase function's error classification (src/aws/errors.ts) and the
 * relay's exit code branch on this class.
 */
export class ConfigurationError extends Error {
  override readonly name: string = "ConfigurationError";
  constructor(
    message: string,
    /** The first variable (or SSM parameter) at fault, when there is one. */
    readonly variable?: string,
  ) {
    super(message);
  }
}
