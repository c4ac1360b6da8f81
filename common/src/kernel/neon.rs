//! The batch kernel on aarch64's NEON: four searches stepped together, one per 32-bit lane of a vector.
//!
//! The same search as the scalar lanes and `kernel/avx2.rs` (each step places one queen; the level mask
//! says where a search continues; the last two rows are settled by mask tests), with each search's
//! current level held in vector registers: `c`, `l`, `r` (the level's masks) and `f` (its squares left).
//! A step saves the level it leaves on the search's stack and, unless it descends, reloads the level it
//! continues at, four 16-byte rows moved with one 4x4 transpose each way (`trn1`/`trn2`); the deepest level
//! with squares left is a per-lane `clz`; the forbidden squares of the two rows below come from a table of
//! the pairs of them by level, one 64-bit load per search. Conditions are lanes of all ones or zeros, as
//! on AVX2. NEON is part of every aarch64 CPU; the start-up calibration keeps this kernel only where it
//! measures faster than the scalar lanes.

use std::arch::aarch64::*;

use super::feed::{self, Kernel, State, LEVELS};
use super::{Ready, Totals, Unit};

/// Searches in flight: one per 32-bit lane of a 128-bit vector.
const SEARCHES: usize = 4;
/// Per search and level: c, l, r and the squares left, saved when the search leaves the level.
type Stack = [[u32; 4]; SEARCHES * LEVELS];
/// Per search, its table of forbidden squares ([`feed::pairs`]).
type Forbid = [[u64; LEVELS]; SEARCHES];
/// Steps between two flushes of the 32-bit counters: a step adds at most 5 nodes and 2 completions to a
/// search, so they cannot overflow.
const FLUSH: u32 = 1 << 16;

/// The kernel's own memory: the searches' stacks and tables.
struct Neon {
    stack: Box<Stack>,
    forbid: Box<Forbid>,
}

impl Kernel<SEARCHES> for Neon {
    fn start(&mut self, lane: usize, ready: &Ready) {
        feed::pairs(&ready.setup, &mut self.forbid[lane]);
    }

    fn steps(
        &mut self,
        state: &mut State<SEARCHES>,
        full: u32,
    ) -> ([u32; SEARCHES], [u32; SEARCHES]) {
        // SAFETY: a `Neon` is only made by `run`, whose caller guarantees the CPU's features.
        unsafe { steps(state, &mut self.stack, &self.forbid, full) }
    }
}

/// Searches every unit (all of the same board size) and sums what they produced.
///
/// # Safety
///
/// The CPU must support NEON ([`super::Variant::Neon`]`.supported()`; every aarch64 CPU does).
#[target_feature(enable = "neon")]
pub unsafe fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut kernel = Neon {
        stack: Box::new([[0; 4]; SEARCHES * LEVELS]),
        forbid: Box::new([[0; LEVELS]; SEARCHES]),
    };
    feed::drive(&mut kernel, units)
}

/// Constants of the inner loop.
struct Consts {
    zero: uint32x4_t,
    one: uint32x4_t,
    /// The largest level, as a mask.
    levels: uint32x4_t,
    full: uint32x4_t,
}

/// The searches in the inner loop, one per lane.
struct Group {
    c: uint32x4_t,
    l: uint32x4_t,
    r: uint32x4_t,
    f: uint32x4_t,
    v: uint32x4_t,
    m: uint32x4_t,
    tail: uint32x4_t,
    /// The searches that were running when the inner loop started (and still are: it stops after the
    /// step that ends one), as all ones.
    running: uint32x4_t,
    /// Minus the completions found, and minus the nodes, over the inner loop (conditions are -1).
    found: uint32x4_t,
    placed: uint32x4_t,
    /// Each search's first row in the stack and in the table of forbidden squares.
    stack_at: uint32x4_t,
}

/// Steps the searches until one of those that were running is over, or [`FLUSH`] times. Returns each
/// search's completions and nodes over these steps.
#[target_feature(enable = "neon")]
fn steps(
    state: &mut State<SEARCHES>,
    stack: &mut Stack,
    forbid: &Forbid,
    full: u32,
) -> ([u32; SEARCHES], [u32; SEARCHES]) {
    let consts = Consts {
        zero: vdupq_n_u32(0),
        one: vdupq_n_u32(1),
        levels: vdupq_n_u32(LEVELS as u32 - 1),
        full: vdupq_n_u32(full),
    };
    let m = vector(&state.m);
    let mut group = Group {
        c: vector(&state.c),
        l: vector(&state.l),
        r: vector(&state.r),
        f: vector(&state.f),
        v: vector(&state.v),
        m,
        tail: vector(&state.tail),
        running: vmvnq_u32(vceqq_u32(m, consts.zero)),
        found: consts.zero,
        placed: consts.zero,
        stack_at: vector(&[0, 1, 2, 3].map(|search| search * LEVELS as u32)),
    };
    for _ in 0..FLUSH {
        if vmaxvq_u32(step(&mut group, &consts, stack, forbid)) != 0 {
            break;
        }
    }
    (state.c, state.l, state.r, state.f) = (
        elements(group.c),
        elements(group.l),
        elements(group.r),
        elements(group.f),
    );
    (state.v, state.m) = (elements(group.v), elements(group.m));
    let negate = |x: uint32x4_t| elements(vsubq_u32(consts.zero, x));
    (negate(group.found), negate(group.placed))
}

/// One step of a vector of searches; returns the lanes (all ones) of those that were running and are
/// now over.
#[target_feature(enable = "neon")]
#[inline]
fn step(group: &mut Group, k: &Consts, stack: &mut Stack, forbid: &Forbid) -> uint32x4_t {
    let bit = vandq_u32(group.f, vsubq_u32(k.zero, group.f));
    let rest = veorq_u32(group.f, bit);
    let nc = vorrq_u32(group.c, bit);
    let nl = vshlq_n_u32::<1>(vorrq_u32(group.l, bit));
    let nr = vshrq_n_u32::<1>(vorrq_u32(group.r, bit));
    // Each search's current level: its row in the stack and in the table of forbidden squares.
    let here = index(vaddq_u32(group.stack_at, vandq_u32(group.v, k.levels)));
    // SAFETY: `index` is below SEARCHES * LEVELS, the table's length; each load is 8 bytes.
    let pair = |search: usize| unsafe {
        vld1_u64((forbid.as_ptr() as *const u64).add(here[search] as usize))
    };
    let low = vreinterpretq_u32_u64(vcombine_u64(pair(0), pair(1)));
    let high = vreinterpretq_u32_u64(vcombine_u64(pair(2), pair(3)));
    // The pairs' first halves, then their second halves, searches in order.
    let (below, below2) = (vuzp1q_u32(low, high), vuzp2q_u32(low, high));
    let taken = vorrq_u32(vorrq_u32(nc, nl), vorrq_u32(nr, below));
    let nf = vbicq_u32(k.full, taken);
    let on_tail = vceqq_u32(group.v, group.tail);
    // The two rows below the tail level (see `last_two`): `g` is the last row's free squares.
    let last = vorrq_u32(
        vorrq_u32(nc, vshlq_n_u32::<1>(nl)),
        vorrq_u32(vshrq_n_u32::<1>(nr), below2),
    );
    let g = vbicq_u32(k.full, last);
    let b1 = vandq_u32(nf, vsubq_u32(k.zero, nf));
    let b2 = veorq_u32(nf, b1);
    let (z1, z2) = (vceqq_u32(b1, k.zero), vceqq_u32(b2, k.zero));
    // Both rows' squares lie on the two columns left; when a completion exists, `nf | g` holds both,
    // and they must not be neighbours. A square of `nf` then completes when `g` has the other column.
    let both = vorrq_u32(nf, g);
    let apart = vceqq_u32(vandq_u32(both, vshrq_n_u32::<1>(both)), k.zero);
    let fits = |b: uint32x4_t, z: uint32x4_t| {
        let stuck = vceqq_u32(vbicq_u32(g, b), k.zero);
        vbicq_u32(apart, vorrq_u32(z, stuck))
    };
    // Minus the completions, and minus the queens placed on the two rows.
    let leaves = vaddq_u32(fits(b1, z1), fits(b2, z2));
    let row = vaddq_u32(vmvnq_u32(z1), vmvnq_u32(z2));
    group.found = vaddq_u32(group.found, vandq_u32(leaves, on_tail));
    let tail_nodes = vandq_u32(vaddq_u32(row, leaves), on_tail);
    group.placed = vaddq_u32(group.placed, vaddq_u32(tail_nodes, group.running));
    // Where each search goes next: one level down, or the deepest level with squares left.
    let descend = vbicq_u32(group.running, vorrq_u32(on_tail, vceqq_u32(nf, k.zero)));
    let level = vshlq_u32(k.one, vreinterpretq_s32_u32(group.v));
    let spent = vandq_u32(vceqq_u32(rest, k.zero), level);
    group.m = vorrq_u32(
        vbicq_u32(group.m, spent),
        vandq_u32(descend, vshlq_n_u32::<1>(level)),
    );
    save(stack, &here, [group.c, group.l, group.r, rest]);
    // The deepest level with squares left: 31 - clz (garbage, but a level, for an empty mask).
    let back = vandq_u32(vsubq_u32(k.levels, vclzq_u32(group.m)), k.levels);
    let [bc, bl, br, bf] = restore(stack, vaddq_u32(group.stack_at, back));
    group.c = vbslq_u32(descend, nc, bc);
    group.l = vbslq_u32(descend, nl, bl);
    group.r = vbslq_u32(descend, nr, br);
    group.f = vbslq_u32(descend, nf, bf);
    group.v = vbslq_u32(descend, vaddq_u32(group.v, k.one), back);
    vandq_u32(vceqq_u32(group.m, k.zero), group.running)
}

/// The 4x4 transpose: rows of `[c, l, r, f]` from the four vectors, or back.
#[target_feature(enable = "neon")]
fn transpose([a, b, c, d]: [uint32x4_t; 4]) -> [uint32x4_t; 4] {
    let (ab0, ab1) = (vtrn1q_u32(a, b), vtrn2q_u32(a, b));
    let (cd0, cd1) = (vtrn1q_u32(c, d), vtrn2q_u32(c, d));
    let low = |x: uint32x4_t, y: uint32x4_t| {
        vreinterpretq_u32_u64(vtrn1q_u64(
            vreinterpretq_u64_u32(x),
            vreinterpretq_u64_u32(y),
        ))
    };
    let high = |x: uint32x4_t, y: uint32x4_t| {
        vreinterpretq_u32_u64(vtrn2q_u64(
            vreinterpretq_u64_u32(x),
            vreinterpretq_u64_u32(y),
        ))
    };
    [low(ab0, cd0), low(ab1, cd1), high(ab0, cd0), high(ab1, cd1)]
}

/// Writes each search's `[c, l, r, f]` to its stack row `at`.
#[target_feature(enable = "neon")]
fn save(stack: &mut Stack, at: &[u32; SEARCHES], masks: [uint32x4_t; 4]) {
    for (search, row) in transpose(masks).into_iter().enumerate() {
        // SAFETY: `index` is below SEARCHES * LEVELS, the stack's length; a row is 16 bytes.
        unsafe { vst1q_u32(stack.as_mut_ptr().add(at[search] as usize) as *mut u32, row) };
    }
}

/// Reads each search's `[c, l, r, f]` from its stack row `at`.
#[target_feature(enable = "neon")]
fn restore(stack: &Stack, at: uint32x4_t) -> [uint32x4_t; 4] {
    let at = index(at);
    // SAFETY: as in `save`.
    let row =
        |search: usize| unsafe { vld1q_u32(stack.as_ptr().add(at[search] as usize) as *const u32) };
    transpose([row(0), row(1), row(2), row(3)])
}

/// The elements of a vector of stack rows, checked to lie inside the stack (and the table of forbidden
/// squares, as long).
#[target_feature(enable = "neon")]
fn index(at: uint32x4_t) -> [u32; SEARCHES] {
    elements(at).map(|row| row % (SEARCHES * LEVELS) as u32)
}

/// The lanes of a vector.
#[target_feature(enable = "neon")]
fn elements(vector: uint32x4_t) -> [u32; SEARCHES] {
    let mut array = [0u32; SEARCHES];
    // SAFETY: `array` is 16 bytes.
    unsafe { vst1q_u32(array.as_mut_ptr(), vector) };
    array
}

/// A vector of the lanes.
#[target_feature(enable = "neon")]
fn vector(array: &[u32; SEARCHES]) -> uint32x4_t {
    // SAFETY: `array` is 16 bytes.
    unsafe { vld1q_u32(array.as_ptr()) }
}
