//! Work lists by level: the driver of the kernels that step a vector of nodes of one level at once.
//!
//! The stack kernels (`kernel/feed.rs`) give each lane a search of its own, so each lane is at its own
//! level and a step moves every lane's level out and back through memory. Here a vector holds open nodes
//! of the same level instead, taken from that level's list: a step places the next queen of each, writes
//! the nodes that still have squares back to the list (packed), and appends the children that have free
//! squares to the list of the level below. Every node of a step sits on the same row, so the row's
//! forbidden squares and whether it is the tail (the level whose steps settle the two rows below) are
//! the same for all lanes but for the search each node belongs to, found by its slot.
//!
//! - **Levels** count the rows left, a node's own included: the tail is level 3 whatever the depth of
//!   its search, so searches of any depth share the lists, and a search of depth `d` starts at level `d`.
//! - **Which level steps:** the lowest (deepest) level with a full vector; where none is full, new
//!   searches are started (each takes a slot: its forbidden rows and weight) until one is; where no
//!   search is left to start or no slot is free, the level with the most nodes steps a part vector. So
//!   the level below the one stepped always holds less than a vector, and a list never exceeds two
//!   vectors (`ROOM`): a frame is some 26 KB (AVX-512; its steps touch the lists of the few deepest
//!   levels), and the lanes stay full (98 to 99 % at N = 16 for sixteen lanes).
//! - **Slots** are freed by a scan of the lists when none is free: a slot no node refers to is over, and
//!   its completions are added to the totals with its unit's weight.
//! - **Frames:** a step's loads depend on the step before (its stores), so a few independent sets
//!   of lists are stepped in turn, for the processor to overlap.
//!
//! Node counts and completions are those of every other variant (the property tests check them against
//! the plain recursive walk): a step of a level above the tail places one queen per node; a step of the
//! tail places one per node, one per free square of the row below and one per completion.

use super::{full_mask, next_search, Totals, Unit};

/// Levels by rows left, 0 to 32 (3 to 32 used; boards have at most 32 rows).
pub(super) const LEVELS: usize = 33;
/// The tail level: its nodes have two rows below them.
pub(super) const TAIL: usize = 3;
/// Where a packed slot starts in `c` ([`Step::PACKED`]).
pub(super) const PACK_SHIFT: u32 = 27;

/// One level's open nodes, one array per field: the masks `c`, `l`, `r`, the squares left `f`, and
/// the slot of the node's search. `ROOM` is two vectors' worth.
#[repr(C, align(64))]
pub(super) struct List<const ROOM: usize> {
    pub c: [u32; ROOM],
    pub l: [u32; ROOM],
    pub r: [u32; ROOM],
    pub f: [u32; ROOM],
    pub slot: [u32; ROOM],
}

/// A level's forbidden squares for every slot's search.
#[repr(C, align(64))]
pub(super) struct Row<const SLOTS: usize>(pub [u32; SLOTS]);

/// One set of lists and the searches their nodes belong to.
pub(super) struct Frame<const ROOM: usize, const SLOTS: usize> {
    pub lists: [List<ROOM>; LEVELS],
    /// Nodes in each list.
    pub len: [u32; LEVELS],
    /// Per level, per slot: the forbidden squares of the row with that many rows left.
    pub forbid: [Row<SLOTS>; LEVELS],
    /// Per slot: completions found so far, and the weight of each.
    count: [u64; SLOTS],
    weight: [u64; SLOTS],
    /// Slots holding a search that may still have nodes (the others are free to take one).
    used: u32,
    /// Levels whose list holds at least a full vector.
    full_levels: u64,
    /// Queens placed by the steps.
    pub nodes: u64,
}

/// A kernel's frames. Each kernel keeps its own per thread from one batch to the next ([`frames`] makes
/// them), instead of allocating and zeroing some 80 KB (AVX-512) for every job.
pub(super) type Frames<const ROOM: usize, const SLOTS: usize, const FRAMES: usize> =
    [Box<Frame<ROOM, SLOTS>>; FRAMES];

/// New frames, for [`drive`] (which empties them before it starts).
pub(super) fn frames<const ROOM: usize, const SLOTS: usize, const FRAMES: usize>(
) -> Frames<ROOM, SLOTS, FRAMES> {
    std::array::from_fn(|_| {
        // SAFETY: a frame is integers only, for which all-zero bytes are a value.
        Box::new(unsafe { std::mem::zeroed() })
    })
}

impl<const ROOM: usize, const SLOTS: usize> Frame<ROOM, SLOTS> {
    /// Empties the frame: no nodes in its lists, every slot free, no nodes counted. (What the lists and
    /// slots still hold past that is never read: a list is read below its length, a slot's rows and
    /// weight are written when a search takes it.)
    fn reset(&mut self) {
        self.len = [0; LEVELS];
        self.used = 0;
        self.full_levels = 0;
        self.nodes = 0;
    }

    /// The slots free to take a search.
    fn free(&self) -> u32 {
        !self.used & (u64::MAX >> (64 - SLOTS)) as u32
    }

    /// Counts a step of the tail over `m` nodes: a queen per node, one per square of the row below
    /// (`has`: the lanes with a first and with a second square there) and one per completion (`fits`:
    /// the lanes whose first and whose second square completes), and each completion to its node's
    /// search, whose slots `slots` reads out (only where there is a completion).
    #[inline(always)]
    pub fn settle<const W: usize>(
        &mut self,
        m: usize,
        has: [u32; 2],
        fits: [u32; 2],
        slots: impl FnOnce() -> [u32; W],
    ) {
        let placed = has[0].count_ones() + has[1].count_ones();
        let found = fits[0].count_ones() + fits[1].count_ones();
        self.nodes += u64::from(m as u32 + placed + found);
        if found != 0 {
            let slots = slots();
            self.complete(&slots, fits[0]);
            self.complete(&slots, fits[1]);
        }
    }

    /// Adds one completion to the search of each lane in `lanes` (a bit per lane), whose slots are
    /// `slots`.
    #[inline(always)]
    fn complete(&mut self, slots: &[u32], mut lanes: u32) {
        while lanes != 0 {
            let lane = lanes.trailing_zeros() as usize;
            self.count[slots[lane] as usize % SLOTS] += 1;
            lanes &= lanes - 1;
        }
    }
}

/// Per mask of four lanes, the byte order that packs those 32-bit lanes first, in order (`pshufb` on
/// SSE4.1, `tbl` on NEON).
#[repr(C, align(16))]
pub(super) struct ByteOrders(pub [[u8; 16]; 16]);

/// [`ByteOrders`] of the four-lane kernels.
pub(super) static BYTE_ORDERS: ByteOrders = ByteOrders(byte_orders());

const fn byte_orders() -> [[u8; 16]; 16] {
    let mut table = [[0u8; 16]; 16];
    let mut mask = 0;
    while mask < 16 {
        let (mut lane, mut at) = (0, 0);
        while lane < 4 {
            if mask & (1 << lane) != 0 {
                let mut byte = 0;
                while byte < 4 {
                    table[mask][4 * at + byte] = (4 * lane + byte) as u8;
                    byte += 1;
                }
                at += 1;
            }
            lane += 1;
        }
        mask += 1;
    }
    table
}

/// What a kernel adds to the driver: its step.
pub(super) trait Step<const ROOM: usize, const SLOTS: usize> {
    /// Nodes per vector.
    const WIDTH: usize;
    /// Whether a node's slot rides in the top five bits of its `c` ([`PACK_SHIFT`] up; boards of up to
    /// 27 columns leave them free) instead of in its own field.
    const PACKED: bool = false;
    /// Steps the last `min(len, WIDTH)` nodes of `level`'s list (a level from [`TAIL`] up): writes those
    /// with squares left back packed, appends their children with free squares to the list below (above
    /// the tail), or settles the two rows below (the tail); updates `len` and adds the nodes placed to
    /// `nodes` and completions to `count`.
    ///
    /// # Safety
    ///
    /// The CPU must have the kernel's features; `level` is from [`TAIL`] up, its list holds at most
    /// `ROOM` nodes and the list below less than `WIDTH` (the step's loads and stores rely on them).
    unsafe fn step(&self, frame: &mut Frame<ROOM, SLOTS>, level: usize);
}

/// Searches every unit (all of the same board size) with `kernel`'s step and sums what they produced.
///
/// # Safety
///
/// The CPU must have the kernel's features; the caller is compiled with them (this is inlined into it).
#[inline(always)]
pub(super) unsafe fn drive<
    const ROOM: usize,
    const SLOTS: usize,
    const FRAMES: usize,
    S: Step<ROOM, SLOTS>,
>(
    kernel: &S,
    units: impl Iterator<Item = Unit>,
    frames: &mut Frames<ROOM, SLOTS, FRAMES>,
) -> Totals {
    const { assert!(SLOTS <= 32 && ROOM >= 2 * S::WIDTH && S::WIDTH <= 32) };
    let mut totals = Totals::default();
    let mut units = units.peekable();
    let Some(first) = units.peek() else {
        return totals;
    };
    let n = first.problem.board.n();
    let full = full_mask(n);
    for frame in frames.iter_mut() {
        frame.reset();
    }
    let mut more = true;
    let mut busy = [true; FRAMES];
    while busy.contains(&true) {
        for (frame, busy) in frames.iter_mut().zip(busy.iter_mut()) {
            if *busy {
                *busy = act(kernel, frame, &mut units, &mut more, n, full, &mut totals);
            }
        }
    }
    for frame in frames.iter() {
        retire(frame.used, frame, &mut totals);
        totals.nodes = totals.nodes.saturating_add(frame.nodes);
    }
    totals
}

/// One step of `frame`, after starting new searches where no level has a full vector. Returns false
/// when the frame is empty and no search is left to start.
#[inline(always)]
unsafe fn act<const ROOM: usize, const SLOTS: usize, S: Step<ROOM, SLOTS>>(
    kernel: &S,
    frame: &mut Frame<ROOM, SLOTS>,
    units: &mut impl Iterator<Item = Unit>,
    more: &mut bool,
    n: u8,
    full: u32,
    totals: &mut Totals,
) -> bool {
    while frame.full_levels == 0 && *more {
        if frame.free() == 0 {
            let over = frame.used & !seen(frame, S::PACKED);
            retire(over, frame, totals);
            frame.used &= !over;
            if over == 0 {
                break;
            }
        }
        match next_search(units, n, full, totals) {
            Some(ready) => {
                let slot = frame.free().trailing_zeros() as usize;
                frame.used |= 1 << slot;
                frame.weight[slot] = ready.weight;
                frame.count[slot] = 0;
                let depth = ready.setup.depth;
                for (level, row) in frame.forbid.iter_mut().enumerate() {
                    row.0[slot] = match level {
                        1.. if level <= depth => ready.setup.forbid[depth - level],
                        _ => 0,
                    };
                }
                let at = frame.len[depth] as usize;
                let list = &mut frame.lists[depth];
                list.c[at] = match S::PACKED {
                    true => ready.setup.c0 | (slot as u32) << PACK_SHIFT,
                    false => ready.setup.c0,
                };
                list.l[at] = ready.setup.l0;
                list.r[at] = ready.setup.r0;
                list.f[at] = ready.f0;
                if !S::PACKED {
                    list.slot[at] = slot as u32;
                }
                frame.len[depth] += 1;
                if frame.len[depth] as usize >= S::WIDTH {
                    frame.full_levels |= 1 << depth;
                }
            }
            None => *more = false,
        }
    }
    let level = if frame.full_levels != 0 {
        frame.full_levels.trailing_zeros() as usize
    } else {
        // The list with the most nodes (the deepest of equals), from the tail up.
        let (mut level, mut most) = (0, 0);
        for (at, &len) in frame.len.iter().enumerate().skip(TAIL) {
            if len > most {
                (level, most) = (at, len);
            }
        }
        if most == 0 {
            return *more;
        }
        level
    };
    // The invariants the step's loads and stores rely on (a slip would read or write past a list: stop
    // instead).
    assert!(
        (TAIL..LEVELS).contains(&level)
            && frame.len[level] as usize <= ROOM
            && (frame.len[level - 1] as usize) < S::WIDTH,
        "a step's level and its lists"
    );
    // SAFETY: the caller's features; the list below has room for a vector.
    unsafe { kernel.step(frame, level) };
    let full_now =
        |frame: &Frame<ROOM, SLOTS>, at: usize| ((frame.len[at] as usize >= S::WIDTH) as u64) << at;
    frame.full_levels = (frame.full_levels & !(3 << (level - 1)))
        | full_now(frame, level)
        | full_now(frame, level - 1);
    true
}

/// The slots some node in the lists refers to, as a mask. (Rare: at N = 16, once in some 2,000 steps.)
fn seen<const ROOM: usize, const SLOTS: usize>(frame: &Frame<ROOM, SLOTS>, packed: bool) -> u32 {
    let mut seen = 0u32;
    for (list, &len) in frame.lists.iter().zip(&frame.len).skip(TAIL) {
        let len = (len as usize).min(ROOM);
        let slots = match packed {
            true => &list.c[..len],
            false => &list.slot[..len],
        };
        for &slot in slots {
            let slot = if packed { slot >> PACK_SHIFT } else { slot };
            seen |= 1 << (slot % 32);
        }
    }
    seen
}

/// Adds the completions of the searches in slots `over` to the totals, with their weights.
#[inline(always)]
fn retire<const ROOM: usize, const SLOTS: usize>(
    mut over: u32,
    frame: &Frame<ROOM, SLOTS>,
    totals: &mut Totals,
) {
    while over != 0 {
        let slot = over.trailing_zeros() as usize;
        totals.add_completions(frame.count[slot], frame.weight[slot]);
        over &= over - 1;
    }
}
