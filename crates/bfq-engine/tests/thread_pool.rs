//! A pool of threads serves every flow's requests, blocking on O_DIRECT
//! reads of a real file under bfq (idling, timers, the idle class), the
//! way a FUSE front end uses the engine: any thread submits for any flow
//! and sleeps in its own ring. A hang fails after a generous bound (no
//! assertion on timing).

use bfq_engine::{AlignedBuf, Engine, FileTarget, FlowOptions, IoClass, ShutdownMode, SubmitMode};
use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const FILE: u64 = 32 << 20;
const REQ: usize = 128 << 10;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn filled(dir: &std::path::Path) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new_in(dir).unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    for _ in 0..FILE >> 20 {
        f.write_all(&chunk).unwrap();
    }
    f.as_file().sync_all().unwrap();
    f
}

/// Requests waiting for a thread of the pool: (flow, offset); `left`
/// counts the requests still to issue.
struct Jobs {
    q: Mutex<(VecDeque<(usize, u64)>, usize)>,
    cv: Condvar,
}

impl Jobs {
    fn take(&self) -> Option<(usize, u64)> {
        let mut g = self.q.lock().unwrap();
        loop {
            if let Some(j) = g.0.pop_front() {
                return Some(j);
            }
            if g.1 == 0 {
                return None;
            }
            g = self.cv.wait(g).unwrap();
        }
    }
    /// The flow's next sequential request, while some are left.
    fn next(&self, flow: usize, off: u64) {
        let mut g = self.q.lock().unwrap();
        if g.1 > 0 {
            g.1 -= 1;
            g.0.push_back((flow, (off + REQ as u64) % FILE));
        }
        if g.1 == 0 {
            self.cv.notify_all();
        } else {
            self.cv.notify_one();
        }
    }
}

fn round(mode: SubmitMode, path: &std::path::Path, threads: usize, total: usize) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    else {
        eprintln!("skipped: no O_DIRECT here");
        return true;
    };
    let target = Arc::new(FileTarget::new(file, 0));
    let engine = Engine::nop()
        .scheduler("bfq")
        .queue_depth(32)
        .allow_short(true)
        .submit_mode(mode)
        .open()
        .unwrap();
    let opts = [
        FlowOptions::weight(100),
        FlowOptions::weight(300),
        FlowOptions::default().prio(IoClass::Idle, 0),
    ];
    let flows: Arc<Vec<_>> = Arc::new(opts.into_iter().map(|o| engine.flow(o).unwrap()).collect());
    let jobs = Arc::new(Jobs {
        q: Mutex::new((VecDeque::new(), total)),
        cv: Condvar::new(),
    });
    for f in 0..flows.len() {
        for k in 0..4u64 {
            jobs.next(f, (f as u64 * 97 + k * 13) * REQ as u64);
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..threads {
        let (flows, target, jobs, tx) = (flows.clone(), target.clone(), jobs.clone(), tx.clone());
        std::thread::spawn(move || {
            while let Some((f, off)) = jobs.take() {
                let (r, _) = flows[f]
                    .read_file_async(&target, off, AlignedBuf::new(REQ))
                    .wait();
                assert_eq!(r.expect("read"), REQ);
                jobs.next(f, off);
            }
            let _ = tx.send(());
        });
    }
    for _ in 0..threads {
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            eprintln!("hung; stats {:?}", engine.stats());
            std::mem::forget(engine);
            return false;
        }
    }
    drop(flows);
    engine.shutdown(ShutdownMode::Drain).unwrap();
    true
}

/// Both submit modes, a few rounds; `STRESS_ROUNDS`, `STRESS_THREADS`
/// and `STRESS_N` make it longer.
#[test]
fn a_thread_pool_serving_every_flow_never_hangs() {
    let f = filled(std::path::Path::new("/var/tmp"));
    for mode in [SubmitMode::Local, SubmitMode::Dispatcher] {
        for r in 0..env("STRESS_ROUNDS", 2) {
            assert!(
                round(
                    mode,
                    f.path(),
                    env("STRESS_THREADS", 16),
                    env("STRESS_N", 600)
                ),
                "{mode:?}: round {r} hung"
            );
        }
    }
}
