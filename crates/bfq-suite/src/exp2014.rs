//! Experiments of the 2014 BFQ+ report, Section 7, on its MAXTOR disks:
//! aggregate throughput (Figs. 3-4), start-up times (Figs. 5-6, Table 2),
//! video playback (Fig. 7) and code-development tasks (Figs. 8-9).

use crate::exp2010::need;
use crate::model::*;
use crate::scen::{self, header, region};
use crate::settings as st;
use crate::stats::fmt_num;
use std::fmt::Write as _;

const SYS1: &str = "maxtor-6l080l0";
const SYS2_NCQ: &str = "maxtor-7l250s0";
const SYS3: &str = "maxtor-stm332061";

const BFQP: &str = "bfq-plus-2014";
const BFQ: &str = "bfq-2010";

const WORKLOADS: [&str; 4] = ["10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"];

fn cfgs() -> Vec<Config> {
    vec![st::plain(BFQP), st::plain(BFQ), st::cfq(100)]
}

/// The flows of a background workload: ten 5 GB files side by side in one
/// partition (from 0), greedy sync readers and buffered (async) writers.
fn workload(w: &str) -> String {
    let mut s = String::new();
    if w == "idle" {
        return s;
    }
    let rand = w.ends_with("rand");
    let writers = w.starts_with("5r5w");
    for k in 0..10u64 {
        let write = writers && k >= 5;
        let name = if write {
            format!("writer{k}")
        } else {
            format!("reader{k}")
        };
        let _ = write!(
            s,
            "\n[[flow]]\nname = \"{name}\"\nop = \"{}\"\npattern = \"{}\"\nblock = \"{}\"\n{}region = {}\n",
            if write { "write" } else { "read" },
            if rand { "rand" } else { "seq" },
            if rand { "4k" } else { "128k" },
            if write { "buffered = true\n" } else { "" },
            region(k * (5 << 30), 5 << 30)
        );
    }
    s
}

fn is_bg(f: &bfq_sim::FlowResult) -> bool {
    f.name.starts_with("reader") || f.name.starts_with("writer")
}

fn m(e: &ExpResult, v: &str, c: &str, k: &str) -> Option<f64> {
    e.mean(v, c, k)
}

// ------------------------------------------------------------ Figs. 3 and 4

pub fn throughput() -> Experiment {
    let mut variants = vec![];
    for w in WORKLOADS {
        variants.push(var(&format!("{w}-long"), &format!("{w} long")));
    }
    for w in WORKLOADS {
        variants.push(var(&format!("{w}-short"), &format!("{w} short")));
    }
    Experiment {
        id: "2014-throughput",
        title: "Aggregate throughput under the four workloads, without NCQ",
        source: "2014 report, Section 7.2.1, Fig. 3",
        device: SYS3,
        what: "Ten greedy readers/writers of private 5 GB files in one partition: 10r-seq, 10r-rand, 5r5w-seq, 5r5w-rand (writers buffered, through the flusher). Long: 120 s, throughput after the first 20 s (30 s and 10 s with --quick); short: the first 15 s.",
        metrics: vec![metric("agg", "Aggregate throughput", "MiB/s", true)],
        variants,
        configs: cfgs(),
        reps: 5,
        in_quick: true,
        quick_variants: vec!["10r-seq-short", "5r5w-seq-short"],
        run: run_throughput,
        findings: find_throughput,
    }
}

pub fn throughput_ncq() -> Experiment {
    let mut c = cfgs();
    c.push(st::plain("noop"));
    Experiment {
        id: "2014-throughput-ncq",
        title: "Aggregate throughput under the four workloads, with NCQ",
        source: "2014 report, Section 7.2.2, Fig. 4",
        device: SYS2_NCQ,
        what: "The long benchmark of 2014-throughput on the NCQ-capable MAXTOR 7L250S0 (queue depth 32), adding NOOP (FIFO).",
        metrics: vec![metric("agg", "Aggregate throughput", "MiB/s", true)],
        variants: WORKLOADS
            .iter()
            .map(|w| var(&format!("{w}-long"), &format!("{w} long")))
            .collect(),
        configs: c,
        reps: 5,
        in_quick: false,
        quick_variants: vec![],
        run: run_throughput_ncq,
        findings: find_throughput_ncq,
    }
}

fn throughput_on(dev: &str, v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let long = v.id.ends_with("-long");
    let w = v.id.trim_end_matches("-long").trim_end_matches("-short");
    let (dur, skip) = match (long, ctx.quick) {
        (true, false) => (120.0, 20.0),
        (true, true) => (30.0, 10.0),
        (false, _) => (15.0, 0.0),
    };
    let mut s = header(
        &format!("2014 {} {}", v.label, c.label),
        dur,
        ctx,
        dev,
        "",
        c,
    );
    s.push_str(&workload(w));
    let r = scen::run(&s, &format!("2014/{dev}/{}--{}", v.id, c.label), ctx)?;
    let mut out = RunOut::default();
    let agg = if long {
        scen::steady_rate(&r, skip, is_bg)
    } else {
        scen::rate_where(&r, is_bg)
    };
    out.metrics.insert("agg".into(), agg);
    Ok(out)
}

fn run_throughput(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    throughput_on(SYS3, v, c, ctx)
}

fn run_throughput_ncq(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    throughput_on(SYS2_NCQ, v, c, ctx)
}

fn find_throughput(e: &ExpResult) -> Vec<Finding> {
    let mut out = vec![];
    for w in ["10r-seq", "5r5w-seq"] {
        let v = format!("{w}-long");
        if !e.variants.iter().any(|x| x.id == v) {
            continue;
        }
        let g = |c: &str| m(e, &v, c, "agg");
        out.push(need(
            &format!("{w} (long): BFQ+ and BFQ reach a higher throughput than CFQ (paper: about 24% higher)"),
            &[g(BFQP), g(BFQ), g("cfq")],
            |x| {
                (
                    x[0] > x[2] && x[1] > x[2],
                    format!(
                        "ours: BFQ+ {} MiB/s ({:+.0}%), BFQ {} ({:+.0}%), CFQ {}",
                        fmt_num(x[0]),
                        (x[0] / x[2] - 1.0) * 100.0,
                        fmt_num(x[1]),
                        (x[1] / x[2] - 1.0) * 100.0,
                        fmt_num(x[2])
                    ),
                )
            },
        ));
    }
    if e.variants.iter().any(|x| x.id == "10r-seq-long") {
        out.push(need(
            "10r-seq: BFQ reaches its steady throughput at once (short ~ long); CFQ is a little slower (paper: CFQ 59.6 MB/s over the first 15 s)",
            &[
                m(e, "10r-seq-short", BFQ, "agg"),
                m(e, "10r-seq-long", BFQ, "agg"),
                m(e, "10r-seq-short", "cfq", "agg"),
            ],
            |x| {
                (
                    x[0] >= 0.9 * x[1],
                    format!(
                        "ours: BFQ short {} vs long {} MiB/s; CFQ short {}",
                        fmt_num(x[0]),
                        fmt_num(x[1]),
                        fmt_num(x[2])
                    ),
                )
            },
        ));
    }
    out
}

fn find_throughput_ncq(e: &ExpResult) -> Vec<Finding> {
    let g = |v: &str, c: &str| m(e, v, c, "agg");
    vec![
        need(
            "10r-seq with NCQ: BFQ+, BFQ and CFQ are similar (within 15%), NOOP is lower than BFQ+",
            &[
                g("10r-seq-long", BFQP),
                g("10r-seq-long", BFQ),
                g("10r-seq-long", "cfq"),
                g("10r-seq-long", "noop"),
            ],
            |x| {
                let hi = x[..3].iter().cloned().fold(0.0, f64::max);
                let lo = x[..3].iter().cloned().fold(f64::INFINITY, f64::min);
                (
                    lo >= 0.85 * hi && x[3] < x[0],
                    format!(
                        "ours: BFQ+ {}, BFQ {}, CFQ {}, NOOP {} MiB/s",
                        fmt_num(x[0]),
                        fmt_num(x[1]),
                        fmt_num(x[2]),
                        fmt_num(x[3])
                    ),
                )
            },
        ),
        need(
            "5r5w-rand with NCQ: NOOP gets about 50% more throughput than BFQ+",
            &[g("5r5w-rand-long", "noop"), g("5r5w-rand-long", BFQP)],
            |x| {
                (
                    x[0] > 1.2 * x[1],
                    format!(
                        "ours: NOOP {} vs BFQ+ {} MiB/s ({:+.0}%)",
                        fmt_num(x[0]),
                        fmt_num(x[1]),
                        (x[0] / x[1] - 1.0) * 100.0
                    ),
                )
            },
        ),
    ]
}

// -------------------------------------------------- Figs. 5-6 and Table 2

/// Writes the start-up replay files (bash, xterm, konsole) into `dir`.
pub fn write_traces(dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    for app in ["bash", "xterm", "konsole"] {
        let shape = bfq_sim::replay::startup_shape(app).expect("known app");
        let rows = bfq_sim::replay::generate_startup(&shape, 1);
        std::fs::write(
            dir.join(format!("{app}.csv")),
            bfq_sim::replay::to_csv(&rows),
        )?;
    }
    Ok(())
}

/// An application started repeatedly with cold cache, one second apart.
fn app_flow(app: &str, start_s: f64, pause: &str, runs: Option<u32>) -> String {
    format!(
        "\n[[flow]]\nname = \"app\"\npattern = \"replay\"\nreplay = \"{app}.csv\"\nstart = \"{}ms\"\nrepeat = \"{pause}\"\n{}region = {}\n",
        (start_s * 1000.0) as u64,
        runs.map(|r| format!("runs = {r}\n")).unwrap_or_default(),
        region(60 << 30, 16 << 30)
    )
}

pub fn startup() -> Experiment {
    let mut variants = vec![];
    for app in ["bash", "xterm", "konsole"] {
        for w in ["idle", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"] {
            variants.push(var(&format!("{app}/{w}"), &format!("{app}, {w}")));
        }
    }
    Experiment {
        id: "2014-startup",
        title: "Application start-up times under the four workloads, without NCQ",
        source: "2014 report, Section 7.3.1, Figs. 5 and 6",
        device: SYS3,
        what: "bash-, xterm- and konsole-sized start-ups (replays of the simulator's start-up traces: 48, 718 and 1900 requests) started 10 times with cold cache, one second apart, from 3 s on, on an idle disk and under each workload; mean start-up time and aggregate throughput of the workload. Runs last at most 60 s (20 s with --quick): a start-up that never finishes counts as the time it waited (a lower bound, noted).",
        metrics: vec![
            metric("startup_s", "Start-up time", "s", true),
            metric("agg", "Aggregate throughput of the workload", "MiB/s", true),
        ],
        variants,
        configs: cfgs(),
        reps: 5,
        in_quick: true,
        quick_variants: vec!["bash/idle", "bash/10r-seq"],
        run: run_startup,
        findings: find_startup,
    }
}

pub fn startup_ncq() -> Experiment {
    let mut variants = vec![];
    for app in ["bash", "konsole"] {
        for w in WORKLOADS {
            variants.push(var(&format!("{app}/{w}"), &format!("{app}, {w}")));
        }
    }
    let mut c = cfgs();
    c.push(st::plain("noop"));
    Experiment {
        id: "2014-startup-ncq",
        title: "Start-up times with NCQ",
        source: "2014 report, Section 7.3.2, Table 2",
        device: SYS2_NCQ,
        what: "The start-up benchmark of 2014-startup for bash and konsole on the NCQ disk (MAXTOR 7L250S0), with NOOP too; the paper reports the range over the four workloads of the mean start-up time.",
        metrics: vec![
            metric("startup_s", "Start-up time", "s", true),
            metric("agg", "Aggregate throughput of the workload", "MiB/s", false),
        ],
        variants,
        configs: c,
        reps: 5,
        in_quick: false,
        quick_variants: vec![],
        run: run_startup_ncq,
        findings: find_startup_ncq,
    }
}

fn startup_on(dev: &str, v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let (app, w) = v.id.split_once('/').unwrap_or((&v.id, "idle"));
    let dur = if ctx.quick { 20.0 } else { 60.0 };
    let start = 3.0;
    let mut s = header(
        &format!("2014 start-up {} {}", v.label, c.label),
        dur,
        ctx,
        dev,
        "",
        c,
    );
    s.push_str(&workload(w));
    s.push_str(&app_flow(app, start, "1s", Some(10)));
    let r = scen::run(&s, &format!("2014/{dev}/{}--{}", v.id, c.label), ctx)?;
    let mut out = RunOut::default();
    let a = r.flows.iter().find(|f| f.name == "app");
    let times: Vec<f64> = a.map(|f| f.run_times_s.clone()).unwrap_or_default();
    let st = if times.is_empty() {
        out.notes.push(format!(
            "{app} never finished starting in {} s: start-up time is a lower bound",
            dur - start
        ));
        dur - start
    } else {
        times.iter().sum::<f64>() / times.len() as f64
    };
    out.metrics.insert("startup_s".into(), st);
    out.metrics
        .insert("agg".into(), scen::rate_where(&r, is_bg));
    Ok(out)
}

fn run_startup(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    startup_on(SYS3, v, c, ctx)
}

fn run_startup_ncq(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    startup_on(SYS2_NCQ, v, c, ctx)
}

fn find_startup(e: &ExpResult) -> Vec<Finding> {
    let mut out = vec![];
    for (app, factor) in [("bash", 8.0), ("konsole", 9.0)] {
        if !e.variants.iter().any(|v| v.id.starts_with(app)) {
            continue;
        }
        let ws: Vec<&str> = WORKLOADS
            .iter()
            .copied()
            .filter(|w| e.variants.iter().any(|v| v.id == format!("{app}/{w}")))
            .collect();
        if ws.is_empty() {
            continue;
        }
        let mut vals = vec![];
        for w in &ws {
            for c in [BFQP, BFQ, "cfq"] {
                vals.push(m(e, &format!("{app}/{w}"), c, "startup_s"));
            }
        }
        vals.push(m(e, &format!("{app}/idle"), BFQP, "startup_s"));
        out.push(need(
            &format!("{app}: BFQ+ start-up times are up to {factor}x lower than CFQ's and BFQ's, and close to the idle-disk time"),
            &vals,
            |x| {
                let idle = x[x.len() - 1];
                let mut best_cfq: f64 = 0.0;
                let mut best_bfq: f64 = 0.0;
                let mut worst_vs_idle: f64 = 0.0;
                let mut lowest = true;
                let mut parts = vec![];
                for (i, w) in ws.iter().enumerate() {
                    let (p, b, c) = (x[3 * i], x[3 * i + 1], x[3 * i + 2]);
                    best_cfq = best_cfq.max(c / p);
                    best_bfq = best_bfq.max(b / p);
                    worst_vs_idle = worst_vs_idle.max(p / idle);
                    lowest &= p <= b && p <= c;
                    parts.push(format!("{w}: BFQ+ {} s, BFQ {}, CFQ {}", fmt_num(p), fmt_num(b), fmt_num(c)));
                }
                (
                    lowest && best_cfq >= 2.0 && best_bfq >= 2.0 && worst_vs_idle <= 3.0,
                    format!(
                        "ours: up to {:.1}x lower than CFQ, {:.1}x lower than BFQ; BFQ+ at most {:.1}x its idle time ({} s). {}",
                        best_cfq,
                        best_bfq,
                        worst_vs_idle,
                        fmt_num(idle),
                        parts.join("; ")
                    ),
                )
            },
        ));
    }
    out
}

fn find_startup_ncq(e: &ExpResult) -> Vec<Finding> {
    let range = |app: &str, c: &str| -> Option<(f64, f64)> {
        let xs: Option<Vec<f64>> = WORKLOADS
            .iter()
            .map(|w| m(e, &format!("{app}/{w}"), c, "startup_s"))
            .collect();
        let xs = xs?;
        Some((
            xs.iter().cloned().fold(f64::INFINITY, f64::min),
            xs.iter().cloned().fold(0.0, f64::max),
        ))
    };
    let cs = [BFQP, BFQ, "cfq", "noop"];
    let r: Vec<Option<f64>> = cs.iter().map(|c| range("bash", c).map(|x| x.1)).collect();
    vec![need(
        "bash with NCQ: BFQ+ keeps start-up times reasonable (paper: 0.27-0.32 s) and its worst case is below CFQ's (1.05-7.44 s) and NOOP's (6.19-10.8 s)",
        &r,
        |x| {
            let txt: Vec<String> = cs
                .iter()
                .map(|c| {
                    range("bash", c)
                        .map(|(lo, hi)| format!("{c} {}-{} s", fmt_num(lo), fmt_num(hi)))
                        .unwrap_or_default()
                })
                .collect();
            (x[0] <= x[2] && x[0] <= x[3], format!("ours: {}", txt.join(", ")))
        },
    )]
}

// ------------------------------------------------------------------ Fig. 7

pub fn video() -> Experiment {
    Experiment {
        id: "2014-video",
        title: "Video playback frame drops while bash starts every 3 s",
        source: "2014 report, Section 7.4, Fig. 7",
        device: SYS1,
        what: "A 27 fps player (a periodic flow reading 48 kB every 37 ms; a frame is dropped if its data arrives more than 110 ms after its release) plays for 30 s while bash starts with cold cache every 3 s from 10 s on and a workload runs; frame-drop rate (dropped frames per second of playback).",
        metrics: vec![
            metric("drops", "Frame-drop rate", "frames/s", true),
            metric("agg", "Aggregate throughput of the workload", "MiB/s", false),
        ],
        variants: WORKLOADS.iter().map(|w| var(w, w)).collect(),
        configs: cfgs(),
        reps: 5,
        in_quick: false,
        quick_variants: vec![],
        run: run_video,
        findings: find_video,
    }
}

fn run_video(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let dur = 30.0;
    let mut s = header(
        &format!("2014 video {} {}", v.label, c.label),
        dur,
        ctx,
        SYS1,
        "",
        c,
    );
    s.push_str(&workload(&v.id));
    let _ = write!(
        s,
        "\n[[flow]]\nname = \"player\"\npattern = \"seq\"\nblock = \"48k\"\nreadahead = \"0\"\nperiodic = {{ every = \"37ms\", bytes = \"48k\", deadline = \"110ms\" }}\nregion = {}\n",
        region(55 << 30, 1 << 30)
    );
    s.push_str(&app_flow("bash", 10.0, "3s", None));
    let r = scen::run(&s, &format!("2014/{SYS1}/video-{}--{}", v.id, c.label), ctx)?;
    let mut out = RunOut::default();
    let p = r.flows.iter().find(|f| f.name == "player");
    let drops = p.map(|f| f.deadline_misses as f64).unwrap_or(0.0) / r.sim_time_s.max(1e-9);
    out.metrics.insert("drops".into(), drops);
    out.metrics
        .insert("agg".into(), scen::rate_where(&r, is_bg));
    Ok(out)
}

fn find_video(e: &ExpResult) -> Vec<Finding> {
    let mut vals = vec![];
    for w in WORKLOADS {
        vals.push(m(e, w, BFQP, "drops"));
        vals.push(m(e, w, "cfq", "drops"));
    }
    vec![need(
        "BFQ+'s frame-drop rate is at most 1.6x CFQ's under every workload",
        &vals,
        |x| {
            let mut ok = true;
            let mut parts = vec![];
            for (i, w) in WORKLOADS.iter().enumerate() {
                let (p, c) = (x[2 * i], x[2 * i + 1]);
                ok &= p <= 1.6 * c + 0.05;
                parts.push(format!("{w}: BFQ+ {} vs CFQ {}", fmt_num(p), fmt_num(c)));
            }
            (ok, format!("ours (frames/s): {}", parts.join("; ")))
        },
    )]
}

// ------------------------------------------------------------- Figs. 8-9

pub fn devel() -> Experiment {
    let mut variants = vec![];
    for t in ["compile", "checkout", "merge"] {
        for w in ["idle", "10r-seq", "10r-rand"] {
            variants.push(var(&format!("{t}/{w}"), &format!("{t}, {w}")));
        }
    }
    Experiment {
        id: "2014-devel",
        title: "Progress of code-development tasks under 10r-seq and 10r-rand",
        source: "2014 report, Section 7.5, Figs. 8 and 9",
        device: SYS3,
        what: "Synthetic stand-ins for the paper's tasks (no kernel tree here): compile = sync 16 kB random reads with 20 ms of CPU between them plus a buffered writer of object files; checkout = sync 64 kB reads with 1 ms think plus buffered writes; merge = sync 32 kB reads with 2 ms think plus buffered writes; each in a 2 GB area. Progress = MiB the task read in 60 s (20 s with --quick), and as a percentage of its progress on an idle disk.",
        metrics: vec![
            metric("progress", "Task progress (data read)", "MiB", true),
            metric("agg", "Aggregate throughput of the workload", "MiB/s", false),
        ],
        variants,
        configs: cfgs(),
        reps: 5,
        in_quick: false,
        quick_variants: vec![],
        run: run_devel,
        findings: find_devel,
    }
}

fn run_devel(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let (task, w) = v.id.split_once('/').unwrap_or((&v.id, "idle"));
    let dur = if ctx.quick { 20.0 } else { 60.0 };
    let mut s = header(
        &format!("2014 devel {} {}", v.label, c.label),
        dur,
        ctx,
        SYS3,
        "",
        c,
    );
    s.push_str(&workload(w));
    let (block, think, wr_on, wr_off) = match task {
        "compile" => ("16k", "20ms", "64k..256k", "50ms..150ms"),
        "checkout" => ("64k", "1ms", "1M..4M", "10ms..50ms"),
        _ => ("32k", "2ms", "256k..1M", "20ms..80ms"),
    };
    let _ = write!(
        s,
        "\n[[flow]]\nname = \"task\"\npattern = \"rand\"\nblock = \"{block}\"\nthink = \"{think}\"\nstart = \"2s\"\nregion = {}\n\n[[flow]]\nname = \"task-writes\"\nop = \"write\"\npattern = \"seq\"\nbuffered = true\nstart = \"2s\"\non_off = {{ on = \"{wr_on}\", off = \"{wr_off}\" }}\nregion = {}\n",
        region(70 << 30, 2 << 30),
        region(72 << 30, 2 << 30)
    );
    let r = scen::run(&s, &format!("2014/{SYS3}/devel-{}--{}", v.id, c.label), ctx)?;
    let mut out = RunOut::default();
    let t = r.flows.iter().find(|f| f.name == "task");
    out.metrics.insert(
        "progress".into(),
        t.map(|f| f.bytes as f64 / scen::MIB).unwrap_or(0.0),
    );
    out.metrics
        .insert("agg".into(), scen::rate_where(&r, is_bg));
    Ok(out)
}

fn find_devel(e: &ExpResult) -> Vec<Finding> {
    let mut out = vec![];
    let p = |t: &str, w: &str, c: &str| m(e, &format!("{t}/{w}"), c, "progress");
    let mut v = vec![];
    for w in ["10r-seq", "10r-rand"] {
        v.push(p("compile", w, BFQP));
        v.push(p("compile", w, "cfq"));
        v.push(p("compile", w, BFQ));
    }
    out.push(need(
        "compile: BFQ+ makes about the same progress as CFQ (within 25%); BFQ less than both",
        &v,
        |x| {
            let mut ok = true;
            let mut parts = vec![];
            for (i, w) in ["10r-seq", "10r-rand"].iter().enumerate() {
                let (pp, c, b) = (x[3 * i], x[3 * i + 1], x[3 * i + 2]);
                ok &= (pp - c).abs() <= 0.25 * c.max(pp) && b < pp && b < c;
                parts.push(format!(
                    "{w}: BFQ+ {} MiB, CFQ {}, BFQ {}",
                    fmt_num(pp),
                    fmt_num(c),
                    fmt_num(b)
                ));
            }
            (ok, format!("ours: {}", parts.join("; ")))
        },
    ));
    let mut v = vec![];
    for t in ["checkout", "merge"] {
        for w in ["10r-seq", "10r-rand"] {
            v.push(p(t, w, BFQP));
            v.push(p(t, w, BFQ));
            v.push(p(t, w, "cfq"));
        }
    }
    out.push(need(
        "checkout and merge: BFQ+ and BFQ progress more than CFQ, and BFQ+ more than BFQ",
        &v,
        |x| {
            let mut ok = true;
            let mut parts = vec![];
            let mut i = 0;
            for t in ["checkout", "merge"] {
                for w in ["10r-seq", "10r-rand"] {
                    let (pp, b, c) = (x[3 * i], x[3 * i + 1], x[3 * i + 2]);
                    ok &= pp > c && b > c && pp > b;
                    parts.push(format!(
                        "{t}/{w}: BFQ+ {} MiB, BFQ {}, CFQ {}",
                        fmt_num(pp),
                        fmt_num(b),
                        fmt_num(c)
                    ));
                    i += 1;
                }
            }
            (ok, format!("ours: {}", parts.join("; ")))
        },
    ));
    out
}
