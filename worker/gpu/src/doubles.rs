//! Test doubles of a device, for the tests of this crate and of those that drive a device (the
//! `doubles` feature): launches that stay under way until waited for, and answer the true search.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use nqueens_common::kernel::seeds::{search_seed, SEED_WORDS};

use crate::{DeviceInfo, GpuError, Launch, Pending};

/// A device whose launches run "on the device" until waited for: each answers the true search of its
/// tables (searched on the host when waited for), and the double counts its launches and how many were
/// under way at once.
pub struct Later {
    pub info: DeviceInfo,
    /// Launches submitted.
    pub launches: Arc<AtomicUsize>,
    /// Launches submitted and not yet waited for.
    pub under_way: Arc<AtomicUsize>,
    /// The most under way at once.
    pub most: Arc<AtomicUsize>,
}

impl Later {
    pub fn new(info: DeviceInfo) -> Later {
        Later {
            info,
            launches: Default::default(),
            under_way: Default::default(),
            most: Default::default(),
        }
    }
}

impl Launch for Later {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn launch(&mut self, s: &[u32], f: &[u32], t: &[u32], full: u32) -> Result<Vec<u64>, GpuError> {
        self.submit(s, f, t, full)?.wait()
    }

    fn submit(
        &mut self,
        seeds: &[u32],
        forbid: &[u32],
        tails: &[u32],
        full: u32,
    ) -> Result<Pending, GpuError> {
        self.launches.fetch_add(1, SeqCst);
        let now = self.under_way.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        let (seeds, forbid, tails) = (seeds.to_vec(), forbid.to_vec(), tails.to_vec());
        let under_way = self.under_way.clone();
        Ok(Pending::later(move || {
            under_way.fetch_sub(1, SeqCst);
            Ok(seeds
                .chunks_exact(SEED_WORDS)
                .flat_map(|s| {
                    let (c, n) = search_seed(s, &forbid, &tails, full);
                    [c, n]
                })
                .collect())
        }))
    }
}
