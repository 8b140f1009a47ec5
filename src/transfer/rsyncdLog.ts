/**
 * The rsync daemon's side of a failed transfer, from its log (the server pod's rsync container writes its
 * log file to stdout). The client only learns "error starting client-server protocol" or a relayed line;
 * why the daemon refused or failed (a module path it cannot enter, a password mismatch, a file it may not
 * create) is written here. Lines look like `2026/12/03 08:00:45 [23660] rsync: [Receiver] ...`.
 */

/** At most this many of the daemon's lines, each cut to DAEMON_LINE_CHARS: the status stays small. */
export const DAEMON_REASON_LINES = 5;
export const DAEMON_LINE_CHARS = 300;

const LINE = /^(?:\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d )?\[(\d+)\] (.*)$/;
/** Routine lines of every connection: who connected, the module, the final byte counts. */
const ROUTINE = [
  /^connect from /,
  /^rsync allowed access on module /,
  /^rsync (?:to|on) \S+ from /,
  /^receiving file list$/,
  /^sent \d+ bytes/,
  /^rsyncd version /,
];
const TROUBLE = /error|fail|denied|refused|not permitted|unknown module|mismatch|invalid|cannot|can't|@ERROR/i;

/**
 * The daemon's error lines of the newest connection to `module`, oldest first, without timestamps and pids;
 * empty when the log says nothing about that module. A connection is tied to the module by its pid: the
 * daemon serves each connection in a process of its own and names the module in its first lines.
 */
export function daemonErrorLines(log: string, module: string): string[] {
  const entries = log
    .split("\n")
    .map((line) => LINE.exec(line.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ pid: m[1]!, text: m[2]!.trim() }));
  const ofModule = entries.filter((e) => e.text.includes(`module ${module} `) || e.text.includes(` ${module}/ `) || e.text.endsWith(`module ${module}`));
  const pid = ofModule.at(-1)?.pid;
  if (pid === undefined) return [];
  return entries
    .filter((e) => e.pid === pid && TROUBLE.test(e.text) && !ROUTINE.some((r) => r.test(e.text)))
    .slice(-DAEMON_REASON_LINES)
    .map((e) => (e.text.length > DAEMON_LINE_CHARS ? `${e.text.slice(0, DAEMON_LINE_CHARS - 1)}…` : e.text));
}
