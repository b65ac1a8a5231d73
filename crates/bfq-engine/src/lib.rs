//! # bfq-engine
//!
//! Real I/O through io_uring, scheduled by any scheduler of bfq-rs.
//!
//! One [`Engine`] serves one target (a regular file or a block device,
//! `O_DIRECT` by default) through one scheduler from the
//! [`bfq_schedulers`] registry. Clients open [`Flow`]s (weight, class and
//! level, group) and submit reads and writes with their own buffers, either
//! blocking ([`Flow::read`], [`Flow::write`]) or as futures usable from any
//! async runtime ([`Flow::read_async`], [`Flow::write_async`]). Every
//! request gives back the byte count or the OS error, and the buffer.
//!
//! The scheduler decides centrally (one short lock), and every submitting
//! thread enters the kernel on its own io_uring ring; see `docs/engine.md`
//! for the threading model and the fault handling.
//!
//! ```no_run
//! use bfq_engine::{AlignedBuf, Engine, FlowOptions};
//!
//! let engine = Engine::builder("/tmp/data.img")
//!     .create(64 << 20)      // create / extend the file, open read-write
//!     .scheduler("fifo")     // any registry name, e.g. "bfq"
//!     .queue_depth(32)
//!     .open()?;
//! let tenant = engine.flow(FlowOptions::weight(300))?;
//! let (res, buf) = tenant.write(0, AlignedBuf::from_slice(&[7u8; 4096]));
//! assert_eq!(res?, 4096);
//! let (res, buf) = tenant.read(0, buf);
//! assert_eq!(res?, 4096);
//! assert_eq!(buf[0], 7);
//! # Ok::<(), std::io::Error>(())
//! ```

#![warn(missing_docs)]

mod admit;
pub mod buf;
mod clock;
pub mod completion;
mod core;
mod driver;
mod engine;
mod service;
mod slot;
mod target_check;
mod taskrun;
mod thread_ring;

pub use crate::core::{
    EngineStats, FileTarget, LatencyHistogram, ShutdownMode, TraceEvent, LATENCY_BUCKETS,
};
pub use admit::{DEFAULT_MAX_REQUESTS, MAX_REQUESTS_LIMIT};
pub use bfq_core::{DeviceInfo, FlowId, FlowSpec, GroupId, Internals, IoClass, IoPrio, Settings};
pub use buf::{AlignedBuf, IoBuf, IoBufMut};
pub use completion::{block_on, wait_any, IoResult, Pending};
pub use driver::SubmitMode;
pub use engine::{
    direct_io_block, Engine, EngineBuilder, Flow, FlowOptions, MAX_QUEUE_DEPTH, MAX_SQPOLL_IDLE_MS,
};
pub use taskrun::CoopTaskrun;
pub use thread_ring::{submit_plugged, ThreadRing};
