//! What can go wrong on a device: a runtime that is missing, a device that is not there, a kernel that
//! does not compile, a call that fails, or an answer that does not hold together.

/// A GPU error. Every variant says what to do where there is something to do.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No device matched what was asked for; `why` says what was found and what is missing.
    #[error("no GPU: {0}")]
    NoDevice(String),
    /// The device list could not be read (`--gpu` takes `cuda:K`, `opencl:K` or `K`, comma-separated).
    #[error("invalid --gpu device list {0:?}: expected items like cuda:0, opencl:1 or 2, comma-separated")]
    BadSpec(String),
    /// The runtime compiler refused the kernel.
    #[error("the {backend} compiler refused the search kernel: {log}")]
    Compile { backend: &'static str, log: String },
    /// A runtime call failed.
    #[error("{backend} {what}: {detail}")]
    Call {
        backend: &'static str,
        what: &'static str,
        detail: String,
    },
    /// The device's answer failed a check (a seed unwritten, more completions than nodes): the device or
    /// its driver is not trustworthy, and nothing it computed in this batch is used.
    #[error("the device's answer failed its check: {0}")]
    BadAnswer(String),
    /// A kernel variant or launch shape that does not exist or no device can run.
    #[error("invalid GPU kernel shape: {0}")]
    BadShape(String),
    /// A batch too large for the device's tables.
    #[error("batch too large: {0}")]
    TooLarge(String),
}

impl GpuError {
    /// A `map_err` for a failed runtime call of `backend` doing `what`.
    pub(crate) fn call<E: std::fmt::Display>(
        backend: &'static str,
        what: &'static str,
    ) -> impl FnOnce(E) -> GpuError {
        move |e| GpuError::Call {
            backend,
            what,
            detail: e.to_string(),
        }
    }
}
