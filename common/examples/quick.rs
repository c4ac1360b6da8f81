use nqueens_common::{Plan, Strategy, Tally};
fn main() {
    let n: u32 = std::env::args().nth(1).unwrap().parse().unwrap();
    for strategy in [Strategy::D4, Strategy::Mirror] {
        let t0 = std::time::Instant::now();
        let plan = Plan::new(n, strategy).unwrap();
        let mut tally = Tally::new(strategy == Strategy::D4);
        for key in plan.jobs() { tally.add(&plan.job(&key).unwrap().run()).unwrap(); }
        println!("{strategy} n={n} total={} unique={:?} nodes={} jobs={} t={:?}", tally.total, tally.unique().unwrap(), tally.nodes, tally.jobs, t0.elapsed());
    }
}
