//! What each module does when its task runs in check mode (`check_mode: true`), as ansible-core 2.19's module or
//! action plugin does: report what would change without changing anything, skip with Ansible's words where its
//! module has no check mode, or hand the task to ansible-core where ours has none and Ansible's has.

use serde_json::{Map, Value, json};

use super::{ANSIBLE_CORE_MODULE_ARG, Module, ModuleCall};

/// A module's way through check mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckMode {
    /// Changes nothing anyway (debug, stat, set_fact, ...), or decides itself what it would change (command's
    /// creates/removes, lineinfile, blockinfile, reboot, ansible-core's modules): runs, told it is in check mode.
    Runs,
    /// Ansible's module or action has no check mode: the task is skipped with this result.
    Skips(Map<String, Value>),
    /// Ansible's module has a check mode and ours does not: the task runs through ansible-core, in check mode.
    ThroughAnsibleCore,
    /// Neither ours nor one ansible-core can be handed (a `template` renders on the controller).
    Unsupported,
}

impl Module {
    pub fn check_mode(self) -> CheckMode {
        let skip = |msg: &str, failed: bool| {
            let mut result = json!({"changed": false, "skipped": true});
            if !msg.is_empty() {
                result["msg"] = json!(msg);
            }
            if failed {
                result["failed"] = json!(false);
            }
            match result {
                Value::Object(map) => CheckMode::Skips(map),
                _ => CheckMode::Unsupported,
            }
        };
        match self {
            Module::Debug
            | Module::Pause
            | Module::Assert
            | Module::Fail
            | Module::SetFact
            | Module::Stat
            | Module::Slurp
            | Module::IncludeVars
            | Module::AsyncStatus
            | Module::Meta
            | Module::ImportRole
            | Module::IncludeRole
            | Module::Command
            | Module::Shell
            | Module::Script
            | Module::Lineinfile
            | Module::Blockinfile
            | Module::Reboot
            | Module::AnsibleCore => CheckMode::Runs,
            Module::Uri => skip("This action (uri) does not support check mode.", false),
            Module::WaitFor => skip("remote module (wait_for) does not support check mode", true),
            Module::Fetch => skip("check mode not (yet) supported for this module", false),
            Module::WaitForConnection => skip("", false),
            Module::Copy
            | Module::File
            | Module::Service
            | Module::Systemd
            | Module::SystemdService
            | Module::GetUrl
            | Module::Package
            | Module::Apt
            | Module::Yum
            | Module::Dnf => CheckMode::ThroughAnsibleCore,
            Module::Template => CheckMode::Unsupported,
        }
    }
}

impl ModuleCall {
    /// The same call, for ansible-core to run (the module's name in [`ANSIBLE_CORE_MODULE_ARG`]).
    pub fn through_ansible_core(&self, name: &str) -> ModuleCall {
        let mut args = self.args.clone();
        args.insert(ANSIBLE_CORE_MODULE_ARG.into(), Value::String(name.to_string()));
        ModuleCall { module: Module::AnsibleCore, args }
    }
}
