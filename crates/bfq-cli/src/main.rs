//! `bfq`: the command-line tool of bfq-rs. Each subcommand lives in its own
//! module; see docs/ for each.

use clap::{Parser, Subcommand};

mod bench_core;
mod sim;

#[derive(Parser)]
#[command(
    name = "bfq",
    version,
    about = "BFQ, the Budget Fair Queueing I/O scheduler, in userspace"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the schedulers and their one-line summaries.
    Schedulers,
    /// Measure CPU time per request of the schedulers' hot path.
    BenchCore(bench_core::Args),
    /// Run a scenario in the simulator (docs/scenarios.md).
    Sim(sim::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Schedulers => {
            for e in bfq_schedulers::SCHEDULERS {
                println!("{:<14} {}", e.name, e.summary);
            }
            Ok(())
        }
        Cmd::BenchCore(a) => bench_core::run(a),
        Cmd::Sim(a) => sim::run(a),
    };
    if let Err(e) = result {
        eprintln!("bfq: error: {e:#}");
        std::process::exit(1);
    }
}
