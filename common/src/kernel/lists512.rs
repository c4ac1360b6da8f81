//! The work-list kernel on AVX-512: sixteen nodes of one level stepped at once (`kernel/lists.rs`).
//!
//! A step loads sixteen nodes of a level's list (five 512-bit loads: `c`, `l`, `r`, the squares left and
//! the slot), places the next queen of each, finds the forbidden squares of the row below for each
//! node's search with one `vpermt2d` from the level's row of the slot table (32 slots in two vectors:
//! no gather), and writes the nodes with squares left back and the children with free squares to the
//! list below, each packed by `vpcompressd` into a register and stored whole.

use std::arch::x86_64::*;

use super::lists::{self, Frame, Frames, Step, TAIL};
use super::{Totals, Unit};

/// Frames stepped in turn ([`lists::drive`]).
const FRAMES: usize = 3;
/// Nodes per step.
const WIDTH: usize = 16;
/// Room in a list: two vectors.
const ROOM: usize = 2 * WIDTH;
/// Searches a frame holds at once: the two vectors of a `vpermt2d` table. (At N = 16 a frame holds at
/// most about 40 with more slots; 32 leave the lanes 98.6 % full.)
const SLOTS: usize = 32;

/// `vpternlogd` truth tables, named after what they compute from `(a, b, c)`.
/// `!(a | b | c)`.
const NOR3: i32 = 0x01;
/// `a | b | c`.
const OR3: i32 = 0xfe;

/// The AVX-512 step; `PACKED`: each node's slot rides in its `c` (boards of up to 27 columns), which
/// saves packing and storing a field twice per step.
struct Lists512<const PACKED: bool> {
    full: __m512i,
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
/// The CPU must support AVX-512 F, BW, VL, DQ and CD, BMI1, BMI2, POPCNT and LZCNT
/// ([`super::Variant::Avx512Lists`]`.supported()`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
pub unsafe fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut units = units.peekable();
    let Some(first) = units.peek() else {
        return Totals::default();
    };
    let n = first.problem.board.n();
    let full = _mm512_set1_epi32(super::full_mask(n) as i32);
    let mut frames = SPARE.take().unwrap_or_else(lists::frames);
    // SAFETY: this function has the kernel's features (its caller's guarantee).
    let totals = unsafe {
        match u32::from(n) <= lists::PACK_SHIFT {
            true => lists::drive::<ROOM, SLOTS, FRAMES, _>(
                &Lists512::<true> { full },
                units,
                &mut frames,
            ),
            false => lists::drive::<ROOM, SLOTS, FRAMES, _>(
                &Lists512::<false> { full },
                units,
                &mut frames,
            ),
        }
    };
    SPARE.set(Some(frames));
    totals
}

impl<const PACKED: bool> Step<ROOM, SLOTS> for Lists512<PACKED> {
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

/// The lanes below `m`, as a mask.
fn first_lanes(m: usize) -> __mmask16 {
    ((1u32 << m) - 1) as __mmask16
}

/// See [`Step::step`].
///
/// # Safety
///
/// The CPU must have the kernel's features; `frame.len[level]` is at most `ROOM` and
/// `frame.len[level - 1]` less than `WIDTH` (the driver checks both before every step): the loads and
/// stores of the lists rely on them.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
#[inline]
unsafe fn step<const PACKED: bool>(full: __m512i, frame: &mut Frame<ROOM, SLOTS>, level: usize) {
    let len = frame.len[level] as usize;
    let m = len.min(WIDTH);
    let base = len - m;
    let lanes = first_lanes(m);
    let list = &frame.lists[level];
    // SAFETY (every load and store below): `base + WIDTH <= ROOM` (`base + m = len <= ROOM`, and `base`
    // is 0 where `m < WIDTH`); the list below holds less than WIDTH nodes (the driver's invariant), so
    // `at + WIDTH <= ROOM` too. The loads and stores are unaligned.
    let load = |field: &[u32; ROOM]| unsafe {
        _mm512_maskz_loadu_epi32(lanes, field.as_ptr().add(base) as *const i32)
    };
    let (c, l, r, f) = (load(&list.c), load(&list.l), load(&list.r), load(&list.f));
    let slot = match PACKED {
        true => _mm512_srli_epi32::<{ lists::PACK_SHIFT }>(c),
        false => load(&list.slot),
    };
    let zero = _mm512_setzero_si512();
    let bit = _mm512_and_si512(f, _mm512_sub_epi32(zero, f));
    let rest = _mm512_xor_si512(f, bit);
    let next_c = _mm512_or_si512(c, bit);
    let next_l = _mm512_slli_epi32::<1>(_mm512_or_si512(l, bit));
    let next_r = _mm512_srli_epi32::<1>(_mm512_or_si512(r, bit));
    // Each node's search's forbidden squares on the row `rows_left` rows from the end.
    let forbidden = |rows_left: usize| {
        let row = frame.forbid[rows_left].0.as_ptr() as *const __m512i;
        // SAFETY: the row is 32 u32s, two vectors, aligned to 64 bytes.
        let (low, high) = unsafe { (_mm512_load_si512(row), _mm512_load_si512(row.add(1))) };
        _mm512_permutex2var_epi32(low, slot, high)
    };
    let below = forbidden(level - 1);
    let next_f = _mm512_and_si512(
        _mm512_ternarylogic_epi32::<NOR3>(next_c, next_l, _mm512_or_si512(next_r, below)),
        full,
    );
    let keep = _mm512_mask_test_epi32_mask(lanes, rest, rest);
    let put = |field: &mut [u32; ROOM], at: usize, value: __m512i, which: __mmask16| unsafe {
        _mm512_storeu_si512(
            field.as_mut_ptr().add(at) as *mut __m512i,
            _mm512_maskz_compress_epi32(which, value),
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
        // The two rows below (see `last_two`): `last_free` is the last row's free squares. Both rows'
        // squares lie on the two columns left; a square of `next_f` completes when `last_free` has the
        // other column and the two are not neighbours.
        let last_taken = _mm512_ternarylogic_epi32::<OR3>(
            next_c,
            _mm512_slli_epi32::<1>(next_l),
            _mm512_or_si512(_mm512_srli_epi32::<1>(next_r), forbidden(1)),
        );
        let last_free = _mm512_andnot_si512(last_taken, full);
        let first_bit = _mm512_and_si512(next_f, _mm512_sub_epi32(zero, next_f));
        let second_bit = _mm512_xor_si512(next_f, first_bit);
        let has_first = _mm512_mask_test_epi32_mask(lanes, first_bit, first_bit);
        let has_second = _mm512_mask_test_epi32_mask(lanes, second_bit, second_bit);
        let both = _mm512_or_si512(next_f, last_free);
        let apart = _mm512_testn_epi32_mask(both, _mm512_srli_epi32::<1>(both));
        let fits = |square: __m512i, present: __mmask16| {
            let other = _mm512_andnot_si512(square, last_free);
            _mm512_mask_test_epi32_mask(present & apart, other, other)
        };
        let (fits_first, fits_second) = (fits(first_bit, has_first), fits(second_bit, has_second));
        frame.settle(
            m,
            [has_first, has_second].map(u32::from),
            [fits_first, fits_second].map(u32::from),
            || elements(slot),
        );
    } else {
        let grow = _mm512_mask_test_epi32_mask(lanes, next_f, next_f);
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

/// The elements of a vector.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
fn elements(vector: __m512i) -> [u32; WIDTH] {
    let mut array = [0u32; WIDTH];
    // SAFETY: `array` is 64 bytes; the store is unaligned.
    unsafe { _mm512_storeu_si512(array.as_mut_ptr() as *mut __m512i, vector) };
    array
}
