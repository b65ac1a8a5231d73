//! An engine run's flows served as a thread-per-core server on an async
//! runtime serves its clients ([`EngineClient::ThreadPerCore`]): one
//! current-thread tokio runtime per CPU the run may use, each on a
//! thread pinned to its CPU, with that thread's ring bound to the
//! runtime (`Engine::thread_ring`, its descriptor watched by tokio's
//! reactor through `AsyncFd`, `reap()` on readiness), so that each
//! runtime reaps its own completions, and the requests its tasks issue
//! in a pass wait in its plug until its loop's turn comes after them
//! (`ThreadRing::defer_submits`, `ThreadRing::plugged`), or it parks
//! (`bfq_engine::submit_plugged` as tokio's `on_thread_park`), so they go
//! to the kernel together; and each flow's `depth` requests
//! as that many tasks of one request each, spread over the runtimes in
//! turn (docs/engine.md, "Thread-per-core servers"). The flows are the
//! threads client's engine flows, with its requests, buffers and
//! accounting: only who issues them differs.

use crate::desc::{Backend, Dir, EngineClient, FlowDesc, RunConfig};
use crate::pace::{cursor_part, room, Acc, Cursor};
use crate::report::FlowReport;
use crate::run::{interrupted_error, ReqBuf};
use crate::sys;
use bfq_engine::{AlignedBuf, Engine, Flow, SubmitMode, ThreadRing};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Refuses what the runtimes cannot run: a `kernel:*` backend,
/// dispatcher mode (whose rings cannot be bound), and flows paced by
/// anything but the run's end (each task keeps its request out until
/// then).
pub(crate) fn check(cfg: &RunConfig, flows: &[FlowDesc]) -> io::Result<()> {
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("the {} client: {why}", EngineClient::ThreadPerCore.name()),
        ))
    };
    if let Backend::Kernel { scheduler } = &cfg.backend {
        return refuse(format!("kernel:{scheduler} runs no engine"));
    }
    if cfg.submit_mode == SubmitMode::Dispatcher {
        return refuse("dispatcher mode binds no ring to a runtime".into());
    }
    for f in flows {
        let paced = [
            (f.bytes.is_some(), "bytes"),
            (!f.think.is_zero(), "think"),
            (f.on_off.is_some(), "on/off"),
            (f.periodic.is_some(), "periodic"),
            (!f.start.is_zero(), "start"),
            (f.stop.is_some(), "stop"),
            (f.duration.is_some(), "duration"),
            (!f.after.is_empty(), "after"),
        ];
        if let Some((_, what)) = paced.iter().find(|p| p.0) {
            return refuse(format!(
                "flow {} has {what}: this client runs greedy flows only (every \
                 request kept out until the run's end); the threads client runs it",
                f.name
            ));
        }
    }
    Ok(())
}

/// One task: request part `k` of flow `i` kept out.
#[derive(Clone, Copy)]
struct Part {
    i: usize,
    k: u32,
}

/// The tasks of each of `cores` runtimes: the flows' requests (`depth`
/// each) numbered flow after flow, the `g`th on runtime `g % cores`, so
/// that 64 flows of 1 put 32 flows on each of 2 runtimes and one flow of
/// 64 puts 32 of its requests on each.
fn placement(flows: &[FlowDesc], cores: usize) -> Vec<Vec<Part>> {
    let mut out: Vec<Vec<Part>> = (0..cores).map(|_| Vec::new()).collect();
    let parts = flows
        .iter()
        .enumerate()
        .flat_map(|(i, f)| (0..f.depth).map(move |k| Part { i, k }));
    for (g, p) in parts.enumerate() {
        out[g % cores].push(p);
    }
    out
}

/// What every runtime shares: the run's engine, flows, regions and
/// engine flows, its stop flag, start barrier and start.
struct Run<'a> {
    engine: &'a Engine,
    flows: &'a [FlowDesc],
    regions: &'a [(u64, u64)],
    handles: &'a [Arc<Flow>],
    stop: Arc<AtomicBool>,
    barrier: Barrier,
    start: OnceLock<Instant>,
    duration: Duration,
    interval: Duration,
}

/// Runs the flows on one runtime per CPU of the calling thread's
/// affinity (the benchmark's `--cpus`, else every CPU it may use),
/// started together: the run's seconds and the flows' reports, in flow
/// order.
pub(crate) fn run_runtimes(
    cfg: &RunConfig,
    engine: &Engine,
    flows: &[FlowDesc],
    regions: &[(u64, u64)],
    handles: &[Arc<Flow>],
) -> io::Result<(f64, Vec<FlowReport>)> {
    let cpus = sys::current_cpus()?;
    let run = Run {
        engine,
        flows,
        regions,
        handles,
        stop: Arc::new(AtomicBool::new(false)),
        barrier: Barrier::new(cpus.len() + 1),
        start: OnceLock::new(),
        duration: cfg.duration,
        interval: cfg.series_interval,
    };
    let (seconds, done) = std::thread::scope(|s| {
        let cores: Vec<_> = cpus
            .iter()
            .zip(placement(flows, cpus.len()))
            .map(|(&cpu, parts)| {
                let run = &run;
                s.spawn(move || serve_core(run, cpu, &parts))
            })
            .collect();
        // SIGINT and SIGTERM stop the tasks as the run's end does (see
        // `run_threads`).
        let watch = sys::watch_interrupts(run.stop.clone());
        run.barrier.wait();
        let t0 = Instant::now();
        let done: Vec<_> = cores.into_iter().map(|c| c.join()).collect();
        drop(watch);
        (t0.elapsed().as_secs_f64(), done)
    });
    let mut accs: Vec<Option<(Acc, f64)>> = flows.iter().map(|_| None).collect();
    for core in done {
        let core = core.map_err(|_| io::Error::other("a runtime thread panicked"))?;
        for (i, acc, first) in core? {
            match &mut accs[i] {
                Some((a, f)) => {
                    a.merge(acc);
                    *f = f.min(first);
                }
                slot => *slot = Some((acc, first)),
            }
        }
    }
    interrupted_error(cfg)?;
    let reports = flows.iter().zip(accs).map(|(d, a)| match a {
        Some((acc, first)) => acc.report(d, (Some(first), &[])),
        None => Acc::new(run.interval).report(d, (None, &[])),
    });
    Ok((seconds, reports.collect()))
}

/// A task's account: its flow, what it recorded, and when it issued its
/// first request (s since the run's start).
type Done = (usize, Acc, f64);

/// One CPU's runtime: pins the thread to `cpu`, binds its ring, waits at
/// the start barrier (always, so that a failed set-up does not hold the
/// others), then runs `parts` as tasks until every one has ended.
fn serve_core(run: &Run, cpu: usize, parts: &[Part]) -> io::Result<Vec<Done>> {
    let set_up = (|| {
        sys::pin_current_thread(&[cpu])?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .on_thread_park(bfq_engine::submit_plugged)
            .build()?;
        let ring = {
            let _in = rt.enter();
            register(run.engine.thread_ring()?)?
        };
        ring.get_ref().defer_submits(true);
        Ok::<_, io::Error>((rt, ring))
    })();
    run.barrier.wait();
    let (rt, ring) = set_up.map_err(|e| {
        // The other runtimes end their tasks now instead of at the run's end.
        run.stop.store(true, Ordering::Release);
        io::Error::new(e.kind(), format!("CPU {cpu}: {e}"))
    })?;
    let start = *run.start.get_or_init(Instant::now);
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for &p in parts {
            set.spawn(task(run, p, start).run());
        }
        let mut done = Vec::with_capacity(parts.len());
        loop {
            tokio::select! {
                r = set.join_next() => match r {
                    Some(r) => done.push(r.map_err(|_| io::Error::other("a task panicked"))?),
                    None => return Ok(done),
                },
                r = reap_when_ready(&ring) => r?,
                () = ring.get_ref().plugged() => bfq_engine::submit_plugged(),
            }
        }
    })
}

/// The runtime's ring in tokio's reactor, watched for readability.
fn register(ring: ThreadRing) -> io::Result<AsyncFd<ThreadRing>> {
    // SAFETY: a `ThreadRing`'s descriptor stays open, and the same, for
    // as long as the `ThreadRing` lives (here, inside the `AsyncFd`).
    unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}

/// Waits until completions wait on the ring, then reaps them on this
/// thread (waking the tasks whose requests completed); readiness is
/// kept, and the ring reaped again, when another thread (the service
/// thread) was working on it meanwhile.
async fn reap_when_ready(ring: &AsyncFd<ThreadRing>) -> io::Result<()> {
    let mut ready = ring.readable().await?;
    if ready.get_inner().reap() {
        ready.clear_ready();
    }
    Ok(())
}

/// Part `p` of its flow's requests as a task starting at `start`.
fn task(run: &Run, p: Part, start: Instant) -> Task {
    let d = &run.flows[p.i];
    let fill = p.i as u8 | 1;
    let mut buf = AlignedBuf::new(d.block as usize);
    buf.fill(fill);
    Task {
        i: p.i,
        dir: d.dir,
        flow: run.handles[p.i].clone(),
        cur: cursor_part(d, run.regions[p.i], p.i as u64, p.k, d.depth),
        buf,
        fill,
        stop: run.stop.clone(),
        start,
        end: start + run.duration,
        left: u64::MAX,
        interval: run.interval,
    }
}

/// A task: one request of flow `i` kept out, in its flow's part of the
/// requests, with one buffer reused for each.
struct Task {
    i: usize,
    dir: Dir,
    flow: Arc<Flow>,
    cur: Cursor,
    buf: AlignedBuf,
    /// The byte the buffer holds (what writes write).
    fill: u8,
    stop: Arc<AtomicBool>,
    start: Instant,
    end: Instant,
    /// Requests it may still issue (no bound in a run's tasks).
    left: u64,
    interval: Duration,
}

impl Task {
    /// Issues a request, waits for it and records it, until the run's
    /// end or stop (or `left` requests): its flow, account and first
    /// request's time.
    async fn run(self) -> Done {
        let Task {
            i,
            dir,
            flow,
            mut cur,
            mut buf,
            fill,
            stop,
            start,
            end,
            mut left,
            interval,
        } = self;
        let mut acc = Acc::since(interval, start);
        let first = start.elapsed().as_secs_f64();
        while left > 0 && !stop.load(Ordering::Relaxed) && Instant::now() < end {
            left -= 1;
            let (off, len) = cur.next();
            room(&mut buf, len, fill);
            let b = ReqBuf {
                buf,
                len: len as usize,
            };
            let t0 = Instant::now();
            let p = match dir {
                Dir::Read => flow.read_async(off, b),
                Dir::Write => flow.write_async(off, b),
            };
            let (res, b) = p.await;
            acc.record(res, t0);
            buf = b.buf;
        }
        (i, acc, first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::Pattern;

    fn flows(depths: &[u32], pattern: Pattern) -> Vec<FlowDesc> {
        depths
            .iter()
            .map(|&d| {
                let mut f = FlowDesc::reader("r", pattern.clone(), 4096);
                f.depth = d;
                f
            })
            .collect()
    }

    /// (flows, requests) on each runtime.
    fn spread(depths: &[u32], cores: usize) -> Vec<(usize, usize)> {
        placement(&flows(depths, Pattern::Rand), cores)
            .iter()
            .map(|parts| {
                let mut f: Vec<usize> = parts.iter().map(|p| p.i).collect();
                f.dedup();
                (f.len(), parts.len())
            })
            .collect()
    }

    /// The heap allocations of the calling thread running one task of
    /// `n` random reads through `engine` on a current-thread runtime with
    /// the thread's ring bound to it (as a run's runtimes do).
    fn allocs_of_a_task(engine: &Engine, n: u64) -> u64 {
        let d = &flows(&[1], Pattern::Rand)[0];
        let flow = Arc::new(engine.flow(bfq_engine::FlowOptions::weight(100)).unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let ring = {
            let _in = rt.enter();
            register(engine.thread_ring().unwrap()).unwrap()
        };
        let start = Instant::now();
        let task = Task {
            i: 0,
            dir: Dir::Read,
            flow,
            cur: cursor_part(d, (0, 1 << 20), 0, 0, 1),
            buf: AlignedBuf::new(4096),
            fill: 1,
            stop: Arc::new(AtomicBool::new(false)),
            start,
            end: start + Duration::from_secs(3600),
            left: n,
            interval: Duration::from_secs(3600),
        };
        let ((_, acc, _), allocs) = crate::alloc_count::during(|| {
            rt.block_on(async {
                let mut t = tokio::spawn(task.run());
                loop {
                    tokio::select! {
                        r = &mut t => return r.unwrap(),
                        r = reap_when_ready(&ring) => r.unwrap(),
                    }
                }
            })
        });
        let r = acc.report(d, (None, &[]));
        assert_eq!((r.ios, r.errors), (n, 0));
        allocs
    }

    #[test]
    fn a_tasks_requests_allocate_nothing_each() {
        let (_dir, path, _) = crate::alloc_count::file_and_patterns();
        let engine = Engine::builder(&path)
            .direct(false)
            .scheduler("bfq")
            .open()
            .unwrap();
        // The runtime, the task and the thread's ring take what they
        // take once; then 16 requests, then 1024.
        allocs_of_a_task(&engine, 16);
        let few = allocs_of_a_task(&engine, 16);
        let many = allocs_of_a_task(&engine, 1024);
        assert!(
            many <= few + 8,
            "{few} allocations for 16 reads, {many} for 1024"
        );
        engine.shutdown(bfq_engine::ShutdownMode::Drain).unwrap();
    }

    #[test]
    fn requests_are_spread_over_the_runtimes_in_turn() {
        assert_eq!(spread(&[1; 64], 2), [(32, 32), (32, 32)]);
        assert_eq!(spread(&[64], 2), [(1, 32), (1, 32)]);
        assert_eq!(spread(&[16; 4], 2), [(4, 32), (4, 32)]);
        assert_eq!(spread(&[3, 2], 4), [(2, 2), (1, 1), (1, 1), (1, 1)]);
        assert_eq!(spread(&[1], 2), [(1, 1), (0, 0)]);
    }

    #[test]
    fn a_sequential_flows_parts_read_its_blocks_once_each() {
        let d = &flows(&[3], Pattern::Seq)[0];
        let mut offs: Vec<u64> = (0..3)
            .flat_map(|k| {
                let mut c = cursor_part(d, (8192, 4096 * 12), 0, k, 3);
                (0..4).map(move |_| c.next().0)
            })
            .collect();
        offs.sort();
        let whole: Vec<u64> = (0..12).map(|b| 8192 + 4096 * b).collect();
        assert_eq!(offs, whole);
    }
}
