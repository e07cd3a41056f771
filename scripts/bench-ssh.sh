#!/usr/bin/env bash
# Benchmarks the SSH connection layer against the raw cost of ssh and against ansible-playbook, on loopback sshd
# hosts this script starts (and stops) itself. Nothing touches port 22 or the machine's ssh configuration.
#
# usage: scripts/bench-ssh.sh [HOSTS=20] [COMMANDS=10] [MEMORY_HOSTS=200]
#
#   (a) ours: examples/ssh_exec (release build): one multiplexed master per host, COMMANDS `true` per host, one
#       after another, all hosts at once; also `upgrade run-tasks` on a task file of COMMANDS `command: "true"`
#       tasks once run-tasks exists.
#   (b) raw:  the system ssh over a warm ControlMaster per host running `true` COMMANDS times per host, all hosts
#       at once (bash loops).
#   (c) ansible-playbook (pipelining, ControlPersist) on the same hosts with the same task file, if ansible-core is
#       available: $ANSIBLE_PLAYBOOK, else a venv in /tmp/venv-bench-ssh (created with pip when online).
#   Memory: peak RSS of ssh_exec with MEMORY_HOSTS hosts (/usr/bin/time -v). Hosts share sshd processes: at most
#   10 sshd, each serving several inventory names (each name still gets its own master connection).
#
# Test sessions get a clean HOME (sshd SetEnv), so root's ~/.bashrc (pyenv) is not what we measure.
set -euo pipefail
cd "$(dirname "$0")/.."

HOSTS=${1:-20}
COMMANDS=${2:-10}
MEMORY_HOSTS=${3:-200}
SSHDS_MAX=10

work=$(mktemp -d /tmp/bench-ssh.XXXXXX)
sshd_pids=()
raw_sockets=()
cleanup() {
  for sock in "${raw_sockets[@]}"; do ssh -o ControlPath="$sock" -O exit dummy >/dev/null 2>&1 || true; done
  for pid in "${sshd_pids[@]}"; do kill -s TERM -- "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building (release)..." >&2
cargo build --release --quiet --example ssh_exec --bin upgrade
ours=target/release/examples/ssh_exec
upgrade=target/release/upgrade

mkdir -p /run/sshd "$work/home"
ssh-keygen -t ed25519 -N '' -q -f "$work/host_key"
ssh-keygen -t ed25519 -N '' -q -f "$work/client_key"
cp "$work/client_key.pub" "$work/authorized_keys"
host_pub=$(cut -d' ' -f1,2 "$work/host_key.pub")
user=$(id -un)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

ports=()
start_sshd() {
  local port cfg
  port=$(free_port)
  cfg="$work/sshd_$port.conf"
  cat >"$cfg" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PidFile $work/sshd_$port.pid
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
SetEnv HOME=$work/home
MaxSessions 64
MaxStartups 400:30:800
LogLevel ERROR
EOF
  /usr/sbin/sshd -D -e -f "$cfg" 2>>"$work/sshd.log" &
  sshd_pids+=($!)
  for _ in $(seq 200); do
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.02
  done
  echo "[127.0.0.1]:$port $host_pub" >>"$work/known_hosts"
  ports+=("$port")
}

need=$(( MEMORY_HOSTS > HOSTS ? MEMORY_HOSTS : HOSTS ))
sshds=$(( need < SSHDS_MAX ? need : SSHDS_MAX ))
for _ in $(seq "$sshds"); do start_sshd; done

# hosts.json for ssh_exec, an INI inventory for run-tasks/ansible: host i -> sshd i mod S.
write_hosts() { # COUNT PREFIX
  python3 - "$1" "$2" "$work" "$user" "${ports[@]}" <<'EOF'
import json, sys
count, prefix, work, user, ports = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
hosts, ini = [], ["[all]"]
args = f"-o UserKnownHostsFile={work}/known_hosts -o StrictHostKeyChecking=yes"
for i in range(count):
    name, port = f"{prefix}{i:03d}", int(ports[i % len(ports)])
    v = {"ansible_host": "127.0.0.1", "ansible_port": port, "ansible_user": user,
         "ansible_ssh_private_key_file": f"{work}/client_key", "ansible_ssh_common_args": args}
    hosts.append({"name": name, "vars": v})
    ini.append(f"{name} ansible_host=127.0.0.1 ansible_port={port} ansible_user={user} "
               f"ansible_ssh_private_key_file={work}/client_key ansible_ssh_common_args='{args}' "
               f"ansible_python_interpreter=/usr/bin/python3")
open(f"{work}/{prefix}.json", "w").write(json.dumps(hosts))
open(f"{work}/{prefix}.ini", "w").write("\n".join(ini) + "\n")
EOF
}
write_hosts "$HOSTS" h
write_hosts "$MEMORY_HOSTS" m

{
  echo "- name: noop $COMMANDS times"
  echo "  command: \"true\""
} >"$work/one_task.yml"
: >"$work/tasks.yml"
for _ in $(seq "$COMMANDS"); do cat "$work/one_task.yml" >>"$work/tasks.yml"; done

now_ms() { date +%s%3N; }
echo "hosts=$HOSTS commands/host=$COMMANDS sshd processes=$sshds ($(nproc) cores)"

# (a) ours, connection layer: warm up once, then the measured run.
"$ours" "$work/h.json" 1 >/dev/null
ours_line=$("$ours" "$work/h.json" "$COMMANDS")
echo "ours (ssh_exec):      $ours_line"
ours_cmd=$(sed -n 's/.*per_command_ms=\([0-9.]*\).*/\1/p' <<<"$ours_line")
ours_total=$(awk -v l="$ours_line" 'BEGIN{split(l,f," "); for(i in f){split(f[i],kv,"="); v[kv[1]]=kv[2]}; printf "%.1f", v["connect_ms"]+v["exec_ms"]}')

# (b) raw: a warm ControlMaster per host, `true` COMMANDS times per host, hosts in parallel.
raw_opts=(-F /dev/null -o BatchMode=yes -o UserKnownHostsFile="$work/known_hosts" -o StrictHostKeyChecking=yes
  -i "$work/client_key" -l "$user")
for i in $(seq 0 $((HOSTS - 1))); do
  port=${ports[$((i % sshds))]}
  sock="$work/cm-$i"
  raw_sockets+=("$sock")
  ssh "${raw_opts[@]}" -p "$port" -o ControlMaster=yes -o ControlPath="$sock" -o ControlPersist=yes -fN 127.0.0.1
  ssh "${raw_opts[@]}" -p "$port" -o ControlPath="$sock" 127.0.0.1 true
done
start=$(now_ms)
loops=()
for i in $(seq 0 $((HOSTS - 1))); do
  port=${ports[$((i % sshds))]}
  ( for _ in $(seq "$COMMANDS"); do ssh "${raw_opts[@]}" -p "$port" -o ControlPath="$work/cm-$i" 127.0.0.1 true; done ) &
  loops+=($!)
done
wait "${loops[@]}"
raw_ms=$(( $(now_ms) - start ))
raw_cmd=$(awk -v t="$raw_ms" -v m="$COMMANDS" 'BEGIN{printf "%.2f", t/m}')
echo "raw ssh ControlMaster: exec_ms=$raw_ms per_command_ms=$raw_cmd"
echo "ratio ours/raw per command: $(awk -v a="$ours_cmd" -v b="$raw_cmd" 'BEGIN{printf "%.2f", a/b}') (target <= 1.5)"

# upgrade run-tasks, once it exists.
run_tasks_ms=""
if "$upgrade" run-tasks "$work/tasks.yml" --inventory "$work/h.ini" --forks "$HOSTS" >/dev/null 2>"$work/run-tasks.err"; then
  start=$(now_ms)
  "$upgrade" run-tasks "$work/tasks.yml" --inventory "$work/h.ini" --forks "$HOSTS" >/dev/null
  run_tasks_ms=$(( $(now_ms) - start ))
  echo "upgrade run-tasks:     total_ms=$run_tasks_ms"
else
  echo "upgrade run-tasks:     skipped ($(head -c 200 "$work/run-tasks.err" | tr '\n' ' '))"
fi

# (c) ansible-playbook with pipelining and ControlPersist.
playbook=${ANSIBLE_PLAYBOOK:-}
if [ -z "$playbook" ]; then
  venv=/tmp/venv-bench-ssh
  if [ ! -x "$venv/bin/ansible-playbook" ]; then
    (python3 -m venv "$venv" && timeout 300 "$venv/bin/pip" install -q ansible-core) >/dev/null 2>&1 || true
  fi
  [ -x "$venv/bin/ansible-playbook" ] && playbook="$venv/bin/ansible-playbook"
fi
if [ -n "$playbook" ]; then
  cat >"$work/ansible.cfg" <<EOF
[defaults]
forks = $HOSTS
host_key_checking = True
gathering = explicit
stdout_callback = default
[ssh_connection]
pipelining = True
ssh_args = -o ControlMaster=auto -o ControlPersist=60s
control_path_dir = $work/ansible-cp
EOF
  { echo "- hosts: all"; echo "  gather_facts: false"; echo "  tasks:"; sed 's/^/    /' "$work/tasks.yml"; } >"$work/play.yml"
  start=$(now_ms)
  if ANSIBLE_CONFIG="$work/ansible.cfg" HOME="$work/home" "$playbook" -i "$work/h.ini" "$work/play.yml" \
      >"$work/ansible.out" 2>&1; then
    ansible_ms=$(( $(now_ms) - start ))
    echo "ansible-playbook:      total_ms=$ansible_ms"
    echo "ratio ansible/ours (connect+exec, ssh_exec): $(awk -v a="$ansible_ms" -v b="$ours_total" 'BEGIN{printf "%.1f", a/b}')x (target >= 10)"
    if [ -n "$run_tasks_ms" ]; then
      echo "ratio ansible/run-tasks: $(awk -v a="$ansible_ms" -v b="$run_tasks_ms" 'BEGIN{printf "%.1f", a/b}')x (target >= 10)"
    fi
  else
    echo "ansible-playbook:      failed (see below)"; tail -20 "$work/ansible.out"
  fi
else
  echo "ansible-playbook:      skipped (no ansible-core: set ANSIBLE_PLAYBOOK or allow pip install)"
fi

# Memory with MEMORY_HOSTS hosts.
mem_line=$(/usr/bin/time -v "$ours" "$work/m.json" "$COMMANDS" 2>"$work/time.txt")
maxrss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.txt")
echo "memory: $MEMORY_HOSTS hosts over $sshds sshd: $mem_line"
echo "peak RSS of the controller process: $((maxrss / 1024)) MB (target < 100 MB; the ssh master processes are separate)"

# The same for `upgrade run-tasks` itself: MEMORY_HOSTS hosts, the COMMANDS-task file, all hosts at once.
if "$upgrade" run-tasks --help >/dev/null 2>&1; then
  start=$(now_ms)
  /usr/bin/time -v "$upgrade" run-tasks "$work/tasks.yml" --inventory "$work/m.ini" --forks "$MEMORY_HOSTS" \
    >"$work/run-tasks-m.out" 2>"$work/time-rt.txt" || true
  rt_ms=$(( $(now_ms) - start ))
  rt_rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time-rt.txt")
  rt_failed=$(grep -c 'failed=[1-9]\|unreachable=[1-9]' "$work/run-tasks-m.out" || true)
  echo "run-tasks with $MEMORY_HOSTS hosts x $COMMANDS tasks: total_ms=$rt_ms, peak RSS $((rt_rss / 1024)) MB (target < 100 MB), hosts not ok: $rt_failed"
fi
