#!/usr/bin/env bash
# Runs the task files of scripts/compare/ with ansible-playbook (ansible-core from PyPI, in a virtualenv) and with
# `upgrade run-tasks` on the same local hosts, then compares each host's recap and registered values.
# Usage: scripts/compare-ansible.sh [TASK_FILE...]   (default: scripts/compare/*.yml)
# Env: VENV (default /tmp/venv-upgrade-compare), UPGRADE (default: target/debug/upgrade, built if missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${VENV:-/tmp/venv-upgrade-compare}"
upgrade="${UPGRADE:-$root/target/debug/upgrade}"
[ -x "$upgrade" ] || (cd "$root" && cargo build -q)
if [ ! -x "$venv/bin/ansible-playbook" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q ansible-core
fi
files=("$@")
[ ${#files[@]} -gt 0 ] || files=("$root"/scripts/compare/*.yml)

status=0
for file in "${files[@]}"; do
    name="$(basename "$file" .yml)"
    work="$(mktemp -d)"
    for tool in ansible upgrade; do
        mkdir -p "$work/$tool/h1" "$work/$tool/h2"
        cp "$file" "$work/$tool/tasks.yml"
        cp "$(dirname "$file")"/*.j2 "$work/$tool/" 2>/dev/null || true
        {
            echo "[hosts]"
            echo "h1 ansible_connection=local host_dir=$work/$tool/h1 ansible_python_interpreter=$venv/bin/python"
            echo "h2 ansible_connection=local host_dir=$work/$tool/h2 ansible_python_interpreter=$venv/bin/python"
        } > "$work/$tool/hosts"
    done
    cat > "$work/ansible/play.yml" <<PLAY
- hosts: all
  gather_facts: false
  connection: local
  tasks:
    - import_tasks: tasks.yml
PLAY
    (cd "$work/ansible" && ANSIBLE_NOCOLOR=1 ANSIBLE_HOST_KEY_CHECKING=0 "$venv/bin/ansible-playbook" -i hosts play.yml) \
        > "$work/ansible.out" 2>&1 || true
    (cd "$work/upgrade" && "$upgrade" run-tasks tasks.yml -i hosts --yes) > "$work/upgrade.out" 2>&1 || true
    if "$venv/bin/python" - "$work" <<'PY'
import json, re, sys, pathlib
work = pathlib.Path(sys.argv[1])
VOLATILE = {"start", "end", "delta", "invocation", "warnings", "deprecations", "dest", "checksum", "md5sum",
            "src", "size", "uid", "gid", "owner", "group", "mode", "state", "gid", "secontext", "diff"}
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in sorted(v.items()) if k not in VOLATILE and not k.startswith("_ansible")}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
def recap(tool):
    text = (work / f"{tool}.out").read_text()
    lines = text.split("PLAY RECAP")[-1].splitlines()
    return {m.group(1): re.sub(r"\s+", " ", m.group(2).strip())
            for m in (re.match(r"^(\S+)\s*:\s*(ok=.*)$", l) for l in lines) if m}
ok = True
ra, ru = recap("ansible"), recap("upgrade")
if ra != ru:
    ok = False
    print(f"recap differs:\n  ansible: {ra}\n  upgrade: {ru}")
for host in ("h1", "h2"):
    files = {t: work / t / host / "semantics.json" for t in ("ansible", "upgrade")}
    # Each tool ran in its own directory; the paths in results say which, and nothing else.
    def load(t, f):
        return clean(json.loads(f.read_text().replace(str(work / t), str(work / "TOOL")))) if f.exists() else None
    dumps = {t: load(t, f) for t, f in files.items()}
    if dumps["ansible"] != dumps["upgrade"]:
        ok = False
        a, u = dumps["ansible"] or {}, dumps["upgrade"] or {}
        for key in sorted(set(a) | set(u)):
            if a.get(key) != u.get(key):
                print(f"{host} {key}:\n  ansible: {json.dumps(a.get(key), sort_keys=True)}\n  upgrade: {json.dumps(u.get(key), sort_keys=True)}")
sys.exit(0 if ok else 1)
PY
    then
        echo "same: $name"
    else
        echo "DIFFERENT: $name (outputs in $work)"
        status=1
    fi
done
exit $status
