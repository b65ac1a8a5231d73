//! The scheduling core: the scheduler, the requests it holds, and the
//! device-queue accounting, behind one lock ([`crate::driver::Shared`]).
//!
//! Every step here is short (a scheduler call, a table update, building
//! an SQE): the decision is serialised, the expensive part (entering the
//! kernel) happens on the submitting threads, outside this lock. Nothing
//! here blocks or does I/O; the only syscall is re-arming the idle timer.

use crate::admit::Admission;
use crate::slot::{Completer, Finished};
use crate::target_check::misaligned_buffer;
use bfq_core::{
    Dispatch, FlowId, FlowInternals, FlowSpec, GroupId, Internals, Op as SOp, Request, SchedError,
    Scheduler, Time, SECTOR_BYTES,
};
use io_uring::{opcode, squeue, types};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The `from` of a request handed in by no client ring (see
/// [`Core::add`]).
pub(crate) const NO_RING: u32 = u32::MAX;

/// The longest one idle timer sleeps (1 s); a scheduler idling longer is
/// asked again each time it fires.
pub(crate) const MAX_IDLE_WAIT_NS: u64 = 1_000_000_000;

/// What a request does once the scheduler dispatches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    Read,
    Write,
    /// An io_uring NOP: goes through the scheduler, touches no storage.
    Nop,
}

/// A submitted request. Dropping it without a result (engine gone,
/// shutdown) completes it with `ECANCELED`, so no submitter ever waits
/// forever.
pub(crate) struct Op {
    pub kind: OpKind,
    pub flow: FlowId,
    pub offset: u64,
    pub ptr: *mut u8,
    pub len: u32,
    pub sync: bool,
    /// The request's own file ([`FileTarget`]), else the engine's target.
    pub file: Option<FileTarget>,
    /// The request's hold on its completion slot (where its buffer
    /// lives), until it delivers its result.
    pub sink: Option<Completer>,
    /// Submitted before a shutdown began: a `Drain` shutdown serves it
    /// even if it reaches the scheduler later (from a thread's plug).
    pub before_stop: bool,
}

// SAFETY: `ptr` points into the buffer in `sink`'s slot, which stays there
// as long as the Op holds the slot; the Op only moves between threads.
unsafe impl Send for Op {}

impl Op {
    /// Delivers the result (once), wakes the waiter and lets go of the
    /// slot (not under a lock: see [`Finished`]).
    pub(crate) fn finish(&mut self, res: io::Result<usize>) {
        if let Some(f) = self.finish_deferred(res) {
            f.wake();
        }
    }

    /// Delivers the result (once); the caller wakes the waiter and lets
    /// go of the slot once it holds no lock (see [`Finished`]).
    pub(crate) fn finish_deferred(&mut self, res: io::Result<usize>) -> Option<Finished> {
        self.sink.take().map(|s| s.complete(res))
    }

    /// The core takes the request's hold on its slot, to give it its
    /// result: the request leaves the engine's count (`admission`, see
    /// [`crate::admit`]) here, once (the hold is taken once), before its
    /// result is stored. Every request the engine counted in gets its
    /// result from the core through here; [`Op::finish`] is only for
    /// requests never counted in, or left when the engine is gone.
    #[inline]
    pub(crate) fn take_sink(&mut self, admission: &Admission) -> Option<Completer> {
        let sink = self.sink.take();
        if sink.is_some() {
            admission.release();
        }
        sink
    }

    /// Fails a request the core holds or is handed (see
    /// [`Op::take_sink`]); returns it finished, to wake and let go of
    /// with the lock released.
    fn fail(&mut self, admission: &Admission, e: io::Error) -> Option<Finished> {
        self.take_sink(admission).map(|s| s.complete(Err(e)))
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        self.finish(Err(cancelled()));
    }
}

pub(crate) fn cancelled() -> io::Error {
    io::Error::from_raw_os_error(libc::ECANCELED)
}

pub(crate) fn engine_gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the engine has shut down")
}

/// The scheduler's view of request `op` held in slot `idx`: its sectors
/// on the device (the file's base added), at least one and at most
/// `u32::MAX`.
fn scheduler_request(op: &Op, idx: u32) -> Request {
    let base = op.file.as_ref().map_or(0, |f| f.sector_base());
    let sector = base.saturating_add(op.offset / SECTOR_BYTES);
    let end = op.offset.saturating_add(u64::from(op.len));
    let end = base.saturating_add(end.div_ceil(SECTOR_BYTES));
    Request {
        id: u64::from(idx),
        flow: op.flow,
        sector,
        sectors: (end - sector).clamp(1, u64::from(u32::MAX)) as u32,
        op: if op.kind == OpKind::Write {
            SOp::Write
        } else {
            SOp::Read
        },
        sync: op.sync,
    }
}

fn scheduler_failed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the scheduler failed (panicked)")
}

/// A file that requests name on their own, instead of the engine's target:
/// for front ends that serve many files (a filesystem) through one engine
/// and one scheduler. The scheduler sees sector `sector_base + offset / 512`
/// (give each file its own range, so that distance between files looks like
/// a seek and positions within a file look sequential).
#[derive(Clone, Debug)]
pub struct FileTarget {
    file: Arc<File>,
    sector_base: u64,
}

impl FileTarget {
    /// Wraps an open file (its flags, e.g. `O_DIRECT`, are the caller's).
    pub fn new(file: File, sector_base: u64) -> Self {
        FileTarget {
            file: Arc::new(file),
            sector_base,
        }
    }
    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }
    /// Where the file starts in the scheduler's sector space.
    pub fn sector_base(&self) -> u64 {
        self.sector_base
    }
}

/// One trace event (see [`crate::EngineBuilder::trace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Nanoseconds since the engine started.
    pub t: Time,
    /// `Q` queued in the scheduler, `D` dispatched to the device, `C`
    /// completed.
    pub event: char,
    /// The flow that issued the request.
    pub flow: FlowId,
    /// Request number, unique over the engine's life.
    pub req: u64,
    /// First sector (512 bytes) of the request.
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u32,
    /// A write (else a read).
    pub write: bool,
}

/// Receives trace events, under the core's lock.
pub(crate) type TraceSink = Box<dyn FnMut(&TraceEvent) + Send>;

/// How [`crate::Engine::shutdown`] treats requests not yet done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    /// Refuse new requests, serve every queued and in-flight one, then stop.
    /// A request the kernel never completes (a read of a pipe nobody
    /// writes, a hung device) keeps it waiting: [`ShutdownMode::DrainFor`]
    /// bounds the wait.
    Drain,
    /// Refuse new requests, fail queued ones with `ECANCELED`, ask the
    /// kernel to cancel in-flight ones and wait for all of them.
    Cancel,
    /// `Drain` for at most this long (from the call, on the monotonic
    /// clock), then `Cancel` whatever is left: requests still queued fail
    /// with `ECANCELED`, in-flight ones are cancelled in the kernel and
    /// waited for, as with `Cancel` (so the call may return later than the
    /// deadline by the time the kernel takes to cancel them). Every
    /// `Duration` is accepted: `Duration::ZERO` cancels whatever is not
    /// done when the shutdown begins (results already in are kept), and a
    /// deadline beyond the clock's range (`Duration::MAX`) is never
    /// reached, as `Drain`.
    DrainFor(std::time::Duration),
}

/// The engine's counters.
///
/// Every request a caller issues (each call of `read`, `write`,
/// `read_async`, `write_async`, `read_file_async`, `write_file_async`,
/// `nop_async`) is counted exactly once, when the engine gives it its
/// result, in one of `completed`, `cancelled`, `refused_full`,
/// `refused_invalid` and `broken`; until then it is in `held`:
///
/// ```text
/// issued = completed + cancelled + refused_full + refused_invalid + broken + held
/// ```
///
/// The sum is exact whenever no request is being submitted at that
/// moment (a request is counted in `held` as it is submitted, and one
/// refused at the bound is counted in `held` for a moment), and `held` is
/// 0 once every result is in, as in the counters
/// [`crate::Engine::shutdown`] returns. A caller that has seen a
/// request's result finds it counted. `errors` is a part of `completed`,
/// not a class of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Requests the device completed, successfully or not: the kernel
    /// gave their result (a request on the device that a `Cancel`
    /// shutdown cancels is one of these, with `ECANCELED`).
    pub completed: u64,
    /// Of `completed`, those that failed: the kernel's error, a short
    /// transfer, `ECANCELED` for a request cancelled on the device.
    pub errors: u64,
    /// Requests failed with `ECANCELED` before reaching the device:
    /// queued when a `Cancel` shutdown began (or a `DrainFor` shutdown's
    /// deadline passed), or submitted after a shutdown began.
    pub cancelled: u64,
    /// Requests refused at once with `InvalidInput`, never queued: by the
    /// engine (longer than 4 GiB - 1, not ending below 2^64 bytes, a write
    /// to a target open read-only, an `O_DIRECT` request not in whole
    /// direct-I/O blocks) or by the scheduler (an unknown or closed flow).
    pub refused_invalid: u64,
    /// Requests failed with `BrokenPipe` before reaching the device:
    /// queued in the scheduler when it panicked (and the request it
    /// panicked on), or submitted after that (or after the engine
    /// stopped). Requests on the device then complete with their own
    /// result and are counted in `completed`.
    pub broken: u64,
    /// Requests queued in the scheduler now.
    pub queued: u64,
    /// Requests on the device now.
    pub in_flight: u64,
    /// Requests the engine holds now, wherever they are (in a thread's
    /// plug, queued, on the device, their result on its way): at most
    /// `EngineBuilder::max_requests` (a request being refused is counted
    /// for a moment too).
    pub held: u64,
    /// Requests refused at once (`WouldBlock`) because the engine held
    /// `EngineBuilder::max_requests` requests.
    pub refused_full: u64,
    /// Times the completion of the device's last request in flight was
    /// reported, leaving it nothing to do until the next dispatch: with
    /// one deep flow, how often its client let the device run dry.
    pub device_idles: u64,
    /// Times the service thread blocked waiting for an event.
    pub parks: u64,
    /// Times a thread that started to linger (it left the engine with a
    /// request plugged, or outstanding on its ring, and is coming back
    /// for it) woke the service thread, which was about to sleep without
    /// a bound (docs/engine.md, "Lingering rings").
    pub linger_wakes: u64,
    /// Requests submitted by the service thread (after an idle timer, for
    /// rings whose owner was away, or all of them in dispatcher mode).
    pub service_submits: u64,
    /// Idle timers armed for the scheduler.
    pub timers_armed: u64,
    /// Idle timers that fired.
    pub timers_fired: u64,
    /// Requests submitted on their thread's private ring, the thread
    /// waiting there for each (`EngineBuilder::private_rings`).
    pub private_waits: u64,
    /// Requests completed on another ring than their submitting thread's
    /// (the core's lock holder dispatched them onto its own ring): their
    /// owner learns of the result only once that ring is reaped.
    pub foreign_completions: u64,
    /// Requests whose completion the service thread reported (it reaped
    /// a ring whose owner was away, or its own ring).
    pub service_completions: u64,
    /// Waiters woken by the thread that reaped their request's
    /// completion (an eventfd write, an unpark or a `Waker`; a `Waker` is
    /// counted even when it wakes a task of the reaping thread itself, so
    /// on a ring bound with [`crate::Engine::thread_ring`] nearly every
    /// completion counts; a thread waiting in the ring it reaps itself is
    /// not). Not only wake-ups across threads, then. Local mode only: the
    /// dispatcher's wake relay and requests that fail at once are not
    /// counted.
    pub cross_wakes: u64,
    /// Threads' rings set up again with `COOP_TASKRUN`, and set up again
    /// without it, as their threads' waits for a CPU rose and fell
    /// (`CoopTaskrun::Auto`).
    pub coop_switches: [u64; 2],
    /// Times a submitting thread's ring could not be made: the kernel
    /// refused the ring or its eventfd (`EMFILE` at the process's limit
    /// of open files, `ulimit -n`: each thread's ring takes three to five
    /// descriptors; `ENOMEM`). That thread's requests
    /// then go through the service thread, as in `SubmitMode::Dispatcher`
    /// (a hand-over between threads per batch: many times slower at high
    /// request rates); it tries again at its first request 100 ms after a
    /// failure, not at every request, and once a ring is made it keeps it
    /// as any other thread. Every failed attempt is counted.
    pub ring_setup_failed: u64,
    /// Times the service thread took over a ring bound to its thread's
    /// event loop ([`crate::Engine::thread_ring`]) because its owner had
    /// left completions or plugged requests waiting for 1-2 ms (or a
    /// shutdown began): an event loop that does not watch the ring's
    /// descriptor, or computes long without entering the kernel, shows
    /// here. Their results then reach the futures through their wakers
    /// from the service thread.
    pub bound_takeovers: u64,
    /// The OS error (errno) of the first of those failures, where it had
    /// one ([`EngineStats::ring_setup_error`]).
    pub ring_setup_errno: Option<i32>,
    /// Times a thread found the core's lock held, and of those the times
    /// it then slept on it (after spinning for up to 5 us): how often
    /// threads wait for the scheduler's serialised step.
    pub core_waits: [u64; 2],
    /// Nanoseconds threads waited for the core's lock after finding it
    /// held, in all and the longest wait. A wait far longer than a turn
    /// (under a microsecond per request) is a holder that lost its CPU
    /// while holding the lock: with a CPU-bound program beside, that
    /// lasts up to the other program's time slice (milliseconds), and
    /// every thread that needs the scheduler meanwhile waits with it.
    pub core_wait_ns: [u64; 2],
    /// Dispatch to report (the completion reaped and told to the core),
    /// for requests completed on their submitting thread's ring: a count
    /// per [`LatencyHistogram`] bucket.
    pub own_latency: LatencyHistogram,
    /// The same for requests completed on another thread's ring.
    pub foreign_latency: LatencyHistogram,
    /// From a cross-thread eventfd wake of a thread waiting in its ring
    /// to that thread running again and seeing it.
    pub wake_latency: LatencyHistogram,
}

impl EngineStats {
    /// The OS error of the first failure to make a thread's ring
    /// ([`EngineStats::ring_setup_failed`]), if any.
    pub fn ring_setup_error(&self) -> Option<io::Error> {
        self.ring_setup_errno.map(io::Error::from_raw_os_error)
    }
}

/// Counts of times by powers of two: bucket 0 holds times under 1 us
/// (1024 ns), bucket `i` times in `[2^(9+i), 2^(10+i))` ns, the last one
/// everything from 2^(9+15) ns (16.8 ms) up.
pub type LatencyHistogram = [u64; LATENCY_BUCKETS];

/// Buckets of a [`LatencyHistogram`].
pub const LATENCY_BUCKETS: usize = 16;

/// The [`LatencyHistogram`] bucket of `ns`.
#[inline]
pub(crate) fn latency_bucket(ns: u64) -> usize {
    ((64 - (ns >> 10).leading_zeros()) as usize).min(LATENCY_BUCKETS - 1)
}

/// A request the scheduler holds or the device serves.
struct Held {
    op: Op,
    /// The ring it was submitted on, once dispatched.
    ring: Option<u32>,
    /// The ring of the thread whose plug handed it in ([`NO_RING`]: the
    /// service thread, dispatcher mode).
    from: u32,
    /// When it was dispatched.
    dispatched: Time,
    /// Trace: unique request number, and the scheduler's view.
    seq: u64,
    req: Request,
}

/// The core's configuration.
pub(crate) struct CoreConfig {
    pub depth: u32,
    pub allow_short: bool,
    pub async_submit: bool,
    pub target: Option<RawFd>,
    /// The buffer alignment the kernel reports for direct I/O on the
    /// target (0: none, or not `O_DIRECT`): explains its `EINVAL`.
    pub dio_mem_align: u32,
    pub timerfd: RawFd,
    /// CLOCK_MONOTONIC at the engine's time 0, in ns.
    pub origin_mono: u64,
    pub trace: Option<TraceSink>,
    /// The count of requests the engine holds: the core counts off each
    /// request it gives its result ([`Op::take_sink`]).
    pub admission: Arc<Admission>,
}

/// The scheduler and its requests (see the module doc).
pub(crate) struct Core {
    sched: Box<dyn Scheduler>,
    cfg: CoreConfig,
    /// Requests, indexed by their ReqId (the SQE's user data).
    held: Vec<Option<Held>>,
    free: Vec<u32>,
    in_flight: u32,
    stopping: Option<ShutdownMode>,
    /// The scheduler panicked: it is never called again.
    failed: bool,
    /// Set once the service thread has exited: submissions are refused.
    pub closed: bool,
    pub stats: EngineStats,
    /// The idle timer's deadline, while armed.
    timer_at: Option<Time>,
    seq: u64,
    /// The latest time handed to the scheduler (see [`Core::at`]).
    last_now: Time,
    /// Requests the core failed on its own (a `Cancel` shutdown, a
    /// scheduler's panic), to wake and let go of once the lock is
    /// released (see [`Finished`]; the driver's `CoreGuard` does).
    finished: Vec<Finished>,
}

impl Core {
    pub(crate) fn new(sched: Box<dyn Scheduler>, cfg: CoreConfig) -> Self {
        Core {
            sched,
            cfg,
            held: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            stopping: None,
            failed: false,
            closed: false,
            stats: EngineStats::default(),
            timer_at: None,
            seq: 0,
            last_now: 0,
            finished: Vec::new(),
        }
    }

    /// The requests the core failed on its own since the last call (see
    /// `finished`), to wake and let go of with the lock released.
    pub(crate) fn take_finished(&mut self) -> Vec<Finished> {
        std::mem::take(&mut self.finished)
    }

    /// Whether no request waits in `finished`.
    pub(crate) fn finished_is_empty(&self) -> bool {
        self.finished.is_empty()
    }

    /// Calls the scheduler; a panic marks the core failed (every queued
    /// request fails, nothing is asked of the scheduler again).
    fn sched<R>(&mut self, f: impl FnOnce(&mut dyn Scheduler) -> R) -> Option<R> {
        if self.failed {
            return None;
        }
        match catch_unwind(AssertUnwindSafe(|| f(&mut *self.sched))) {
            Ok(r) => Some(r),
            Err(_) => {
                // In-flight requests still complete with their own result.
                self.failed = true;
                self.stopping.get_or_insert(ShutdownMode::Drain);
                self.stats.broken += self.fail_queued(scheduler_failed);
                None
            }
        }
    }

    /// `now` as handed to the scheduler: never earlier than a time it was
    /// given before. Callers read the clock before taking the core's lock
    /// (a clock read, ~20 ns, is no part of the serialised step), so a
    /// thread that read it earlier may take the lock after one that read
    /// it later; its time is then raised to the later one, and the
    /// scheduler never sees time go backwards.
    fn at(&mut self, now: Time) -> Time {
        self.last_now = self.last_now.max(now);
        self.last_now
    }

    /// What the scheduler's mechanisms did so far (`None` after a panic).
    pub(crate) fn internals(&mut self, now: Time) -> Option<Internals> {
        let now = self.at(now);
        self.sched(|s| s.internals(now))
    }

    /// What the scheduler's mechanisms did for `flow` so far (`None`
    /// after a panic).
    pub(crate) fn flow_internals(&mut self, flow: FlowId) -> Option<FlowInternals> {
        self.sched(|s| s.flow_internals(flow))
    }

    pub(crate) fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        if self.stopping.is_some() || self.closed {
            return Err(SchedError::UnknownGroup(spec.group));
        }
        let now = self.at(now);
        self.sched(|s| s.add_flow(now, spec))
            .unwrap_or(Err(SchedError::UnknownGroup(spec.group)))
    }

    pub(crate) fn remove_flow(&mut self, now: Time, id: FlowId) {
        let now = self.at(now);
        let _ = self.sched(|s| s.remove_flow(now, id));
    }

    pub(crate) fn add_group(&mut self, parent: GroupId, w: u32) -> Result<GroupId, SchedError> {
        self.sched(|s| s.add_group(parent, w))
            .unwrap_or(Err(SchedError::UnknownGroup(parent)))
    }

    pub(crate) fn remove_group(&mut self, g: GroupId) -> Result<(), SchedError> {
        self.sched(|s| s.remove_group(g))
            .unwrap_or(Err(SchedError::UnknownGroup(g)))
    }

    pub(crate) fn snapshot(&self) -> EngineStats {
        let mut s = self.stats;
        s.queued = self
            .held
            .iter()
            .filter(|h| matches!(h, Some(h) if h.ring.is_none()))
            .count() as u64;
        s.in_flight = u64::from(self.in_flight);
        s.held = self.cfg.admission.held();
        s.refused_full = self.cfg.admission.refused();
        s.refused_invalid += self.cfg.admission.invalid();
        s
    }

    pub(crate) fn stopping(&self) -> Option<ShutdownMode> {
        self.stopping
    }

    /// Why a request must fail at once, counted in [`EngineStats`]: the
    /// engine is closed or its scheduler failed (`broken`), the engine
    /// stops and the request is not one a draining stop serves
    /// (`cancelled`), or its end (offset + length) is not below 2^64
    /// bytes (`refused_invalid`).
    fn refusal(&mut self, op: &Op) -> Option<io::Error> {
        if self.failed || self.closed {
            self.stats.broken += 1;
            return Some(if self.failed {
                scheduler_failed()
            } else {
                engine_gone()
            });
        }
        let drained = self.stopping == Some(ShutdownMode::Drain) && op.before_stop;
        if self.stopping.is_some() && !drained {
            self.stats.cancelled += 1;
            return Some(cancelled());
        }
        if op.offset.checked_add(u64::from(op.len)).is_none() {
            self.stats.refused_invalid += 1;
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                "a request must end below 2^64 bytes (offset + length < 2^64)",
            );
            return Some(e);
        }
        None
    }

    /// Hands a request to the scheduler and returns its id (its SQE's
    /// user data once dispatched). If it failed at once, returns it
    /// finished instead (its result is in; `None` if its slot was let go
    /// of already), to wake and release outside the lock. `from`: the
    /// ring whose plug hands it in ([`NO_RING`] if none), for the counts
    /// of requests completed on another ring.
    pub(crate) fn add(
        &mut self,
        mut op: Op,
        now: Time,
        from: u32,
    ) -> Result<u32, Option<Finished>> {
        let now = self.at(now);
        if let Some(e) = self.refusal(&op) {
            return Err(op.fail(&self.cfg.admission, e));
        }
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.held.push(None);
                (self.held.len() - 1) as u32
            }
        };
        let req = scheduler_request(&op, idx);
        match self.sched(|s| s.add_request(now, req)) {
            Some(Ok(())) => {
                self.seq += 1;
                let seq = self.seq;
                self.held[idx as usize] = Some(Held {
                    op,
                    ring: None,
                    from,
                    dispatched: 0,
                    seq,
                    req,
                });
                self.trace(now, 'Q', idx);
                Ok(idx)
            }
            Some(Err(e)) => {
                self.free.push(idx);
                self.stats.refused_invalid += 1;
                let e = io::Error::new(io::ErrorKind::InvalidInput, e);
                Err(op.fail(&self.cfg.admission, e))
            }
            None => {
                self.free.push(idx);
                self.stats.broken += 1;
                Err(op.fail(&self.cfg.admission, scheduler_failed()))
            }
        }
    }

    /// Dispatches while the device has room, appending the SQEs to `out`
    /// (to be submitted on ring `ring`). Arms the idle timer when the
    /// scheduler idles. `now` is read again after a stale idle answer.
    pub(crate) fn dispatch(
        &mut self,
        now: Time,
        clock: impl Fn() -> Time,
        ring: u32,
        out: &mut Vec<squeue::Entry>,
    ) {
        let mut now = self.at(now);
        let mut past_idles = 0;
        while self.in_flight < self.cfg.depth && self.stopping != Some(ShutdownMode::Cancel) {
            match self.sched(|s| s.dispatch(now)) {
                Some(Dispatch::Request(r)) => {
                    let idx = r.id as u32;
                    match self.held.get_mut(idx as usize).and_then(|h| h.as_mut()) {
                        Some(h) if h.ring.is_none() => {
                            h.ring = Some(ring);
                            h.dispatched = now;
                        }
                        _ => break, // the scheduler returned a bogus id
                    }
                    self.trace(now, 'D', idx);
                    out.push(self.sqe_for(idx));
                    self.in_flight += 1;
                }
                Some(Dispatch::Idle { until }) => {
                    if until <= now && past_idles < 3 {
                        past_idles += 1;
                        now = self.at(clock());
                        continue;
                    }
                    self.set_timer(until.min(now.saturating_add(MAX_IDLE_WAIT_NS)));
                    break;
                }
                Some(Dispatch::Wait | Dispatch::Empty) | None => break,
            }
        }
    }

    /// Arms the idle timer (an absolute CLOCK_MONOTONIC timerfd) that
    /// wakes the service thread, unless it is armed to fire no later: the
    /// service turn it starts asks the scheduler again and arms the
    /// deadline then in force. bfq idles for a lone sync flow each time
    /// it has nothing queued and nothing in flight (the kernel's rule for
    /// the only busy queue): thousands of times a second with one deep
    /// random reader, each idle cut short by its next request. One
    /// `timerfd_settime` per idle cost ~30 ns per request (perf, NOP
    /// target).
    fn set_timer(&mut self, until: Time) {
        if self.timer_at.is_some_and(|t| t <= until) {
            return;
        }
        self.timer_at = Some(until);
        self.stats.timers_armed += 1;
        crate::clock::arm_timerfd(self.cfg.timerfd, self.cfg.origin_mono.saturating_add(until));
    }

    /// The idle timer fired.
    pub(crate) fn timer_fired(&mut self) {
        self.timer_at = None;
        self.stats.timers_fired += 1;
    }

    fn sqe_for(&self, idx: u32) -> squeue::Entry {
        let op = &self.held[idx as usize].as_ref().expect("held").op;
        let own = op.file.as_ref().map(|f| f.file().as_raw_fd());
        let sqe = match (op.kind, own.or(self.cfg.target)) {
            (OpKind::Read, Some(fd)) => opcode::Read::new(types::Fd(fd), op.ptr, op.len)
                .offset(op.offset)
                .build(),
            (OpKind::Write, Some(fd)) => opcode::Write::new(types::Fd(fd), op.ptr, op.len)
                .offset(op.offset)
                .build(),
            _ => return opcode::Nop::new().build().user_data(u64::from(idx)),
        };
        let sqe = if self.cfg.async_submit {
            sqe.flags(squeue::Flags::ASYNC)
        } else {
            sqe
        };
        sqe.user_data(u64::from(idx))
    }

    /// Calls the trace sink; a sink that panics is dropped (the engine's
    /// state must not be left half-updated by user code).
    fn trace(&mut self, now: Time, event: char, idx: u32) {
        if self.cfg.trace.is_none() {
            return;
        }
        let Some(h) = self.held.get(idx as usize).and_then(|h| h.as_ref()) else {
            return;
        };
        let ev = TraceEvent {
            t: now,
            event,
            flow: h.req.flow,
            req: h.seq,
            sector: h.req.sector,
            sectors: h.req.sectors,
            write: h.req.op == SOp::Write,
        };
        let Some(sink) = self.cfg.trace.as_mut() else {
            return;
        };
        if catch_unwind(AssertUnwindSafe(|| sink(&ev))).is_err() {
            self.cfg.trace = None;
        }
    }

    /// A request's completion from the kernel: tells the scheduler;
    /// returns the request's hold on its slot and its result, to deliver
    /// ([`Completer::complete`]) outside the lock.
    pub(crate) fn complete(
        &mut self,
        idx: u32,
        res: i32,
        now: Time,
    ) -> Option<(Completer, io::Result<usize>)> {
        let now = self.at(now);
        self.trace(now, 'C', idx);
        let Held {
            mut op,
            ring,
            from,
            dispatched,
            ..
        } = self.held.get_mut(idx as usize).and_then(|h| h.take())?;
        debug_assert!(ring.is_some(), "completion of a request never dispatched");
        let b = latency_bucket(now.saturating_sub(dispatched));
        if from != NO_RING && ring != Some(from) {
            self.stats.foreign_completions += 1;
            self.stats.foreign_latency[b] += 1;
        } else {
            self.stats.own_latency[b] += 1;
        }
        self.free.push(idx);
        self.in_flight -= 1;
        if self.in_flight == 0 {
            self.stats.device_idles += 1;
        }
        let _ = self.sched(|s| s.complete(now, u64::from(idx)));
        self.stats.completed += 1;
        let result = self.result_of(&op, res);
        if result.is_err() {
            self.stats.errors += 1;
        }
        op.take_sink(&self.cfg.admission).map(|s| (s, result))
    }

    /// Whether `op` is served by an io_uring NOP: a [`OpKind::Nop`], or a
    /// read or write with no file to go to (its own, else the target's:
    /// an engine from `Engine::nop()`), as [`Core::sqe_for`] builds it.
    fn is_nop(&self, op: &Op) -> bool {
        op.kind == OpKind::Nop || (op.file.is_none() && self.cfg.target.is_none())
    }

    /// A completion's result as the submitter sees it: the kernel's error,
    /// a short transfer's error (unless `allow_short`), or the byte count.
    /// A request served by a NOP moves no bytes (a read's buffer is left
    /// as it was) and reports its full length, as if it had moved them:
    /// a NOP engine stands for a device that serves every request whole.
    fn result_of(&self, op: &Op, res: i32) -> io::Result<usize> {
        if res < 0 {
            let own = op.file.is_none();
            let align = if own { self.cfg.dio_mem_align } else { 0 };
            return Err(misaligned_buffer(-res, op.ptr, align)
                .unwrap_or_else(|| io::Error::from_raw_os_error(-res)));
        }
        let (n, want) = (res as usize, op.len as usize);
        if self.is_nop(op) {
            return Ok(want);
        }
        if n < want && !self.cfg.allow_short {
            let (kind, what) = match op.kind {
                OpKind::Write => (io::ErrorKind::WriteZero, "short write"),
                _ => (io::ErrorKind::UnexpectedEof, "short read"),
            };
            return Err(io::Error::new(
                kind,
                format!("{what}: {n} of {want} bytes at offset {}", op.offset),
            ));
        }
        Ok(n)
    }

    /// Starts stopping: new requests are refused; with `Cancel`, queued
    /// ones fail with `ECANCELED` (in-flight ones are the rings' to
    /// cancel, see [`Core::in_flight_on`]). A draining stop may be
    /// followed by a `Cancel` ([`ShutdownMode::DrainFor`]'s deadline);
    /// the engine hands `DrainFor` in as `Drain`.
    pub(crate) fn begin_shutdown(&mut self, mode: ShutdownMode) {
        if self.stopping == Some(ShutdownMode::Cancel) {
            return;
        }
        debug_assert!(!matches!(mode, ShutdownMode::DrainFor(_)));
        self.stopping = Some(mode);
        if mode == ShutdownMode::Cancel {
            self.stats.cancelled += self.fail_queued(cancelled);
        }
    }

    /// Fails every request not yet dispatched and returns how many (the
    /// caller counts them). Their slots stay reserved: the scheduler
    /// still holds their ids.
    fn fail_queued(&mut self, err: fn() -> io::Error) -> u64 {
        let mut n = 0;
        for h in self.held.iter_mut() {
            if matches!(h, Some(x) if x.ring.is_none()) {
                let mut x = h.take().expect("checked");
                n += 1;
                self.finished.extend(x.op.fail(&self.cfg.admission, err()));
            }
        }
        n
    }

    /// User data of the requests in flight on ring `ring` (to cancel).
    pub(crate) fn in_flight_on(&self, ring: u32) -> Vec<u64> {
        self.held
            .iter()
            .enumerate()
            .filter(|(_, h)| matches!(h, Some(h) if h.ring == Some(ring)))
            .map(|(i, _)| i as u64)
            .collect()
    }

    /// Whether a shutdown has finished its work.
    pub(crate) fn done(&self) -> bool {
        match self.stopping {
            None => false,
            Some(ShutdownMode::Cancel) => self.in_flight == 0,
            Some(ShutdownMode::Drain | ShutdownMode::DrainFor(_)) => {
                self.in_flight == 0 && self.held.iter().all(|h| h.is_none())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_core::{DeviceInfo, ReqId};
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A test scheduler: records every time the core hands it (`seen`)
    /// and answers `Idle { until }` with the deadline the test sets in
    /// `until` (nothing to dispatch while it is 0).
    #[derive(Clone, Default)]
    struct Stub {
        until: Arc<AtomicU64>,
        seen: Arc<std::sync::Mutex<Vec<Time>>>,
    }

    impl Stub {
        fn saw(&self, now: Time) {
            self.seen.lock().unwrap().push(now);
        }
    }

    impl Scheduler for Stub {
        fn name(&self) -> &str {
            "stub"
        }
        fn set_device(&mut self, _: DeviceInfo) {}
        fn add_group(&mut self, _: GroupId, _: u32) -> Result<GroupId, SchedError> {
            Err(SchedError::UnknownGroup(GroupId::ROOT))
        }
        fn remove_group(&mut self, g: GroupId) -> Result<(), SchedError> {
            Err(SchedError::UnknownGroup(g))
        }
        fn add_flow(&mut self, now: Time, s: FlowSpec) -> Result<FlowId, SchedError> {
            self.saw(now);
            Err(SchedError::UnknownGroup(s.group))
        }
        fn remove_flow(&mut self, now: Time, _: FlowId) -> Result<(), SchedError> {
            self.saw(now);
            Ok(())
        }
        fn add_request(&mut self, now: Time, _: Request) -> Result<(), SchedError> {
            self.saw(now);
            Ok(())
        }
        fn dispatch(&mut self, now: Time) -> Dispatch {
            self.saw(now);
            match self.until.load(Ordering::Relaxed) {
                0 => Dispatch::Empty,
                until => Dispatch::Idle { until },
            }
        }
        fn complete(&mut self, now: Time, _: ReqId) -> Result<(), SchedError> {
            self.saw(now);
            Ok(())
        }
        fn queued(&self) -> usize {
            0
        }
        fn in_flight(&self) -> usize {
            0
        }
    }

    /// A core of depth 4 over `stub`, its idle timer `timerfd`.
    fn core_with(stub: Stub, timerfd: RawFd, origin_mono: u64) -> Core {
        Core::new(
            Box::new(stub),
            CoreConfig {
                depth: 4,
                allow_short: false,
                async_submit: false,
                target: None,
                dio_mem_align: 0,
                timerfd,
                origin_mono,
                trace: None,
                admission: Arc::new(Admission::new(16)),
            },
        )
    }

    /// An idle whose deadline is later than the armed timer's does not
    /// re-arm it (the timer's service turn asks again); an earlier one
    /// does, and so does any idle once the timer has fired.
    #[test]
    fn the_idle_timer_is_rearmed_only_for_an_earlier_deadline() {
        // SAFETY: plain syscall; the descriptor is checked and owned.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor.
        let timerfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let stub = Stub::default();
        let until = stub.until.clone();
        // Far in the future: the timer never fires during the test.
        let mut core = core_with(stub.clone(), timerfd.as_raw_fd(), 1 << 62);
        let mut out = Vec::new();
        let mut idle = |core: &mut Core, now: Time, deadline: Time| {
            until.store(deadline, Ordering::Relaxed);
            core.dispatch(now, || now, 0, &mut out);
            core.stats.timers_armed
        };
        // A lone flow idled for again and again, 2 ms each time.
        assert_eq!(idle(&mut core, 0, 2_000_000), 1);
        for k in 1..100 {
            assert_eq!(idle(&mut core, k * 10_000, k * 10_000 + 2_000_000), 1);
        }
        // An earlier deadline re-arms.
        assert_eq!(idle(&mut core, 1_000_000, 1_500_000), 2);
        // After the timer fired, the next idle arms again.
        core.timer_fired();
        assert_eq!(idle(&mut core, 1_600_000, 3_000_000), 3);
        assert!(out.is_empty());
    }

    /// Times are read before the core's lock is taken, so they may reach
    /// the core out of order; the scheduler still sees them never go
    /// backwards.
    #[test]
    fn the_scheduler_never_sees_time_go_backwards() {
        let stub = Stub::default();
        let mut core = core_with(stub.clone(), -1, 0);
        let op = Op {
            kind: OpKind::Nop,
            flow: FlowId(1),
            offset: 0,
            ptr: std::ptr::null_mut(),
            len: 1,
            sync: true,
            file: None,
            sink: None,
            before_stop: true,
        };
        assert!(core.add(op, 1_000, NO_RING).is_ok());
        core.dispatch(400, || 500, 0, &mut Vec::new());
        core.remove_flow(700, FlowId(1));
        let _ = core.add_flow(1_500, FlowSpec::default());
        let _ = core.internals(1_200);
        core.remove_flow(300, FlowId(1));
        assert_eq!(
            *stub.seen.lock().unwrap(),
            [1_000, 1_000, 1_000, 1_500, 1_500]
        );
    }
}
