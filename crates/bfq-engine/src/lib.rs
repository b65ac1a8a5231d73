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
//!
//! Every request's result and errors: [`Flow::read`] ("Errors").
//!
//! # Using it from...
//!
//! **Plain threads**: the blocking calls above. A [`Flow`] is
//! `Send + Sync` (share it in an `Arc`); each thread that submits gets
//! its own io_uring ring for the engine, submits there and sleeps there
//! until its request is done, reaping whatever else completed on its ring
//! meanwhile.
//!
//! **Futures on tokio** (the multi-thread runtime): just await
//! [`Flow::read_async`] and [`Flow::write_async`]. A task may move between
//! worker threads; every thread that submits gets its own ring, and a
//! worker that parks in tokio's poller leaves its ring to the engine's
//! service thread, which reaps the completions and calls the futures'
//! wakers. Await a request soon after issuing it: until it is polled it
//! may wait in its thread's plug ([`Flow::read_async`], "When it is
//! submitted").
//!
//! ```no_run
//! use bfq_engine::{AlignedBuf, Engine, FlowOptions};
//! use std::sync::Arc;
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let engine = Engine::builder("/data/disk.img").scheduler("bfq").open()?;
//!     let tenant = Arc::new(engine.flow(FlowOptions::weight(200))?);
//!     let tasks: Vec<_> = (0..8u64)
//!         .map(|i| {
//!             let tenant = tenant.clone();
//!             tokio::spawn(async move {
//!                 let (res, _buf) = tenant.read_async(i * 4096, AlignedBuf::new(4096)).await;
//!                 res
//!             })
//!         })
//!         .collect();
//!     for t in tasks {
//!         t.await.expect("reader task")?;
//!     }
//!     Ok(())
//! }
//! ```
//!
//! **Thread-per-core runtimes** (a current-thread runtime per CPU): bind
//! each core's ring to its event loop with [`Engine::thread_ring`] (local
//! mode, one per thread and engine). The [`ThreadRing`]'s descriptor
//! turns readable when completions wait on the ring; register it for
//! readability (tokio: [`AsyncFd`], `Interest::READABLE`) and call
//! [`ThreadRing::reap`] when it is ready: completions are then reaped and
//! their wakers called on the core that submitted them, not by the
//! service thread from another CPU. `reap()` returns false when another
//! thread was working on the ring meanwhile: keep the readiness then and
//! reap again. A core that leaves completions unreaped for 1-2 ms has its
//! ring taken over by the service thread (their results then come
//! through the futures' wakers). With [`ThreadRing::defer_submits`]`(true)`
//! and the loop calling [`submit_plugged`] when [`ThreadRing::plugged`]
//! is ready and before the runtime parks (tokio:
//! `runtime::Builder::on_thread_park(bfq_engine::submit_plugged)`), the
//! requests the core's tasks issue in one pass reach the kernel in one
//! `io_uring_enter`.
//!
//! [`AsyncFd`]: https://docs.rs/tokio/latest/tokio/io/unix/struct.AsyncFd.html
//!
//! ```no_run
//! use bfq_engine::{Engine, ThreadRing};
//! use tokio::io::{unix::AsyncFd, Interest};
//!
//! /// Runs on the core's own current-thread runtime, beside its tasks.
//! async fn reap_forever(engine: &Engine) -> std::io::Result<()> {
//!     let ring: ThreadRing = engine.thread_ring()?;
//!     // The tasks' requests wait in the core's plug and go out together
//!     // (the runtime built with `.on_thread_park(bfq_engine::submit_plugged)`).
//!     ring.defer_submits(true);
//!     // SAFETY: a ThreadRing's descriptor stays open, and the same,
//!     // while the ThreadRing lives (here, inside the AsyncFd).
//!     let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
//!         .map_err(|e| e.into_parts().1)?;
//!     loop {
//!         tokio::select! {
//!             ready = ring.readable() => {
//!                 let mut ready = ready?;
//!                 if ready.get_inner().reap() {
//!                     ready.clear_ready();
//!                 }
//!             }
//!             () = ring.get_ref().plugged() => bfq_engine::submit_plugged(),
//!         }
//!     }
//! }
//! ```
//!
//! **A runtime with an io_uring of its own** (as glommio's and
//! monoio's): bind the thread's ring the same way, and submit a poll
//! request (`IORING_OP_POLL_ADD`) for `POLLIN` on the [`ThreadRing`]'s
//! descriptor in the runtime's ring; when it completes, call
//! [`ThreadRing::reap`] (again if it returned false), and arm the poll
//! again. A plain `epoll` loop watches the descriptor the same way.
//!
//! Examples (`cargo run --release -p bfq-engine --example NAME`):
//! `examples/thread_per_core.rs` (one current-thread tokio runtime per
//! CPU, each with its ring bound, three tenants), `examples/tenants.rs`
//! (a writer and a reader on threads, an async reader on a tiny
//! executor), `examples/api.rs` (the calls of `docs/engine.md`, "API").
//! `docs/engine.md` has the threading model ("Threading model",
//! "Thread-per-core servers") and the faults.

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
pub use bfq_core::{
    DeviceInfo, FlowId, FlowInternals, FlowSpec, GroupId, Internals, IoClass, IoPrio, Settings,
};
pub use buf::{AlignedBuf, IoBuf, IoBufMut};
pub use completion::{block_on, wait_any, IoResult, Pending};
pub use driver::SubmitMode;
pub use engine::{
    direct_io_block, Engine, EngineBuilder, Flow, FlowOptions, MAX_QUEUE_DEPTH, MAX_SQPOLL_IDLE_MS,
};
pub use taskrun::CoopTaskrun;
pub use thread_ring::{submit_plugged, ThreadRing};
