/**
 * The logging interface below functions/: structured, one object of attributes per line. The Lambda
 * adapter plugs Powertools in; local runs and tests use the JSON console logger or a capturing one.
 */

export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export type LogAttributes = Record<string, unknown>;

export interface Logger {
  debug(message: string, attributes?: LogAttributes): void;
  info(message: string, attributes?: LogAttributes): void;
  warn(message: string, attributes?: LogAttributes): void;
  error(message: string, attributes?: LogAttributes): void;
  /** A logger whose every line also carries `attributes` (e.g. DVM uid, phase, generation, attempt). */
  child(attributes: LogAttributes): Logger;
}

type Level = LogLevel;
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** `level` comes from the deployable's configuration (LOG_LEVEL in each schema); default info. */
export function jsonLogger(base: LogAttributes = {}, level: Level = "info", write: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Logger {
  const emit = (at: Level, message: string, attributes?: LogAttributes) => {
    if (ORDER[at] < (ORDER[level] ?? 20)) return;
    write(JSON.stringify({ level: at.toUpperCase(), timestamp: new Date().toISOString(), message, ...base, ...attributes }));
  };
  return {
    debug: (m, a) => emit("debug", m, a),
    info: (m, a) => emit("info", m, a),
    warn: (m, a) => emit("warn", m, a),
    error: (m, a) => emit("error", m, a),
    child: (attributes) => jsonLogger({ ...base, ...attributes }, level, write),
  };
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};
