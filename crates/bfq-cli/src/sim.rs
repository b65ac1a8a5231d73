//! `bfq sim`: runs a scenario file in the simulator (crate bfq-sim) with
//! any scheduler of the registry. See docs/scenarios.md.

use anyhow::Context;
use bfq_core::{Scheduler, Settings, Time};
use bfq_sim::{simulate, Scenario, SimOptions, SimResult};
use clap::Args as ClapArgs;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

#[derive(ClapArgs)]
pub struct Args {
    /// Scenario file (TOML, docs/scenarios.md) or fio job file (`.fio`,
    /// docs/fio.md).
    pub scenario: PathBuf,
    /// Scheduler name (overrides the scenario's `[scheduler]` name).
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Scheduler setting key=value (repeatable; overrides the scenario's).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Seed (overrides the scenario's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration (overrides the scenario's): a number and one
    /// unit of ns, us, ms, s, m or min, h (e.g. 10s, 2min, 1h); a bare
    /// number is milliseconds.
    #[arg(long)]
    pub duration: Option<String>,
    /// Write the results as JSON to this file ("-" for stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the event trace CSV (t_ns,event,flow,req,sector,sectors,op).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Report simulated requests per second of wall time (to stderr).
    #[arg(long)]
    pub bench: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let (sc, sched) = load(&a)?;
    let seed = a.seed.unwrap_or(sc.seed);
    let mut out = Outputs::open(&a)?;
    let bar = progress_bar(&a);
    let wall = std::time::Instant::now();
    let cpu0 = cpu_seconds();
    let mut progress = |now: Time, end: Time| {
        if let Some(b) = &bar {
            // show the bar only for runs that take a while
            if wall.elapsed().as_millis() > 500 {
                b.set_position(now.saturating_mul(1000) / end.max(1));
                b.set_message(format!("{:.1}/{:.1} s", now as f64 / 1e9, end as f64 / 1e9));
            }
        }
    };
    let opts = SimOptions {
        trace: out.trace.as_mut().map(|w| w as &mut dyn Write),
        progress: Some(&mut progress),
        stop_at: None,
    };
    let r = simulate(&sc, sched, seed, opts).map_err(|e| match e {
        bfq_sim::SimError::Trace(io) => anyhow::anyhow!("writing --trace {}: {io}", out.trace_name),
        e => e.into(),
    })?;
    let elapsed = wall.elapsed();
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    out.write(&r)?;
    if a.bench {
        std::io::stdout().flush()?;
        let s = elapsed.as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        eprintln!(
            "bench: {} requests in {:.3} s wall = {:.2} M simulated requests/s; {:.1} simulated s per wall s; \
             CPU {:.3} s = {:.2} M requests per CPU second",
            r.requests,
            s,
            r.requests as f64 / s / 1e6,
            r.sim_time_s / s,
            cpu,
            r.requests as f64 / cpu.max(1e-9) / 1e6
        );
    }
    Ok(())
}

/// The scenario (or fio job file, its warnings printed) with
/// `--duration` applied, and the scheduler: `--scheduler`, else the
/// scenario's; the scenario's settings only for its own scheduler, then
/// `--set`.
fn load(a: &Args) -> anyhow::Result<(Scenario, Box<dyn Scheduler>)> {
    let (mut sc, warnings) = bfq_sim::fio::load(&a.scenario)?;
    for w in warnings {
        eprintln!("bfq: warning: {}: {w}", a.scenario.display());
    }
    if let Some(d) = &a.duration {
        sc.duration = bfq_sim::units::Dur(sim_duration(&sc, d)?);
    }
    let name = a
        .scheduler
        .clone()
        .unwrap_or_else(|| sc.scheduler_name().to_string());
    let mut settings: Settings =
        if a.scheduler.is_some() && a.scheduler.as_deref() != sc.scheduler.name.as_deref() {
            // a different scheduler: the scenario's settings were for another one
            Settings::new()
        } else {
            sc.scheduler.settings.clone()
        };
    let from_file = settings.clone();
    let given = crate::args::overlay_sets(&mut settings, &a.set)?;
    let sched = bfq_schedulers::build(&name, &settings)
        .map_err(|e| crate::args::scenario_sched_error(e, &a.scenario, &from_file, &given))?;
    Ok((sc, sched))
}

/// `--duration D` in ns for scenario `sc`: more than 0, at most 7 days
/// of simulated time, and within the bounds of the scenario's outputs
/// (its series' points, its flows' runs); an error names `--duration`.
fn sim_duration(sc: &Scenario, d: &str) -> anyhow::Result<Time> {
    let ns = crate::args::duration(d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    let ns = ns.as_nanos().min(u128::from(u64::MAX)) as u64;
    if ns == 0 {
        anyhow::bail!("--duration {d}: must be more than 0");
    }
    if ns > bfq_scenario::scenario::MAX_SIM_DURATION {
        anyhow::bail!("--duration {d}: must be at most 7 days of simulated time (168h)");
    }
    sc.check_output_bounds(ns)
        .map_err(|e| anyhow::anyhow!("--duration {d}: {e}"))?;
    Ok(ns)
}

/// Where the results go: `--json` and `--trace` (files, or one of them
/// stdout) and the table (stdout, else stderr).
struct Outputs {
    json_stdout: bool,
    trace_stdout: bool,
    json_file: Option<crate::args::JsonFile>,
    trace: Option<BufWriter<Box<dyn Write>>>,
    /// The `--trace` file, put in place once the run has finished (an
    /// interrupted run leaves the previous one: [`bfq_real::outfile`]).
    trace_file: Option<bfq_real::outfile::Replacing>,
    /// The `--trace` argument, for errors.
    trace_name: String,
}

impl Outputs {
    /// The destinations ([`crate::args::json_and_trace`]) and the
    /// `--trace` file, created before the run so that a bad path fails at
    /// once.
    fn open(a: &Args) -> anyhow::Result<Outputs> {
        let (json_stdout, trace_stdout, json_file) =
            crate::args::json_and_trace(&a.json, &a.trace)?;
        let mut trace_file = None;
        let trace: Option<Box<dyn Write>> = match &a.trace {
            Some(_) if trace_stdout => Some(Box::new(std::io::stdout())),
            Some(p) => {
                let (file, w) = bfq_real::outfile::Replacing::create(p)
                    .with_context(|| format!("--trace {}", p.display()))?;
                trace_file = Some(file);
                Some(Box::new(w))
            }
            None => None,
        };
        let trace = trace.map(|w| BufWriter::with_capacity(1 << 20, w));
        Ok(Outputs {
            json_stdout,
            trace_stdout,
            json_file,
            trace,
            trace_file,
            trace_name: a
                .trace
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string()),
        })
    }

    /// Flushes the trace, then writes the table and the JSON results.
    fn write(self, r: &SimResult) -> anyhow::Result<()> {
        if let Some(mut w) = self.trace {
            w.flush()
                .with_context(|| format!("writing --trace {}", self.trace_name))?;
        }
        if let Some(f) = self.trace_file {
            f.finish()
                .with_context(|| format!("writing --trace {}", self.trace_name))?;
        }
        // stdout carries only the JSON or the trace when either goes there.
        if self.json_stdout || self.trace_stdout {
            eprint!("{}", r.summary());
        } else {
            print!("{}", r.summary());
        }
        let j = r.to_json() + "\n";
        if self.json_stdout {
            print!("{j}");
        }
        if let Some(f) = self.json_file {
            f.write(&j)?;
        }
        Ok(())
    }
}

/// The progress bar on stderr, unless `--quiet` or `--bench`.
fn progress_bar(a: &Args) -> Option<indicatif::ProgressBar> {
    if a.quiet || a.bench {
        return None;
    }
    let b = indicatif::ProgressBar::new(1000);
    b.set_style(
        indicatif::ProgressStyle::with_template("{spinner} simulated {msg} [{bar:30}] {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    Some(b)
}

/// User + system CPU seconds of this process (the wall clock is shared with
/// other work on a busy machine).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
