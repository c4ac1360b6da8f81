use nqueens_common::kernel;
use nqueens_common::partition::d4;
fn main() {
    let n: u8 = std::env::args().nth(1).unwrap().parse().unwrap();
    let m = n - 1;
    let (mut base_nodes, mut base_cnt, mut eager_nodes, mut eager_cnt) = (0u64, 0u64, 0u64, 0u64);
    let (mut both_nodes, mut both_cnt) = (0u64, 0u64);
    for g in d4::groups(n) {
        let p = g.problem(&[]).unwrap();
        let s = kernel::count(&p);
        base_nodes += s.nodes;
        base_cnt += s.count;
        if p.board.column_mask() & 1 != 0 {
            eager_nodes += s.nodes;
            eager_cnt += s.count;
        }
        if p.board.column_mask() & 1 != 0 || p.board.column_mask() & (1 << m) != 0 {
            both_nodes += s.nodes;
            both_cnt += s.count;
        }
        // eager left column (col 0): its queen's row in the band where allowed
        for row in 1..m {
            if p.board.col(row).is_some() || p.forbid[row as usize] & 1 != 0 {
                continue;
            }
            let mut q = p;
            if q.board.try_place(row as u32, 0).is_err() {
                continue;
            }
            let s = kernel::count(&q);
            eager_nodes += s.nodes;
            eager_cnt += s.count;
            if q.board.column_mask() & (1 << m) != 0 {
                continue;
            }
            for row2 in 1..m {
                if q.board.col(row2).is_some() || q.forbid[row2 as usize] & (1 << m) != 0 {
                    continue;
                }
                let mut q2 = q;
                if q2.board.try_place(row2 as u32, m as u32).is_err() {
                    continue;
                }
                let s = kernel::count(&q2);
                both_nodes += s.nodes;
                both_cnt += s.count;
            }
        }
    }
    println!("n={n} lazy: nodes={base_nodes} cnt={base_cnt}; eager-left: nodes={eager_nodes} cnt={eager_cnt}; eager-both: nodes={both_nodes} cnt={both_cnt}");
}
