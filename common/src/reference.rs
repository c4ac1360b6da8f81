//! The published counts (OEIS A000170 total and A002562 unique solutions, N = 1..27), so that a benchmark
//! or a local count can say whether its answer is the known one.

/// `(total, unique)` for `n`, where published.
pub fn counts(n: u32) -> Option<(u128, u128)> {
    include_str!("../tests/data/solution-counts.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .find_map(|l| {
            let mut f = l.split('\t');
            let k: u32 = f.next()?.trim().parse().ok()?;
            (k == n).then_some(())?;
            Some((
                f.next()?.trim().parse().ok()?,
                f.next()?.trim().parse().ok()?,
            ))
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_is_read() {
        assert_eq!(super::counts(8), Some((92, 12)));
        assert_eq!(
            super::counts(27),
            Some((234907967154122528, 29363791967678199))
        );
        assert_eq!(super::counts(28), None);
    }
}
