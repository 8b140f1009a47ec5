/**
 * The data path of a migration: rsync over mutually verified TLS 1.3 (stunnel), from a client pod on
 * the source to a server pod on the destination. Everything here is a pure generator, except PKI
 * generation (async WebCrypto) and password generation (CSPRNG).
 */

export * from "./certificates";
export * from "./configText";
export * from "./credentials";
export * from "./figures";
export * from "./paths";
export * from "./pods";
export * from "./progress";
export * from "./rsyncClient";
export * from "./rsyncd";
export * from "./rsyncdLog";
export * from "./rsyncExit";
export * from "./secrets";
export * from "./stunnel";
