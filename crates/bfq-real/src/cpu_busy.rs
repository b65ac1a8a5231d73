//! How busy the machine's CPUs were while a benchmark round ran: the share
//! of time the given CPUs spent neither idle nor idle waiting for I/O,
//! from `/proc/stat`. On two CPUs the submitting threads, the device's
//! own workers and the completions' soft interrupts share the CPUs, and
//! two columns with the same process CPU per request can differ in IOPS
//! by how much of the CPUs they keep busy (a thread that sleeps between
//! completions leaves them idle meanwhile). `bfq bench-engine randread`
//! prints it beside each round.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the sampler reads `/proc/stat` during a round.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// (busy, total) time of some CPUs, in the kernel's clock ticks.
type Ticks = (u64, u64);

/// A thread reading the CPUs' times every [`SAMPLE_EVERY`] until
/// [`BusySampler::finish`]. It keeps three readings (the second one and
/// the last two), so its memory does not grow with the round's length;
/// the share is taken between the second reading and the one before the
/// last, leaving out the round's set-up and teardown.
pub struct BusySampler {
    stop: Arc<AtomicBool>,
    readings: Arc<AtomicU64>,
    handle: JoinHandle<Option<(Ticks, Ticks)>>,
}

impl BusySampler {
    /// Starts sampling CPUs `cpus` (every CPU if empty) every `every`.
    /// Fails where `/proc/stat` cannot be read or lists none of them.
    pub fn start(cpus: &[usize], every: Duration) -> io::Result<BusySampler> {
        let cpus = cpus.to_vec();
        let first = read_ticks(&cpus)?;
        let stop = Arc::new(AtomicBool::new(false));
        let readings = Arc::new(AtomicU64::new(1));
        let (s, n) = (stop.clone(), readings.clone());
        let handle = std::thread::Builder::new()
            .name("bfq-cpu-busy".into())
            .spawn(move || sample(&cpus, first, every, &s, &n))?;
        Ok(BusySampler {
            stop,
            readings,
            handle,
        })
    }

    /// Readings taken so far (the one at the start included).
    pub fn readings(&self) -> u64 {
        self.readings.load(Ordering::Acquire)
    }

    /// Stops sampling: the share of time the CPUs were busy in the middle
    /// of the round, or `None` if it was too short for one (fewer than
    /// four readings) or a reading failed.
    pub fn finish(self) -> Option<f64> {
        self.stop.store(true, Ordering::Release);
        self.handle.thread().unpark();
        let ((b0, t0), (b1, t1)) = self.handle.join().ok()??;
        let total = t1.checked_sub(t0).filter(|t| *t > 0)?;
        Some(b1.saturating_sub(b0) as f64 / total as f64)
    }
}

/// The sampler's loop: returns the second reading and the one before the
/// last (`None` with fewer than four readings, or on a failed read).
fn sample(
    cpus: &[usize],
    first: Ticks,
    every: Duration,
    stop: &AtomicBool,
    readings: &AtomicU64,
) -> Option<(Ticks, Ticks)> {
    let (mut second, mut before_last, mut last) = (None, None, first);
    let mut n = 1u64;
    loop {
        let wake = Instant::now() + every;
        while !stop.load(Ordering::Acquire) && Instant::now() < wake {
            std::thread::park_timeout(wake.saturating_duration_since(Instant::now()));
        }
        if stop.load(Ordering::Acquire) {
            break;
        }
        let now = read_ticks(cpus).ok()?;
        n += 1;
        readings.store(n, Ordering::Release);
        second.get_or_insert(now);
        before_last = Some(last);
        last = now;
    }
    Some((second?, before_last.filter(|_| n >= 4)?))
}

/// The CPUs' (busy, total) ticks from `/proc/stat`.
fn read_ticks(cpus: &[usize]) -> io::Result<Ticks> {
    let text = std::fs::read_to_string("/proc/stat")?;
    parse_ticks(&text, cpus).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/stat lists none of CPUs {cpus:?}"),
        )
    })
}

/// Sums the `cpuN` lines of `cpus` (every CPU's if `cpus` is empty) in a
/// `/proc/stat` text: busy is every tick but idle and I/O wait (user,
/// nice, system, irq, softirq, steal), total the first eight fields.
/// `None` if none of the CPUs is listed.
fn parse_ticks(text: &str, cpus: &[usize]) -> Option<Ticks> {
    let mut sum: Option<Ticks> = None;
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(cpu) = f.next().and_then(|c| c.strip_prefix("cpu")) else {
            continue;
        };
        if !cpu
            .parse::<usize>()
            .is_ok_and(|c| cpus.is_empty() || cpus.contains(&c))
        {
            continue;
        }
        let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        let total: u64 = v.iter().sum();
        let (b, t) = sum.get_or_insert((0, 0));
        *b += total - v[3] - v[4];
        *t += total;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  300 0 100 900 100 0 0 0 0 0\n\
                        cpu0 100 0 50 300 50 0 0 0 0 0\n\
                        cpu1 200 0 50 600 50 10 20 30 0 0\n\
                        intr 12345\n";

    #[test]
    fn only_the_cpus_asked_for_are_summed_and_idle_and_iowait_are_not_busy() {
        assert_eq!(parse_ticks(STAT, &[0]), Some((150, 500)));
        assert_eq!(parse_ticks(STAT, &[1]), Some((310, 960)));
        assert_eq!(parse_ticks(STAT, &[0, 1]), Some((460, 1460)));
        assert_eq!(parse_ticks(STAT, &[]), Some((460, 1460)));
        // The aggregate `cpu` line is never a CPU of its own.
        assert_eq!(parse_ticks(STAT, &[7]), None);
    }

    #[test]
    fn a_sampler_gives_a_share_only_after_four_readings() {
        let Ok(short) = BusySampler::start(&[0], Duration::from_secs(3600)) else {
            eprintln!("skipped: /proc/stat cannot be read");
            return;
        };
        assert_eq!(short.finish(), None, "one reading is too few");
        // 20 ms apart: the kernel's ticks (10 ms at USER_HZ 100) move
        // between the second reading and the one before the last.
        let s = BusySampler::start(&[0], Duration::from_millis(20)).unwrap();
        while s.readings() < 6 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let share = s.finish().expect("a share after six readings");
        assert!((0.0..=1.0).contains(&share), "{share}");
    }
}
