/** The watch relay: watch DVMs and what they own, coalesce per uid, forward reconcile requests. */

export { Relay, type RelayStats } from "./relay";

export { InProcessTransport } from "./transport";
