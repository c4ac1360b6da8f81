//! Worker credentials: one bearer token per worker (or per machine), issued and revoked by the operator.
//! The coordinator knows a worker by the credential it presented, never by the name it states: every
//! check, dispute, quarantine and strike is charged to this identity.
//!
//! A token is `nqw1.IDENTITY.MAC`, where MAC is HMAC-SHA-256 (ring) of the identity under a key that
//! never leaves the coordinator's `credentials.json`. Nothing secret is stored per worker: a token is
//! checked by computing its MAC again, in constant time. The file lists the identities issued and those
//! revoked; a revocation takes effect at once, for every call, and lasts (a revoked identity is never
//! issued again: give the machine a new one). The file is versioned, checksummed (CRC-64 over its body)
//! and written whole (a temporary file, fsynced, renamed); a damaged one refuses the start, since it
//! could re-admit a revoked worker.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use ring::hmac;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The file of the credentials, in the data directory.
pub const CREDENTIALS_FILE: &str = "credentials.json";
/// The version of [`CREDENTIALS_FILE`] this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// What every issued token starts with (the format's version is part of it).
pub const TOKEN_PREFIX: &str = "nqw1.";
/// Longest identity.
pub const MAX_IDENTITY_LEN: usize = 32;
/// The identity of every call made with the shared workers' token (`serve --worker-token`): however
/// many names its workers state, they are one worker for every check, dispute and quarantine.
pub const SHARED_IDENTITY: &str = "workers-token";
/// Most identities one coordinator issues.
pub const MAX_IDENTITIES: usize = 100_000;

/// Whether `identity` may name a credential: 1 to [`MAX_IDENTITY_LEN`] ASCII letters, digits, `-` or
/// `_`, and not the shared token's identity.
pub fn valid_identity(identity: &str) -> bool {
    (1..=MAX_IDENTITY_LEN).contains(&identity.len())
        && identity
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && identity != SHARED_IDENTITY
}

/// One issued identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Issued {
    /// When it was issued, in seconds since the Unix epoch.
    pub issued_unix: u64,
    /// When it was revoked, if it was.
    pub revoked_unix: Option<u64>,
}

/// What the file holds under its checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    /// The MAC key, 64 hex digits.
    key: String,
    identities: BTreeMap<String, Issued>,
}

/// The file as written.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    /// CRC-64/XZ of the body's JSON, 16 hex digits.
    checksum: String,
    body: Body,
}

/// What a token proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An issued credential of this identity, not revoked.
    Valid(Arc<str>),
    /// An issued credential that was revoked.
    Revoked(Arc<str>),
    /// Not an issued credential of this coordinator.
    Unknown,
}

/// The credentials of one coordinator: cheap to clone, shared by the token check and the service.
#[derive(Clone)]
pub struct Credentials {
    inner: Arc<Inner>,
}

struct Inner {
    key: hmac::Key,
    key_hex: String,
    /// The file (none: in memory only, for a temporary store).
    path: Option<PathBuf>,
    /// What every call is checked against; never held across I/O.
    book: RwLock<BTreeMap<String, Issued>>,
    /// Held by one change at a time, from its read of the book to its write of the file and the book.
    writing: Mutex<()>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn now_unix() -> u64 {
    crate::durable::store::now_unix()
}

impl Credentials {
    /// Opens the credentials of the data directory `dir` (made, with a fresh key, when there are none),
    /// or, with no directory, credentials held in memory for this process only. A file that is
    /// damaged, of another version, or not the owner's alone is refused, naming the repair.
    pub fn open(dir: Option<&Path>) -> Result<Credentials> {
        let Some(dir) = dir else {
            return Credentials::fresh(None);
        };
        let path = dir.join(CREDENTIALS_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let made = Credentials::fresh(Some(path))?;
                made.save(&BTreeMap::new())?;
                return Ok(made);
            }
            Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
        };
        let damaged = |why: String| {
            Error::Corrupt(format!(
                "{} {why}: it could re-admit a revoked worker, so the coordinator does not start. Restore it from a backup; or delete it, which invalidates every worker credential (issue new ones with `nqueens credential issue`)",
                path.display()
            ))
        };
        let file: File =
            serde_json::from_slice(&bytes).map_err(|e| damaged(format!("cannot be read ({e})")))?;
        if file.version != FORMAT_VERSION {
            return Err(damaged(format!(
                "is of version {}, where this build reads version {FORMAT_VERSION}",
                file.version
            )));
        }
        let body = serde_json::to_vec(&file.body).expect("the body serializes");
        if format!("{:016x}", nqueens_common::checksum::checksum(&body)) != file.checksum {
            return Err(damaged("fails its checksum (damaged on disk)".into()));
        }
        let key = unhex(&file.body.key)
            .filter(|k| k.len() == 32)
            .ok_or_else(|| damaged("holds a key that is not 64 hex digits".into()))?;
        if let Some(bad) = file.body.identities.keys().find(|i| !valid_identity(i)) {
            return Err(damaged(format!("names an invalid identity {bad:?}")));
        }
        Ok(Credentials {
            inner: Arc::new(Inner {
                key: hmac::Key::new(hmac::HMAC_SHA256, &key),
                key_hex: file.body.key,
                path: Some(path),
                book: RwLock::new(file.body.identities),
                writing: Mutex::new(()),
            }),
        })
    }

    /// Credentials with a fresh random key and no identity.
    fn fresh(path: Option<PathBuf>) -> Result<Credentials> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| {
            Error::io(
                "no randomness for the credential key",
                std::io::Error::other(e),
            )
        })?;
        Ok(Credentials {
            inner: Arc::new(Inner {
                key: hmac::Key::new(hmac::HMAC_SHA256, &key),
                key_hex: hex(&key),
                path,
                book: RwLock::new(BTreeMap::new()),
                writing: Mutex::new(()),
            }),
        })
    }

    /// The token of `identity` (whether or not it is issued).
    fn token_of(&self, identity: &str) -> String {
        let tag = hmac::sign(&self.inner.key, identity.as_bytes());
        format!("{TOKEN_PREFIX}{identity}.{}", hex(tag.as_ref()))
    }

    /// What `token` (without its `Bearer `) proves. The MAC is checked in constant time.
    pub fn verify(&self, token: &[u8]) -> Verdict {
        let Some(rest) = token.strip_prefix(TOKEN_PREFIX.as_bytes()) else {
            return Verdict::Unknown;
        };
        let Ok(rest) = std::str::from_utf8(rest) else {
            return Verdict::Unknown;
        };
        let Some((identity, mac)) = rest.split_once('.') else {
            return Verdict::Unknown;
        };
        let Some(mac) = unhex(mac) else {
            return Verdict::Unknown;
        };
        if !valid_identity(identity)
            || hmac::verify(&self.inner.key, identity.as_bytes(), &mac).is_err()
        {
            return Verdict::Unknown;
        }
        let book = self.inner.book.read().unwrap_or_else(|e| e.into_inner());
        match book.get(identity) {
            Some(issued) if issued.revoked_unix.is_none() => Verdict::Valid(Arc::from(identity)),
            Some(_) => Verdict::Revoked(Arc::from(identity)),
            // Signed by this key but never issued (a file restored from an older backup): no access.
            None => Verdict::Unknown,
        }
    }

    /// Whether `identity`, named by a client certificate that chains to the coordinator's client CA, may
    /// work: only an identity issued here (`nqueens credential issue`) and not revoked. The CA proves who
    /// signed the certificate; this book decides, at once, whether that identity works now.
    pub fn admits(&self, identity: &str) -> Verdict {
        if !valid_identity(identity) {
            return Verdict::Unknown;
        }
        let book = self.inner.book.read().unwrap_or_else(|e| e.into_inner());
        match book.get(identity) {
            Some(issued) if issued.revoked_unix.is_none() => Verdict::Valid(Arc::from(identity)),
            Some(_) => Verdict::Revoked(Arc::from(identity)),
            None => Verdict::Unknown,
        }
    }

    /// Issues a credential for `identity` and returns its token; durable on return. An identity issued
    /// already gets its token again; a revoked one is refused (issue a new identity). Blocking: call it
    /// off the async threads.
    pub fn issue(&self, identity: &str) -> Result<String> {
        if !valid_identity(identity) {
            return Err(Error::Invalid(format!(
                "identity {:?} must be 1 to {MAX_IDENTITY_LEN} letters, digits, - or _ (and not {SHARED_IDENTITY:?})",
                crate::error::truncate(identity)
            )));
        }
        let _one = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut book = self.book();
        match book.get(identity) {
            Some(i) if i.revoked_unix.is_some() => {
                return Err(Error::Invalid(format!(
                    "identity {identity:?} was revoked; a revoked identity is never issued again: issue another name"
                )))
            }
            Some(_) => return Ok(self.token_of(identity)),
            None => {}
        }
        if book.len() >= MAX_IDENTITIES {
            return Err(Error::TooMany(format!(
                "{MAX_IDENTITIES} identities are issued, the most one coordinator holds"
            )));
        }
        book.insert(
            identity.to_string(),
            Issued {
                issued_unix: now_unix(),
                revoked_unix: None,
            },
        );
        self.save(&book)?;
        *self.inner.book.write().unwrap_or_else(|e| e.into_inner()) = book;
        tracing::info!(identity, "worker credential issued");
        Ok(self.token_of(identity))
    }

    /// Revokes `identity`: every call with its token is refused from now on; durable on return. Returns
    /// false when it was revoked already. Blocking: call it off the async threads.
    pub fn revoke(&self, identity: &str) -> Result<bool> {
        let _one = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut book = self.book();
        let Some(issued) = book.get_mut(identity) else {
            return Err(Error::Invalid(format!(
                "no credential is issued to {:?}; nothing revoked",
                crate::error::truncate(identity)
            )));
        };
        if issued.revoked_unix.is_some() {
            return Ok(false);
        }
        issued.revoked_unix = Some(now_unix());
        self.save(&book)?;
        *self.inner.book.write().unwrap_or_else(|e| e.into_inner()) = book;
        tracing::warn!(identity, "worker credential revoked: its calls are refused");
        Ok(true)
    }

    /// Every identity issued, by name.
    pub fn book(&self) -> BTreeMap<String, Issued> {
        self.inner
            .book
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Writes the file whole: a temporary file, owner-only, fsynced, renamed over the old, and the
    /// directory fsynced. A failure leaves the old file as it was.
    fn save(&self, identities: &BTreeMap<String, Issued>) -> Result<()> {
        let Some(path) = &self.inner.path else {
            return Ok(());
        };
        let body = Body {
            key: self.inner.key_hex.clone(),
            identities: identities.clone(),
        };
        let json = serde_json::to_vec(&body).expect("the body serializes");
        let file = File {
            version: FORMAT_VERSION,
            checksum: format!("{:016x}", nqueens_common::checksum::checksum(&json)),
            body,
        };
        let bytes = serde_json::to_vec_pretty(&file).expect("the file serializes");
        let failed =
            |e: std::io::Error| Error::durable_io(format!("cannot write {}", path.display()), e);
        let tmp = path.with_extension("json.tmp");
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&tmp).map_err(failed)?;
            f.write_all(&bytes).map_err(failed)?;
            f.sync_all().map_err(failed)?;
        }
        std::fs::rename(&tmp, path).map_err(failed)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(failed)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issued_token_proves_its_identity_and_nothing_else() {
        let c = Credentials::open(None).unwrap();
        let token = c.issue("node-1").unwrap();
        assert!(token.starts_with("nqw1.node-1."));
        assert_eq!(c.verify(token.as_bytes()), Verdict::Valid("node-1".into()));
        // Issuing again gives the same token.
        assert_eq!(c.issue("node-1").unwrap(), token);
        // Another identity under the same MAC, a changed MAC, a cut one, other keys: nothing.
        let mac = token.rsplit_once('.').unwrap().1;
        // The MAC's last digit changed (to another digit: a key whose MAC ends in 0 made this case
        // the token itself, one run in sixteen).
        let last = if token.ends_with('0') { '1' } else { '0' };
        for forged in [
            format!("nqw1.node-2.{mac}"),
            format!("{}{last}", &token[..token.len() - 1]),
            token[..token.len() - 2].to_string(),
            format!("nqw2.node-1.{mac}"),
            "nqw1.node-1".to_string(),
            String::new(),
        ] {
            assert_eq!(c.verify(forged.as_bytes()), Verdict::Unknown, "{forged}");
        }
        let other = Credentials::open(None).unwrap();
        other.issue("node-1").unwrap();
        assert_eq!(other.verify(token.as_bytes()), Verdict::Unknown);
        // Signed by this key, never issued: nothing.
        assert_eq!(c.verify(c.token_of("node-9").as_bytes()), Verdict::Unknown);
    }

    #[test]
    fn a_revoked_identity_is_refused_and_never_issued_again() {
        let c = Credentials::open(None).unwrap();
        let token = c.issue("node-1").unwrap();
        assert!(c.revoke("node-1").unwrap());
        assert!(!c.revoke("node-1").unwrap());
        assert_eq!(
            c.verify(token.as_bytes()),
            Verdict::Revoked("node-1".into())
        );
        assert!(matches!(c.issue("node-1"), Err(Error::Invalid(_))));
        assert!(matches!(c.revoke("node-2"), Err(Error::Invalid(_))));
    }

    /// A credentials file that cannot be read (here a directory in its place) is an error, never taken
    /// for a missing one and replaced by a fresh key (which would invalidate every credential).
    #[test]
    fn an_unreadable_file_is_an_error_not_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(CREDENTIALS_FILE)).unwrap();
        assert!(matches!(
            Credentials::open(Some(dir.path())),
            Err(Error::Io { .. })
        ));
        assert!(dir.path().join(CREDENTIALS_FILE).is_dir());
    }

    /// The debug form shows where the credentials live, never their key.
    #[test]
    fn the_debug_form_shows_no_key() {
        let dir = tempfile::tempdir().unwrap();
        let c = Credentials::open(Some(dir.path())).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains(&c.inner.key_hex), "{shown}");
        assert!(shown.contains(CREDENTIALS_FILE), "{shown}");
    }

    #[test]
    fn identities_are_checked() {
        for bad in ["", "a.b", "a b", SHARED_IDENTITY, &"x".repeat(33), "é"] {
            assert!(!valid_identity(bad), "{bad:?}");
        }
        assert!(valid_identity(&"x".repeat(32)));
        assert!(valid_identity("rack-7_node-12"));
        let c = Credentials::open(None).unwrap();
        assert!(matches!(c.issue("a.b"), Err(Error::Invalid(_))));
    }

    #[test]
    fn the_file_keeps_issues_and_revocations_and_refuses_damage() {
        let dir = tempfile::tempdir().unwrap();
        let c = Credentials::open(Some(dir.path())).unwrap();
        let one = c.issue("node-1").unwrap();
        let two = c.issue("node-2").unwrap();
        c.revoke("node-2").unwrap();
        drop(c);
        let path = dir.path().join(CREDENTIALS_FILE);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = Credentials::open(Some(dir.path())).unwrap();
        let book = again.book();
        assert!(book["node-1"].issued_unix > 1_700_000_000);
        assert!(book["node-2"].revoked_unix.unwrap() >= book["node-2"].issued_unix);
        assert_eq!(book["node-1"].revoked_unix, None);
        assert_eq!(
            again.verify(one.as_bytes()),
            Verdict::Valid("node-1".into())
        );
        assert_eq!(
            again.verify(two.as_bytes()),
            Verdict::Revoked("node-2".into())
        );
        // Every single byte flipped: refused or read exactly as written (never a revocation lost).
        let bytes = std::fs::read(&path).unwrap();
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x04;
            std::fs::write(&path, &damaged).unwrap();
            if let Ok(c) = Credentials::open(Some(dir.path())) {
                assert_eq!(c.book(), again.book(), "byte {i}");
                assert_eq!(c.verify(two.as_bytes()), Verdict::Revoked("node-2".into()));
            }
        }
        let newer = String::from_utf8(bytes)
            .unwrap()
            .replace("\"version\": 1", "\"version\": 2");
        std::fs::write(&path, newer).unwrap();
        assert!(matches!(
            Credentials::open(Some(dir.path())),
            Err(Error::Corrupt(_))
        ));
    }
}
