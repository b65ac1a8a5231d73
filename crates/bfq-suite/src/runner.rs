//! Selecting experiments, running every (experiment, variant,
//! configuration, repetition) on `--jobs` threads, and aggregating.
//! Results are stored by index, so the report does not depend on which
//! thread finished first.

use crate::model::*;
use crate::paper_figures;
use crate::stats::Summary;
use anyhow::bail;
use bfq_core::{SchedError, Settings};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Options of a suite run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Experiment ids to run (None: all, or the quick subset).
    pub only: Option<Vec<String>>,
    /// Repetitions (None: each experiment's own; 2 with --quick).
    pub reps: Option<usize>,
    /// Parallel runs.
    pub jobs: usize,
    /// The quick subset: fewer experiments, variants, repetitions and
    /// shorter simulated durations.
    pub quick: bool,
    /// Output directory (replay traces are written under it).
    pub out: PathBuf,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Real storage: run the `real-*` experiments on it (one run at a
    /// time) instead of the simulated ones.
    pub target: Option<PathBuf>,
    /// Run the `real-apps` experiment instead: `target` is then a
    /// directory for the applications' files, the readers' files and the
    /// ext4 image (see [`crate::exp_real_apps`]).
    pub real_apps: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            only: None,
            reps: None,
            jobs: 1,
            quick: false,
            out: PathBuf::from("out"),
            progress: false,
            target: None,
            real_apps: false,
        }
    }
}

/// Options as recorded in the report (nothing machine-dependent).
#[derive(Clone, Debug, Serialize)]
pub struct ReportOptions {
    /// `--quick`: short runs of the quick experiments.
    pub quick: bool,
    /// `--reps`: repetitions per cell (None: each experiment's own).
    pub reps: Option<usize>,
    /// `--only`: the experiments run (None: all).
    pub only: Option<Vec<String>>,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Which suite: simulated or on real storage.
    pub suite: String,
    /// Real storage the runs measured (`--target`); None: simulated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The options the suite ran with.
    pub options: ReportOptions,
    /// Each experiment's results, in the suite's order.
    pub experiments: Vec<ExpResult>,
}

/// The experiments and variants a run will cover, with repetitions.
pub fn select(opts: &Options) -> anyhow::Result<Vec<(Experiment, usize)>> {
    let all = if opts.real_apps {
        crate::exp_real_apps::experiments()
    } else if opts.target.is_some() {
        crate::exp_real::experiments()
    } else {
        crate::experiments()
    };
    let known: Vec<&str> = all.iter().map(|e| e.id).collect();
    if let Some(only) = &opts.only {
        for id in only {
            if !known.contains(&id.as_str()) {
                bail!("unknown experiment id '{id}' (known: {})", known.join(", "));
            }
        }
    }
    if opts.reps == Some(0) {
        bail!("--reps must be at least 1");
    }
    let mut out = vec![];
    for mut e in all {
        let chosen = match &opts.only {
            Some(only) => only.iter().any(|i| i == e.id),
            None => !opts.quick || e.in_quick,
        };
        if !chosen {
            continue;
        }
        if opts.quick && !e.quick_variants.is_empty() {
            let keep = e.quick_variants.clone();
            e.variants.retain(|v| keep.contains(&v.id.as_str()));
        }
        let reps = opts.reps.unwrap_or(if opts.quick { 2 } else { e.reps });
        out.push((e, reps));
    }
    Ok(out)
}

/// Why a configuration cannot run here, if it cannot.
pub fn unavailable(c: &Config) -> Option<String> {
    if c.scheduler.starts_with("kernel:") {
        // The kernel's schedulers are checked when they run (root, block
        // device); a failure is recorded in the report.
        return None;
    }
    let s = Settings::from_pairs(c.settings.iter().map(|(k, v)| (k.clone(), v.clone())));
    match bfq_schedulers::build(&c.scheduler, &s) {
        Ok(_) => None,
        Err(SchedError::UnknownScheduler(n)) => Some(format!(
            "scheduler '{n}' is not registered in bfq-schedulers yet: skipped"
        )),
        Err(e) => Some(format!(
            "scheduler '{}' refused its settings ({e}): skipped",
            c.scheduler
        )),
    }
}

struct Job {
    exp: usize,
    var: usize,
    cfg: usize,
    rep: usize,
}

/// Checks a real-storage target before any run: it must exist, be a
/// regular file or a block device, and a block device must hold no mounted
/// filesystem (the engine's own check).
pub fn check_target(path: &std::path::Path) -> anyhow::Result<()> {
    let md = std::fs::metadata(path).map_err(|e| {
        anyhow::anyhow!(
            "--target {}: {e} (give an existing file or block device; `bfq loop create FILE SIZE` makes a block device)",
            path.display()
        )
    })?;
    if bfq_real::sys::is_block_device(path) {
        bfq_real::sys::check_not_mounted(path)
            .map_err(|e| anyhow::anyhow!("--target {}: {e}", path.display()))?;
    } else if !md.is_file() {
        bail!(
            "--target {}: not a regular file or a block device",
            path.display()
        );
    }
    Ok(())
}

/// Runs the selected experiments and aggregates the results.
pub fn run_suite(opts: &Options) -> anyhow::Result<Report> {
    let sel = select(opts)?;
    match (&opts.target, opts.real_apps) {
        (None, true) => bail!("--real-apps needs --target DIR (a directory for the applications' files, the readers' files and an ext4 image)"),
        (Some(t), true) => crate::exp_real_apps::prepare(t, opts.quick, opts.progress)?,
        (Some(t), false) => check_target(t)?,
        (None, false) => {}
    }
    let traces_dir = opts.out.join("traces");
    crate::exp2014::write_traces(&traces_dir)?;
    let (runnable, skipped) = runnable_configs(&sel);
    let mut jobs = plan_jobs(&sel, &runnable);
    if opts.target.is_some() {
        // On real storage the configurations are interleaved: each round
        // (repetition) runs every variant and configuration once, so
        // drifts of the machine spread over all of them.
        jobs.sort_by_key(|j| (j.exp, j.rep, j.var, j.cfg));
    }
    // SIGINT and SIGTERM during real-application runs end the run under
    // way, which takes down what it set up (mounts, loop device, the
    // device's scheduler, readers); no further run starts.
    let signals = opts.real_apps.then(bfq_real::sys::catch_interrupts);
    let results = execute(opts, &sel, &jobs, &traces_dir);
    if signals.is_some() {
        if let Some(sig) = bfq_real::sys::interrupted() {
            bail!("interrupted by signal {sig}: the mounts, loop device and processes of the run under way were removed; no report written");
        }
    }
    drop(signals);
    let exps = sel
        .iter()
        .enumerate()
        .map(|(ei, (e, reps))| {
            let cells = (0..e.variants.len())
                .flat_map(|vi| runnable[ei].iter().map(move |&ci| (ei, vi, ci)))
                .map(|at| cell_of(e, at, &jobs, &results))
                .collect();
            exp_result(e, *reps, &runnable[ei], skipped[ei].clone(), cells)
        })
        .collect();
    Ok(Report {
        target: opts.target.as_ref().map(|t| t.display().to_string()),
        suite: suite_title(opts).into(),
        options: ReportOptions {
            quick: opts.quick,
            reps: opts.reps,
            only: opts.only.clone(),
        },
        experiments: exps,
    })
}

/// Experiment `e`'s result: its runnable configurations' `cells` (by
/// variant, then configuration) and their findings.
fn exp_result(
    e: &Experiment,
    reps: usize,
    runnable: &[usize],
    skipped: Vec<Skipped>,
    cells: Vec<Cell>,
) -> ExpResult {
    let mut r = ExpResult {
        id: e.id.into(),
        title: e.title.into(),
        source: e.source.into(),
        device: e.device.into(),
        what: e.what.into(),
        metrics: e.metrics.clone(),
        variants: e.variants.clone(),
        configs: runnable.iter().map(|&i| e.configs[i].clone()).collect(),
        skipped,
        reps,
        cells,
        findings: vec![],
        paper: paper_figures::for_experiment(e.id),
    };
    r.findings = (e.findings)(&r);
    r
}

/// The report's title: simulated, real storage or real applications.
fn suite_title(opts: &Options) -> &'static str {
    if opts.real_apps {
        "bfq-rs benchmark suite (real applications)"
    } else if opts.target.is_some() {
        "bfq-rs benchmark suite (real storage)"
    } else {
        "bfq-rs benchmark suite (simulated)"
    }
}

/// Per selected experiment: the indices of the configurations that can
/// run here, and the others with the reason.
fn runnable_configs(sel: &[(Experiment, usize)]) -> (Vec<Vec<usize>>, Vec<Vec<Skipped>>) {
    let mut runnable: Vec<Vec<usize>> = vec![];
    let mut skipped: Vec<Vec<Skipped>> = vec![];
    for (e, _) in sel {
        let mut ok = vec![];
        let mut sk = vec![];
        for (i, c) in e.configs.iter().enumerate() {
            match unavailable(c) {
                None => ok.push(i),
                Some(why) => sk.push(Skipped {
                    config: c.label.clone(),
                    why,
                }),
            }
        }
        runnable.push(ok);
        skipped.push(sk);
    }
    (runnable, skipped)
}

/// Every (experiment, variant, runnable configuration, repetition).
fn plan_jobs(sel: &[(Experiment, usize)], runnable: &[Vec<usize>]) -> Vec<Job> {
    let mut jobs = vec![];
    for (ei, (e, reps)) in sel.iter().enumerate() {
        for vi in 0..e.variants.len() {
            for &ci in &runnable[ei] {
                for rep in 0..*reps {
                    jobs.push(Job {
                        exp: ei,
                        var: vi,
                        cfg: ci,
                        rep,
                    });
                }
            }
        }
    }
    jobs
}

/// What each job gave (stored by its index), `None` if it did not run.
type JobResults = Vec<Option<Result<RunOut, String>>>;

/// Runs the jobs on `--jobs` threads (one on real storage), with a
/// progress bar if asked.
fn execute(
    opts: &Options,
    sel: &[(Experiment, usize)],
    jobs: &[Job],
    traces_dir: &std::path::Path,
) -> JobResults {
    let results: Mutex<JobResults> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let pb = progress_bar(opts.progress, jobs.len());
    // Runs on real storage go one at a time: concurrent runs would share
    // the device and spoil each other's measurements.
    let threads = if opts.target.is_some() {
        1
    } else {
        opts.jobs.max(1).min(jobs.len().max(1))
    };
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                if opts.real_apps && bfq_real::sys::interrupted().is_some() {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(j) = jobs.get(i) else { break };
                let (e, _) = &sel[j.exp];
                let v = &e.variants[j.var];
                let c = &e.configs[j.cfg];
                pb.set_message(format!(
                    "{} | {} | {} | rep {}",
                    e.id,
                    v.id,
                    c.label,
                    j.rep + 1
                ));
                let ctx = Ctx {
                    quick: opts.quick,
                    seed: 1 + j.rep as u64,
                    traces_dir: traces_dir.to_path_buf(),
                    target: opts.target.clone(),
                };
                let r = (e.run)(v, c, &ctx).map_err(|err| format!("{err:#}"));
                if opts.target.is_some() && opts.progress {
                    // Real runs take seconds each: one line per run.
                    let line = format!(
                        "{} | {} | {} | round {}/{}: {}",
                        e.id,
                        v.id,
                        c.label,
                        j.rep + 1,
                        sel[j.exp].1,
                        run_line(&r)
                    );
                    // Also when stderr is not a terminal (the bar is
                    // hidden there): a log of a long run shows its progress.
                    if pb.is_hidden() {
                        eprintln!("{line}");
                    } else {
                        pb.println(line);
                    }
                }
                results.lock().expect("results")[i] = Some(r);
                pb.inc(1);
            });
        }
    });
    pb.finish_and_clear();
    results.into_inner().expect("results")
}

/// A run's metrics (or its error) on one line.
fn run_line(r: &Result<RunOut, String>) -> String {
    match r {
        Ok(out) => out
            .metrics
            .iter()
            .map(|(k, v)| format!("{k} {}", crate::stats::fmt_num(*v)))
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("error: {e}"),
    }
}

/// A progress bar on stderr over `n` runs, or a hidden one.
fn progress_bar(show: bool, n: usize) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(n as u64);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    pb
}

/// The cell of experiment `e` at (experiment, variant, configuration)
/// indices `at`: its runs, their summary and the first error.
fn cell_of(e: &Experiment, at: (usize, usize, usize), jobs: &[Job], results: &JobResults) -> Cell {
    let (_, vi, ci) = at;
    let mut runs = vec![];
    let mut error = None;
    for (k, j) in jobs.iter().enumerate() {
        if (j.exp, j.var, j.cfg) != at {
            continue;
        }
        match &results[k] {
            Some(Ok(out)) => runs.push(RunRecord {
                rep: j.rep,
                seed: 1 + j.rep as u64,
                out: out.clone(),
            }),
            Some(Err(msg)) => {
                error.get_or_insert_with(|| msg.clone());
            }
            None => {
                error.get_or_insert_with(|| "not run".to_string());
            }
        }
    }
    Cell {
        variant: e.variants[vi].id.clone(),
        config: e.configs[ci].label.clone(),
        summary: summarize(&runs),
        runs,
        error,
    }
}

/// Mean and CI of every metric over the runs. A run whose value is not
/// finite is left out of the mean and counted (`Summary::nonfinite`), so
/// the findings that need the metric say so instead of using the others.
pub fn summarize(runs: &[RunRecord]) -> BTreeMap<String, Summary> {
    let mut by: BTreeMap<String, (Vec<f64>, usize)> = BTreeMap::new();
    for r in runs {
        for (k, v) in &r.out.metrics {
            let e = by.entry(k.clone()).or_default();
            if v.is_finite() {
                e.0.push(*v);
            } else {
                e.1 += 1;
            }
        }
    }
    by.into_iter()
        .filter_map(|(k, (xs, bad))| {
            Summary::of(&xs).map(|s| {
                (
                    k,
                    Summary {
                        nonfinite: bad,
                        ..s
                    },
                )
            })
        })
        .collect()
}
