//! Sealed secrets: AES-256-GCM envelopes bound to the row that owns them.
//!
//! An [`Envelope`] is `{version, nonce, ciphertext}`; `version` names the master key in the
//! [`Keyring`] that sealed it. The associated data is the owning row's identity
//! ([`SecretOwner`]), so an envelope copied into another row, column or table does not open.

use std::collections::BTreeMap;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};

use crate::error::{StoreError, StoreResult};

/// The identity a sealed value is bound to: table, column and row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretOwner<'a> {
    /// The table holding the value.
    pub table: &'static str,
    /// The column holding the value.
    pub column: &'static str,
    /// The id of the owning row.
    pub row_id: &'a str,
}

impl SecretOwner<'_> {
    fn associated_data(&self) -> Vec<u8> {
        let mut aad = Vec::with_capacity(32 + self.row_id.len());
        aad.extend_from_slice(b"auto-swe-secret/1\0");
        aad.extend_from_slice(self.table.as_bytes());
        aad.push(0);
        aad.extend_from_slice(self.column.as_bytes());
        aad.push(0);
        aad.extend_from_slice(self.row_id.as_bytes());
        aad
    }
}

/// A sealed value as stored: key version, 96-bit nonce, ciphertext with its 128-bit tag.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Envelope {
    /// The master-key version that sealed this value.
    pub version: u32,
    /// The hex-encoded 12-byte nonce.
    pub nonce: String,
    /// The hex-encoded ciphertext, tag appended.
    pub ciphertext: String,
}

impl std::fmt::Debug for Envelope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envelope")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Envelope {
    /// The stored text form (compact JSON).
    pub(crate) fn to_stored(&self) -> StoreResult<String> {
        serde_json::to_string(self).map_err(|e| StoreError::corrupt("secret", e.to_string()))
    }

    /// Parses the stored text form.
    pub(crate) fn from_stored(text: &str) -> StoreResult<Self> {
        serde_json::from_str(text).map_err(|_| StoreError::SecretOpen)
    }
}

/// A secret value in memory; its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    /// Wraps a plaintext secret.
    #[must_use]
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The plaintext; call only where it is sent to its destination.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretString(***)")
    }
}

/// Master keys by version, and the version new envelopes are sealed with.
#[derive(Clone)]
pub struct Keyring {
    current: u32,
    keys: BTreeMap<u32, [u8; 32]>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current)
            .field("versions", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Keyring {
    /// A keyring holding one key, which seals.
    #[must_use]
    pub fn single(version: u32, key: [u8; 32]) -> Self {
        Self {
            current: version,
            keys: BTreeMap::from([(version, key)]),
        }
    }

    /// A keyring holding one fresh random key, version 1: for a store whose sealed secrets need
    /// not outlive this process (a throwaway local store, a test, an example). Secrets sealed
    /// under it open only with this value.
    #[must_use]
    pub fn generate() -> Self {
        Self::single(1, random_bytes())
    }

    /// A keyring from a 64-hex-digit master key (as read from configuration).
    pub fn from_hex(version: u32, hex_key: &str) -> StoreResult<Self> {
        let bytes = hex::decode(hex_key.trim())
            .map_err(|_| StoreError::Keyring("master key is not hex".to_owned()))?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| StoreError::Keyring("master key must be 32 bytes".to_owned()))?;
        Ok(Self::single(version, key))
    }

    /// Adds a key and makes it the sealing key; older keys still open their envelopes.
    pub fn rotate_to(mut self, version: u32, key: [u8; 32]) -> StoreResult<Self> {
        if self.keys.contains_key(&version) {
            return Err(StoreError::Keyring(format!(
                "key version {version} is already present"
            )));
        }
        self.keys.insert(version, key);
        self.current = version;
        Ok(self)
    }

    /// The version new envelopes are sealed with.
    #[must_use]
    pub fn current_version(&self) -> u32 {
        self.current
    }

    /// Seals `plaintext` for `owner` with the current key.
    pub fn seal(&self, owner: SecretOwner<'_>, plaintext: &[u8]) -> StoreResult<Envelope> {
        let key = self
            .keys
            .get(&self.current)
            .ok_or(StoreError::UnknownKeyVersion {
                version: self.current,
            })?;
        let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key));
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let aad = owner.associated_data();
        let ciphertext = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            .map_err(|_| StoreError::Keyring("encryption failed".to_owned()))?;
        Ok(Envelope {
            version: self.current,
            nonce: hex::encode(nonce),
            ciphertext: hex::encode(ciphertext),
        })
    }

    /// Opens an envelope sealed for `owner`.
    pub fn open(&self, owner: SecretOwner<'_>, envelope: &Envelope) -> StoreResult<Vec<u8>> {
        let key = self
            .keys
            .get(&envelope.version)
            .ok_or(StoreError::UnknownKeyVersion {
                version: envelope.version,
            })?;
        let nonce_bytes = hex::decode(&envelope.nonce).map_err(|_| StoreError::SecretOpen)?;
        if nonce_bytes.len() != 12 {
            return Err(StoreError::SecretOpen);
        }
        let ciphertext = hex::decode(&envelope.ciphertext).map_err(|_| StoreError::SecretOpen)?;
        let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key));
        let aad = owner.associated_data();
        cipher
            .decrypt(
                Nonce::from_slice(&nonce_bytes),
                Payload {
                    msg: &ciphertext,
                    aad: &aad,
                },
            )
            .map_err(|_| StoreError::SecretOpen)
    }

    /// Opens a stored envelope into a string secret.
    pub(crate) fn open_string(
        &self,
        owner: SecretOwner<'_>,
        stored: &str,
    ) -> StoreResult<SecretString> {
        let envelope = Envelope::from_stored(stored)?;
        let bytes = self.open(owner, &envelope)?;
        String::from_utf8(bytes)
            .map(SecretString)
            .map_err(|_| StoreError::SecretOpen)
    }

    /// Seals a string secret into its stored form.
    pub(crate) fn seal_string(
        &self,
        owner: SecretOwner<'_>,
        secret: &SecretString,
    ) -> StoreResult<String> {
        self.seal(owner, secret.expose().as_bytes())?.to_stored()
    }
}

/// Fills a buffer from the operating system's random source.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    use aes_gcm::aead::rand_core::RngCore;
    let mut bytes = [0_u8; N];
    OsRng.fill_bytes(&mut bytes);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: SecretOwner<'static> = SecretOwner {
        table: "connections",
        column: "token",
        row_id: "row-1",
    };

    #[test]
    fn seal_open_round_trip_and_binding() {
        let ring = Keyring::single(1, [7; 32]);
        let envelope = ring.seal(OWNER, b"hunter2").unwrap();
        assert_eq!(ring.open(OWNER, &envelope).unwrap(), b"hunter2");
        let other_row = SecretOwner {
            row_id: "row-2",
            ..OWNER
        };
        assert_eq!(
            ring.open(other_row, &envelope).unwrap_err().code(),
            "SECRET_OPEN_FAILED"
        );
        let other_key = Keyring::single(1, [8; 32]);
        assert_eq!(
            other_key.open(OWNER, &envelope).unwrap_err().code(),
            "SECRET_OPEN_FAILED"
        );
        let missing = Keyring::single(2, [7; 32]);
        assert_eq!(
            missing.open(OWNER, &envelope).unwrap_err().code(),
            "SECRET_UNKNOWN_KEY_VERSION"
        );
    }

    #[test]
    fn generated_keyrings_hold_fresh_keys() {
        let ring = Keyring::generate();
        let envelope = ring.seal(OWNER, b"hunter2").unwrap();
        assert_eq!(ring.open(OWNER, &envelope).unwrap(), b"hunter2");
        // Another generated keyring has the same version and another key: it cannot open.
        let other = Keyring::generate();
        assert_eq!(other.current_version(), 1);
        assert_eq!(
            other.open(OWNER, &envelope).unwrap_err().code(),
            "SECRET_OPEN_FAILED"
        );
    }

    #[test]
    fn debug_never_shows_material() {
        let ring = Keyring::single(1, [0xab; 32]);
        let envelope = ring.seal(OWNER, b"hunter2").unwrap();
        let shown = format!("{ring:?} {envelope:?} {:?}", SecretString::new("hunter2"));
        assert!(!shown.contains("abab"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains(&envelope.ciphertext), "{shown}");
    }

    #[test]
    fn malformed_envelopes_are_typed_errors() {
        let ring = Keyring::single(1, [7; 32]);
        for stored in [
            "",
            "{}",
            "not json",
            r#"{"version":1,"nonce":"zz","ciphertext":""}"#,
        ] {
            assert!(ring.open_string(OWNER, stored).is_err());
        }
        assert_eq!(
            Keyring::from_hex(1, "abcd").unwrap_err().code(),
            "SECRET_KEYRING_INVALID"
        );
    }
}
