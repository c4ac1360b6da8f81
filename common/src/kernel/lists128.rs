//! The work-list kernel on SSE4.1: four nodes of one level stepped at once (`kernel/lists.rs`).
//!
//! The AVX2 step (`kernel/lists256.rs`) at 128 bits, for x86-64 CPUs without AVX2 and for those whose
//! 256-bit operations are split in two (AMD Zen 1): the nodes kept and the children are packed by
//! `pshufb` with a table of byte orders (one per 4-bit lane mask), and the forbidden squares of each
//! node's search come from two `pshufb` lookups in the level's row of the slot table (8 slots), blended
//! on the slot's third bit.

use std::arch::x86_64::*;

use super::lists::{self, Frame, Frames, Step, TAIL};
use super::{Totals, Unit};

/// Frames stepped in turn ([`lists::drive`]).
const FRAMES: usize = 3;
/// Nodes per step.
const WIDTH: usize = 4;
/// Room in a list: two vectors.
const ROOM: usize = 2 * WIDTH;
/// Searches a frame holds at once: the two vectors of the lookup. (At N = 16, four lanes with 8 slots
/// stay 99.6 % full, as with 16.)
const SLOTS: usize = 8;

/// The SSE4.1 step; `PACKED`: each node's slot rides in its `c` (boards of up to 27 columns).
struct Lists128<const PACKED: bool> {
    full: __m128i,
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
/// The CPU must support SSE4.1 ([`super::Variant::Sse41Lists`]`.supported()`).
#[target_feature(enable = "sse4.1")]
pub unsafe fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut units = units.peekable();
    let Some(first) = units.peek() else {
        return Totals::default();
    };
    let n = first.problem.board.n();
    let full = _mm_set1_epi32(super::full_mask(n) as i32);
    let mut frames = SPARE.take().unwrap_or_else(lists::frames);
    // SAFETY: this function has the kernel's features (its caller's guarantee).
    let totals = unsafe {
        match u32::from(n) <= lists::PACK_SHIFT {
            true => lists::drive::<ROOM, SLOTS, FRAMES, _>(
                &Lists128::<true> { full },
                units,
                &mut frames,
            ),
            false => lists::drive::<ROOM, SLOTS, FRAMES, _>(
                &Lists128::<false> { full },
                units,
                &mut frames,
            ),
        }
    };
    SPARE.set(Some(frames));
    totals
}

impl<const PACKED: bool> Step<ROOM, SLOTS> for Lists128<PACKED> {
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
#[target_feature(enable = "sse4.1")]
#[inline]
fn nonzero(v: __m128i) -> u32 {
    let zero = _mm_cmpeq_epi32(v, _mm_setzero_si128());
    !(_mm_movemask_ps(_mm_castsi128_ps(zero)) as u32) & 0xf
}

/// See [`Step::step`].
///
/// # Safety
///
/// The CPU must have the kernel's features; `frame.len[level]` is at most `ROOM` and
/// `frame.len[level - 1]` less than `WIDTH` (the driver checks both before every step): the loads and
/// stores of the lists rely on them.
#[target_feature(enable = "sse4.1")]
#[inline]
unsafe fn step<const PACKED: bool>(full: __m128i, frame: &mut Frame<ROOM, SLOTS>, level: usize) {
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
        _mm_loadu_si128(field.as_ptr().add(base) as *const __m128i)
    };
    let (c, l, r, f) = (load(&list.c), load(&list.l), load(&list.r), load(&list.f));
    let slot = match PACKED {
        true => _mm_srli_epi32::<{ lists::PACK_SHIFT as i32 }>(c),
        false => load(&list.slot),
    };
    let zero = _mm_setzero_si128();
    let bit = _mm_and_si128(f, _mm_sub_epi32(zero, f));
    let rest = _mm_xor_si128(f, bit);
    let next_c = _mm_or_si128(c, bit);
    let next_l = _mm_slli_epi32::<1>(_mm_or_si128(l, bit));
    let next_r = _mm_srli_epi32::<1>(_mm_or_si128(r, bit));
    // The byte order that reads each lane's slot (its two low bits) out of a vector of four slots, and
    // the slot's third bit in each lane's sign: which half of the row holds its search.
    let quarter = _mm_slli_epi32::<2>(_mm_and_si128(slot, _mm_set1_epi32(3)));
    let order = _mm_add_epi8(
        _mm_shuffle_epi8(
            quarter,
            _mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12),
        ),
        _mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3),
    );
    let high_half = _mm_castsi128_ps(_mm_slli_epi32::<29>(slot));
    // Each node's search's forbidden squares on the row `rows_left` rows from the end.
    let forbidden = |rows_left: usize| {
        let row = frame.forbid[rows_left].0.as_ptr() as *const __m128i;
        // SAFETY: the row is 8 u32s, two vectors, aligned to 64 bytes.
        let (low, high) = unsafe { (_mm_load_si128(row), _mm_load_si128(row.add(1))) };
        _mm_castps_si128(_mm_blendv_ps(
            _mm_castsi128_ps(_mm_shuffle_epi8(low, order)),
            _mm_castsi128_ps(_mm_shuffle_epi8(high, order)),
            high_half,
        ))
    };
    let below = forbidden(level - 1);
    let taken = _mm_or_si128(_mm_or_si128(next_c, next_l), _mm_or_si128(next_r, below));
    let next_f = _mm_andnot_si128(taken, full);
    let keep = nonzero(rest) & lanes;
    let put = |field: &mut [u32; ROOM], at: usize, value: __m128i, which: u32| unsafe {
        let order =
            _mm_load_si128(lists::BYTE_ORDERS.0[which as usize & 0xf].as_ptr() as *const __m128i);
        _mm_storeu_si128(
            field.as_mut_ptr().add(at) as *mut __m128i,
            _mm_shuffle_epi8(value, order),
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
        let last_taken = _mm_or_si128(
            _mm_or_si128(next_c, _mm_slli_epi32::<1>(next_l)),
            _mm_or_si128(_mm_srli_epi32::<1>(next_r), forbidden(1)),
        );
        let last_free = _mm_andnot_si128(last_taken, full);
        let first_bit = _mm_and_si128(next_f, _mm_sub_epi32(zero, next_f));
        let second_bit = _mm_xor_si128(next_f, first_bit);
        let has_first = nonzero(first_bit) & lanes;
        let has_second = nonzero(second_bit) & lanes;
        let both = _mm_or_si128(next_f, last_free);
        let apart = !nonzero(_mm_and_si128(both, _mm_srli_epi32::<1>(both)));
        let fits = |square: __m128i, present: u32| {
            present & apart & nonzero(_mm_andnot_si128(square, last_free))
        };
        let (fits_first, fits_second) = (fits(first_bit, has_first), fits(second_bit, has_second));
        frame.settle(
            m,
            [has_first, has_second],
            [fits_first, fits_second],
            || {
                let mut slots = [0u32; WIDTH];
                // SAFETY: `slots` is 16 bytes; the store is unaligned.
                unsafe { _mm_storeu_si128(slots.as_mut_ptr() as *mut __m128i, slot) };
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
