//! The wire crate's one error type: what can go wrong before a call is even made.

use thiserror::Error;

/// Why a connection to a coordinator could not be set up.
#[derive(Debug, Error)]
pub enum Error {
    /// The coordinator address (or what it needs: the CA file, the token) is not usable.
    #[error("invalid coordinator address {0:?}: {1}")]
    Address(String, String),
}

/// Result alias of the wire crate.
pub type Result<T> = std::result::Result<T, Error>;
