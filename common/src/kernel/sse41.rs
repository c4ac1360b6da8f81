//! The batch kernel on SSE4.1: eight searches, one per 32-bit lane of two 128-bit vectors stepped in turn.
//!
//! For x86-64 CPUs without AVX2 (Intel before Haswell, from Penryn on; AMD from Bulldozer to Steamroller),
//! which otherwise run the scalar lanes; the start-up calibration keeps it only where it measures fastest.
//! The same search as `kernel/avx2.rs` at half the width (each step places one queen; the level mask says
//! where a search continues; the last two rows are settled by mask tests), and the same step as
//! `kernel/neon.rs`: each search's current level in vector registers (`c`, `l`, `r` and `f`, its squares
//! left), saved to the search's stack and reloaded with one 4x4 transpose each way; the forbidden squares of
//! the two rows below from a per-search table of their pairs by level, one 64-bit load per search. SSE4.1
//! has no per-lane shift and no leading-zero count: `1 << v` and the deepest level with squares left are
//! read from float conversions (an exponent is a power of two). Conditions are lanes of all ones or
//! zeros, as on AVX2.

use std::arch::x86_64::*;

use super::feed::{self, Kernel, State, LEVELS};
use super::{Ready, Totals, Unit};

/// Searches in flight: two vectors of four, stepped in turn (independent work for the processor to
/// overlap: one vector's step is a chain of dependent operations). On a Zen 4 (`kernel_variants 16`,
/// thread CPU seconds) one vector took 0.83 s, two 0.73 s, three 0.81 s (the registers run out).
const SEARCHES: usize = 8;
/// Searches per vector.
const WIDTH: usize = 4;
/// Per search and level: c, l, r and the squares left, saved when the search leaves the level.
type Stack = [[u32; WIDTH]; SEARCHES * LEVELS];
/// Per search, its table of forbidden squares ([`feed::pairs`]).
type Forbid = [[u64; LEVELS]; SEARCHES];
/// Steps between two flushes of the 32-bit counters: a step adds at most 5 nodes and 2 completions to a
/// search, so they cannot overflow.
const FLUSH: u32 = 1 << 16;

/// The kernel's own memory: the searches' stacks and tables.
struct Sse41 {
    stack: Box<Stack>,
    forbid: Box<Forbid>,
}

impl Kernel<SEARCHES> for Sse41 {
    fn start(&mut self, lane: usize, ready: &Ready) {
        feed::pairs(&ready.setup, &mut self.forbid[lane]);
    }

    fn steps(
        &mut self,
        state: &mut State<SEARCHES>,
        full: u32,
    ) -> ([u32; SEARCHES], [u32; SEARCHES]) {
        // SAFETY: an `Sse41` is only made by `run`, whose caller guarantees the CPU's features.
        unsafe { steps(state, &mut self.stack, &self.forbid, full) }
    }
}

/// Searches every unit (all of the same board size) and sums what they produced.
///
/// # Safety
///
/// The CPU must support SSE4.1 ([`super::Variant::Sse41`]`.supported()`).
#[target_feature(enable = "sse4.1")]
pub unsafe fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut kernel = Sse41 {
        stack: Box::new([[0; WIDTH]; SEARCHES * LEVELS]),
        forbid: Box::new([[0; LEVELS]; SEARCHES]),
    };
    feed::drive(&mut kernel, units)
}

/// Constants of the inner loop.
struct Consts {
    zero: __m128i,
    ones: __m128i,
    one: __m128i,
    /// The largest level, as a mask.
    levels: __m128i,
    full: __m128i,
}

/// The searches in the inner loop, one per lane.
struct Group {
    c: __m128i,
    l: __m128i,
    r: __m128i,
    f: __m128i,
    v: __m128i,
    m: __m128i,
    tail: __m128i,
    /// The searches that were running when the inner loop started (and still are: it stops after the
    /// step that ends one).
    running: __m128i,
    /// Minus the completions found, and minus the nodes, over the inner loop.
    found: __m128i,
    placed: __m128i,
    /// Each search's first row in the stack and in the table of forbidden squares.
    stack_at: __m128i,
}

/// Steps the searches until one of those that were running is over, or [`FLUSH`] times. Returns each
/// search's completions and nodes over these steps.
#[target_feature(enable = "sse4.1")]
#[inline(never)]
fn steps(
    s: &mut State<SEARCHES>,
    stack: &mut Stack,
    forbid: &Forbid,
    full: u32,
) -> ([u32; SEARCHES], [u32; SEARCHES]) {
    let k = Consts {
        zero: _mm_setzero_si128(),
        ones: _mm_set1_epi32(-1),
        one: _mm_set1_epi32(1),
        levels: _mm_set1_epi32(LEVELS as i32 - 1),
        full: _mm_set1_epi32(full as i32),
    };
    let group = |half: usize| {
        let lanes =
            |a: &[u32; SEARCHES]| -> [u32; WIDTH] { std::array::from_fn(|i| a[half * WIDTH + i]) };
        let m = vector(&lanes(&s.m));
        Group {
            c: vector(&lanes(&s.c)),
            l: vector(&lanes(&s.l)),
            r: vector(&lanes(&s.r)),
            f: vector(&lanes(&s.f)),
            v: vector(&lanes(&s.v)),
            m,
            tail: vector(&lanes(&s.tail)),
            running: _mm_xor_si128(_mm_cmpeq_epi32(m, k.zero), k.ones),
            found: k.zero,
            placed: k.zero,
            stack_at: vector(&std::array::from_fn(|i| {
                ((half * WIDTH + i) * LEVELS) as u32
            })),
        }
    };
    let (mut x, mut y) = (group(0), group(1));
    for _ in 0..FLUSH {
        let over = _mm_or_si128(
            step(&mut x, &k, stack, forbid),
            step(&mut y, &k, stack, forbid),
        );
        if _mm_movemask_epi8(over) != 0 {
            break;
        }
    }
    let mut out = ([0; SEARCHES], [0; SEARCHES]);
    for (half, g) in [x, y].into_iter().enumerate() {
        let put = |a: &mut [u32; SEARCHES], v: __m128i| {
            a[half * WIDTH..][..WIDTH].copy_from_slice(&elements(v));
        };
        put(&mut s.c, g.c);
        put(&mut s.l, g.l);
        put(&mut s.r, g.r);
        put(&mut s.f, g.f);
        put(&mut s.v, g.v);
        put(&mut s.m, g.m);
        put(&mut out.0, _mm_sub_epi32(k.zero, g.found));
        put(&mut out.1, _mm_sub_epi32(k.zero, g.placed));
    }
    out
}

/// One step of a vector of searches; returns the mask of those that were running and are now over.
#[target_feature(enable = "sse4.1")]
#[inline]
fn step(x: &mut Group, k: &Consts, stack: &mut Stack, forbid: &Forbid) -> __m128i {
    let bit = _mm_and_si128(x.f, _mm_sub_epi32(k.zero, x.f));
    let rest = _mm_xor_si128(x.f, bit);
    let nc = _mm_or_si128(x.c, bit);
    let nl = _mm_slli_epi32::<1>(_mm_or_si128(x.l, bit));
    let nr = _mm_srli_epi32::<1>(_mm_or_si128(x.r, bit));
    // Each search's current level: its row in the stack and in the table of forbidden squares.
    let here = index::<true>(_mm_add_epi32(x.stack_at, _mm_and_si128(x.v, k.levels)));
    // SAFETY: `index` is below SEARCHES * LEVELS, the table's length; each load is 8 bytes.
    let pair = |search: usize| unsafe {
        _mm_loadl_epi64((forbid.as_ptr() as *const u64).add(here[search] as usize) as *const __m128i)
    };
    let low = _mm_castsi128_ps(_mm_unpacklo_epi64(pair(0), pair(1)));
    let high = _mm_castsi128_ps(_mm_unpacklo_epi64(pair(2), pair(3)));
    // The pairs' first halves, then their second halves, searches in order.
    let below = _mm_castps_si128(_mm_shuffle_ps::<0b10_00_10_00>(low, high));
    let below2 = _mm_castps_si128(_mm_shuffle_ps::<0b11_01_11_01>(low, high));
    let taken = _mm_or_si128(_mm_or_si128(nc, nl), _mm_or_si128(nr, below));
    let nf = _mm_andnot_si128(taken, k.full);
    let on_tail = _mm_cmpeq_epi32(x.v, x.tail);
    // The two rows below the tail level (see `last_two`): `g` is the last row's free squares.
    let last = _mm_or_si128(
        _mm_or_si128(nc, _mm_slli_epi32::<1>(nl)),
        _mm_or_si128(_mm_srli_epi32::<1>(nr), below2),
    );
    let g = _mm_andnot_si128(last, k.full);
    let b1 = _mm_and_si128(nf, _mm_sub_epi32(k.zero, nf));
    let b2 = _mm_xor_si128(nf, b1);
    let (z1, z2) = (_mm_cmpeq_epi32(b1, k.zero), _mm_cmpeq_epi32(b2, k.zero));
    // Both rows' squares lie on the two columns left; when a completion exists, `nf | g` holds both,
    // and they must not be neighbours. A square of `nf` then completes when `g` has the other column.
    let both = _mm_or_si128(nf, g);
    let apart = _mm_cmpeq_epi32(_mm_and_si128(both, _mm_srli_epi32::<1>(both)), k.zero);
    let fits = |b: __m128i, z: __m128i| {
        let stuck = _mm_cmpeq_epi32(_mm_andnot_si128(b, g), k.zero);
        _mm_andnot_si128(_mm_or_si128(z, stuck), apart)
    };
    // Minus the completions, and minus the queens placed on the two rows.
    let leaves = _mm_add_epi32(fits(b1, z1), fits(b2, z2));
    let row = _mm_add_epi32(_mm_xor_si128(z1, k.ones), _mm_xor_si128(z2, k.ones));
    x.found = _mm_add_epi32(x.found, _mm_and_si128(leaves, on_tail));
    let tail_nodes = _mm_and_si128(_mm_add_epi32(row, leaves), on_tail);
    x.placed = _mm_add_epi32(x.placed, _mm_add_epi32(tail_nodes, x.running));
    // Where each search goes next: one level down, or the deepest level with squares left.
    let descend = _mm_andnot_si128(
        _mm_or_si128(on_tail, _mm_cmpeq_epi32(nf, k.zero)),
        x.running,
    );
    let level = power_of_two(x.v);
    let spent = _mm_and_si128(_mm_cmpeq_epi32(rest, k.zero), level);
    x.m = _mm_or_si128(
        _mm_andnot_si128(spent, x.m),
        _mm_and_si128(descend, _mm_slli_epi32::<1>(level)),
    );
    save(stack, &here, [x.c, x.l, x.r, rest]);
    let back = _mm_and_si128(highest(x.m), k.levels);
    let [bc, bl, br, bf] = restore(stack, _mm_add_epi32(x.stack_at, back));
    x.c = _mm_blendv_epi8(bc, nc, descend);
    x.l = _mm_blendv_epi8(bl, nl, descend);
    x.r = _mm_blendv_epi8(br, nr, descend);
    x.f = _mm_blendv_epi8(bf, nf, descend);
    x.v = _mm_blendv_epi8(back, _mm_add_epi32(x.v, k.one), descend);
    _mm_and_si128(_mm_cmpeq_epi32(x.m, k.zero), x.running)
}

/// `1 << v` for each lane's `v` of 0 to 31 (SSE4.1 has no per-lane shift): `v + 127` in a float's
/// exponent field is the float `2^v`, converted back to an integer. 2^31 is out of the conversion's
/// range, and comes back as its "integer indefinite", 0x8000_0000: `1 << 31` too.
#[target_feature(enable = "sse4.1")]
fn power_of_two(v: __m128i) -> __m128i {
    let exponent = _mm_slli_epi32::<23>(_mm_add_epi32(v, _mm_set1_epi32(127)));
    _mm_cvttps_epi32(_mm_castsi128_ps(exponent))
}

/// The index of the highest set bit of each lane (below 2^31); garbage for 0.
#[target_feature(enable = "sse4.1")]
fn highest(m: __m128i) -> __m128i {
    // Converted to a float, the exponent is the answer, unless rounding carries into the next power of
    // two: that needs the 24 bits below the top all set. So keep only the set bits whose upper
    // neighbour is clear (the top among them): no two of those are adjacent, and the top one stays.
    let tops = _mm_andnot_si128(_mm_srli_epi32::<1>(m), m);
    let bits = _mm_castps_si128(_mm_cvtepi32_ps(tops));
    _mm_sub_epi32(_mm_srli_epi32::<23>(bits), _mm_set1_epi32(127))
}

/// Writes each search's `[c, l, r, f]` to its stack row `at`.
#[target_feature(enable = "sse4.1")]
fn save(stack: &mut Stack, at: &[u32; WIDTH], [c, l, r, f]: [__m128i; 4]) {
    let cl_lo = _mm_unpacklo_epi32(c, l);
    let cl_hi = _mm_unpackhi_epi32(c, l);
    let rf_lo = _mm_unpacklo_epi32(r, f);
    let rf_hi = _mm_unpackhi_epi32(r, f);
    let rows = [
        _mm_unpacklo_epi64(cl_lo, rf_lo),
        _mm_unpackhi_epi64(cl_lo, rf_lo),
        _mm_unpacklo_epi64(cl_hi, rf_hi),
        _mm_unpackhi_epi64(cl_hi, rf_hi),
    ];
    for (search, row) in rows.into_iter().enumerate() {
        // SAFETY: `index` is below SEARCHES * LEVELS, the stack's length; the store is unaligned.
        unsafe {
            _mm_storeu_si128(
                stack.as_mut_ptr().add(at[search] as usize) as *mut __m128i,
                row,
            )
        };
    }
}

/// Reads each search's `[c, l, r, f]` from its stack row `at`.
#[target_feature(enable = "sse4.1")]
fn restore(stack: &Stack, at: __m128i) -> [__m128i; 4] {
    let at = index::<false>(at);
    // SAFETY: as in `save`.
    let row = |search: usize| unsafe {
        _mm_loadu_si128(stack.as_ptr().add(at[search] as usize) as *const __m128i)
    };
    let (y0, y1, y2, y3) = (row(0), row(1), row(2), row(3));
    let t0 = _mm_unpacklo_epi32(y0, y1);
    let t1 = _mm_unpackhi_epi32(y0, y1);
    let t2 = _mm_unpacklo_epi32(y2, y3);
    let t3 = _mm_unpackhi_epi32(y2, y3);
    [
        _mm_unpacklo_epi64(t0, t2),
        _mm_unpackhi_epi64(t0, t2),
        _mm_unpacklo_epi64(t1, t3),
        _mm_unpackhi_epi64(t1, t3),
    ]
}

/// The lanes of a vector of stack rows, checked to lie inside the stack (and the table of forbidden
/// squares, as long). With `MEMORY` they go through memory (`black_box`), as in `kernel/avx2.rs`.
#[target_feature(enable = "sse4.1")]
fn index<const MEMORY: bool>(at: __m128i) -> [u32; WIDTH] {
    let mut rows = elements(at);
    if MEMORY {
        std::hint::black_box(&mut rows);
    }
    rows.map(|row| row % (SEARCHES * LEVELS) as u32)
}

/// The lanes of a vector.
#[target_feature(enable = "sse4.1")]
fn elements(x: __m128i) -> [u32; WIDTH] {
    let mut a = [0u32; WIDTH];
    // SAFETY: `a` is 16 bytes; the store is unaligned.
    unsafe { _mm_storeu_si128(a.as_mut_ptr() as *mut __m128i, x) };
    a
}

/// A vector of the lanes.
#[target_feature(enable = "sse4.1")]
fn vector(a: &[u32; WIDTH]) -> __m128i {
    // SAFETY: `a` is 16 bytes; the load is unaligned.
    unsafe { _mm_loadu_si128(a.as_ptr() as *const __m128i) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this CPU runs the kernel; on CI (x86-64 CPUs since 2017) a missing one is a failure.
    fn here() -> bool {
        if super::super::Variant::Sse41.supported() {
            return true;
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "CI machine without SSE4.1"
        );
        eprintln!("skipped: this CPU has no SSE4.1");
        false
    }

    /// The float tricks against the integer operations they stand for: `1 << v` for every level, and the
    /// highest bit of the masks that would round up if the conversion kept every bit (all ones below the
    /// top, and the top alone, for every top below bit 31), and of a spread of others.
    #[test]
    fn the_float_tricks_are_exact() {
        if !here() {
            return;
        }
        for v in (0..32u32).collect::<Vec<_>>().chunks(WIDTH) {
            let lanes: [u32; WIDTH] = v.try_into().unwrap();
            // SAFETY: the CPU has the features (checked above).
            let got = unsafe { elements(power_of_two(vector(&lanes))) };
            assert_eq!(got, lanes.map(|v| 1u32 << v));
        }
        let masks = super::super::feed::level_masks();
        for chunk in masks.chunks(WIDTH) {
            let mut lanes = [1u32; WIDTH];
            lanes[..chunk.len()].copy_from_slice(chunk);
            // SAFETY: as above.
            let got = unsafe { elements(highest(vector(&lanes))) };
            for (m, h) in lanes.iter().zip(got) {
                assert_eq!(h, 31 - m.leading_zeros(), "mask {m:#x}");
            }
        }
    }
}
