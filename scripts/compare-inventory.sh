#!/bin/sh
# Compares our reading of inventories with ansible-core's: `ansible-inventory -i X --list` against
# `cargo run --example inventory_list X`, hostvars and group structure, after sorting keys.
# Usage: scripts/compare-inventory.sh [ANSIBLE_INVENTORY_BIN] INVENTORY...
# Needs ansible-core (e.g. python3 -m venv /tmp/venv && /tmp/venv/bin/pip install ansible-core) and jq or python3.
set -eu
ANSIBLE_INVENTORY=${ANSIBLE_INVENTORY:-ansible-inventory}
cargo build -q --example inventory_list
ours_bin=target/debug/examples/inventory_list
status=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
normalise='import json,sys
d=json.load(sys.stdin)
d.get("_meta",{}).pop("profile",None)
print(json.dumps(d,sort_keys=True,indent=1))'
for inv in "$@"; do
    # Both failing counts as agreeing: the file is not a valid inventory for either.
    # ansible-core reads the inventory and what sits beside it (group_vars/, host_vars/): its result, or the one it
    # gave before on the same files (scripts/ansible-reference).
    if ANSIBLE_NOCOLOR=1 ANSIBLE_INVENTORY_UNPARSED_FAILED=1 scripts/ansible-reference --place "$PWD" \
        --input "$(dirname "$inv")" -- "$ANSIBLE_INVENTORY" -i "$inv" --list >"$tmp/ansible.raw" 2>"$tmp/ansible.err"; then
        python3 -c "$normalise" <"$tmp/ansible.raw" >"$tmp/ansible.json"
    else
        echo "failed" >"$tmp/ansible.json"
    fi
    if "$ours_bin" "$inv" >"$tmp/ours.raw" 2>"$tmp/ours.err"; then
        python3 -c "$normalise" <"$tmp/ours.raw" >"$tmp/ours.json"
    else
        echo "failed" >"$tmp/ours.json"
    fi
    if diff -u "$tmp/ansible.json" "$tmp/ours.json" >"$tmp/diff"; then
        echo "same: $inv"
    else
        echo "DIFFERENT: $inv"; head -60 "$tmp/diff"; cat "$tmp/ansible.err" "$tmp/ours.err" | head -20; status=1
    fi
done
exit $status
