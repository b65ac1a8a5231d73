//! Rotational disk model (datasheet figures; Lee's seek curve as
//! DiskSim uses it).
//!
//! - **Geometry, zoned bit recording**: `zones` zones of equal cylinder
//!   count; sectors per track fall linearly from the outer zone (sector 0)
//!   to the inner one so that the sustained sequential rate goes from
//!   `rate_outer` to `rate_inner` (MB/s, 10^6 bytes, including head
//!   switches). The number of cylinders follows from the capacity.
//! - **Seek**: Lee's curve as DiskSim uses it, from the single-cylinder,
//!   average and full-stroke datasheet times:
//!   `seek(d) = s1 + b (d-1) + a sqrt(d-1)`, `seek(0) = 0`; writes add a
//!   settle time.
//! - **Rotation**: the platter turns at `rpm` from time 0; every sector has
//!   an angular phase (with track skew so that a sequential transfer
//!   crosses tracks without losing a revolution). After the seek the head
//!   waits until the sector comes under it.
//! - **Transfer**: `(period + head_switch) / sectors_per_track` per sector.
//! - **Read cache with read-ahead**: after a read the drive keeps reading
//!   the following sectors (up to `read_ahead` bytes) into a cache segment
//!   while it has nothing else to do; a read that falls in a segment is a
//!   hit (served at bus rate), and a read that continues the stream being
//!   prefetched completes as soon as the head gets there. So short gaps
//!   between sequential sync reads cost nothing, as on real drives.
//!   `cache_segments` segments, LRU.
//! - **Write-back cache**: writes complete on arrival (bus transfer) while
//!   dirty data fits in half of `cache_size`; a write that does not fit
//!   waits in the queue and goes to the media like a read. The drive
//!   writes dirty data to the media whenever no host command waits, at
//!   once (`destage_delay` 0, the presets: drive manuals describe a disk
//!   write task that starts as soon as the data is in the buffer) but,
//!   after a read, not before the read-ahead has filled its segment
//!   (`read_ahead_first`: read-ahead "continues until the allocated buffer
//!   is full" unless a host command arrives), the
//!   extent with the shortest positioning time (seek and rotation) among
//!   the oldest 64 first (the drive "may reorder write commands to
//!   optimize throughput"); contiguous writes are merged into one extent
//!   of at most 1 MiB. A host command that arrives meanwhile waits for the
//!   extent being written (the write in progress finishes first), then
//!   goes ahead of the rest of the dirty data. So writes cannot hold a
//!   read behind a full cache. A write that finds the cache full waits
//!   for space (the drive destages in its place) and completes once taken
//!   in.
//! - **Sequential writes**: a write (host or destage) that starts where
//!   the previous write ended, as it ended, continues the transfer with no
//!   positioning, so sustained sequential writes run at the media rate;
//!   the write settle time follows a seek only.
//! - **NCQ**: with `ncq_depth > 1` the drive holds up to that many
//!   commands and serves the one with the shortest positioning time
//!   (seek + rotational wait), except that a command older than
//!   `ncq_max_wait` goes first (assumed aging; 0 disables it).

use super::{DevRequest, Device};
use bfq_core::{DeviceInfo, Op, ReqId, Time, SECTOR_BYTES};
use bfq_scenario::device::DiskParams;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Clone, Copy, Debug)]
struct Zone {
    start: u64,
    end: u64,
    cyl0: u64,
    spt: u64,
    /// ns per sector in a sequential transfer.
    t_sec: f64,
    /// Revolutions per sector (t_sec / period).
    phase_step: f64,
}

#[derive(Clone, Copy, Debug)]
struct Cmd {
    id: ReqId,
    sector: u64,
    sectors: u32,
    op: Op,
    arrival: Time,
}

impl Cmd {
    fn end(&self) -> u64 {
        self.sector + u64::from(self.sectors)
    }
}

#[derive(Clone, Copy, Debug)]
enum Busy {
    /// A host command, finishing at the time stored with it.
    Cmd(Cmd),
    /// Destaging `n` dirty sectors ending before sector `end`.
    Destage { end: u64, n: u64 },
}

#[derive(Clone, Copy, Debug)]
struct Prefetch {
    /// First cached sector of the stream.
    lo: u64,
    /// Sector under the head at `base_time`.
    base_sector: u64,
    base_time: Time,
    /// Prefetch stops here.
    limit: u64,
    /// The head may not leave before this time (minimum prefetch).
    min_until: Time,
    t_sec: f64,
}

impl Prefetch {
    fn hi_at(&self, now: Time) -> u64 {
        let n = (now.saturating_sub(self.base_time) as f64 / self.t_sec) as u64;
        (self.base_sector + n).min(self.limit)
    }
    fn time_of(&self, sector: u64) -> Time {
        self.base_time
            + ((sector.saturating_sub(self.base_sector)) as f64 * self.t_sec).ceil() as Time
    }
}

#[derive(Clone, Copy, Debug)]
struct Seg {
    lo: u64,
    hi: u64,
    stamp: u64,
}

/// A rotational disk (see the module documentation).
#[derive(Debug)]
pub struct Disk {
    p: DiskParams,
    zones: Vec<Zone>,
    capacity: u64,
    cylinders: u64,
    period: f64,
    seek_a: f64,
    seek_b: f64,
    head_cyl: u64,
    busy: Option<(Time, Busy)>,
    queue: Vec<Cmd>,
    instant: BinaryHeap<Reverse<(Time, u64, ReqId)>>,
    seq: u64,
    prefetch: Option<Prefetch>,
    segs: Vec<Seg>,
    seg_max: u64,
    ra_sectors: u64,
    min_pf_sectors: u64,
    dirty: VecDeque<(u64, u64)>,
    dirty_sectors: u64,
    dirty_limit: u64,
    destage_at: Option<Time>,
    /// The sector after the last write to the media and when it ended: a
    /// write that starts there at that moment continues the transfer.
    write_end: Option<(u64, Time)>,
    in_flight: usize,
    /// Angular position of the platters at time 0, in revolutions. Real
    /// disks start each run at an arbitrary angle; drawing it from the
    /// run's seed gives repetitions their natural spread.
    spindle_phase: f64,
}

fn frac(x: f64) -> f64 {
    x - x.floor()
}

/// Sectors per track in each of the disk's zones (zoned recording): the
/// media rate falls linearly from `rate_outer` in the outermost zone to
/// `rate_inner` in the innermost, and a track passes under the head in a
/// revolution (`period`, ns) plus a head switch.
fn sectors_per_track(p: &DiskParams, period: f64) -> Vec<u64> {
    let hs = p.head_switch as f64;
    let nz = p.zones.max(1) as usize;
    (0..nz)
        .map(|z| {
            let f = if nz > 1 {
                z as f64 / (nz - 1) as f64
            } else {
                0.0
            };
            // MB/s; bytes per ns = rate * 1e-3
            let rate = p.rate_outer + (p.rate_inner - p.rate_outer) * f;
            ((rate * 1e-3 * (period + hs) / SECTOR_BYTES as f64).round() as u64).max(1)
        })
        .collect()
}

/// The zones of a disk of `capacity` sectors with `spts` sectors per
/// track in each: every zone has the same number of cylinders (enough
/// that the zones together hold the capacity), the last one ends at the
/// capacity. Returns the zones and the cylinders per zone.
fn zone_layout(p: &DiskParams, capacity: u64, period: f64, spts: &[u64]) -> (Vec<Zone>, u64) {
    let hs = p.head_switch as f64;
    let heads = u64::from(p.heads.max(1));
    let per_cyl: u64 = spts.iter().sum::<u64>() * heads;
    let cyl_per_zone = capacity.div_ceil(per_cyl).max(1);
    let mut zones = Vec::with_capacity(spts.len());
    let mut start = 0;
    for (z, &spt) in spts.iter().enumerate() {
        let mut end = start + cyl_per_zone * heads * spt;
        if z == spts.len() - 1 || end > capacity {
            end = capacity;
        }
        let t_sec = (period + hs) / spt as f64;
        zones.push(Zone {
            start,
            end,
            cyl0: z as u64 * cyl_per_zone,
            spt,
            t_sec,
            phase_step: t_sec / period,
        });
        start = end;
        if start >= capacity {
            break;
        }
    }
    (zones, cyl_per_zone)
}

/// The coefficients (a, b) of Lee's seek curve single + b x + a sqrt(x)
/// over x + 1 cylinders, fitted to the single-cylinder, average and
/// full-stroke seek times on a disk of `cylinders` cylinders.
fn seek_curve(p: &DiskParams, cylinders: u64) -> (f64, f64) {
    let c = cylinders as f64;
    let (s1, sa, sf) = (p.seek_single as f64, p.seek_avg as f64, p.seek_full as f64);
    let seek_a = (-10.0 * s1 + 15.0 * sa - 5.0 * sf) / (3.0 * c.sqrt());
    let seek_b = (7.0 * s1 - 15.0 * sa + 8.0 * sf) / (3.0 * c);
    (seek_a, seek_b)
}

impl Disk {
    /// Builds the disk. Parameters are assumed valid (see
    /// [`DiskParams::validate`]).
    pub fn new(p: DiskParams) -> Disk {
        let capacity = (p.capacity / SECTOR_BYTES).max(1);
        let period = 60e9 / f64::from(p.rpm.max(1));
        let spts = sectors_per_track(&p, period);
        let (zones, cyl_per_zone) = zone_layout(&p, capacity, period, &spts);
        let cylinders = cyl_per_zone * spts.len() as u64;
        let (seek_a, seek_b) = seek_curve(&p, cylinders);
        let segs_n = u64::from(p.cache_segments.max(1));
        let seg_max = (p.cache_size / SECTOR_BYTES / segs_n).max(1);
        let ra_sectors = (p.read_ahead / SECTOR_BYTES).min(seg_max);
        let min_pf_sectors = (p.min_prefetch / SECTOR_BYTES).min(ra_sectors);
        let dirty_limit = p.cache_size / SECTOR_BYTES / 2;
        Disk {
            p,
            zones,
            capacity,
            cylinders,
            period,
            seek_a,
            seek_b,
            head_cyl: 0,
            busy: None,
            queue: Vec::with_capacity(32),
            instant: BinaryHeap::new(),
            seq: 0,
            prefetch: None,
            segs: Vec::new(),
            seg_max,
            ra_sectors,
            min_pf_sectors,
            dirty: VecDeque::new(),
            dirty_sectors: 0,
            dirty_limit,
            destage_at: None,
            write_end: None,
            in_flight: 0,
            spindle_phase: 0.0,
        }
    }

    /// Sets the platters' angle at time 0 from `seed` (a fraction of a
    /// revolution), so that repetitions of a run with different seeds see
    /// different rotational delays, as on a real disk.
    pub fn with_seed(mut self, seed: u64) -> Disk {
        // SplitMix64: a well-mixed 64-bit value from any seed.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        self.spindle_phase = (z >> 11) as f64 / (1u64 << 53) as f64;
        self
    }

    /// The parameters.
    pub fn params(&self) -> &DiskParams {
        &self.p
    }

    /// Number of cylinders of the derived geometry.
    pub fn cylinders(&self) -> u64 {
        self.cylinders
    }

    /// Seek time over `d` cylinders (Lee's curve), ns.
    pub fn seek_time(&self, d: u64) -> f64 {
        if d == 0 {
            return 0.0;
        }
        let x = (d - 1) as f64;
        (self.p.seek_single as f64 + self.seek_b * x + self.seek_a * x.sqrt()).max(0.0)
    }

    /// Rotation period, ns.
    pub fn period(&self) -> f64 {
        self.period
    }

    /// Sustained sequential transfer rate at `sector`, bytes per second.
    pub fn media_rate_at(&self, sector: u64) -> f64 {
        SECTOR_BYTES as f64 * 1e9 / self.zone(sector).t_sec
    }

    fn zone(&self, sector: u64) -> &Zone {
        let i = self
            .zones
            .partition_point(|z| z.end <= sector)
            .min(self.zones.len() - 1);
        &self.zones[i]
    }

    fn locate(&self, sector: u64) -> (u64, f64, f64) {
        let z = self.zone(sector);
        let idx = sector.saturating_sub(z.start);
        let track = idx / z.spt;
        let cyl = (z.cyl0 + track / u64::from(self.p.heads.max(1))).min(self.cylinders - 1);
        (cyl, frac(idx as f64 * z.phase_step), z.t_sec)
    }

    /// Time to position for `sector` starting at `t` (overhead + seek +
    /// settle + rotational wait), and the transfer time per sector there.
    /// A write that starts where the previous write ended, as it ended,
    /// continues the transfer: no positioning (the drive holds the next
    /// write already, queued or cached, and writes on, as sustained
    /// sequential writes run at the media rate). The write settle time
    /// follows a seek only.
    fn position(&self, t: Time, sector: u64, op: Op) -> (f64, f64, u64) {
        let (cyl, phase, t_sec) = self.locate(sector);
        if op == Op::Write && self.write_end == Some((sector, t)) {
            return (0.0, t_sec, cyl);
        }
        let d = cyl.abs_diff(self.head_cyl);
        let mut dt = self.p.overhead as f64 + self.seek_time(d);
        if op == Op::Write && d > 0 {
            dt += self.p.write_settle as f64;
        }
        let rot = frac((t as f64 + dt) / self.period + self.spindle_phase);
        dt += frac(phase - rot) * self.period;
        (dt, t_sec, cyl)
    }

    fn bus_time(&self, sectors: u64) -> Time {
        (sectors as f64 * SECTOR_BYTES as f64 / (self.p.bus_rate * 1e-3)).round() as Time
    }

    fn push_instant(&mut self, t: Time, id: ReqId) {
        self.seq += 1;
        self.instant.push(Reverse((t, self.seq, id)));
    }

    fn cache_hit(&mut self, c: &Cmd) -> bool {
        self.seq += 1;
        let stamp = self.seq;
        for s in self.segs.iter_mut() {
            if s.lo <= c.sector && c.end() <= s.hi {
                s.stamp = stamp;
                return true;
            }
        }
        false
    }

    fn streamable(&self, c: &Cmd, now: Time) -> bool {
        match &self.prefetch {
            Some(pf) if c.op == Op::Read => {
                c.sector >= pf.lo
                    && c.sector <= pf.limit
                    && (c.end() <= pf.limit || pf.hi_at(now) < pf.limit)
                    && self.zone(c.sector).start == self.zone(pf.base_sector).start
            }
            _ => false,
        }
    }

    /// Stops the read-ahead at `t`, keeping what it read as a segment.
    fn freeze_prefetch(&mut self, t: Time) {
        if let Some(pf) = self.prefetch.take() {
            let hi = pf.hi_at(t);
            self.head_cyl = self.locate(hi.min(self.capacity - 1)).0;
            let lo = pf.lo.max(hi.saturating_sub(self.seg_max));
            if hi > lo {
                self.seq += 1;
                self.segs.push(Seg {
                    lo,
                    hi,
                    stamp: self.seq,
                });
                if self.segs.len() > self.p.cache_segments.max(1) as usize {
                    let (i, _) = self
                        .segs
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, s)| s.stamp)
                        .expect("non-empty");
                    self.segs.remove(i);
                }
            }
        }
    }

    /// Ends the read-ahead (after its minimum part) and returns when the
    /// head is free to move.
    fn leave_prefetch(&mut self, t: Time) -> Time {
        let t = match &self.prefetch {
            Some(pf) => t.max(pf.min_until),
            None => t,
        };
        self.freeze_prefetch(t);
        t
    }

    /// Takes write `c` into the write-back cache at `t`: it completes once
    /// its data has crossed the interface; contiguous writes merge into
    /// one dirty extent of at most 1 MiB.
    fn cache_write(&mut self, t: Time, c: Cmd) {
        let n = u64::from(c.sectors);
        self.invalidate(c.sector, c.end());
        self.dirty_sectors += n;
        match self.dirty.back_mut() {
            Some(last) if last.0 + last.1 == c.sector && last.1 + n <= 2048 => last.1 += n,
            _ => self.dirty.push_back((c.sector, n)),
        }
        let done = t + self.p.hit_overhead + self.bus_time(n);
        self.push_instant(done, c.id);
    }

    /// After a destage at `t`, takes the writes waiting for cache space
    /// in, oldest first, while they fit.
    fn admit_waiting_writes(&mut self, t: Time) {
        while let Some(k) = self.queue.iter().position(|c| c.op == Op::Write) {
            let c = self.queue[k];
            if self.dirty_sectors + u64::from(c.sectors) > self.dirty_limit {
                return;
            }
            self.queue.remove(k);
            self.cache_write(t, c);
        }
    }

    fn invalidate(&mut self, lo: u64, hi: u64) {
        self.segs.retain(|s| s.hi <= lo || s.lo >= hi);
    }

    /// Starts command `c` on the actuator at `t`.
    fn start_cmd(&mut self, t: Time, c: Cmd) {
        self.destage_at = None;
        if self.streamable(&c, t) {
            let pf = self.prefetch.as_mut().expect("streamable");
            // a stream still running is extended; one that stopped at its
            // limit only serves what it read
            if pf.hi_at(t) < pf.limit {
                pf.limit = pf.limit.max((c.end() + self.ra_sectors).min(self.capacity));
            }
            let fin = pf.time_of(c.end()).max(t + self.p.hit_overhead);
            self.busy = Some((fin, Busy::Cmd(c)));
            return;
        }
        let t = self.leave_prefetch(t);
        // a read whose head is cached only reads its tail from the media
        let mut start = c.sector;
        if c.op == Op::Read && self.ra_sectors > 0 {
            if let Some(sg) = self
                .segs
                .iter()
                .find(|sg| sg.lo <= c.sector && c.sector < sg.hi && sg.hi < c.end())
            {
                start = sg.hi;
            }
        }
        let (dt, t_sec, _) = self.position(t, start, c.op);
        let fin = t as f64 + dt + (c.end() - start) as f64 * t_sec;
        self.busy = Some((fin.ceil() as Time, Busy::Cmd(c)));
    }

    fn start_destage(&mut self, t: Time) {
        self.destage_at = None;
        let t = self.leave_prefetch(t);
        // Rotational order: the shortest positioning time among the
        // oldest dirty extents.
        let k = self.dirty.len().min(64);
        let mut best = 0;
        let mut best_t = f64::INFINITY;
        for i in 0..k {
            let pt = self.position(t, self.dirty[i].0, Op::Write).0;
            if pt < best_t {
                best_t = pt;
                best = i;
            }
        }
        let (sector, n) = self.dirty.remove(best).expect("dirty");
        let (dt, t_sec, _) = self.position(t, sector, Op::Write);
        let fin = t as f64 + dt + n as f64 * t_sec;
        let end = sector + n;
        self.busy = Some((fin.ceil() as Time, Busy::Destage { end, n }));
    }

    /// The actuator is free at `t`: choose what to do next.
    fn start_next(&mut self, t: Time) {
        debug_assert!(self.busy.is_none());
        if !self.dirty.is_empty() && self.queue.is_empty() {
            // idle: destage unless something arrives first
            if self.destage_at.is_none() {
                self.destage_at = Some(self.destage_start(t));
            }
            return;
        }
        if self.queue.is_empty() {
            return;
        }
        let i = if self.queue.len() == 1 {
            0
        } else {
            self.pick(t)
        };
        if self.p.write_cache && self.queue[i].op == Op::Write && !self.dirty.is_empty() {
            // a write waiting for cache space: the drive writes cached
            // data and takes the write in once it fits
            self.start_destage(t);
            return;
        }
        let c = self.queue.remove(i);
        self.start_cmd(t, c);
    }

    /// When the drive, idle from `t` with dirty data, starts writing it to
    /// the media: after `destage_delay`, and (`read_ahead_first`) not
    /// before the read-ahead in progress has filled its segment, since
    /// after a read the drive reads ahead "until the allocated buffer is
    /// full" unless a host command arrives (Maxtor's read-ahead mode).
    fn destage_start(&self, t: Time) -> Time {
        let ra_end = match &self.prefetch {
            Some(pf) if self.p.read_ahead_first => pf.time_of(pf.limit),
            _ => t,
        };
        (t + self.p.destage_delay).max(ra_end)
    }

    /// Shortest positioning time first, with aging.
    fn pick(&self, t: Time) -> usize {
        if self.p.ncq_max_wait > 0 {
            if let Some((i, _)) = self
                .queue
                .iter()
                .enumerate()
                .filter(|(_, c)| t.saturating_sub(c.arrival) > self.p.ncq_max_wait)
                .min_by_key(|(i, c)| (c.arrival, *i))
            {
                return i;
            }
        }
        let mut best = 0;
        let mut best_t = f64::INFINITY;
        for (i, c) in self.queue.iter().enumerate() {
            let pt = if self.streamable(c, t) {
                -1.0
            } else {
                self.position(t, c.sector, c.op).0
            };
            if pt < best_t {
                best_t = pt;
                best = i;
            }
        }
        best
    }

    fn finish_busy(&mut self, t: Time, b: Busy, done: &mut Vec<(Time, ReqId)>) {
        match b {
            Busy::Cmd(c) => {
                self.in_flight -= 1;
                done.push((t, c.id));
                let end = c.end().min(self.capacity);
                self.head_cyl = self.locate(end.saturating_sub(1)).0;
                if c.op == Op::Read && self.ra_sectors > 0 {
                    match self.prefetch.as_mut() {
                        // continuing the stream, which goes on linearly
                        Some(pf) => {
                            pf.limit = pf.limit.max(end);
                            let min_end = (end + self.min_pf_sectors).min(pf.limit);
                            pf.min_until = pf.min_until.max(pf.time_of(min_end));
                        }
                        None => {
                            let t_sec = self.zone(c.sector).t_sec;
                            let min_n = self
                                .min_pf_sectors
                                .min(self.zone(c.sector).end.saturating_sub(end));
                            self.prefetch = Some(Prefetch {
                                lo: c.sector,
                                base_sector: end,
                                base_time: t,
                                limit: (end + self.ra_sectors).min(self.capacity),
                                min_until: t + (min_n as f64 * t_sec).ceil() as Time,
                                t_sec,
                            });
                        }
                    }
                } else if c.op == Op::Write {
                    self.invalidate(c.sector, c.end());
                    self.write_end = Some((c.end(), t));
                }
            }
            Busy::Destage { end, n } => {
                self.dirty_sectors -= n;
                self.head_cyl = self.locate(end.min(self.capacity) - 1).0;
                self.write_end = Some((end, t));
                self.admit_waiting_writes(t);
            }
        }
    }
}

impl Device for Disk {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            queue_depth: self.p.ncq_depth.max(1),
            queues_internally: self.p.ncq_depth > 1,
            rotational: true,
        }
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }

    fn submit(&mut self, now: Time, r: DevRequest) {
        self.in_flight += 1;
        let c = Cmd {
            id: r.id,
            sector: r.sector.min(self.capacity - 1),
            sectors: r.sectors.max(1),
            op: r.op,
            arrival: now,
        };
        let n = u64::from(c.sectors);
        match c.op {
            Op::Read if self.ra_sectors > 0 && self.cache_hit(&c) => {
                let t = now + self.p.hit_overhead + self.bus_time(n);
                self.push_instant(t, c.id);
                return;
            }
            Op::Write if self.p.write_cache && self.dirty_sectors + n <= self.dirty_limit => {
                self.cache_write(now, c);
                if self.busy.is_none() && self.queue.is_empty() && self.destage_at.is_none() {
                    self.start_next(now);
                }
                return;
            }
            _ => {}
        }
        self.queue.push(c);
        if self.busy.is_none() {
            self.destage_at = None;
            self.start_next(now);
        }
    }

    fn next_event(&self) -> Option<Time> {
        let internal = match self.busy {
            Some((t, _)) => Some(t),
            None => self.destage_at,
        };
        match (self.instant.peek().map(|r| r.0 .0), internal) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, now: Time, done: &mut Vec<(Time, ReqId)>) {
        loop {
            let ti = self.instant.peek().map(|r| r.0 .0).unwrap_or(Time::MAX);
            let tb = self.busy.map(|b| b.0).unwrap_or(Time::MAX);
            let td = if self.busy.is_none() {
                self.destage_at.unwrap_or(Time::MAX)
            } else {
                Time::MAX
            };
            let t = ti.min(tb).min(td);
            if t > now {
                return;
            }
            if ti == t {
                let Reverse((t, _, id)) = self.instant.pop().expect("peeked");
                self.in_flight -= 1;
                done.push((t, id));
            } else if tb == t {
                let (t, b) = self.busy.take().expect("busy");
                self.finish_busy(t, b, done);
                self.start_next(t);
            } else {
                self.destage_at = None;
                if self.queue.is_empty() && !self.dirty.is_empty() {
                    self.start_destage(t);
                } else {
                    self.start_next(t);
                }
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }
}
