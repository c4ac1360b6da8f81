//! The batch kernel on AVX2: eight searches stepped together, one per 32-bit element of a vector.
//!
//! The same search as the scalar lanes (each step places one queen; the level mask says where a search
//! continues; the last two rows are settled by mask tests), with each search's current level held in
//! vector registers: `c`, `l`, `r` (the level's masks) and `f` (its squares left to try). A step saves
//! the level it leaves on the search's stack and, unless it descends, reloads the level it continues at
//! (the same one when it has squares left, else the deepest that has), eight 16-byte rows moved with one
//! transpose each way.
//!
//! The forbidden squares of the two rows below the current level come, in the `TABLE` form (the `avx2`
//! variant), from a per-search table of the pairs of them by level: one 64-bit load per search, where two
//! gathers did before (0.470 s against 0.476 s at N = 16 on a Zen 4; gathers are slower still on AMD Zen
//! 1 and 2, which split them into many micro-operations). In the other (the `avx2-nogather` variant,
//! named when only it had no gathers), from registers: each stack row also holds the forbidden squares
//! below its level, written once when a search starts, and a step reads them back with the level it
//! moves to (descending or not) in the transpose it does anyway.

use std::arch::x86_64::*;

use super::feed::{self, Kernel, State, LEVELS};
use super::{Ready, Totals, Unit};

/// Searches in flight: one per 32-bit element of a 256-bit vector. (Two vectors stepped in turn measured
/// slower at N = 16, 0.65 s against 0.61 s: their registers no longer fit the sixteen vector registers.)
const SEARCHES: usize = 8;
/// Per search and level: c, l, r and the squares left, saved when the search leaves the level; then, in
/// the form without the table only, the forbidden squares of the two rows below the level (written when
/// the search starts).
type Stack = [[u32; 8]; SEARCHES * LEVELS];
/// Per search, its table of forbidden squares ([`feed::pairs`]; the `TABLE` form).
type Forbid = [[u64; LEVELS]; SEARCHES];
/// Steps between two flushes of the 32-bit counters: a step adds at most 5 nodes and 2 completions to a
/// search, so they cannot overflow.
const FLUSH: u32 = 1 << 16;

/// The kernel's own memory: the searches' stacks and tables, and (the form without the table) the
/// forbidden squares of the two rows below each search's current level.
struct Avx2<const TABLE: bool> {
    stack: Box<Stack>,
    forbid: Box<Forbid>,
    below: [[u32; SEARCHES]; 2],
}

impl<const TABLE: bool> Kernel<SEARCHES> for Avx2<TABLE> {
    fn start(&mut self, lane: usize, ready: &Ready) {
        let setup = &ready.setup;
        if TABLE {
            feed::pairs(setup, &mut self.forbid[lane]);
        } else {
            // Levels 0 to the tail (depth - 3): the rows below them are at most depth - 1.
            for level in 0..setup.depth - 2 {
                let row = &mut self.stack[lane * LEVELS + level];
                (row[4], row[5]) = (setup.forbid[level + 1], setup.forbid[level + 2]);
            }
            (self.below[0][lane], self.below[1][lane]) = (setup.forbid[1], setup.forbid[2]);
        }
    }

    fn steps(
        &mut self,
        state: &mut State<SEARCHES>,
        full: u32,
    ) -> ([u32; SEARCHES], [u32; SEARCHES]) {
        // SAFETY: an `Avx2` is only made by `run`, whose caller guarantees the CPU's features.
        unsafe { steps::<TABLE>(state, &mut self.below, &mut self.stack, &self.forbid, full) }
    }
}

/// Searches every unit (all of the same board size) and sums what they produced; `TABLE` picks the form
/// (see the module text).
///
/// # Safety
///
/// The CPU must support AVX2, BMI1, BMI2, POPCNT and LZCNT ([`super::Variant::Avx2`]`.supported()`).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
pub unsafe fn run<const TABLE: bool, I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut kernel = Avx2::<TABLE> {
        stack: Box::new([[0; 8]; SEARCHES * LEVELS]),
        forbid: Box::new([[0; LEVELS]; SEARCHES]),
        below: [[0; SEARCHES]; 2],
    };
    feed::drive(&mut kernel, units)
}

/// Constants of the inner loop.
struct Consts {
    zero: __m256i,
    ones: __m256i,
    one: __m256i,
    /// The largest level, as a mask.
    levels: __m256i,
    full: __m256i,
}

/// The searches in the inner loop, one per element.
struct Group {
    c: __m256i,
    l: __m256i,
    r: __m256i,
    f: __m256i,
    v: __m256i,
    m: __m256i,
    tail: __m256i,
    /// The searches that were running when the inner loop started (and still are: it stops after the
    /// step that ends one).
    running: __m256i,
    /// Minus the completions found, and minus the nodes, over the inner loop.
    found: __m256i,
    placed: __m256i,
    /// Each search's first row in the stack and in the table of forbidden squares.
    stack_at: __m256i,
    /// The forbidden squares of the two rows below (the form without the table).
    b1: __m256i,
    b2: __m256i,
}

/// Steps the searches until one of those that were running is over, or [`FLUSH`] times. Returns each
/// search's completions and nodes over these steps.
///
/// Not inlined: the loop in a function of its own measured steadier (the form without the table, inlined
/// into the driver, took 0.59 s at N = 16 on a Zen 4, against 0.53 s so).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[inline(never)]
fn steps<const TABLE: bool>(
    s: &mut State<SEARCHES>,
    below: &mut [[u32; SEARCHES]; 2],
    stack: &mut Stack,
    forbid: &Forbid,
    full: u32,
) -> ([u32; SEARCHES], [u32; SEARCHES]) {
    let k = Consts {
        zero: _mm256_setzero_si256(),
        ones: _mm256_set1_epi32(-1),
        one: _mm256_set1_epi32(1),
        levels: _mm256_set1_epi32(LEVELS as i32 - 1),
        full: _mm256_set1_epi32(full as i32),
    };
    let search = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let m = vector(&s.m);
    let mut x = Group {
        c: vector(&s.c),
        l: vector(&s.l),
        r: vector(&s.r),
        f: vector(&s.f),
        v: vector(&s.v),
        m,
        tail: vector(&s.tail),
        running: _mm256_xor_si256(_mm256_cmpeq_epi32(m, k.zero), k.ones),
        found: k.zero,
        placed: k.zero,
        stack_at: _mm256_mullo_epi32(search, _mm256_set1_epi32(LEVELS as i32)),
        b1: vector(&below[0]),
        b2: vector(&below[1]),
    };
    for _ in 0..FLUSH {
        if _mm256_movemask_epi8(step::<TABLE>(&mut x, &k, stack, forbid)) != 0 {
            break;
        }
    }
    (s.c, s.l, s.r, s.f) = (elements(x.c), elements(x.l), elements(x.r), elements(x.f));
    *below = [elements(x.b1), elements(x.b2)];
    (s.v, s.m) = (elements(x.v), elements(x.m));
    let negate = |x: __m256i| elements(_mm256_sub_epi32(k.zero, x));
    (negate(x.found), negate(x.placed))
}

/// One step of a vector of searches; returns the mask of those that were running and are now over.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[inline]
fn step<const TABLE: bool>(
    x: &mut Group,
    k: &Consts,
    stack: &mut Stack,
    forbid: &Forbid,
) -> __m256i {
    let bit = _mm256_and_si256(x.f, _mm256_sub_epi32(k.zero, x.f));
    let rest = _mm256_xor_si256(x.f, bit);
    let nc = _mm256_or_si256(x.c, bit);
    let nl = _mm256_slli_epi32::<1>(_mm256_or_si256(x.l, bit));
    let nr = _mm256_srli_epi32::<1>(_mm256_or_si256(x.r, bit));
    // Each search's current level: its row in the stack and in the table of forbidden squares.
    let here = index::<true>(_mm256_add_epi32(
        x.stack_at,
        _mm256_and_si256(x.v, k.levels),
    ));
    let (below, below2) = if TABLE {
        // SAFETY: `index` is below SEARCHES * LEVELS, the table's length; the load is 8 bytes.
        let pair = |j: usize| unsafe {
            _mm_loadl_epi64((forbid.as_ptr() as *const u64).add(here[j] as usize) as *const __m128i)
        };
        // Searches 0, 1, 4, 5 in `low` and 2, 3, 6, 7 in `high`, so that taking the first (second) half
        // of each pair, within each 128-bit part, puts the searches in order.
        let two = |a: usize| _mm_unpacklo_epi64(pair(a), pair(a + 1));
        let low = _mm256_castsi256_ps(_mm256_set_m128i(two(4), two(0)));
        let high = _mm256_castsi256_ps(_mm256_set_m128i(two(6), two(2)));
        (
            _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(low, high)),
            _mm256_castps_si256(_mm256_shuffle_ps::<0b11_01_11_01>(low, high)),
        )
    } else {
        (x.b1, x.b2)
    };
    let taken = _mm256_or_si256(_mm256_or_si256(nc, nl), _mm256_or_si256(nr, below));
    let nf = _mm256_andnot_si256(taken, k.full);
    let on_tail = _mm256_cmpeq_epi32(x.v, x.tail);
    // The two rows below the tail level (see `last_two`), with masks of -1 (true) and 0.
    let last = _mm256_or_si256(
        _mm256_or_si256(nc, _mm256_slli_epi32::<1>(nl)),
        _mm256_or_si256(_mm256_srli_epi32::<1>(nr), below2),
    );
    let g = _mm256_andnot_si256(last, k.full);
    let b1 = _mm256_and_si256(nf, _mm256_sub_epi32(k.zero, nf));
    let b2 = _mm256_xor_si256(nf, b1);
    let (z1, z2) = (
        _mm256_cmpeq_epi32(b1, k.zero),
        _mm256_cmpeq_epi32(b2, k.zero),
    );
    // Both rows' squares lie on the two columns left; when a completion exists, `nf | g` holds both,
    // and they must not be neighbours. A square of `nf` then completes when `g` has the other column.
    let both = _mm256_or_si256(nf, g);
    let apart = _mm256_cmpeq_epi32(_mm256_and_si256(both, _mm256_srli_epi32::<1>(both)), k.zero);
    let fits = |b: __m256i, z: __m256i| {
        let stuck = _mm256_cmpeq_epi32(_mm256_andnot_si256(b, g), k.zero);
        _mm256_andnot_si256(_mm256_or_si256(z, stuck), apart)
    };
    // Minus the completions, and minus the queens placed on the two rows.
    let leaves = _mm256_add_epi32(fits(b1, z1), fits(b2, z2));
    let row = _mm256_add_epi32(_mm256_xor_si256(z1, k.ones), _mm256_xor_si256(z2, k.ones));
    x.found = _mm256_add_epi32(x.found, _mm256_and_si256(leaves, on_tail));
    let tail_nodes = _mm256_and_si256(_mm256_add_epi32(row, leaves), on_tail);
    x.placed = _mm256_add_epi32(x.placed, _mm256_add_epi32(tail_nodes, x.running));
    // Where each search goes next: one level down, or the deepest level with squares left.
    let descend = _mm256_andnot_si256(
        _mm256_or_si256(on_tail, _mm256_cmpeq_epi32(nf, k.zero)),
        x.running,
    );
    let level = _mm256_sllv_epi32(k.one, x.v);
    let spent = _mm256_and_si256(_mm256_cmpeq_epi32(rest, k.zero), level);
    x.m = _mm256_or_si256(
        _mm256_andnot_si256(spent, x.m),
        _mm256_and_si256(descend, _mm256_slli_epi32::<1>(level)),
    );
    save(stack, &here, [x.c, x.l, x.r, rest]);
    let back = _mm256_and_si256(highest(x.m), k.levels);
    let next = _mm256_blendv_epi8(back, _mm256_add_epi32(x.v, k.one), descend);
    // The state of the level a search goes back to; without the table, the row of the level it goes to
    // (back, or one down: its state is then unused) for the forbidden squares below that level too.
    let row = _mm256_add_epi32(x.stack_at, if TABLE { back } else { next });
    let [bc, bl, br, bf] = restore::<0>(stack, row);
    if !TABLE {
        let [b1, b2, _, _] = restore::<4>(stack, row);
        (x.b1, x.b2) = (b1, b2);
    }
    x.c = _mm256_blendv_epi8(bc, nc, descend);
    x.l = _mm256_blendv_epi8(bl, nl, descend);
    x.r = _mm256_blendv_epi8(br, nr, descend);
    x.f = _mm256_blendv_epi8(bf, nf, descend);
    x.v = next;
    _mm256_and_si256(_mm256_cmpeq_epi32(x.m, k.zero), x.running)
}

/// The index of the highest set bit of each element (below 2^31); garbage for 0.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
fn highest(m: __m256i) -> __m256i {
    // Converted to a float, the exponent is the answer, unless rounding carries into the next power of
    // two: that needs the 24 bits below the top all set. So keep only the set bits whose upper
    // neighbour is clear (the top among them): no two of those are adjacent, and the top one stays.
    let tops = _mm256_andnot_si256(_mm256_srli_epi32::<1>(m), m);
    let bits = _mm256_castps_si256(_mm256_cvtepi32_ps(tops));
    _mm256_sub_epi32(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(127))
}

/// Writes each search's `[c, l, r, f]` to its stack row `at` (in rows of four).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
fn save(stack: &mut Stack, at: &[u32; SEARCHES], [c, l, r, f]: [__m256i; 4]) {
    let cl_lo = _mm256_unpacklo_epi32(c, l);
    let cl_hi = _mm256_unpackhi_epi32(c, l);
    let rf_lo = _mm256_unpacklo_epi32(r, f);
    let rf_hi = _mm256_unpackhi_epi32(r, f);
    let rows = [
        _mm256_unpacklo_epi64(cl_lo, rf_lo),
        _mm256_unpackhi_epi64(cl_lo, rf_lo),
        _mm256_unpacklo_epi64(cl_hi, rf_hi),
        _mm256_unpackhi_epi64(cl_hi, rf_hi),
    ];
    for (k, row) in rows.into_iter().enumerate() {
        let (a, b) = (at[k] as usize, at[k + 4] as usize);
        let (lo, hi) = (
            _mm256_castsi256_si128(row),
            _mm256_extracti128_si256::<1>(row),
        );
        // SAFETY: `index` is below SEARCHES * LEVELS, the stack's length; the stores are unaligned.
        unsafe {
            _mm_storeu_si128(stack.as_mut_ptr().add(a) as *mut __m128i, lo);
            _mm_storeu_si128(stack.as_mut_ptr().add(b) as *mut __m128i, hi);
        }
    }
}

/// Reads four elements of each search's stack row `at`, from element `FROM` (0: `[c, l, r, f]`; 4: the
/// forbidden squares below the level, then two unused).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
fn restore<const FROM: usize>(stack: &Stack, at: __m256i) -> [__m256i; 4] {
    let at = index::<false>(at);
    // SAFETY: as in `save`; `FROM + 4` is at most the row's 8 elements.
    let row = |k: usize| unsafe {
        let base = stack.as_ptr() as *const u32;
        let at = |j: usize| base.add(at[j] as usize * 8 + FROM) as *const __m128i;
        _mm256_set_m128i(_mm_loadu_si128(at(k + 4)), _mm_loadu_si128(at(k)))
    };
    let (y0, y1, y2, y3) = (row(0), row(1), row(2), row(3));
    let t0 = _mm256_unpacklo_epi32(y0, y1);
    let t1 = _mm256_unpackhi_epi32(y0, y1);
    let t2 = _mm256_unpacklo_epi32(y2, y3);
    let t3 = _mm256_unpackhi_epi32(y2, y3);
    [
        _mm256_unpacklo_epi64(t0, t2),
        _mm256_unpackhi_epi64(t0, t2),
        _mm256_unpacklo_epi64(t1, t3),
        _mm256_unpackhi_epi64(t1, t3),
    ]
}

/// The elements of a vector of stack rows, checked to lie inside the stack (and the table of forbidden
/// squares, as long). With `MEMORY`, they go
/// through memory (`black_box`): a load each instead of two operations on the vector side, but a
/// store-to-load round trip. `save` takes them so (measured on the nogather form: 0.53 to 0.54 s against
/// 0.56 s at N = 16 on a Zen 4), and so does the table's load, which shares them; `restore`, whose rows
/// lie on the chain from one step to the next, does not (0.611 s against 0.477 s, the form with gathers
/// then, same machine).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
fn index<const MEMORY: bool>(at: __m256i) -> [u32; SEARCHES] {
    let mut rows = elements(at);
    if MEMORY {
        std::hint::black_box(&mut rows);
    }
    rows.map(|x| x % (SEARCHES * LEVELS) as u32)
}

/// The elements of a vector.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
fn elements(x: __m256i) -> [u32; SEARCHES] {
    let mut a = [0u32; SEARCHES];
    // SAFETY: `a` is 32 bytes; the store is unaligned.
    unsafe { _mm256_storeu_si256(a.as_mut_ptr() as *mut __m256i, x) };
    a
}

/// A vector of the elements.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
fn vector(a: &[u32; SEARCHES]) -> __m256i {
    let [a0, a1, a2, a3, a4, a5, a6, a7] = a.map(|x| x as i32);
    _mm256_setr_epi32(a0, a1, a2, a3, a4, a5, a6, a7)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The float trick against `leading_zeros`, on the masks that would round up if it kept every bit:
    /// all ones below the top, and the top alone, for every top below bit 31; and on a spread of others.
    #[test]
    fn highest_is_the_top_bit_of_every_level_mask() {
        if !super::super::Variant::Avx2.supported() {
            // Every CI machine has AVX2 (AMD Zen 1 to 5): there, a missing one is a failure, not a skip.
            assert!(std::env::var_os("CI").is_none(), "CI machine without AVX2");
            eprintln!("highest_is_the_top_bit_of_every_level_mask: skipped, this CPU has no AVX2");
            return;
        }
        let masks = super::super::feed::level_masks();
        for chunk in masks.chunks(SEARCHES) {
            let mut lanes = [1u32; SEARCHES];
            lanes[..chunk.len()].copy_from_slice(chunk);
            // SAFETY: the CPU has the features (checked above).
            let got = unsafe { elements(highest(vector(&lanes))) };
            for (m, h) in lanes.iter().zip(got) {
                assert_eq!(h, 31 - m.leading_zeros(), "mask {m:#x}");
            }
        }
    }
}
