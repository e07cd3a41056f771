#!/usr/bin/env python3
"""Writes ansible_truth.json: what ansible-core itself gives for every case of cases.yml.

Usage: python3 -m venv /tmp/venv-tpl && /tmp/venv-tpl/bin/pip install ansible-core
       /tmp/venv-tpl/bin/python generate.py     (from this directory)
The Rust tests read the JSON only; they never need Ansible.
"""
import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = {"TPL_TRUTH_ENV": "from-env"}


def main():
    with open(os.path.join(HERE, "cases.yml")) as f:
        spec = yaml.safe_load(f)
    tasks = []
    for i, (kind, template) in enumerate(spec["cases"]):
        task = {"name": f"case {i}", "ignore_errors": True}
        if kind == "render":
            task["debug"] = {"msg": template}
        elif kind == "when":
            task["debug"] = {"msg": "ok"}
            task["when"] = template
        else:
            sys.exit(f"unknown kind {kind!r}")
        tasks.append(task)
    play = [{"hosts": "localhost", "gather_facts": False, "vars": spec["vars"], "tasks": tasks}]
    with tempfile.TemporaryDirectory() as tmp:
        playbook = os.path.join(tmp, "play.yml")
        with open(playbook, "w") as f:
            json.dump(play, f)
        env = dict(os.environ, **ENV)
        env.update(
            ANSIBLE_CALLBACK_PLUGINS=HERE,
            ANSIBLE_STDOUT_CALLBACK="callback_jsonl",
            ANSIBLE_LOCALHOST_WARNING="false",
            ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
            ANSIBLE_DEPRECATION_WARNINGS="false",
        )
        ansible = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        out = subprocess.run([ansible, playbook], env=env, capture_output=True, text=True, cwd=tmp)
    results = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[r["task"]] = r
    cases = []
    for i, (kind, template) in enumerate(spec["cases"]):
        r = results.get(f"case {i}")
        if r is None:
            sys.exit(f"no result for case {i} {template!r}:\n{out.stdout}\n{out.stderr}")
        case = {"kind": kind, "template": template}
        if r["status"] == "failed":
            case["error"] = r.get("msg", "")
        elif kind == "when":
            case["ok"] = r["status"] == "ok"
        else:
            case["ok"] = r.get("msg")
        cases.append(case)
    ver = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    with open(os.path.join(HERE, "ansible_truth.json"), "w") as f:
        json.dump({"generated_by": ver, "env": ENV, "vars": spec["vars"], "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(cases)} cases from {ver}")


if __name__ == "__main__":
    main()
