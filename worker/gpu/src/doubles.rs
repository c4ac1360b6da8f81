//! Test doubles of a device, for the tests of this crate and of those that drive a device (the
//! `doubles` feature): launches that stay under way until waited for and answer the true search, some
//! of their answers altered at will (wrong, slow, held back).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use nqueens_common::kernel::seeds::{search_seed, SEED_WORDS};

use crate::{DeviceInfo, GpuError, Launch, Pending};

/// What alters a launch's answer: the launch's number from 0, its seeds, the answer under way.
type Alter = Box<dyn FnMut(usize, usize, Pending) -> Pending + Send>;

/// A device whose launches run "on the device" until waited for: each answers the true search of its
/// tables (searched on the host when waited for), unless [`Later::altered`]; the double counts its
/// launches and how many were under way at once.
pub struct Later {
    pub info: DeviceInfo,
    /// Launches submitted.
    pub launches: Arc<AtomicUsize>,
    /// Launches submitted and not yet waited for.
    pub under_way: Arc<AtomicUsize>,
    /// The most under way at once.
    pub most: Arc<AtomicUsize>,
    alter: Option<Alter>,
}

impl Later {
    pub fn new(info: DeviceInfo) -> Later {
        Later {
            info,
            launches: Default::default(),
            under_way: Default::default(),
            most: Default::default(),
            alter: None,
        }
    }

    /// This device with each launch's answer passed through `alter` (the launch's number from 0, its
    /// seeds, the answer under way).
    pub fn altered(
        mut self,
        alter: impl FnMut(usize, usize, Pending) -> Pending + Send + 'static,
    ) -> Later {
        self.alter = Some(Box::new(alter));
        self
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
        let number = self.launches.fetch_add(1, SeqCst);
        let now = self.under_way.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        let n = seeds.len() / SEED_WORDS;
        let (seeds, forbid, tails) = (seeds.to_vec(), forbid.to_vec(), tails.to_vec());
        let under_way = self.under_way.clone();
        let pending = Pending::later(move || {
            under_way.fetch_sub(1, SeqCst);
            Ok(seeds
                .chunks_exact(SEED_WORDS)
                .flat_map(|s| {
                    let (c, n) = search_seed(s, &forbid, &tails, full);
                    [c, n]
                })
                .collect())
        });
        Ok(match self.alter.as_mut() {
            Some(alter) => alter(number, n, pending),
            None => pending,
        })
    }
}
