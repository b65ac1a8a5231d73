//! How far apart two CPUs are: the round trip of a cache line between
//! them. On a virtual machine the host may place two virtual CPUs on one
//! core's hyperthreads or on different cores, and move them; every
//! cross-CPU cost of a benchmark round (a lock handed over, a thread woken
//! on the other CPU) follows. `bfq bench-engine randread` probes before
//! each round so that rounds run in different placements can be told
//! apart.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// A counter on a cache line of its own.
#[repr(align(64))]
struct Line(AtomicU64);

/// Round trips timed per probe (about 6-35 ms at 60-350 ns each).
pub const PROBE_TRIPS: u64 = 100_000;

/// The mean round trip, in ns, of a cache line passed back and forth
/// `trips` times between two threads pinned one to CPU `a`, one to CPU
/// `b` (the calling thread's own pinning is left as it is).
pub fn cache_round_trip_ns(a: usize, b: usize, trips: u64) -> io::Result<f64> {
    let line = Line(AtomicU64::new(0));
    let failed = AtomicBool::new(false);
    let (line, failed) = (&line, &failed);
    std::thread::scope(|sc| {
        let peer = sc.spawn(move || -> io::Result<()> {
            pin_or_flag(b, failed)?;
            for i in 0..trips {
                if !wait_for(line, 2 * i + 1, failed) {
                    break;
                }
                line.0.store(2 * i + 2, Ordering::Release);
            }
            Ok(())
        });
        let timer = sc.spawn(move || -> io::Result<f64> {
            pin_or_flag(a, failed)?;
            let start = Instant::now();
            for i in 0..trips {
                line.0.store(2 * i + 1, Ordering::Release);
                if !wait_for(line, 2 * i + 2, failed) {
                    break;
                }
            }
            Ok(start.elapsed().as_nanos() as f64 / trips.max(1) as f64)
        });
        let ns = timer.join().expect("probe thread");
        peer.join().expect("probe thread")?;
        ns
    })
}

/// Pins the calling thread to `cpu`, or flags the probe failed.
fn pin_or_flag(cpu: usize, failed: &AtomicBool) -> io::Result<()> {
    crate::sys::pin_current_thread(&[cpu]).inspect_err(|_| failed.store(true, Ordering::Release))
}

/// Spins until the line holds `v` (true) or the other thread failed.
fn wait_for(line: &Line, v: u64, failed: &AtomicBool) -> bool {
    while line.0.load(Ordering::Acquire) != v {
        if failed.load(Ordering::Relaxed) {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_between_two_cpus_is_timed_and_a_bad_cpu_refused() {
        let cpus = crate::sys::current_cpus().unwrap();
        assert!(cache_round_trip_ns(cpus[0], 1 << 20, 10).is_err());
        if cpus.len() < 2 {
            eprintln!("skipped: one CPU only");
            return;
        }
        let ns = cache_round_trip_ns(cpus[0], cpus[1], 1000).unwrap();
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
        assert_eq!(crate::sys::current_cpus().unwrap(), cpus);
    }
}
