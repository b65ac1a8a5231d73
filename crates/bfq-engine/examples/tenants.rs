//! A small multi-tenant storage server: three tenants share one file
//! through the engine. A heavy writer (weight 100), a reader (weight 300)
//! using blocking calls from threads, and an async reader (weight 200)
//! driving many requests through futures on a tiny executor.
//!
//! ```text
//! cargo run -p bfq-engine --example tenants -- [FILE] [SCHEDULER]
//! ```
//! FILE defaults to a temporary file (created, 64 MiB, removed at the end);
//! SCHEDULER to `bfq`.

use bfq_engine::{block_on, AlignedBuf, Engine, FlowOptions, IoClass, ShutdownMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BLOCK: usize = 64 << 10;
const SIZE: u64 = 64 << 20;

fn main() -> std::io::Result<()> {
    let (path, temp, sched) = args();
    let engine = Arc::new(open_engine(&path, &sched)?);
    println!(
        "{} ({} MiB) through '{sched}'",
        path.display(),
        engine.len() >> 20
    );
    let run_for = Duration::from_secs(2);
    let tenants = [
        ("writer w100", spawn_writer(&engine, run_for)?),
        ("reader w300 rt", spawn_reader(&engine, run_for)?),
        ("async w200", spawn_async_reader(&engine, run_for)?),
    ];
    for (name, t) in tenants {
        let bytes = t.join().expect("tenant thread");
        println!(
            "{name:>15}: {:>8.1} MiB/s",
            bytes as f64 / run_for.as_secs_f64() / 1048576.0
        );
    }
    let engine = Arc::try_unwrap(engine).ok().expect("all flows done");
    let stats = engine.shutdown(ShutdownMode::Drain)?;
    println!("engine: {stats:?}");
    if temp {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}

/// FILE (or a temporary file, then true) and SCHEDULER (default `bfq`)
/// from the command line.
fn args() -> (PathBuf, bool, String) {
    let mut args = std::env::args().skip(1);
    let (path, temp) = match args.next() {
        Some(p) => (PathBuf::from(p), false),
        None => (
            std::env::temp_dir().join(format!("bfq-tenants-{}.img", std::process::id())),
            true,
        ),
    };
    let sched = args.next().unwrap_or_else(|| "bfq".into());
    (path, temp, sched)
}

/// The engine on `path` (created, [`SIZE`] bytes), depth 16, with
/// O_DIRECT, or buffered on filesystems without it (tmpfs before 6.6).
fn open_engine(path: &Path, sched: &str) -> std::io::Result<Engine> {
    Engine::builder(path)
        .create(SIZE)
        .scheduler(sched)
        .queue_depth(16)
        .open()
        .or_else(|_| {
            Engine::builder(path)
                .create(SIZE)
                .direct(false)
                .scheduler(sched)
                .queue_depth(16)
                .open()
        })
}

/// Tenant 1: a writer (weight 100, async) filling the first half
/// sequentially for `run_for`; the thread returns the bytes written.
fn spawn_writer(engine: &Engine, run_for: Duration) -> std::io::Result<JoinHandle<u64>> {
    let flow = engine.flow(FlowOptions::weight(100).sync(false))?;
    Ok(std::thread::spawn(move || {
        let start = Instant::now();
        let mut bytes = 0u64;
        let mut off = 0;
        let mut buf = AlignedBuf::new(BLOCK);
        buf.fill(0xAB);
        while start.elapsed() < run_for {
            let (r, b) = flow.write(off, buf);
            buf = b;
            bytes += r.expect("write") as u64;
            off = (off + BLOCK as u64) % (SIZE / 2);
        }
        bytes
    }))
}

/// Tenant 2: a latency-sensitive reader (weight 300, real-time class)
/// reading the second half with blocking calls for `run_for`.
fn spawn_reader(engine: &Engine, run_for: Duration) -> std::io::Result<JoinHandle<u64>> {
    let flow = engine.flow(FlowOptions::weight(300).prio(IoClass::Rt, 0))?;
    Ok(std::thread::spawn(move || {
        let start = Instant::now();
        let mut bytes = 0u64;
        let mut off = SIZE / 2;
        let mut buf = AlignedBuf::new(BLOCK);
        while start.elapsed() < run_for {
            let (r, b) = flow.read(off, buf);
            buf = b;
            bytes += r.expect("read") as u64;
            off = SIZE / 2 + (off + BLOCK as u64) % (SIZE / 2);
        }
        bytes
    }))
}

/// Tenant 3: an async reader (weight 200), eight requests in flight,
/// awaited as futures on a tiny executor, for `run_for`.
fn spawn_async_reader(engine: &Engine, run_for: Duration) -> std::io::Result<JoinHandle<u64>> {
    let flow = engine.flow(FlowOptions::weight(200).sync(false))?;
    Ok(std::thread::spawn(move || {
        block_on(async move {
            let start = Instant::now();
            let mut bytes = 0u64;
            let mut i = 0u64;
            while start.elapsed() < run_for {
                let pending: Vec<_> = (0..8)
                    .map(|k| {
                        let off = ((i + k) * BLOCK as u64) % SIZE;
                        flow.read_async(off, AlignedBuf::new(BLOCK))
                    })
                    .collect();
                for p in pending {
                    let (r, _buf) = p.await;
                    bytes += r.expect("async read") as u64;
                }
                i += 8;
            }
            bytes
        })
    }))
}
