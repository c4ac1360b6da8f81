//! The one error type of the counting core: every way an input can be rejected before the kernel runs.

use thiserror::Error;

/// Smallest board size the project counts.
pub const MIN_N: u8 = 1;
/// Largest board size the project counts (column masks are `u32`).
pub const MAX_N: u8 = 32;

/// Why an input to the counting core was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The board size is outside `MIN_N..=MAX_N`.
    #[error("N = {0} is out of range: N must be between {MIN_N} and {MAX_N}")]
    NOutOfRange(u32),
    /// A queen lies outside the board.
    #[error("queen at row {row}, column {col} lies outside a board of size {n}")]
    OffBoard { n: u8, row: u32, col: u32 },
    /// Two queens of a partial board attack each other.
    #[error("queens at ({0}, {1}) and ({2}, {3}) attack each other")]
    Attack(u8, u8, u8, u8),
    /// A strategy name that is not `d4` or `mirror`.
    #[error("unknown strategy {0:?}: expected \"d4\" or \"mirror\"")]
    UnknownStrategy(String),
    /// A job key that does not name a job of the given plan.
    #[error("job key {0:?} does not name a job of this plan")]
    UnknownJob(String),
    /// A partition setting outside what the strategy supports.
    #[error("invalid partition setting: {0}")]
    InvalidSetting(String),
    /// Results that cannot all be right (for example a unique-count sum that is not a multiple of 8).
    #[error("inconsistent results: {0}")]
    Inconsistent(String),
    /// A job's result that no search of that job can produce (a fault in the machine that computed it,
    /// or a forged result): never counted.
    #[error("implausible result: {0}")]
    Implausible(String),
    /// Work ended early because it was cancelled (its process is shutting down).
    #[error("cancelled while {0}")]
    Cancelled(&'static str),
    /// An exact counter would overflow.
    #[error("counter overflow while adding {0}")]
    Overflow(&'static str),
}

/// Result alias of the counting core.
pub type Result<T> = std::result::Result<T, Error>;

/// Checks that `n` is a board size the project counts.
pub fn check_n(n: u32) -> Result<u8> {
    if (MIN_N as u32..=MAX_N as u32).contains(&n) {
        Ok(n as u8)
    } else {
        Err(Error::NOutOfRange(n))
    }
}
