//! The 2018 article's comparison of I/O control policies on a SATA SSD
//! (preset `ssd-plextor-m5s`): Table 1 workload groups, Table 2
//! configurations, Figs. 1-4.

use crate::exp2010::need;
use crate::model::*;
use crate::scen::{self, header, region};
use crate::stats::fmt_num;
use std::fmt::Write as _;

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

fn configs() -> Vec<Config> {
    let mut low = cfg("low-none", "throttle-low", &[]);
    low.settings = limits("low_bps", "10M", "10M", "20M");
    let mut max = cfg("max-none", "throttle-max", &[]);
    max.settings = limits("max_bps", "10M", "15M", "25M");
    vec![
        cfg("none (no I/O control)", "fifo", &[]),
        low,
        max,
        // The article's bfq plugs dispatching for a sync process with a
        // differentiated weight even on a queueing device (guarantee
        // idling, on in the `bfq` profile) and has no injection; today's
        // `bfq` (with injection, the article's "improved version") fills
        // those idle periods with other flows' requests.
        cfg("prop-bfq", "bfq", &[("injection", "0")]),
        cfg("prop-bfq (today's bfq)", "bfq", &[]),
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

pub fn io_control() -> Experiment {
    Experiment {
        id: "2018-io-control",
        title: "Throttling vs proportional share: target, interferers and total throughput",
        source: "2018 article, Tables 1-2, Figs. 1-4",
        device: DEV,
        what: "One target (a sync reader, random 4 kB or sequential) and four active interferers, each in its own group, plus five groups that never do I/O. Interferers per Table 1: four sequential sync readers or writers; one sequential and three random (4k, 128k, 1024k) readers or writers; four random 4 kB readers; or two sporadic readers and two sporadic writers (ON 4-64 MB, OFF 50-500 ms). Writers are async with 32 requests in flight in their group (the article's buffered writes, with cgroup writeback). Policies per Table 2: low-none (low limits 10/10/20 MB/s), max-none (max limits 10/15/25 MB/s), prop-bfq (weights 300/100/200; bfq without injection: it idles for the weighted sync queues on the queueing device, as the article's bfq did), today's bfq (the same with injection: the article's \"improved version\"), and none. 10 s per run (3 s with --quick).",
        metrics: vec![
            metric("target", "Target throughput", "MB/s", true),
            metric("interferers", "Interferers' throughput", "MB/s", false),
            metric("total", "Total throughput", "MB/s", true),
        ],
        variants: VARIANTS.iter().map(|(i, l)| var(i, l)).collect(),
        configs: configs(),
        reps: 5,
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

fn run_io_control(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let (inter, target) = v.id.split_once('/').unwrap_or((&v.id, "rand-target"));
    let dur = if ctx.quick { 3.0 } else { 10.0 };
    let mut s = header(
        &format!("2018 {} {}", v.label, c.label),
        dur,
        ctx,
        DEV,
        "",
        c,
    );
    let prop = c.scheduler == "bfq";
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
    for i in 1..=4u64 {
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
    let r = scen::run(&s, &format!("2018/{}--{}", v.id, c.label), ctx)?;
    let mut out = RunOut::default();
    let t = scen::rate_where(&r, |f| f.name == "target");
    let i = scen::rate_where(&r, |f| f.name.starts_with("interferer"));
    out.metrics.insert("target".into(), t);
    out.metrics.insert("interferers".into(), i);
    out.metrics.insert("total".into(), t + i);
    out.cdf = r
        .flows
        .iter()
        .find(|f| f.name == "target")
        .map(|f| f.latency_cdf_ms.clone());
    Ok(out)
}

fn find_io_control(e: &ExpResult) -> Vec<Finding> {
    let g = |v: &str, c: &str, k: &str| e.mean(v, c, k);
    let v1 = "seq-readers/rand-target";
    let mut out = vec![need(
        "Random target vs sequential readers: low-none guarantees ~10 MB/s to the target but its total is far below no control (paper: < 10% of it); prop-bfq's total is much higher than low-none's and max-none's",
        &[
            g(v1, "low-none", "target"),
            g(v1, "low-none", "total"),
            g(v1, "none (no I/O control)", "total"),
            g(v1, "max-none", "total"),
            g(v1, "prop-bfq", "total"),
        ],
        |x| {
            (
                x[0] >= 9.0 && x[1] < 0.2 * x[2] && x[4] > x[1] && x[4] > x[3],
                format!(
                    "ours: low-none target {} MB/s, total {} ({:.0}% of none's {}); max-none total {}; prop-bfq total {}",
                    fmt_num(x[0]),
                    fmt_num(x[1]),
                    100.0 * x[1] / x[2],
                    fmt_num(x[2]),
                    fmt_num(x[3]),
                    fmt_num(x[4])
                ),
            )
        },
    )
    .cite("2018 article, Fig. 1, Sec. 4 (static sequential)")
    .cause_unless_holds(|| {
        Cause::new(
            CauseKind::Scheduler,
            format!(
                "our throttling policies do not collapse the total as the article's did: low-none {} MB/s, max-none {}, none {}, prop-bfq {}",
                fmt_num(g(v1, "low-none", "total").unwrap_or(f64::NAN)),
                fmt_num(g(v1, "max-none", "total").unwrap_or(f64::NAN)),
                fmt_num(g(v1, "none (no I/O control)", "total").unwrap_or(f64::NAN)),
                fmt_num(g(v1, "prop-bfq", "total").unwrap_or(f64::NAN))
            ),
        )
    })];
    out.push(need(
        "prop-bfq gives the target at least the 10 MB/s the other policies are configured for, with reader interferers",
        &[g(v1, "prop-bfq", "target"), g("seq-readers/seq-target", "prop-bfq", "target")],
        |x| {
            (
                x[0] >= 9.5 && x[1] >= 9.5,
                format!("ours: random target {} MB/s, sequential target {} MB/s", fmt_num(x[0]), fmt_num(x[1])),
            )
        },
    )
    .cite("2018 article, Fig. 1, Sec. 4 (static sequential)")
    .cause_unless_holds(|| {
        Cause::new(
            CauseKind::Scheduler,
            format!(
                "prop-bfq's target: {} MB/s (random), {} (sequential)",
                fmt_num(g(v1, "prop-bfq", "target").unwrap_or(f64::NAN)),
                fmt_num(g("seq-readers/seq-target", "prop-bfq", "target").unwrap_or(f64::NAN))
            ),
        )
    }));
    let v3 = "rand-readers/rand-target";
    out.push(need(
        "Static random: the 2018 bfq (idling for its weighted sync queues) reaches a much lower total than throttling; the improved bfq (today's, with injection) recovers most of it",
        &[
            g(v3, "prop-bfq", "total"),
            g(v3, "prop-bfq (today's bfq)", "total"),
            g(v3, "max-none", "total"),
            g(v3, "low-none", "total"),
        ],
        |x| {
            let thr = x[2].max(x[3]);
            (
                x[0] < 0.8 * thr && x[1] >= 0.7 * thr,
                format!(
                    "ours: prop-bfq {} MB/s, today's bfq {}; max-none {}, low-none {}",
                    fmt_num(x[0]),
                    fmt_num(x[1]),
                    fmt_num(x[2]),
                    fmt_num(x[3])
                ),
            )
        },
    )
    .cite("2018 article, Fig. 3, Sec. 4 (static random)")
    .cause_unless_holds(|| {
        Cause::new(
            CauseKind::Scheduler,
            format!(
                "totals: prop-bfq {} MB/s, today's bfq {}, max-none {}, low-none {}",
                fmt_num(g(v3, "prop-bfq", "total").unwrap_or(f64::NAN)),
                fmt_num(g(v3, "prop-bfq (today's bfq)", "total").unwrap_or(f64::NAN)),
                fmt_num(g(v3, "max-none", "total").unwrap_or(f64::NAN)),
                fmt_num(g(v3, "low-none", "total").unwrap_or(f64::NAN))
            ),
        )
    }));
    out
}
