//! # bfq-sim
//!
//! A deterministic discrete-event storage simulator that drives any
//! scheduler of bfq-rs (anything implementing [`bfq_core::Scheduler`])
//! against modelled devices and synthetic or traced workloads.
//!
//! - [`scenario`]: the TOML scenario format (docs/scenarios.md); it lives
//!   in the `bfq-scenario` crate, shared with real runs, and is re-exported
//!   here with its units, replay files, fio job files and results.
//! - [`device`]: the rotational disk and flash models and the papers'
//!   presets (figures from the papers and the drives' datasheets).
//! - [`sim`]: the event loop and the workloads.
//!
//! ```
//! use bfq_sim::{Scenario, simulate, SimOptions};
//! let s = Scenario::from_toml_str(r#"
//!     name = "one reader"
//!     duration = "2s"
//!     [device]
//!     preset = "maxtor-stm332061"
//!     [[flow]]
//!     name = "r"
//!     pattern = "seq"
//! "#, "doc").unwrap();
//! let r = simulate(&s, Box::new(bfq_core::Fifo::new()), s.seed, SimOptions::default()).unwrap();
//! assert!(r.flows[0].throughput_mib_s > 75.0);
//! ```
//!
//! The same scenario and seed give byte-identical JSON and trace: one
//! seeded PCG stream per flow, no hash-order dependence, no wall clock.

#![warn(missing_docs)]

pub mod device;
pub mod readahead;
pub mod sim;

pub use bfq_scenario::{fio, replay, result, scenario, units};

pub use device::{Device, DeviceParams};
pub use result::{FlowResult, LatencyStats, SimResult};
pub use scenario::{FlowDef, Pattern, Plan, RegionDef, Scenario, ScenarioError};
pub use sim::{simulate, simulate_plan, SimError, SimOptions};
