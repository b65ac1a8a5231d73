//! Linux read-ahead of a buffered sequential reader (`mm/readahead.c`),
//! [`Style::Ondemand`], or a reader with one window in flight,
//! [`Style::Single`].
//!
//! - A read of a page that is not in the page cache starts a
//!   **synchronous window** at that page: `init_size(request, max)`
//!   (4x the request rounded up to a power of two for small requests, 2x
//!   for medium ones, else `max`), of which all but the requested part is
//!   the asynchronous tail; a read continuing right after the previous
//!   window ramps up instead.
//! - The first page of the asynchronous tail carries a **marker**
//!   (`PG_readahead`): when the program reads it, even while it is still
//!   being read from the device, the next window is issued asynchronously
//!   (its whole size is asynchronous tail, so its marker is its first
//!   page). So a fast reader keeps one window in flight ahead of the one it
//!   waits for.
//!   Linux 2.6.21 (the 2010 paper's kernel) had "current" and "ahead"
//!   windows with the same timing: `page_cache_readahead` issues the next
//!   ahead window when a read call reaches the ahead window, before it
//!   waits for it.
//! - **Single**: the next window is issued only once the program has read
//!   the marked page, i.e. after that window arrived. A fast reader then
//!   has one request in flight and leaves the device idle between a
//!   completion and its next request: the deceptive idleness the 2010
//!   paper describes and measures for its readers (Sec. I; Sec. V-C:
//!   C-LOOK switches files on every gap, SCAN-EDF gains from T_wait),
//!   which one window ahead would hide on a disk without command queueing.
//!   A read larger than the window (a `block` above `read_ahead_kb`)
//!   misses past it and issues the next windows at once up to its end,
//!   as a synchronous read of the missing pages does.
//! - **Growth**: each next window is `next_size(cur, max)`, 4x while below
//!   `max / 16`, 2x up to `max / 2`, then `max`.
//!
//! Positions are sectors of the reader's file (a virtual offset that keeps
//! growing when a reader wraps around its region). `max` is
//! `read_ahead_kb` (128 KiB by default in 2.6.21 as today).

use std::collections::VecDeque;

pub use bfq_scenario::readahead::Style;

/// Initial window for a request of `req` sectors (`get_init_ra_size`).
pub fn init_size(req: u64, max: u64) -> u64 {
    let n = req.max(1).next_power_of_two();
    if n <= max / 32 {
        n * 4
    } else if n <= max / 4 {
        n * 2
    } else {
        max
    }
}

/// Next window after one of `cur` sectors (`get_next_ra_size`).
pub fn next_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        cur * 4
    } else if cur <= max / 2 {
        cur * 2
    } else {
        max
    }
}

/// Read-ahead state of one reader, and what the device still owes it.
#[derive(Debug, Default)]
pub struct ReadAhead {
    max: u64,
    style: Style,
    start: u64,
    size: u64,
    async_size: u64,
    /// The current window's marker was read.
    fired: bool,
    /// Next sector the program reads.
    pub app_pos: u64,
    /// End of what was issued to the device.
    pub issued_to: u64,
    /// End of the contiguous prefix read from the device.
    pub done_to: u64,
    /// The program waits for data in flight...
    pub waiting: bool,
    /// ...up to here.
    pub wait_end: u64,
    /// Ends of the requests in flight, in issue order, and whether done.
    inflight: VecDeque<(u64, bool)>,
}

impl ReadAhead {
    /// A reader at the start of its file with windows up to `max` sectors.
    pub fn new(max: u64, style: Style) -> ReadAhead {
        ReadAhead {
            max: max.max(1),
            style,
            inflight: VecDeque::with_capacity(8),
            ..ReadAhead::default()
        }
    }

    /// Back to the start of the file (a new run), nothing cached.
    /// Keeps the in-flight list's storage: no allocation per run.
    pub fn reset(&mut self) {
        let mut inflight = std::mem::take(&mut self.inflight);
        inflight.clear();
        *self = ReadAhead {
            max: self.max,
            style: self.style,
            inflight,
            ..ReadAhead::default()
        };
    }

    /// The program reads `[app_pos, app_pos + len)`: the window to issue
    /// now, as (start, nominal size), if its marker is read or a page is
    /// missing. Call again until it returns `None`.
    pub fn on_read(&mut self, len: u64) -> Option<(u64, u64)> {
        let end = self.app_pos + len;
        let marker = self.start + self.size - self.async_size;
        let readable = self.style == Style::Ondemand || self.done_to > marker;
        if self.size > 0 && !self.fired && self.app_pos <= marker && marker < end && readable {
            self.fired = true;
            return Some(self.window(next_size(self.size, self.max)));
        }
        // Single waits for the marker of the current window, unless the
        // read goes past that window: then the missing part is read
        // synchronously (a cache miss), window after window
        let held = self.style == Style::Single
            && self.size > 0
            && !self.fired
            && end <= self.start + self.size;
        if end > self.issued_to && !held {
            let sequential = self.size > 0 && self.issued_to == self.start + self.size;
            if sequential {
                return Some(self.window(next_size(self.size, self.max)));
            }
            let size = init_size(len, self.max);
            self.start = self.issued_to;
            self.size = size;
            self.async_size = if size > len { size - len } else { size };
            self.fired = false;
            return Some((self.start, size));
        }
        None
    }

    /// A window wholly asynchronous, right after what was issued.
    fn window(&mut self, size: u64) -> (u64, u64) {
        self.start = self.issued_to;
        self.size = size;
        self.async_size = size;
        self.fired = false;
        (self.start, size)
    }

    /// A request up to `end` was issued.
    pub fn issued(&mut self, end: u64) {
        self.issued_to = end;
        self.inflight.push_back((end, false));
    }

    /// Nothing could be issued for the window (end of the file): stop
    /// asking for it.
    pub fn clip(&mut self) {
        self.size = self.issued_to.saturating_sub(self.start);
        self.fired = true;
    }

    /// The request ending at `end` completed; returns the new `done_to`.
    /// The search is linear in the requests in flight, which are few (a
    /// window or two, in requests of at most 512 KiB).
    pub fn completed(&mut self, end: u64) -> u64 {
        if let Some(e) = self.inflight.iter_mut().find(|e| e.0 == end && !e.1) {
            e.1 = true;
        }
        while let Some(&(e, true)) = self.inflight.front() {
            self.done_to = e;
            self.inflight.pop_front();
        }
        self.done_to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes_follow_the_kernel() {
        // 128 KiB max = 256 sectors; 4 KiB reads start at 16 KiB
        assert_eq!(init_size(8, 256), 32);
        assert_eq!(init_size(32, 256), 64);
        assert_eq!(init_size(256, 256), 256);
        assert_eq!(next_size(32, 256), 64);
        assert_eq!(next_size(8, 256), 32);
        assert_eq!(next_size(256, 256), 256);
    }

    #[test]
    fn marker_issues_the_next_window_while_the_first_is_in_flight() {
        let mut ra = ReadAhead::new(256, Style::Ondemand);
        // first read of 128 KiB: a sync window of 256, then its marker (its
        // first page, as the whole window is beyond the request) fires
        assert_eq!(ra.on_read(256), Some((0, 256)));
        ra.issued(256);
        assert_eq!(ra.on_read(256), Some((256, 256)));
        ra.issued(512);
        assert_eq!(ra.on_read(256), None);
        assert_eq!(ra.completed(256), 256);
        ra.app_pos = 256;
        assert_eq!(ra.on_read(256), Some((512, 256)));
    }

    #[test]
    fn single_issues_the_next_window_once_the_previous_one_is_read() {
        let mut ra = ReadAhead::new(256, Style::Single);
        assert_eq!(ra.on_read(256), Some((0, 256)));
        ra.issued(256);
        // the marker's page is in flight: nothing more until it completes
        assert_eq!(ra.on_read(256), None);
        ra.completed(256);
        assert_eq!(ra.on_read(256), Some((256, 256)));
        ra.issued(512);
        ra.app_pos = 256;
        assert_eq!(ra.on_read(256), None);
        ra.completed(512);
        assert_eq!(ra.on_read(256), Some((512, 256)));
    }

    #[test]
    fn single_read_larger_than_the_window_issues_up_to_its_end() {
        let mut ra = ReadAhead::new(256, Style::Single);
        let mut end = 0;
        while let Some((s, n)) = ra.on_read(2048) {
            end = s + n;
            ra.issued(end);
        }
        assert_eq!(end, 2048);
    }

    #[test]
    fn reset_keeps_the_in_flight_storage() {
        let mut ra = ReadAhead::new(256, Style::Ondemand);
        for e in 1..=40 {
            ra.issued(e * 8);
        }
        let cap = ra.inflight.capacity();
        assert!(cap >= 40);
        ra.reset();
        assert_eq!(ra.inflight.capacity(), cap);
        assert!(ra.inflight.is_empty());
        assert_eq!((ra.issued_to, ra.done_to, ra.app_pos), (0, 0, 0));
        assert_eq!(ra.on_read(256), Some((0, 256)));
    }

    #[test]
    fn small_reads_ramp_the_window_up() {
        let mut ra = ReadAhead::new(256, Style::Ondemand);
        assert_eq!(ra.on_read(8), Some((0, 32)));
        ra.issued(32);
        assert_eq!(ra.on_read(8), None);
        ra.completed(32);
        let mut sizes = vec![];
        while ra.app_pos < 2000 {
            while let Some((s, n)) = ra.on_read(8) {
                sizes.push(n);
                ra.issued(s + n);
                ra.completed(s + n);
            }
            ra.app_pos += 8;
        }
        assert_eq!(&sizes[..3], &[64, 128, 256]);
        assert!(sizes[3..].iter().all(|&n| n == 256), "{sizes:?}");
    }
}
