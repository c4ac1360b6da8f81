//! The workers seen by this incarnation of the coordinator, by id: name, threads, last contact, what they
//! reported and how fast, and whether they are leaving or lost. In memory, but a worker's results count
//! starts from the results the store holds of it (so it survives a coordinator restart); a worker is active while it
//! was seen within one lease timeout, and lost (logged once) when it falls silent for longer.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use nqueens_common::names::{distinct_gpu_kernels, MAX_GPU_SHAPES};
use nqueens_common::FamilySet;
use tokio::time::Instant;

/// Longest a snapshot of the serving identities' families serves lease calls ([`Workers::fleet`]),
/// unless the table or the quarantines change first.
pub const FLEET_REFRESH: Duration = Duration::from_secs(1);

/// Every identity that serves (live, not quarantined), with its live workers' kernel families.
pub type Fleet = Arc<HashMap<String, FamilySet>>;

/// How long a worker that left or fell silent stays in the table.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// Most workers in the table (any caller can make up worker ids; an honest cluster has far fewer
/// processes): a full table forgets a sixteenth of itself ([`Workers::make_room`]).
pub const MAX_SEEN: usize = 65_536;

/// Most rows of one credential's identity in the table: past that, its own longest silent make room
/// ([`Workers::forget_rows`]). A credential is one machine or a few; the shared token's machines are
/// one identity, and past this many processes they push out each other's rows. The operator's
/// workers (unscoped ids) are not limited.
pub const MAX_PER_IDENTITY: usize = MAX_SEEN / 8;

/// How far back a worker's rate looks.
const RATE_WINDOW: Duration = Duration::from_secs(300);
/// Most rate samples kept per worker (one per report batch; older ones are dropped first).
const MAX_SAMPLES: usize = 256;

/// A worker's GPUs: how many it said it computes on, and what they computed of its reported results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gpus {
    pub count: u32,
    pub jobs: u64,
    pub nodes: u64,
}

/// One report batch of a worker: its results, their nodes, how many were counted, and the GPUs' part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reported {
    pub jobs: u64,
    pub nodes: u64,
    pub accepted: u64,
    pub gpu_jobs: u64,
    pub gpu_nodes: u64,
    /// The kernel families its results stated.
    pub families: FamilySet,
}

/// What the coordinator knows of one worker process.
#[derive(Debug, Clone)]
pub struct WorkerInfo {
    /// Its identity (the name it states, under the operator's token).
    pub name: String,
    /// The name it states for itself.
    pub label: String,
    pub threads: u32,
    pub gpus: Gpus,
    /// The kernel shapes its GPUs run, as it last said: each once, in the order it named them.
    pub gpu_kernels: Vec<String>,
    /// The kernel families its results stated (in this incarnation).
    pub families: FamilySet,
    pub last_seen: Instant,
    /// Results of this worker counted into a run.
    pub accepted: u64,
    /// Results it reported (whatever their outcome).
    pub jobs: u64,
    /// Search nodes of those results.
    pub nodes: u64,
    /// `(when, nodes reported so far)`, oldest first, within the rate window.
    samples: VecDeque<(Instant, u64)>,
    /// It said it is shutting down.
    pub leaving: bool,
    /// It fell silent for a lease timeout (and was logged as lost).
    pub lost: bool,
}

impl WorkerInfo {
    /// Search nodes per second over the recent window, as of `now`.
    pub fn nodes_per_second(&self, now: Instant) -> f64 {
        let Some(&(since, before)) = self.samples.front() else {
            return 0.0;
        };
        let secs = (now - since).as_secs_f64();
        if secs <= 0.0 {
            return 0.0;
        }
        (self.nodes - before) as f64 / secs
    }
}

/// The registry: worker id -> what is known of it.
#[derive(Debug, Default)]
pub struct Workers {
    seen: HashMap<String, WorkerInfo>,
    /// Rows of `seen` per identity ([`owner`]), none kept at zero.
    rows_of: HashMap<String, usize>,
    /// Results stored before this incarnation, by the id of the worker process that computed them
    /// (taken into its counts when it is first seen: a worker that outlives a coordinator restart
    /// keeps its `jobs done`).
    earlier: HashMap<String, u64>,
    /// The last snapshot of the serving identities, and when it was made ([`Workers::fleet`]):
    /// forgotten when a row says what it lacks ([`serves`]), and when the quarantines change.
    fleet: RefCell<Option<(Instant, Fleet)>>,
}

/// The identity a worker id belongs to: a credential's ids are scoped `IDENTITY/ID`
/// ([`super::scoped_id`]; identities have no `/`). The ids that the operator's workers state are not
/// scoped: those without a `/` share the empty one. (One whose name holds a `/` counts under the text
/// before it: a trusted worker, held to a credential's share of the table.)
pub(super) fn owner(id: &str) -> &str {
    id.split_once('/').map_or("", |(identity, _)| identity)
}

/// How many rows each identity gives up so that `count` go: the largest brought down to one level, the
/// highest that frees at least `count`. It may free more: fewer extra rows than there are identities
/// above the level. An identity with no more rows than the level gives up none.
fn levelled(rows_of: &HashMap<String, usize>, count: usize) -> HashMap<String, usize> {
    let freed =
        |level: usize| -> usize { rows_of.values().map(|&n| n.saturating_sub(level)).sum() };
    // The highest level that frees `count` (level 0 frees every row).
    let (mut low, mut high) = (0, rows_of.values().copied().max().unwrap_or(0));
    while low < high {
        let mid = (low + high).div_ceil(2);
        if freed(mid) >= count {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    rows_of
        .iter()
        .filter(|&(_, &n)| n > low)
        .map(|(who, &n)| (who.clone(), n - low))
        .collect()
}

/// Counts row `id` out of its identity's rows.
fn forgotten(rows_of: &mut HashMap<String, usize>, id: &str) {
    let who = owner(id);
    if let Some(n) = rows_of.get_mut(who) {
        *n -= 1;
        if *n == 0 {
            rows_of.remove(who);
        }
    }
}

/// What a contact changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contact {
    /// A worker not seen before.
    Joined,
    /// A worker that had been lost speaks again.
    Returned,
    /// A known worker.
    Known,
}

/// A live row of identity `name` computes `families`: the snapshot `fleet` of [`Workers::fleet`] is
/// forgotten unless it holds them already. So only what the snapshot lacks (a new identity, a new
/// family) makes the next lease call walk the table: a credential that makes up a worker id per
/// call adds nothing to it. What leaves (a worker leaving, silent, forgotten) stays in it until it
/// is a second old: a draw that counts one identity too many for a second, or a job that waits for
/// a family a second longer, costs nothing. A row leaving never serves, so it never forgets the
/// snapshot: before, a credential that made up a worker id, said it was leaving, then leased under
/// it (named at last, never in the snapshot) made the next lease call walk the table, each time
/// (found by a review, 2026-12-01).
fn serves(fleet: &RefCell<Option<(Instant, Fleet)>>, name: &str, families: FamilySet) {
    if name.is_empty() {
        return;
    }
    let held = fleet
        .borrow()
        .as_ref()
        .and_then(|(_, kept)| kept.get(name).copied())
        .is_some_and(|known| known.union(families) == known);
    if !held {
        fleet.take();
    }
}

impl Workers {
    /// An empty registry that knows how many stored results each worker process (by id) computed
    /// before this incarnation.
    pub fn with_earlier_results(earlier: HashMap<String, u64>) -> Workers {
        Workers {
            seen: HashMap::new(),
            rows_of: HashMap::new(),
            earlier,
            fleet: RefCell::default(),
        }
    }

    /// Records a contact.
    pub fn seen(&mut self, id: &str, now: Instant) -> Contact {
        match self.seen.get_mut(id) {
            Some(w) => {
                w.last_seen = now;
                if std::mem::take(&mut w.lost) {
                    if !w.leaving {
                        let (name, families) = (w.name.clone(), w.families);
                        serves(&self.fleet, &name, families);
                    }
                    Contact::Returned
                } else {
                    Contact::Known
                }
            }
            None => {
                let who = owner(id);
                // (The operator's workers, unscoped, are trusted: their rows share the table.)
                if !who.is_empty()
                    && self
                        .rows_of
                        .get(who)
                        .is_some_and(|&n| n >= MAX_PER_IDENTITY)
                {
                    self.forget_rows(HashMap::from([(who.to_string(), MAX_PER_IDENTITY / 16)]));
                }
                if self.seen.len() >= MAX_SEEN {
                    self.make_room();
                }
                *self.rows_of.entry(who.to_string()).or_default() += 1;
                let earlier = self.earlier.remove(id).unwrap_or(0);
                self.seen.insert(
                    id.to_string(),
                    WorkerInfo {
                        name: String::new(),
                        label: String::new(),
                        threads: 0,
                        gpus: Gpus::default(),
                        gpu_kernels: Vec::new(),
                        families: FamilySet::default(),
                        last_seen: now,
                        accepted: earlier,
                        jobs: earlier,
                        nodes: 0,
                        samples: VecDeque::from([(now, 0)]),
                        leaving: false,
                        lost: false,
                    },
                );
                Contact::Joined
            }
        }
    }

    /// Forgets a sixteenth of a full table in one pass (not one worker per new id, each a pass over
    /// the whole table under the coordinator's lock), from the identities with the most rows: worker
    /// ids cost a credential nothing, so those that make them up forget their own, never another
    /// identity's workers. The largest are brought down to one level ([`levelled`]); within each, the
    /// workers that were lost go first, then those silent the longest (one leaving may still be
    /// finishing its jobs).
    fn make_room(&mut self) {
        let quotas = levelled(&self.rows_of, MAX_SEEN / 16);
        self.forget_rows(quotas);
    }

    /// Forgets, of each identity in `quotas`, that many rows: the lost first, then the longest silent.
    fn forget_rows(&mut self, quotas: HashMap<String, usize>) {
        let mut order: Vec<(&str, bool, Instant, &String)> = self
            .seen
            .iter()
            .map(|(id, w)| (owner(id), !w.lost, w.last_seen, id))
            .filter(|(who, ..)| quotas.contains_key(*who))
            .collect();
        order.sort_unstable();
        let mut gone: Vec<String> = Vec::new();
        let mut taken: HashMap<&str, usize> = HashMap::new();
        for (who, _, _, id) in order {
            let n = taken.entry(who).or_default();
            if *n < quotas[who] {
                *n += 1;
                gone.push(id.clone());
            }
        }
        for id in gone {
            self.seen.remove(&id);
            forgotten(&mut self.rows_of, &id);
        }
    }

    /// Records what a worker says of itself (in its lease requests), and its identity.
    pub fn describe(
        &mut self,
        id: &str,
        name: &str,
        label: &str,
        threads: u32,
        gpus: u32,
        gpu_kernels: &[String],
    ) {
        if let Some(w) = self.seen.get_mut(id) {
            if w.name != name {
                w.name = name.to_string();
                if !w.leaving {
                    let families = w.families;
                    serves(&self.fleet, name, families);
                }
            }
            if w.label != label {
                w.label = label.to_string();
            }
            w.threads = threads;
            w.gpus.count = gpus;
            // Each shape once: a worker's table row stays small however many GPUs it says it has.
            let shapes = distinct_gpu_kernels(gpu_kernels, MAX_GPU_SHAPES);
            if w.gpu_kernels != shapes {
                w.gpu_kernels = shapes.into_iter().map(str::to_string).collect();
            }
        }
    }

    /// Records a report batch.
    pub fn reported(&mut self, id: &str, batch: Reported, now: Instant) {
        if let Some(w) = self.seen.get_mut(id) {
            w.accepted += batch.accepted;
            w.jobs += batch.jobs;
            w.nodes = w.nodes.saturating_add(batch.nodes);
            w.gpus.jobs += batch.gpu_jobs;
            w.gpus.nodes = w.gpus.nodes.saturating_add(batch.gpu_nodes);
            let families = w.families.union(batch.families);
            if families != w.families {
                w.families = families;
                if !w.leaving {
                    let name = w.name.clone();
                    serves(&self.fleet, &name, families);
                }
            }
            w.samples.push_back((now, w.nodes));
            while w.samples.len() > MAX_SAMPLES
                || (w.samples.len() > 2
                    && w.samples.front().is_some_and(|s| now - s.0 > RATE_WINDOW))
            {
                w.samples.pop_front();
            }
        }
    }

    /// Marks a worker as shutting down; true the first time.
    pub fn leaving(&mut self, id: &str) -> bool {
        self.seen
            .get_mut(id)
            .is_some_and(|w| !std::mem::replace(&mut w.leaving, true))
    }

    /// Marks the workers silent for longer than `timeout` as lost, and forgets those gone (lost or
    /// left) and silent for longer than [`FORGET_AFTER`]; returns the newly lost, by id.
    pub fn sweep(&mut self, now: Instant, timeout: Duration) -> Vec<(String, WorkerInfo)> {
        // Every restart of a worker is a new id, and any caller can name one: the table must not grow
        // for ever.
        let rows_of = &mut self.rows_of;
        self.seen.retain(|id, w| {
            let keep = !((w.lost || w.leaving)
                && now.saturating_duration_since(w.last_seen) > FORGET_AFTER);
            if !keep {
                forgotten(rows_of, id);
            }
            keep
        });
        self.seen
            .iter_mut()
            .filter(|(_, w)| !w.lost && now - w.last_seen > timeout)
            .map(|(id, w)| {
                w.lost = true;
                (id.clone(), w.clone())
            })
            .collect()
    }

    /// Whether worker `id` said it is shutting down or fell silent (lost).
    pub fn gone(&self, id: &str) -> bool {
        self.seen.get(id).is_some_and(|w| w.leaving || w.lost)
    }

    /// The name worker `id` gave (its id when it gave none).
    pub fn name_of<'a>(&'a self, id: &'a str) -> &'a str {
        match self.seen.get(id) {
            Some(w) if !w.name.is_empty() => &w.name,
            _ => id,
        }
    }

    /// Every identity that serves at `now` (a live worker, not leaving, seen within `timeout`, with
    /// a name; not `quarantined`), with its live workers' families (empty for those with none stated:
    /// they serve, and count among those a verified job's second result is drawn from): a pass over
    /// the table. A row that never leased has no name, and counts as nobody: a report from a second
    /// worker id must not make one credential two identities (found by a review, 2026-11-29).
    fn serving(
        &self,
        now: Instant,
        timeout: Duration,
        quarantined: impl Fn(&str) -> bool,
    ) -> HashMap<String, FamilySet> {
        let mut all: HashMap<String, FamilySet> = HashMap::new();
        for w in self.seen.values() {
            if w.lost || w.leaving || now.saturating_duration_since(w.last_seen) > timeout {
                continue;
            }
            if w.name.is_empty() || quarantined(&w.name) {
                continue;
            }
            let f = all.entry(w.name.clone()).or_default();
            *f = f.union(w.families);
        }
        all
    }

    /// [`Workers::serving`], made at most once per [`FLEET_REFRESH`] and shared by the lease calls
    /// meanwhile, unless a row says what it lacks (a new identity, a new family, an identity back
    /// from lost: [`serves`]) or the quarantines change ([`Workers::forget_fleet`]). Before, each lease call that met a verified job waiting for its
    /// second result made its own pass over the table: with 1,000 identities at 5,000 results a
    /// second, those passes (and the draw's count of identities, per job) cut what the coordinator
    /// committed to 2,000 a second (`loadgen --workers 1000`, BENCHMARKS.md).
    pub fn fleet(
        &self,
        now: Instant,
        timeout: Duration,
        quarantined: impl Fn(&str) -> bool,
    ) -> Fleet {
        let mut kept = self.fleet.borrow_mut();
        if let Some((at, fleet)) = kept.as_ref() {
            // (A call that read its clock before the snapshot was made uses it too.)
            if now.saturating_duration_since(*at) < FLEET_REFRESH {
                return fleet.clone();
            }
        }
        let fleet = Arc::new(self.serving(now, timeout, quarantined));
        *kept = Some((now, fleet.clone()));
        fleet
    }

    /// Forgets the snapshot of [`Workers::fleet`] (the quarantines changed).
    pub fn forget_fleet(&self) {
        self.fleet.take();
    }

    /// How many rows identity `who` holds, as counted.
    #[cfg(test)]
    fn rows(&self, who: &str) -> usize {
        self.rows_of.get(who).copied().unwrap_or(0)
    }

    /// Marks worker `id` lost, as a sweep would.
    #[cfg(test)]
    fn seen_lost(&mut self, id: &str) {
        if let Some(w) = self.seen.get_mut(id) {
            w.lost = true;
        }
    }

    /// Every worker seen, by id.
    pub fn all(&self) -> impl Iterator<Item = (&String, &WorkerInfo)> {
        self.seen.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker gone for longer than [`FORGET_AFTER`] leaves the table (ids made up by a caller, or one
    /// per restart, grew it without bound; found by a review, 2026-11-24); a live one never does.
    #[test]
    fn gone_workers_are_forgotten_after_a_while_and_live_ones_kept() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(10);
        let mut w = Workers::default();
        for i in 0..1000 {
            w.seen(&format!("made-up-{i}"), t0);
        }
        w.seen("live-1", t0);
        w.sweep(t0 + Duration::from_secs(11), timeout);
        assert_eq!(w.all().count(), 1001, "lost, still shown");
        let later = t0 + FORGET_AFTER + Duration::from_secs(12);
        w.seen("live-1", later);
        w.sweep(later, timeout);
        let left: Vec<_> = w.all().map(|(id, _)| id.clone()).collect();
        assert_eq!(left, ["live-1"]);
    }

    /// The table holds at most [`MAX_SEEN`] workers however many ids callers make up within the hour
    /// before gone ones are forgotten: a full table forgets the lost first, then the longest silent.
    #[test]
    fn the_table_is_bounded_and_keeps_the_most_recently_seen() {
        let t0 = Instant::now();
        let at = |i: usize| t0 + Duration::from_millis(i as u64);
        let mut w = Workers::default();
        w.seen("gone", at(MAX_SEEN));
        // Lost: silent past the timeout (at the sweep's time, the others are not seen yet).
        assert_eq!(
            w.sweep(
                at(MAX_SEEN) + Duration::from_secs(11),
                Duration::from_secs(10)
            )
            .len(),
            1
        );
        for i in 1..MAX_SEEN + 100 {
            w.seen(&format!("made-up-{i}"), at(i));
        }
        assert!(w.all().count() <= MAX_SEEN);
        assert!(w.all().count() >= MAX_SEEN - MAX_SEEN / 16);
        let last = format!("made-up-{}", MAX_SEEN + 99);
        assert!(w.all().any(|(id, _)| *id == last), "the newest kept");
        assert!(
            !w.all().any(|(id, _)| id == "made-up-1"),
            "the oldest forgotten"
        );
        assert!(!w.all().any(|(id, _)| id == "gone"), "one lost first");
        let recent = format!("made-up-{}", MAX_SEEN - 1);
        assert!(w.all().any(|(id, _)| *id == recent));
    }

    /// Credentials that make up worker ids forget their own, never another identity's workers: a full
    /// table makes room at the cost of the identity with the most rows in it (found by a review,
    /// 2026-11-29: the longest silent went first, so a burst of made-up ids pushed out every honest
    /// worker, with its label and kernel families). Sixteen churning credentials fill it past their
    /// [`MAX_PER_IDENTITY`] each.
    #[test]
    fn a_full_table_makes_room_at_the_cost_of_the_identity_with_the_most_ids() {
        let t0 = Instant::now();
        let mut w = Workers::default();
        let honest: Vec<String> = (0..100).map(|i| format!("h{i}/proc-{i}")).collect();
        for id in &honest {
            w.seen(id, t0);
            w.describe(id, "h", "honest", 8, 0, &[]);
        }
        let churners = 16;
        assert!(
            churners * MAX_PER_IDENTITY > MAX_SEEN,
            "they fill the table"
        );
        for i in 0..2 * MAX_SEEN {
            let at = t0 + Duration::from_secs(1) + Duration::from_micros(i as u64);
            w.seen(&format!("c{}/made-up-{i}", i % churners), at);
        }
        assert!(w.all().count() <= MAX_SEEN);
        assert!(w.all().count() >= MAX_SEEN - MAX_SEEN / 16);
        for id in &honest {
            let kept = w.all().find(|(seen, _)| *seen == id);
            assert_eq!(
                kept.map(|(_, info)| info.label.as_str()),
                Some("honest"),
                "{id}"
            );
        }
        let newest = format!(
            "c{}/made-up-{}",
            (2 * MAX_SEEN - 1) % churners,
            2 * MAX_SEEN - 1
        );
        assert!(w.all().any(|(id, _)| *id == newest), "the newest kept");
        assert!(
            !w.all().any(|(id, _)| id == "c0/made-up-0"),
            "their oldest forgotten"
        );
    }

    /// One identity holds at most [`MAX_PER_IDENTITY`] rows: past that, its own longest silent make room,
    /// and the table never fills with one credential's made-up ids (each lease call that could steer a
    /// job walks the table under the state lock: 65,536 rows of one credential cost every honest call
    /// milliseconds; found by a review, 2026-11-29).
    #[test]
    fn one_identity_holds_a_bounded_share_of_the_table() {
        let t0 = Instant::now();
        let mut w = Workers::default();
        w.seen("h/proc", t0);
        let made_up = 3 * MAX_PER_IDENTITY + 100;
        for i in 0..made_up {
            let at = t0 + Duration::from_micros(i as u64 + 1);
            w.seen(&format!("churner/made-up-{i}"), at);
        }
        let churner = w.all().filter(|(id, _)| owner(id) == "churner").count();
        assert!(churner <= MAX_PER_IDENTITY, "{churner}");
        assert!(
            churner >= MAX_PER_IDENTITY - MAX_PER_IDENTITY / 16,
            "{churner}"
        );
        assert!(w.all().any(|(id, _)| id == "h/proc"));
        assert_eq!(w.rows("churner"), churner);
        let newest = format!("churner/made-up-{}", made_up - 1);
        assert!(w.all().any(|(id, _)| *id == newest), "the newest kept");
        assert!(
            !w.all().any(|(id, _)| id == "churner/made-up-0"),
            "its oldest forgotten"
        );
        // The count follows rows forgotten by a sweep: the identity may join again up to its share.
        let later = t0 + FORGET_AFTER * 3;
        w.sweep(later, Duration::from_secs(1));
        w.sweep(
            later + FORGET_AFTER + Duration::from_secs(1),
            Duration::from_secs(1),
        );
        assert_eq!(w.all().count(), 0);
        let back = later + FORGET_AFTER * 2;
        for i in 0..MAX_PER_IDENTITY {
            w.seen(&format!("churner/again-{i}"), back);
        }
        assert_eq!(w.all().count(), MAX_PER_IDENTITY);
    }

    /// Rows are forgotten by quota, of the identities named only: the lost first, then the longest
    /// silent; each identity's count of rows follows what a sweep forgets and what it keeps, and a row
    /// gone exactly [`FORGET_AFTER`] is kept.
    #[test]
    fn rows_are_forgotten_by_quota_and_counted_per_identity() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = Workers::default();
        for (who, n) in [("a", 5), ("b", 3), ("c", 2)] {
            for i in 0..n {
                w.seen(&format!("{who}/{i}"), t0 + s(i));
            }
        }
        // a/4 lost: it goes before a/0, the longest silent.
        w.seen("a/4", t0 + s(100));
        w.seen_lost("a/4");
        w.forget_rows(HashMap::from([("a".to_string(), 2), ("b".to_string(), 1)]));
        let mut left: Vec<&str> = w.all().map(|(id, _)| id.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["a/1", "a/2", "a/3", "b/1", "b/2", "c/0", "c/1"]);
        assert_eq!((w.rows("a"), w.rows("b"), w.rows("c")), (3, 2, 2));
        // A sweep forgets rows gone for longer than FORGET_AFTER, and keeps the rest counted.
        w.leaving("b/1");
        w.leaving("c/0");
        let at = t0 + s(1) + FORGET_AFTER;
        w.sweep(at, s(100_000));
        assert_eq!(
            (w.rows("b"), w.rows("c")),
            (2, 1),
            "b/1 gone exactly that long, c/0 longer"
        );
        w.sweep(at + s(1), s(100_000));
        assert_eq!((w.rows("a"), w.rows("b"), w.rows("c")), (3, 1, 1));
        assert_eq!(w.all().count(), 5);
    }

    /// The identities with the most rows are brought down to one level, the highest that frees enough.
    #[test]
    fn room_is_made_by_levelling_the_largest_identities() {
        let rows = |pairs: &[(&str, usize)]| -> HashMap<String, usize> {
            pairs.iter().map(|&(w, n)| (w.to_string(), n)).collect()
        };
        let of = rows(&[("a", 100), ("b", 60), ("c", 5)]);
        assert_eq!(levelled(&of, 40), rows(&[("a", 40)]));
        assert_eq!(levelled(&of, 50), rows(&[("a", 45), ("b", 5)]));
        assert_eq!(levelled(&of, 81), rows(&[("a", 61), ("b", 21)]));
        assert_eq!(levelled(&of, 160), rows(&[("a", 99), ("b", 59), ("c", 4)]));
        assert_eq!(levelled(&of, 1000), of, "everything, at most");
        assert!(levelled(&of, 0).is_empty());
        // Ties at the level each give up one more.
        let even = rows(&[("a", 10), ("b", 10)]);
        assert_eq!(levelled(&even, 3), rows(&[("a", 2), ("b", 2)]));
    }

    #[test]
    fn a_worker_joins_reports_falls_silent_and_returns() {
        let t0 = Instant::now();
        let mut w = Workers::default();
        assert_eq!(w.seen("a-1", t0), Contact::Joined);
        w.describe("a-1", "a", "a", 4, 1, &["flat/128/4".into()]);
        assert_eq!(w.seen("a-1", t0), Contact::Known);
        let batch = |jobs, nodes, accepted, gpu_jobs, gpu_nodes| Reported {
            jobs,
            nodes,
            accepted,
            gpu_jobs,
            gpu_nodes,
            families: FamilySet::default(),
        };
        w.reported(
            "a-1",
            batch(3, 6_000, 2, 2, 5_000),
            t0 + Duration::from_secs(2),
        );
        w.reported("a-1", batch(1, 2_000, 1, 0, 0), t0 + Duration::from_secs(4));
        let info = w.all().next().unwrap().1.clone();
        assert_eq!((info.jobs, info.nodes, info.accepted), (4, 8_000, 3));
        assert_eq!(
            info.gpus,
            Gpus {
                count: 1,
                jobs: 2,
                nodes: 5_000
            }
        );
        assert_eq!(info.nodes_per_second(t0 + Duration::from_secs(4)), 2_000.0);
        let timeout = Duration::from_secs(10);
        assert!(!w.gone("a-1"));
        assert!(w.sweep(t0 + Duration::from_secs(5), timeout).is_empty());
        let lost = w.sweep(t0 + Duration::from_secs(11), timeout);
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].1.name, "a");
        assert!(
            w.sweep(t0 + Duration::from_secs(12), timeout).is_empty(),
            "logged once"
        );
        assert!(w.gone("a-1"), "lost");
        assert_eq!(
            w.seen("a-1", t0 + Duration::from_secs(13)),
            Contact::Returned
        );
        assert!(w.leaving("a-1"));
        assert!(!w.leaving("a-1"), "once");
        assert!(w.gone("a-1"), "left");
    }

    /// What a worker says of itself replaces what it said before: name, label, threads, GPUs and their
    /// shapes (each once, at most [`MAX_GPU_SHAPES`]).
    #[test]
    fn a_workers_description_follows_what_it_last_said() {
        let t0 = Instant::now();
        let mut w = Workers::default();
        w.seen("a-1", t0);
        let shapes: Vec<String> = (0..12).map(|i| format!("flat/{}", i % 10)).collect();
        w.describe("a-1", "a", "first", 4, 12, &shapes);
        let info = w.all().next().unwrap().1.clone();
        assert_eq!((info.name.as_str(), info.label.as_str()), ("a", "first"));
        assert_eq!(info.gpu_kernels, shapes[..MAX_GPU_SHAPES]);
        w.describe(
            "a-1",
            "b",
            "second",
            2,
            1,
            &vec!["coop/64/8/8".to_string(); 3],
        );
        let info = w.all().next().unwrap().1.clone();
        assert_eq!((info.name.as_str(), info.label.as_str()), ("b", "second"));
        assert_eq!((info.threads, info.gpus.count), (2, 1));
        assert_eq!(info.gpu_kernels, ["coop/64/8/8"]);
        // A worker never seen is not described.
        w.describe("z-9", "z", "z", 1, 0, &[]);
        assert_eq!(w.all().count(), 1);
    }

    #[test]
    fn a_worker_that_outlives_a_restart_keeps_its_stored_jobs_done() {
        let t0 = Instant::now();
        let mut w = Workers::with_earlier_results(HashMap::from([("a-1".to_string(), 22)]));
        w.seen("a-1", t0);
        let batch = Reported {
            jobs: 7,
            nodes: 700,
            accepted: 7,
            ..Reported::default()
        };
        w.reported("a-1", batch, t0 + Duration::from_secs(1));
        let info = w.all().next().unwrap().1.clone();
        assert_eq!((info.jobs, info.accepted), (29, 29));
        assert_eq!(info.nodes_per_second(t0 + Duration::from_secs(1)), 700.0);
        w.seen("b-1", t0);
        assert_eq!(w.all().find(|(id, _)| *id == "b-1").unwrap().1.jobs, 0);
    }

    /// The serving identities are walked at most once a second, their snapshot shared meanwhile, and
    /// again at once when it lacks what a row now says (a new identity, a new family, an identity
    /// back from lost) or the quarantines change. A new row of an identity it holds, a report that
    /// adds no family, a worker leaving: kept until it is a second old.
    #[test]
    fn the_fleet_is_walked_at_most_once_a_second_and_again_at_each_change() {
        use nqueens_common::Family;
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let timeout = Duration::from_secs(60);
        let mut w = Workers::default();
        let join = |w: &mut Workers, id: &str, name: &str, at: Instant| {
            w.seen(id, at);
            w.describe(id, name, name, 1, 0, &[]);
        };
        join(&mut w, "a/1", "a", t0);
        let none = |_: &str| false;
        let first = w.fleet(t0, timeout, none);
        assert_eq!(first.len(), 1);
        assert!(Arc::ptr_eq(&first, &w.fleet(t0 + ms(999), timeout, none)));
        // Made anew after a second: a row silent past the timeout is gone.
        let later = t0 + timeout + ms(1);
        join(&mut w, "b/1", "b", later);
        let b = w.fleet(later, timeout, none);
        assert_eq!(b.keys().collect::<Vec<_>>(), ["b"]);
        // A contact of a known row changes nothing; one back from lost does.
        w.seen("b/1", later + ms(1));
        assert!(Arc::ptr_eq(&b, &w.fleet(later + ms(2), timeout, none)));
        w.seen_lost("a/1");
        w.seen("a/1", later + ms(3));
        let back = w.fleet(later + ms(4), timeout, none);
        assert_eq!(back.len(), 2);
        // New families, and only new ones.
        let gpu = Reported {
            families: [Family::Gpu].into_iter().collect(),
            ..Reported::default()
        };
        w.reported("b/1", gpu, later + ms(5));
        let on_gpu = w.fleet(later + ms(6), timeout, none);
        assert_eq!(on_gpu["b"], gpu.families);
        w.reported("b/1", gpu, later + ms(7));
        assert!(Arc::ptr_eq(&on_gpu, &w.fleet(later + ms(8), timeout, none)));
        // A new row of an identity it holds, with no new family, changes nothing (a credential
        // making up a worker id per call); a new name for a row does.
        join(&mut w, "b/2", "b", later + ms(9));
        assert!(Arc::ptr_eq(&on_gpu, &w.fleet(later + ms(9), timeout, none)));
        w.describe("b/1", "c", "c", 1, 0, &[]);
        let renamed = w.fleet(later + ms(9), timeout, none);
        assert!(renamed.contains_key("c"));
        // A worker leaving stays until the snapshot is a second old.
        assert!(w.leaving("a/1"));
        assert!(Arc::ptr_eq(
            &renamed,
            &w.fleet(later + ms(10), timeout, none)
        ));
        let names = |f: &Fleet| {
            let mut names: Vec<String> = f.keys().cloned().collect();
            names.sort();
            names
        };
        let left = w.fleet(later + ms(1009), timeout, none);
        assert_eq!(names(&left), ["b", "c"]);
        // The quarantines changed: forgotten, and walked anew with them.
        let c_out = |n: &str| n == "c";
        assert!(Arc::ptr_eq(
            &left,
            &w.fleet(later + ms(1010), timeout, c_out)
        ));
        w.forget_fleet();
        assert_eq!(names(&w.fleet(later + ms(1011), timeout, c_out)), ["b"]);
    }

    /// Rows that say they are leaving before they lease (a credential's made-up worker ids), or
    /// that report or come back from lost while leaving, never make the table walked again: they
    /// never serve. Before, each such row forgot the snapshot, and one credential made every lease
    /// call walk the table (found by a review, 2026-12-01).
    #[test]
    fn rows_leaving_never_forget_the_fleet() {
        use nqueens_common::Family;
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let timeout = Duration::from_secs(60);
        let mut w = Workers::default();
        w.seen("a/1", t0);
        w.describe("a/1", "a", "a", 1, 0, &[]);
        let none = |_: &str| false;
        let first = w.fleet(t0, timeout, none);
        for i in 0..100 {
            let id = format!("m/{i}");
            w.seen(&id, t0);
            assert!(w.leaving(&id));
            w.describe(&id, "m", "m", 1, 0, &[]);
            let gpu = Reported {
                families: [Family::Gpu].into_iter().collect(),
                ..Reported::default()
            };
            w.reported(&id, gpu, t0);
            w.seen_lost(&id);
            w.seen(&id, t0);
            assert!(
                Arc::ptr_eq(&first, &w.fleet(t0 + ms(1), timeout, none)),
                "{i}"
            );
        }
    }
}
