//! Warm-up (`RunConfig::warm_up`, `bfq run --warm-up SECONDS`): before the
//! measured flows start, one sequential reader of [`WARM_UP_BLOCK`]-byte
//! requests reads alone for the given time through the same
//! scheduler: the engine's scheduler instance, or the device's scheduler
//! once the run has set it, with [`WARM_UP_DEPTH`] requests outstanding. A scheduler that learns the device's peak rate
//! (bfq's auto B_max = T_max x the rate, kernel `bfq_update_peak_rate`)
//! then starts the measured flows with the rate it learned, as a kernel
//! bfq that has served sequential I/O keeps its estimate for as long as
//! the device keeps its scheduler. Without it both sides start cold: under
//! a random reader that holds most of the device's time, every rate window
//! mixes its small requests with the sequential ones and the estimate, and
//! with it B_max, stays near the mixed rate. Default: no warm-up.
//!
//! The reader reads the part of the target after the flows' last region
//! when it is at least [`WARM_UP_MIN_SPARE`] long, else the whole target
//! from its start, wrapping around; its I/O is not in the run's report
//! (the engine's trace names it `warm-up`).

use bfq_engine::{AlignedBuf, Flow};
use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

/// Request size of the warm-up reader (128 KiB, the 2018 article's
/// sequential readers').
pub const WARM_UP_BLOCK: u64 = 128 << 10;

/// Requests the warm-up reader keeps outstanding (4). A device that
/// serves several requests at once shows its rate only with several in
/// flight: on a loop device over a virtual machine's disk one 128 KiB read
/// at a time got 167 MB/s where four readers got about 1000.
pub const WARM_UP_DEPTH: u32 = 4;

/// Shortest spare part of the target after the flows' regions that the
/// warm-up reader reads instead of the whole target (64 MiB).
pub const WARM_UP_MIN_SPARE: u64 = 64 << 20;

/// Longest warm-up accepted (`RunConfig::warm_up`: 0 < warm-up <= 60 s).
pub const WARM_UP_MAX: Duration = Duration::from_secs(60);

/// Checks a warm-up length: more than 0 and at most [`WARM_UP_MAX`].
pub fn check(d: Duration) -> io::Result<()> {
    if d.is_zero() || d > WARM_UP_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("warm-up {d:?}: must be more than 0 and at most {WARM_UP_MAX:?}"),
        ));
    }
    Ok(())
}

/// The region (offset, length) the warm-up reader reads: what follows the
/// flows' last region on a target of `len` bytes when that is at least
/// [`WARM_UP_MIN_SPARE`], else the whole target.
pub fn region(regions: &[(u64, u64)], len: u64) -> (u64, u64) {
    let end = regions.iter().map(|&(o, l)| o + l).max().unwrap_or(0);
    let start = end.div_ceil(WARM_UP_BLOCK) * WARM_UP_BLOCK;
    if len.saturating_sub(start) >= WARM_UP_MIN_SPARE {
        (start, (len - start) / WARM_UP_BLOCK * WARM_UP_BLOCK)
    } else {
        (0, len / WARM_UP_BLOCK * WARM_UP_BLOCK)
    }
}

/// Offsets of a sequential reader over `region`, wrapping around.
fn offsets(region: (u64, u64)) -> impl Iterator<Item = u64> {
    let n = (region.1 / WARM_UP_BLOCK).max(1);
    (0..).map(move |k: u64| region.0 + (k % n) * WARM_UP_BLOCK)
}

/// Reads `region` sequentially for `d` through the engine, as `flow`
/// (a flow of its own, closed by the caller afterwards), with
/// [`WARM_UP_DEPTH`] requests outstanding.
pub fn through_engine(flow: &Flow, region: (u64, u64), d: Duration) -> io::Result<()> {
    let end = Instant::now() + d;
    let mut pending = VecDeque::with_capacity(WARM_UP_DEPTH as usize);
    let mut bufs: Vec<AlignedBuf> = (0..WARM_UP_DEPTH)
        .map(|_| AlignedBuf::new(WARM_UP_BLOCK as usize))
        .collect();
    for off in offsets(region) {
        // SIGINT or SIGTERM, where caught, end the warm-up as its time does.
        if Instant::now() >= end || crate::sys::interrupted().is_some() {
            break;
        }
        if let Some(b) = bufs.pop() {
            pending.push_back(flow.read_async(off, b));
            continue;
        }
        let (res, b) = pending.pop_front().expect("requests outstanding").wait();
        res?;
        pending.push_back(flow.read_async(off, b));
    }
    for p in pending {
        p.wait().0?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_reads_after_the_flows_when_there_is_room() {
        const G: u64 = 1 << 30;
        assert_eq!(region(&[(0, G), (G, G)], 24 * G), (2 * G, 22 * G));
        // Less than 64 MiB after the flows: the whole target.
        assert_eq!(
            region(&[(0, 5 * G)], 5 * G + (1 << 20)),
            (0, 5 * G + (1 << 20))
        );
        assert_eq!(region(&[], 4 * G), (0, 4 * G));
        // Unaligned ends round to whole requests.
        assert_eq!(region(&[(0, 100)], G), (WARM_UP_BLOCK, G - WARM_UP_BLOCK));
    }

    #[test]
    fn the_reader_wraps_around_its_region() {
        let r = (WARM_UP_BLOCK, 2 * WARM_UP_BLOCK);
        let v: Vec<u64> = offsets(r).take(3).collect();
        assert_eq!(v, [WARM_UP_BLOCK, 2 * WARM_UP_BLOCK, WARM_UP_BLOCK]);
    }

    #[test]
    fn warm_up_lengths_are_checked() {
        assert!(check(Duration::ZERO).is_err());
        assert!(check(Duration::from_secs(61)).is_err());
        assert!(check(Duration::from_secs(2)).is_ok());
    }
}
