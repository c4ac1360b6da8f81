//! The work-list kernel on NEON (aarch64): four nodes of one level stepped at once (`kernel/lists.rs`).
//!
//! The SSE4.1 step (`kernel/lists128.rs`) in NEON: the nodes kept and the children are packed by `tbl`
//! with a table of byte orders (one per 4-bit lane mask), the forbidden squares of each node's search
//! come from one two-register `tbl` lookup in the level's row of the slot table (8 slots, 32 bytes), and
//! lane conditions become bit masks by a horizontal add of their lanes' bits (NEON has no move-mask).

use std::arch::aarch64::*;

use super::lists::{self, Frame, Frames, Step, TAIL};
use super::{Totals, Unit};

/// Frames stepped in turn ([`lists::drive`]).
const FRAMES: usize = 3;
/// Nodes per step.
const WIDTH: usize = 4;
/// Room in a list: two vectors.
const ROOM: usize = 2 * WIDTH;
/// Searches a frame holds at once: the 32 bytes of a two-register `tbl`.
const SLOTS: usize = 8;

/// The NEON step.
struct ListsNeon {
    full: uint32x4_t,
}

thread_local! {
    /// This thread's frames between batches ([`lists::Frames`]).
    static SPARE: std::cell::Cell<Option<Frames<ROOM, SLOTS, FRAMES>>> =
        const { std::cell::Cell::new(None) };
}

/// Searches every unit (all of the same board size) and sums what they produced.
///
/// # Safety
///
/// The CPU must support NEON ([`super::Variant::NeonLists`]`.supported()`).
#[target_feature(enable = "neon")]
pub unsafe fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut units = units.peekable();
    let Some(first) = units.peek() else {
        return Totals::default();
    };
    let kernel = ListsNeon {
        full: vdupq_n_u32(super::full_mask(first.problem.board.n())),
    };
    let mut frames = SPARE.take().unwrap_or_else(lists::frames);
    // SAFETY: this function has the kernel's features (its caller's guarantee).
    let totals = unsafe { lists::drive::<ROOM, SLOTS, FRAMES, _>(&kernel, units, &mut frames) };
    SPARE.set(Some(frames));
    totals
}

impl Step<ROOM, SLOTS> for ListsNeon {
    const WIDTH: usize = WIDTH;

    #[inline(always)]
    unsafe fn step(&self, frame: &mut Frame<ROOM, SLOTS>, level: usize) {
        // The slot lookup reads a row of the slot table as exactly two vectors: more slots would be
        // looked up modulo the two (a wrong count), fewer would read past the row.
        const { assert!(SLOTS == 2 * WIDTH && ROOM == 2 * WIDTH) };
        // SAFETY: the caller's guarantee.
        unsafe { step(self.full, frame, level) }
    }
}

/// The lanes of `v` that are not zero, as a mask.
#[target_feature(enable = "neon")]
#[inline]
fn nonzero(v: uint32x4_t) -> u32 {
    const BITS: [u32; 4] = [1, 2, 4, 8];
    // SAFETY: `BITS` is four u32s.
    let bits = unsafe { vld1q_u32(BITS.as_ptr()) };
    vaddvq_u32(vandq_u32(vtstq_u32(v, v), bits))
}

/// See [`Step::step`].
///
/// # Safety
///
/// The CPU must have the kernel's features; `frame.len[level]` is at most `ROOM` and
/// `frame.len[level - 1]` less than `WIDTH` (the driver checks both before every step): the loads and
/// stores of the lists rely on them.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn step(full: uint32x4_t, frame: &mut Frame<ROOM, SLOTS>, level: usize) {
    let len = frame.len[level] as usize;
    let m = len.min(WIDTH);
    let base = len - m;
    let lanes = (1u32 << m) - 1;
    let list = &frame.lists[level];
    // SAFETY (every load and store below): `base + WIDTH <= ROOM` (`base + m = len <= ROOM`, and `base`
    // is 0 where `m < WIDTH`); the list below holds less than WIDTH nodes (the driver's invariant), so
    // `at + WIDTH <= ROOM` too. Lanes from `m` up read nodes past the list's end (values, never used:
    // every mask below is cut to `lanes`).
    let load = |field: &[u32; ROOM]| unsafe { vld1q_u32(field.as_ptr().add(base)) };
    let (c, l, r, f, slot) = (
        load(&list.c),
        load(&list.l),
        load(&list.r),
        load(&list.f),
        load(&list.slot),
    );
    let zero = vdupq_n_u32(0);
    let bit = vandq_u32(f, vsubq_u32(zero, f));
    let rest = veorq_u32(f, bit);
    let next_c = vorrq_u32(c, bit);
    let next_l = vshlq_n_u32::<1>(vorrq_u32(l, bit));
    let next_r = vshrq_n_u32::<1>(vorrq_u32(r, bit));
    // The byte order that reads each lane's slot (4 bytes at 4 * slot) out of a row of 8 slots.
    let order = vreinterpretq_u8_u32(vaddq_u32(
        vmulq_n_u32(
            vshlq_n_u32::<2>(vandq_u32(slot, vdupq_n_u32(7))),
            0x0101_0101,
        ),
        vdupq_n_u32(0x0302_0100),
    ));
    // Each node's search's forbidden squares on the row `rows_left` rows from the end.
    let forbidden = |rows_left: usize| {
        let row = frame.forbid[rows_left].0.as_ptr() as *const u8;
        // SAFETY: the row is 8 u32s, 32 bytes.
        let table = unsafe { uint8x16x2_t(vld1q_u8(row), vld1q_u8(row.add(16))) };
        vreinterpretq_u32_u8(vqtbl2q_u8(table, order))
    };
    let below = forbidden(level - 1);
    let taken = vorrq_u32(vorrq_u32(next_c, next_l), vorrq_u32(next_r, below));
    let next_f = vbicq_u32(full, taken);
    let keep = nonzero(rest) & lanes;
    let put = |field: &mut [u32; ROOM], at: usize, value: uint32x4_t, which: u32| unsafe {
        let order = vld1q_u8(lists::BYTE_ORDERS.0[which as usize & 0xf].as_ptr());
        vst1q_u32(
            field.as_mut_ptr().add(at),
            vreinterpretq_u32_u8(vqtbl1q_u8(vreinterpretq_u8_u32(value), order)),
        )
    };
    let list = &mut frame.lists[level];
    put(&mut list.c, base, c, keep);
    put(&mut list.l, base, l, keep);
    put(&mut list.r, base, r, keep);
    put(&mut list.f, base, rest, keep);
    put(&mut list.slot, base, slot, keep);
    frame.len[level] = (base + keep.count_ones() as usize) as u32;
    if level == TAIL {
        // The two rows below (see `last_two` and `kernel/lists512.rs`).
        let last_taken = vorrq_u32(
            vorrq_u32(next_c, vshlq_n_u32::<1>(next_l)),
            vorrq_u32(vshrq_n_u32::<1>(next_r), forbidden(1)),
        );
        let last_free = vbicq_u32(full, last_taken);
        let first_bit = vandq_u32(next_f, vsubq_u32(zero, next_f));
        let second_bit = veorq_u32(next_f, first_bit);
        let has_first = nonzero(first_bit) & lanes;
        let has_second = nonzero(second_bit) & lanes;
        let both = vorrq_u32(next_f, last_free);
        let apart = !nonzero(vandq_u32(both, vshrq_n_u32::<1>(both)));
        let fits = |square: uint32x4_t, present: u32| {
            present & apart & nonzero(vbicq_u32(last_free, square))
        };
        let (fits_first, fits_second) = (fits(first_bit, has_first), fits(second_bit, has_second));
        frame.settle(
            m,
            [has_first, has_second],
            [fits_first, fits_second],
            || {
                let mut slots = [0u32; WIDTH];
                // SAFETY: `slots` is four u32s.
                unsafe { vst1q_u32(slots.as_mut_ptr(), slot) };
                slots
            },
        );
    } else {
        let grow = nonzero(next_f) & lanes;
        let at = frame.len[level - 1] as usize;
        let below = &mut frame.lists[level - 1];
        put(&mut below.c, at, next_c, grow);
        put(&mut below.l, at, next_l, grow);
        put(&mut below.r, at, next_r, grow);
        put(&mut below.f, at, next_f, grow);
        put(&mut below.slot, at, slot, grow);
        frame.len[level - 1] = (at + grow.count_ones() as usize) as u32;
        frame.nodes += m as u64;
    }
}
