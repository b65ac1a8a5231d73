//! A thread whose ring cannot be made (`EngineStats::ring_setup_failed`):
//! under a limit of open files that leaves no descriptor for it, its
//! requests go through the service thread and complete with the right
//! data, the failure is counted with its OS error, the ring is not tried
//! again at every request, and once descriptors are free again the thread
//! gets its ring.
//!
//! The limit (`RLIMIT_NOFILE`) is the whole process's: this file holds
//! one test, so that no other test of its process opens files meanwhile.
//! No assertion depends on timing (the timeout only turns a hang into a
//! failure).

use bfq_engine::{AlignedBuf, Engine, Flow, FlowOptions, ShutdownMode};
use std::time::{Duration, Instant};

const BLOCKS: u64 = 256;
const HANG: Duration = Duration::from_secs(60);

/// The byte at `i` of block `b`.
fn byte(b: u64, i: usize) -> u8 {
    (b.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8
}

fn tmpfile() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new_in(std::env::temp_dir()).unwrap();
    let data: Vec<u8> = (0..BLOCKS)
        .flat_map(|b| (0..4096).map(move |i| byte(b, i)))
        .collect();
    std::fs::write(f.path(), data).unwrap();
    f
}

/// Reads block `b` and checks its bytes.
fn read_block(flow: &Flow, b: u64) {
    let (r, buf) = flow.read(b * 4096, AlignedBuf::new(4096));
    assert_eq!(r.unwrap(), 4096, "block {b}");
    assert!(
        buf.iter().enumerate().all(|(i, &x)| x == byte(b, i)),
        "block {b}: wrong data"
    );
}

/// The soft limit of open files now.
fn nofile() -> libc::rlimit {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    r
}

fn set_nofile(r: &libc::rlimit) {
    // SAFETY: setrlimit reads the struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, r) }, 0);
}

/// Lowers the soft limit of open files to the lowest free descriptor, so
/// that no new one can be opened. Returns the limit as it was.
fn no_more_descriptors() -> libc::rlimit {
    let old = nofile();
    // SAFETY: plain syscalls on a descriptor this function owns.
    let lowest = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    assert!(lowest >= 0);
    unsafe { libc::close(lowest) };
    set_nofile(&libc::rlimit {
        rlim_cur: lowest as libc::rlim_t,
        rlim_max: old.rlim_max,
    });
    old
}

#[test]
fn a_thread_without_a_ring_is_served_counted_and_gets_one_later() {
    let f = tmpfile();
    let engine = match Engine::builder(f.path()).open() {
        Ok(e) => e,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            Engine::builder(f.path()).direct(false).open().unwrap()
        }
        Err(e) => panic!("{e}"),
    };
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    let old = no_more_descriptors();
    // Blocking reads, then a burst of asynchronous ones.
    for b in 0..64 {
        read_block(&flow, b);
    }
    let burst: Vec<_> = (64..BLOCKS)
        .map(|b| (b, flow.read_async(b * 4096, AlignedBuf::new(4096))))
        .collect();
    for (b, p) in burst {
        let (r, buf) = p.wait();
        assert_eq!(r.unwrap(), 4096, "block {b}");
        assert!(buf.iter().enumerate().all(|(i, &x)| x == byte(b, i)));
    }
    let limited = engine.stats().unwrap();
    set_nofile(&old);
    assert!(limited.ring_setup_failed >= 1, "{limited:?}");
    assert_eq!(limited.ring_setup_errno, Some(libc::EMFILE), "{limited:?}");
    assert_eq!(
        limited.ring_setup_error().unwrap().raw_os_error(),
        Some(libc::EMFILE)
    );
    // The service thread submitted them all; the ring was tried again
    // only now and then (at most once per 100 ms), not per request.
    assert!(limited.service_submits >= BLOCKS, "{limited:?}");
    assert!(
        limited.ring_setup_failed <= BLOCKS / 16,
        "tried {} times for {BLOCKS} requests",
        limited.ring_setup_failed
    );
    // With descriptors free again, a later request makes the ring: the
    // service thread submits no more of this thread's requests.
    let t0 = Instant::now();
    let mut b = 0;
    loop {
        let before = engine.stats().unwrap();
        read_block(&flow, b % BLOCKS);
        b += 1;
        let after = engine.stats().unwrap();
        if after.service_submits == before.service_submits {
            assert_eq!(after.ring_setup_failed, before.ring_setup_failed);
            break;
        }
        assert!(t0.elapsed() < HANG, "never got a ring: {after:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
    let n = engine.stats().unwrap().ring_setup_failed;
    for b in 0..32 {
        read_block(&flow, b);
    }
    drop(flow);
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.ring_setup_failed, n, "{s:?}");
    assert_eq!(s.errors, 0, "{s:?}");
}
