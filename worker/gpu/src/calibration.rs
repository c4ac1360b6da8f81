//! What calibrating a device measured: each candidate shape's time on the fixed batch, and the one
//! chosen. Made by `calibrate.rs`, kept with the device it was measured on (`engine.rs`).

use std::time::Duration;

use crate::Shape;

/// Board sizes the calibration batch may have: the smallest whose launch takes long enough on the
/// first candidate, so that a fast device is timed on enough work and a slow one is not kept waiting.
pub(crate) const SIZES: std::ops::RangeInclusive<u8> = 12..=18;

/// One candidate's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub shape: Shape,
    /// Device time of the batch's launch, or why the candidate cannot run here.
    pub outcome: Result<Duration, String>,
}

/// What calibration measured and chose.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// The board size of the batch every candidate searched.
    pub n: u8,
    /// Search nodes of that batch on the device.
    pub nodes: u64,
    pub trials: Vec<Trial>,
    pub chosen: Shape,
    /// The file it was kept in, where it was read from one rather than measured at this open (the
    /// chosen shape then timed again here, the others as kept).
    pub kept: Option<std::path::PathBuf>,
}

impl Calibration {
    /// The chosen shape's node rate on the batch.
    pub fn rate(&self) -> f64 {
        self.trials
            .iter()
            .find(|t| t.shape == self.chosen)
            .and_then(|t| t.outcome.as_ref().ok())
            .map_or(0.0, |d| self.nodes as f64 / d.as_secs_f64().max(1e-9))
    }

    /// One line for logs: the choice, its rate, and every candidate's time.
    pub fn summary(&self) -> String {
        let trials: Vec<String> = self
            .trials
            .iter()
            .map(|t| match &t.outcome {
                Ok(d) => format!("{} {:.1} ms", t.shape, d.as_secs_f64() * 1e3),
                Err(e) => format!("{} failed ({e})", t.shape),
            })
            .collect();
        let kept = match &self.kept {
            Some(file) => format!("; kept in {}", file.display()),
            None => String::new(),
        };
        format!(
            "chose {} at {:.2} Gnodes/s on N = {} ({}{kept})",
            self.chosen,
            self.rate() / 1e9,
            self.n,
            trials.join(", ")
        )
    }
}
