#!/usr/bin/env bash
# Compares our reading of Ansible Vault with ansible-core's (scripts/compare-with-ansible runs it):
#   - the vault fixtures (tests/fixtures/inventories/vault: inline `!vault` values of format 1.1 and 1.2, group_vars/
#     and host_vars/ files and an INI inventory encrypted whole, a password file and a password script):
#     `ansible-inventory --list` with the same --vault-id options against `inventory_list`, after ansible-core's own
#     VaultLib decrypts the `!vault` values it lists still encrypted (it decrypts them when a task uses them);
#   - values and files encrypted now by `ansible-vault` with a random password and random text (a new salt each
#     time), default and labelled vault ids, read by us;
#   - a wrong password: ansible-core and we both refuse the inventory.
# Env: VENV (default target/ansible-venv).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
VENV="${VENV:-$root/target/ansible-venv}"
cargo build -q --example inventory_list
ours="${CARGO_TARGET_DIR:-$root/target}/debug/examples/inventory_list"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
# ansible-core's own decryption of what `ansible-inventory --list` leaves encrypted, then sorted keys (through the
# caller's `reference`, as ansible-inventory).
normalise() {
    "${reference[@]}" --stdin -- "$VENV/bin/python" -c '
import json, sys
from ansible.cli import CLI
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import VaultLib
secrets = CLI.setup_vault_secrets(DataLoader(), sys.argv[1:], auto_prompt=False, initialize_context=False)
vault = VaultLib(secrets)
def plain(v):
    if isinstance(v, dict) and list(v) == ["__ansible_vault"]:
        return vault.decrypt(v["__ansible_vault"]).decode()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v
d = plain(json.load(sys.stdin))
d.get("_meta", {}).pop("profile", None)
print(json.dumps(d, sort_keys=True, indent=1))' "$@"
}
sorted() { python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True, indent=1))'; }
# compare NAME INVENTORY VAULT_ID...: both tools list the inventory with these vault ids (absolute paths), in the
# inventory's directory; both failing counts as agreeing.
compare() {
    local name="$1" inv="$2"; shift 2
    local args=() id
    for id in "$@"; do args+=(--vault-id "$id"); done
    # ansible-core's listing and decryption, or what they gave before on the same files (scripts/ansible-reference):
    # the inventory's directory, the password files and scripts, the listing decrypted.
    local reference=("$root/scripts/ansible-reference" --place "$root" --place "$tmp" --input "$(dirname "$inv")")
    for id in "$@"; do reference+=(--input "${id#*@}"); done
    if (cd "$(dirname "$inv")" && ANSIBLE_NOCOLOR=1 "${reference[@]}" -- \
        "$VENV/bin/ansible-inventory" -i "$(basename "$inv")" --list "${args[@]}") >"$tmp/ansible.raw" 2>"$tmp/ansible.err"; then
        (cd "$(dirname "$inv")" && normalise "$@") <"$tmp/ansible.raw" >"$tmp/ansible.json"
    else
        echo failed >"$tmp/ansible.json"
    fi
    if (cd "$(dirname "$inv")" && "$ours" "${args[@]}" "$(basename "$inv")") >"$tmp/ours.raw" 2>"$tmp/ours.err"; then
        sorted <"$tmp/ours.raw" >"$tmp/ours.json"
    else
        echo failed >"$tmp/ours.json"
    fi
    if diff -u "$tmp/ansible.json" "$tmp/ours.json" >"$tmp/diff"; then
        echo "same: $name"
    else
        echo "DIFFERENT: $name"; head -40 "$tmp/diff"; cat "$tmp/ansible.err" "$tmp/ours.err" | head -10; status=1
    fi
}
fixtures="$root/tests/fixtures/inventories/vault"
default="default@$fixtures/password" ops="ops@$fixtures/ops-password.sh"
compare "vault: inline 1.1/1.2 values, encrypted group_vars/host_vars" "$fixtures/hosts.yml" "$default" "$ops"
compare "vault: an INI inventory encrypted whole" "$fixtures/encrypted-ini/hosts" "$default"
# The vault id is a hint, not part of what is signed: with the labels swapped every password is still tried...
swapped=("default@$fixtures/ops-password.sh" "ops@$fixtures/password")
compare "vault: labels swapped, every password tried" "$fixtures/hosts.yml" "${swapped[@]}"
# ...unless ANSIBLE_VAULT_ID_MATCH says only the text's own id may decrypt it: then both refuse.
ANSIBLE_VAULT_ID_MATCH=1 compare "vault: labels swapped with ANSIBLE_VAULT_ID_MATCH, refused by both" \
    "$fixtures/hosts.yml" "${swapped[@]}"
echo "not-the-password" >"$tmp/wrong"
compare "vault: a wrong password, refused by both" "$fixtures/hosts.yml" "default@$tmp/wrong" "$ops"

# Fresh texts: a random password and random values, encrypted now by ansible-vault (new salts each run).
fresh="$tmp/fresh"
mkdir -p "$fresh/group_vars"
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$fresh/pw-default"
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$fresh/pw-team"
value_a="a-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')"
value_b="b-$(head -c 12 /dev/urandom | base64 | tr -d '/+=') with spaces: and 'quotes'"
(
    cd "$fresh"
    {
        echo "all:"
        echo "  hosts:"
        echo "    h1:"
        "$VENV/bin/ansible-vault" encrypt_string --vault-id default@pw-default "$value_a" --name a 2>/dev/null | sed 's/^/      /'
        "$VENV/bin/ansible-vault" encrypt_string --vault-id team@pw-team "$value_b" --name b 2>/dev/null | sed 's/^/      /'
    } >hosts.yml
    printf 'whole_file: "%s"\nnumber: 42\nlist: [x, "%s"]\n' "$value_a" "$value_b" >group_vars/all.yml
    "$VENV/bin/ansible-vault" encrypt --vault-id team@pw-team group_vars/all.yml >/dev/null 2>&1
)
UPGRADE_ANSIBLE_REFERENCE=off compare "vault: fresh ansible-vault texts (random password and values, ids default and team)" "$fresh/hosts.yml" \
    "default@$fresh/pw-default" "team@$fresh/pw-team"
exit $status
