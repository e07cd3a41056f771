#!/bin/sh
# Measures how long loading a 5,000-host INI inventory (ranges, several groups, group_vars and host_vars) takes
# in release mode. Target: well under 100 ms.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
{
    echo "[masters]"; echo "master[1:3].example.com"
    echo "[etcd:children]"; echo "masters"
    for rack in $(seq 1 50); do
        echo "[rack$rack]"
        echo "node-r$rack-[0001:0100].example.com openshift_node_group_name=\"node-config-compute\" rack=$rack"
        echo "[rack$rack:vars]"; echo "rack_label=r$rack"
        echo "[nodes:children]"; echo "rack$rack"
    done
    echo "[nodes]"; echo "master[1:3].example.com openshift_node_group_name=\"node-config-master\""
    echo "[OSEv3:children]"; printf 'masters\nnodes\netcd\n'
    echo "[OSEv3:vars]"; echo "ansible_user=root"; echo "upgrade_nodes_serial=\"10%\""
} >"$dir/hosts"
mkdir -p "$dir/group_vars/OSEv3" "$dir/host_vars"
printf 'ansible_become: true\nupgrade_nodes_max_fail_percentage: 10\n' >"$dir/group_vars/OSEv3/vars.yml"
printf 'role: compute\n' >"$dir/group_vars/nodes.yml"
for i in $(seq 1 100); do printf 'special: %s\n' "$i" >"$dir/host_vars/node-r1-$(printf %04d "$i").example.com.yml"; done
cargo build -q --release --example inventory_list
target/release/examples/inventory_list --bench 20 "$dir/hosts"
