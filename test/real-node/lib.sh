# Helpers of the real-node run (sourced by run.sh): timed steps, an undo journal that puts
# every system change back in reverse order (also on failure), and waits with a deadline.

RUN_START=$SECONDS
STEP_NAME=''
STEP_START=$SECONDS
declare -a UNDO=()
# Paths outside the work folder that did not exist before the run: removed at the very end
# (a runtime process may still write a lock file there while the rest is undone).
declare -a NEW_PATHS=()
# new_path PATH: remember PATH for removal at the end when it does not exist yet.
new_path() { [ -e "$1" ] || NEW_PATHS+=("$1"); }
remove_new_paths() {
  local p
  for p in "${NEW_PATHS[@]}"; do rm -rf "$p"; done
}
declare -a TIMINGS=()

log() { printf '[real-node %4ds] %s\n' "$((SECONDS - RUN_START))" "$*" >&2; }

# step NAME: closes the previous step (printing its duration) and opens the next one.
step() {
  end_step
  STEP_NAME=$1
  STEP_START=$SECONDS
  log "== $STEP_NAME"
}
end_step() {
  if [ -n "$STEP_NAME" ]; then
    local took=$((SECONDS - STEP_START))
    TIMINGS+=("$(printf '%5ds  %s' "$took" "$STEP_NAME")")
    log "   done in ${took}s: $STEP_NAME"
    STEP_NAME=''
  fi
}
print_timings() {
  end_step
  log "timings:"
  local t
  for t in "${TIMINGS[@]}"; do printf '    %s\n' "$t" >&2; done
}

# undo CMD...: journal a command that reverts the change about to be made. Registered
# before the change, so a change interrupted half-way is reverted too (undo steps tolerate
# finding nothing to revert).
undo() { UNDO+=("$*"); }
run_undo() {
  local i
  for ((i = ${#UNDO[@]} - 1; i >= 0; i--)); do
    eval "${UNDO[$i]}" >/dev/null 2>&1 || log "   (undo step failed, continuing: ${UNDO[$i]})"
  done
  UNDO=()
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds; fails the run after SECONDS.
wait_for() {
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit)) started=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      log "timed out after ${limit}s waiting for: $what"
      return 1
    fi
    sleep 1
  done
  log "   $what ($((SECONDS - started))s)"
}

fail() {
  log "FAILED: $*"
  exit 1
}

# sysctl_set KEY VALUE: sets a sysctl, journalling its current value.
sysctl_save() {
  local key=$1 path="/proc/sys/${1//.//}"
  [ -e "$path" ] || return 0
  undo "echo $(cat "$path") > $path"
}

# restore_firewall iptables|ip6tables SNAPSHOT: the tables as they were, and no chain this
# run's components added. A table that was empty is missing from the snapshot, so a restore
# alone would leave the kubelet's and kube-proxy's chains (and the jumps to them) in it: such
# a table is flushed back to empty instead.
restore_firewall() {
  local ipt=$1 before=$2 table
  [ -s "$before" ] && $ipt-restore <"$before"
  for table in filter nat mangle raw; do
    grep -q "^\*$table\$" "$before" 2>/dev/null && continue
    $ipt -t "$table" -F 2>/dev/null
    $ipt -t "$table" -X 2>/dev/null
  done
  return 0
}
