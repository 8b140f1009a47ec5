import { ControllerError } from "../contracts/controllerError";

/**
 * The one error for a missing or malformed setting of any deployable (phase function, trigger, relay,
 * local controller, CLI): the message names the variable and what is wrong with it, so an operator can
 * fix it without reading code. Unexpected for the phase function (thrown, so the event is retried and
 * then kept in the dead-letter queue); the relay exits with code 2 on it.
 */
export class ConfigurationError extends ControllerError {
  override readonly name: string = "ConfigurationError";
  readonly disposition = "unexpected";
  constructor(
    message: string,
    /** The first variable (or SSM parameter) at fault, when there is one. */
    readonly variable?: string,
  ) {
    super(message);
  }
}
