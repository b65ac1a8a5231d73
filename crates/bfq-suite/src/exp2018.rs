//! The 2018 article's comparison of I/O control policies on a SATA SSD
//! (preset `ssd-plextor-m5s`): Table 1 workload groups, Table 2
//! configurations, Figs. 1-4.

use crate::check::{near, need, val, Val};
use crate::model::*;
use crate::scen::{self, header, region};
use crate::stats::fmt_num;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

const DEV: &str = "ssd-plextor-m5s";

/// Groups in creation order: /target = g1, /i1../i4 = g2..g5 (active),
/// /i5../i9 = g6..g10 (inactive).
const GROUPS: usize = 10;

fn limits(kind: &str, target: &str, active: &str, inactive: &str) -> Vec<(String, String)> {
    (1..=GROUPS)
        .map(|g| {
            let v = match g {
                1 => target,
                2..=5 => active,
                _ => inactive,
            };
            (format!("{kind}.g{g}"), v.to_string())
        })
        .collect()
}

/// Runs of the workload's target alone and interferers alone (no I/O
/// control): they give the attainable throughput.
const TARGET_ALONE: &str = "target alone (none)";
const INTERFERERS_ALONE: &str = "interferers alone (none)";
const NONE: &str = "none (no I/O control)";
const PROP: &str = "prop-bfq";
const TODAY: &str = "today's bfq (bfq-kernel)";
const BEST: &str = "bfq";
fn configs() -> Vec<Config> {
    // MB/s as the article's benchmark writes them (`rbps=10000000
    // wbps=10000000` in io.low, S `bandwidth-latency.sh`): 10^6 bytes/s,
    // for reads and writes each (Table 2: "The same limits are set for
    // both reads and writes"); latency 100 us and idle 1000 us are
    // throttle-low's defaults.
    let mut low = cfg("low-none", "throttle-low", &[]);
    low.settings = limits("low_bps", "10000000", "10000000", "20000000");
    let mut max = cfg("max-none", "throttle-max", &[]);
    max.settings = limits("max_bps", "10000000", "15000000", "25000000");
    // The article's kernel has low limits built in (it runs low-none), and
    // such a kernel throttles on an SSD in slices of 20 ms
    // (`DFL_THROTL_SLICE_SSD`), max limits included.
    max.settings.push(("slice".into(), "20ms".into()));
    vec![
        cfg(NONE, "fifo", &[]),
        cfg(TARGET_ALONE, "fifo", &[]),
        cfg(INTERFERERS_ALONE, "fifo", &[]),
        low,
        max,
        // The article's bfq (Linux 4.18, profile `bfq-2018`) plugs
        // dispatching for a sync process with a differentiated weight even
        // on a queueing device (guarantee idling), has no injection and
        // charges buffered writes x10 in every scenario; today's kernel bfq
        // (with injection, the article's "improved version") fills those
        // idle periods with other flows' requests.
        cfg(PROP, "bfq-2018", &[("low_latency", "0")]),
        cfg(TODAY, "bfq-kernel", &[("low_latency", "0")]),
        cfg(BEST, "bfq", &[("low_latency", "0")]),
    ]
}

/// (variant id, label)
const VARIANTS: [(&str, &str); 12] = [
    (
        "seq-readers/rand-target",
        "static sequential: 4 seq readers, random target",
    ),
    (
        "seq-readers/seq-target",
        "static sequential: 4 seq readers, seq target",
    ),
    (
        "seq-writers/rand-target",
        "static sequential: 4 seq writers, random target",
    ),
    (
        "seq-writers/seq-target",
        "static sequential: 4 seq writers, seq target",
    ),
    (
        "mixed-readers/rand-target",
        "varying randomness: readers, random target",
    ),
    (
        "mixed-readers/seq-target",
        "varying randomness: readers, seq target",
    ),
    (
        "mixed-writers/rand-target",
        "varying randomness: writers, random target",
    ),
    (
        "mixed-writers/seq-target",
        "varying randomness: writers, seq target",
    ),
    (
        "rand-readers/rand-target",
        "static random: 4 random readers, random target",
    ),
    (
        "rand-readers/seq-target",
        "static random: 4 random readers, seq target",
    ),
    (
        "dynamic/rand-target",
        "dynamic: sporadic readers and writers, random target",
    ),
    (
        "dynamic/seq-target",
        "dynamic: sporadic readers and writers, seq target",
    ),
];

/// `2018-io-control`: throttling against proportional share, the target's and interferers' throughput (2018 article, Tables 1-2, Figs. 1-4).
pub fn io_control() -> Experiment {
    Experiment {
        id: "2018-io-control",
        title: "Throttling vs proportional share: target, interferers and total throughput",
        source: "2018 article, Tables 1-2, Figs. 1-4",
        device: DEV,
        what: "One target (a sync reader, random 4 kB or sequential) and four active interferers, each in its own group, plus five groups that never do I/O. Interferers per Table 1: four sequential sync readers or writers; one sequential and three random (4k, 128k, 1024k) readers or writers; four random 4 kB readers; or two sporadic readers and two sporadic writers (ON 4-64 MB, OFF 50-500 ms). Writers are async with 32 requests in flight in their group (the article's buffered writes, with cgroup writeback). Policies per Table 2: low-none (low limits 10/10/20 MB/s), max-none (max limits 10/15/25 MB/s), prop-bfq (weights 300/100/200; `bfq-kernel` without injection: it idles for the weighted sync queues on the queueing device, as the article's bfq did), today's bfq (`bfq-kernel`, with injection: the article's \"improved version\"), `bfq` (this project's profile), and none; plus the target alone and the interferers alone under none. The attainable throughput is what serving the target just long enough for 10 MB/s and the interferers the rest of the time gives: 10 MB/s + (1 - 10 MB/s / target alone) x interferers alone (the article's (500+23)/2 estimate, Sec. 9, made exact). The bfq configurations start with the peak rate their own estimator learns from one sequential reader alone in 2 s (`peak_rate_learned`): a device keeps its scheduler and bfq its estimate from one test to the next, and the article's benchmark created its files and ran its tests one after another. The bfq configurations run with low_latency off, as the article's benchmark sets it (S `bandwidth-latency.sh` disables it for bfq \"to not distort results\"). Every flow starts at once; throughputs are averaged over 10 s after a 5 s ramp, as the article's benchmark measures them (fio `ramp_time=5`), so the start-up weight raising of the new flows is outside the window (3 s after a 1 s ramp with --quick).",
        metrics: vec![
            metric("target", "Target throughput", "MB/s", true),
            metric("interferers", "Interferers' throughput", "MB/s", false),
            metric("total", "Total throughput", "MB/s", true),
            metric("pct_attainable", "Total as % of the attainable throughput", "%", false),
            metric("run_target", "Target's mean dispatch run", "sectors", false),
            metric("run_inter", "Interferers' mean dispatch run", "sectors", false),
            metric("longest_inter", "Interferers' longest dispatch run", "sectors", false),
            metric("depth", "Mean requests in flight on the device", "requests", false),
            metric("bmax", "B_max at the end (BFQ)", "sectors", false),
            metric("peak_rate", "Peak-rate estimate (BFQ)", "MB/s", false),
            metric("budget_target", "Mean budget granted to the target (BFQ)", "sectors", false),
            metric("budget_inter", "Mean budget granted to the interferers (BFQ)", "sectors", false),
            metric("inj_pct", "Requests dispatched by injection (BFQ)", "%", false),
            metric("low_pct", "Time in throttle-low's LOW state", "%", false),
            metric("state_changes", "throttle-low's LOW/MAX changes", "changes", false),
        ],
        variants: VARIANTS.iter().map(|(i, l)| var(i, l)).collect(),
        configs: configs(),
        reps: 3,
        in_quick: true,
        quick_variants: vec!["seq-readers/rand-target", "rand-readers/rand-target"],
        run: run_io_control,
        findings: find_io_control,
    }
}

#[allow(clippy::too_many_arguments)]
fn flow(
    s: &mut String,
    name: &str,
    group: &str,
    write: bool,
    rand: bool,
    block: &str,
    k: u64,
    sporadic: bool,
) {
    let _ = write!(
        s,
        "\n[[flow]]\nname = \"{name}\"\ngroup = \"{group}\"\nop = \"{}\"\npattern = \"{}\"\nblock = \"{block}\"\n{}{}region = {}\n",
        if write { "write" } else { "read" },
        if rand { "rand" } else { "seq" },
        if write { "sync = false\ndepth = 32\n" } else { "" },
        if sporadic {
            "on_off = { on = \"4M..64M\", off = \"50ms..500ms\" }\n"
        } else {
            ""
        },
        region(k * (8 << 30), 8 << 30)
    );
}

/// 10 MB/s: the target's guaranteed bandwidth in Table 2.
const TARGET_NEED: f64 = 10.0;

/// The measurement window, as the article's benchmark (the S suite's
/// `bandwidth-latency.sh`, footnote 1) takes it: every flow starts at
/// once, throughputs are averaged over `MEASURE_S` seconds after a
/// `RAMP_S`-second ramp (fio's `ramp_time=5`, `duration=10`), so the
/// start-up weight raising of the new flows is not measured. `--quick`:
/// 3 s after a 1 s ramp.
const RAMP_S: f64 = 5.0;
const MEASURE_S: f64 = 10.0;

/// (ramp, simulated duration) in seconds.
fn window(ctx: &Ctx) -> (f64, f64) {
    if ctx.quick {
        (1.0, 4.0)
    } else {
        (RAMP_S, RAMP_S + MEASURE_S)
    }
}

/// Throughput (MB/s) of the flows matching `pred` over the window.
fn rate(r: &bfq_sim::SimResult, ctx: &Ctx, pred: impl Fn(&bfq_sim::FlowResult) -> bool) -> f64 {
    scen::steady_rate(r, window(ctx).0, pred)
}

/// Throughput (MB/s) the target alone or the interferers alone reach
/// without I/O control for variant `v` and seed: run once, remembered
/// (the simulator is deterministic, so every caller gets the same value).
fn alone(v: &Variant, label: &'static str, ctx: &Ctx) -> anyhow::Result<f64> {
    static MEMO: OnceLock<Mutex<HashMap<String, f64>>> = OnceLock::new();
    let key = format!("{}|{label}|{}|{}", v.id, ctx.seed, ctx.quick);
    let memo = MEMO.get_or_init(Default::default);
    if let Some(x) = memo.lock().expect("memo").get(&key) {
        return Ok(*x);
    }
    let c = cfg(label, "fifo", &[]);
    let r = scen::run(
        &scenario(v, &c, ctx),
        &format!("2018/{}--{label}", v.id),
        ctx,
    )?;
    let x = rate(&r, ctx, |_| true);
    memo.lock().expect("memo").insert(key, x);
    Ok(x)
}

/// The total throughput attainable while the target gets its 10 MB/s:
/// the target served just long enough for it, the interferers the rest
/// of the time (the article's "(500+23)/2 ~ 260 MB/s", Sec. 9, with the
/// share of time the target needs instead of a half).
pub fn attainable(target_alone: f64, interferers_alone: f64) -> f64 {
    if target_alone <= TARGET_NEED {
        return target_alone;
    }
    TARGET_NEED + (1.0 - TARGET_NEED / target_alone) * interferers_alone
}

/// Whether the service of a cell is measured from the trace: the cells
/// the findings' causes cite (tracing every cell triples the run time).
fn traced(v: &str, c: &str) -> bool {
    let cs: &[&str] = match v {
        V1 => &["low-none", PROP, BEST, TODAY],
        "seq-readers/seq-target" => &[PROP],
        V3 => &[PROP, BEST, TODAY, "max-none"],
        V4 => &[BEST, TODAY, "max-none"],
        V5 => &["low-none", "max-none", PROP],
        "mixed-writers/rand-target" => &[PROP, BEST],
        _ => &[],
    };
    cs.contains(&c)
}

fn run_io_control(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let c = &warmed_up(c, ctx)?;
    let (text, origin) = (scenario(v, c, ctx), format!("2018/{}--{}", v.id, c.label));
    let mut out = RunOut::default();
    let r = if traced(&v.id, &c.label) {
        let (r, svc) = scen::run_traced(&text, &origin, ctx)?;
        let inter = |f: &str| f.starts_with("interferer");
        out.metrics
            .insert("run_target".into(), svc.mean_run_sectors(|f| f == "target"));
        out.metrics
            .insert("run_inter".into(), svc.mean_run_sectors(inter));
        out.metrics
            .insert("longest_inter".into(), svc.longest_run_sectors(inter));
        out.metrics.insert("depth".into(), svc.mean_depth());
        r
    } else {
        scen::run(&text, &origin, ctx)?
    };
    let sets: [scen::FlowSet; 2] = [
        ("target", |f| f == "target"),
        ("inter", |f| f.starts_with("interferer")),
    ];
    scen::mechanisms(&r, &sets, &mut out.metrics);
    let t = rate(&r, ctx, |f| f.name == "target");
    let i = rate(&r, ctx, |f| f.name.starts_with("interferer"));
    out.metrics.insert("target".into(), t);
    out.metrics.insert("interferers".into(), i);
    out.metrics.insert("total".into(), t + i);
    let pct = if c.label == TARGET_ALONE || c.label == INTERFERERS_ALONE {
        f64::NAN
    } else {
        let a = attainable(
            alone(v, TARGET_ALONE, ctx)?,
            alone(v, INTERFERERS_ALONE, ctx)?,
        );
        100.0 * (t + i) / a
    };
    out.metrics.insert("pct_attainable".into(), pct);
    out.cdf = r
        .flows
        .iter()
        .find(|f| f.name == "target")
        .map(|f| f.latency_cdf_ms.clone());
    Ok(out)
}

/// How long a sequential reader alone warms a bfq up before a test.
const WARM_UP_S: f64 = 2.0;

/// `c` as the article's bfq met each test: with the peak rate it had
/// learned from sequential I/O on the device before (`peak_rate_learned`).
/// A device keeps its scheduler, and with it bfq's estimate and B_max,
/// from one test to the next: the article's benchmark creates the test
/// files and runs the workloads one after another, and switches the
/// scheduler only when it differs (S `bandwidth-latency.sh`, footnote 1).
/// Started cold, the kernel's estimator never accepts a window of the
/// static-sequential mix (mostly the target's 4 KiB random reads, at a
/// rate below the initial estimate), so B_max stays at 16384 sectors and
/// the sequential readers' turns last ~17 ms against the target's T_max
/// turns. The learned rate is what the profile's own estimator takes
/// from one sequential 128 KiB reader alone for `WARM_UP_S` seconds; the
/// other schedulers have no such state.
fn warmed_up(c: &Config, ctx: &Ctx) -> anyhow::Result<Config> {
    static MEMO: OnceLock<Mutex<HashMap<String, Option<u64>>>> = OnceLock::new();
    if !c.scheduler.starts_with("bfq") {
        return Ok(c.clone());
    }
    let key = format!("{}|{}|{}", c.label, ctx.seed, ctx.quick);
    let memo = MEMO.get_or_init(Default::default);
    let cached = memo.lock().expect("memo").get(&key).copied();
    let rate = match cached {
        Some(r) => r,
        None => {
            let mut s = header("2018 warm-up", WARM_UP_S, ctx, DEV, "", c);
            s.push_str("\n[[group]]\npath = \"/w\"\n");
            flow(&mut s, "warm-up", "/w", false, false, "128k", 0, false);
            let r = scen::run(&s, &format!("2018/warm-up--{}", c.label), ctx)?;
            // Only an estimate the warm-up's samples moved (B_max tuned).
            let tuned = r.internals.max_budget != Some(bfq_core::bfq::DEFAULT_MAX_BUDGET);
            let rate = r.internals.peak_rate.filter(|_| tuned);
            memo.lock().expect("memo").insert(key, rate);
            rate
        }
    };
    let mut c = c.clone();
    if let Some(rate) = rate {
        c.settings
            .push(("peak_rate_learned".into(), rate.to_string()));
    }
    Ok(c)
}

/// The scenario of variant `v` under configuration `c`.
fn scenario(v: &Variant, c: &Config, ctx: &Ctx) -> String {
    let (inter, target) = v.id.split_once('/').unwrap_or((&v.id, "rand-target"));
    let dur = window(ctx).1;
    let mut s = header(
        &format!("2018 {} {}", v.label, c.label),
        dur,
        ctx,
        DEV,
        "",
        c,
    );
    let prop = c.scheduler.starts_with("bfq");
    let with_target = c.label != INTERFERERS_ALONE;
    let with_interferers = c.label != TARGET_ALONE;
    let _ = write!(
        s,
        "\n[[group]]\npath = \"/target\"\nweight = {}\n",
        if prop { 300 } else { 100 }
    );
    for i in 1..=9 {
        let _ = write!(
            s,
            "\n[[group]]\npath = \"/i{i}\"\nweight = {}\n",
            if prop && i > 4 { 200 } else { 100 }
        );
    }
    let trand = target == "rand-target";
    if with_target {
        flow(
            &mut s,
            "target",
            "/target",
            false,
            trand,
            if trand { "4k" } else { "128k" },
            0,
            false,
        );
    }
    for i in (1..=4u64).filter(|_| with_interferers) {
        let g = format!("/i{i}");
        let name = format!("interferer{i}");
        match inter {
            "seq-readers" => flow(&mut s, &name, &g, false, false, "128k", i, false),
            "seq-writers" => flow(&mut s, &name, &g, true, false, "128k", i, false),
            "mixed-readers" | "mixed-writers" => {
                let w = inter == "mixed-writers";
                let (rand, block) = match i {
                    1 => (false, "128k"),
                    2 => (true, "4k"),
                    3 => (true, "128k"),
                    _ => (true, "1M"),
                };
                flow(&mut s, &name, &g, w, rand, block, i, false)
            }
            "rand-readers" => flow(&mut s, &name, &g, false, true, "4k", i, false),
            _ => {
                // dynamic: sporadic rand reader, seq reader, rand writer, seq writer
                let (w, rand, block) = match i {
                    1 => (false, true, "4k"),
                    2 => (false, false, "128k"),
                    3 => (true, true, "4k"),
                    _ => (true, false, "128k"),
                };
                flow(&mut s, &name, &g, w, rand, block, i, true)
            }
        }
    }
    s
}

const FIG1: &str = "2018 article, Sec. 9, Fig. 1 (static sequential)";
const FIG3: &str = "2018 article, Sec. 9, Fig. 3 (static random)";
const V1: &str = "seq-readers/rand-target";
const V3: &str = "rand-readers/rand-target";
const V4: &str = "rand-readers/seq-target";
const V5: &str = "dynamic/rand-target";

/// How configurations `cs` served variant `v`: from the trace, the mean
/// dispatch runs of the target and the interferers, the interferers'
/// longest run and the mean device queue depth; from the schedulers'
/// own counters ([`scen::mechanisms`]), B_max, the peak-rate estimate,
/// injection, the budgets granted and throttle-low's time in LOW.
fn service_txt(e: &ExpResult, v: &str, cs: &[&str]) -> String {
    let g = |c: &str, k: &str| e.mean(v, c, k).map(fmt_num).unwrap_or_else(|| "n/a".into());
    let parts: Vec<String> = cs
        .iter()
        .map(|c| {
            format!(
                "{c}: target runs {} sectors, interferers' runs {} (longest {}), {} in flight{}",
                g(c, "run_target"),
                g(c, "run_inter"),
                g(c, "longest_inter"),
                g(c, "depth"),
                mechanisms_txt(e, v, c)
            )
        })
        .collect();
    format!(
        "measured (mean dispatch run, mean device depth, the scheduler's counters) {}",
        parts.join("; ")
    )
}

/// The scheduler's mechanisms in cell (`v`, `c`), as ", B_max ..." (empty
/// for a policy that has none of them).
fn mechanisms_txt(e: &ExpResult, v: &str, c: &str) -> String {
    // sector counts are printed whole; the others as measured
    let items: [(&str, &str, &str, bool); 7] = [
        ("bmax", "B_max ", " sectors", true),
        ("peak_rate", "peak-rate estimate ", " MB/s", false),
        (
            "budget_target",
            "mean budget granted to the target ",
            " sectors",
            true,
        ),
        ("budget_inter", "to the interferers ", " sectors", true),
        ("inj_pct", "", "% of the requests injected", false),
        ("low_pct", "in LOW state ", "% of the run", false),
        (
            "state_changes",
            "",
            " LOW/MAX changes per run (mean)",
            false,
        ),
    ];
    items
        .iter()
        .filter_map(|(k, pre, post, whole)| {
            let x = e.mean(v, c, k)?;
            let x = if *whole {
                format!("{x:.0}")
            } else {
                fmt_num(x)
            };
            Some(format!(", {pre}{x}{post}"))
        })
        .collect()
}

/// A cause of kind scheduler: `what` (the numbers of the sub-condition
/// that failed), then the measured service of `cs`.
fn measured(e: &ExpResult, v: &str, what: String, cs: &[&str]) -> Cause {
    Cause::new(
        CauseKind::Scheduler,
        format!("{what}; {}", service_txt(e, v, cs)),
    )
}

/// Which of `conds` (name, held) failed, for a cause's first words.
fn failed(conds: &[(&str, bool)]) -> String {
    let f: Vec<&str> = conds.iter().filter(|c| !c.1).map(|c| c.0).collect();
    format!("fails: {}", f.join("; "))
}

fn find_io_control(e: &ExpResult) -> Vec<Finding> {
    vec![
        static_seq_low(e),
        static_seq_prop(e),
        static_seq_best(e),
        static_seq_share(e),
        reads_over_writes(e),
        static_rand_prop(e),
        static_rand_seq_target(e),
        dynamic_rand(e),
        guarantee_everywhere(e),
    ]
}

fn static_seq_low(e: &ExpResult) -> Finding {
    let g = |v: &str, c: &str, k: &str| val(e, v, c, k);
    let att = Val::derive(
        &[
            g(V1, TARGET_ALONE, "total"),
            g(V1, INTERFERERS_ALONE, "total"),
        ],
        |x| attainable(x[0], x[1]),
    );
    let vals = [
        g(V1, "low-none", "target"),
        g(V1, "low-none", "total"),
        g(V1, NONE, "total"),
        att,
        g(V1, "low-none", "interferers"),
    ];
    let x: Vec<f64> = vals.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
    need(
        "Static sequential, random target vs sequential readers: low-none guarantees the target its 10 MB/s low limit, but its total is below 10% of the total without I/O control and below 20% of the total attainable while the target gets 10 MB/s",
        &vals,
        |x| {
            (
                x[0] >= TARGET_NEED && x[1] < 0.1 * x[2] && x[1] < 0.2 * x[3],
                format!(
                    "ours: low-none target {} MB/s, total {} MB/s = {:.0}% of none's {} and {:.0}% of the attainable {}",
                    fmt_num(x[0]), fmt_num(x[1]), 100.0 * x[1] / x[2], fmt_num(x[2]), 100.0 * x[1] / x[3], fmt_num(x[3])
                ),
            )
        },
    )
    .cite(FIG1)
    .cause_unless_holds(|| {
        // the five active groups' low limits: the total if LOW all along
        let floor = TARGET_NEED + 40.0;
        let what = format!(
            "{}; the four interferers get {} MB/s together, {:.2}x the 4 x 10 MB/s of their low limits; the five active groups' low limits add up to {} MB/s = {:.1}% of none's total, so the article's < 10% needs every group held to its low limit nearly all the time (throttle-low upgrades when every group is idle and steps down at a busy group's check, blk-throttle's rules; readers limited in both directions never count as held at their low limit)",
            failed(&[("target >= 10 MB/s", x[0] >= TARGET_NEED), ("total < 10% of none's", x[1] < 0.1 * x[2]), ("total < 20% of the attainable", x[1] < 0.2 * x[3])]),
            fmt_num(x[4]),
            x[4] / 40.0,
            fmt_num(floor),
            100.0 * floor / x[2]
        );
        measured(e, V1, what, &["low-none"])
    })
}

fn static_seq_prop(e: &ExpResult) -> Finding {
    let g = |c: &str, k: &str| val(e, V1, c, k);
    let vals = [
        g(PROP, "target"),
        g("low-none", "target"),
        g("max-none", "target"),
        g(PROP, "pct_attainable"),
    ];
    let x: Vec<f64> = vals.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
    need(
        "Static sequential, random target vs sequential readers: prop-bfq gives the target at least its 10 MB/s, slightly more than low-none and max-none, and its total is about 90% of the attainable (checked: >= 80%)",
        &vals,
        |x| {
            (
                x[0] >= TARGET_NEED && x[0] >= x[1] && x[0] >= x[2] && x[3] >= 80.0,
                format!(
                    "ours: prop-bfq target {} MB/s (low-none {}, max-none {}), total {:.0}% of the attainable",
                    fmt_num(x[0]), fmt_num(x[1]), fmt_num(x[2]), x[3]
                ),
            )
        },
    )
    .cite(FIG1)
    .cause_unless_holds(|| {
        let what = failed(&[
            ("target >= 10 MB/s", x[0] >= TARGET_NEED),
            ("target >= low-none's and max-none's", x[0] >= x[1] && x[0] >= x[2]),
            (&format!("total >= 80% of the attainable (ours {:.0}%)", x[3]), x[3] >= 80.0),
        ]);
        measured(e, V1, what, &[PROP, BEST])
    })
}

fn static_seq_best(e: &ExpResult) -> Finding {
    let g = |c: &str, k: &str| val(e, V1, c, k);
    need(
        "Static sequential, random target vs sequential readers: `bfq` (this project's profile: today's kernel plus the rules of docs/bfq-settings.md) keeps the target at >= 10 MB/s with a total >= 80% of the attainable (article: prop-bfq about 90%)",
        &[g(BEST, "target"), g(BEST, "pct_attainable"), g(TODAY, "target"), g(TODAY, "pct_attainable")],
        |x| {
            (
                x[0] >= TARGET_NEED && x[1] >= 80.0,
                format!(
                    "ours: bfq target {} MB/s, total {:.0}% of the attainable; bfq-kernel {} MB/s, {:.0}%",
                    fmt_num(x[0]), x[1], fmt_num(x[2]), x[3]
                ),
            )
        },
    )
    .cite(FIG1)
    .cause_unless_holds(|| {
        let alone = g(TARGET_ALONE, "target").unwrap_or(f64::NAN);
        let what = format!(
            "bfq misses the target or 80% of the attainable; with B_max at T_max x the device's rate (bfq's estimate: peak-rate estimate below) each reader's turn lasts about T_max, and the random target, charged its time, gets its weight's share of the device time: at most its rate alone x 3/7 = {} x 3/7 = {} MB/s; a B_max below T_max x the rate (as the kernel's estimator learns it) shortens the readers' turns and gives the target more",
            fmt_num(alone),
            fmt_num(alone * 3.0 / 7.0)
        );
        measured(e, V1, what, &[BEST, TODAY])
    })
}

/// The static workloads (every variant but the dynamic ones).
fn static_variants() -> impl Iterator<Item = &'static str> {
    VARIANTS
        .iter()
        .map(|v| v.0)
        .filter(|v| !v.starts_with("dynamic"))
}

/// Sec. 1 and 10: "bfq guarantees bandwidths with all workloads".
fn guarantee_everywhere(e: &ExpResult) -> Finding {
    let min_ok = 0.95 * TARGET_NEED;
    let mut vals: Vec<Val> = static_variants()
        .map(|v| val(e, v, PROP, "target"))
        .collect();
    vals.extend(static_variants().map(|v| val(e, v, BEST, "target")));
    let below = |x: &[f64]| -> Vec<String> {
        static_variants()
            .zip(x)
            .filter(|(_, &t)| t < min_ok)
            .map(|(v, t)| format!("{v} {}", fmt_num(*t)))
            .collect()
    };
    need(
        "bfq guarantees bandwidths with all workloads: prop-bfq gives the target its 10 MB/s (checked: >= 9.5 MB/s, 10 - 5%) in each of the ten static workloads of Table 1 (checked on `bfq`, this project's profile, too)",
        &vals,
        |x| {
            let n = x.len() / 2;
            let (prop, best) = (below(&x[..n]), below(&x[n..]));
            (
                prop.is_empty() && best.is_empty(),
                format!(
                    "ours: prop-bfq below 9.5 MB/s in {} ({}); bfq in {} ({})",
                    prop.len(),
                    prop.join(", "),
                    best.len(),
                    best.join(", ")
                ),
            )
        },
    )
    .cite("2018 article, Sec. 1 and 10; Figs. 1-3")
    .cause_unless_holds(|| guarantee_cause(e, min_ok))
}

/// Why a target misses its 10 MB/s: the worst static workload, and for
/// the random target among random readers the bound its weight's share of
/// the device time sets (its rate alone x 3/7).
fn guarantee_cause(e: &ExpResult, min_ok: f64) -> Cause {
    let target = |v: &str, c: &str| val(e, v, c, "target").unwrap_or(f64::INFINITY);
    let worst = static_variants()
        .min_by(|a, b| {
            let m = |v: &str| target(v, PROP).min(target(v, BEST));
            m(a).total_cmp(&m(b))
        })
        .unwrap_or(V3);
    let alone = val(e, V3, TARGET_ALONE, "total").unwrap_or(f64::NAN);
    let bound = alone * 3.0 / 7.0;
    let mut what = format!("the target gets less than {min_ok} MB/s, above all in {worst}");
    if target(V3, PROP) < min_ok || target(V3, BEST) < min_ok {
        what.push_str(&format!(
            "; beside four random readers of weight 100 a random target of weight 300 gets at most its weight's share of the device time, its rate alone x 3/7 = {} x 3/7 = {} MB/s, under the article's 10 MB/s; there prop-bfq gives it {} ({:.0}% of that bound), bfq {}",
            fmt_num(alone),
            fmt_num(bound),
            fmt_num(target(V3, PROP)),
            100.0 * target(V3, PROP) / bound,
            fmt_num(target(V3, BEST)),
        ));
    }
    measured(e, worst, what, &[PROP, BEST])
}

fn static_seq_share(e: &ExpResult) -> Finding {
    let v2 = "seq-readers/seq-target";
    need(
        "Static sequential, sequential target vs sequential readers: prop-bfq grants the target a fraction of the total proportional to its weight (300 of 700; checked within 10%)",
        &[val(e, v2, PROP, "target"), val(e, v2, PROP, "total")],
        |x| {
            let share = x[0] / x[1];
            (
                (share / (3.0 / 7.0) - 1.0).abs() <= 0.1,
                format!("ours: target {:.1}% of the total (weight share 42.9%)", 100.0 * share),
            )
        },
    )
    .cite(FIG1)
    .cause_unless_holds(|| measured(e, v2, "the target's share of the total differs from its weight share".into(), &[PROP]))
}

/// Sec. 9 on Fig. 1's last workload: "prop-bfq gives much more
/// throughput to the reader than to all the interferers, because
/// interferers are asynchronous writers, and bfq privileges reads", and
/// its total is "much higher" than without I/O control.
fn reads_over_writes(e: &ExpResult) -> Finding {
    let v = "seq-writers/seq-target";
    let g = |c: &str, k: &str| val(e, v, c, k);
    need(
        "Static sequential, sequential target vs sequential writers: prop-bfq gives the reader much more throughput than all the interferers together (checked: at least 2x) and reaches a total much higher than without I/O control (checked: at least 1.5x none's)",
        &[g(PROP, "target"), g(PROP, "interferers"), g(PROP, "total"), g(NONE, "total")],
        |x| {
            (
                x[0] >= 2.0 * x[1] && x[2] >= 1.5 * x[3],
                format!(
                    "ours: prop-bfq target {} MB/s, interferers {} ({:.1}x), total {} ({:.2}x none's {})",
                    fmt_num(x[0]),
                    fmt_num(x[1]),
                    x[0] / x[1],
                    fmt_num(x[2]),
                    x[2] / x[3],
                    fmt_num(x[3])
                ),
            )
        },
    )
    .cite(FIG1)
    .cause_unless_holds(|| measured(e, v, "the writers get as much as the reader, or more".into(), &[PROP]))
}

fn static_rand_prop(e: &ExpResult) -> Finding {
    let g = |c: &str| val(e, V3, c, "total");
    need(
        "Static random, only random readers: prop-bfq reaches an extremely lower total than throttling (checked: < 50% of max-none's and low-none's); the improved bfq recovers most of the loss (checked on `bfq`, this project's profile: >= 0.8x max-none; today's kernel, bfq-kernel, shown beside)",
        &[g(PROP), g(BEST), g("max-none"), g("low-none"), g(TODAY)],
        |x| {
            (
                x[0] < 0.5 * x[2] && x[0] < 0.5 * x[3] && x[1] >= 0.8 * x[2],
                format!(
                    "ours: prop-bfq {} MB/s, bfq {} ({:.2}x max-none), bfq-kernel {}; max-none {}, low-none {}",
                    fmt_num(x[0]), fmt_num(x[1]), x[1] / x[2], fmt_num(x[4]), fmt_num(x[2]), fmt_num(x[3])
                ),
            )
        },
    )
    .cite(FIG3)
    .cause_unless_holds(|| {
        let x: Vec<f64> = [PROP, BEST, "max-none", "low-none"].iter().map(|c| g(c).unwrap_or(f64::NAN)).collect();
        let what = failed(&[
            ("prop-bfq < 50% of max-none's and low-none's", x[0] < 0.5 * x[2] && x[0] < 0.5 * x[3]),
            (&format!("bfq >= 0.8x max-none (ours {:.2}x)", x[1] / x[2]), x[1] >= 0.8 * x[2]),
        ]);
        let what = format!("{what}; {}", share_bound(e, x[2]));
        measured(e, V3, what, &[PROP, BEST, TODAY, "max-none"])
    })
}

/// The most a total can be in the random-only workload while the target
/// keeps its weight's share (300 of 700): a depth-1 random reader gets no
/// faster than alone, so the total is at most its rate alone x 7/3.
fn share_bound(e: &ExpResult, max_none: f64) -> String {
    let alone = val(e, V3, TARGET_ALONE, "total").unwrap_or(f64::NAN);
    let bound = alone * 7.0 / 3.0;
    let share = |c: &str| {
        let t = val(e, V3, c, "target").unwrap_or(f64::NAN);
        100.0 * t / val(e, V3, c, "total").unwrap_or(f64::NAN)
    };
    format!(
        "with the target at its weight's share (42.9%) the total is at most its rate alone x 7/3 = {} MB/s ({:.2}x max-none), so 0.8x needs the target below its share (bfq gives it {:.1}% of the total, bfq-kernel {:.1}%)",
        fmt_num(bound),
        bound / max_none,
        share(BEST),
        share(TODAY)
    )
}

fn static_rand_seq_target(e: &ExpResult) -> Finding {
    let g = |c: &str| val(e, V4, c, "total");
    need(
        "Static random, sequential target: the improved bfq reaches about 3.7 times the total of max-none (checked on `bfq`, this project's profile: 3.7x +- 15%; today's kernel, bfq-kernel, shown beside)",
        &[g(BEST), g("max-none"), g("low-none"), g(TODAY)],
        |x| {
            (
                near(x[0] / x[1], 3.7, 0.15),
                format!(
                    "ours: bfq {} MB/s = {:.2}x max-none's {} (low-none {}); bfq-kernel {:.2}x",
                    fmt_num(x[0]), x[0] / x[1], fmt_num(x[1]), fmt_num(x[2]), x[3] / x[1]
                ),
            )
        },
    )
    .cite(FIG3)
    .cause_unless_holds(|| {
        let r = g(BEST).unwrap_or(f64::NAN) / g("max-none").unwrap_or(f64::NAN);
        let what = if r > 3.7 {
            format!("bfq's total is {r:.2}x max-none's, above the article's 3.7x (+ 15%): the sequential target, with B_max at T_max x the learned rate (below), keeps the device in turns of T_max and its reads are the most productive")
        } else {
            format!("bfq's total is {r:.2}x max-none's, below the article's 3.7x (- 15%)")
        };
        measured(e, V4, what, &[BEST, TODAY, "max-none"])
    })
}

fn dynamic_rand(e: &ExpResult) -> Finding {
    let v5 = V5;
    let cs = ["low-none", "max-none", PROP];
    let vals: Vec<Val> = cs.iter().map(|c| val(e, v5, c, "target")).collect();
    need(
        "Dynamic sequential/random, random target: no policy meets the target's 10 MB/s",
        &vals,
        |x| {
            (
                x.iter().all(|&t| t < TARGET_NEED),
                format!("ours: target under low-none {} MB/s, max-none {}, prop-bfq {}", fmt_num(x[0]), fmt_num(x[1]), fmt_num(x[2])),
            )
        },
    )
    .cite("2018 article, Sec. 9, Fig. 4 (dynamic sequential/random)")
    .cause_unless_holds(|| {
        let met: Vec<String> = cs
            .iter()
            .filter_map(|c| val(e, v5, c, "target").filter(|t| *t >= TARGET_NEED).map(|t| format!("{c} {}", fmt_num(t))))
            .collect();
        measured(
            e,
            v5,
            format!("a policy gives the random target its 10 MB/s: {} MB/s (the article: \"it is just a matter of assigning proper weights\" for prop-bfq; why the article's prop-bfq did not cannot be compared, its run is not available)", met.join(", ")),
            &cs,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attainable_is_the_time_share_the_target_needs() {
        // The article's drive: a sync random reader alone 23 MB/s,
        // sequential readers ~500 MB/s: 10/23 of the time for the target.
        let a = attainable(23.0, 500.0);
        assert!((a - (10.0 + 13.0 / 23.0 * 500.0)).abs() < 1e-9, "{a}");
        // A target that cannot reach 10 MB/s alone takes all the time.
        assert_eq!(attainable(5.0, 486.0), 5.0);
    }
}
