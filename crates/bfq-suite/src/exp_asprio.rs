//! "Anticipatory scheduler with I/O priorities" (cited in the README), its
//! Section 4 experiments 1-4 (Figs. 1-6): the latency of a main job alone,
//! beside an antagonist at the same priority, and beside an antagonist of
//! lower priority, under `as-prio`. The paper's SATA drive (8 MB cache,
//! ~66 MB/s) is stood in for by the MAXTOR 6L080L0 preset (55 MB/s, no
//! NCQ).

use crate::check::{list, max, min, n, near};
use crate::check::{need, val, Val};
use crate::model::*;
use crate::scen::{self, header, region};
use crate::service::Service;
use std::fmt::Write as _;

const DEV: &str = "maxtor-6l080l0";
/// Fig. 6's foreground: 64 kB every 16 ms (4096 kB/s).
const FG_EVERY_MS: u64 = 16;
/// Fig. 6's foreground rate, MB/s.
const FG_MB_S: f64 = 65536.0 / (FG_EVERY_MS as f64 / 1000.0) / 1e6;
const CFG: &str = "as-prio";

/// (figure, block, pattern) of the variant families.
fn family(f: &str) -> (&'static str, &'static str) {
    match f {
        "f1" => ("4k", "rand"),
        "f2" => ("64k", "seq"),
        "f4" => ("4k", "rand"),
        "f5" => ("1M", "rand"),
        _ => ("64k", "seq"),
    }
}

fn variants() -> Vec<Variant> {
    let mut v = vec![];
    for f in ["f1", "f2"] {
        let what = if f == "f1" {
            "random 4 kB reads"
        } else {
            "sequential 64 kB reads"
        };
        v.push(var(&format!("{f}/single"), &format!("{what}: alone")));
        v.push(var(
            &format!("{f}/same-1"),
            &format!("{what}: + antagonist"),
        ));
        v.push(var(
            &format!("{f}/low-1"),
            &format!("{what}: + low-priority antagonist"),
        ));
    }
    for (f, what) in [("f4", "4 kB"), ("f5", "1 MB")] {
        for p in ["same", "low"] {
            for k in [1, 2, 4, 8] {
                v.push(var(
                    &format!("{f}/{p}-{k}"),
                    &format!(
                        "{what} direct: {k} {}antagonist{}",
                        if p == "low" { "low-priority " } else { "" },
                        if k > 1 { "s" } else { "" }
                    ),
                ));
            }
        }
    }
    for p in ["same", "low"] {
        for (r, l) in [
            ("100k", "100 kB/s"),
            ("1M", "1 MB/s"),
            ("4M", "4 MB/s"),
            ("max", "greedy"),
        ] {
            v.push(var(
                &format!("f6/{p}-{r}"),
                &format!(
                    "4 MB/s reader, {}background {l}",
                    if p == "low" { "low-priority " } else { "" }
                ),
            ));
        }
    }
    v
}

/// `asprio-isolation`: latency isolation with I/O priorities in the anticipatory scheduler (Sec. 4, Figs. 1-6).
pub fn latency_isolation() -> Experiment {
    Experiment {
        id: "asprio-isolation",
        title: "Latency isolation with I/O priorities in the anticipatory scheduler",
        source: "Anticipatory scheduler with I/O priorities, Section 4, Figs. 1-6",
        device: DEV,
        what: "as-prio; the main job at best-effort level 0 and its antagonists at level 0 (same priority) or level 7 (low priority), each on its own 2 GB file. Fig. 1: random 4 kB sync reads, alone, with one antagonist doing the same. Fig. 2: sequential 64 kB sync reads likewise. Figs. 4-5: random direct reads of 4 kB or 1 MB with 1, 2, 4 or 8 antagonists. Fig. 6: the main job reads 64 kB every 16 ms (4 MB/s) sequentially while a background sequential reader is limited to 100 kB/s, 1 MB/s, 4 MB/s or runs greedily. 20 s per run (8 s with --quick). Latency = the main job's request completion time.",
        metrics: vec![
            metric("mean_ms", "Main job's mean latency", "ms", true),
            metric("max_ms", "Main job's worst latency", "ms", true),
            metric("bg", "Antagonists' throughput", "MB/s", false),
            metric("bg_run_ms", "Antagonists' dispatch run (time holding the disk)", "ms", false),
            metric("bg_run_reqs", "Antagonists' requests per dispatch run", "requests", false),
            metric("bg_runs_per_main", "Antagonists' dispatch runs per main-job request", "runs", false),
            metric("main_run_ms", "Main job's dispatch run (time holding the disk)", "ms", false),
            metric("main_share", "Main job's share of the disk's time", "%", false),
            metric("main_wait_ms", "Main job's mean wait in the scheduler", "ms", false),
            metric("worst_wait_ms", "Main job's longest wait in the scheduler", "ms", false),
            metric("worst_wait_others", "Antagonists' requests dispatched during that wait", "requests", false),
        ],
        variants: variants(),
        configs: vec![cfg(CFG, CFG, &[])],
        reps: 3,
        in_quick: false,
        quick_variants: vec![],
        run,
        findings,
    }
}

fn flow(s: &mut String, name: &str, level: u32, block: &str, pattern: &str, k: u64, extra: &str) {
    let _ = write!(
        s,
        "\n[[flow]]\nname = \"{name}\"\nclass = \"be\"\nlevel = {level}\npattern = \"{pattern}\"\nblock = \"{block}\"\n{extra}region = {}\n",
        region(k * (4 << 30), 2 << 30)
    );
}

fn run(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let bad = || anyhow::anyhow!("asprio-isolation: bad variant id '{}'", v.id);
    let (fam, rest) = v.id.split_once('/').ok_or_else(bad)?;
    let (block, pattern) = family(fam);
    let dur = if ctx.quick { 8.0 } else { 20.0 };
    let mut s = header(
        &format!("asprio {} {}", v.label, c.label),
        dur,
        ctx,
        DEV,
        "",
        c,
    );
    let (prio, arg) = rest.split_once('-').unwrap_or((rest, "0"));
    let low = if prio == "low" { 7 } else { 0 };
    if fam == "f6" {
        flow(
            &mut s,
            "main",
            0,
            "64k",
            "seq",
            0,
            &format!("periodic = {{ every = \"{FG_EVERY_MS}ms\", bytes = \"64k\", deadline = \"1s\" }}\n"),
        );
        let every = match arg {
            "100k" => Some("640ms"),
            "1M" => Some("64ms"),
            "4M" => Some("16ms"),
            _ => None,
        };
        let extra = every
            .map(|e| {
                format!("periodic = {{ every = \"{e}\", bytes = \"64k\", deadline = \"10s\" }}\n")
            })
            .unwrap_or_default();
        flow(&mut s, "bg1", low, "64k", "seq", 1, &extra);
    } else {
        flow(&mut s, "main", 0, block, pattern, 0, "");
        let k: u64 = if prio == "single" {
            0
        } else {
            arg.parse().map_err(|_| bad())?
        };
        for i in 1..=k {
            flow(&mut s, &format!("bg{i}"), low, block, pattern, i, "");
        }
    }
    let (r, svc) = scen::run_traced(&s, &format!("asprio/{}--{}", v.id, c.label), ctx)?;
    let mut out = RunOut::default();
    let main_reqs = r.flows.iter().find(|f| f.name == "main").map(|m| {
        out.metrics.insert("mean_ms".into(), m.latency_ms.mean);
        out.metrics.insert("max_ms".into(), m.latency_ms.max);
        m.requests
    });
    out.metrics.insert(
        "bg".into(),
        scen::rate_where(&r, |f| f.name.starts_with("bg")),
    );
    service_metrics(&mut out, &svc, main_reqs.unwrap_or(0));
    Ok(out)
}

/// How the disk went to the main job and its antagonists (from the trace):
/// the antagonists' dispatch runs, each of which a main-job request
/// arriving as it starts waits for; the main job's own runs and waits.
fn service_metrics(out: &mut RunOut, svc: &Service, main_reqs: u64) {
    let bg = |f: &str| f.starts_with("bg");
    let (worst, others) = svc.worst_wait("main");
    let runs_per_main = svc.runs(bg) as f64 / main_reqs as f64;
    for (k, x) in [
        ("bg_run_ms", svc.mean_run_ms(bg)),
        ("bg_run_reqs", svc.mean_run_reqs(bg)),
        ("bg_runs_per_main", runs_per_main),
        ("main_run_ms", svc.mean_run_ms(|f| f == "main")),
        ("main_share", 100.0 * svc.time_share(|f| f == "main")),
        ("main_wait_ms", svc.mean_wait_ms("main")),
        ("worst_wait_ms", worst),
        ("worst_wait_others", others as f64),
    ] {
        if x.is_finite() {
            out.metrics.insert(k.into(), x);
        }
    }
}

fn findings(e: &ExpResult) -> Vec<Finding> {
    let mut out = vec![];
    for (f, fig, max_factor, what) in [
        ("f1", "Fig. 1", 2.0, "random"),
        ("f2", "Fig. 2", 4.0, "sequential"),
    ] {
        out.extend(one_antagonist(e, f, fig, max_factor, what));
    }
    out.push(fig4_same(e));
    for (f, fig, what) in [("f4", "Fig. 4", "4 kB"), ("f5", "Fig. 5", "1 MB")] {
        out.push(low_constant(e, f, fig, what));
    }
    out.push(fig6_rate(e));
    out.push(fig6_background(e));
    out
}

fn g(e: &ExpResult, v: &str, k: &str) -> Val {
    val(e, v, CFG, k)
}

fn cite(fig: &str, part: &str) -> String {
    format!("Anticipatory scheduler with I/O priorities, {fig}, Sec. 4 ({part})")
}

/// Figs. 1-2: the job alone, beside an antagonist at the same priority and
/// beside one at a lower priority.
fn one_antagonist(e: &ExpResult, f: &str, fig: &str, max_factor: f64, what: &str) -> [Finding; 2] {
    let vs = ["single", "same-1", "low-1"];
    let lat = |k: &str| {
        vs.iter()
            .map(|v| g(e, &format!("{f}/{v}"), k))
            .collect::<Vec<_>>()
    };
    let mut vals = lat("mean_ms");
    vals.extend(lat("max_ms"));
    let txt = vs
        .iter()
        .map(|v| {
            let x = |k: &str| g(e, &format!("{f}/{v}"), k).map(n).unwrap_or_default();
            format!("{v}: mean {} / max {} ms", x("mean_ms"), x("max_ms"))
        })
        .collect::<Vec<_>>()
        .join("; ");
    let cause = || Cause::new(CauseKind::Scheduler, format!("ours: {txt}"));
    let same = need(
        &format!("{what} reads: an antagonist at the same priority about doubles the main job's mean latency (2x +- 35%) and raises its worst latency more than {max_factor}x"),
        &vals,
        |x| {
            (
                near(x[1] / x[0], 2.0, 0.35) && x[4] > max_factor * x[3],
                format!("ours: mean {:.2}x, worst {:.2}x the job alone", x[1] / x[0], x[4] / x[3]),
            )
        },
    )
    .cite(&cite(fig, "1"))
    .cause_unless_holds(cause);
    let low = need(
        &format!("{what} reads: with the antagonist at a lower priority the main job's mean and worst latency are close to its latency alone (within 25%)"),
        &vals,
        |x| {
            (
                near(x[2], x[0], 0.25) && near(x[5], x[3], 0.25),
                format!("ours: mean {:.2}x, worst {:.2}x the job alone", x[2] / x[0], x[5] / x[3]),
            )
        },
    )
    .cite(&cite(fig, "1"))
    .cause_unless_holds(|| Cause::new(CauseKind::Scheduler, format!("ours: {txt}. {}", low_priority_runs(e, f))));
    [same, low]
}

/// `metric` of variant `v` as the report prints it.
fn x(e: &ExpResult, v: &str, metric: &str) -> String {
    g(e, v, metric).map(n).unwrap_or_default()
}

/// A count (a mean over the repetitions) of variant `v`, to a tenth.
fn count(e: &ExpResult, v: &str, metric: &str) -> String {
    g(e, v, metric)
        .map(|c| format!("{c:.1}"))
        .unwrap_or_default()
}

/// How the lower-priority antagonist of family `f` delays the main job:
/// its dispatch runs and the main job's longest wait behind one.
fn low_priority_runs(e: &ExpResult, f: &str) -> String {
    let v = format!("{f}/low-1");
    let per = g(e, &v, "bg_runs_per_main").map_or(String::new(), |r| format!("{:.0}", 1.0 / r));
    format!(
        "The antagonist reaches the disk in dispatch runs of {} requests, each holding it {} ms: a batch of its level's tokens, once the main job's level has used its own (our defaults: 32 for level 0, 4 for level 7; the paper gives no values). There is one run per {per} main-job requests, and the main job's next read, issued as its previous one completes, arrives as the run starts and waits for all of it: its longest wait {} ms, behind the request on the disk and {} more dispatched before it. As the main job reads back to back, each antagonist request served is on the disk when one of its reads arrives, so only an antagonist never served would keep the worst latency at the job's alone, and the paper's design serves it (Sec. 3: priorities 'prevent starvation of a low priority one'; its Table 3: a low-priority antagonist raises the main job's worst latency from 32 to 46 ms)",
        count(e, &v, "bg_run_reqs"),
        x(e, &v, "bg_run_ms"),
        x(e, &v, "worst_wait_ms"),
        count(e, &v, "worst_wait_others"),
    )
}

/// Metric `k` of family `f` at priority `p` with 1, 2, 4 and 8 antagonists.
fn scaling(e: &ExpResult, f: &str, p: &str, k: &str) -> Vec<Val> {
    [1, 2, 4, 8]
        .iter()
        .map(|a| g(e, &format!("{f}/{p}-{a}"), k))
        .collect()
}

fn scaling_txt(e: &ExpResult, f: &str, p: &str, k: &str) -> String {
    list(&scaling(e, f, p, k).iter().map(|x| **x).collect::<Vec<_>>())
}

fn fig4_same(e: &ExpResult) -> Finding {
    let mut f4 = scaling(e, "f4", "same", "mean_ms");
    f4.extend(scaling(e, "f4", "same", "max_ms"));
    let txt = || {
        format!(
            "mean {} ms; max {} ms",
            scaling_txt(e, "f4", "same", "mean_ms"),
            scaling_txt(e, "f4", "same", "max_ms")
        )
    };
    need(
        "4 kB direct reads, antagonists at the same priority: the main job's latency, both mean and maximum, roughly doubles with each doubling of the antagonists (each step 1.4x-2.8x, from 1 to 8)",
        &f4,
        |x| {
            let ok = x[..4].windows(2).chain(x[4..].windows(2)).all(|w| (1.4..=2.8).contains(&(w[1] / w[0])));
            (ok, format!("ours (1/2/4/8 antagonists): {}", txt()))
        },
    )
    .cite(&cite("Fig. 4", "3"))
    .cause_unless_holds(|| Cause::new(CauseKind::Scheduler, format!("ours: {}. {}", txt(), fig4_worst_waits(e))))
}

/// Where the main job's worst latency beside 1-8 same-priority
/// antagonists comes from: its longest wait and what passed it.
fn fig4_worst_waits(e: &ExpResult) -> String {
    format!(
        "The main job's longest wait in the scheduler is {} ms, with {} antagonist requests dispatched before it: with few antagonists the one-way elevator passes its request over (the sweep serves the antagonists' requests ahead of the head first) for up to about read_expire (125 ms); with more the FIFO expiry rescues it, checked once per read_expire as in Linux, so the wait reaches up to about twice read_expire plus the request in service, and the worst latency grows by less than 2x a step",
        scaling_txt(e, "f4", "same", "worst_wait_ms"),
        scaling(e, "f4", "same", "worst_wait_others")
            .iter()
            .map(|c| c.map(|c| format!("{c:.1}")).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" / "),
    )
}

fn low_constant(e: &ExpResult, f: &str, fig: &str, what: &str) -> Finding {
    let txt = scaling_txt(e, f, "low", "mean_ms");
    need(
        &format!("{what} direct reads, antagonists at a lower priority: the main job's mean latency stays about constant from 1 to 8 antagonists (the largest at most 1.5x the smallest)"),
        &scaling(e, f, "low", "mean_ms"),
        |x| (max(x) <= 1.5 * min(x), format!("ours (1/2/4/8 antagonists, ms): {txt}")),
    )
    .cite(&cite(fig, "3"))
    .cause_unless_holds(|| Cause::new(CauseKind::Scheduler, format!("ours (ms): {txt}")))
}

fn f6(e: &ExpResult, p: &str, r: &str, k: &str) -> Val {
    g(e, &format!("f6/{p}-{r}"), k)
}

fn fig6_rate(e: &ExpResult) -> Finding {
    let f6_txt = |p: &str| {
        ["100k", "1M", "4M", "max"]
            .iter()
            .map(|r| {
                let x = |k: &str| f6(e, p, r, k).map(n).unwrap_or_default();
                format!("{r}: {} / {} ms", x("mean_ms"), x("max_ms"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let cells = [
        ("same", "100k"),
        ("same", "max"),
        ("low", "100k"),
        ("low", "max"),
    ];
    let mut vals: Vec<Val> = cells.iter().map(|(p, r)| f6(e, p, r, "mean_ms")).collect();
    vals.extend(cells.iter().map(|(p, r)| f6(e, p, r, "max_ms")));
    need(
        "Rate-limited background: without priorities the 4 MB/s reader's mean and maximum latency at least double once the background reaches its rate; with the background at a lower priority both stay within 25% of their values beside a 100 kB/s background even when the background runs greedily",
        &vals,
        |x| {
            let (mean, worst) = (&x[..4], &x[4..]);
            let ok = |y: &[f64]| y[1] >= 2.0 * y[0] && y[3] <= 1.25 * y[2];
            (
                ok(mean) && ok(worst),
                format!(
                    "ours: mean: same priority {:.2}x, lower priority {:.2}x; maximum: same priority {:.2}x, lower priority {:.2}x",
                    mean[1] / mean[0], mean[3] / mean[2], worst[1] / worst[0], worst[3] / worst[2]
                ),
            )
        },
    )
    .cite(&cite("Fig. 6", "4"))
    .cause_unless_holds(|| Cause::new(CauseKind::DeviceModel, format!("ours (mean / max): same priority {}; lower priority {}. {}", f6_txt("same"), f6_txt("low"), fig6_low_service(e))))
}

/// Where the 4 MB/s reader's latency beside the greedy lower-priority
/// background goes: its wait in the scheduler and its own time on the disk.
fn fig6_low_service(e: &ExpResult) -> String {
    format!(
        "Beside the greedy lower-priority background the reader's request waits {} ms on average in the scheduler (the background's request on the disk: the reader's think time, from a completion to its next read, is longer than antic_expire = 6 ms, so as-prio does not keep the disk for it, Sec. 3's think-time rule) and then holds the disk {} ms (a seek from the background's file, a rotation and the transfer), where beside the 100 kB/s background its whole latency is {} ms (mostly the drive's read-ahead buffer); the paper's drive served its reads beside a ~66 MB/s background without the foreground's latency rising",
        x(e, "f6/low-max", "main_wait_ms"),
        x(e, "f6/low-max", "main_run_ms"),
        x(e, "f6/low-100k", "mean_ms"),
    )
}

fn fig6_background(e: &ExpResult) -> Finding {
    let bg = f6(e, "low", "max", "bg");
    need(
        "With the background at a lower priority the drive serves many times the foreground's 4 MB/s of background traffic (paper: ~66 MB/s, 16x): 16x +- 25%",
        std::slice::from_ref(&bg),
        |x| (near(x[0] / FG_MB_S, 16.0, 0.25), format!("ours: background {} MB/s ({:.1}x)", n(x[0]), x[0] / FG_MB_S)),
    )
    .cite(&cite("Fig. 6", "4"))
    .cause_unless_holds(|| {
        Cause::new(
            CauseKind::DeviceModel,
            format!(
                "our stand-in drive ({DEV}: {} MB/s at its outer edge, the paper's ~66), with the foreground's file read every {FG_EVERY_MS} ms, gives the greedy background {} MB/s beside the {} MB/s reader: each of the reader's requests holds the disk {} ms (a seek away from the background's file and a rotation), {}% of the disk's time, and the background's next run starts with a seek back",
                scen::disk_peak_mb_s(DEV).map(n).unwrap_or_default(),
                bg.map(n).unwrap_or_default(),
                n(FG_MB_S),
                x(e, "f6/low-max", "main_run_ms"),
                x(e, "f6/low-max", "main_share"),
            ),
        )
    })
}
