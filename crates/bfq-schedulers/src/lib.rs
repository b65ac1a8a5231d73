#![warn(missing_docs)]
//! # bfq-schedulers
//!
//! Every scheduler of the project, by name, behind the one
//! [`bfq_core::Scheduler`] interface. [`build`] is the registry the
//! simulator, the engine and the suite use.
//!
//! The baselines the BFQ papers compare against live here, one module
//! each; docs/schedulers.md describes each with its settings and sources.

pub mod anticipatory;
pub mod cfq;
pub mod clook;
pub mod deadline;
pub mod noop;
pub mod scan_edf;
pub mod throttle;
mod util;
pub mod yfq;

pub use util::Node;

use bfq_core::settings::SettingInfo;
use bfq_core::{Bfq, BfqConfig, Fifo, SchedError, Scheduler, Settings};

/// A scheduler the registry can build.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Name used by `--scheduler`.
    pub name: &'static str,
    /// One line for `bfq schedulers` and docs/schedulers.md.
    pub summary: &'static str,
}

/// Every name [`build`] accepts, with a one-line summary.
pub const SCHEDULERS: &[Entry] = &[
    Entry {
        name: "bfq",
        summary: "Budget Fair Queueing: today's kernel BFQ plus this project's rules for guarantees (bfq-core; docs/bfq-settings.md)",
    },
    Entry {
        name: "bfq-kernel",
        summary: "today's kernel BFQ exactly: every heuristic, kernel defaults, none of this project's rules",
    },
    Entry {
        name: "bfq-2018",
        summary: "Linux 4.18's BFQ, the 2018 article's prop-bfq: today's kernel without injection, async writes charged x10 in every scenario",
    },
    Entry {
        name: "bfq-plus-2014",
        summary: "BFQ+ as in the 2014 report: peak rate, budget feedback, fair charging, write throttling, low latency",
    },
    Entry {
        name: "bfq-2010",
        summary:
            "BFQ exactly as the 2010 paper: B-WF2Q+, linear budgets, T_wait idling, no heuristics",
    },
    Entry {
        name: "fifo",
        summary: "first come, first served; no idling (the kernel's `none` order)",
    },
    Entry {
        name: "noop",
        summary: "FIFO with back merging of contiguous requests (Linux noop)",
    },
    Entry {
        name: "clook",
        summary: "one global C-LOOK elevator, no idling",
    },
    Entry {
        name: "deadline",
        summary: "sorted lists plus read/write FIFOs with expiry, batches (Linux deadline)",
    },
    Entry {
        name: "as",
        summary:
            "anticipatory: one-way elevator, batches, idling for the last sync reader (Linux AS)",
    },
    Entry {
        name: "as-prio",
        summary: "anticipatory with I/O priorities: per-level lists and tokens (Gupta et al.)",
    },
    Entry {
        name: "cfq",
        summary:
            "Completely Fair Queueing: per-process time slices in round robin, idling (Linux CFQ)",
    },
    Entry {
        name: "cfq-2010",
        summary: "cfq with low_latency and workloads off by default (the 2010 paper's 2.6.21 had neither); nothing else differs",
    },
    Entry {
        name: "yfq",
        summary: "YFQ: batches of bt_size requests chosen by WFQ, C-LOOK within a batch",
    },
    Entry {
        name: "scan-edf",
        summary:
            "SCAN-EDF: per-flow relative deadlines rounded to delta, C-LOOK among equal deadlines",
    },
    Entry {
        name: "throttle-max",
        summary:
            "blk-throttle max limits: per-flow/per-group bandwidth and IOPS token buckets over FIFO",
    },
    Entry {
        name: "throttle-low",
        summary: "blk-throttle low limits: LOW (every group at its low limit) and MAX (low limits scaled up per slice), switched by the kernel's upgrade and downgrade checks",
    },
];

/// Builds scheduler `name` with `settings` (`key=value`, documented per
/// scheduler in docs/schedulers.md). Unknown names and unknown or invalid
/// settings are errors.
pub fn build(name: &str, settings: &Settings) -> Result<Box<dyn Scheduler>, SchedError> {
    let mut s = settings.clone();
    s.for_scheduler(name);
    let sched = construct(name, &mut s)?;
    s.finish()?;
    Ok(sched)
}

/// The settings scheduler `name` takes, with their kinds, valid ranges and
/// defaults (per-flow and per-group `NAME.fN` settings are not listed:
/// [`node_settings_of`] names them).
pub fn settings_of(name: &str) -> Result<Vec<SettingInfo>, SchedError> {
    let mut s = Settings::new();
    s.for_scheduler(name);
    construct(name, &mut s)?;
    Ok(s.read().to_vec())
}

/// The per-flow and per-group settings of scheduler `name`, by the
/// prefix of their keys (`PREFIX.fN` for flow `N`, `PREFIX.gN` for group
/// `N`; docs/schedulers.md, "Per-flow and per-group settings"): SCAN-EDF's
/// relative deadlines, blk-throttle's limits (max, and low with its idle
/// time and latency target). Empty for the others.
pub fn node_settings_of(name: &str) -> &'static [&'static str] {
    // throttle-max reads the first six (its max limits), throttle-low all.
    const THROTTLE: [&str; 14] = [
        "max_bps",
        "max_iops",
        "max_rbps",
        "max_riops",
        "max_wbps",
        "max_wiops",
        "low_bps",
        "low_iops",
        "low_rbps",
        "low_riops",
        "low_wbps",
        "low_wiops",
        "idle_time",
        "latency",
    ];
    match name {
        "scan-edf" => &["deadline"],
        "throttle-max" => &THROTTLE[..6],
        "throttle-low" => &THROTTLE,
        _ => &[],
    }
}

/// Every registered name, comma separated (for error messages).
pub fn names() -> String {
    SCHEDULERS
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn construct(name: &str, s: &mut Settings) -> Result<Box<dyn Scheduler>, SchedError> {
    let s = &mut *s;
    let sched: Box<dyn Scheduler> = match name {
        "bfq" | "bfq-kernel" | "bfq-2018" | "bfq-plus-2014" | "bfq-2010" => {
            let base = BfqConfig::profile(name).expect("listed profile");
            let cfg = BfqConfig::from_settings_on(base, s)?;
            let name: &'static str = match name {
                "bfq" => "bfq",
                "bfq-kernel" => "bfq-kernel",
                "bfq-2018" => "bfq-2018",
                "bfq-plus-2014" => "bfq-plus-2014",
                _ => "bfq-2010",
            };
            Box::new(Bfq::new(cfg).with_name(name))
        }
        "fifo" | "none" => Box::new(Fifo::new()),
        "noop" => Box::new(noop::Noop::new(s)?),
        "clook" => Box::new(clook::Clook::new(s)?),
        "deadline" => Box::new(deadline::Deadline::new(s)?),
        "as" => Box::new(anticipatory::Anticipatory::new(s, false)?),
        "as-prio" => Box::new(anticipatory::Anticipatory::new(s, true)?),
        "cfq" => Box::new(cfq::Cfq::new(s)?),
        "cfq-2010" => Box::new(cfq::Cfq::with_profile(s, cfq::Profile::Cfq2010)?),
        "yfq" => Box::new(yfq::Yfq::new(s)?),
        "scan-edf" => Box::new(scan_edf::ScanEdf::new(s)?),
        "throttle-max" => Box::new(throttle::Throttle::new(s, false)?),
        "throttle-low" => Box::new(throttle::Throttle::new(s, true)?),
        _ => return Err(SchedError::UnknownScheduler(name.to_string())),
    };
    Ok(sched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfq_2010_is_cfq_with_low_latency_and_workloads_off_by_default() {
        let e = SCHEDULERS.iter().find(|e| e.name == "cfq-2010").unwrap();
        assert!(
            e.summary
                .contains("low_latency and workloads off by default")
                && e.summary.contains("nothing else"),
            "{}",
            e.summary
        );
        // the profile, not the low_latency setting, names it
        let on = Settings::from_pairs([("low_latency", "1")]);
        assert_eq!(build("cfq-2010", &on).unwrap().name(), "cfq-2010");
        let off = Settings::from_pairs([("low_latency", "0"), ("workloads", "0")]);
        assert_eq!(build("cfq", &off).unwrap().name(), "cfq");
        let on = Settings::from_pairs([("workloads", "1")]);
        assert_eq!(build("cfq-2010", &on).unwrap().name(), "cfq-2010");
    }

    #[test]
    fn every_listed_name_builds() {
        for e in SCHEDULERS {
            build(e.name, &Settings::new()).unwrap_or_else(|err| panic!("{}: {err}", e.name));
        }
        let s = Settings::from_pairs([("max_budget", "4096"), ("slice_idle", "4ms")]);
        assert_eq!(build("bfq", &s).unwrap().name(), "bfq");
        // Every profile takes every setting.
        for p in ["bfq", "bfq-kernel", "bfq-2018", "bfq-plus-2014", "bfq-2010"] {
            let s = Settings::from_pairs([("low_latency", "0"), ("injection", "1")]);
            assert_eq!(build(p, &s).unwrap().name(), p);
        }
        assert!(matches!(
            build("bfq", &Settings::from_pairs([("nope", "1")])),
            Err(SchedError::UnknownSetting { .. })
        ));
        assert!(matches!(
            build("nope", &Settings::new()),
            Err(SchedError::UnknownScheduler(_))
        ));
    }
}
