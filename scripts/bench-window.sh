#!/usr/bin/env bash
# The cordoned window of each node on the real Debian hosts (tests/support/debian_host.rs), with and without
# upgrade_prefetch, from a mirror that serves each package file after DELAY_MS (1000: a download of about 3 s per
# host: kubeadm, kubelet, kubectl). Runs the ignored benchmark debian::bench_window twice (ROUNDS times each) and
# prints, per mode, each host's window and its parts, then the mean window, the mean of drain + upgrade + restart +
# ready, and the wall time.
#   scripts/bench-window.sh [NODES] [DELAY_MS] [ROUNDS]
# Needs root and the cached Debian root (scripts/build-debian-root), as the Debian tests do.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-3} delay=${2:-1000} rounds=${3:-1}
cargo test --quiet --test lib --no-run >/dev/null 2>&1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for mode in false true; do
  for _ in $(seq "$rounds"); do
    BENCH_WINDOW_NODES=$nodes BENCH_WINDOW_DELAY_MS=$delay BENCH_WINDOW_PREFETCH=$mode \
      cargo test --quiet --test lib debian::bench_window -- --ignored --nocapture --exact 2>/dev/null |
      grep '^BENCH ' >>"$out" || { echo "bench-window: the run with upgrade_prefetch=$mode failed" >&2; exit 1; }
  done
done
awk -v delay="$delay" '
  { delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
  f["host"] != "" {
    m = f["prefetch"]; n[m]++; w[m] += f["window"]; floor[m] += f["drain"] + f["upgrade"] + f["restart"] + f["ready"]
    up[m] += f["upgrade"]; rd[m] += f["ready"]
    printf "prefetch=%-5s %-3s window %6.2f s  drain %5.2f  upgrade %5.2f  restart %5.2f  ready %5.2f  other %5.2f\n",
      m, f["host"], f["window"], f["drain"], f["upgrade"], f["restart"], f["ready"], f["other"]
  }
  f["wall"] != "" { wall[f["prefetch"]] += f["wall"]; pre[f["prefetch"]] += f["preflight"]; runs[f["prefetch"]]++ }
  END {
    printf "\nmirror: each package file after %d ms\n", delay
    for (m in n) printf "prefetch=%-5s mean window %5.2f s, upgrade part %5.2f s, ready part %4.2f s; drain+upgrade+restart+ready %5.2f s (window / that %.2f); preflight %5.2f s, wall %6.2f s\n",
      m, w[m] / n[m], up[m] / n[m], rd[m] / n[m], floor[m] / n[m], w[m] / floor[m], pre[m] / runs[m], wall[m] / runs[m]
  }' "$out"
