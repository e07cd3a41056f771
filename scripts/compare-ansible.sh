#!/usr/bin/env bash
# Runs the task files of scripts/compare/ with ansible-playbook (ansible-core from PyPI, in a virtualenv) and with
# `upgrade run-tasks` on the same local hosts, then compares each host's recap, registered values (each file dumps
# them into {{ host_dir }}/semantics.json) and the `msg` of each failure a person sees.
# Everything else in scripts/compare/ (included task files under include/, templates, files/) is copied beside the
# task file, so a compare file can include, template and script what it needs.
# Usage: scripts/compare-ansible.sh [TASK_FILE...]   (default: scripts/compare/*.yml)
# Env: VENV (default /tmp/venv-upgrade-compare), UPGRADE (default: target/debug/upgrade, built if missing),
#      JOBS (files compared at once, default 3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Absolute: the hosts' ansible_python_interpreter is used from other directories.
venv="$(realpath -m "${VENV:-/tmp/venv-upgrade-compare}")"
upgrade="${UPGRADE:-$root/target/debug/upgrade}"
jobs="${JOBS:-3}"
[ -x "$upgrade" ] || (cd "$root" && cargo build -q)
if [ ! -x "$venv/bin/ansible-playbook" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q ansible-core
fi
files=("$@")
[ ${#files[@]} -gt 0 ] || files=("$root"/scripts/compare/*.yml)

compare_one() {
    local file="$1" name work tool
    name="$(basename "$file" .yml)"
    work="$(mktemp -d)"
    for tool in ansible upgrade; do
        mkdir -p "$work/$tool/h1" "$work/$tool/h2"
        cp -r "$(dirname "$file")"/. "$work/$tool/"
        cp "$file" "$work/$tool/tasks.yml"
        # The hosts differ in their variables so that conditions, loops and recaps differ between them.
        {
            echo "[hosts]"
            echo "h1 ansible_connection=local host_dir=$work/$tool/h1 ansible_python_interpreter=$venv/bin/python role=db weight=1"
            echo "h2 ansible_connection=local host_dir=$work/$tool/h2 ansible_python_interpreter=$venv/bin/python role=web weight=2"
            echo "[hosts:vars]"
            echo "tier=backend"
            echo "site_version=v1.29.1"
        } > "$work/$tool/hosts"
    done
    # Handlers: `upgrade` takes a task file's handlers from handlers/main.yml beside it, as a role's tasks/ take
    # its handlers/; the play gives ansible-playbook the same file.
    local handlers=""
    [ -f "$work/ansible/handlers/main.yml" ] && handlers=$'  handlers:\n    - import_tasks: handlers/main.yml'
    cat > "$work/ansible/play.yml" <<PLAY
- hosts: all
  gather_facts: false
  connection: local
  tasks:
    - import_tasks: tasks.yml
$handlers
PLAY
    # ansible-core's result for this directory (task file, play, hosts, what sits beside them), or the one it gave
    # before on the same inputs (scripts/ansible-reference).
    (cd "$work/ansible" && ANSIBLE_NOCOLOR=1 ANSIBLE_HOST_KEY_CHECKING=0 ANSIBLE_LOCALHOST_WARNING=0 \
        ANSIBLE_PYTHON_INTERPRETER="$venv/bin/python" VENV="$venv" \
        "$root/scripts/ansible-reference" --place "$work" --input . --outputs h1 --outputs h2 -- \
        "$venv/bin/ansible-playbook" -i hosts play.yml) > "$work/ansible.out" 2>&1 || true
    # ansible-core on PATH: the modules upgrade does not implement run through it (compare/ansible_core.yml).
    (cd "$work/upgrade" && PATH="$venv/bin:$PATH" "$upgrade" run-tasks tasks.yml -i hosts --yes) > "$work/upgrade.out" 2>&1 || true
    if "$venv/bin/python" - "$work" > "$work/report" <<'PY'
import json, re, sys, pathlib
work = pathlib.Path(sys.argv[1])
# Keys whose values are specific to one run or one tool's directory: times, file metadata of files each tool wrote
# itself, the arguments Ansible echoes back, and Python-side warnings.
VOLATILE = {"start", "end", "delta", "invocation", "warnings", "deprecations", "dest", "checksum", "md5sum",
            "src", "size", "uid", "gid", "owner", "group", "mode", "state", "gid", "secontext", "diff",
            # stat: inode numbers, times and ownership of the files each tool's run created.
            "inode", "dev", "atime", "mtime", "ctime", "nlink", "pw_name", "gr_name", "blocks", "block_size",
            "device_type", "isuid", "isgid", "version", "attributes", "charset", "mimetype",
            "remote_checksum", "remote_md5sum", "elapsed",
            # stat: lsattr's flags, which depend on the file system the temp dir sits on (`e` on ext4, none on
            # tmpfs); we do not report attributes (like `attributes` above).
            "attr_flags",
            # pause: the wall-clock time it ended.
            "stop"}
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
def ansible_failures():
    # `fatal: [h1]: FAILED! => {...}` per failed task; a loop prints per-item `failed: [h1] (item=...)` lines instead.
    # The JSON is on one line, or indented over several up to a closing `}` of its own.
    out = {}
    lines = (work / "ansible.out").read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^fatal: \[(\S+)\]: FAILED! => (\{.*)$", line)
        if m:
            text = m.group(2)
            if text == "{":
                end = next((j for j in range(i + 1, len(lines)) if lines[j] == "}"), len(lines) - 1)
                text = "\n".join(lines[i:end + 1])[len(line) - 1:]
            msg = json.loads(text).get("msg")
            out.setdefault(m.group(1), []).append(msg if isinstance(msg, str) else json.dumps(msg))
    return out
def upgrade_failures():
    out, current = {}, None
    for line in (work / "upgrade.out").read_text().splitlines():
        m = re.match(r"^\[(\S+)\] failed: ", line)
        if m:
            current = []
            out.setdefault(m.group(1), []).append(current)
        elif current is not None and line.startswith("    msg: "):
            current.append(line[len("    msg: "):])
        elif current is not None and line.startswith("    item "):
            current.append(None)  # a loop: Ansible shows its items, not one message
        elif not line.startswith("    "):
            current = None
    return {h: ["\n".join(l) for l in msgs if None not in l] for h, msgs in out.items()}
ok = True
ra, ru = recap("ansible"), recap("upgrade")
if ra != ru:
    ok = False
    print(f"recap differs:\n  ansible: {ra}\n  upgrade: {ru}")
# Messages name paths under each tool's own directory.
tool_dir = lambda t, m: {h: [x.replace(str(work / t), str(work / "TOOL")) for x in l] for h, l in m.items()}
fa, fu = tool_dir("ansible", ansible_failures()), tool_dir("upgrade", upgrade_failures())
if fa != fu:
    ok = False
    print(f"failure messages differ:\n  ansible: {json.dumps(fa)}\n  upgrade: {json.dumps(fu)}")
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
# A file that neither tool got to the end of on any host compared nothing (both refused it, say): not the same.
if not any((work / t / h / "semantics.json").exists() for t in ("ansible", "upgrade") for h in ("h1", "h2")):
    ok = False
    print("neither tool wrote a semantics.json: nothing was compared (see ansible.out and upgrade.out)")
sys.exit(0 if ok else 1)
PY
    then
        echo "same: $name"
        rm -rf "$work"
    else
        cat "$work/report"
        echo "DIFFERENT: $name (outputs in $work)"
        return 1
    fi
}

# A few files at once: ansible-playbook spends most of its time starting up.
status=0
pids=()
outs=()
for file in "${files[@]}"; do
    out="$(mktemp)"
    compare_one "$file" > "$out" 2>&1 &
    pids+=($!)
    outs+=("$out")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
done
for i in "${!pids[@]}"; do
    # A job the `jobs` loop above already reaped is no longer wait's ("not a child of this shell"): its output says
    # whether it differed.
    wait "${pids[$i]}" 2>/dev/null || true
    grep -q '^same: ' "${outs[$i]}" || status=1
    cat "${outs[$i]}"
    rm -f "${outs[$i]}"
done
exit $status
