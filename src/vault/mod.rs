//! Ansible Vault: the `$ANSIBLE_VAULT;1.1;AES256` (and `1.2;AES256;LABEL`) texts `ansible-vault` writes, whole
//! files or `!vault` values, decrypted as ansible-core's `parsing/vault/__init__.py` does. The cryptography is
//! RustCrypto's (PBKDF2-HMAC-SHA256, AES-256-CTR, HMAC-SHA256), not code of our own; this module only lays the
//! envelope out and picks the passwords to try.
//!
//! The format: a header line `$ANSIBLE_VAULT;VERSION;AES256[;VAULT_ID]`, then lines of hex. The hex decodes to three
//! lines, each hex again: the salt, the HMAC of the ciphertext, the ciphertext. PBKDF2-HMAC-SHA256 of the password and
//! the salt (10,000 rounds, 80 bytes) gives the AES key (32 bytes), the HMAC key (32) and the initial counter (16);
//! the plaintext is PKCS#7-padded to the AES block before encryption.
//!
//! Which password decrypts what is chosen as ansible-core chooses it: the passwords whose vault id is the one in the
//! header first, then (unless `ANSIBLE_VAULT_ID_MATCH` is true) every other one, in the order they were given. The
//! vault id is a label, not part of what is signed.

pub(crate) mod passwords;

use aes::Aes256;
use ctr::cipher::{KeyIvInit, StreamCipher};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// What every vault text starts with (ansible-core's `b_HEADER`).
pub(crate) const HEADER: &str = "$ANSIBLE_VAULT";

/// The label of a password given without one (`--vault-password-file`, `--ask-vault-pass`), ansible-core's
/// `DEFAULT_VAULT_IDENTITY`.
pub(crate) const DEFAULT_ID: &str = "default";

const PBKDF2_ROUNDS: u32 = 10_000;
const KEY_LENGTH: usize = 32;
const IV_LENGTH: usize = 16;

/// Whether a text (a file's content, a `!vault` value) is vault-encrypted: it starts with the vault header.
pub(crate) fn is_encrypted(text: &str) -> bool {
    text.starts_with(HEADER)
}

/// A vault password and the vault id (label) it was given for.
#[derive(Clone)]
pub(crate) struct VaultSecret {
    pub id: String,
    password: Vec<u8>,
    /// Where it came from, for messages: `--vault-password-file /etc/pw`, `prompt`.
    pub source: String,
}

impl VaultSecret {
    pub(crate) fn new(id: &str, password: Vec<u8>, source: &str) -> VaultSecret {
        VaultSecret { id: id.to_string(), password, source: source.to_string() }
    }
}

/// The passwords one invocation was given, in the order ansible-core tries them.
#[derive(Default, Clone)]
pub struct VaultSecrets {
    secrets: Vec<VaultSecret>,
    /// `ANSIBLE_VAULT_ID_MATCH`: only the passwords of the text's own vault id are tried.
    id_match: bool,
}

// Never prints a password.
impl std::fmt::Debug for VaultSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<String> = self.secrets.iter().map(|s| format!("{}@{}", s.id, s.source)).collect();
        f.debug_struct("VaultSecrets").field("secrets", &ids).field("id_match", &self.id_match).finish()
    }
}

/// Why a vault text was not decrypted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum VaultError {
    /// No password was given at all.
    NoPassword { vault_id: Option<String> },
    /// Passwords were given, and none of them decrypts it (the HMAC did not match).
    WrongPassword { vault_id: Option<String>, tried: Vec<String> },
    /// The text is not what ansible-vault writes (cut, edited by hand, another cipher).
    Format(String),
}

impl VaultSecrets {
    /// No passwords: a vault text met is an error saying how to give one.
    pub fn none() -> VaultSecrets {
        VaultSecrets::default()
    }

    pub(crate) fn from_secrets(secrets: Vec<VaultSecret>, id_match: bool) -> VaultSecrets {
        VaultSecrets { secrets, id_match }
    }

    /// Decrypts a vault text (a whole file's content, or a `!vault` value) to its plaintext bytes.
    pub(crate) fn decrypt(&self, text: &str) -> Result<Vec<u8>, VaultError> {
        let envelope = Envelope::parse(text)?;
        if self.secrets.is_empty() {
            return Err(VaultError::NoPassword { vault_id: envelope.vault_id.clone() });
        }
        let body = envelope.body()?;
        let mut tried = Vec::new();
        // A 1.1 text names no vault id: ansible-core takes it as `default`'s.
        for secret in self.candidates(envelope.vault_id.as_deref().unwrap_or(DEFAULT_ID)) {
            tried.push(format!("`{}` from {}", secret.id, secret.source));
            if let Some(plaintext) = body.decrypt(&secret.password)? {
                return Ok(plaintext);
            }
        }
        Err(VaultError::WrongPassword { vault_id: envelope.vault_id, tried })
    }

    /// ansible-core's `decrypt_and_get_vault_id`: the text's own vault id first, then the others in order.
    fn candidates(&self, vault_id: &str) -> Vec<&VaultSecret> {
        let own = self.secrets.iter().filter(|s| s.id == vault_id);
        let others = self.secrets.iter().filter(|s| s.id != vault_id);
        if self.id_match { own.collect() } else { own.chain(others).collect() }
    }
}

/// The header and the hex lines of a vault text.
struct Envelope {
    vault_id: Option<String>,
    hex: String,
}

impl Envelope {
    /// ansible-core's `parse_vaulttext_envelope`: the first line's `;`-separated fields, the other lines joined.
    fn parse(text: &str) -> Result<Envelope, VaultError> {
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default().trim();
        let fields: Vec<&str> = header.split(';').map(str::trim).collect();
        if fields.first() != Some(&HEADER) || fields.len() < 3 {
            return Err(VaultError::Format(format!("the first line `{header}` is not `$ANSIBLE_VAULT;1.1;AES256`")));
        }
        if fields[2] != "AES256" {
            return Err(VaultError::Format(format!(
                "cipher `{}` is not AES256, the only one ansible-vault writes",
                fields[2]
            )));
        }
        // The version is not checked, as ansible-core does not: a 1.2 header carries the vault id in a fourth field.
        let vault_id = fields.get(3).filter(|id| !id.is_empty()).map(|id| id.to_string());
        let hex: String = lines.map(str::trim).collect();
        Ok(Envelope { vault_id, hex })
    }

    /// The salt, HMAC and ciphertext the hex holds.
    fn body(&self) -> Result<Body, VaultError> {
        let inner = unhex(self.hex.as_bytes(), "the encrypted text")?;
        let mut parts = inner.splitn(3, |b| *b == b'\n');
        let (Some(salt), Some(hmac), Some(ciphertext)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(VaultError::Format("the encrypted text lacks its salt, HMAC or ciphertext".into()));
        };
        Ok(Body {
            salt: unhex(salt, "the salt")?,
            hmac: unhex(hmac, "the HMAC")?,
            ciphertext: unhex(ciphertext, "the ciphertext")?,
        })
    }
}

/// Python's `unhexlify`: either case, nothing else.
fn unhex(hex: &[u8], what: &str) -> Result<Vec<u8>, VaultError> {
    data_encoding::HEXLOWER_PERMISSIVE
        .decode(hex)
        .map_err(|_| VaultError::Format(format!("{what} is not hexadecimal (the text was cut or edited)")))
}

struct Body {
    salt: Vec<u8>,
    hmac: Vec<u8>,
    ciphertext: Vec<u8>,
}

impl Body {
    /// The plaintext with this password, `None` when the HMAC says the password is not the one.
    fn decrypt(&self, password: &[u8]) -> Result<Option<Vec<u8>>, VaultError> {
        let mut derived = [0u8; 2 * KEY_LENGTH + IV_LENGTH];
        pbkdf2::pbkdf2_hmac::<Sha256>(password, &self.salt, PBKDF2_ROUNDS, &mut derived);
        let (cipher_key, rest) = derived.split_at(KEY_LENGTH);
        let (hmac_key, iv) = rest.split_at(KEY_LENGTH);
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(hmac_key)
            .map_err(|_| VaultError::Format("the HMAC key has the wrong length".into()))?;
        mac.update(&self.ciphertext);
        // Compared in constant time by the crate, as ansible-core's `_is_equal` does by hand.
        if mac.verify_slice(&self.hmac).is_err() {
            return Ok(None);
        }
        let mut plaintext = self.ciphertext.clone();
        let mut cipher = ctr::Ctr128BE::<Aes256>::new_from_slices(cipher_key, iv)
            .map_err(|_| VaultError::Format("the key or counter has the wrong length".into()))?;
        cipher.apply_keystream(&mut plaintext);
        unpad(&mut plaintext)?;
        Ok(Some(plaintext))
    }
}

/// Removes PKCS#7 padding (to the 16-byte AES block), refusing padding that is not.
fn unpad(plaintext: &mut Vec<u8>) -> Result<(), VaultError> {
    let bad = || VaultError::Format("the decrypted text is not padded as ansible-vault pads it".into());
    let n = usize::from(*plaintext.last().ok_or_else(bad)?);
    if n == 0
        || n > IV_LENGTH
        || n > plaintext.len()
        || plaintext[plaintext.len() - n..].iter().any(|b| usize::from(*b) != n)
    {
        return Err(bad());
    }
    plaintext.truncate(plaintext.len() - n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ansible-vault encrypt_string --vault-password-file pw 'hello-secret'` with `pw-one` in pw (ansible-core 2.19).
    const HELLO: &str = "$ANSIBLE_VAULT;1.1;AES256
37313838306538303363626364663331303864386130323862356332356132363965336562376231
6265663933333735646264303330353031633866383731330a633832643833613664616431323561
35393630613735616636343966656162376464633330376130353864623636626662386433366366
3237373364386132630a393534643633653039623563336463663162643963323231366363633930
6339
";

    fn secrets(list: &[(&str, &str)]) -> VaultSecrets {
        VaultSecrets::from_secrets(
            list.iter().map(|(id, pw)| VaultSecret::new(id, pw.as_bytes().to_vec(), "test")).collect(),
            false,
        )
    }

    #[test]
    fn a_value_ansible_vault_encrypted_decrypts_with_its_password() {
        assert!(is_encrypted(HELLO));
        assert_eq!(secrets(&[("default", "pw-one")]).decrypt(HELLO).unwrap(), b"hello-secret");
    }

    #[test]
    fn every_password_is_tried_and_a_wrong_one_is_named() {
        let both = secrets(&[("ops", "nope"), ("default", "pw-one")]);
        assert_eq!(both.decrypt(HELLO).unwrap(), b"hello-secret");
        match secrets(&[("default", "nope")]).decrypt(HELLO) {
            Err(VaultError::WrongPassword { vault_id: None, tried }) => assert_eq!(tried, ["`default` from test"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(VaultSecrets::none().decrypt(HELLO), Err(VaultError::NoPassword { vault_id: None }));
    }

    #[test]
    fn the_vault_id_of_a_1_2_header_picks_its_password_first_and_alone_with_id_match() {
        let labelled = HELLO.replace("1.1;AES256", "1.2;AES256;ops");
        let s = secrets(&[("other", "pw-one")]);
        assert_eq!(s.decrypt(&labelled).unwrap(), b"hello-secret", "without ANSIBLE_VAULT_ID_MATCH every one is tried");
        let strict = VaultSecrets::from_secrets(vec![VaultSecret::new("other", b"pw-one".to_vec(), "t")], true);
        assert!(
            matches!(strict.decrypt(&labelled), Err(VaultError::WrongPassword { vault_id: Some(id), .. }) if id == "ops")
        );
        assert_eq!(s.candidates("other").len(), 1);
        let unlabelled = VaultSecrets::from_secrets(vec![VaultSecret::new("ops", b"pw-one".to_vec(), "t")], true);
        assert!(unlabelled.decrypt(HELLO).is_err(), "a 1.1 text is `default`'s for ANSIBLE_VAULT_ID_MATCH");
    }

    #[test]
    fn a_cut_or_edited_text_is_a_format_error_not_a_wrong_password() {
        let s = secrets(&[("default", "pw-one")]);
        assert!(matches!(s.decrypt("$ANSIBLE_VAULT;1.1;AES256\nzz\n"), Err(VaultError::Format(_))));
        assert!(matches!(s.decrypt("$ANSIBLE_VAULT;1.1;DES\n00\n"), Err(VaultError::Format(_))));
        assert!(matches!(s.decrypt("$ANSIBLE_VAULT\n"), Err(VaultError::Format(_))));
        let cut: String = HELLO.lines().take(3).collect::<Vec<_>>().join("\n");
        assert!(matches!(s.decrypt(&cut), Err(VaultError::Format(_))));
    }

    proptest::proptest! {
        #[test]
        fn no_text_makes_decryption_panic(text in "\\$ANSIBLE_VAULT;1\\.[12];AES256(;[a-z]{0,3})?\n[0-9a-f\n]{0,200}") {
            let _ = secrets(&[("default", "pw-one")]).decrypt(&text);
        }
    }
}
