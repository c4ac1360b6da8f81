use nqueens_common::partition::ring;
// Generic search: fixed queens (cols per row, 255 = empty), order of rows, per-row forbid masks.
struct Spec { n: u8, fixed: [u8; 32], order: Vec<u8>, forbid: [u32; 32] }
fn search(s: &Spec, leaf: &mut dyn FnMut(&[u8; 32])) -> u64 {
    let n = s.n; let full = (1u32 << n) - 1;
    let (mut cols, mut d1, mut d2) = (0u32, 0u64, 0u64);
    for r in 0..n { let c = s.fixed[r as usize]; if c != 255 { cols |= 1 << c; d1 |= 1u64 << (r + c); d2 |= 1u64 << (c + n - 1 - r); } }
    let mut board = s.fixed;
    let mut nodes = 0u64;
    fn rec(s: &Spec, i: usize, cols: u32, d1: u64, d2: u64, board: &mut [u8; 32], nodes: &mut u64, full: u32, leaf: &mut dyn FnMut(&[u8; 32])) {
        if i == s.order.len() { leaf(board); return; }
        let r = s.order[i]; let n = s.n;
        let mut f = !(cols | (d1 >> r) as u32 | (d2 >> (n - 1 - r)) as u32 | s.forbid[r as usize]) & full;
        while f != 0 { let b = f & f.wrapping_neg(); f ^= b; *nodes += 1; let c = b.trailing_zeros() as u8;
            board[r as usize] = c;
            rec(s, i + 1, cols | b, d1 | (b as u64) << r, d2 | (b as u64) << (n - 1 - r), board, nodes, full, leaf); }
        board[r as usize] = 255;
    }
    rec(s, 0, cols, d1, d2, &mut board, &mut nodes, full, leaf);
    nodes
}
fn main() {
    let n: u8 = std::env::args().nth(1).unwrap().parse().unwrap();
    let scheme: u32 = std::env::args().nth(2).unwrap().parse().unwrap();
    let m = n - 1; let p = n as usize;
    // weight table over tuples in the search frame: t = (top, right, bottom, left) clockwise frames
    // top: (0,a) ; right: (a, m); bottom: (m, m-a); left: (m-a, 0) -- this is the ring frame rotated so north = top.
    let mut w = vec![0u8; p * p * p * p];
    for r in ring::rings(n) { let t = r.t; w[((t[0] as usize * p + t[1] as usize) * p + t[2] as usize) * p + t[3] as usize] = r.weight(); }
    // (north, east, south, west) index
    let (mut total, mut nodes) = (0u64, 0u64);
    if (5..=7).contains(&scheme) {
        for r in ring::rings(n) {
            let mut spec = Spec { n, fixed: [255; 32], order: vec![], forbid: [0; 32] };
            for (row, c) in r.board.queens() { spec.fixed[row as usize] = c; }
            let inner: Vec<u8> = (0..n).filter(|&x| spec.fixed[x as usize] == 255).collect();
            let freecount = |row: u8| { (0..n).filter(|&c| r.board.queens().all(|(qr, qc)| qc != c && qr.abs_diff(row) != qc.abs_diff(c))).count() };
            spec.order = match scheme {
                5 => { let mut o = inner.clone(); o.reverse(); o }
                6 => { let mut o = inner.clone(); o.sort_by_key(|&x| (freecount(x), x)); o }
                7 => { // greedy: start with most constrained, then repeatedly the most constrained among neighbours-of-chosen
                    let mut o: Vec<u8> = vec![]; let mut rest = inner.clone();
                    while !rest.is_empty() { let k = (0..rest.len()).min_by_key(|&i| { let x = rest[i]; let adj = o.iter().any(|&y| y.abs_diff(x) == 1) || spec.fixed.get((x as usize).wrapping_sub(1)).map_or(false, |&c| c != 255) || spec.fixed.get(x as usize + 1).map_or(false, |&c| c != 255); (if adj {0} else {1}, freecount(x), x) }).unwrap(); o.push(rest.remove(k)); } o }
                _ => inner };
            let wt = r.weight() as u64;
            let mut cnt = 0u64;
            nodes += search(&spec, &mut |_| cnt += 1);
            total += cnt * wt;
        }
        println!("n={n} scheme={scheme} total={total} nodes={nodes}");
        return;
    }
    for a0 in 0..=(m / 2) {
        let (n0, t0) = (nodes, total);
        let mut bottoms: Vec<Option<u8>> = vec![None];
        if scheme >= 2 { bottoms = (0..n).filter(|&c| c >= a0 && c <= m - a0).map(Some).collect(); }
        for sc in bottoms {
            let mut spec = Spec { n, fixed: [255; 32], order: vec![], forbid: [0; 32] };
            spec.fixed[0] = a0;
            if let Some(c) = sc { if c == a0 || (a0 == 0 && c == m) {continue;} if a0 != 0 && (c == m || c == 0) {continue;} spec.fixed[m as usize] = c; }
            for r in 0..n { if r < a0 || r > m - a0 { spec.forbid[r as usize] |= 1 | 1 << m; } }
            spec.forbid[m as usize] |= !(((1u32 << (m - 2 * a0 + 1)) - 1) << a0) & ((1u32<<n)-1);
            if a0 == 0 { if let Some(c) = sc { for r in (c + 1)..n { spec.forbid[r as usize] |= 1 << m; } } }
            let inner: Vec<u8> = (1..n).filter(|&r| spec.fixed[r as usize] == 255).collect();
            spec.order = match scheme { 3 => { let mut o = vec![]; let (mut lo, mut hi) = (0usize, inner.len()); let mut t = false; while lo < hi { if t { hi -= 1; o.push(inner[hi]); } else { o.push(inner[lo]); lo += 1; } t = !t; } o }
                4 => { let mut o = inner.clone(); o.reverse(); o }
                8 => { let mut o: Vec<u8> = inner.iter().copied().filter(|&r| r < a0).collect(); o.extend(inner.iter().rev().copied().filter(|&r| r >= a0)); o }
                9 => { let mut o: Vec<u8> = inner.iter().rev().copied().filter(|&r| r > m - a0).collect(); o.extend(inner.iter().copied().filter(|&r| r < a0)); o.extend(inner.iter().rev().copied().filter(|&r| r >= a0 && r <= m - a0)); o }
                _ => inner };
            let mut tot = 0u64;
            nodes += search(&spec, &mut |b| {
                let north = b[0]; let south = m - b[m as usize];
                let east = (0..n).find(|&r| b[r as usize] == m).unwrap(); let west = m - (0..n).find(|&r| b[r as usize] == 0).unwrap();
                tot += w[((north as usize * p + east as usize) * p + south as usize) * p + west as usize] as u64;
            });
            total += tot;
        }
        eprintln!("a0={a0} nodes={} weighted={}", nodes - n0, total - t0);
    }
    println!("n={n} scheme={scheme} total={total} nodes={nodes}");
}
