#!/usr/bin/env bash
# Upgrades simulated clusters of 1,000 and 5,000 nodes and measures the orchestrator itself: wall time, its own CPU
# seconds (utime + stime of the `upgrade` process, not of the commands it starts), its peak memory (VmHWM), and the
# number and bytes of cluster reads.
#
# usage: scripts/bench-scale.sh [NODES...]      (default: 1000 5000)
#
# The hosts are local connections (ansible_connection: local) and every command is instant: cordon, drain and
# uncordon are `true`, the node's upgrade command creates a marker file, its restart is `true`. The cluster API is
# scripts/bench-scale/kubectl (Python, reads from files: the POSIX-sh fake cluster forks per node and would measure
# itself), whose node objects are about 4 KB each. The masters are already at the target: the run is
# `--phase nodes,verify` with serial 10% and upgrade_node_ready_delay 1. Release build (built once here).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 5000)

# UPGRADE_BIN: another build of the binary (a debug build, to try the script on small sizes).
# BENCH_SCALE_DIR: where the work directories (state directory, logs, journal) are made; /tmp by default. The file
# system counts: see "Performance" in README.md.
upgrade=${UPGRADE_BIN:-}
if [ -z "$upgrade" ]; then
  echo "building (release)..." >&2
  cargo build --release --quiet --bin upgrade
  upgrade=$root/target/release/upgrade
fi
ticks=$(getconf CLK_TCK)

# The work directories are removed when every size has run: on a file system without a journal (ext4 as this
# project's machine has it) a file created within seconds of many deletions pays for a scan of the deleted inodes,
# and the next size would pay for the last one's clean-up (1 ms per node of its host logs at 2,000 nodes).
works=()
trap 'rm -rf "${works[@]}"' EXIT

printf '| nodes | wall | orchestrator CPU | CPU per node | peak memory | cluster reads (poller) | bytes read | min gap between poller reads |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
for n in "${sizes[@]}"; do
  work=$(mktemp -d "${BENCH_SCALE_DIR:-/tmp}/bench-scale.XXXXXX")
  works+=("$work")
  mkdir -p "$work/up"
  echo "v1.28.5 v1.29.1" >"$work/versions"
  {
    printf 'm1\nm2\nm3\n'
    seq -f 'n%g' 1 "$n"
  } >"$work/order"
  {
    printf 'all:\n  vars:\n'
    printf '    ansible_connection: local\n    upgrade_target_version: v1.29.1\n'
    printf '    upgrade_kubectl: "%s --state %s"\n' "$root/scripts/bench-scale/kubectl" "$work"
    printf '    upgrade_kubectl_adm: "true"\n'
    printf '    upgrade_kubeadm: "true"\n'
    printf '    upgrade_node_upgrade_command: ": > %s/up/{{ node_name }}"\n' "$work"
    printf '    upgrade_node_restart_command: "true"\n    upgrade_daemon_reload_command: "true"\n'
    # The masters are at the target already; their own command keeps kubeadm's certificate check (whose table a
    # `true` kubeadm does not print: an unreadable expiry fails preflight) out of the measurement.
    printf '    upgrade_master_upgrade_command: "true"\n'
    printf '    upgrade_nodes_serial: "10%%"\n    upgrade_node_ready_delay: 1\n'
    printf '  children:\n    masters:\n      hosts:\n        m[1:3]:\n    nodes:\n      hosts:\n        n[1:%s]:\n' "$n"
  } >"$work/hosts.yml"

  start=$(date +%s.%N)
  "$upgrade" --inventory "$work/hosts.yml" --phase nodes,verify --state-dir "$work/state" --output json \
    >"$work/out.jsonl" 2>"$work/err.txt" &
  pid=$!
  cpu=0 hwm=0
  while kill -0 "$pid" 2>/dev/null; do
    # A process that has exited but is not yet reaped has no VmHWM: keep the last whole sample.
    if stat=$(cat "/proc/$pid/stat" 2>/dev/null) && status=$(cat "/proc/$pid/status" 2>/dev/null); then
      sample=$(awk '/^VmHWM/ { print $2 }' <<<"$status")
      if [ -n "$sample" ]; then
        set -- ${stat##*) }
        cpu=$(( ${12} + ${13} ))
        hwm=$sample
      fi
    fi
    sleep 0.1
  done
  wait "$pid" && code=0 || code=$?
  end=$(date +%s.%N)
  upgraded=$(ls "$work/up" | wc -l)
  [ "$code" -eq 0 ] && [ "$upgraded" -eq "$n" ] || {
    unset 'works[-1]' # kept for reading
    echo "run of $n nodes failed (exit $code, $upgraded upgraded): see $work" >&2
    tail -5 "$work/err.txt" >&2
    exit 1
  }
  python3 - "$work/reads.log" "$n" "$start" "$end" "$cpu" "$ticks" "$hwm" <<'PY'
import sys
log, n, start, end, cpu, ticks, hwm = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:8])
reads = [l.split("\t") for l in open(log).read().splitlines()]
nodes = [(float(t), k, int(b)) for t, k, b in reads if k in ("get-node", "get-nodes")]
# The first node read is preflight's, the last is verify's: the others are the poller's.
poller = nodes[1:-1]
gaps = [b[0] - a[0] for a, b in zip(poller, poller[1:])]
total_bytes = sum(int(b) for _, _, b in reads)
cpu_s = cpu / ticks
print(f"| {n:,} | {end - start:.1f} s | {cpu_s:.2f} s | {cpu_s / n * 1000:.2f} ms | {hwm / 1024:.0f} MB "
      f"| {len(reads)} ({len(poller)}) | {total_bytes / 1e6:.1f} MB | {min(gaps) if gaps else 0:.2f} s |")
PY
done
