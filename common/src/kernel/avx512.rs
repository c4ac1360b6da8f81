//! The batch kernel on AVX-512: sixteen searches stepped together, one per 32-bit element of a 512-bit vector.
//!
//! The same search as the scalar lanes and `kernel/avx2.rs` (each step places one queen; the level mask
//! says where a search continues; the last two rows are settled by mask tests), with each search's current
//! level held in vector registers: `c`, `l`, `r` (the level's masks) and `f` (its squares left). What
//! AVX-512 adds over the AVX2 kernel: per-search conditions live in mask registers (`__mmask16`), so that
//! counters are bumped with masked adds and registers chosen with masked blends; the deepest level with
//! squares left is a `vplzcntd` (AVX-512CD) instead of a float conversion; three-way logic is one
//! `vpternlogd`. A step saves the level it leaves on the search's stack and, unless it descends, reloads
//! the level it continues at, sixteen 16-byte rows moved with one 4x16 transpose each way; the forbidden
//! squares of the two rows below come from a table of the pairs of them, one 64-bit load per search
//! (two gathers per step did before: 0.380 s against 0.361 s at N = 16 on a Zen 4).

use std::arch::x86_64::*;

use super::feed::{self, Kernel, State, LEVELS};
use super::{Ready, Totals, Unit};

/// Searches in flight: one per 32-bit element of a 512-bit vector. (Two vectors stepped in turn, which
/// the 32 vector registers of AVX-512 would hold, measured slower at N = 16 on a Zen 4: 0.52-0.59 s
/// against 0.42-0.46 s for one, beside AVX2's 0.47-0.50 s, wall seconds, alternating.)
const SEARCHES: usize = 16;
/// Per search and level: c, l, r and the squares left, saved when the search leaves the level.
type Stack = [[u32; 4]; SEARCHES * LEVELS];
/// Per search, its table of forbidden squares ([`feed::pairs`]).
type Forbid = [[u64; LEVELS]; SEARCHES];
/// Steps between two flushes of the 32-bit counters: a step adds at most 5 nodes and 2 completions to a
/// search, so they cannot overflow.
const FLUSH: u32 = 1 << 16;

/// `vpternlogd` truth tables, named after what they compute from `(a, b, c)`.
/// `!(a | b | c)`.
const NOR3: i32 = 0x01;
/// `a | b | c`.
const OR3: i32 = 0xfe;

/// The kernel's own memory: the searches' stacks and tables.
struct Avx512 {
    stack: Box<Stack>,
    forbid: Box<Forbid>,
}

impl Kernel<SEARCHES> for Avx512 {
    fn start(&mut self, lane: usize, ready: &Ready) {
        feed::pairs(&ready.setup, &mut self.forbid[lane]);
    }

    fn steps(
        &mut self,
        state: &mut State<SEARCHES>,
        full: u32,
    ) -> ([u32; SEARCHES], [u32; SEARCHES]) {
        // SAFETY: an `Avx512` is only made by `run`, whose caller guarantees the CPU's features.
        unsafe { steps(state, &mut self.stack, &self.forbid, full) }
    }
}

/// Searches every unit (all of the same board size) and sums what they produced.
///
/// # Safety
///
/// The CPU must support AVX-512 F, BW, VL, DQ and CD, BMI1, BMI2, POPCNT and LZCNT
/// ([`super::Variant::Avx512`]`.supported()`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
pub unsafe fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut kernel = Avx512 {
        stack: Box::new([[0; 4]; SEARCHES * LEVELS]),
        forbid: Box::new([[0; LEVELS]; SEARCHES]),
    };
    feed::drive(&mut kernel, units)
}

/// Constants of the inner loop.
struct Consts {
    zero: __m512i,
    one: __m512i,
    /// The largest level, as a mask.
    levels: __m512i,
    full: __m512i,
    /// The even and the odd elements of two vectors, in order.
    even: __m512i,
    odd: __m512i,
}

/// The searches in the inner loop, one per element.
struct Group {
    c: __m512i,
    l: __m512i,
    r: __m512i,
    f: __m512i,
    v: __m512i,
    m: __m512i,
    tail: __m512i,
    /// The searches that were running when the inner loop started (and still are: it stops after the
    /// step that ends one).
    running: __mmask16,
    /// The completions found over the inner loop, and the queens placed on the last two rows that are
    /// not completions (each search also places one queen per step, and one per completion).
    found: __m512i,
    rows: __m512i,
    /// Each search's first row in the stack and in the table of forbidden squares.
    stack_at: __m512i,
}

/// Steps the searches until one of those that were running is over, or [`FLUSH`] times. Returns each
/// search's completions and nodes over these steps.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
fn steps(
    state: &mut State<SEARCHES>,
    stack: &mut Stack,
    forbid: &Forbid,
    full: u32,
) -> ([u32; SEARCHES], [u32; SEARCHES]) {
    let consts = Consts {
        zero: _mm512_setzero_si512(),
        one: _mm512_set1_epi32(1),
        levels: _mm512_set1_epi32(LEVELS as i32 - 1),
        full: _mm512_set1_epi32(full as i32),
        even: _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
        odd: _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31),
    };
    let search = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let levels = vector(&state.m);
    let mut group = Group {
        c: vector(&state.c),
        l: vector(&state.l),
        r: vector(&state.r),
        f: vector(&state.f),
        v: vector(&state.v),
        m: levels,
        tail: vector(&state.tail),
        running: _mm512_test_epi32_mask(levels, levels),
        found: consts.zero,
        rows: consts.zero,
        stack_at: _mm512_mullo_epi32(search, _mm512_set1_epi32(LEVELS as i32)),
    };
    let mut taken = 0;
    while taken < FLUSH {
        taken += 1;
        if step(&mut group, &consts, stack, forbid) != 0 {
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
    // Nodes: a queen per step of a running search, then the rows and completions of its tail steps.
    let steps = _mm512_maskz_mov_epi32(group.running, _mm512_set1_epi32(taken as i32));
    let placed = _mm512_add_epi32(_mm512_add_epi32(steps, group.rows), group.found);
    (elements(group.found), elements(placed))
}

/// One step of a vector of searches; returns the mask of those that were running and are now over.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
#[inline]
fn step(group: &mut Group, consts: &Consts, stack: &mut Stack, forbid: &Forbid) -> __mmask16 {
    let bit = _mm512_and_si512(group.f, _mm512_sub_epi32(consts.zero, group.f));
    let rest = _mm512_xor_si512(group.f, bit);
    let next_c = _mm512_or_si512(group.c, bit);
    let next_l = _mm512_slli_epi32::<1>(_mm512_or_si512(group.l, bit));
    let next_r = _mm512_srli_epi32::<1>(_mm512_or_si512(group.r, bit));
    // Each search's current level: its row in the stack and in the table of forbidden squares.
    let here = _mm512_add_epi32(group.stack_at, _mm512_and_si512(group.v, consts.levels));
    let rows = index(here);
    // SAFETY: `index` is below SEARCHES * LEVELS, the table's length.
    let pair = |search: usize| unsafe {
        *(forbid.as_ptr() as *const u64).add(rows[search] as usize) as i64
    };
    // Searches 0 to 7 in `low`, 8 to 15 in `high`, a pair each; then the pairs' halves apart.
    let mut low = consts.zero;
    let mut high = consts.zero;
    for search in 0..8 {
        low = _mm512_mask_set1_epi64(low, 1 << search, pair(search));
        high = _mm512_mask_set1_epi64(high, 1 << search, pair(8 + search));
    }
    let below = _mm512_permutex2var_epi32(low, consts.even, high);
    let below2 = _mm512_permutex2var_epi32(low, consts.odd, high);
    // The next level's free squares: !(c | l | r | below) within the board.
    let next_f = _mm512_and_si512(
        _mm512_ternarylogic_epi32::<NOR3>(next_c, next_l, _mm512_or_si512(next_r, below)),
        consts.full,
    );
    let on_tail = _mm512_cmpeq_epi32_mask(group.v, group.tail);
    // The two rows below the tail level (see `last_two`): `last_free` is the last row's free squares.
    let last_taken = _mm512_ternarylogic_epi32::<OR3>(
        next_c,
        _mm512_slli_epi32::<1>(next_l),
        _mm512_or_si512(_mm512_srli_epi32::<1>(next_r), below2),
    );
    let last_free = _mm512_andnot_si512(last_taken, consts.full);
    let first_bit = _mm512_and_si512(next_f, _mm512_sub_epi32(consts.zero, next_f));
    let second_bit = _mm512_xor_si512(next_f, first_bit);
    let has_first = _mm512_test_epi32_mask(first_bit, first_bit);
    let has_second = _mm512_test_epi32_mask(second_bit, second_bit);
    // Both rows' squares lie on the two columns left; when a completion exists, `next_f | last_free`
    // holds both, and they must not be neighbours. A square of `next_f` then completes when `last_free`
    // has the other column.
    let both = _mm512_or_si512(next_f, last_free);
    let apart = _mm512_testn_epi32_mask(both, _mm512_srli_epi32::<1>(both));
    let fits = |square: __m512i, present: __mmask16| {
        let other = _mm512_andnot_si512(square, last_free);
        _mm512_mask_test_epi32_mask(present & apart & on_tail, other, other)
    };
    let (fits_first, fits_second) = (fits(first_bit, has_first), fits(second_bit, has_second));
    // Completions, and the queens placed on the two rows: one per square of `next_f` (and one per
    // completion, counted from `found` in `steps`).
    group.found = _mm512_mask_add_epi32(group.found, fits_first, group.found, consts.one);
    group.found = _mm512_mask_add_epi32(group.found, fits_second, group.found, consts.one);
    let rows = _mm512_mask_add_epi32(group.rows, has_first & on_tail, group.rows, consts.one);
    group.rows = _mm512_mask_add_epi32(rows, has_second & on_tail, rows, consts.one);
    // Where each search goes next: one level down, or the deepest level with squares left.
    let descend = _mm512_mask_test_epi32_mask(group.running & !on_tail, next_f, next_f);
    let level = _mm512_sllv_epi32(consts.one, group.v);
    let spent = _mm512_testn_epi32_mask(rest, rest);
    let kept = _mm512_mask_andnot_epi32(group.m, spent, level, group.m);
    group.m = _mm512_mask_or_epi32(kept, descend, kept, _mm512_slli_epi32::<1>(level));
    // `save` reads the rows out again: handing it `rows` measured slower (0.436 s against 0.361 s at
    // N = 16 on a Zen 4; the compiler then keeps them apart from the stores).
    save(stack, here, [group.c, group.l, group.r, rest]);
    // The deepest level with squares left: 31 - lzcnt (garbage, but a level, for an empty mask).
    let back = _mm512_and_si512(
        _mm512_sub_epi32(consts.levels, _mm512_lzcnt_epi32(group.m)),
        consts.levels,
    );
    let [back_c, back_l, back_r, back_f] = restore(stack, _mm512_add_epi32(group.stack_at, back));
    group.c = _mm512_mask_blend_epi32(descend, back_c, next_c);
    group.l = _mm512_mask_blend_epi32(descend, back_l, next_l);
    group.r = _mm512_mask_blend_epi32(descend, back_r, next_r);
    group.f = _mm512_mask_blend_epi32(descend, back_f, next_f);
    group.v = _mm512_mask_blend_epi32(descend, back, _mm512_add_epi32(group.v, consts.one));
    _mm512_mask_testn_epi32_mask(group.running, group.m, group.m)
}

/// Writes each search's `[c, l, r, f]` to its stack row `at` (in rows of four).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
fn save(stack: &mut Stack, at: __m512i, [c, l, r, f]: [__m512i; 4]) {
    let at = index(at);
    let cl_lo = _mm512_unpacklo_epi32(c, l);
    let cl_hi = _mm512_unpackhi_epi32(c, l);
    let rf_lo = _mm512_unpacklo_epi32(r, f);
    let rf_hi = _mm512_unpackhi_epi32(r, f);
    // Row vector `k` holds, in its 128-bit part `q`, the row of search `4q + k`.
    let rows = [
        _mm512_unpacklo_epi64(cl_lo, rf_lo),
        _mm512_unpackhi_epi64(cl_lo, rf_lo),
        _mm512_unpacklo_epi64(cl_hi, rf_hi),
        _mm512_unpackhi_epi64(cl_hi, rf_hi),
    ];
    for (k, row) in rows.into_iter().enumerate() {
        let parts = [
            _mm512_castsi512_si128(row),
            _mm512_extracti32x4_epi32::<1>(row),
            _mm512_extracti32x4_epi32::<2>(row),
            _mm512_extracti32x4_epi32::<3>(row),
        ];
        for (q, part) in parts.into_iter().enumerate() {
            let search_row = at[4 * q + k] as usize;
            // SAFETY: `index` is below SEARCHES * LEVELS, the stack's length; the store is unaligned.
            unsafe { _mm_storeu_si128(stack.as_mut_ptr().add(search_row) as *mut __m128i, part) };
        }
    }
}

/// Reads each search's `[c, l, r, f]` from its stack row `at`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
fn restore(stack: &Stack, at: __m512i) -> [__m512i; 4] {
    let at = index(at);
    // SAFETY: as in `save`.
    let load = |search: usize| unsafe {
        _mm_loadu_si128(stack.as_ptr().add(at[search] as usize) as *const __m128i)
    };
    // Row vector `k` holds, in its 128-bit part `q`, the row of search `4q + k`.
    let row = |k: usize| {
        let low = _mm512_castsi128_si512(load(k));
        let low = _mm512_mask_broadcast_i32x4(low, 0x00f0, load(4 + k));
        let low = _mm512_mask_broadcast_i32x4(low, 0x0f00, load(8 + k));
        _mm512_mask_broadcast_i32x4(low, 0xf000, load(12 + k))
    };
    let (row0, row1, row2, row3) = (row(0), row(1), row(2), row(3));
    let cl01 = _mm512_unpacklo_epi32(row0, row1);
    let rf01 = _mm512_unpackhi_epi32(row0, row1);
    let cl23 = _mm512_unpacklo_epi32(row2, row3);
    let rf23 = _mm512_unpackhi_epi32(row2, row3);
    [
        _mm512_unpacklo_epi64(cl01, cl23),
        _mm512_unpackhi_epi64(cl01, cl23),
        _mm512_unpacklo_epi64(rf01, rf23),
        _mm512_unpackhi_epi64(rf01, rf23),
    ]
}

/// The elements of a vector of stack rows, checked to lie inside the stack (and the table of forbidden
/// squares, as long). They go through memory
/// (`black_box`): read back they cost a load each, where taking them out of the vector one by one (what
/// the compiler does otherwise) costs two operations each on the vector side, busy with the transposes
/// (0.380 s against 0.402 s at N = 16 on a Zen 4).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
fn index(at: __m512i) -> [u32; SEARCHES] {
    let mut rows = elements(at);
    std::hint::black_box(&mut rows);
    rows.map(|row| row % (SEARCHES * LEVELS) as u32)
}

/// The elements of a vector.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
fn elements(vector: __m512i) -> [u32; SEARCHES] {
    let mut array = [0u32; SEARCHES];
    // SAFETY: `array` is 64 bytes; the store is unaligned.
    unsafe { _mm512_storeu_si512(array.as_mut_ptr() as *mut __m512i, vector) };
    array
}

/// A vector of the elements.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,bmi1,bmi2,popcnt,lzcnt")]
fn vector(array: &[u32; SEARCHES]) -> __m512i {
    // SAFETY: `array` is 64 bytes; the load is unaligned.
    unsafe { _mm512_loadu_si512(array.as_ptr() as *const __m512i) }
}
