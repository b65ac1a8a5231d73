//! `bfq suite`: the papers' benchmark suite on the simulator
//! (docs/suite.md). Writes report.json, report.md and report.html.

use std::path::PathBuf;
use std::time::Instant;

/// Run the papers' experiments and write the reports.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only these experiment ids (comma-separated; see docs/suite.md).
    #[arg(long, value_delimiter = ',')]
    pub only: Option<Vec<String>>,
    /// Repetitions (different seeds) per experiment, scheduler and workload.
    #[arg(long)]
    pub reps: Option<usize>,
    /// Parallel runs (default: the number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// A subset with fewer repetitions and shorter runs (under a minute; CI).
    #[arg(long)]
    pub quick: bool,
    /// Output directory.
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Real storage (file or block device): run the `real-*` experiments
    /// on it through the engine's schedulers and the kernel's (kernel:*
    /// need root and a block device) instead of the simulated ones.
    #[arg(long)]
    pub target: Option<PathBuf>,
    /// Time the start-up of real applications (python3, bash) through
    /// `bfq mount` and on a loop device under the kernel's schedulers,
    /// with greedy readers and writers; --target is then a directory
    /// (needs root and /dev/fuse; docs/suite.md).
    #[arg(long)]
    pub real_apps: bool,
    /// List the experiments and exit.
    #[arg(long)]
    pub list: bool,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.list {
        for e in bfq_suite::experiments() {
            println!("{:<22} {} ({})", e.id, e.title, e.source);
        }
        return Ok(());
    }
    // A bad --out fails now, not after the runs.
    if a.out.exists() && !a.out.is_dir() {
        anyhow::bail!("--out {}: exists and is not a directory", a.out.display());
    }
    if a.jobs == Some(0) {
        anyhow::bail!("--jobs must be at least 1");
    }
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let opts = bfq_suite::Options {
        only: a.only,
        reps: a.reps,
        jobs,
        quick: a.quick,
        out: a.out.clone(),
        progress: !a.no_progress,
        target: a.target.clone(),
        real_apps: a.real_apps,
    };
    let t0 = Instant::now();
    let report = bfq_suite::run_suite(&opts)?;
    bfq_suite::report::write_all(&report, &a.out)?;
    eprint!(
        "{}",
        closing_message(&report, &a.out, t0.elapsed().as_secs_f64())
    );
    Ok(())
}

/// What the end of a run prints: where the report is, how many findings
/// hold, and each one that does not with its one-line cause.
fn closing_message(report: &bfq_suite::Report, out: &std::path::Path, secs: f64) -> String {
    use bfq_suite::model::Verdict;
    use std::fmt::Write as _;
    let (holds, not, nc) = bfq_suite::report::verdict_counts(report);
    let total = holds + not + nc;
    let mut s = format!(
        "bfq suite: {} experiment(s) in {secs:.1} s; {holds} of {total} findings hold, {not} do not hold, {nc} not comparable.\n",
        report.experiments.len()
    );
    let _ = writeln!(s, "report: {}", out.join("report.html").display());
    let _ = writeln!(
        s,
        "        (also report.md and report.json in {})",
        out.display()
    );
    for e in &report.experiments {
        for f in e.findings.iter().filter(|f| f.verdict != Verdict::Holds) {
            let _ = writeln!(
                s,
                "  {} [{}] {}\n      cause: {}",
                f.verdict.as_str(),
                e.id,
                f.claim,
                f.cause
                    .as_ref()
                    .map(|c| c.line())
                    .unwrap_or_else(|| "none given".into())
            );
        }
    }
    s
}
