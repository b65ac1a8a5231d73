//! Experiments on real storage (`bfq suite --target PATH`), through the
//! io_uring engine with the project's schedulers and, on a block device as
//! root, the kernel's schedulers on the same device in the same run.
//!
//! `real-fairness`: the 2010 paper's weighted-fairness setting (Table III
//! and IV: greedy sequential readers of separate files, 2 readers with
//! weights 100:300 and 5 with 1:2:3:4:5) on the target, measuring each
//! reader's share of the bytes against its weight's share.

use crate::check::{need, val};
use crate::model::*;
use bfq_core::Settings;
use bfq_real::{Backend, FlowDesc, Pattern, RunConfig};
use std::time::Duration;

/// Every real-storage experiment, in report order.
pub fn experiments() -> Vec<Experiment> {
    vec![fairness()]
}

fn fairness() -> Experiment {
    Experiment {
        id: "real-fairness",
        title: "Weighted fairness of greedy sequential readers on real storage",
        source: "2010 paper, Section V-D, Tables III-IV (setting)",
        device: "the --target file or block device",
        what: "Greedy synchronous sequential readers of 64 KiB requests, each over its own equal slice of the target, O_DIRECT, 6 s (2 s with --quick): 2 readers with weights 100:300, and 5 with 100..500 (1:2:3:4:5). Engine schedulers run through the io_uring engine (device queue depth 64); kernel:* run each reader in its own blkio cgroup with that weight (needs root and a block device).",
        metrics: vec![
            metric("dev", "Worst deviation from the weighted share", "%", true),
            metric("agg", "Aggregate throughput", "MB/s", true),
        ],
        variants: vec![var("2r-100-300", "2 readers 100:300"), var("5r-1-5", "5 readers 1:2:3:4:5")],
        configs: vec![
            cfg("bfq", "bfq", &[]),
            cfg("bfq injection=0", "bfq", &[("injection", "0")]),
            cfg("bfq-2010 idle", "bfq-2010", &[("idle_on_queueing_devices", "1")]),
            cfg("fifo", "fifo", &[]),
            cfg("kernel:bfq", "kernel:bfq", &[]),
            cfg("kernel:none", "kernel:none", &[]),
        ],
        reps: 3,
        in_quick: true,
        quick_variants: vec![],
        run: run_fairness,
        findings: find_fairness,
    }
}

fn run_fairness(v: &Variant, c: &Config, ctx: &Ctx) -> anyhow::Result<RunOut> {
    let Some(target) = &ctx.target else {
        anyhow::bail!("real-storage experiment without --target");
    };
    let weights: &[u32] = if v.id == "2r-100-300" {
        &[100, 300]
    } else {
        &[100, 200, 300, 400, 500]
    };
    let flows: Vec<FlowDesc> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let mut f = FlowDesc::reader(&format!("r{i}-w{w}"), Pattern::Seq, 64 << 10);
            f.weight = Some(w);
            f
        })
        .collect();
    let settings = Settings::from_pairs(c.settings.iter().map(|(k, v)| (k.clone(), v.clone())));
    let secs = if ctx.quick { 2 } else { 6 };
    let cfg = RunConfig::new(
        target,
        Backend::parse(&c.scheduler, settings),
        Duration::from_secs(secs),
    );
    let r = bfq_real::run(&cfg, &flows)?;
    let mut out = RunOut::default();
    out.notes
        .extend(r.engine.as_ref().and_then(bfq_real::ring_setup_warning));
    out.metrics
        .insert("dev".into(), 100.0 * r.worst_share_error());
    out.metrics.insert(
        "agg".into(),
        r.total_bytes() as f64 / 1e6 / r.seconds.max(1e-9),
    );
    Ok(out)
}

fn find_fairness(e: &ExpResult) -> Vec<Finding> {
    ["2r-100-300", "5r-1-5"]
        .iter()
        .map(|v| {
            let g = |c: &str| val(e, v, c, "dev");
            need(
                &format!("{v}: BFQ gives each reader its weighted share within 5%, and its worst deviation is at most kernel:bfq's + 1 point on the same device"),
                &[g("bfq"), g("kernel:bfq")],
                |x| {
                    (
                        x[0] <= 5.0 && x[0] <= x[1] + 1.0,
                        format!("worst deviation: bfq {:.1}%, kernel:bfq {:.1}%", x[0], x[1]),
                    )
                },
            )
            .cite("2010 paper, Tables III-IV, Sec. V-D (setting, on this device)")
            .cause_unless_holds(|| {
                Cause::new(
                    CauseKind::Scheduler,
                    format!(
                        "on this device: bfq {:.1}%, kernel:bfq {:.1}% worst deviation",
                        g("bfq").unwrap_or(f64::NAN),
                        g("kernel:bfq").unwrap_or(f64::NAN)
                    ),
                )
            })
        })
        .collect()
}
