//! Ansible Vault in what the operator wrote: `!vault` values (YAML's tag, or JSON's `{"__ansible_vault": ...}`) and
//! files encrypted whole (an inventory file, a `group_vars/` or `host_vars/` file, `-e @FILE`), decrypted with the
//! passwords of the command line. Every decrypted value is remembered as a secret (`redact::decrypted`), so every
//! output masks it as it masks `upgrade_secret_vars`.
//!
//! Unlike ansible-core, which decrypts a `!vault` value when a task first uses it, values are decrypted when the
//! inventory is read: every one must decrypt with the passwords given, and a wrong password is said before anything
//! runs, naming the file and line.

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Location, Result};
use crate::vault::{VaultError, VaultSecrets};
use crate::yaml::{Node, NodeValue};

/// A YAML value as JSON, with every `!vault` inside it decrypted. The error points at `key` when the value itself
/// is the vault (its block scalar starts on the next line).
pub(super) fn decrypted_json(node: &Node, key: &Node, path: &Path, vault: &VaultSecrets) -> Result<Value> {
    if !has_vault(node) {
        return Ok(node.to_json());
    }
    let at = |n: &Node| if std::ptr::eq(n, node) { key.location(path) } else { n.location(path) };
    Ok(decrypt_node(node, &at, vault)?.to_json())
}

fn has_vault(node: &Node) -> bool {
    match &node.value {
        NodeValue::Tagged(tag, inner) => is_vault_tag(tag) || has_vault(inner),
        NodeValue::Seq(items) => items.iter().any(has_vault),
        NodeValue::Map(entries) => entries.iter().any(|(k, v)| has_vault(k) || has_vault(v)),
        _ => false,
    }
}

fn is_vault_tag(tag: &str) -> bool {
    tag.ends_with("vault")
}

pub(super) fn decrypt_node(node: &Node, at: &dyn Fn(&Node) -> Location, vault: &VaultSecrets) -> Result<Node> {
    let value = match &node.value {
        NodeValue::Tagged(tag, inner) if is_vault_tag(tag) => {
            let NodeValue::Str(text) = &inner.value else {
                return Err(Error::input("a `!vault` value must be the text ansible-vault printed")
                    .at(at(node))
                    .hint("paste the output of `ansible-vault encrypt_string` as it is, after `!vault |`"));
            };
            NodeValue::Str(decrypt_value(text, at(node), vault)?)
        }
        NodeValue::Tagged(tag, inner) => NodeValue::Tagged(tag.clone(), Box::new(decrypt_node(inner, at, vault)?)),
        NodeValue::Seq(items) => {
            NodeValue::Seq(items.iter().map(|n| decrypt_node(n, at, vault)).collect::<Result<_>>()?)
        }
        NodeValue::Map(entries) => NodeValue::Map(
            entries
                .iter()
                .map(|(k, v)| Ok((decrypt_node(k, at, vault)?, decrypt_node(v, at, vault)?)))
                .collect::<Result<_>>()?,
        ),
        other => other.clone(),
    };
    Ok(Node { value, line: node.line, column: node.column })
}

/// One `!vault` value: its plaintext, remembered as a secret.
fn decrypt_value(text: &str, at: Location, vault: &VaultSecrets) -> Result<String> {
    let bytes = vault.decrypt(text).map_err(|e| vault_error(e, "this value", at.clone()))?;
    let plaintext = String::from_utf8(bytes).map_err(|_| {
        Error::input("this vault-encrypted value is not UTF-8 text once decrypted")
            .at(at)
            .hint("encrypt text: ansible-vault encrypt_string 'VALUE'")
    })?;
    crate::redact::decrypted::remember(&Value::String(plaintext.clone()));
    Ok(plaintext)
}

/// A file's text, decrypted when the file is vault-encrypted whole; `true` with it when it was.
pub(crate) fn file_text(path: &Path, vault: &VaultSecrets) -> Result<(String, bool)> {
    let text = super::read_text(path)?;
    if !crate::vault::is_encrypted(&text) {
        return Ok((text, false));
    }
    let bytes = vault.decrypt(&text).map_err(|e| vault_error(e, "this file", Location::new(path, 1, 1)))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::input("this vault-encrypted file is not UTF-8 text once decrypted")
            .in_file(path)
            .hint("check the file with ansible-vault view, and save its content as UTF-8")
    })?;
    Ok((text, true))
}

/// A vault that did not decrypt (`what`: this value, this file), as an input error at its place saying what to do.
pub(crate) fn vault_error(error: VaultError, what: &str, at: Location) -> Error {
    let of_id =
        |vault_id: &Option<String>| vault_id.as_ref().map(|id| format!(" (vault id `{id}`)")).unwrap_or_default();
    match error {
        VaultError::NoPassword { vault_id } => Error::input(format!(
            "{what} is encrypted with Ansible Vault{}, and no vault password was given",
            of_id(&vault_id)
        ))
        .hint(
            "give the vault password: --vault-password-file FILE, --ask-vault-pass, --vault-id LABEL@SOURCE, or \
             ANSIBLE_VAULT_PASSWORD_FILE",
        ),
        VaultError::WrongPassword { vault_id, tried } => Error::input(format!(
            "wrong vault password: none of those given decrypts {what}{} (tried {})",
            of_id(&vault_id),
            tried.join(", ")
        ))
        .hint(
            "check the password (`ansible-vault view` with it shows the file); a value encrypted with another vault \
             id needs its own --vault-id LABEL@SOURCE",
        ),
        VaultError::Format(why) => Error::input(format!("{what} is not a valid Ansible Vault text: {why}"))
            .hint("encrypt it again with ansible-vault (encrypt, or encrypt_string for one value)"),
    }
    .at(at)
}
