//! # bfq-suite
//!
//! The papers' benchmark suite, headless and reproducible: each
//! experiment of the 2010 BFQ paper (Section V), the 2014 BFQ+ report
//! (Section 7) and the 2018 I/O-control article is generated as scenario
//! TOML (docs/scenarios.md), run in the simulator for every scheduler it is
//! about and several seeds, and reported in `report.json`, `report.md` and
//! `report.html` with the papers' own numbers beside ours and a verdict on
//! each of the papers' findings. Experiment ids are documented in
//! docs/suite.md.

#![warn(missing_docs)]

pub mod apps_sys;
pub mod charts;
pub mod check;
pub mod exp2010;
pub mod exp2014;
pub mod exp2014_writes;
pub mod exp2018;
pub mod exp_asprio;
pub mod exp_real;
pub mod exp_real_apps;
pub mod model;
pub mod paper_figures;
pub mod report;
pub mod runner;
pub mod scen;
pub mod service;
pub mod settings;
pub mod stats;

pub use model::{ExpResult, Experiment};
pub use runner::{run_suite, Options, Report};

/// Every experiment, in report order.
/// (The simulated ones; `--target` runs [`exp_real::experiments`],
/// `--real-apps --target DIR` [`exp_real_apps::experiments`].)
pub fn experiments() -> Vec<Experiment> {
    vec![
        exp2010::throughput(),
        exp2010::fairness(),
        exp2010::weights(),
        exp2010::web(),
        exp2010::dbms(),
        exp2010::video(),
        exp2010::jitter(),
        exp2014::throughput(),
        exp2014::throughput_ncq(),
        exp2014::startup(),
        exp2014::startup_ncq(),
        exp2014::video(),
        exp2014::devel(),
        exp2018::io_control(),
        exp_asprio::latency_isolation(),
    ]
}
