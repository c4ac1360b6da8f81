//! Spot checks: jobs whose result two identities already agreed on, leased again to a worker credential
//! among its ordinary jobs, where it cannot tell them apart. A right answer is a passed check; a wrong
//! one contradicts a confirmed result, which quarantines the worker and takes back everything it had
//! counted (the store's commit does that). New identities are checked often, and less as they pass:
//! the chance that a worker lying on a share `L` of its jobs goes `k` jobs unseen is at most
//! `(1 - rate * L)^k`, with `rate` its spot-check rate ([`rate`]).
//!
//! The checks passed are saved in the store now and then and restored at the start
//! ([`SpotChecks::restore`]); the confirmed jobs seen are not (a restart's pool fills again as jobs are
//! confirmed). A pass lost to a crash costs a check, never a count.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hasher;

use nqueens_common::JobKey;
use tokio::time::Instant;

use super::grant::Granted;

/// The share of a new identity's leases that are spot checks.
pub const NEW_RATE: f64 = 0.2;
/// The least share, however many checks an identity passed.
pub const MIN_RATE: f64 = nqueens_common::bound::MIN_SPOT_RATE;

pub use nqueens_common::bound::{default_max_error, max_error_at, spot_rate_for};

/// Whether `max_error` may be a run's bound ([`nqueens_common::bound::check_max_error`]).
pub fn check_max_error(max_error: f64) -> crate::error::Result<()> {
    nqueens_common::bound::check_max_error(max_error).map_err(crate::error::Error::Invalid)
}
/// Confirmed jobs remembered per run (the oldest are forgotten first).
pub const POOL_PER_RUN: usize = 4096;
/// Identities whose passed checks are remembered (the fewest-checked are forgotten first beyond it).
const MAX_IDENTITIES: usize = 65_536;
/// Most checks one identity may owe at once (more than it holds out at its rate, whatever its limit of
/// leases): beyond, its oldest are dropped for the newest.
const OWED_PER_IDENTITY: usize = 1024;
/// Most checks owed at once, all identities together: beyond, an identity that owes none owes no new
/// one (one that owes some drops its oldest).
const MAX_OWED: usize = 65_536;

/// The share of an identity's leases that are spot checks, after it passed `passed` of them:
/// [`NEW_RATE`] at first, halved for every ten passed, never below [`MIN_RATE`].
pub fn rate(passed: u64) -> f64 {
    let halvings = (passed / 10).min(64) as i32;
    (NEW_RATE * 0.5f64.powi(halvings)).max(MIN_RATE)
}

/// A confirmed job that spot checks may lease.
#[derive(Debug, Clone)]
struct Confirmed {
    key: JobKey,
    /// The identities whose results it holds (never checked with it).
    by: Vec<String>,
}

/// One spot check out: its run and job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    pub run: u64,
    pub key: JobKey,
}

/// The spot checks of one coordinator incarnation.
#[derive(Debug)]
pub struct SpotChecks {
    pool: HashMap<u64, VecDeque<Confirmed>>,
    passed: HashMap<String, u64>,
    out: HashMap<u64, Out>,
    /// The jobs of `out` (a job has one spot check out at a time: its lease is the job's only one).
    out_jobs: HashSet<(u64, JobKey)>,
    /// The key of the draws (random per incarnation) and a counter.
    key: [u8; 16],
    draws: u64,
    /// Whether `passed` changed since the last [`SpotChecks::unsaved`].
    changed: bool,
    /// Checks handed back or expired, by identity, oldest first: its next lease calls get them again
    /// first. At most [`OWED_PER_IDENTITY`] each, [`MAX_OWED`] in all (`owed_total`), for at most
    /// [`MAX_IDENTITIES`] identities.
    owed: HashMap<String, VecDeque<Out>>,
    owed_total: usize,
    /// Checks out whose job's count was taken back meanwhile ([`SpotChecks::forget`]): no check any
    /// more, owed to nobody once handed back or expired. Before, such a check was owed and issued
    /// again for the disputed job: its holder held the job from every drawn decider while out, as
    /// often as it liked (found by a review, 2026-12-01).
    void: HashSet<u64>,
}

impl SpotChecks {
    /// No confirmed job yet; draws keyed with `key`.
    pub fn new(key: [u8; 16]) -> SpotChecks {
        SpotChecks {
            pool: HashMap::new(),
            passed: HashMap::new(),
            out: HashMap::new(),
            out_jobs: HashSet::new(),
            key,
            draws: 0,
            changed: false,
            owed: HashMap::new(),
            owed_total: 0,
            void: HashSet::new(),
        }
    }

    /// Notes that identity `name` owes check `out` (it handed the check back, or let it expire): a liar
    /// that tells checks from fresh jobs must not dodge them for free. Every check it dodged, each
    /// once, until it is leased again, its run cancelled or its count taken back; at most
    /// [`OWED_PER_IDENTITY`] (the oldest dropped for the newest) and [`MAX_OWED`] in all, for at most
    /// [`MAX_IDENTITIES`] identities.
    pub fn owe(&mut self, name: &str, out: Out) {
        let owes = self.owed.get(name).map_or(0, VecDeque::len);
        if owes == 0 && (self.owed.len() >= MAX_IDENTITIES || self.owed_total >= MAX_OWED) {
            return;
        }
        let owed = self.owed.entry(name.to_string()).or_default();
        if owed.contains(&out) {
            return;
        }
        if owed.len() >= OWED_PER_IDENTITY || self.owed_total >= MAX_OWED {
            owed.pop_front();
            self.owed_total -= 1;
        }
        owed.push_back(out);
        self.owed_total += 1;
    }

    /// Up to `most` of the checks identity `name` owes, oldest first, among those of `runs` (the runs it
    /// may lease from in this call) with no check of their job out: taken off the books (leased again,
    /// each is owed again only if dodged again). The others stay owed for a later call.
    fn take_owed(&mut self, name: &str, runs: &[u64], most: usize) -> Vec<Out> {
        let Some(mut owed) = self.owed.remove(name) else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        owed.retain(|out| {
            let due = taken.len() < most
                && runs.contains(&out.run)
                && !self.out_jobs.contains(&(out.run, out.key.clone()));
            if due {
                taken.push(out.clone());
            }
            !due
        });
        self.owed_total -= taken.len();
        if !owed.is_empty() {
            self.owed.insert(name.to_string(), owed);
        }
        taken
    }

    /// Drops the owed checks that `keep` refuses, keeping the count of them.
    fn drop_owed(&mut self, keep: impl Fn(&Out) -> bool) {
        for owed in self.owed.values_mut() {
            owed.retain(|o| keep(o));
        }
        self.owed.retain(|_, owed| !owed.is_empty());
        self.owed_total = self.owed.values().map(VecDeque::len).sum();
    }

    /// Takes up the checks passed as saved (a start), at most [`MAX_IDENTITIES`] of them, the most
    /// passed first.
    pub fn restore(&mut self, saved: impl IntoIterator<Item = (String, u64)>) {
        let mut saved: Vec<(String, u64)> = saved.into_iter().collect();
        saved.sort_by_key(|s| std::cmp::Reverse(s.1));
        saved.truncate(MAX_IDENTITIES);
        self.passed = saved.into_iter().collect();
    }

    /// Marks the checks passed as unsaved again (their save failed).
    pub fn unsaved_again(&mut self) {
        self.changed = true;
    }

    /// The checks passed, when they changed since the last call (to be saved).
    pub fn unsaved(&mut self) -> Option<std::collections::BTreeMap<String, u64>> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        Some(self.passed.iter().map(|(k, v)| (k.clone(), *v)).collect())
    }

    /// A uniform draw in [0, 1) that no worker can predict.
    fn draw(&mut self) -> f64 {
        let mut h = siphasher::sip::SipHasher24::new_with_key(&self.key);
        h.write_u64(self.draws);
        self.draws += 1;
        (h.finish() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Remembers job `key` of run `run`, whose result the identities `by` agreed on.
    pub fn confirmed(&mut self, run: u64, key: JobKey, by: Vec<String>) {
        let pool = self.pool.entry(run).or_default();
        if pool.len() >= POOL_PER_RUN {
            pool.pop_front();
        }
        pool.push_back(Confirmed { key, by });
    }

    /// Forgets the confirmed jobs of run `run` (the run cancelled).
    pub fn forget_run(&mut self, run: u64) {
        self.pool.remove(&run);
        // Its checks out ended with its leases.
        self.out.retain(|_, o| o.run != run);
        self.out_jobs.retain(|(r, _)| *r != run);
        let out = &self.out;
        self.void.retain(|id| out.contains_key(id));
        self.drop_owed(|o| o.run != run);
    }

    /// Forgets the jobs `taken` (their results taken back), and the checks owed of them: each pool, and
    /// the owed checks, walked once whatever their number. A quarantine takes back every unconfirmed
    /// result of its worker, a million at N = 28, and a walk of the pool per result held the state
    /// lock for seconds (found by a review, 2026-11-29).
    pub fn forget<'a>(&mut self, taken: impl IntoIterator<Item = (u64, &'a JobKey)>) {
        // (Most commits take nothing back: no walk then.)
        let mut taken = taken.into_iter().peekable();
        if taken.peek().is_none() {
            return;
        }
        // The runs that hold a pool or owed checks: only their keys are kept for the walk. (A check
        // out was drawn from its run's pool, which goes only with the run and its checks.)
        let owed_runs: HashSet<u64> = self.owed.values().flatten().map(|o| o.run).collect();
        let mut by_run: HashMap<u64, HashSet<&JobKey>> = HashMap::new();
        for (run, key) in taken {
            if self.pool.contains_key(&run) || owed_runs.contains(&run) {
                by_run.entry(run).or_default().insert(key);
            }
        }
        if by_run.is_empty() {
            return;
        }
        for (run, keys) in &by_run {
            if let Some(pool) = self.pool.get_mut(run) {
                pool.retain(|c| !keys.contains(&c.key));
            }
        }
        // A check out whose count was taken back is no check any more, owed to nobody once it ends.
        for (id, o) in &self.out {
            if by_run.get(&o.run).is_some_and(|keys| keys.contains(&o.key)) {
                self.void.insert(*id);
            }
        }
        // Nor is an owed one.
        if !owed_runs.is_empty() {
            self.drop_owed(|o| !by_run.get(&o.run).is_some_and(|keys| keys.contains(&o.key)));
        }
    }

    /// How many of `slots` leases for the identity `name` are to be spot checks, drawn one by one at
    /// its [`rate`], or at `floor` where that is higher (the open runs' stated bounds).
    pub fn how_many(&mut self, name: &str, slots: u32, floor: f64) -> u32 {
        let rate = rate(self.passed.get(name).copied().unwrap_or(0)).max(floor);
        (0..slots).filter(|_| self.draw() < rate).count() as u32
    }

    /// A confirmed job of one of `runs` (the first with one) that `name` did not compute, drawn at
    /// random from the run's pool.
    pub fn pick(&mut self, runs: &[u64], name: &str) -> Option<Out> {
        for &run in runs {
            let Some(len) = self.pool.get(&run).map(VecDeque::len) else {
                continue;
            };
            if len == 0 {
                continue;
            }
            // A few tries: the jobs this identity computed itself are passed by.
            for _ in 0..4 {
                let i = (self.draw() * len as f64) as usize % len;
                let c = &self.pool[&run][i];
                if !c.by.iter().any(|b| b == name) && !self.out_jobs.contains(&(run, c.key.clone()))
                {
                    return Some(Out {
                        run,
                        key: c.key.clone(),
                    });
                }
            }
        }
        None
    }

    /// Notes that lease `id` is a spot check of `out`.
    pub fn leased(&mut self, id: u64, out: Out) {
        self.out_jobs.insert((out.run, out.key.clone()));
        self.out.insert(id, out);
    }

    /// Ends spot check `id` (answered, expired or handed back); returns what it checked.
    pub fn ended(&mut self, id: u64) -> Option<Out> {
        self.ended_owing(id).map(|(out, _)| out)
    }

    /// [`SpotChecks::ended`], and whether its identity owes the check if it did not answer it: not
    /// where its job's count was taken back while it was out (no check any more).
    pub fn ended_owing(&mut self, id: u64) -> Option<(Out, bool)> {
        let void = self.void.remove(&id);
        let out = self.out.remove(&id)?;
        self.out_jobs.remove(&(out.run, out.key.clone()));
        Some((out, !void))
    }

    /// Ends spot check `id` if it checks job `key` of `run`, as a report under it answers it; returns
    /// what it checked. A report of another job under its lease leaves it out: only its own job's
    /// result answers a check (else stored counts of any done job, sent for free, would pass it).
    pub fn answered(&mut self, id: u64, run: u64, key: &JobKey) -> Option<Out> {
        match self.out.get(&id) {
            Some(out) if out.run == run && out.key == *key => self.ended(id),
            _ => None,
        }
    }

    /// Notes a check `name` passed.
    pub fn passed(&mut self, name: &str) {
        if !self.passed.contains_key(name) && self.passed.len() >= MAX_IDENTITIES {
            if let Some(least) = self
                .passed
                .iter()
                .min_by_key(|(_, n)| **n)
                .map(|(k, _)| k.clone())
            {
                self.passed.remove(&least);
            }
        }
        *self.passed.entry(name.to_string()).or_insert(0) += 1;
        self.changed = true;
    }

    /// Forgets the checks `name` passed (a worker lifted from a quarantine earns its record again).
    pub fn forget_passes(&mut self, name: &str) {
        if self.passed.remove(name).is_some() {
            self.changed = true;
        }
    }

    /// The checks `name` passed (as restored at the start, and since).
    pub fn passed_by(&self, name: &str) -> u64 {
        self.passed.get(name).copied().unwrap_or(0)
    }

    /// Whether spot check `id` is out (leased, not ended), its job with it.
    #[cfg(test)]
    pub fn is_out(&self, id: u64) -> bool {
        self.out
            .get(&id)
            .is_some_and(|o| self.out_jobs.contains(&(o.run, o.key.clone())))
    }

    /// Whether the identity `name` owes a check.
    #[cfg(test)]
    pub fn owes(&self, name: &str) -> bool {
        self.owed.contains_key(name)
    }

    /// The jobs of run `run`'s pool, oldest first.
    #[cfg(test)]
    pub fn pooled(&self, run: u64) -> Vec<JobKey> {
        self.pool
            .get(&run)
            .map(|pool| pool.iter().map(|c| c.key.clone()).collect())
            .unwrap_or_default()
    }
}

/// Leases spot checks to the worker process `worker` of the credential `name`, in place of some of the
/// `capacity` jobs it asked for: confirmed jobs it did not compute, of the first of `runs` (the running
/// runs it may lease from, in the order it leases them) that has any, leased like any other job. Never
/// a job of a finished run: every lease of one would be a check, and a liar would answer it honestly.
pub(super) fn lease(
    state: &mut super::State,
    worker: &str,
    name: &str,
    capacity: u32,
    runs: &[u64],
    now: Instant,
) -> Vec<Granted> {
    // The open runs it may lease from that state a bound raise its rate to theirs.
    let floor = runs
        .iter()
        .filter_map(|id| state.runs.get(id))
        .filter_map(|r| r.meta.max_error)
        .map(spot_rate_for)
        .fold(0.0, f64::max);
    if capacity == 0 {
        return Vec::new();
    }
    // The checks it owes first (handed back, or expired), then those drawn.
    let mut owed = state
        .spot
        .take_owed(name, runs, capacity as usize)
        .into_iter();
    let due = owed.len() as u32;
    let wanted = state.spot.how_many(name, capacity - due, floor) + due;
    if wanted == 0 {
        return Vec::new();
    }
    let mut spots = Vec::new();
    for _ in 0..wanted {
        let Some(out) = owed.next().or_else(|| state.spot.pick(runs, name)) else {
            break;
        };
        let Some(run) = state.runs.get(&out.run) else {
            break;
        };
        let (plan, fingerprint) = (run.plan, run.fingerprint);
        let id = state
            .leases
            .issue_check(out.run, out.key.clone(), worker, name, now);
        spots.push(Granted {
            id,
            tag: state.leases.tag(id, out.run, &out.key, name),
            run: out.run,
            plan,
            fingerprint,
            key: out.key.clone(),
        });
        state.spot.leased(id, out);
    }
    spots
}

#[cfg(test)]
mod tests {
    use super::*;
    use nqueens_common::bound::LEAST_MAX_ERROR;

    /// The bound and the rate are each other's inverse; the bound holds for a liar telling `n` lies at
    /// any `n` (computed exactly, and checked against a simulation of liars meeting checks at random);
    /// the range of bounds a run may state, at its edges.
    #[test]
    fn a_rate_bounds_the_undetected_lies_of_any_liar() {
        assert!((spot_rate_for(max_error_at(0.05)) - 0.05).abs() < 1e-12);
        assert!(
            (default_max_error() - 36.60).abs() < 0.01,
            "{}",
            default_max_error()
        );
        assert!((spot_rate_for(1.0) - 0.3078).abs() < 0.0001);
        assert!((spot_rate_for(2.0) - 0.1680).abs() < 0.0001);
        for rate in [MIN_RATE, 0.05, NEW_RATE, spot_rate_for(1.0)] {
            let bound = max_error_at(rate);
            let worst = (1..100_000)
                .map(|n| n as f64 * (1.0 - rate).powi(n))
                .fold(0.0, f64::max);
            assert!(worst <= bound, "{worst} > {bound} at {rate}");
            assert!(worst > 0.98 * bound, "the bound is tight: {worst}, {bound}");
        }
        // Simulated: 20,000 liars of 25 lies each (the worst n at 0.04), a check met with odds 0.04 per
        // lie, everything taken back at the first: the mean left standing is what the bound's argument
        // says, 25 * 0.96^25 = 9.01 (within four standard deviations, 0.34), and the bound is 9.01.
        let rate = 0.04;
        let mut s = SpotChecks::new([5; 16]);
        let mut standing = 0u64;
        for _ in 0..20_000 {
            if (0..25).all(|_| s.draw() >= rate) {
                standing += 25;
            }
        }
        let mean = standing as f64 / 20_000.0;
        let expected = 25.0 * (1.0 - rate).powi(25);
        assert!((mean - expected).abs() < 0.34, "{mean}, {expected}");
        assert!(expected <= max_error_at(rate));
        assert!(check_max_error(LEAST_MAX_ERROR).is_ok());
        assert!(check_max_error(default_max_error()).is_ok());
        for bad in [
            0.99,
            default_max_error() + 0.01,
            f64::NAN,
            f64::INFINITY,
            -1.0,
        ] {
            let e = check_max_error(bad).unwrap_err().to_string();
            assert!(e.contains("out of range"), "{bad}: {e}");
        }
    }

    /// A worker lifted from a quarantine loses the checks it passed, and the loss is saved; forgetting
    /// a name with none changes nothing (issue 42: `forget_passes` → `()` survived).
    #[test]
    fn a_lifted_workers_passes_are_forgotten_and_saved() {
        let mut s = SpotChecks::new([3; 16]);
        s.passed("a");
        s.passed("a");
        s.passed("b");
        s.unsaved().unwrap();
        s.forget_passes("a");
        assert_eq!((s.passed_by("a"), s.passed_by("b")), (0, 1));
        let saved = s.unsaved().expect("the loss is saved");
        assert_eq!((saved.get("a"), saved.get("b")), (None, Some(&1)));
        s.forget_passes("nobody");
        assert_eq!(s.unsaved(), None);
    }

    /// Passes to save: none until one is passed; taken once; again after a failed save; restored ones
    /// are not unsaved, and a restore keeps the most passed within the bound on identities.
    #[test]
    fn passes_are_saved_once_and_again_after_a_failed_save() {
        let mut s = SpotChecks::new([2; 16]);
        assert_eq!(s.unsaved(), None);
        s.passed("a");
        let first = s.unsaved().unwrap();
        assert_eq!(first.get("a"), Some(&1));
        assert_eq!(s.unsaved(), None);
        s.unsaved_again();
        assert_eq!(s.unsaved(), Some(first));
        let mut restored = SpotChecks::new([2; 16]);
        let many = (0..MAX_IDENTITIES as u64 + 2).map(|i| (format!("w{i}"), i));
        restored.restore(many);
        assert_eq!(restored.unsaved(), None);
        assert_eq!(restored.passed_by("w0"), 0);
        assert_eq!(restored.passed_by("w1"), 0);
        assert_eq!(restored.passed_by("w2"), 2);
        assert_eq!(restored.passed.len(), MAX_IDENTITIES);
    }

    #[test]
    fn the_rate_falls_with_passed_checks_to_its_floor() {
        assert_eq!(rate(0), NEW_RATE);
        assert_eq!(rate(9), NEW_RATE);
        assert_eq!(rate(10), NEW_RATE / 2.0);
        assert_eq!(rate(20), NEW_RATE / 4.0);
        assert_eq!(rate(1000), MIN_RATE);
        assert_eq!(rate(u64::MAX), MIN_RATE);
    }

    #[test]
    fn draws_follow_the_rate_and_picks_pass_by_the_identitys_own_jobs() {
        let mut s = SpotChecks::new([7; 16]);
        let n = s.how_many("new", 10_000, 0.0);
        assert!((1700..2300).contains(&n), "{n} of 10000 at 0.2");
        for _ in 0..100 {
            s.passed("old");
        }
        let n = s.how_many("old", 10_000, 0.0);
        assert!((50..150).contains(&n), "{n} of 10000 at 0.01");
        // A run's bound raises the floor: a bound of 2 checks 16.8 % of the leases.
        let n = s.how_many("old", 10_000, spot_rate_for(2.0));
        assert!((1480..1880).contains(&n), "{n} of 10000 at 0.168");
        assert_eq!(s.passed_by("old"), 100);
        assert_eq!(s.pick(&[1], "x"), None);
        let key: JobKey = "1.2".parse().unwrap();
        s.confirmed(1, key.clone(), vec!["a".into(), "b".into()]);
        assert_eq!(s.pick(&[2, 1], "a"), None, "a computed it");
        let out = s.pick(&[2, 1], "c").unwrap();
        assert_eq!(out, Out { run: 1, key });
        s.leased(9, out.clone());
        assert_eq!(s.pick(&[1], "c"), None, "one check of a job out at a time");
        assert_eq!(s.ended(9), Some(out));
        assert_eq!(s.ended(9), None);
        s.forget_run(1);
        assert_eq!(s.pick(&[1], "c"), None);
    }

    /// Forgetting jobs taken back drops those of their runs' pools, and only those.
    #[test]
    fn jobs_taken_back_leave_their_pools_and_no_other_job_does() {
        let key = |k: &str| -> JobKey { k.parse().unwrap() };
        let mut s = SpotChecks::new([1; 16]);
        for k in ["1.1", "1.2", "1.3"] {
            s.confirmed(1, key(k), vec![]);
            s.confirmed(2, key(k), vec![]);
        }
        let (a, b, c) = (key("1.1"), key("1.3"), key("9.9"));
        s.forget([(1, &a), (1, &b), (2, &b), (7, &a), (2, &c)]);
        assert_eq!(s.pooled(1), [key("1.2")]);
        assert_eq!(s.pooled(2), [key("1.1"), key("1.2")]);
        s.forget([]);
        assert_eq!(s.pooled(2).len(), 2);
    }

    /// An owed check comes back only while it is still a check: of a run the identity may lease from
    /// in this call, and no check of it out (else it stays owed, for a later call), its job still
    /// pooled (else it is owed no more). Taken, it is owed no more.
    #[test]
    fn an_owed_check_comes_back_only_while_it_is_still_a_check() {
        let key = |k: &str| -> JobKey { k.parse().unwrap() };
        let out = |k: &str| Out {
            run: 1,
            key: key(k),
        };
        let fresh = || {
            let mut s = SpotChecks::new([1; 16]);
            s.confirmed(1, key("1.2"), vec![]);
            s.confirmed(1, key("1.3"), vec![]);
            s.owe("l", out("1.2"));
            s
        };
        let mut s = fresh();
        assert_eq!(s.take_owed("x", &[1], 4), vec![], "owed by another");
        assert_eq!(s.take_owed("l", &[1], 4), vec![out("1.2")]);
        assert_eq!(s.take_owed("l", &[1], 4), vec![], "paid");
        assert!(s.owed.is_empty());
        let mut s = fresh();
        assert_eq!(
            s.take_owed("l", &[2], 4),
            vec![],
            "a run it may not lease from in this call"
        );
        assert_eq!(s.take_owed("l", &[1], 4), vec![out("1.2")], "still owed");
        let mut s = fresh();
        s.forget([(1, &key("1.2"))]);
        assert_eq!(
            s.take_owed("l", &[1], 4),
            vec![],
            "taken back (1.3 is pooled still)"
        );
        assert!(s.owed.is_empty(), "owed no more");
        let mut s = fresh();
        s.leased(7, out("1.2"));
        assert_eq!(s.take_owed("l", &[1], 4), vec![], "a check of it out");
        s.ended(7);
        assert_eq!(s.take_owed("l", &[1], 4), vec![out("1.2")], "still owed");
    }

    /// An identity owes every check it dodged, oldest first, each once, up to `OWED_PER_IDENTITY` (the
    /// oldest dropped for the newest: a run that finished keeps its owed checks from being taken, and
    /// must not keep new ones out); a call takes as many as it has room for, and the rest stay owed (found by a review, 2026-11-30:
    /// one check per identity was owed, so of two handed back at once only the last came back).
    #[test]
    fn every_check_dodged_is_owed_up_to_a_bound() {
        let key = |k: &str| -> JobKey { k.parse().unwrap() };
        let out = |k: &str| Out {
            run: 1,
            key: key(k),
        };
        let mut s = SpotChecks::new([1; 16]);
        for k in ["1.1", "1.2", "1.3"] {
            s.confirmed(1, key(k), vec![]);
            s.owe("l", out(k));
        }
        s.owe("l", out("1.2"));
        assert_eq!(s.take_owed("l", &[1], 2), vec![out("1.1"), out("1.2")]);
        assert_eq!(s.take_owed("l", &[1], 2), vec![out("1.3")]);
        assert!(s.owed.is_empty());
        let many = |i: usize| Out {
            run: 1,
            key: key(&format!("{}.{}", 10 + i / 100, i % 100)),
        };
        for i in 0..OWED_PER_IDENTITY + 5 {
            s.owe("l", many(i));
        }
        assert_eq!(s.owed["l"].len(), OWED_PER_IDENTITY);
        assert_eq!(s.owed["l"][0], many(5), "the oldest dropped for the newest");
        assert_eq!(s.owed_total, OWED_PER_IDENTITY);
        // A check owed stays owed when its job leaves the pool of recent confirmed jobs (it is still
        // confirmed), and goes only when its count is taken back.
        let mut s = SpotChecks::new([1; 16]);
        s.confirmed(1, key("1.1"), vec![]);
        s.owe("l", out("1.1"));
        s.owe("l", out("1.2"));
        for i in 0..POOL_PER_RUN {
            s.confirmed(1, many(i).key, vec![]);
        }
        assert!(s.pooled(1).iter().all(|k| *k != key("1.1")), "rotated out");
        assert_eq!(s.take_owed("l", &[1], 1), vec![out("1.1")]);
        s.forget([(1, &key("1.2"))]);
        assert_eq!(s.take_owed("l", &[1], 1), vec![], "taken back");
        assert!(s.owed.is_empty() && s.owed_total == 0);
    }

    /// Owed checks are kept for at most `MAX_IDENTITIES` identities and `MAX_OWED` in all; one already
    /// owing may owe another.
    #[test]
    fn owed_checks_are_kept_for_a_bounded_number_of_identities() {
        let mut s = SpotChecks::new([1; 16]);
        let out = |k: &str| Out {
            run: 1,
            key: k.parse().unwrap(),
        };
        for i in 0..MAX_IDENTITIES {
            s.owe(&format!("w{i}"), out("1.2"));
        }
        s.owe("late", out("1.2"));
        assert_eq!(s.owed.len(), MAX_IDENTITIES);
        assert!(!s.owed.contains_key("late"));
        assert_eq!(s.owed_total, MAX_OWED);
        // At the cap in all, one that owes some drops its oldest for the newest.
        s.owe("w0", out("1.3"));
        assert_eq!(s.owed["w0"], [out("1.3")]);
        assert_eq!(s.owed_total, MAX_OWED);
        // The cap in all holds with fewer identities too: 64 owing 1,024 each.
        let mut s = SpotChecks::new([1; 16]);
        for i in 0..MAX_OWED {
            let key = format!("{}.{}", 10 + (i % OWED_PER_IDENTITY) / 100, i % 100);
            s.owe(&format!("w{}", i / OWED_PER_IDENTITY), out(&key));
        }
        assert_eq!((s.owed.len(), s.owed_total), (64, MAX_OWED));
        s.owe("late", out("1.2"));
        assert!(!s.owed.contains_key("late"));
    }

    /// Picks are drawn over the whole pool (not its first job), and a job taken back is never picked.
    #[test]
    fn picks_spread_over_the_pool_and_skip_jobs_taken_back() {
        let mut s = SpotChecks::new([3; 16]);
        let keys: Vec<JobKey> = ["1.1", "1.2", "1.3"].map(|k| k.parse().unwrap()).into();
        for k in &keys {
            s.confirmed(1, k.clone(), vec![]);
        }
        s.forget([(1, &keys[1])]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            seen.insert(s.pick(&[1], "c").unwrap().key);
        }
        assert_eq!(seen, [keys[0].clone(), keys[2].clone()].into());
    }

    /// The passed checks of at most `MAX_IDENTITIES` identities are remembered: a known one adds to its
    /// count, a new one past the bound takes the place of one of the least checked.
    #[test]
    fn passed_checks_are_remembered_for_a_bounded_number_of_identities() {
        let mut s = SpotChecks::new([0; 16]);
        for _ in 0..5 {
            s.passed("veteran");
        }
        for i in 0..MAX_IDENTITIES - 1 {
            s.passed(&format!("w{i}"));
        }
        assert_eq!(s.passed.len(), MAX_IDENTITIES);
        s.passed("veteran");
        assert_eq!(s.passed.len(), MAX_IDENTITIES);
        assert_eq!(s.passed_by("veteran"), 6);
        s.passed("newcomer");
        assert_eq!(s.passed.len(), MAX_IDENTITIES);
        assert_eq!(s.passed_by("newcomer"), 1);
        assert_eq!(s.passed_by("veteran"), 6);
    }

    #[test]
    fn a_pool_keeps_its_newest_jobs() {
        let mut s = SpotChecks::new([1; 16]);
        for i in 0..POOL_PER_RUN + 10 {
            let key = format!("{}.{}", i / 200, i % 200);
            s.confirmed(1, key.parse().unwrap(), vec![]);
        }
        assert_eq!(s.pool[&1].len(), POOL_PER_RUN);
        assert_eq!(s.pool[&1][0].key, "0.10".parse().unwrap());
    }
}
