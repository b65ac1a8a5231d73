//! `bfq`: the command-line tool of bfq-rs. Each subcommand lives in its own
//! module; see docs/ for each.

use clap::{Parser, Subcommand};

mod args;
mod bench_core;
mod bench_engine;
mod fio_ref;
mod fuzz;
mod loopdev;
mod mount;
mod run;
mod sim;
mod suite;

/// Counts heap allocations, so that benchmarks can show the hot paths
/// allocate nothing per request.
#[global_allocator]
static GLOBAL: bfq_alloc_count::Counting = bfq_alloc_count::Counting;

/// Heap allocations made by this process so far.
pub fn alloc_count() -> u64 {
    bfq_alloc_count::Counting::allocations()
}

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
    /// List the schedulers and their one-line summaries; with a name, each
    /// setting of that scheduler with its default and the values it takes
    /// (the range or the words it checks).
    Schedulers {
        /// A scheduler name.
        name: Option<String>,
    },
    /// Measure CPU time per request of the schedulers' hot path.
    BenchCore(bench_core::Args),
    /// Run a scenario's flows as real I/O: through the engine with a
    /// scheduler of the project, or with kernel:bfq|mq-deadline|kyber|none.
    Run(run::Args),
    /// Make or remove a loop device (for the kernel's schedulers).
    Loop(loopdev::Args),
    /// The engine's benchmarks, side by side with the kernel's schedulers.
    BenchEngine(bench_engine::Args),
    /// Run a scenario in the simulator (docs/scenarios.md).
    Sim(sim::Args),
    /// Run the papers' benchmark suite and write report.{json,md,html}.
    Suite(suite::Args),
    /// Put back what bfq processes killed by SIGKILL (or a crash) left
    /// behind: the block-device schedulers they set, their `bfq-rs-PID-*`
    /// cgroups (cgroup v1 blkio or v2; one holding live processes is left,
    /// and said), the loop devices (also over a file deleted since),
    /// mounts and files they made for their own use (`bench-engine`'s,
    /// the suite's, `run --create`'s unfinished `.NAME.part-PID`), and bfq
    /// mounts whose server is gone.
    /// What live processes use, what `bfq loop create` made, and what no
    /// bfq process made are left alone. Exits 1 if something could not
    /// be undone.
    Cleanup {
        /// List what would be done, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Seeded random calls of the scheduler API on every scheduler and
    /// mutated scenario files, checking no panic, errors for bad calls,
    /// exactly-once dispatch and completion, no stall, bounded memory.
    Fuzz(fuzz::Args),
    /// Serve a directory over FUSE with its file I/O scheduled by bfq-rs:
    /// one flow per process, one group per cgroup (docs/mount.md).
    Mount(mount::Args),
    /// One flow of a kernel:* run in a process of its own (started by
    /// `bfq run`; its job on stdin, its report on stdout).
    #[command(name = "kernel-flow", hide = true)]
    KernelFlow,
}

fn main() {
    // A closed pipe (`bfq sim ... | head`) ends the process quietly, as for
    // any Unix tool, instead of a panic in `print!`.
    // SAFETY: resetting a signal's disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Schedulers { name: None } => {
            for e in bfq_schedulers::SCHEDULERS {
                println!("{:<14} {}", e.name, e.summary);
            }
            Ok(())
        }
        Cmd::Schedulers { name: Some(n) } => list_settings(&n),
        Cmd::BenchCore(a) => bench_core::run(a),
        Cmd::Run(a) => run::run(a),
        Cmd::Loop(a) => loopdev::run(a),
        Cmd::BenchEngine(a) => bench_engine::run(a),
        Cmd::Sim(a) => sim::run(a),
        Cmd::Suite(a) => suite::run(a),
        Cmd::Mount(a) => mount::run(a),
        Cmd::Cleanup { dry_run } => cleanup(dry_run),
        Cmd::Fuzz(a) => fuzz::run(a),
        Cmd::KernelFlow => {
            bfq_real::flowproc::serve(std::io::stdin().lock(), std::io::stdout().lock())
                .map_err(Into::into)
        }
    };
    if let Err(e) = result {
        eprintln!("bfq: error: {e:#}");
        // Interrupted by SIGINT/SIGTERM (after putting the machine back):
        // the conventional 128 + signal.
        let code = bfq_real::sys::interrupted().map_or(1, |sig| 128 + sig);
        std::process::exit(code);
    }
}

/// `bfq cleanup [--dry-run]`: what dead runs left ([`bfq_real::leftovers`])
/// and dead bfq mounts; one line each (done, left with why, failed), and
/// an error if anything failed.
fn cleanup(dry: bool) -> anyhow::Result<()> {
    let mut c = bfq_real::leftovers::cleanup(dry)?;
    if dry {
        let dead = bfq_mount::dead_mounts();
        c.done.extend(
            dead.iter()
                .map(|m| format!("bfq mount {}: to unmount (its server is gone)", m.display())),
        );
    } else {
        match bfq_mount::cleanup(None) {
            Ok(m) => {
                c.done.extend(m.unmounted.iter().map(|p| {
                    format!("bfq mount {}: unmounted (its server was gone)", p.display())
                }));
                c.left.extend(
                    m.left
                        .iter()
                        .map(|(p, why)| format!("bfq mount {}: left: {why}", p.display())),
                );
            }
            Err(e) => c.failed.push(format!("bfq mounts: {e}")),
        }
    }
    let nothing = c.done.is_empty() && c.left.is_empty() && c.failed.is_empty();
    if nothing {
        println!("nothing left by dead bfq processes");
    }
    for l in &c.done {
        println!("{l}");
    }
    for l in &c.left {
        println!("left: {l}");
    }
    for l in &c.failed {
        eprintln!("bfq: cleanup: failed: {l}");
    }
    if !c.failed.is_empty() {
        anyhow::bail!("{} thing(s) could not be undone (above)", c.failed.len());
    }
    Ok(())
}

/// Prints each setting of scheduler `name`: key, default, and kind with
/// the values accepted (the ranges and words the scheduler checks), or
/// that it has none; then its per-flow and per-group settings' names.
fn list_settings(name: &str) -> anyhow::Result<()> {
    use bfq_core::settings::{bool_spellings, SettingKind};
    let infos = bfq_schedulers::settings_of(name).map_err(args::sched_error)?;
    if infos.is_empty() {
        println!("{name} has no settings");
    }
    for i in &infos {
        println!(
            "{:<28} default {:<14} {}",
            i.key,
            i.default,
            i.kind.describe()
        );
    }
    if infos.iter().any(|i| i.kind == SettingKind::Bool) {
        println!("(a boolean is any of {})", bool_spellings());
    }
    let nodes = bfq_schedulers::node_settings_of(name);
    if !nodes.is_empty() {
        println!(
            "per flow N or group N, as NAME.fN or NAME.gN (docs/schedulers.md): {}",
            nodes.join(", ")
        );
    }
    Ok(())
}
