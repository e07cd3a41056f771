#!/bin/sh
# Compares our host patterns with ansible-core's, host names in order, two ways:
#   - `inventory_list --limit PATTERN X` (Inventory::select) against `ansible -i X PATTERN --list-hosts`;
#   - `inventory_list --subset PATTERN X` (Inventory::limit) against `ansible -i X all --limit PATTERN --list-hosts`.
# Where Ansible selects nothing (it warns and carries on) we stop with an error on purpose: those cases are reported
# as `skipped:` when we do fail, and compared otherwise. `@FILE` is only a --limit form in Ansible.
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
    for form in select subset; do
        if [ "$form" = select ]; then
            case "$pattern" in @*) continue ;; esac
            set -- "$pattern"
            ours_flag=--limit
        else
            set -- all --limit "$pattern"
            ours_flag=--subset
        fi
        # `hosts (N):` then one indented host a line; warnings go to stderr.
        # ansible-core's hosts for the pattern, or those it gave before on the same files (scripts/ansible-reference).
        if ANSIBLE_NOCOLOR=1 scripts/ansible-reference --place "$PWD" --input "$(dirname "$inv")" -- \
            "$ANSIBLE" -i "$inv" "$@" --list-hosts >"$tmp/ansible.raw" 2>"$tmp/ansible.err"; then
            sed -n 's/^    //p' "$tmp/ansible.raw" >"$tmp/ansible.txt"
        elif grep -q 'leaves us with no hosts' "$tmp/ansible.err"; then
            : >"$tmp/ansible.txt" # a --limit that leaves nothing: the same as selecting nothing
        else
            echo "failed" >"$tmp/ansible.txt"
        fi
        if ! "$ours_bin" "$ours_flag" "$pattern" "$inv" >"$tmp/ours.txt" 2>"$tmp/ours.err"; then
            echo "failed" >"$tmp/ours.txt"
        fi
        what="$inv $form '$pattern'"
        if [ ! -s "$tmp/ansible.txt" ] && [ "$(cat "$tmp/ours.txt")" = "failed" ]; then
            echo "skipped: $what (Ansible selects nothing, we refuse on purpose)"
        elif diff -u "$tmp/ansible.txt" "$tmp/ours.txt" >"$tmp/diff"; then
            echo "same: $what"
        else
            echo "DIFFERENT: $what"; cat "$tmp/diff"; head -5 "$tmp/ansible.err" "$tmp/ours.err"; status=1
        fi
    done
done
exit $status
