//! # bfq-core
//!
//! BFQ — Budget Fair Queueing — as a pure, deterministic state machine, and
//! the [`Scheduler`] interface every policy of bfq-rs implements.
//!
//! No threads, clocks or I/O: the caller passes the time (nanoseconds) and
//! events in, and gets decisions out. The simulator (`bfq-sim`) and the
//! io_uring engine (`bfq-engine`) drive the same trait.
//!
//! ```
//! use bfq_core::{Fifo, Scheduler, FlowSpec, Request, Op, Dispatch};
//!
//! let mut s = Fifo::new();
//! let f = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
//! s.add_request(0, Request { id: 1, flow: f, sector: 0, sectors: 8, op: Op::Read, sync: true }).unwrap();
//! let Dispatch::Request(r) = s.dispatch(10) else { panic!() };
//! assert_eq!(r.id, 1);
//! s.complete(5_000_000, r.id).unwrap();
//! assert_eq!(s.dispatch(5_000_000), Dispatch::Empty);
//! ```

#![warn(missing_docs)]

pub mod bfq;
pub mod error;
pub mod fifo;
pub mod fluid;
pub mod hooked;
pub mod scheduler;
pub mod settings;
pub mod table;
pub mod types;

pub use bfq::{Bfq, BfqConfig};
pub use error::SchedError;
pub use fifo::Fifo;
pub use hooked::{Hooked, Hooks};
pub use scheduler::{FlowInternals, Internals, Scheduler};
pub use settings::Settings;
pub use types::*;

/// A xorshift64 stream for unit tests' random inputs (any nonzero
/// seed): deterministic, no dependency.
#[cfg(test)]
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
