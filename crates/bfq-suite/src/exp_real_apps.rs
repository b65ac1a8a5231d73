//! `real-apps` (`bfq suite --real-apps --target DIR`): the 2014 report's
//! start-up experiment (Sec. 7.3) with real programs. A Python interpreter
//! with its standard library, and bash, each with its shared libraries,
//! are copied into DIR; their start-up (`python3 -c pass`, `bash -c exit`,
//! run in a chroot of the served tree, page cache dropped before each) is
//! timed on an idle tree, under 10 greedy readers and under 5 readers + 5
//! writers, through `bfq mount` with `bfq`, `bfq-2010` and `fifo`, and on
//! an ext4 loop device (direct I/O, same files) under the kernel's `bfq`
//! and `none`. The machine side is in [`crate::apps_sys`].

use crate::apps_sys::{self, App, Layout, Load, Spec, Stage};
use crate::check::{n, need, val, Val};
use crate::model::*;
use std::time::{Duration, Instant};

const MIB: f64 = (1u64 << 20) as f64;

/// The loaded configuration whose findings are checked.
const OURS: &str = "bfq";

/// Sizes and times of a run (shorter and smaller with `--quick`).
struct Params {
    spec: Spec,
    /// Readers of the readers-only workload.
    readers: usize,
    /// Readers and writers of the mixed workload.
    mixed: (usize, usize),
    /// Load before the first start-up.
    warm: Duration,
    /// Pause after each start-up (the report's one second).
    pause: Duration,
    /// A start-up still running after this is killed (a lower bound).
    timeout: Duration,
}

fn params(quick: bool) -> Params {
    if quick {
        Params {
            spec: Spec {
                files: 2,
                file_size: 16 << 20,
            },
            readers: 1,
            mixed: (1, 1),
            warm: Duration::from_millis(500),
            pause: Duration::from_millis(200),
            timeout: Duration::from_secs(30),
        }
    } else {
        Params {
            spec: Spec {
                files: 10,
                file_size: 256 << 20,
            },
            readers: 10,
            mixed: (5, 5),
            warm: Duration::from_secs(3),
            pause: Duration::from_secs(1),
            timeout: Duration::from_secs(60),
        }
    }
}

/// The real-application experiments.
pub fn experiments() -> Vec<Experiment> {
    vec![startup()]
}

fn startup() -> Experiment {
    Experiment {
        id: "real-apps",
        title: "Start-up time of real applications under greedy readers and writers",
        source: "2014 report, Sec. 7.3 (setting and claims), with real programs",
        device: "the --target directory's filesystem",
        what: "python3 with its standard library and bash, each with its shared libraries and loader, are copied into DIR/back and, with the same data files, into an ext4 image (DIR/apps.ext4). Per round, for every workload and configuration in turn: the tree is served through `bfq mount` (keep_cache, O_DIRECT backing files, depth 32) with bfq, bfq-2010 or fifo, or from the image on a direct-I/O loop device under the kernel's bfq or none; the readers and writers start (one process each, synchronous 128 KiB O_DIRECT requests sequentially over its own 256 MiB file, around again); after 3 s, for each application the page cache is dropped and `python3 -c pass` / `bash -c exit` is started in a chroot of the served tree and timed to its exit, with a 1 s pause after each. The readers' and writers' throughput is measured over the start-ups. Workloads: idle, 10 readers, 5 readers + 5 writers (--quick: 1 reader, 1 + 1, 16 MiB files, 0.5 s warm-up). Rounds: the repetitions; each number is the median over the rounds with the range [min–max].",
        metrics: vec![
            metric("python3", "python3 -c pass start-up", "s", false).by_median(),
            metric("bash", "bash -c exit start-up", "s", false).by_median(),
            metric("rd", "Readers' aggregate throughput", "MiB/s", false).by_median(),
            metric("wr", "Writers' aggregate throughput", "MiB/s", false).by_median(),
        ],
        variants: vec![
            var("idle", "idle"),
            var("10r", "10 readers"),
            var("5r5w", "5 readers + 5 writers"),
        ],
        configs: vec![
            cfg("bfq", "bfq", &[]),
            cfg("bfq-2010", "bfq-2010", &[]),
            cfg("fifo", "fifo", &[]),
            cfg("kernel:bfq", "kernel:bfq", &[]),
            cfg("kernel:none", "kernel:none", &[]),
        ],
        reps: 5,
        in_quick: true,
        quick_variants: vec![],
        run: run_startup,
        findings: find_startup,
    }
}

/// Checks DIR and prepares it (applications, data files, ext4 image),
/// before any run.
pub fn prepare(dir: &std::path::Path, quick: bool, progress: bool) -> anyhow::Result<()> {
    apps_sys::check_target(dir)?;
    let mut say = |s: &str| {
        if progress {
            eprintln!("real-apps: {s}");
        }
    };
    apps_sys::prepare(dir, &params(quick).spec, &mut say)?;
    Ok(())
}

fn run_startup(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let Some(dir) = &ctx.target else {
        anyhow::bail!("real-apps without --target");
    };
    let p = params(ctx.quick);
    let lay = Layout::of(dir);
    let (readers, writers) = match v.id.as_str() {
        "idle" => (0, 0),
        "10r" => (p.readers, 0),
        _ => p.mixed,
    };
    let apps: Vec<App> = apps_sys::apps()?;
    let stage = Stage::open(&lay, &c.scheduler, &c.settings)?;
    let root = stage.root().to_path_buf();
    let files = |range: std::ops::Range<usize>| -> Vec<_> {
        range.map(|i| Layout::data(&root, i)).collect()
    };
    let load = Load::start(
        &files(0..readers),
        &files(readers..readers + writers),
        p.spec.file_size,
    )?;
    std::thread::sleep(p.warm);
    stop_if_interrupted()?;
    let (r0, w0) = load.bytes();
    let t0 = Instant::now();
    let mut out = RunOut::default();
    for app in &apps {
        apps_sys::drop_caches()?;
        let (secs, killed) = apps_sys::time_start(&root, app, p.timeout)?;
        if killed {
            out.notes.push(format!(
                "{} was killed after {} s: its start-up time is a lower bound",
                app.name,
                n(secs)
            ));
        }
        out.metrics.insert(app.name.clone(), secs);
        std::thread::sleep(p.pause);
        stop_if_interrupted()?;
    }
    let (r1, w1) = load.bytes();
    let dt = t0.elapsed().as_secs_f64();
    load.check_alive()?;
    drop(load);
    drop(stage);
    if readers > 0 {
        out.metrics.insert("rd".into(), (r1 - r0) as f64 / MIB / dt);
    }
    if writers > 0 {
        out.metrics.insert("wr".into(), (w1 - w0) as f64 / MIB / dt);
    }
    Ok(out)
}

/// Ends a run on SIGINT or SIGTERM (caught by the runner): the caller's
/// guards then take down the load, the mount or loop device.
fn stop_if_interrupted() -> anyhow::Result<()> {
    match bfq_real::sys::interrupted() {
        Some(sig) => anyhow::bail!("interrupted by signal {sig}"),
        None => Ok(()),
    }
}

/// Slack of "close to the idle start-up": at most this many times the
/// idle median (the 2014-startup experiment's tolerance).
const CLOSE: f64 = 1.5;
/// "Far below": at most this fraction of the other scheduler's median.
const FAR_BELOW: f64 = 0.5;
/// Our slowdown may exceed the kernel's BFQ's by at most this factor.
const VS_KERNEL: f64 = 1.25;

const LOADS: [&str; 2] = ["10r", "5r5w"];

fn find_startup(e: &ExpResult) -> Vec<Finding> {
    let mut out = vec![];
    for app in ["python3", "bash"] {
        out.push(close_to_idle(e, app, OURS));
        out.push(far_below(e, app));
        out.push(close_to_idle(e, app, "kernel:bfq"));
        out.push(vs_kernel(e, app));
    }
    out
}

/// Median start-ups of `app` under `c`: idle, then each loaded workload.
fn times(e: &ExpResult, app: &str, c: &str) -> Vec<Val> {
    ["idle"]
        .iter()
        .chain(LOADS.iter())
        .map(|v| val(e, v, c, app))
        .collect()
}

/// `c: idle X s, 10r Y s (k.kx), 5r5w Z s (k.kx); readers R MiB/s, R MiB/s`.
fn times_txt(e: &ExpResult, app: &str, c: &str) -> String {
    let t = |v: &str| e.center(v, c, app).unwrap_or(f64::NAN);
    let idle = t("idle");
    let loads: Vec<String> = LOADS
        .iter()
        .map(|v| format!("{v} {} s ({:.1}x)", n(t(v)), t(v) / idle))
        .collect();
    let rd: Vec<String> = LOADS
        .iter()
        .map(|v| n(e.center(v, c, "rd").unwrap_or(f64::NAN)))
        .collect();
    format!(
        "{c}: idle {} s, {}; readers {} MiB/s",
        n(idle),
        loads.join(", "),
        rd.join(" / ")
    )
}

/// [`times_txt`] of several configurations.
fn txt(e: &ExpResult, app: &str, cs: &[&str]) -> String {
    cs.iter()
        .map(|c| times_txt(e, app, c))
        .collect::<Vec<_>>()
        .join("; ")
}

fn close_to_idle(e: &ExpResult, app: &str, c: &str) -> Finding {
    let whose = if c == OURS {
        "our `bfq` through `bfq mount`".to_string()
    } else {
        format!("`{c}` on the loop device")
    };
    need(
        &format!("{app}: under {whose} the start-up stays close to the idle start-up: the median under 10 readers and under 5 readers + 5 writers is at most {CLOSE}x the idle median"),
        &times(e, app, c),
        |x| {
            (
                x[1] <= CLOSE * x[0] && x[2] <= CLOSE * x[0],
                format!("ours: {}", times_txt(e, app, c)),
            )
        },
    )
    .cite("2014 report, Sec. 7.3.1, Figs. 5(a) and 6(a)")
    .cause_unless_holds(|| {
        Cause::new(
            CauseKind::Scheduler,
            format!("{}; for reference {}", txt(e, app, &[c]), txt(e, app, &["fifo"])),
        )
    })
}

fn far_below(e: &ExpResult, app: &str) -> Finding {
    let mut vals = vec![];
    for c in [OURS, "fifo", "bfq-2010"] {
        vals.extend(LOADS.iter().map(|v| val(e, v, c, app)));
    }
    need(
        &format!("{app}: our `bfq` starts it in at most {FAR_BELOW}x the time of `fifo` (no scheduling, the report's NOOP) and of `bfq-2010` (BFQ without the low-latency heuristics) under 10 readers and under 5 readers + 5 writers"),
        &vals,
        |x| {
            let ok = (0..2).all(|k| x[k] <= FAR_BELOW * x[2 + k] && x[k] <= FAR_BELOW * x[4 + k]);
            (ok, format!("ours: {}", txt(e, app, &[OURS, "fifo", "bfq-2010"])))
        },
    )
    .cite("2014 report, Sec. 7.3.1 (up to 8x lower than CFQ and BFQ), Table 2")
    .cause_unless_holds(|| far_below_cause(e, app))
}

fn vs_kernel(e: &ExpResult, app: &str) -> Finding {
    let mut vals = times(e, app, OURS);
    vals.extend(times(e, app, "kernel:bfq"));
    need(
        &format!("{app}: our `bfq`'s slowdown under load (loaded / idle median, each on its own storage path) is at most {VS_KERNEL}x the kernel's BFQ's under both workloads"),
        &vals,
        |x| {
            let ok = (1..3).all(|k| x[k] / x[0] <= VS_KERNEL * (x[3 + k] / x[3]));
            (ok, format!("ours: {}", txt(e, app, &[OURS, "kernel:bfq"])))
        },
    )
    .cite("2014 report, Sec. 7.3.1; the kernel's BFQ on the same files as the reference")
    .cause_unless_holds(|| vs_kernel_cause(e, app))
}

/// Loaded / idle median of `app` under `c` in workload `v`.
fn slowdown(e: &ExpResult, app: &str, c: &str, v: &str) -> f64 {
    let t = |v: &str| e.center(v, c, app).unwrap_or(f64::NAN);
    t(v) / t("idle")
}

/// Why `bfq` is not at most half of `fifo`'s and `bfq-2010`'s time: when
/// `bfq` itself stays close to its idle time under both loads, the other
/// scheduler is what is not slow enough on this storage (the report's
/// disk made a start-up behind the readers wait seconds); otherwise
/// `bfq`'s own start-up is the cause.
fn far_below_cause(e: &ExpResult, app: &str) -> Cause {
    let numbers = txt(e, app, &[OURS, "fifo", "bfq-2010"]);
    let ours_close = LOADS.iter().all(|v| slowdown(e, app, OURS, v) <= CLOSE);
    if !ours_close {
        return Cause::new(CauseKind::Scheduler, numbers);
    }
    let mut short = vec![];
    for c in ["fifo", "bfq-2010"] {
        for v in LOADS {
            let (ours, other) = (
                e.center(v, OURS, app).unwrap_or(f64::NAN),
                e.center(v, c, app).unwrap_or(f64::NAN),
            );
            if ours.is_nan() || other.is_nan() || ours > FAR_BELOW * other {
                short.push(format!(
                    "{c} {v} {:.1}x its idle time ({:.2}x ours)",
                    slowdown(e, app, c, v),
                    other / ours
                ));
            }
        }
    }
    let idle = |c: &str| n(e.center("idle", c, app).unwrap_or(f64::NAN));
    Cause::new(
        CauseKind::DeviceModel,
        format!(
            "the storage here, not the report's disk: bfq stays within {CLOSE}x of its idle start-up under both loads, while the others slow down only {} here (the report's disk: CFQ and NOOP up to 8x and more), readers at {} MiB/s under fifo; idle medians through the same mount: bfq {} s, fifo {} s, bfq-2010 {} s; {numbers}",
            short.join(", "),
            LOADS
                .iter()
                .map(|v| n(e.center(v, "fifo", "rd").unwrap_or(f64::NAN)))
                .collect::<Vec<_>>()
                .join(" / "),
            idle(OURS),
            idle("fifo"),
            idle("bfq-2010")
        ),
    )
}

/// Why our slowdown is over 1.25x the kernel's BFQ's: when the kernel's
/// loaded median is below its own idle median in a failing workload, the
/// spread of the runs is larger than the effect being compared (a
/// start-up is not faster under load); otherwise our scheduler.
fn vs_kernel_cause(e: &ExpResult, app: &str) -> Cause {
    let numbers = txt(e, app, &[OURS, "kernel:bfq"]);
    let below: Vec<String> = LOADS
        .iter()
        .filter(|v| {
            slowdown(e, app, OURS, v) > VS_KERNEL * slowdown(e, app, "kernel:bfq", v)
                && slowdown(e, app, "kernel:bfq", v) < 1.0
        })
        .map(|v| {
            let s = e.summary("idle", "kernel:bfq", app);
            format!(
                "{v}: kernel:bfq {:.2}x, idle runs {}-{} s",
                slowdown(e, app, "kernel:bfq", v),
                n(s.map_or(f64::NAN, |s| s.min)),
                n(s.map_or(f64::NAN, |s| s.max))
            )
        })
        .collect();
    if below.is_empty() {
        Cause::new(CauseKind::Scheduler, numbers)
    } else {
        Cause::new(
            CauseKind::Check,
            format!(
                "the kernel's start-up under load is below its idle one ({}): the spread of the runs is larger than the slowdowns compared; {numbers}",
                below.join("; ")
            ),
        )
    }
}
