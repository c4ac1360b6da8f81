//! The `nqueens` command: planning and counting, locally today, through the coordinator tomorrow.

pub mod cli;
