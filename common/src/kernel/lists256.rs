//! The work-list kernel on AVX2: eight nodes of one level stepped at once (`kernel/lists.rs`).
//!
//! The AVX-512 step (`kernel/lists512.rs`) at half the width, with what AVX2 lacks built from what it
//! has: the nodes kept and the children are packed by `vpermd` with a table of permutations (one per
//! 8-bit lane mask, 8 KiB), conditions are lanes of all ones read out with `vmovmskps`, and the
//! forbidden squares of each node's search come from two `vpermd` lookups in the level's row of the
//! slot table (16 slots), blended on the slot's fourth bit. No gathers (slow on AMD Zen 1 and 2).

use std::arch::x86_64::*;

use super::lists::{self, Frame, Frames, Step, TAIL};
use super::{Totals, Unit};

/// Frames stepped in turn ([`lists::drive`]).
const FRAMES: usize = 3;
/// Nodes per step.
const WIDTH: usize = 8;
/// Room in a list: two vectors.
const ROOM: usize = 2 * WIDTH;
/// Searches a frame holds at once: the two vectors of the lookup. (At N = 16, eight lanes with 16 slots
/// stay 99.3 % full, as with 32.)
const SLOTS: usize = 16;

/// Per 8-bit lane mask, the permutation that packs those lanes first, in order.
#[repr(C, align(32))]
struct Pack([[u32; WIDTH]; 256]);

static PACK: Pack = Pack(pack_table());

const fn pack_table() -> [[u32; WIDTH]; 256] {
    let mut table = [[0u32; WIDTH]; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut lane, mut at) = (0, 0);
        while lane < WIDTH {
            if mask & (1 << lane) != 0 {
                table[mask][at] = lane as u32;
                at += 1;
            }
            lane += 1;
        }
        mask += 1;
    }
    table
}

/// The AVX2 step; `PACKED`: each node's slot rides in its `c` (boards of up to 27 columns).
struct Lists256<const PACKED: bool> {
    full: __m256i,
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
/// The CPU must support AVX2, BMI1, BMI2, POPCNT and LZCNT ([`super::Variant::Avx2Lists`]`.supported()`).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
pub unsafe fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut units = units.peekable();
    let Some(first) = units.peek() else {
        return Totals::default();
    };
    let n = first.problem.board.n();
    let full = _mm256_set1_epi32(super::full_mask(n) as i32);
    let mut frames = SPARE.take().unwrap_or_else(lists::frames);
    // SAFETY: this function has the kernel's features (its caller's guarantee).
    let totals = unsafe {
        match u32::from(n) <= lists::PACK_SHIFT {
            true => lists::drive::<ROOM, SLOTS, FRAMES, _>(
                &Lists256::<true> { full },
                units,
                &mut frames,
            ),
            false => lists::drive::<ROOM, SLOTS, FRAMES, _>(
                &Lists256::<false> { full },
                units,
                &mut frames,
            ),
        }
    };
    SPARE.set(Some(frames));
    totals
}

impl<const PACKED: bool> Step<ROOM, SLOTS> for Lists256<PACKED> {
    const WIDTH: usize = WIDTH;
    const PACKED: bool = PACKED;

    #[inline(always)]
    unsafe fn step(&self, frame: &mut Frame<ROOM, SLOTS>, level: usize) {
        // The slot lookup reads a row of the slot table as exactly two vectors: more slots would be
        // looked up modulo the two (a wrong count), fewer would read past the row.
        const { assert!(SLOTS == 2 * WIDTH && ROOM == 2 * WIDTH) };
        // SAFETY: the caller's guarantee.
        unsafe { step::<PACKED>(self.full, frame, level) }
    }
}

/// The lanes of `v` that are not zero, as a mask.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[inline]
fn nonzero(v: __m256i) -> u32 {
    let zero = _mm256_cmpeq_epi32(v, _mm256_setzero_si256());
    !(_mm256_movemask_ps(_mm256_castsi256_ps(zero)) as u32) & 0xff
}

/// See [`Step::step`].
///
/// # Safety
///
/// The CPU must have the kernel's features; `frame.len[level]` is at most `ROOM` and
/// `frame.len[level - 1]` less than `WIDTH` (the driver checks both before every step): the loads and
/// stores of the lists rely on them.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[inline]
unsafe fn step<const PACKED: bool>(full: __m256i, frame: &mut Frame<ROOM, SLOTS>, level: usize) {
    let len = frame.len[level] as usize;
    let m = len.min(WIDTH);
    let base = len - m;
    let lanes = (1u32 << m) - 1;
    let list = &frame.lists[level];
    // SAFETY (every load and store below): `base + WIDTH <= ROOM` (`base + m = len <= ROOM`, and `base`
    // is 0 where `m < WIDTH`); the list below holds less than WIDTH nodes (the driver's invariant), so
    // `at + WIDTH <= ROOM` too. Lanes from `m` up read nodes past the list's end (values, never used:
    // every mask below is cut to `lanes`). The loads and stores are unaligned.
    let load = |field: &[u32; ROOM]| unsafe {
        _mm256_loadu_si256(field.as_ptr().add(base) as *const __m256i)
    };
    let (c, l, r, f) = (load(&list.c), load(&list.l), load(&list.r), load(&list.f));
    let slot = match PACKED {
        true => _mm256_srli_epi32::<{ lists::PACK_SHIFT as i32 }>(c),
        false => load(&list.slot),
    };
    let zero = _mm256_setzero_si256();
    let bit = _mm256_and_si256(f, _mm256_sub_epi32(zero, f));
    let rest = _mm256_xor_si256(f, bit);
    let next_c = _mm256_or_si256(c, bit);
    let next_l = _mm256_slli_epi32::<1>(_mm256_or_si256(l, bit));
    let next_r = _mm256_srli_epi32::<1>(_mm256_or_si256(r, bit));
    // The slot's fourth bit, in each lane's sign: which half of the row holds its search.
    let high_half = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(slot));
    // Each node's search's forbidden squares on the row `rows_left` rows from the end.
    let forbidden = |rows_left: usize| {
        let row = frame.forbid[rows_left].0.as_ptr() as *const __m256i;
        // SAFETY: the row is 16 u32s, two vectors, aligned to 64 bytes.
        let (low, high) = unsafe { (_mm256_load_si256(row), _mm256_load_si256(row.add(1))) };
        _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(low, slot)),
            _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(high, slot)),
            high_half,
        ))
    };
    let below = forbidden(level - 1);
    let taken = _mm256_or_si256(
        _mm256_or_si256(next_c, next_l),
        _mm256_or_si256(next_r, below),
    );
    let next_f = _mm256_andnot_si256(taken, full);
    let keep = nonzero(rest) & lanes;
    let put = |field: &mut [u32; ROOM], at: usize, value: __m256i, which: u32| unsafe {
        let order = _mm256_load_si256(PACK.0[which as usize & 0xff].as_ptr() as *const __m256i);
        _mm256_storeu_si256(
            field.as_mut_ptr().add(at) as *mut __m256i,
            _mm256_permutevar8x32_epi32(value, order),
        )
    };
    let list = &mut frame.lists[level];
    put(&mut list.c, base, c, keep);
    put(&mut list.l, base, l, keep);
    put(&mut list.r, base, r, keep);
    put(&mut list.f, base, rest, keep);
    if !PACKED {
        put(&mut list.slot, base, slot, keep);
    }
    frame.len[level] = (base + keep.count_ones() as usize) as u32;
    if level == TAIL {
        // The two rows below (see `last_two` and `kernel/lists512.rs`).
        let last_taken = _mm256_or_si256(
            _mm256_or_si256(next_c, _mm256_slli_epi32::<1>(next_l)),
            _mm256_or_si256(_mm256_srli_epi32::<1>(next_r), forbidden(1)),
        );
        let last_free = _mm256_andnot_si256(last_taken, full);
        let first_bit = _mm256_and_si256(next_f, _mm256_sub_epi32(zero, next_f));
        let second_bit = _mm256_xor_si256(next_f, first_bit);
        let has_first = nonzero(first_bit) & lanes;
        let has_second = nonzero(second_bit) & lanes;
        let both = _mm256_or_si256(next_f, last_free);
        let apart = !nonzero(_mm256_and_si256(both, _mm256_srli_epi32::<1>(both)));
        let fits = |square: __m256i, present: u32| {
            present & apart & nonzero(_mm256_andnot_si256(square, last_free))
        };
        let (fits_first, fits_second) = (fits(first_bit, has_first), fits(second_bit, has_second));
        frame.settle(
            m,
            [has_first, has_second],
            [fits_first, fits_second],
            || {
                let mut slots = [0u32; WIDTH];
                // SAFETY: `slots` is 32 bytes; the store is unaligned.
                unsafe { _mm256_storeu_si256(slots.as_mut_ptr() as *mut __m256i, slot) };
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
        if !PACKED {
            put(&mut below.slot, at, slot, grow);
        }
        frame.len[level - 1] = (at + grow.count_ones() as usize) as u32;
        frame.nodes += m as u64;
    }
}
