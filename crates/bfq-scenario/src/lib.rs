//! # bfq-scenario
//!
//! The workload model both the simulator (`bfq sim`, crate bfq-sim) and
//! real runs (`bfq run`, crate bfq-real) read, so that one scenario file
//! means the same flows in both:
//!
//! - [`scenario`]: the TOML scenario format (docs/scenarios.md): device,
//!   scheduler, groups and flows, checked and planned ([`Plan`]) against a
//!   device's capacity.
//! - [`fio`]: fio job files read as scenarios (docs/fio.md).
//! - [`device`]: the modelled devices' parameters and the papers' presets.
//! - [`replay`]: replay files and the start-up trace generator.
//! - [`units`]: sizes, durations and ranges as scenario files write them.
//! - [`result`]: the results of a run and their JSON (`--json`), written
//!   by simulated and real runs alike.
//!
//! It depends on bfq-core alone (for requests' types and settings).

#![warn(missing_docs)]

pub mod device;
pub mod fio;
pub mod readahead;
pub mod replay;
pub mod result;
pub mod scenario;
pub mod units;

pub use device::DeviceParams;
pub use result::{FlowResult, LatencyStats, SimResult};
pub use scenario::{FlowDef, Pattern, Plan, RegionDef, Scenario, ScenarioError};
