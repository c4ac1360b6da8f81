//! The key of a job: the short text that names one job of a plan, from which any machine regenerates the
//! same search.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The key of a job within its plan: mirror, the prefix columns; d4, `[w, e, prefix columns...]`.
/// Written as dot-separated numbers (`"3.7.1"`); this text is the job's stable id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobKey(pub Vec<u8>);

impl fmt::Display for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|c| c.to_string()).collect();
        f.write_str(&parts.join("."))
    }
}

impl FromStr for JobKey {
    type Err = Error;
    fn from_str(s: &str) -> Result<JobKey> {
        if s.len() > 200 {
            return Err(Error::UnknownJob(format!(
                "{}...",
                s.chars().take(32).collect::<String>()
            )));
        }
        s.split('.')
            .map(|p| {
                p.parse::<u8>()
                    .map_err(|_| Error::UnknownJob(s.to_string()))
            })
            .collect::<Result<_>>()
            .map(JobKey)
    }
}
