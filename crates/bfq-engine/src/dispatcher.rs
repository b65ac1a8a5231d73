//! The dispatcher thread: owns the io_uring ring and the scheduler.
//!
//! Loop: take commands from the channel (lock-free), hand requests to the
//! scheduler, dispatch while the device has room, submit, reap completions,
//! arm the scheduler's idle timer (a timerfd read kept in the ring), and
//! block in `io_uring_enter` when nothing is left to do. Submitters wake it
//! through an eventfd read also kept in the ring, and only when it said it
//! was about to block (`Shared::parked`), so a busy engine makes no wake-up
//! syscalls.

use crate::completion::{Waiter, RELAY_MAX_WAIT_NS};
use crate::engine::TraceEvent;
use crate::engine::{cancelled, Cmd, EngineStats, Op, OpKind, Shared, ShutdownMode};
use bfq_core::{Dispatch, Op as SOp, Request, Scheduler, Time, SECTOR_BYTES};
use io_uring::{opcode, squeue, types, IoUring};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

const EV_TOKEN: u64 = u64::MAX;
const TIMER_TOKEN: u64 = u64::MAX - 1;
const CANCEL_TOKEN: u64 = u64::MAX - 2;
/// Commands taken per loop turn before dispatching (keeps latency bounded
/// under a flood of submissions).
const CMD_BATCH: usize = 1024;
/// The longest the dispatcher sleeps on one idle timer (1 s); a
/// scheduler idling longer is asked again each time it fires.
pub(crate) const MAX_IDLE_WAIT_NS: u64 = 1_000_000_000;

/// Receives trace events on the dispatcher thread.
pub(crate) type TraceSink = Box<dyn FnMut(&TraceEvent) + Send>;

pub(crate) struct DispatcherConfig {
    pub depth: u32,
    pub allow_short: bool,
    pub nice: i32,
    pub async_submit: bool,
    pub sqpoll_idle_ms: u32,
    pub trace: Option<TraceSink>,
}

struct Held {
    op: Op,
    dispatched: bool,
    /// Trace: unique request number, and the scheduler's view.
    seq: u64,
    req: Request,
}

pub(crate) struct Dispatcher {
    ring: IoUring,
    sched: Box<dyn Scheduler>,
    file: Option<File>,
    rx: Receiver<Cmd>,
    shared: Arc<Shared>,
    cfg: DispatcherConfig,
    /// Requests the scheduler holds, indexed by their ReqId.
    held: Vec<Option<Held>>,
    free: Vec<u32>,
    in_flight: u32,
    origin: Instant,
    origin_ts: libc::timespec,
    timerfd: OwnedFd,
    timer_at: Option<Time>,
    ev_buf: Box<u64>,
    timer_buf: Box<u64>,
    ev_armed: bool,
    timer_armed: bool,
    stopping: Option<ShutdownMode>,
    stats: EngineStats,
    /// Waiters of completed requests, woken once the next requests are
    /// submitted (so a woken submitter does not preempt the dispatcher
    /// in the middle of a batch).
    wakes: Vec<Waiter>,
    /// When the oldest waiter still in the wake relay was published.
    relay_since: Option<Time>,
    seq: u64,
    /// Set when completions were reported in the middle of a dispatch
    /// round (the round's `now` is stale).
    clock_moved: bool,
}

fn monotonic_now() -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts
}

impl Dispatcher {
    pub(crate) fn new(
        sched: Box<dyn Scheduler>,
        file: Option<File>,
        rx: Receiver<Cmd>,
        shared: Arc<Shared>,
        cfg: DispatcherConfig,
    ) -> io::Result<Self> {
        let entries = (cfg.depth * 2 + 8).next_power_of_two();
        let mut b = IoUring::builder();
        b.setup_single_issuer();
        if cfg.sqpoll_idle_ms > 0 {
            // A kernel thread submits (and spins for this long when idle).
            b.setup_sqpoll(cfg.sqpoll_idle_ms);
        } else {
            // Completions are processed when the dispatcher enters the
            // kernel anyway: no need to interrupt it for task work.
            b.setup_taskrun_flag().setup_coop_taskrun();
        }
        let ring = b.build(entries).or_else(|_| IoUring::new(entries))?;
        if let Some(f) = &file {
            ring.submitter().register_files(&[f.as_raw_fd()])?;
        }
        // SAFETY: plain syscall, result checked.
        let tfd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        };
        if tfd < 0 {
            return Err(io::Error::last_os_error());
        }
        let origin = Instant::now();
        let origin_ts = monotonic_now();
        Ok(Dispatcher {
            ring,
            sched,
            file,
            rx,
            shared,
            cfg,
            held: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            origin,
            origin_ts,
            // SAFETY: fresh descriptor we own.
            timerfd: unsafe { OwnedFd::from_raw_fd(tfd) },
            timer_at: None,
            ev_buf: Box::new(0),
            timer_buf: Box::new(0),
            ev_armed: false,
            timer_armed: false,
            stopping: None,
            stats: EngineStats::default(),
            wakes: Vec::new(),
            relay_since: None,
            seq: 0,
            clock_moved: false,
        })
    }

    #[inline]
    fn now(&self) -> Time {
        self.origin.elapsed().as_nanos() as Time
    }

    /// Pushes one SQE, flushing the queue to the kernel when it is full.
    fn push(&mut self, sqe: squeue::Entry) {
        loop {
            // SAFETY: every SQE we build points to memory that outlives
            // the request (held Ops' buffers, boxed eventfd/timerfd words).
            let ok = unsafe { self.ring.submission().push(&sqe).is_ok() };
            if ok {
                return;
            }
            if let Err(e) = self.ring.submit() {
                if e.raw_os_error() != Some(libc::EBUSY) && e.raw_os_error() != Some(libc::EINTR) {
                    panic!("io_uring submit failed: {e}");
                }
                // Completions reported to the scheduler carry a later time
                // than the caller's `now`: tell it to read the clock again.
                self.reap();
                self.clock_moved = true;
            }
        }
    }

    fn arm_reads(&mut self) {
        if !self.ev_armed {
            let p: *mut u64 = &mut *self.ev_buf;
            let sqe = opcode::Read::new(types::Fd(self.shared.eventfd.as_raw_fd()), p.cast(), 8)
                .build()
                .user_data(EV_TOKEN);
            self.push(sqe);
            self.ev_armed = true;
        }
        if !self.timer_armed {
            let p: *mut u64 = &mut *self.timer_buf;
            let sqe = opcode::Read::new(types::Fd(self.timerfd.as_raw_fd()), p.cast(), 8)
                .build()
                .user_data(TIMER_TOKEN);
            self.push(sqe);
            self.timer_armed = true;
        }
    }

    fn set_timer(&mut self, until: Time) {
        if self.timer_at == Some(until) {
            return;
        }
        self.timer_at = Some(until);
        self.stats.timers_armed += 1;
        let total = self.origin_ts.tv_nsec as u64 + until % 1_000_000_000;
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: self.origin_ts.tv_sec
                    + (until / 1_000_000_000) as libc::time_t
                    + (total / 1_000_000_000) as libc::time_t,
                tv_nsec: (total % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid timerfd and itimerspec.
        unsafe {
            libc::timerfd_settime(
                self.timerfd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
    }

    fn fail(&mut self, mut op: Op, err: io::Error) {
        self.stats.errors += 1;
        op.finish(Err(err));
    }

    fn handle(&mut self, cmd: Cmd, now: Time) {
        match cmd {
            Cmd::Submit(op) => self.submit(op, now),
            Cmd::AddFlow(spec, reply) => {
                let r = if self.stopping.is_some() {
                    Err(bfq_core::SchedError::UnknownGroup(spec.group))
                } else {
                    self.sched.add_flow(now, spec)
                };
                let _ = reply.send(r);
            }
            Cmd::RemoveFlow(id) => {
                let _ = self.sched.remove_flow(now, id);
            }
            Cmd::AddGroup(parent, w, reply) => {
                let _ = reply.send(self.sched.add_group(parent, w));
            }
            Cmd::RemoveGroup(g, reply) => {
                let _ = reply.send(self.sched.remove_group(g));
            }
            Cmd::Stats(reply) => {
                let mut s = self.stats;
                s.queued = self.sched.queued() as u64;
                s.in_flight = u64::from(self.in_flight);
                let _ = reply.send(s);
            }
            Cmd::Shutdown(mode) => self.begin_shutdown(mode),
        }
    }

    fn submit(&mut self, op: Op, now: Time) {
        if self.stopping.is_some() {
            self.stats.cancelled += 1;
            drop(op); // completes with ECANCELED
            return;
        }
        let Some(end) = op.offset.checked_add(u64::from(op.len)) else {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "request ends past 2^64 bytes");
            self.fail(op, e);
            return;
        };
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.held.push(None);
                (self.held.len() - 1) as u32
            }
        };
        let base = op.file.as_ref().map_or(0, |f| f.sector_base());
        let sector = base.saturating_add(op.offset / SECTOR_BYTES);
        let end = base.saturating_add(end.div_ceil(SECTOR_BYTES));
        let sectors = (end - sector).clamp(1, u64::from(u32::MAX)) as u32;
        let req = Request {
            id: u64::from(idx),
            flow: op.flow,
            sector,
            sectors,
            op: if op.kind == OpKind::Write {
                SOp::Write
            } else {
                SOp::Read
            },
            sync: op.sync,
        };
        match self.sched.add_request(now, req) {
            Ok(()) => {
                self.seq += 1;
                self.held[idx as usize] = Some(Held {
                    op,
                    dispatched: false,
                    seq: self.seq,
                    req,
                });
                self.trace(now, 'Q', idx);
            }
            Err(e) => {
                self.free.push(idx);
                self.fail(op, io::Error::new(io::ErrorKind::InvalidInput, e));
            }
        }
    }

    fn sqe_for(&self, idx: u32) -> squeue::Entry {
        let h = self.held[idx as usize].as_ref().expect("held");
        let op = &h.op;
        let own = op.file.as_ref().map(|f| types::Fd(f.file().as_raw_fd()));
        let sqe = match (op.kind, own, self.file.is_some()) {
            (OpKind::Read, Some(fd), _) => opcode::Read::new(fd, op.ptr, op.len)
                .offset(op.offset)
                .build(),
            (OpKind::Write, Some(fd), _) => opcode::Write::new(fd, op.ptr, op.len)
                .offset(op.offset)
                .build(),
            (OpKind::Read, None, true) => opcode::Read::new(types::Fixed(0), op.ptr, op.len)
                .offset(op.offset)
                .build(),
            (OpKind::Write, None, true) => opcode::Write::new(types::Fixed(0), op.ptr, op.len)
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

    /// Dispatches while the device has room. Returns whether anything was
    /// dispatched.
    fn dispatch(&mut self) -> bool {
        let mut any = false;
        let mut now = self.now();
        let mut past_idles = 0;
        while self.in_flight < self.cfg.depth {
            match self.sched.dispatch(now) {
                Dispatch::Request(r) => {
                    let idx = r.id as u32;
                    match self.held.get_mut(idx as usize).and_then(|h| h.as_mut()) {
                        Some(h) if !h.dispatched => h.dispatched = true,
                        _ => continue, // the scheduler returned a bogus id
                    }
                    self.trace(now, 'D', idx);
                    let sqe = self.sqe_for(idx);
                    self.push(sqe);
                    self.in_flight += 1;
                    any = true;
                    if self.clock_moved {
                        self.clock_moved = false;
                        now = self.now();
                    }
                }
                Dispatch::Idle { until } => {
                    if until <= now && past_idles < 3 {
                        past_idles += 1;
                        now = self.now();
                        continue;
                    }
                    // Never sleep longer than MAX_IDLE_WAIT_NS on one timer:
                    // the scheduler is asked again when it fires.
                    self.set_timer(until.min(now.saturating_add(MAX_IDLE_WAIT_NS)));
                    break;
                }
                Dispatch::Wait | Dispatch::Empty => break,
            }
        }
        any
    }

    fn trace(&mut self, now: Time, event: char, idx: u32) {
        if let Some(sink) = self.cfg.trace.as_mut() {
            if let Some(h) = self.held.get(idx as usize).and_then(|h| h.as_ref()) {
                sink(&TraceEvent {
                    t: now,
                    event,
                    flow: h.req.flow,
                    req: h.seq,
                    sector: h.req.sector,
                    sectors: h.req.sectors,
                    write: h.req.op == SOp::Write,
                });
            }
        }
    }

    fn finish_io(&mut self, idx: u32, res: i32, now: Time) {
        self.trace(now, 'C', idx);
        let Some(Held {
            mut op, dispatched, ..
        }) = self.held.get_mut(idx as usize).and_then(|h| h.take())
        else {
            return;
        };
        debug_assert!(dispatched);
        self.free.push(idx);
        self.in_flight -= 1;
        let _ = self.sched.complete(now, u64::from(idx));
        self.stats.completed += 1;
        let result = if res < 0 {
            Err(io::Error::from_raw_os_error(-res))
        } else {
            let n = res as usize;
            let want = op.len as usize;
            if n < want && op.kind != OpKind::Nop && !self.cfg.allow_short {
                let (kind, what) = match op.kind {
                    OpKind::Write => (io::ErrorKind::WriteZero, "short write"),
                    _ => (io::ErrorKind::UnexpectedEof, "short read"),
                };
                Err(io::Error::new(
                    kind,
                    format!("{what}: {n} of {want} bytes at offset {}", op.offset),
                ))
            } else if op.kind == OpKind::Nop {
                Ok(want)
            } else {
                Ok(n)
            }
        };
        if result.is_err() {
            self.stats.errors += 1;
        }
        let w = op.finish_deferred(result);
        if !w.is_none() {
            self.wakes.push(w);
        }
    }

    /// Reaps every completion available. Returns how many. The requests
    /// of one batch complete at the same time for the scheduler (the
    /// kernel does not say when each finished; one clock read per batch).
    fn reap(&mut self) -> usize {
        let mut n = 0;
        let mut now = None;
        loop {
            let cqe = match self.ring.completion().next() {
                Some(c) => c,
                None => break,
            };
            n += 1;
            match cqe.user_data() {
                EV_TOKEN => self.ev_armed = false,
                TIMER_TOKEN => {
                    self.timer_armed = false;
                    if cqe.result() >= 0 {
                        self.timer_at = None;
                        self.stats.timers_fired += 1;
                    }
                }
                CANCEL_TOKEN => {}
                idx => {
                    let t = match now {
                        Some(t) => t,
                        None => *now.insert(self.now()),
                    };
                    self.finish_io(idx as u32, cqe.result(), t)
                }
            }
        }
        n
    }

    fn begin_shutdown(&mut self, mode: ShutdownMode) {
        if self.stopping == Some(ShutdownMode::Cancel) {
            return;
        }
        self.stopping = Some(mode);
        if mode == ShutdownMode::Cancel {
            self.cancel_all();
        }
    }

    /// Fails every queued request and asks the kernel to cancel the
    /// in-flight ones (they complete, with ECANCELED or their result).
    fn cancel_all(&mut self) {
        let mut to_cancel = Vec::new();
        for i in 0..self.held.len() {
            let dispatched = match &self.held[i] {
                Some(h) => h.dispatched,
                None => continue,
            };
            if dispatched {
                to_cancel.push(i as u64);
            } else if let Some(mut h) = self.held[i].take() {
                // The scheduler still holds it; it is dropped with the
                // scheduler at exit. Keep the slot reserved.
                self.stats.cancelled += 1;
                h.op.finish(Err(cancelled()));
            }
        }
        for ud in to_cancel {
            let sqe = opcode::AsyncCancel::new(ud).build().user_data(CANCEL_TOKEN);
            self.push(sqe);
        }
    }

    fn drain_commands(&mut self) -> bool {
        let now = self.now();
        let mut any = false;
        for _ in 0..CMD_BATCH {
            match self.rx.try_recv() {
                Ok(cmd) => {
                    any = true;
                    self.handle(cmd, now);
                }
                Err(_) => break,
            }
        }
        any
    }

    fn done(&self) -> bool {
        match self.stopping {
            None => false,
            Some(ShutdownMode::Cancel) => self.in_flight == 0,
            Some(ShutdownMode::Drain) => {
                self.in_flight == 0 && self.held.iter().all(|h| h.is_none())
            }
        }
    }

    /// Blocks until an event, or until the oldest waiter left in the wake
    /// relay is due for the dispatcher to wake.
    fn wait(&mut self) {
        let r = match self.relay_since {
            Some(since) if !self.shared.relay.is_empty() => {
                let due = (since + RELAY_MAX_WAIT_NS).saturating_sub(self.now());
                let ts = types::Timespec::new().nsec(due.max(1_000) as u32);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
            _ => self.ring.submit_and_wait(1),
        };
        match r {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::ETIME)
                ) => {}
            Err(e) => panic!("io_uring_enter failed: {e}"),
        }
    }

    /// Wakes the submitters of the last completions: one itself, the
    /// rest through the wake relay (see [`crate::completion::WakeRelay`]),
    /// taking back what the helpers left for too long.
    fn flush_wakes(&mut self) {
        let relay = &self.shared.relay;
        if relay.is_empty() {
            // The helpers took everything.
            self.relay_since = None;
        }
        if relay.wake_or_publish(&mut self.wakes) && self.relay_since.is_none() {
            self.relay_since = Some(self.now());
        } else if let Some(t) = self.relay_since {
            if self.now().saturating_sub(t) > RELAY_MAX_WAIT_NS {
                relay.drain();
                self.relay_since = None;
            }
        }
    }

    /// Wakes everyone still in the wake relay (when stopping).
    fn drain_relay(&mut self) {
        self.flush_wakes();
        self.shared.relay.drain();
        self.relay_since = None;
    }

    fn main_loop(&mut self) {
        loop {
            let mut busy = self.drain_commands();
            busy |= self.reap() > 0;
            if self.stopping != Some(ShutdownMode::Cancel) {
                busy |= self.dispatch();
            }
            if self.done() {
                self.drain_relay();
                return;
            }
            self.arm_reads();
            if busy {
                let _ = self.ring.submit();
                self.flush_wakes();
                continue;
            }
            self.flush_wakes();
            // About to block: announce it, then look once more.
            self.shared.parked.store(true, Ordering::SeqCst);
            match self.rx.try_recv() {
                Ok(cmd) => {
                    self.shared.parked.store(false, Ordering::SeqCst);
                    let now = self.now();
                    self.handle(cmd, now);
                    let _ = self.ring.submit();
                    continue;
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => {
                    // Nobody can submit any more: stop.
                    self.shared.parked.store(false, Ordering::SeqCst);
                    self.begin_shutdown(ShutdownMode::Cancel);
                    continue;
                }
            }
            self.stats.parks += 1;
            self.wait();
            self.shared.parked.store(false, Ordering::SeqCst);
        }
    }

    /// Runs until shutdown. Every held request is completed or cancelled
    /// before this returns, even if the scheduler panics.
    pub(crate) fn run(mut self) {
        if self.cfg.nice != 0 {
            // SAFETY: plain syscall on this thread; failure (not root) is
            // harmless.
            unsafe {
                libc::setpriority(
                    libc::PRIO_PROCESS,
                    crate::sys::gettid() as libc::id_t,
                    self.cfg.nice,
                )
            };
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.main_loop()));
        self.drain_relay();
        self.stopping = Some(ShutdownMode::Cancel);
        // Refuse what is still in the channel.
        while let Ok(cmd) = self.rx.try_recv() {
            if let Cmd::Submit(op) = cmd {
                self.stats.cancelled += 1;
                drop(op);
            }
        }
        if r.is_err() {
            // The loop died: cancel and wait for the kernel to let go of
            // every buffer still on the device before returning them.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.cancel_all();
                while self.in_flight > 0 {
                    if let Err(e) = self.ring.submit_and_wait(1) {
                        if e.raw_os_error() != Some(libc::EINTR) {
                            break;
                        }
                    }
                    while let Some(c) = self.ring.completion().next() {
                        let ud = c.user_data();
                        if ud < CANCEL_TOKEN {
                            if let Some(mut h) =
                                self.held.get_mut(ud as usize).and_then(|h| h.take())
                            {
                                self.in_flight -= 1;
                                h.op.finish(Err(io::Error::other("the dispatcher failed")));
                            }
                        }
                    }
                }
            }));
            if self.in_flight > 0 {
                // Cannot prove the kernel is done with these buffers:
                // leak them rather than hand back memory still in use.
                for h in self.held.drain(..).flatten() {
                    std::mem::forget(h);
                }
            }
        }
        // Anything left (queued in Drain mode after a failure) is cancelled
        // by Op's Drop.
        self.held.clear();
        // Let go of the target now rather than when the kernel gets round
        // to tearing the ring down (so it can be unmounted or detached at
        // once after shutdown).
        if self.file.is_some() && self.in_flight == 0 {
            let _ = self.ring.submitter().unregister_files();
        }
    }
}
