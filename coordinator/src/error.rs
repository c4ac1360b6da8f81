//! The coordinator's one error type. The store and the lease logic speak it; the gRPC layer alone turns it
//! into a `tonic::Status` (see `grpc::status`).

use thiserror::Error;

/// Why a coordinator operation failed.
#[derive(Debug, Error)]
pub enum Error {
    /// Bad input from a client: nothing was changed.
    #[error(transparent)]
    Input(#[from] nqueens_common::Error),
    /// A request that is malformed or over a limit: nothing was changed.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A report refused whole, for the request itself (a worker id or name, its size, a device name),
    /// not for any result it carries: the worker stops rather than drop its results. Wraps why.
    #[error(transparent)]
    WholeRequest(Box<Error>),
    /// A limit on what the coordinator holds at once (open runs) is reached: nothing was changed.
    #[error("{0}")]
    TooMany(String),
    /// No run has this id.
    #[error("unknown run {0:?}")]
    UnknownRun(String),
    /// A report for a job that was never leased under the lease it names.
    #[error("job {job} of run {run} was never leased under lease {lease}")]
    NotLeased {
        run: String,
        job: String,
        lease: u64,
    },
    /// A reported result whose seal is missing or does not match it: damaged on its way, never counted.
    #[error("the result for job {job} of run {run} fails its seal (damaged in the worker's journal or in transit); refused, the job will be computed again")]
    Unsealed { run: String, job: String },
    /// A run an operator cancelled: it takes no results and no change but another cancel.
    #[error("run {0} is cancelled: it leases nothing and records no results")]
    RunCancelled(String),
    /// A record run's result from a caller without an issued worker credential (the operator's token,
    /// whose names are only stated; the shared workers' token, one identity for any number of machines):
    /// it cannot be one of two independent identities.
    #[error("run {0} is a record run: it takes results from issued worker credentials only")]
    RecordOnly(String),
    /// A run whose totals are final: it takes no control.
    #[error("run {0} is done: its totals are final")]
    RunDone(String),
    /// A result validated against a job read as done or failed, whose job was open again by the commit (a
    /// revocation in between): nothing of its batch was committed; sent again, it is validated anew.
    #[error("job {job} of run {run} changed while its result was being checked; nothing was recorded, send it again")]
    Raced { run: String, job: String },
    /// A worker whose result others disproved: it gets no more leases and its reports are refused.
    #[error("worker {worker:?} is quarantined: {reason}")]
    Quarantined { worker: String, reason: String },
    /// The store on disk disagrees with itself (the startup audit, or a plan that changed).
    #[error("store is inconsistent: {0}")]
    Corrupt(String),
    /// The embedded database failed.
    #[error("store: {0}")]
    Store(#[source] sled::Error),
    /// Results were applied but could not be made durable: they are not acknowledged.
    #[error("could not make results durable: {0}")]
    Durability(String),
    /// A file that makes results durable (the ledger, its rewrite, an export, the credentials) could
    /// not be read or written: nothing is acknowledged on it.
    #[error("could not make results durable: {what}: {source}")]
    DurableIo {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A file, a socket or the system's randomness this process needs cannot be used (not the
    /// request's fault).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The store's directory is held by another process.
    #[error("{0} is in use by another nqueens process (one process per data directory: stop it, or pick another with --data)")]
    InUse(String),
    /// The coordinator is shutting down.
    #[error("coordinator is shutting down")]
    ShuttingDown,
}

impl Error {
    /// [`Error::Io`]: `what` was being done when `source` happened.
    pub fn io(what: impl Into<String>, source: impl Into<std::io::Error>) -> Error {
        Error::Io {
            what: what.into(),
            source: source.into(),
        }
    }

    /// [`Error::DurableIo`]: `what` was being done when `source` happened.
    pub fn durable_io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::DurableIo {
            what: what.into(),
            source,
        }
    }

    /// This error as a refusal of the whole request ([`Error::WholeRequest`]), where it is an invalid
    /// request; any other error as it is.
    pub fn of_the_request(self) -> Error {
        match self {
            Error::Invalid(_) => Error::WholeRequest(Box::new(self)),
            other => other,
        }
    }
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Error {
        Error::Store(e)
    }
}

impl From<sled::transaction::TransactionError<Error>> for Error {
    fn from(e: sled::transaction::TransactionError<Error>) -> Error {
        match e {
            sled::transaction::TransactionError::Abort(e) => e,
            sled::transaction::TransactionError::Storage(e) => Error::Store(e),
        }
    }
}

/// Result alias of the coordinator.
pub type Result<T> = std::result::Result<T, Error>;

/// Cuts client-supplied text to a length fit for an error message or a log line.
pub(crate) fn truncate(s: &str) -> String {
    if s.len() <= 64 {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(32).collect::<String>())
    }
}
