//! `nqueens plan`: the partition of one N, counted but not computed.

use super::PlanArgs;

/// Prints the plan's summary.
pub fn run(args: &PlanArgs) -> anyhow::Result<()> {
    let summary = args.partition.plan()?.summary()?;
    if args.partition.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        let weights: Vec<String> = summary
            .by_weight
            .iter()
            .map(|(w, k)| format!("{k} of weight {w}"))
            .collect();
        println!(
            "N = {}, strategy {}: {} sub-problems ({}), {} jobs (depth {})",
            summary.n,
            summary.strategy,
            summary.subproblems,
            weights.join(", "),
            summary.jobs,
            summary.depth
        );
    }
    Ok(())
}
