import json
from ansible.plugins.callback import CallbackBase
from ansible.module_utils.common.json import AnsibleJSONEncoder

class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'stdout'
    CALLBACK_NAME = "callback_jsonl"

    def _emit(self, status, result):
        r = dict(result._result)
        out = {"task": result.task_name, "status": status}
        for k in ("msg", "false_condition", "skip_reason"):
            if k in r:
                out[k] = r[k]
        print(json.dumps(out, cls=AnsibleJSONEncoder))

    def v2_runner_on_ok(self, result):
        self._emit("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._emit("failed", result)

    def v2_runner_on_skipped(self, result):
        self._emit("skipped", result)
