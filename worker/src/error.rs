//! The worker library's one error type.

use std::path::PathBuf;

use thiserror::Error;

/// Why the worker stopped.
#[derive(Debug, Error)]
pub enum Error {
    /// The counting core rejected something (a job the coordinator sent, or an overflow).
    #[error(transparent)]
    Core(#[from] nqueens_common::Error),
    /// The coordinator address (or its CA file, or the token) is not usable.
    #[error(transparent)]
    Connect(#[from] nqueens_proto::Error),
    /// The journal file could not be read or written.
    #[error("journal {path}: {1}", path = .0.display())]
    Journal(PathBuf, #[source] std::io::Error),
    /// The journal holds lines whose checksums hold but that this build cannot read: a newer build's.
    #[error("journal {path} holds {1} lines of a newer build (intact, in a format or of a kind this build does not know): run that build on it, or move the journal away (its unacknowledged results are then computed again)", path = .0.display())]
    JournalOfAnotherBuild(PathBuf, u64),
    /// Another worker holds the journal's lock.
    #[error("journal {} is in use by another worker; give each worker its own --name or --journal", .0.display())]
    JournalInUse(PathBuf),
    /// A GPU asked for could not be opened (no runtime, no such device, the kernel did not compile).
    #[error("GPU: {0}")]
    Gpu(#[from] nqueens_gpu::GpuError),
    /// The worker's name cannot make a worker id the coordinator takes (see [`nqueens_common::names::MAX_WORKER_NAME_LEN`]).
    #[error("worker name {0:?} must be 1 to {max} bytes of printable characters, none of Unicode's format characters or separators of lines", max = nqueens_common::names::MAX_WORKER_NAME_LEN)]
    BadName(String),
    /// The coordinator refused the worker for good (for example a quarantine or a wrong token).
    #[error("the coordinator refused this worker: {0}")]
    Refused(String),
    /// The TLS handshake failed in a way no retry mends (a certificate that does not chain to `--tls-ca`,
    /// has expired, is not yet valid, or names another host): what happened and the flag to fix.
    #[error("cannot trust the coordinator: {0}")]
    Tls(String),
}

/// Result alias of the worker library.
pub type Result<T> = std::result::Result<T, Error>;
