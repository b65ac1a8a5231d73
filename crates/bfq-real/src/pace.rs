//! One flow's request generator ([`Cursor`]), pacing ([`Pacer`]: start
//! delay, byte budget and runs, think time, on/off, periodic batches) and
//! accounting ([`Acc`]), shared by engine and kernel runs.

use crate::desc::{FlowDesc, OnOff, Pattern, Periodic};
use crate::report::FlowReport;
use bfq_engine::AlignedBuf;
use bfq_scenario::result::Hist;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The run's start and which of its flows have ended, for flows that
/// start only after others (`FlowDesc::after`, docs/scenarios.md): a
/// flow's thread marks its end when it returns (or unwinds), through
/// [`Ends::guard`].
pub(crate) struct Ends {
    ended: Mutex<Vec<bool>>,
    cv: Condvar,
    start: OnceLock<Instant>,
}

/// Marks a flow ended when dropped.
pub(crate) struct EndGuard(Arc<Ends>, usize);

impl Drop for EndGuard {
    fn drop(&mut self) {
        let mut e = self.0.ended.lock().unwrap_or_else(|p| p.into_inner());
        e[self.1] = true;
        self.0.cv.notify_all();
    }
}

impl Ends {
    /// No flow of `n` has ended.
    pub(crate) fn new(n: usize) -> Arc<Ends> {
        Arc::new(Ends {
            ended: Mutex::new(vec![false; n]),
            cv: Condvar::new(),
            start: OnceLock::new(),
        })
    }

    /// The run's start: the first flow thread past the start barrier sets
    /// it, so that every flow's times count from one instant.
    pub(crate) fn run_start(&self) -> Instant {
        *self.start.get_or_init(Instant::now)
    }

    /// Flow `i` ends when the guard drops.
    pub(crate) fn guard(self: &Arc<Self>, i: usize) -> EndGuard {
        EndGuard(self.clone(), i)
    }

    /// Waits until every flow of `deps` has ended; false if the run stops
    /// or reaches `end` first.
    fn wait(&self, deps: &[usize], stop: &AtomicBool, end: Instant) -> bool {
        let mut e = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if deps.iter().all(|&k| e[k]) {
                return true;
            }
            let now = Instant::now();
            if stop.load(Ordering::Relaxed) || now >= end {
                return false;
            }
            let t = (end - now).min(Duration::from_millis(20));
            e = self
                .cv
                .wait_timeout(e, t)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A flow's own start and end in a run: the flows it waits for, and its
/// `stop` and `duration`.
pub(crate) struct Gate {
    /// The run's flows' ends.
    pub(crate) ends: Arc<Ends>,
    /// Indices of the flows this one waits for.
    pub(crate) deps: Vec<usize>,
}

/// Each flow's [`Gate`]: `after` names resolved to indices (an error names
/// an unknown one, or one that is the flow itself).
pub(crate) fn gates(flows: &[FlowDesc]) -> io::Result<Vec<Gate>> {
    let ends = Ends::new(flows.len());
    flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let deps = f
                .after
                .iter()
                .map(|n| match flows.iter().position(|g| &g.name == n) {
                    Some(k) if k != i => Ok(k),
                    _ => Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("flow {}: after: no other flow is named {n}", f.name),
                    )),
                })
                .collect::<io::Result<Vec<usize>>>()?;
            Ok(Gate {
                ends: ends.clone(),
                deps,
            })
        })
        .collect()
}

/// Small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The offsets one flow visits.
pub(crate) struct Cursor {
    pattern: Pattern,
    base: u64,
    len: u64,
    block: u64,
    pos: u64,
    /// How far `pos` moves per request: 1, or a part's count of parts
    /// ([`cursor_part`]).
    step: u64,
    rng: Rng,
}

impl Cursor {
    pub(crate) fn next(&mut self) -> (u64, u32) {
        let blocks = (self.len / self.block).max(1);
        match &self.pattern {
            Pattern::Seq => {
                let off = self.base + (self.pos % blocks) * self.block;
                self.pos += self.step;
                (off, self.block as u32)
            }
            Pattern::Rand => (
                self.base + (self.rng.next() % blocks) * self.block,
                self.block as u32,
            ),
            Pattern::Replay(v) => {
                if v.is_empty() {
                    return (self.base, self.block as u32);
                }
                let (o, l) = v[(self.pos as usize) % v.len()];
                self.pos += self.step;
                (self.base + o, l)
            }
        }
    }
}

/// Makes `b` hold at least `len` bytes for a request of that length,
/// which then uses the start of it: a request longer than any before in
/// this buffer gets a larger one (filled with `fill`), a shorter one
/// none. A replay's requests of mixed sizes thus allocate only while the
/// flow's buffers grow to its longest request, never per request.
pub(crate) fn room(b: &mut AlignedBuf, len: u32, fill: u8) {
    if b.len() < len as usize {
        *b = AlignedBuf::new(len as usize);
        b.fill(fill);
    }
}

/// Per-flow pacing: start delay, byte budget and runs, think time,
/// on/off, periodic batches.
pub(crate) struct Pacer {
    start: Instant,
    desc_start: Duration,
    think: Duration,
    on_off: Option<OnOff>,
    on_left: u64,
    periodic: Option<Periodic>,
    batch_left: u64,
    next_period: Instant,
    budget: Option<u64>,
    left: u64,
    runs_left: u32,
    repeat: Duration,
    /// `(start, end)` of each finished run, s since the flow's start.
    pub(crate) runs: Vec<(f64, f64)>,
    /// When the current run issued its first request.
    run_start: Option<f64>,
    /// When the flow issued its first request.
    first_start: Option<f64>,
    ended: bool,
    rng: Rng,
    gate: Gate,
    /// The flows it waits for have ended.
    released: bool,
    /// The flow's own end (`stop`, or `duration` after its first request).
    own_end: Option<Instant>,
    lasts: Option<Duration>,
}

impl Pacer {
    pub(crate) fn new(d: &FlowDesc, start: Instant, seed: u64, gate: Gate) -> Self {
        let mut p = Pacer {
            start,
            desc_start: d.start,
            think: d.think,
            on_off: d.on_off,
            on_left: u64::MAX,
            periodic: d.periodic,
            batch_left: d.periodic.map(|p| p.bytes).unwrap_or(u64::MAX),
            next_period: start + d.start,
            budget: d.bytes,
            left: d.bytes.unwrap_or(u64::MAX),
            runs_left: d.runs.max(1) - 1,
            repeat: d.repeat,
            runs: Vec::new(),
            run_start: None,
            first_start: None,
            ended: false,
            rng: Rng(0xD1B5_4A32_D192_ED03 ^ (seed + 7).wrapping_mul(0x9E37_79B9)),
            released: gate.deps.is_empty(),
            gate,
            own_end: d.stop.map(|s| start + s),
            lasts: d.duration,
        };
        if let Some(o) = p.on_off {
            p.on_left = p.uniform(o.on_bytes.0, o.on_bytes.1).max(1);
        }
        if let Some(per) = p.periodic {
            p.next_period = start + d.start + per.every;
        }
        p
    }

    fn uniform(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.rng.next() % (hi - lo + 1)
        }
    }

    fn sleep_until(t: Instant, stop: &AtomicBool, end: Instant) -> bool {
        let t = t.min(end);
        loop {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            if now >= t {
                return now < end;
            }
            std::thread::sleep((t - now).min(Duration::from_millis(20)));
        }
    }

    /// The earlier of the run's end and the flow's own.
    fn end(&self, run_end: Instant) -> Instant {
        self.own_end.map_or(run_end, |e| e.min(run_end))
    }

    /// Waits until the flow may issue its next request; false = done.
    pub(crate) fn before(&mut self, stop: &AtomicBool, run_end: Instant) -> bool {
        let end = self.end(run_end);
        if self.ended {
            return false;
        }
        if !self.released {
            if !self.gate.ends.wait(&self.gate.deps, stop, end) {
                return false;
            }
            self.released = true;
        }
        if self.left == 0 {
            let ended = self.start.elapsed().as_secs_f64();
            self.runs
                .push((self.run_start.take().unwrap_or(ended), ended));
            if self.runs_left == 0 {
                self.ended = true;
                return false;
            }
            self.runs_left -= 1;
            self.left = self.budget.unwrap_or(u64::MAX);
            if !Self::sleep_until(Instant::now() + self.repeat, stop, end) {
                return false;
            }
        }
        // Once a run has started its start delay is behind it: the clock is
        // read once per request, at the end.
        if self.run_start.is_none() {
            if !Self::sleep_until(self.start + self.desc_start, stop, end) {
                return false;
            }
            // A run starts with its first request: the start delay and the
            // gap before a repetition are not part of it.
            let now = self.start.elapsed().as_secs_f64();
            self.run_start = Some(now);
            if self.first_start.is_none() {
                self.first_start = Some(now);
                if let Some(d) = self.lasts {
                    self.own_end = Some(self.end(Instant::now() + d));
                }
            }
        }
        let end = self.end(run_end);
        if let Some(o) = self.on_off {
            if self.on_left == 0 {
                let off = self.uniform(o.off.0.as_nanos() as u64, o.off.1.as_nanos() as u64);
                if !Self::sleep_until(Instant::now() + Duration::from_nanos(off), stop, end) {
                    return false;
                }
                self.on_left = self.uniform(o.on_bytes.0, o.on_bytes.1).max(1);
            }
        }
        if let Some(p) = self.periodic {
            if self.batch_left == 0 {
                if !Self::sleep_until(self.next_period, stop, end) {
                    return false;
                }
                self.next_period += p.every;
                self.batch_left = p.bytes.max(1);
            }
        }
        !stop.load(Ordering::Relaxed) && Instant::now() < end
    }

    /// Counts a request against the budgets when it is issued.
    pub(crate) fn charge(&mut self, bytes: u32) {
        let b = u64::from(bytes.max(1));
        self.left = self.left.saturating_sub(b);
        self.on_left = self.on_left.saturating_sub(b);
        self.batch_left = self.batch_left.saturating_sub(b);
    }

    pub(crate) fn after(&mut self, _bytes: u64, stop: &AtomicBool, run_end: Instant) {
        if !self.think.is_zero() {
            Self::sleep_until(Instant::now() + self.think, stop, self.end(run_end));
        }
    }

    /// The flow's runs, once its requests in flight are reaped: a run cut
    /// by the flow's own end ends now, as in the simulator.
    pub(crate) fn close(&mut self) -> (Option<f64>, &[(f64, f64)]) {
        let own = self.own_end.is_some_and(|e| Instant::now() >= e);
        if let (true, Some(s)) = (own, self.run_start.take()) {
            self.runs.push((s, self.start.elapsed().as_secs_f64()));
        }
        (self.first_start, &self.runs)
    }
}

pub(crate) struct Acc {
    ios: u64,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    lat: Hist,
    series: Vec<u64>,
    interval_ns: u64,
    start: Instant,
}

impl Acc {
    pub(crate) fn new(interval: Duration) -> Acc {
        Acc::since(interval, Instant::now())
    }

    /// An empty account whose series counts from `start`.
    pub(crate) fn since(interval: Duration, start: Instant) -> Acc {
        Acc {
            ios: 0,
            bytes: 0,
            errors: 0,
            first_error: None,
            lat: Hist::default(),
            series: Vec::new(),
            interval_ns: (interval.as_nanos() as u64).max(1),
            start,
        }
    }

    /// Records a request issued at `t0` that ended now with `res`: its
    /// latency in the histogram, its bytes in the series' interval (one
    /// clock read, no allocation but the series' next interval).
    pub(crate) fn record(&mut self, res: io::Result<usize>, t0: Instant) {
        match res {
            Ok(n) => {
                let now = Instant::now();
                self.ios += 1;
                self.bytes += n as u64;
                self.lat
                    .add(now.saturating_duration_since(t0).as_nanos() as u64);
                let since = now.saturating_duration_since(self.start).as_nanos() as u64;
                let k = (since / self.interval_ns) as usize;
                if k >= self.series.len() {
                    self.series.resize(k + 1, 0);
                }
                self.series[k] += n as u64;
            }
            Err(e) => {
                self.errors += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(e.to_string());
                }
            }
        }
    }

    /// Adds what `other` recorded (another task of the same flow, with
    /// the same series interval and start) to this one.
    pub(crate) fn merge(&mut self, other: Acc) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.lat.merge(&other.lat);
        if self.series.len() < other.series.len() {
            self.series.resize(other.series.len(), 0);
        }
        for (a, b) in self.series.iter_mut().zip(other.series) {
            *a += b;
        }
    }

    pub(crate) fn report(
        mut self,
        d: &FlowDesc,
        (start_s, runs): (Option<f64>, &[(f64, f64)]),
    ) -> FlowReport {
        let us = |ns: u64| ns as f64 / 1e3;
        FlowReport {
            name: d.name.clone(),
            weight: d.effective_weight(),
            group: d.group.clone(),
            class: d.prio.class as u8,
            due_share: 0.0,
            ios: self.ios,
            bytes: self.bytes,
            errors: self.errors,
            first_error: self.first_error.clone(),
            lat_mean_us: self.lat.mean() / 1e3,
            lat_p50_us: us(self.lat.quantile(0.5)),
            lat_p99_us: us(self.lat.quantile(0.99)),
            lat_max_us: us(self.lat.max()),
            lat: std::mem::take(&mut self.lat),
            series_bytes: std::mem::take(&mut self.series),
            start_s,
            run_starts_s: runs.iter().map(|r| r.0).collect(),
            run_ends_s: runs.iter().map(|r| r.1).collect(),
        }
    }
}

pub(crate) fn cursor(d: &FlowDesc, region: (u64, u64), seed: u64) -> Cursor {
    Cursor {
        pattern: d.pattern.clone(),
        base: region.0,
        len: region.1,
        block: u64::from(d.block),
        pos: 0,
        step: 1,
        rng: Rng(0x9E37_79B9_7F4A_7C15 ^ (seed + 1).wrapping_mul(0x1234_5678_9ABC_DEF1)),
    }
}

/// Part `k` of `n` of flow `seed`'s requests, for a flow whose requests
/// are issued by `n` tasks: a sequential or replayed flow's requests
/// `k`, `k + n`, `k + 2n`... (the parts together visit what [`cursor`]
/// visits), a random flow's own generator per part (part 0's is
/// [`cursor`]'s).
pub(crate) fn cursor_part(d: &FlowDesc, region: (u64, u64), seed: u64, k: u32, n: u32) -> Cursor {
    let mut c = cursor(d, region, seed + (u64::from(k) << 32));
    c.pos = k.into();
    c.step = n.max(1).into();
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flows_latencies_take_bounded_space_however_many_requests_it_makes() {
        let d = FlowDesc::reader("r", Pattern::Rand, 4096);
        let report_len = |n: u64| {
            let mut acc = Acc::new(Duration::from_secs(3600));
            for _ in 0..n {
                acc.record(Ok(4096), Instant::now());
            }
            let r = acc.report(&d, (None, &[]));
            assert_eq!((r.ios, r.lat.count()), (n, n));
            assert!(r.lat_p50_us <= r.lat_p99_us && r.lat_p99_us <= r.lat_max_us);
            serde_json::to_string(&r).unwrap().len()
        };
        let (small, large) = (report_len(1_000), report_len(300_000));
        // Every latency kept would take megabytes; the histogram's
        // buckets stay within 3 776 counts whatever the clock reads.
        assert!(large < 64 << 10, "{large} bytes for 300 000 requests");
        assert!(small < 64 << 10, "{small} bytes for 1 000 requests");
    }
}
