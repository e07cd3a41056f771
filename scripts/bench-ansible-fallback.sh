#!/usr/bin/env bash
# What a task run through ansible-core costs (issue 26, item 3): N tasks of `ping` (a module upgrade does not
# implement, so each runs as a one-task ansible-playbook run) against N tasks of `command: "true"` (run by upgrade
# itself), on one host over the local connection, with `upgrade run-tasks`; and, for scale, the same N pings as one
# play of ansible-playbook. Prints the wall time of each and the cost per fallback task.
# Env: N (default 10), VENV (default target/ansible-venv), UPGRADE (default target/debug/upgrade, built first; the
# time is ansible-playbook's, so the build profile hardly counts).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
n="${N:-10}"
venv="${VENV:-$root/target/ansible-venv}"
bin="${UPGRADE:-$root/target/debug/upgrade}"
[ -x "$bin" ] || cargo build --quiet
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
printf '[masters]\nh1 ansible_connection=local ansible_python_interpreter=%s\n[all:vars]\nupgrade_ansible_command=%s\n' \
    "$(command -v python3)" "$venv/bin/ansible" >"$dir/hosts.ini"
: >"$dir/ping.yml"
: >"$dir/command.yml"
for i in $(seq "$n"); do
    printf -- '- name: ping %s\n  ping:\n' "$i" >>"$dir/ping.yml"
    printf -- '- name: true %s\n  command: "true"\n' "$i" >>"$dir/command.yml"
done
printf -- '- hosts: all\n  gather_facts: false\n  tasks:\n' >"$dir/play.yml"
sed 's/^/    /' "$dir/ping.yml" >>"$dir/play.yml"
seconds() {
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null || { echo "failed: $*" >&2; exit 1; }
    end=$(date +%s.%N)
    echo "$end - $start" | bc
}
fallback=$(seconds "$bin" run-tasks "$dir/ping.yml" -i "$dir/hosts.ini")
native=$(seconds "$bin" run-tasks "$dir/command.yml" -i "$dir/hosts.ini")
play=$(seconds "$venv/bin/ansible-playbook" -i "$dir/hosts.ini" "$dir/play.yml")
echo "tasks: $n (load average $(cut -d' ' -f1 /proc/loadavg), $(nproc) cores)"
echo "upgrade run-tasks, $n x ping through ansible-core: ${fallback}s"
echo "upgrade run-tasks, $n x command (upgrade's own):    ${native}s"
echo "ansible-playbook, $n x ping in one play:            ${play}s"
echo "per task through ansible-core: $(echo "scale=2; ($fallback - $native) / $n" | bc)s more than upgrade's own module"
