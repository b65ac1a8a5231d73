//! How a completion reaches the thread whose ring it is on: the setting
//! ([`CoopTaskrun`]) and its adaptive choice ([`CpuWait`]), which sets a
//! thread's ring up with `IORING_SETUP_COOP_TASKRUN` while the thread
//! waits for a CPU (docs/engine-measurements.md, "Where a result waits").

use std::fs::File;
use std::os::unix::fs::FileExt;

/// How each submitting thread's ring takes its completions (local mode;
/// `EngineBuilder::coop_taskrun`).
///
/// Without `COOP_TASKRUN` (the kernel's default) a completion is posted by
/// task work that interrupts its thread where it runs (an IPI from the
/// completing CPU); with it the task work waits for the thread's next
/// entry into the kernel (or its next interrupt or timer tick: up to 4 ms
/// at `CONFIG_HZ=250` behind a thread computing without system calls).
/// Measured on 2 CPUs (`bench-engine randread`): with a busy program on
/// every CPU the interrupts cost 4 flows x 16 a fifth of fio's IOPS, which
/// `COOP_TASKRUN` gives back. On a quiet machine one thread with 64
/// requests lost 7-17% with it in earlier builds and is about 4% ahead
/// with it now; there the interrupting ring stands for the bound it keeps
/// on the wait of every request on the ring, other flows' included, behind
/// an owner that computes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoopTaskrun {
    /// Every thread's ring without `COOP_TASKRUN`: completions interrupt.
    Off,
    /// Every thread's ring with `COOP_TASKRUN | TASKRUN_FLAG` (Linux
    /// 5.19; a ring the kernel refuses it for is set up without).
    On,
    /// Each thread's ring starts without it and is set up again with it
    /// once the thread waited for a CPU at least 300/1000 of the time it
    /// was runnable in 2 windows of 20 ms or more in a row (back without
    /// it after as many at 100/1000 or less), as its own scheduling
    /// statistics say (`/proc/thread-self/schedstat`, looked at every 256
    /// requests the thread submits); where they cannot be read, as `Off`.
    /// The default.
    #[default]
    Auto,
}

/// A thread that waits for a CPU this share of its runnable time, or
/// more, gets a `COOP_TASKRUN` ring (per mille). Measured per thread of
/// `bench-engine randread` on 2 CPUs over 1 s: one flow of 64 requests on
/// a quiet machine 30, the same with a busy loop per CPU 530, 4 flows x
/// 16 quiet 670-730, busy 790-800, 64 flows x 1 960-980; over 20 ms
/// windows, one quiet flow of 64 waited 250 or more in 0-5% of them
/// (up to 470), 4 flows x 16 in all but 0.4% (10th percentile 643), one
/// flow with the busy loops in 98% (10th percentile 428).
pub(crate) const ENTER_PER_MILLE: u64 = 300;

/// A thread with a `COOP_TASKRUN` ring that waits for a CPU this share
/// of its runnable time, or less, goes back to an interrupting ring (per
/// mille; apart from [`ENTER_PER_MILLE`], so that a share near either
/// does not set rings up again and again).
pub(crate) const LEAVE_PER_MILLE: u64 = 100;

/// A thread's requests between two looks at its statistics (a look is one
/// `pread`, about 2 us).
pub(crate) const SAMPLE_EVERY: u32 = 256;

/// The least running plus waiting time (ns) a share is taken over: a
/// look finding less keeps counting from the look before.
pub(crate) const WINDOW_NS: u64 = 20_000_000;

/// Windows in a row that must each call for the other setup before the
/// ring is set up again (a single window's share spikes now and then
/// when another program runs).
pub(crate) const CONFIRM: u8 = 2;

/// The owner thread's time on a CPU and waiting for one, looked at every
/// [`SAMPLE_EVERY`] requests it submits (`CoopTaskrun::Auto`).
pub(crate) struct CpuWait {
    /// `/proc/thread-self/schedstat` of the owner thread (opened by it:
    /// the file stays the owner's whichever thread reads it).
    stat: File,
    countdown: u32,
    /// (ns on a CPU, ns runnable waiting for one) at the window's start.
    base: (u64, u64),
    /// Windows in a row that called for the other setup.
    streak: u8,
    /// Requests the thread submitted in the window so far (counted a
    /// look at a time), and those it waited for on its private ring.
    submitted: u32,
    private: u32,
    /// Whether the thread's ring is set up with `COOP_TASKRUN`.
    pub(crate) coop: bool,
}

impl CpuWait {
    /// The calling thread's sampler; `None` where its statistics cannot
    /// be read (no /proc, a kernel without `CONFIG_SCHED_INFO`).
    pub(crate) fn open(coop: bool) -> Option<CpuWait> {
        let stat = File::open("/proc/thread-self/schedstat").ok()?;
        let base = read_times(&stat)?;
        Some(CpuWait {
            stat,
            countdown: SAMPLE_EVERY,
            base,
            streak: 0,
            submitted: 0,
            private: 0,
            coop,
        })
    }

    /// Counts one request; every [`SAMPLE_EVERY`] looks at the thread's
    /// times. Returns whether its ring should be set up the other way.
    #[inline]
    pub(crate) fn tick(&mut self) -> bool {
        self.countdown -= 1;
        if self.countdown > 0 {
            return false;
        }
        self.countdown = SAMPLE_EVERY;
        self.look()
    }

    /// Counts a request the thread waited for on its private ring.
    #[inline]
    pub(crate) fn note_private(&mut self) {
        self.private = self.private.saturating_add(1);
    }

    #[cold]
    fn look(&mut self) -> bool {
        self.submitted = self.submitted.saturating_add(SAMPLE_EVERY);
        read_times(&self.stat).is_some_and(|now| self.window(now))
    }

    /// Takes the thread's times `now` (ns on a CPU, ns waiting): whether
    /// the window they end, and the ones before it, call for the other
    /// setup (see [`CONFIRM`]). A window in which the thread waited for
    /// half of its requests or more on its private ring calls for no
    /// change: those complete without interrupting it whatever its ring's
    /// setup (`DEFER_TASKRUN`), so setting its ring up again would only
    /// cost (at 64 flows x 1 with a busy loop per CPU, rings set up again
    /// got 0.74-0.99x of fio over nine runs against 0.91-1.13x kept).
    fn window(&mut self, now: (u64, u64)) -> bool {
        let run = now.0.saturating_sub(self.base.0);
        let wait = now.1.saturating_sub(self.base.1);
        if run + wait < WINDOW_NS {
            return false;
        }
        self.base = now;
        let mostly_private = self.submitted > 0 && self.private.saturating_mul(2) >= self.submitted;
        (self.submitted, self.private) = (0, 0);
        if mostly_private || wants_coop(self.coop, run, wait) == self.coop {
            self.streak = 0;
            return false;
        }
        self.streak += 1;
        if self.streak < CONFIRM {
            return false;
        }
        self.streak = 0;
        true
    }
}

/// Whether a ring set up with `coop` (or not) should have `COOP_TASKRUN`
/// after its thread ran `run` ns and waited `wait` ns for a CPU.
pub(crate) fn wants_coop(coop: bool, run: u64, wait: u64) -> bool {
    let per_mille = wait.saturating_mul(1000) / (run + wait).max(1);
    if coop {
        per_mille > LEAVE_PER_MILLE
    } else {
        per_mille >= ENTER_PER_MILLE
    }
}

/// (ns on a CPU, ns waiting on a run queue) from a schedstat file.
fn read_times(stat: &File) -> Option<(u64, u64)> {
    let mut buf = [0u8; 96];
    let n = stat.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>());
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_waiting_three_tenths_of_the_time_or_more_gets_coop() {
        assert!(!wants_coop(false, 970, 30));
        assert!(!wants_coop(false, 701, 299));
        assert!(wants_coop(false, 700, 300));
        assert!(wants_coop(false, 20, 980));
    }

    #[test]
    fn a_coop_ring_goes_back_only_at_a_tenth_or_less() {
        assert!(wants_coop(true, 800, 200));
        assert!(wants_coop(true, 899, 101));
        assert!(!wants_coop(true, 900, 100));
        assert!(!wants_coop(true, 1000, 0));
        // No time at all: no waiting.
        assert!(!wants_coop(true, 0, 0));
    }

    /// A sampler of this thread, its window started at no time (`None`,
    /// with a message, where the statistics cannot be read).
    fn sampler_from_zero() -> Option<CpuWait> {
        let Some(mut w) = CpuWait::open(false) else {
            eprintln!("skipped: /proc/thread-self/schedstat cannot be read");
            return None;
        };
        w.base = (0, 0);
        Some(w)
    }

    #[test]
    fn only_windows_in_a_row_set_the_ring_up_again() {
        let Some(mut w) = sampler_from_zero() else {
            return;
        };
        let ms = 1_000_000;
        // A short window decides nothing and keeps its start.
        assert!(!w.window((5 * ms, 5 * ms)));
        assert_eq!(w.base, (0, 0));
        // One window waiting half the time, then one waiting little: the
        // streak is broken.
        assert!(!w.window((20 * ms, 20 * ms)));
        assert!(!w.window((60 * ms, 21 * ms)));
        // Two in a row (with requests submitted in each).
        w.submitted = 256;
        assert!(!w.window((80 * ms, 41 * ms)));
        w.submitted = 256;
        assert!(w.window((100 * ms, 61 * ms)));
        // Set up with it: going back takes two windows at a tenth or less.
        w.coop = true;
        assert!(!w.window((150 * ms, 61 * ms)));
        assert!(!w.window((170 * ms, 81 * ms)));
        assert!(!w.window((220 * ms, 81 * ms)));
        assert!(w.window((270 * ms, 82 * ms)));
    }

    #[test]
    fn a_thread_waiting_on_its_private_ring_keeps_its_ring() {
        let Some(mut w) = sampler_from_zero() else {
            return;
        };
        let ms = 1_000_000;
        // Waiting for a CPU most of the time, two windows in a row, with
        // half of its requests waited for on the private ring.
        for i in 1..=4u64 {
            w.submitted = 512;
            (0..256).for_each(|_| w.note_private());
            assert!(!w.window((i * 5 * ms, i * 20 * ms)), "window {i}");
        }
        // Fewer private waits: the second such window sets it up again.
        for i in 5..=6u64 {
            w.submitted = 512;
            (0..255).for_each(|_| w.note_private());
            assert_eq!(w.window((i * 5 * ms, i * 20 * ms)), i == 6, "window {i}");
        }
    }

    #[test]
    fn the_calling_threads_times_are_read_and_grow() {
        let Some(w) = CpuWait::open(false) else {
            eprintln!("skipped: /proc/thread-self/schedstat cannot be read");
            return;
        };
        let before = w.base;
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        // The kernel adds a running thread's time at its ticks and when it
        // leaves the CPU: leave it once.
        std::thread::sleep(std::time::Duration::from_millis(1));
        let after = read_times(&w.stat).unwrap();
        assert!(after.0 > before.0, "{before:?} -> {after:?}");
        assert!(after.1 >= before.1, "{before:?} -> {after:?}");
    }
}
