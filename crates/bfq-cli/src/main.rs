//! `bfq`: the command-line tool of bfq-rs. Each subcommand lives in its own
//! module; see docs/ for each.

use clap::{Parser, Subcommand};

mod bench_core;
mod bench_engine;
mod loopdev;
mod run;

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
    /// Run a scenario's flows as real I/O: through the engine with a
    /// scheduler of the project, or with kernel:bfq|mq-deadline|kyber|none.
    Run(run::Args),
    /// Make or remove a loop device (for the kernel's schedulers).
    Loop(loopdev::Args),
    /// The engine's benchmarks, side by side with the kernel's schedulers.
    BenchEngine(bench_engine::Args),
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
        Cmd::Run(a) => run::run(a),
        Cmd::Loop(a) => loopdev::run(a),
        Cmd::BenchEngine(a) => bench_engine::run(a),
    };
    if let Err(e) = result {
        eprintln!("bfq: error: {e:#}");
        std::process::exit(1);
    }
}
