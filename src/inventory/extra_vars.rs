//! `-e` arguments, as Ansible's `load_extra_vars` reads them: `@FILE` (YAML or JSON), inline YAML/JSON when the
//! argument starts with `{` or `[`, otherwise `key=value` pairs split by Ansible's `split_args`/`parse_kv`
//! (values stay strings). Later arguments win.

use serde_json::Value;
use std::path::Path;

use super::{Origin, Var, Vars};
use crate::ansible_compat::parse_kv;
use crate::error::{Error, Location, Result};
use crate::vault::VaultSecrets;

/// Parses `-e` arguments: `KEY=VALUE ...`, a JSON/YAML mapping, or `@FILE` (relative to `base_dir`, or the
/// current directory when `base_dir` is empty), later ones winning. A `!vault` value is an error saying how to give
/// its password: see [`parse_extra_vars_with_vault`].
pub fn parse_extra_vars(args: &[String], base_dir: &Path) -> Result<Vars> {
    parse_extra_vars_with_vault(args, base_dir, &VaultSecrets::none())
}

/// [`parse_extra_vars`] with vault passwords: `-e @FILE` of a file vault-encrypted whole, and `!vault` values in a
/// file or an inline mapping, are decrypted.
pub fn parse_extra_vars_with_vault(args: &[String], base_dir: &Path, vault: &VaultSecrets) -> Result<Vars> {
    let mut vars = Vars::new();
    for arg in args {
        if arg.is_empty() {
            continue;
        }
        let origin = Origin::ExtraVars(arg.clone());
        if let Some(file) = arg.strip_prefix('@') {
            let path = if Path::new(file).is_absolute() || base_dir.as_os_str().is_empty() {
                Path::new(file).to_path_buf()
            } else {
                base_dir.join(file)
            };
            let mut file_vars = Vars::new();
            super::vars::load_file(&path, |_| Origin::Default, &mut file_vars, vault).map_err(|e| {
                if e.hint.is_none() {
                    e.hint("-e @FILE takes a YAML or JSON file holding a mapping of variables")
                } else {
                    e
                }
            })?;
            for (k, v) in file_vars {
                vars.insert(k, Var { value: v.value, origin: Origin::ExtraVars(format!("@{}", path.display())) });
            }
        } else if arg.starts_with(['/', '.']) {
            return Err(Error::input(format!("please prepend extra_vars filename '{arg}' with '@'"))
                .hint(format!("write -e @{arg} to read variables from that file")));
        } else if arg.starts_with(['{', '[']) {
            let doc = super::yaml::load_data(arg, Path::new("-e")).map_err(|e| {
                Error::input(format!("-e {arg}: not valid YAML/JSON: {}", e.message))
                    .hint("quote the whole argument for the shell: -e '{\"name\": \"value\"}'")
            })?;
            let Some(entries) = doc.as_ref().and_then(|d| d.as_map()) else {
                return Err(invalid(arg));
            };
            for (k, v) in entries {
                let value = super::vault_values::decrypted_json(v, k, Path::new("-e"), vault)?;
                vars.insert(k.key_text(), Var { value, origin: origin.clone() });
            }
        } else {
            let pairs = parse_kv(arg, false)
                .map_err(|e| Error::input(e).hint("close every quote and every {{ }} / {% %} block"))?;
            for (k, v) in pairs {
                vars.insert(k, Var { value: Value::String(v), origin: origin.clone() });
            }
        }
    }
    Ok(vars)
}

fn invalid(arg: &str) -> Error {
    Error::input(format!("invalid extra vars data supplied: '{arg}' could not be made into a dictionary"))
        .at(Location::file("-e"))
        .hint("pass name=value pairs, a YAML/JSON mapping such as '{\"name\": 1}', or @FILE")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(vars: &Vars) -> serde_json::Map<String, Value> {
        super::super::vars_to_json(vars)
    }

    #[test]
    fn key_value_pairs_are_strings() {
        let vars = parse_extra_vars(&["a=1 b='two words' c=\"x=y\"".to_string()], Path::new("")).unwrap();
        assert_eq!(values(&vars), json!({"a": "1", "b": "two words", "c": "x=y"}).as_object().unwrap().clone());
        assert_eq!(vars["a"].origin, Origin::ExtraVars("a=1 b='two words' c=\"x=y\"".into()));
    }

    #[test]
    fn json_and_yaml_mappings_keep_types() {
        let vars = parse_extra_vars(&["{\"n\": 3, \"l\": [1, 2]}".into(), "{m: yes}".into()], Path::new("")).unwrap();
        assert_eq!(values(&vars), json!({"n": 3, "l": [1, 2], "m": true}).as_object().unwrap().clone());
        assert!(parse_extra_vars(&["[1, 2]".into()], Path::new("")).is_err());
    }

    #[test]
    fn files_are_read_relative_to_base_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("vars.yml"), "upgrade_nodes_serial: 2\n").unwrap();
        let vars = parse_extra_vars(&["@vars.yml".into(), "x=1".into()], dir.path()).unwrap();
        assert_eq!(vars["upgrade_nodes_serial"].value, json!(2));
        assert!(matches!(&vars["upgrade_nodes_serial"].origin, Origin::ExtraVars(s) if s.ends_with("vars.yml")));
        assert!(parse_extra_vars(&["@missing.yml".into()], dir.path()).is_err());
        assert!(parse_extra_vars(&["./vars.yml".into()], dir.path()).is_err());
    }

    #[test]
    fn later_arguments_win_and_free_words_go_to_raw_params() {
        let vars = parse_extra_vars(&["a=1".into(), "a=2 word".into()], Path::new("")).unwrap();
        assert_eq!(vars["a"].value, json!("2"));
        assert_eq!(vars["_raw_params"].value, json!("word"));
        assert!(parse_extra_vars(&["a='open".into()], Path::new("")).is_err());
    }
}
