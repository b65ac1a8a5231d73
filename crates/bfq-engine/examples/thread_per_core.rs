//! A thread-per-core server on tokio: one thread per CPU, each with its
//! own current-thread runtime, serves every tenant's requests; the
//! tenants (weights 100, 200 and 400) share the device through one
//! engine. Each core binds its ring to its runtime (`Engine::thread_ring`
//! registered with tokio's reactor): completions wake the core that
//! submitted them, which reaps them itself; the requests its tasks issue
//! in one pass go to the kernel together (`ThreadRing::defer_submits`,
//! `ThreadRing::plugged`, `bfq_engine::submit_plugged`).
//!
//! ```text
//! cargo run --release -p bfq-engine --example thread_per_core -- \
//!     [FILE] [SECONDS] [SCHEDULER] [bound|unbound]
//! ```
//! FILE defaults to a temporary file (created, 64 MiB, filled, removed at
//! the end), SECONDS to 2, SCHEDULER to `bfq`; `unbound` leaves each
//! core's ring to the engine's service thread whenever the runtime
//! waits (for comparison). Each tenant keeps 8 random 4 KiB reads out on
//! every core.

use bfq_engine::{AlignedBuf, Engine, Flow, FlowOptions, ShutdownMode, ThreadRing};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

const BLOCK: usize = 4096;
const SIZE: u64 = 64 << 20;
const WEIGHTS: [u32; 3] = [100, 200, 400];
const TASKS_PER_TENANT: usize = 8;

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (path, temp) = match args.next().filter(|a| !a.is_empty()) {
        Some(p) => (PathBuf::from(p), false),
        None => (
            std::env::temp_dir().join(format!("bfq-tpc-{}.img", std::process::id())),
            true,
        ),
    };
    let secs: f64 = args
        .next()
        .map_or(Ok(2.0), |s| s.parse())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("SECONDS: {e}")))?;
    let sched = args.next().unwrap_or_else(|| "bfq".into());
    let bound = args.next().as_deref() != Some("unbound");
    if temp {
        std::fs::write(&path, vec![0x5a; SIZE as usize])?;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let depth = (cores * WEIGHTS.len() * TASKS_PER_TENANT) as u32;
    let engine = Arc::new(
        Engine::builder(&path)
            .scheduler(&sched)
            .queue_depth(depth)
            .open()?,
    );
    let tenants: Vec<Arc<Flow>> = WEIGHTS
        .iter()
        .map(|&w| engine.flow(FlowOptions::weight(w)).map(Arc::new))
        .collect::<Result<_, _>>()?;
    let blocks = engine.len() / BLOCK as u64;
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..cores)
        .map(|core| {
            let (engine, tenants) = (engine.clone(), tenants.clone());
            std::thread::spawn(move || serve_core(&engine, bound, core, &tenants, blocks, until))
        })
        .collect();
    let mut bytes = [0u64; WEIGHTS.len()];
    for t in threads {
        for (sum, b) in bytes.iter_mut().zip(t.join().expect("core thread")?) {
            *sum += b;
        }
    }
    for (w, b) in WEIGHTS.iter().zip(bytes) {
        println!("tenant w{w:<4} {:>8.1} MiB/s", b as f64 / secs / 1048576.0);
    }
    drop(tenants);
    let engine = Arc::try_unwrap(engine).ok().expect("every core is done");
    println!("engine: {:?}", engine.shutdown(ShutdownMode::Drain)?);
    if temp {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}

/// One core: a current-thread runtime whose tasks read for every tenant
/// until `until`, with the core's ring bound to it if `bound`; the bytes
/// each tenant read on this core.
fn serve_core(
    engine: &Engine,
    bound: bool,
    core: usize,
    tenants: &[Arc<Flow>],
    blocks: u64,
    until: Instant,
) -> io::Result<Vec<u64>> {
    // Bound, the futures' requests wait in the core's plug until the
    // loop's turn comes after them (`plugged`) or the runtime is about to
    // park, and go to the kernel together.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .on_thread_park(bfq_engine::submit_plugged)
        .build()?;
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (t, flow) in tenants.iter().enumerate() {
            for task in 0..TASKS_PER_TENANT {
                let seed = (core * 1000 + t * 100 + task + 1) as u64;
                set.spawn(reader(flow.clone(), seed, blocks, until, t));
            }
        }
        let ring = if bound {
            let ring = engine.thread_ring()?;
            ring.defer_submits(true);
            Some(register(ring)?)
        } else {
            None
        };
        let mut bytes = vec![0u64; tenants.len()];
        loop {
            tokio::select! {
                r = set.join_next() => match r {
                    Some(r) => {
                        let (t, b) = r.expect("reader task")?;
                        bytes[t] += b;
                    }
                    None => return Ok(bytes),
                },
                r = reap_when_ready(ring.as_ref()) => r?,
                () = submit_when_plugged(ring.as_ref()) => {}
            }
        }
    })
}

/// The core's ring in tokio's reactor, watched for readability.
fn register(ring: ThreadRing) -> io::Result<AsyncFd<ThreadRing>> {
    // SAFETY: a `ThreadRing`'s descriptor stays open, and the same, for
    // as long as the `ThreadRing` lives (here, inside the `AsyncFd`).
    unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}

/// Waits until completions wait on the ring, then reaps them on this
/// thread (waking the tasks whose reads completed); without a ring,
/// waits forever.
async fn reap_when_ready(ring: Option<&AsyncFd<ThreadRing>>) -> io::Result<()> {
    let Some(ring) = ring else {
        return std::future::pending().await;
    };
    let mut ready = ring.readable().await?;
    // Readiness is kept (and the ring reaped again) if another thread was
    // working on the ring meanwhile.
    if ready.get_inner().reap() {
        ready.clear_ready();
    }
    Ok(())
}

/// Waits until the core's tasks have left requests in its plug, then
/// submits them: this task's turn comes after the tasks that were
/// runnable, so one call carries what a pass over them plugged.
async fn submit_when_plugged(ring: Option<&AsyncFd<ThreadRing>>) {
    let Some(ring) = ring else {
        return std::future::pending().await;
    };
    ring.get_ref().plugged().await;
    bfq_engine::submit_plugged();
}

/// Random `BLOCK` reads through `flow` until `until`: (tenant, bytes).
async fn reader(
    flow: Arc<Flow>,
    seed: u64,
    blocks: u64,
    until: Instant,
    tenant: usize,
) -> io::Result<(usize, u64)> {
    let (mut x, mut bytes, mut buf) = (seed, 0, AlignedBuf::new(BLOCK));
    while Instant::now() < until {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let off = (x >> 33) % blocks * BLOCK as u64;
        let (res, b) = flow.read_async(off, buf).await;
        bytes += res? as u64;
        buf = b;
    }
    Ok((tenant, bytes))
}
