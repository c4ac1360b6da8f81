//! Pure counting core of nqueens-cluster: boards, the 8 symmetries, the two partition strategies, jobs and
//! the search kernel. No async, and no I/O but one module: everything here is deterministic and testable in
//! isolation. The exception is [`jsonl`], the checksummed JSON-lines file that both the worker's journal
//! and the coordinator's ledger are written in; [`checksum`] seals every job result where it is computed.

pub mod baseline;
pub mod board;
pub mod bound;
pub mod certificate;
pub mod checksum;
pub mod error;
pub mod estimate;
pub mod family;
pub mod fixed;
pub mod job;
pub mod jsonl;
pub mod kernel;
pub mod key;
pub mod names;
pub mod partition;
pub mod reference;
pub mod solve;
pub mod symmetry;
pub mod tally;

pub use board::PartialBoard;
pub use error::{Error, Result};
pub use family::{Family, FamilySet};
pub use job::{Job, JobKey, JobResult, Work};
pub use partition::{Plan, Strategy, SubProblem, Summary};
pub use symmetry::{Symmetry, SymmetrySet};
pub use tally::Tally;
