//! `bfq bench-core`: CPU nanoseconds per request (add + dispatch +
//! complete) in steady state, for each scheduler at each flow count, side
//! by side in one run. Filled in by the core issue.

use clap::Args as ClapArgs;

#[derive(ClapArgs)]
pub struct Args {
    /// Numbers of backlogged flows to measure (repeatable).
    #[arg(long = "flows")]
    pub flows: Vec<u32>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("bench-core is not implemented yet")
}
