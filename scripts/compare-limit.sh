#!/bin/sh
# Compares our host patterns with ansible-core's: `inventory_list --limit PATTERN X` (Inventory::select) against
# `ansible -i X PATTERN --list-hosts`, host names in order. Where Ansible selects nothing (it warns and carries on)
# we stop with an error on purpose: those cases are reported as `skipped:` when we do fail, and compared otherwise.
# Usage: scripts/compare-limit.sh INVENTORY PATTERN... [-- INVENTORY PATTERN...]
# Env: ANSIBLE (default `ansible`).
set -eu
ANSIBLE=${ANSIBLE:-ansible}
cargo build -q --example inventory_list
ours_bin=target/debug/examples/inventory_list
status=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inv=""
for arg in "$@"; do
    if [ -z "$inv" ]; then
        inv=$arg
        continue
    fi
    if [ "$arg" = "--" ]; then
        inv=""
        continue
    fi
    pattern=$arg
    # `hosts (N):` then one indented host a line; warnings go to stderr.
    if ANSIBLE_NOCOLOR=1 "$ANSIBLE" -i "$inv" "$pattern" --list-hosts >"$tmp/ansible.raw" 2>"$tmp/ansible.err"; then
        sed -n 's/^    //p' "$tmp/ansible.raw" >"$tmp/ansible.txt"
    else
        echo "failed" >"$tmp/ansible.txt"
    fi
    if "$ours_bin" --limit "$pattern" "$inv" >"$tmp/ours.txt" 2>"$tmp/ours.err"; then
        :
    else
        echo "failed" >"$tmp/ours.txt"
    fi
    if [ ! -s "$tmp/ansible.txt" ] && [ "$(cat "$tmp/ours.txt")" = "failed" ]; then
        echo "skipped: $inv '$pattern' (Ansible selects nothing, we refuse on purpose)"
    elif diff -u "$tmp/ansible.txt" "$tmp/ours.txt" >"$tmp/diff"; then
        echo "same: $inv '$pattern'"
    else
        echo "DIFFERENT: $inv '$pattern'"; cat "$tmp/diff"; head -5 "$tmp/ansible.err" "$tmp/ours.err"; status=1
    fi
done
exit $status
