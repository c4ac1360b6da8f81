//! The benchmark baseline: the classic recursive mirror bitmask search (first-row queen in the left half,
//! doubled; middle column once for odd N). Kept plain on purpose, so that BENCHMARKS.md can report the
//! production kernel's speed-up against it in the same session on the same machine.

/// Counts all solutions of the `n`-queens problem (1 <= n <= 32); returns `(total, nodes)`.
pub fn mirror_count(n: u8) -> (u64, u64) {
    assert!((1..=32).contains(&n), "baseline counts 1 <= n <= 32");
    let full = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
    let (mut total, mut nodes) = (0u64, 0u64);
    for c in 0..n.div_ceil(2) {
        let bit = 1u32 << c;
        let mut count = 0;
        nodes += 1;
        recurse(full, bit, bit << 1, bit >> 1, &mut count, &mut nodes);
        total += if n % 2 == 1 && c == n / 2 {
            count
        } else {
            2 * count
        };
    }
    (total, nodes)
}

fn recurse(full: u32, cols: u32, left: u32, right: u32, count: &mut u64, nodes: &mut u64) {
    if cols == full {
        *count += 1;
        return;
    }
    let mut free = !(cols | left | right) & full;
    while free != 0 {
        let bit = free & free.wrapping_neg();
        free ^= bit;
        *nodes += 1;
        recurse(
            full,
            cols | bit,
            (left | bit) << 1,
            (right | bit) >> 1,
            count,
            nodes,
        );
    }
}
