#!/usr/bin/env bash
# The scale benchmark (scripts/bench-scale.sh) on the real Kubernetes API server: a control plane started by
# scripts/real-api (kube-apiserver v1.34.4 over Debian's etcd, kwok simulating the kubelets) holding 3 masters at
# v1.29.1 and NODES kwok nodes at v1.28.5; `upgrade --phase nodes,verify` with serial 10% over local connections,
# each node's upgrade reporting its new kubelet version through the API (the status subresource), cordon and drain
# `true` as in bench-scale.sh so the orchestrator is measured, not kubectl's drain. Measures the orchestrator (wall,
# CPU, peak memory), the API server's own CPU during the run and its peak memory, and the node reads it served (its
# apiserver_request_total for nodes: LISTs, whole node lists, also per second of the run, the poll interval
# (upgrade_node_ready_delay: 1); GETs, one node's: the poller's read when one node waits, and kubectl's own).
#
# usage: scripts/bench-scale-real-api.sh [NODES...]   (default: 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000)
upgrade=${UPGRADE_BIN:-}
if [ -z "$upgrade" ]; then
  cargo build --release --quiet --bin upgrade
  upgrade=$root/target/release/upgrade
fi
ticks=$(getconf CLK_TCK)
cpu_of() { local s; s=$(cat "/proc/$1/stat"); set -- ${s##*) }; echo $(( ${12} + ${13} )); }
node_reads() { # VERB: the LISTs (whole node lists: preflight, the poller, verify) or GETs (one node) of nodes served so far
  $k get --raw /metrics | awk -v verb="verb=\"$1\"" '/^apiserver_request_total\{/ && /resource="nodes"/ && /subresource=""/ && index($0, verb) { n += $NF } END { print n + 0 }'
}
printf '| nodes | wall | orchestrator CPU | CPU per node | peak memory | API server CPU | API server peak memory | node lists served | per second of the run | single-node GETs |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for n in "${sizes[@]}"; do
  work=$(mktemp -d "${BENCH_SCALE_DIR:-/tmp}/bench-real-api.XXXXXX")
  trap 'scripts/real-api --stop "$work/api"; rm -rf "$work"' EXIT
  bins=$(scripts/real-api "$work/api")
  k="$bins/kubectl --kubeconfig=$work/api/admin.kubeconfig"
  {
    echo '{"apiVersion": "v1", "kind": "List", "items": ['
    sep=""
    for name in m1 m2 m3 $(seq -f 'n%g' 1 "$n"); do
      printf '%s{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "%s", "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": {"type": "kwok"}}}\n' "$sep" "$name"
      sep=","
    done
    echo ']}'
  } | $k apply -f - >/dev/null
  for name in m1 m2 m3; do echo "$name v1.29.1"; done >"$work/versions"
  seq -f 'n%g v1.28.5' 1 "$n" >>"$work/versions"
  xargs -P 8 -L 1 sh -c "$k patch node \"\$0\" --subresource=status --type=merge -p \"{\\\"status\\\":{\\\"nodeInfo\\\":{\\\"kubeletVersion\\\":\\\"\$1\\\"}}}\" >/dev/null" <"$work/versions"
  until [ "$($k get nodes --no-headers 2>/dev/null | grep -c ' Ready ')" -ge $((n + 3)) ]; do sleep 1; done
  {
    printf 'all:\n  vars:\n'
    printf '    ansible_connection: local\n    upgrade_target_version: v1.29.1\n'
    printf '    upgrade_kubectl: "%s"\n' "$k"
    printf '    upgrade_kubectl_adm: "true"\n    upgrade_kubeadm: "true"\n'
    printf '    upgrade_node_upgrade_command: "%s patch node {{ node_name }} --subresource=status --type=merge -p %s"\n' "$k" \
      "'{\\\"status\\\":{\\\"nodeInfo\\\":{\\\"kubeletVersion\\\":\\\"v1.29.1\\\"}}}'"
    printf '    upgrade_node_restart_command: "true"\n    upgrade_daemon_reload_command: "true"\n'
    # The masters are at the target already; their own command keeps kubeadm's certificate check (whose table a
    # `true` kubeadm does not print: an unreadable expiry fails preflight) out of the measurement.
    printf '    upgrade_master_upgrade_command: "true"\n'
    printf '    upgrade_nodes_serial: "10%%"\n    upgrade_node_ready_delay: 1\n'
    printf '  children:\n    masters:\n      hosts:\n        m[1:3]:\n    nodes:\n      hosts:\n        n[1:%s]:\n' "$n"
  } >"$work/hosts.yml"
  api_pid=$(sed -n 2p "$work/api/pids")
  api_cpu0=$(cpu_of "$api_pid") lists0=$(node_reads LIST) gets0=$(node_reads GET)
  start=$(date +%s.%N)
  "$upgrade" --inventory "$work/hosts.yml" --phase nodes,verify --state-dir "$work/state" --output json \
    >"$work/out.jsonl" 2>"$work/err.txt" &
  pid=$!
  cpu=0 hwm=0
  while kill -0 "$pid" 2>/dev/null; do
    if status=$(cat "/proc/$pid/status" 2>/dev/null) && c=$(cpu_of "$pid" 2>/dev/null); then
      sample=$(awk '/^VmHWM/ { print $2 }' <<<"$status")
      [ -z "$sample" ] || { cpu=$c; hwm=$sample; }
    fi
    sleep 0.1
  done
  wait "$pid" && code=0 || code=$?
  end=$(date +%s.%N)
  api_cpu=$(( $(cpu_of "$api_pid") - api_cpu0 )) lists=$(( $(node_reads LIST) - lists0 )) gets=$(( $(node_reads GET) - gets0 ))
  api_hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$api_pid/status")
  at=$($k get nodes -o jsonpath='{range .items[*]}{.status.nodeInfo.kubeletVersion}{"\n"}{end}' | grep -c v1.29.1)
  [ "$code" -eq 0 ] && [ "$at" -eq $((n + 3)) ] || {
    trap - EXIT
    echo "run of $n nodes failed (exit $code, $at at the target): see $work" >&2
    tail -5 "$work/err.txt" >&2
    exit 1
  }
  python3 -c "
n, start, end, cpu, ticks, hwm, api, api_hwm, lists, gets = $n, $start, $end, $cpu, $ticks, $hwm, $api_cpu, $api_hwm, $lists, $gets
print(f'| {n:,} | {end - start:.1f} s | {cpu / ticks:.2f} s | {cpu / ticks / n * 1000:.2f} ms | {hwm / 1024:.0f} MB | {api / ticks:.1f} s | {api_hwm / 1024:.0f} MB | {lists} | {lists / (end - start):.2f} | {gets} |')"
  scripts/real-api --stop "$work/api"
  rm -rf "$work"
  trap - EXIT
done
