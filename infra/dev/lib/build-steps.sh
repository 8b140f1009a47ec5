# shellcheck shell=bash
# Shared by the build scripts under infra/ (sourced, not run): progress lines on stderr, quiet steps
# whose output is shown only when they fail, and a lock so that concurrent runs (a developer and CI,
# two terminals, two test runs) wait for each other instead of racing.
# The sourcing script sets STEP_PREFIX (shown in every line) and STEP_LOG_DIR (where step logs go).

say() { printf '[%s] %s\n' "$STEP_PREFIX" "$*" >&2; }

# run_logged NAME COMMAND...: runs a step quietly into $STEP_LOG_DIR/build-NAME.log; on failure shows
# the log's last lines and exits, so errors are never swallowed.
run_logged() {
  local what="$1"; shift
  local log="$STEP_LOG_DIR/build-$what.log" start=$SECONDS rc
  # Not `if ! "$@"`: in that context bash ignores `set -e` inside shell functions, so a failing
  # command in the middle of a step function would go unnoticed. A subshell with its own `set -e` fails.
  set +e
  (set -e; "$@") >"$log" 2>&1
  rc=$?
  set -e
  if ((rc != 0)); then
    say "$what: FAILED; last lines of $log:"
    tail -n 40 "$log" >&2
    exit 1
  fi
  say "$what: done in $((SECONDS - start)) s"
}

# take_lock FILE: holds an exclusive lock on FILE (file descriptor 9) until the script exits.
take_lock() {
  command -v flock >/dev/null 2>&1 || return 0
  exec 9>"$1"
  flock -n 9 || { say "another build is running; waiting for it"; flock 9; }
}
