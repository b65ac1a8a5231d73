//! Where the engine submits: decide centrally, submit locally.
//!
//! Every thread that submits gets its own io_uring ring ([`Ring`], one per
//! thread and engine, made on first use). A request waits in the thread's
//! plug until the thread waits, polls, leaves or has [`PLUG_MAX`] of
//! them; the plug is then handed to the scheduler under one hold of the
//! [`Core`] lock, which then dispatches as many requests as the device
//! queue has room for; the thread submits them on its own ring, other
//! flows' requests included (their buffers already live in their slots).
//! Completions are reaped by the ring's owner while it is inside the
//! engine (a blocking wait sleeps in its own ring, so submitting and
//! waiting take one `io_uring_enter`), reported to the scheduler, and the
//! waiter is woken only when it is another thread.
//!
//! When the owner leaves the engine with requests still on its ring it
//! turns on the ring's eventfd notification (`IORING_CQ_EVENTFD_DISABLED`
//! off), so the kernel tells the service thread ([`crate::service`]),
//! which reaps that ring instead. The service thread also owns the idle
//! timer, and in [`SubmitMode::Dispatcher`] it does all the submitting
//! (the single-dispatcher design, kept as an option).
//!
//! Lock order: the service ring's state, then a client ring's state,
//! then the list of closing flows, then the core (the ring list is only held to
//! copy or scan it). No lock is held while waiting for I/O except a
//! ring's own state by its owner (the service thread only `try_lock`s
//! busy rings).

use crate::clock::monotonic_ns;
use crate::completion::{
    Driver, EventFd, Hold, Outstanding, Register, Waiter, WakeRelay, RELAY_FANOUT,
};
use crate::core::{latency_bucket, Core, Op, ShutdownMode, LATENCY_BUCKETS, NO_RING};
use crate::slot::{Completer, Finished, Release, SlotId};
use crate::taskrun::{CoopTaskrun, CpuWait};
use bfq_core::{FlowId, Time};
use io_uring::{opcode, squeue, types, IoUring};
use std::cell::{Cell, RefCell};
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{
    fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// User data of the read of a ring's wake eventfd.
pub(crate) const WAKE_TOKEN: u64 = u64::MAX;
/// User data of the service ring's read of the idle timer.
pub(crate) const TIMER_TOKEN: u64 = u64::MAX - 1;
/// User data of `IORING_OP_ASYNC_CANCEL` requests.
pub(crate) const CANCEL_TOKEN: u64 = u64::MAX - 2;

/// Rounds of reaping and dispatching one call does for others before it
/// returns to its caller (a caller is not kept serving other threads for
/// as long as they submit).
const WORK_ROUNDS: usize = 16;
/// Attempts to leave a ring quiet before leaving the rest to the service
/// thread.
const LEAVE_ROUNDS: usize = 4;
/// The longest an exiting thread waits for the requests on its ring.
const EXIT_WAIT_NS: u64 = 1_000_000_000;
/// How long a thread tries to take the core's lock held by another
/// before sleeping on it (see [`Shared::core`]).
const CORE_SPIN_NS: u64 = 5_000;
/// Requests a thread's plug holds before it submits them without
/// waiting (the block layer's plug flushes at 32 too).
const PLUG_MAX: usize = 32;
/// Renewals [`Shared::ring_with_coop`] tries at most when binding a
/// thread's ring (each makes one new ring at most; one that finds the
/// ring's lock taken in between makes none).
const RENEW_TRIES: u32 = 3;
/// How long a thread whose ring could not be made sends its requests
/// through the service thread before it tries again (at its first
/// request after that), in ns of the engine's clock (one read of it per
/// request on that path, which hands each request to another thread
/// anyway, [`Shared::submit_to_service`]). What refuses a ring (too many
/// open files, memory) is freed as time passes (other descriptors
/// closed, rings gone), not as requests pass, and a failed attempt costs
/// a few system calls (`eventfd`, `io_uring_setup`, the ring's teardown;
/// about 55 us, docs/engine.md, "Faults"): so the attempts are spaced in time,
/// which bounds their cost at any request rate. Sensible from 10 ms (100
/// attempts a second per thread, under 1% of a CPU) to 1 s (how long a
/// thread may stay on the service thread after a ring could be had).
const RING_RETRY_NS: u64 = 100_000_000;

/// Who enters the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SubmitMode {
    /// Every submitting thread submits on its own ring, with a plug (the
    /// default; docs/engine.md, "Threading model").
    #[default]
    Local,
    /// One service thread submits and reaps everything (the first
    /// design, kept as an option; docs/engine-measurements.md).
    Dispatcher,
}

/// State shared by the engine, its flows and the service thread.
pub(crate) struct Shared {
    /// Distinguishes engines in the per-thread ring table.
    pub id: u64,
    pub mode: SubmitMode,
    /// A thread's lone blocking wait may use its private ring (see
    /// [`Private`]; `EngineBuilder::private_rings`).
    pub private_rings: bool,
    /// Whether rings are set up with `COOP_TASKRUN` (see
    /// [`run_task_work`], [`CoopTaskrun`]; `EngineBuilder::coop_taskrun`).
    pub coop_taskrun: CoopTaskrun,
    pub core: Mutex<Core>,
    /// Every client ring, for the service thread (reaping rings whose
    /// owner is away, cancelling, dropping rings of exited threads).
    pub rings: Mutex<Vec<Arc<Ring>>>,
    /// Wakes the service thread: the kernel writes it for completions on
    /// rings whose owner is away; submitters in dispatcher mode, shutdown
    /// and exiting threads write it too.
    pub notify: Arc<EventFd>,
    /// Set by the service thread before it blocks (dispatcher mode).
    pub parked: AtomicBool,
    /// A `Cancel` shutdown has begun.
    pub cancelling: AtomicBool,
    /// A shutdown has begun (requests plugged after it are refused).
    pub stop_begun: AtomicBool,
    /// Set when the service thread is about to exit (its work done, or
    /// it failed), with `service_exit` notified: what a
    /// `ShutdownMode::DrainFor` waits for, up to its deadline.
    service_exited: Mutex<bool>,
    service_exit: Condvar,
    /// Some ring whose owner is away may hold requests (the service
    /// thread then bounds its sleeps).
    pub away_in_flight: AtomicBool,
    /// Set by the service thread before a sleep without a bound; a
    /// thread that starts to linger then wakes it (the service thread
    /// looks at the rings' `lingering` flags after setting it: no count
    /// of lingering rings is kept, which every submitting thread would
    /// update twice per request, one cache line shared by all).
    pub service_idle: AtomicBool,
    /// Requests added (dispatcher mode: tells the service thread there is
    /// something to dispatch).
    pub added: AtomicU64,
    pub timerfd: OwnedFd,
    pub relay: WakeRelay,
    /// Times the service thread blocked.
    pub parks: AtomicU64,
    /// Times a thread that started to linger woke the service thread.
    pub linger_wakes: AtomicU64,
    /// Requests the service thread submitted.
    pub service_submits: AtomicU64,
    /// Waiters woken by the thread that reaped their completion
    /// ([`crate::EngineStats::cross_wakes`]).
    pub cross_wakes: AtomicU64,
    /// [`crate::EngineStats::coop_switches`].
    pub coop_switches: [AtomicU64; 2],
    /// [`crate::EngineStats::core_waits`] (counted on the contended path
    /// only).
    pub core_waits: [AtomicU64; 2],
    /// [`crate::EngineStats::core_wait_ns`] (timed on the contended path
    /// only).
    pub core_wait_ns: [AtomicU64; 2],
    /// [`crate::EngineStats::wake_latency`].
    pub wake_latency: [AtomicU64; LATENCY_BUCKETS],
    /// [`crate::EngineStats::ring_setup_failed`].
    pub ring_setup_failed: AtomicU64,
    /// [`crate::EngineStats::bound_takeovers`].
    pub bound_takeovers: AtomicU64,
    /// [`crate::EngineStats::ring_setup_errno`] (0: none yet).
    pub ring_setup_errno: AtomicI32,
    /// Closed flows waiting for plugs to be flushed before they leave
    /// the scheduler ([`Shared::close_flow`]), and their number.
    closing: Mutex<Vec<Closing>>,
    closing_len: AtomicUsize,
    /// Entries of each ring's submission queue.
    pub entries: u32,
    /// CLOCK_MONOTONIC (ns) when the engine started: its times count
    /// from it (as the idle timer's deadlines, see `CoreConfig`).
    pub origin_mono: u64,
    next_ring: AtomicU32,
    /// This engine, for the per-thread ring table.
    me: Weak<Shared>,
}

/// A closed flow, and the plugs (with their flush counts when it
/// closed) that may still hold its requests.
struct Closing {
    flow: FlowId,
    waits: Vec<(Arc<Ring>, u64)>,
}

/// One thread's io_uring ring for one engine.
pub(crate) struct Ring {
    pub id: u32,
    pub st: Mutex<RingState>,
    /// A read of it is kept armed while the owner waits in the ring; a
    /// thread completing the owner's request writes it.
    pub wake: Arc<EventFd>,
    /// Its private ring's wake-up (see [`Private`]): written by a
    /// shutdown, which also writes `wake`.
    pub private_wake: EventFd,
    /// Requests submitted on this ring and not reaped yet.
    pub in_flight: AtomicU32,
    /// The owner is not reaping (eventfd notification on).
    pub away: AtomicBool,
    /// The owner thread has exited, or set up another ring in its place
    /// ([`Shared::renew_ring`]): it takes no new requests.
    pub dead: AtomicBool,
    /// Requests the owner submitted whose `Pending` is not done with:
    /// each holds a reference (see [`Hold`], [`Ring::mine`]).
    pub mine: Arc<Outstanding>,
    /// The owner left the engine keeping the ring (eventfd notification
    /// off, its plug maybe unsubmitted): it is coming back.
    pub lingering: AtomicBool,
    /// The owner started to linger since the service thread last asked
    /// ([`Shared::lingered_lately`]).
    pub lingered: AtomicBool,
    /// Requests in the owner's plug, not yet handed to the scheduler.
    pub plugged: AtomicU32,
    /// The flows with requests in the plug, as bits (a flow's id modulo
    /// 64): set as requests are plugged, cleared when the plug is
    /// flushed, written only under the ring's lock. A closing flow
    /// whose bit is clear does not wait for this plug even while its lock
    /// is busy ([`Shared::close_flow`]).
    pub plug_flows: AtomicU64,
    /// Times the plug was flushed (a closing flow waits for the plugs
    /// that held requests when it closed, see [`Shared::close_flow`]).
    pub flushes: AtomicU64,
    /// Times the owner came into the engine.
    pub visits: AtomicU64,
    /// `visits` when the service thread last looked (it takes over a
    /// lingering ring whose owner has not been back since).
    pub seen: AtomicU64,
    /// Results taken from the core are being delivered to their slots
    /// (see [`Shared::settle`]): a shutdown is not over before they are.
    pub delivering: AtomicBool,
    /// The owner wants its ring set up the other way (see
    /// [`Shared::renew_ring`]); only the owner reads and writes it.
    renew: AtomicBool,
    /// The owner's runtime waits on the ring's descriptor
    /// ([`crate::ThreadRing`]): the ring lingers whenever the owner leaves
    /// it with anything on it, and the service thread takes it over only
    /// from an owner that leaves completions waiting (see
    /// [`Shared::bind_ring`]). Written by the owner under the ring's lock.
    pub bound: AtomicBool,
    /// The owner's futures, polled, leave their requests plugged for the
    /// event loop to submit together ([`crate::ThreadRing::defer_submits`]);
    /// only while bound. Written by the owner only.
    pub defer: AtomicBool,
}

impl Ring {
    /// Requests the owner submitted whose `Pending` is not done with:
    /// the holds on `mine`, less the ring's own reference.
    pub(crate) fn mine(&self) -> u32 {
        let n = Arc::strong_count(&self.mine) - 1;
        // Read with the ordering of a hold's release (its `Arc`'s drop
        // is a release decrement).
        fence(Ordering::Acquire);
        n as u32
    }
}

/// A ring and the buffers of the thread working on it (reused: no
/// allocation per request).
pub(crate) struct RingState {
    pub uring: IoUring,
    /// Eventfd notification is on (see [`leave_ring`]).
    notifying: bool,
    wake_armed: bool,
    wake_buf: Box<u64>,
    /// The plug: requests submitted by the owner, not yet handed to the
    /// scheduler (see [`Shared::flush_plug`]).
    plug: Vec<Op>,
    /// Woken when a request enters the empty plug of a ring that defers
    /// its futures' submissions ([`crate::ThreadRing::poll_plugged`]).
    plug_waker: Option<Waker>,
    /// Dispatched SQEs waiting to be pushed.
    pub sqes: Vec<squeue::Entry>,
    /// Completions reaped and not yet reported.
    pub cqes: Vec<(u64, i32)>,
    /// Requests completed in the core (their holds on their slots), their
    /// results to deliver once the core's lock is released.
    done: Vec<(Completer, io::Result<usize>)>,
    /// Waiters to wake once the SQEs are submitted.
    pub wakes: Vec<Waiter>,
    /// Finished requests' holds on their slots, let go of with the wakes,
    /// outside the core's lock (see [`Finished`]).
    pub released: Vec<Release>,
    cancel_sent: bool,
    /// The owner's private ring (see [`Private`]).
    private: PrivateRing,
    /// The ring was set up with `COOP_TASKRUN | TASKRUN_FLAG` (see
    /// [`run_task_work`]).
    coop: bool,
    /// The owner's waits for a CPU, which choose `coop` for its next
    /// ring (`CoopTaskrun::Auto`; see [`Shared::renew_ring`]).
    cpu_wait: Option<CpuWait>,
    /// The owner's ring set up with `COOP_TASKRUN` that this one
    /// replaced, while requests may be in flight on it: their completions
    /// wait for the owner's next entry into the kernel, which a look
    /// that must not miss one (a future's `poll`, `is_done`) then makes
    /// (see [`Shared::renew_ring`]).
    retired_coop: Option<Arc<Ring>>,
    /// The wake-up read completed (the service thread: look around).
    pub woken: bool,
    /// A bound ring's owner's visits when the service thread last saw
    /// completions waiting on it (see [`Shared::owner_unresponsive`]).
    waiting_seen: Option<u64>,
    /// The ring's flushes when the service thread last saw requests in
    /// a bound ring's plug (see [`Shared::owner_unresponsive`]).
    plug_seen: Option<u64>,
    /// The service ring's read of the idle timer.
    pub timer_armed: bool,
    pub timer_fired: bool,
    timer_buf: Box<u64>,
}

/// A thread's private io_uring ring for one engine, made when it is
/// first needed, with `IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN` (as
/// fio's rings): a completion does not interrupt the thread with task
/// work, the kernel posts it when the thread waits in the ring (about
/// 0.15 us of CPU per request against 0.5 for the task work of a ring
/// set up without it, `perf` at 64 flows of one request).
///
/// Only the thread that made the ring may submit to it or reap it, and a
/// completion on it is posted only while that thread waits in it: if the
/// thread left the engine with a request on it (to block on something
/// else, or to exit), nobody could reap that request, and the service
/// thread could not take it over as it takes over rings whose owner is
/// away. So the private ring carries a request only while its owner
/// waits in the engine for that very request: a blocking wait
/// ([`Shared::block_in_ring`]) for a request the thread submitted itself
/// and has alone outstanding, still in its plug, with nothing on its
/// ring, and whose flush dispatches exactly that request (a thread
/// waiting for another thread's request sleeps on its ring, where that
/// request's completion wakes it). The thread then sleeps in the
/// private ring until the request is done (other threads do not wait for
/// it), and leaves the ring empty. In every other case the request goes
/// on the thread's ring as before.
pub(crate) struct Private {
    uring: IoUring,
    /// The ring's descriptor registered with its owner thread, if the
    /// kernel took it (see [`RegisteredRing`]).
    reg: Option<RegisteredRing>,
    /// A read of the ring's `private_wake` is armed in it (a shutdown
    /// writes it to have the in-flight request cancelled).
    wake_armed: bool,
    wake_buf: Box<u64>,
}

/// A private ring's descriptor registered with its owner thread
/// (`IORING_REGISTER_RING_FDS`, Linux 5.18): the owner's `io_uring_enter`
/// names the ring by its index in the thread's table of registered rings
/// (`IORING_ENTER_REGISTERED_RING`), and the kernel skips looking the
/// descriptor up and taking a reference to its file on every call
/// (`fget`/`fput`: about 3% of the CPU of a NOP request waited for alone,
/// `perf`). The table is the thread's: only the owner can use the index,
/// which the private ring's rules already give (only its thread enters
/// it). The owner unregisters it when the ring is dropped on its thread
/// (see [`REGISTERED`]); the kernel drops the table when the thread
/// exits. Without it (an older kernel, the thread's table of 16 full)
/// the ring is entered by its descriptor.
struct RegisteredRing {
    index: u32,
}

thread_local! {
    /// The private rings this thread registered: (index, descriptor).
    /// A ring dropped on another thread (after its owner exited) is not
    /// in that thread's table, so only the owner ever unregisters it.
    static REGISTERED: RefCell<Vec<(u32, RawFd)>> = const { RefCell::new(Vec::new()) };
}

/// `struct io_uring_rsrc_update` (include/uapi/linux/io_uring.h).
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// `IORING_REGISTER_RING_FDS` and `IORING_UNREGISTER_RING_FDS`.
const REGISTER_RING_FDS: libc::c_long = 20;
const UNREGISTER_RING_FDS: libc::c_long = 21;
/// `IORING_ENTER_GETEVENTS | IORING_ENTER_REGISTERED_RING`.
const ENTER_WAIT_REGISTERED: u32 = 1 | 16;

impl RegisteredRing {
    /// Registers `fd` with the calling thread (`None` if the kernel
    /// refuses).
    fn new(fd: RawFd) -> Option<Self> {
        let mut up = RsrcUpdate {
            offset: u32::MAX, // any free index
            resv: 0,
            data: fd as u64,
        };
        // SAFETY: one valid io_uring_rsrc_update, which the kernel reads
        // and writes the chosen index into.
        let n = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                fd,
                REGISTER_RING_FDS,
                &mut up,
                1,
            )
        };
        if n != 1 {
            return None;
        }
        let _ = REGISTERED.try_with(|r| r.borrow_mut().push((up.offset, fd)));
        Some(RegisteredRing { index: up.offset })
    }

    /// Submits `to_submit` SQEs and waits for one completion.
    fn submit_and_wait(&self, to_submit: u32) -> io::Result<()> {
        // SAFETY: plain syscall on the calling thread's registered ring;
        // no argument pointer.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                self.index,
                to_submit,
                1u32,
                ENTER_WAIT_REGISTERED,
                std::ptr::null::<libc::c_void>(),
                0usize,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Unregisters the ring of descriptor `fd` if this thread registered
    /// it (its owner; on any other thread the index names another table).
    fn release(&self, fd: RawFd) {
        let mine = REGISTERED
            .try_with(|r| {
                let mut r = r.borrow_mut();
                let at = r.iter().position(|&e| e == (self.index, fd))?;
                r.swap_remove(at);
                Some(())
            })
            .ok()
            .flatten()
            .is_some();
        if mine {
            let up = RsrcUpdate {
                offset: self.index,
                resv: 0,
                data: 0,
            };
            // SAFETY: one valid io_uring_rsrc_update, read by the kernel.
            unsafe { libc::syscall(libc::SYS_io_uring_register, fd, UNREGISTER_RING_FDS, &up, 1) };
        }
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        if let Some(r) = self.reg.take() {
            r.release(self.uring.as_raw_fd());
        }
    }
}

/// Whether a thread's private ring was made yet.
enum PrivateRing {
    /// Not needed yet.
    Untried,
    Ready(Box<Private>),
    /// The kernel refused it (`DEFER_TASKRUN` needs Linux 6.1): the
    /// thread's ring is used.
    Unavailable,
}

thread_local! {
    /// This thread's rings, one per engine it submitted to.
    static LOCAL: RefCell<LocalRings> =
        const { RefCell::new(LocalRings(Vec::new(), Vec::new(), Vec::new())) };
}

/// This thread's ring per engine (engine id, engine, ring), its rings
/// retired by [`Shared::renew_ring`], kept until their requests are
/// reaped (a caller up the stack may still use one), and the engines
/// whose ring could not be made for it, with when to try again (see
/// [`Shared::first_ring`]).
struct LocalRings(Vec<LocalRing>, Vec<LocalRing>, Vec<NoRing>);

/// (engine id, engine, ring).
type LocalRing = (u64, Weak<Shared>, Arc<Ring>);

/// [`crate::submit_plugged`]: each of the calling thread's rings whose
/// futures defer their submissions is looked at as its owner's `reap`
/// does (one at a time, the thread's table not borrowed meanwhile: a look
/// may use it).
pub(crate) fn submit_plugged() {
    // From a waker or a drop under one of this thread's rings' locks:
    // the look in progress, or the next, submits the plug.
    if CALLING_OUT.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    for i in 0.. {
        // The thread's table is gone (a thread-local's destructor at
        // the thread's exit): its rings were left to the service thread.
        let next = LOCAL.try_with(|l| {
            let l = l.borrow();
            let (_, shared, ring) = l.0.get(i)?;
            Some(
                ring.defer
                    .load(Ordering::Relaxed)
                    .then(|| (shared.upgrade(), ring.clone())),
            )
        });
        match next.ok().flatten() {
            None => return,
            // Waits for the ring's lock (another thread's look is short):
            // a plug left now would wait for the service thread.
            Some(Some((Some(shared), ring))) => {
                let mut st = ring.st.lock().unwrap_or_else(|p| p.into_inner());
                shared.look_locked(&ring, &mut st, true);
            }
            Some(_) => {}
        }
    }
}

/// (engine id, engine, the engine's time from which to try again).
type NoRing = (u64, Weak<Shared>, Time);

impl Drop for LocalRings {
    /// The thread exits: its rings are left to the service thread (the
    /// kernel completes what the thread submitted before it is gone).
    ///
    /// Requests on the ring were submitted by this thread, and the kernel
    /// completes some of them (io-wq work, retries) on its behalf: so the
    /// thread first waits for them, up to [`EXIT_WAIT_NS`] in all (its
    /// rings retired by [`Shared::renew_ring`] included), taking no new
    /// ones.
    fn drop(&mut self) {
        let retired = std::mem::take(&mut self.1);
        let until = monotonic_ns().saturating_add(EXIT_WAIT_NS);
        for (_, shared, ring) in self.0.drain(..).chain(retired) {
            ring.dead.store(true, Ordering::SeqCst);
            ring.bound.store(false, Ordering::Relaxed);
            let Some(s) = shared.upgrade() else { continue };
            // A poisoned ring is taken anyway, as on every other path: its
            // plug's requests still go to the scheduler.
            {
                let mut st = ring.st.lock().unwrap_or_else(|p| p.into_inner());
                enter_again(&ring, &mut st);
                s.unlinger(&ring);
                s.flush_plug(&ring, &mut st);
                while ring.in_flight.load(Ordering::SeqCst) > 0 {
                    let now = monotonic_ns();
                    if now >= until {
                        break;
                    }
                    enter_and_wait(&mut st, Some(until - now));
                    s.work(&ring, &mut st);
                }
                s.leave(&ring, &mut st);
                wake_all(&s, &mut st);
            }
            s.notify.signal();
        }
    }
}

static ENGINE_IDS: AtomicU64 = AtomicU64::new(1);

impl Shared {
    pub(crate) fn new(
        mode: SubmitMode,
        (private_rings, coop_taskrun): (bool, CoopTaskrun),
        core: Core,
        timerfd: OwnedFd,
        origin_mono: u64,
        depth: u32,
    ) -> io::Result<Arc<Self>> {
        let notify = Arc::new(EventFd::new()?);
        Ok(Arc::new_cyclic(|me| Shared {
            id: ENGINE_IDS.fetch_add(1, Ordering::Relaxed),
            mode,
            private_rings,
            coop_taskrun,
            core: Mutex::new(core),
            rings: Mutex::new(Vec::new()),
            notify,
            parked: AtomicBool::new(false),
            cancelling: AtomicBool::new(false),
            stop_begun: AtomicBool::new(false),
            service_exited: Mutex::new(false),
            service_exit: Condvar::new(),
            away_in_flight: AtomicBool::new(false),
            service_idle: AtomicBool::new(false),
            added: AtomicU64::new(0),
            timerfd,
            relay: WakeRelay::default(),
            parks: AtomicU64::new(0),
            linger_wakes: AtomicU64::new(0),
            service_submits: AtomicU64::new(0),
            cross_wakes: AtomicU64::new(0),
            coop_switches: Default::default(),
            core_waits: Default::default(),
            core_wait_ns: Default::default(),
            wake_latency: Default::default(),
            ring_setup_failed: AtomicU64::new(0),
            bound_takeovers: AtomicU64::new(0),
            ring_setup_errno: AtomicI32::new(0),
            closing: Mutex::new(Vec::new()),
            closing_len: AtomicUsize::new(0),
            entries: (depth * 2 + 8).next_power_of_two(),
            origin_mono,
            next_ring: AtomicU32::new(0),
            me: me.clone(),
        }))
    }

    /// Nanoseconds since the engine started: one CLOCK_MONOTONIC read
    /// (the clock `Instant` reads) and a subtraction, without
    /// `Instant::elapsed`'s `Duration` arithmetic.
    #[inline]
    pub(crate) fn now(&self) -> Time {
        monotonic_ns().saturating_sub(self.origin_mono)
    }

    /// The core, also after a panic elsewhere (the core catches its
    /// scheduler's panics; its own state stays consistent).
    pub(crate) fn core(&self) -> CoreGuard<'_> {
        let g = match self.core.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => self.core_contended(),
        };
        CoreGuard(ManuallyDrop::new(g))
    }

    /// Takes the core's lock held by another thread: tries again for up
    /// to [`CORE_SPIN_NS`] before sleeping on it (the holder, running on
    /// another CPU, holds it for a plug's or a batch's decisions, a few
    /// microseconds at most; sleeping and being woken costs the sleeper
    /// a context switch and the holder a `futex` wake-up).
    #[cold]
    fn core_contended(&self) -> MutexGuard<'_, Core> {
        self.core_waits[0].fetch_add(1, Ordering::Relaxed);
        let start = monotonic_ns();
        let until = start + CORE_SPIN_NS;
        let g = loop {
            for _ in 0..16 {
                std::hint::spin_loop();
            }
            match self.core.try_lock() {
                Ok(g) => break g,
                Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(TryLockError::WouldBlock) if monotonic_ns() < until => {}
                Err(TryLockError::WouldBlock) => {
                    self.core_waits[1].fetch_add(1, Ordering::Relaxed);
                    break self.core.lock().unwrap_or_else(|p| p.into_inner());
                }
            }
        };
        let waited = monotonic_ns().saturating_sub(start);
        self.core_wait_ns[0].fetch_add(waited, Ordering::Relaxed);
        self.core_wait_ns[1].fetch_max(waited, Ordering::Relaxed);
        g
    }

    /// Makes a ring whose completions can notify the service thread;
    /// `wake` is the eventfd its owner's waits also read; `coop`: with
    /// `COOP_TASKRUN` where it may have it.
    pub(crate) fn new_ring(
        &self,
        wake: Arc<EventFd>,
        sqpoll_ms: u32,
        coop: bool,
    ) -> io::Result<Arc<Ring>> {
        let mut b = IoUring::builder();
        if sqpoll_ms > 0 {
            b.setup_sqpoll(sqpoll_ms);
        }
        // See `run_task_work`. The kernel refuses these flags with
        // SQPOLL, and the option is local mode's.
        let coop = coop && sqpoll_ms == 0 && self.mode == SubmitMode::Local;
        if coop {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }
        let (mut uring, coop) = match b.build(self.entries) {
            Ok(u) => (u, coop),
            Err(_) => (IoUring::new(self.entries)?, false),
        };
        uring.submitter().register_eventfd(self.notify.fd())?;
        uring.completion().disable_eventfd();
        // Notifications stay off while the owner works on the ring.
        Ok(Arc::new(Ring {
            id: self.next_ring.fetch_add(1, Ordering::Relaxed),
            st: Mutex::new(RingState {
                uring,
                coop,
                cpu_wait: None,
                retired_coop: None,
                notifying: false,
                wake_armed: false,
                wake_buf: Box::new(0),
                plug: Vec::with_capacity(PLUG_MAX),
                sqes: Vec::new(),
                cqes: Vec::new(),
                done: Vec::new(),
                wakes: Vec::new(),
                released: Vec::new(),
                cancel_sent: false,
                private: PrivateRing::Untried,
                woken: false,
                waiting_seen: None,
                plug_seen: None,
                plug_waker: None,
                timer_armed: false,
                timer_fired: false,
                timer_buf: Box::new(0),
            }),
            wake,
            private_wake: EventFd::new()?,
            in_flight: AtomicU32::new(0),
            away: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            mine: Arc::new(Outstanding),
            lingering: AtomicBool::new(false),
            lingered: AtomicBool::new(false),
            plugged: AtomicU32::new(0),
            plug_flows: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            visits: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            delivering: AtomicBool::new(false),
            renew: AtomicBool::new(false),
            bound: AtomicBool::new(false),
            defer: AtomicBool::new(false),
        }))
    }

    /// This thread's ring for this engine, made on first use.
    ///
    /// Borrowed, not cloned (a clone is two atomic operations per
    /// request): the thread's ring table holds the ring until the thread
    /// exits, so it outlives every call on this thread; callers use it
    /// only on this thread, within the call.
    fn local_ring(&self, create: bool) -> Option<&Ring> {
        let ring = self.table_ring(create)?;
        if ring.renew.load(Ordering::Relaxed) && !ring.bound.load(Ordering::Relaxed) {
            return Some(self.renew_ring(ring));
        }
        Some(ring)
    }

    /// This thread's ring for this engine in its table, made on first use
    /// (see [`Shared::local_ring`], [`Shared::first_ring`]).
    fn table_ring(&self, create: bool) -> Option<&Ring> {
        let ring: *const Ring = LOCAL
            .try_with(|l| {
                let mut l = l.borrow_mut();
                if let Some((_, _, r)) = l.0.iter().find(|(id, _, _)| *id == self.id) {
                    return Some(Arc::as_ptr(r));
                }
                if !create {
                    return None;
                }
                self.first_ring(&mut l)
            })
            .ok()
            .flatten()?;
        // SAFETY: see above: the table's `Arc` keeps the ring alive while
        // this thread runs, and the table drops it only as the thread
        // exits (after which `LOCAL` is no longer reachable from it).
        Some(unsafe { &*ring })
    }

    /// Makes this thread's ring for this engine and puts it in the
    /// thread's table `l`. If the kernel refuses it (`EMFILE` at the
    /// descriptor limit, `ENOMEM`), the thread's requests go through the
    /// service thread, as in [`SubmitMode::Dispatcher`], and the thread
    /// tries again at its first request [`RING_RETRY_NS`] later, not at
    /// every one (an attempt is a few system calls); each failure is
    /// counted ([`crate::EngineStats::ring_setup_failed`], the first one's
    /// OS error kept).
    fn first_ring(&self, l: &mut LocalRings) -> Option<*const Ring> {
        // Forget the rings of engines that are gone.
        l.0.retain(|(_, s, _)| s.strong_count() > 0);
        l.2.retain(|(_, s, _)| s.strong_count() > 0);
        let failed = l.2.iter().position(|(id, _, _)| *id == self.id);
        let now = self.now();
        if failed.is_some_and(|i| now < l.2[i].2) {
            return None;
        }
        let coop = CoopTaskrun::On == self.coop_taskrun;
        let ring = match self.owned_ring(coop, None) {
            Ok(ring) => ring,
            Err(e) => {
                self.ring_setup_failed.fetch_add(1, Ordering::Relaxed);
                let errno = e.raw_os_error().unwrap_or(0);
                let _ = self.ring_setup_errno.compare_exchange(
                    0,
                    errno,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                let again = now.saturating_add(RING_RETRY_NS);
                match failed {
                    Some(i) => l.2[i].2 = again,
                    None => l.2.push((self.id, self.me.clone(), again)),
                }
                return None;
            }
        };
        if let Some(i) = failed {
            l.2.swap_remove(i);
        }
        self.rings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ring.clone());
        let p = Arc::as_ptr(&ring);
        l.0.push((self.id, self.me.clone(), ring));
        Some(p)
    }

    /// A new ring for the calling thread, with `COOP_TASKRUN` if `coop`
    /// (and, under `CoopTaskrun::Auto`, the thread's sampler of its
    /// waits for a CPU: `wait`, or a new one).
    fn owned_ring(&self, coop: bool, wait: Option<CpuWait>) -> io::Result<Arc<Ring>> {
        let ring = self.new_ring(Arc::new(EventFd::new()?), 0, coop)?;
        if self.coop_taskrun == CoopTaskrun::Auto {
            let mut st = ring.st.lock().unwrap_or_else(|p| p.into_inner());
            st.cpu_wait = match wait {
                Some(mut w) => {
                    w.coop = st.coop;
                    Some(w)
                }
                None => CpuWait::open(st.coop),
            };
        }
        Ok(ring)
    }

    /// Sets this thread's ring up again the other way (with or without
    /// `COOP_TASKRUN`, `CoopTaskrun::Auto`): a new ring takes the
    /// thread's work from now on; the old one is retired as a ring whose
    /// thread exited, without waiting: its requests complete there and
    /// the service thread reaps them (their waiters, on the new ring,
    /// are woken as for another thread's request), and the service
    /// thread forgets it once empty. The private ring is dropped here (on
    /// its owner thread, which unregisters it); the next lone wait makes
    /// another. Returns the ring to use: the old one if its lock is busy
    /// (tried again at the next call), a shutdown has begun, or the
    /// kernel refuses a ring (the sampler is then dropped).
    #[cold]
    fn renew_ring<'r>(&'r self, old: &'r Ring) -> &'r Ring {
        let mut st = match old.st.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return old,
        };
        let coop = !st.coop;
        let new = match self.owned_ring(coop, st.cpu_wait.take()) {
            Ok(r)
                if r.st.lock().is_ok_and(|n| n.coop == coop)
                    && !self.stop_begun.load(Ordering::SeqCst) =>
            {
                r
            }
            _ => {
                old.renew.store(false, Ordering::Relaxed);
                return old;
            }
        };
        self.retire(old, &mut st);
        // The retired ring if it has COOP_TASKRUN, else the one it owed for.
        let owed = st.retired_coop.take();
        drop(st);
        self.coop_switches[usize::from(!coop)].fetch_add(1, Ordering::Relaxed);
        self.rings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(new.clone());
        self.notify.signal();
        let p = Arc::as_ptr(&new);
        let _ = LOCAL.try_with(|l| {
            let mut l = l.borrow_mut();
            l.1.retain(|(_, _, r)| r.in_flight.load(Ordering::SeqCst) > 0);
            if let Some(e) = l.0.iter_mut().find(|(id, _, _)| *id == self.id) {
                let owed = if coop { owed } else { Some(e.2.clone()) };
                new.st
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retired_coop = owed;
                let gone = std::mem::replace(&mut e.2, new);
                l.1.push((self.id, self.me.clone(), gone));
            }
        });
        // SAFETY: as in `table_ring`: the thread's table holds the new
        // ring until the thread exits.
        unsafe { &*p }
    }

    /// Retires this thread's ring (under its lock; see
    /// [`Shared::renew_ring`]): its plug goes to the scheduler and what
    /// that dispatches onto it, it takes no new requests, and it is left
    /// to the service thread.
    fn retire(&self, old: &Ring, st: &mut RingState) {
        enter_again(old, st);
        self.unlinger(old);
        st.private = PrivateRing::Untried;
        self.flush_plug(old, st);
        old.dead.store(true, Ordering::SeqCst);
        self.leave(old, st);
        wake_all(self, st);
    }

    /// Hands a request to the scheduler and pushes what it dispatches on
    /// this thread's ring. Returns the request's count among the thread's
    /// outstanding ones.
    ///
    /// The plug: the SQEs are submitted by the thread's next wait, poll
    /// or `is_done` (one `io_uring_enter` for the batch, and for the wait),
    /// at once when the plug holds [`PLUG_MAX`] requests or another
    /// flow's, or by the service thread if the thread has not been back
    /// within [`crate::service::LINGER_NS`]. `then_wait`: the caller waits
    /// at once.
    pub(crate) fn submit(&self, mut op: Op, then_wait: bool) -> Option<Hold> {
        let ring = match self.mode {
            SubmitMode::Local => self.local_ring(true),
            SubmitMode::Dispatcher => None,
        };
        let Some(ring) = ring else {
            self.submit_to_service(op);
            return None;
        };
        op.before_stop = !self.stop_begun.load(Ordering::SeqCst);
        let mut st = ring.st.lock().unwrap_or_else(|p| p.into_inner());
        let stay = self.enter_to_plug(ring, &mut st, then_wait);
        let bit = flow_bit(op.flow);
        st.plug.push(op);
        if ring.defer.load(Ordering::Relaxed) {
            if let Some(w) = st.plug_waker.take() {
                let _out = CallingOut::new();
                w.wake();
            }
        }
        ring.plugged.store(st.plug.len() as u32, Ordering::Release);
        let flows = ring.plug_flows.load(Ordering::Relaxed);
        if flows & bit == 0 {
            ring.plug_flows.store(flows | bit, Ordering::Release);
        }
        if let Some(w) = st.cpu_wait.as_mut() {
            if w.tick() {
                ring.renew.store(true, Ordering::Relaxed);
            }
        }
        let hold = Some(Hold(ring.mine.clone()));
        if !then_wait && !stay {
            if st.plug.len() >= PLUG_MAX {
                self.work(ring, &mut st);
            }
            self.linger_or_leave(ring, &mut st, true);
        }
        hold
    }

    /// The owner is back to plug a request (under its ring's lock).
    /// Returns whether the ring stays lingering: a thread that lingers
    /// (it left the engine keeping its ring, eventfd notification off)
    /// and comes back only to plug one more request, the plug not full and
    /// no wait to follow, stays lingering. Its `visits` count tells the
    /// service thread it came back. Otherwise the ring is entered as for
    /// any other work.
    fn enter_to_plug(&self, ring: &Ring, st: &mut RingState, then_wait: bool) -> bool {
        let stay =
            ring.lingering.load(Ordering::Relaxed) && !then_wait && st.plug.len() + 1 < PLUG_MAX;
        if stay {
            visit(ring);
        } else {
            enter_again(ring, st);
            self.unlinger(ring);
        }
        stay
    }

    /// Flushes the plug (the block layer's plug, `blk_finish_plug`): the
    /// thread's requests go to the scheduler together, under one lock,
    /// and what the scheduler then dispatches goes on this ring (pushed,
    /// submitted by the caller's next enter). One lock per batch instead
    /// of one per request: with several submitting threads the core's
    /// lock and its cache lines change hands once per batch. Returns
    /// whether a request failed at once (its result is in).
    fn flush_plug(&self, ring: &Ring, st: &mut RingState) -> bool {
        self.flush_plug_to(ring, st, false).0
    }

    /// [`Shared::flush_plug`]; with `lone` (the plug holds the thread's
    /// one outstanding request, about to be waited for), a flush that
    /// dispatches exactly that request returns its SQE instead of pushing
    /// it on the ring (for the private ring, see [`Private`]).
    fn flush_plug_to(
        &self,
        ring: &Ring,
        st: &mut RingState,
        lone: bool,
    ) -> (bool, Option<squeue::Entry>) {
        if st.plug.is_empty() {
            return (false, None);
        }
        let (mut failed, mut own, mut private) = (false, None, None);
        // A ring whose owner is exiting takes no new requests: the
        // service thread dispatches them.
        let exiting = ring.dead.load(Ordering::Relaxed);
        // Read before the lock: the core keeps the scheduler's time from
        // going backwards (see `Core::at`).
        let now = self.now();
        let stopping = {
            let mut core = self.core();
            for op in st.plug.drain(..) {
                match core.add(op, now, ring.id) {
                    Ok(idx) => own = Some(u64::from(idx)),
                    Err(f) => {
                        failed |= f.is_some();
                        if let Some(f) = f {
                            push_finished(&mut st.wakes, &mut st.released, f, ring);
                        }
                    }
                }
            }
            if !exiting {
                core.dispatch(now, || self.now(), ring.id, &mut st.sqes);
            }
            if lone && matches!(st.sqes.as_slice(), [sqe] if Some(sqe.get_user_data()) == own) {
                private = st.sqes.pop();
                core.stats.private_waits += 1;
            }
            core.stopping().is_some()
        };
        ring.plugged.store(0, Ordering::SeqCst);
        ring.plug_flows.store(0, Ordering::Release);
        // Only a holder of the ring's lock flushes its plug: a load and a
        // store, not a read-modify-write. Whoever reads the new count
        // (acquire) sees the plug's requests added to the core.
        let flushes = ring.flushes.load(Ordering::Relaxed);
        ring.flushes.store(flushes + 1, Ordering::Release);
        // The service thread may be waiting for this plug to end a
        // shutdown.
        if exiting || stopping {
            self.notify.signal();
        }
        self.push_sqes(ring, st);
        self.remove_closed_flows();
        (failed, private)
    }

    /// Removes a flow from the scheduler (its `Flow` was dropped) once no
    /// plug holds a request of it: at once if none does, else when each
    /// plug that held its requests then has been flushed (requests
    /// submitted before a flow closes still complete, and the scheduler
    /// must know the flow when they reach it). This thread's own plug is
    /// flushed first, unless its ring is busy (a `Flow` dropped by a
    /// waker this thread runs while it works on its ring).
    pub(crate) fn close_flow(&self, flow: FlowId) {
        if let Some(ring) = self
            .local_ring(false)
            .filter(|_| self.mode == SubmitMode::Local)
        {
            if let Ok(mut st) = ring.st.try_lock() {
                enter_again(ring, &mut st);
                self.unlinger(ring);
                self.work(ring, &mut st);
                self.linger_or_leave(ring, &mut st, true);
            }
        }
        let mut closing = self.closing.lock().unwrap_or_else(|p| p.into_inner());
        // Announced before the plugs are looked at: a flush that does not
        // see it has emptied its plug before the look below.
        self.closing_len.fetch_add(1, Ordering::SeqCst);
        let plugging: Vec<(Arc<Ring>, u64)> = self
            .rings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|r| r.plugged.load(Ordering::SeqCst) > 0)
            .map(|r| (r.clone(), r.flushes.load(Ordering::SeqCst)))
            .collect();
        // Only plugs that hold a request of the flow (or whose owner is
        // busy with it and that may, to be asked again at its flush) are
        // waited for: a plug is looked into only if its lock is free
        // (never waited for), so the lock order is not at stake; a busy
        // one whose flows' bits lack this flow's holds none of it.
        let bit = flow_bit(flow);
        let waits: Vec<(Arc<Ring>, u64)> = plugging
            .into_iter()
            .filter(|(r, _)| match r.st.try_lock() {
                Ok(st) => st.plug.iter().any(|op| op.flow == flow),
                Err(_) => r.plug_flows.load(Ordering::Acquire) & bit != 0,
            })
            .collect();
        if waits.is_empty() {
            self.closing_len.fetch_sub(1, Ordering::SeqCst);
            drop(closing);
            let now = self.now();
            self.core().remove_flow(now, flow);
        } else {
            closing.push(Closing { flow, waits });
        }
    }

    /// Removes the closed flows whose requests have all left the plugs
    /// (see [`Shared::close_flow`]).
    fn remove_closed_flows(&self) {
        if self.closing_len.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut gone = Vec::new();
        {
            let mut closing = self.closing.lock().unwrap_or_else(|p| p.into_inner());
            closing.retain_mut(|c| {
                c.waits.retain(|(r, n)| {
                    r.flushes.load(Ordering::SeqCst) == *n && r.plugged.load(Ordering::SeqCst) > 0
                });
                if c.waits.is_empty() {
                    gone.push(c.flow);
                }
                !c.waits.is_empty()
            });
            self.closing_len.store(closing.len(), Ordering::SeqCst);
        }
        if !gone.is_empty() {
            let now = self.now();
            let mut core = self.core();
            for f in gone {
                core.remove_flow(now, f);
            }
        }
    }

    /// The service thread is about to exit: wakes a shutdown waiting for
    /// it ([`Shared::wait_service_exit`]).
    pub(crate) fn service_exiting(&self) {
        *self
            .service_exited
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = true;
        self.service_exit.notify_all();
    }

    /// Waits up to `limit` (any `Duration`; one beyond the clock's range
    /// waits without a bound) for the service thread to exit, i.e. for a
    /// shutdown's work to be done; returns whether it did.
    pub(crate) fn wait_service_exit(&self, limit: Duration) -> bool {
        let exited = self
            .service_exited
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let waited = self
            .service_exit
            .wait_timeout_while(exited, limit, |exited| !*exited);
        let (exited, _) = waited.unwrap_or_else(|p| p.into_inner());
        *exited
    }

    /// Whether a shutdown has finished its work: the core's, no plug
    /// holds a request, and every result is delivered (a delivery in
    /// progress, see [`Shared::deliver`], is waited for: the core's lock
    /// orders the start of every delivery of a request the core no
    /// longer holds before this look; a ring of an exited thread, which
    /// may have left the list, delivers under the core's lock).
    pub(crate) fn done(&self) -> bool {
        if !self.core().done() {
            return false;
        }
        // Copied: not held while waiting for a delivery.
        let rings = self.rings.lock().unwrap_or_else(|p| p.into_inner()).clone();
        rings.iter().all(|r| {
            while r.delivering.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            r.plugged.load(Ordering::SeqCst) == 0
        })
    }

    /// Whether some ring's owner lingers (the service thread then bounds
    /// its sleep, see [`Shared::linger`]).
    pub(crate) fn any_lingering(&self) -> bool {
        self.rings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|r| r.lingering.load(Ordering::SeqCst))
    }

    /// Whether some ring's owner started to linger since the service
    /// thread last asked (and forgets it). While threads keep lingering
    /// (each plugs requests, then comes back to wait for them), the
    /// service thread looks at the rings every
    /// [`crate::service::LINGER_NS`] without being told, so no lingering
    /// thread has to wake it (see [`Shared::linger`]).
    pub(crate) fn lingered_lately(&self) -> bool {
        let mut any = false;
        for r in self.rings.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            // Written only when set: the owner's line stays in its cache.
            if r.lingered.load(Ordering::Relaxed) {
                r.lingered.store(false, Ordering::Relaxed);
                any = true;
            }
        }
        any
    }

    /// Locks this thread's ring for its owner's work, ending a linger.
    fn enter_own<'r>(&self, ring: &'r Ring) -> MutexGuard<'r, RingState> {
        let st = enter_ring(ring);
        self.unlinger(ring);
        st
    }

    /// The owner is back (called under the ring's lock, as every change
    /// of `lingering` is).
    fn unlinger(&self, ring: &Ring) {
        visit(ring);
        if ring.lingering.load(Ordering::Relaxed) {
            ring.lingering.store(false, Ordering::Release);
        }
    }

    /// The owner leaves the engine but keeps its ring (under its lock):
    /// completions wait in it for the owner (no eventfd write, no service
    /// thread), and the plug waits for the owner's next call. The service
    /// thread takes the ring over if the owner has not been back within
    /// [`crate::service::LINGER_NS`].
    fn linger(&self, ring: &Ring) {
        // Paired with the service thread's `service_idle` store before it
        // looks at the flags (`Shared::any_lingering`): either it sees
        // this ring lingering, or this sees it idle and wakes it.
        ring.lingering.store(true, Ordering::SeqCst);
        if !ring.lingered.load(Ordering::Relaxed) {
            ring.lingered.store(true, Ordering::Relaxed);
        }
        if self.service_idle.load(Ordering::SeqCst)
            && self.service_idle.swap(false, Ordering::SeqCst)
        {
            self.linger_wakes.fetch_add(1, Ordering::Relaxed);
            self.notify.signal();
        }
    }

    /// The service thread takes over a lingering ring whose owner has
    /// not been back (under its lock): it is away from now on.
    pub(crate) fn take_over(&self, ring: &Ring, st: &mut RingState) {
        ring.lingering.store(false, Ordering::SeqCst);
        // Its plug is the service thread's to submit now.
        self.flush_plug(ring, st);
        let plugged = st.uring.submission().len() as u64;
        self.service_submits.fetch_add(plugged, Ordering::Relaxed);
        leave_ring(ring, st);
    }

    /// After the owner's work: lingers if `may_linger` and it has requests
    /// outstanding (it comes back for them) and, as far as the counts
    /// tell, only its own on the ring (other threads' completions are not
    /// kept waiting for it), else leaves (submitting its plug).
    fn linger_or_leave(&self, ring: &Ring, st: &mut RingState, may_linger: bool) {
        let mine = ring.mine();
        if ring.bound.load(Ordering::Relaxed) {
            self.linger_bound(ring, st);
        } else if may_linger && mine > 0 && ring.in_flight.load(Ordering::Relaxed) <= mine {
            self.linger(ring);
        } else {
            self.leave(ring, st);
        }
        wake_all(self, st);
    }

    /// A bound ring's owner leaves the engine ([`Ring::bound`]): with
    /// anything on the ring (requests in flight, its own or others', or
    /// in its plug) it lingers, its runtime coming back once the ring's
    /// descriptor turns readable; a ring with nothing on it is left.
    fn linger_bound(&self, ring: &Ring, st: &mut RingState) {
        if ring.in_flight.load(Ordering::Relaxed) > 0 || !st.plug.is_empty() {
            self.linger(ring);
        } else {
            self.leave(ring, st);
        }
    }

    /// The owner's look at its ring without blocking (a future's `poll`,
    /// `is_done`, [`crate::ThreadRing::reap`]): submits its plug, reaps
    /// and reports completions, wakes their waiters, then lingers (if
    /// `linger`, or the ring is bound) or leaves. Returns false if the
    /// ring's lock was busy (someone else works on it) or completions
    /// still wait on it.
    pub(crate) fn look(&self, ring: &Ring, linger: bool) -> bool {
        match ring.st.try_lock() {
            Ok(mut st) => self.look_locked(ring, &mut st, linger),
            Err(TryLockError::Poisoned(p)) => self.look_locked(ring, &mut p.into_inner(), linger),
            Err(TryLockError::WouldBlock) => false,
        }
    }

    /// [`Shared::look`] under the ring's lock, held.
    fn look_locked(&self, ring: &Ring, st: &mut RingState, linger: bool) -> bool {
        enter_for_retired_coop(st);
        if ring.in_flight.load(Ordering::Relaxed) == 0
            && st.uring.completion().is_empty()
            && st.plug.is_empty()
        {
            return true;
        }
        enter_again(ring, st);
        self.unlinger(ring);
        // A look that has requests to submit enters the kernel for them;
        // that call also runs the ring's task work on its way back (a
        // `COOP_TASKRUN` ring's completions wait for the thread's next
        // entry into the kernel), so the look costs one `io_uring_enter`,
        // not two.
        self.flush_plug(ring, st);
        if st.uring.submission().is_empty() {
            run_task_work(ring, st, true);
        } else {
            submit_pending(st);
        }
        self.work(ring, st);
        let all = st.uring.completion().is_empty();
        self.linger_or_leave(ring, st, linger);
        all
    }

    /// Whether the service thread takes over bound `ring`, lingering,
    /// whose owner has not been back since the last look (under the
    /// ring's lock): once a shutdown has begun; once completions have
    /// waited on it since the look before with no visit of the owner in
    /// between; or once requests have waited in its plug since the look
    /// before with no flush in between (an owner that keeps plugging
    /// visits the ring at every request, so its visits would put a
    /// take-over off for as long as it plugs). Not while the owner's
    /// runtime waits on the descriptor for a completion still to come.
    pub(crate) fn owner_unresponsive(&self, ring: &Ring, st: &mut RingState) -> bool {
        if self.stop_begun.load(Ordering::SeqCst) {
            return true;
        }
        let visits = ring.visits.load(Ordering::SeqCst);
        let flushes = ring.flushes.load(Ordering::SeqCst);
        let waiting = !st.uring.completion().is_empty() || st.uring.submission().taskrun();
        let plugged = !st.plug.is_empty();
        let unresponsive = (waiting && st.waiting_seen == Some(visits))
            || (plugged && st.plug_seen == Some(flushes));
        st.waiting_seen = waiting.then_some(visits);
        st.plug_seen = plugged.then_some(flushes);
        unresponsive
    }

    /// Binds this thread's ring to the thread's runtime
    /// ([`crate::ThreadRing`]): made if need be, set up with
    /// `COOP_TASKRUN` unless the engine's [`CoopTaskrun`] is `Off` (a
    /// completion then does not interrupt the running thread; one that
    /// arrives while the thread sleeps in its poller still wakes it), and
    /// not set up again while bound, so its descriptor stays the same.
    /// Returns the ring and its descriptor.
    pub(crate) fn bind_ring(&self) -> io::Result<(Arc<Ring>, RawFd)> {
        if self.mode != SubmitMode::Local {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a thread's ring is bound in local submit mode only: in dispatcher mode the \
                 service thread reaps every ring",
            ));
        }
        let Some(mut ring) = self.local_ring(true) else {
            return Err(match self.ring_setup_errno.load(Ordering::Relaxed) {
                0 => io::Error::other("this thread's io_uring ring could not be set up"),
                e => io::Error::from_raw_os_error(e),
            });
        };
        if ring.bound.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "this thread's ring for this engine is bound already",
            ));
        }
        ring = self.ring_with_coop(ring, self.coop_taskrun != CoopTaskrun::Off);
        let mut st = self.enter_own(ring);
        ring.bound.store(true, Ordering::Relaxed);
        let fd = st.uring.as_raw_fd();
        self.linger_or_leave(ring, &mut st, false);
        drop(st);
        let arc = LOCAL.with(|l| {
            let l = l.borrow();
            let e = l.0.iter().find(|(id, _, _)| *id == self.id);
            e.map(|e| e.2.clone())
        });
        Ok((arc.expect("the thread's ring is in its table"), fd))
    }

    /// This thread's ring `ring`, set up again with `COOP_TASKRUN` if
    /// `coop` and without it if not, unless it is already: waits for the
    /// ring's lock while another thread (the service thread) holds it,
    /// and makes at most [`RENEW_TRIES`] new rings; keeps `ring` if the
    /// kernel refuses that setup or a shutdown has begun.
    fn ring_with_coop<'r>(&'r self, ring: &'r Ring, coop: bool) -> &'r Ring {
        let mut tries = 0;
        while tries < RENEW_TRIES {
            let same = match ring.st.try_lock() {
                Ok(st) => st.coop == coop,
                Err(TryLockError::Poisoned(p)) => p.into_inner().coop == coop,
                Err(TryLockError::WouldBlock) => {
                    std::thread::yield_now();
                    continue;
                }
            };
            if same {
                return ring;
            }
            let new = self.renew_ring(ring);
            if !std::ptr::eq(new, ring) {
                return new;
            }
            tries += 1;
        }
        ring
    }

    /// [`crate::ThreadRing::poll_plugged`]: ready while requests wait in
    /// `ring`'s plug; else the waker is kept for the next request plugged
    /// (only the owner, the caller, plugs requests on its ring).
    pub(crate) fn poll_plugged(&self, ring: &Ring, cx: &mut Context<'_>) -> Poll<()> {
        if ring.plugged.load(Ordering::Acquire) > 0 {
            return Poll::Ready(());
        }
        let mut st = ring.st.lock().unwrap_or_else(|p| p.into_inner());
        if !st.plug.is_empty() {
            return Poll::Ready(());
        }
        match &mut st.plug_waker {
            Some(w) => w.clone_from(cx.waker()),
            none => *none = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Unbinds `ring` (this thread's, bound by [`Shared::bind_ring`]): the
    /// owner leaves it as any thread does, so that from now on the
    /// service thread reaps what the owner leaves on it.
    pub(crate) fn unbind_ring(&self, ring: &Ring) {
        let mut st = self.enter_own(ring);
        ring.bound.store(false, Ordering::Relaxed);
        ring.defer.store(false, Ordering::Relaxed);
        st.plug_waker = None;
        self.linger_or_leave(ring, &mut st, false);
    }

    /// Dispatcher mode (or a thread without a ring): the service thread
    /// dispatches and submits.
    fn submit_to_service(&self, op: Op) {
        let now = self.now();
        let w = self.core().add(op, now, NO_RING);
        if let Err(Some(f)) = w {
            f.wake();
        }
        self.added.fetch_add(1, Ordering::SeqCst);
        // In local mode the service thread does not announce its sleeps:
        // always wake it.
        if self.parked.swap(false, Ordering::SeqCst) || self.mode == SubmitMode::Local {
            self.notify.signal();
        }
    }

    /// Pushes the dispatched SQEs onto `ring`'s submission queue.
    pub(crate) fn push_sqes(&self, ring: &Ring, st: &mut RingState) {
        if st.sqes.is_empty() {
            return;
        }
        if Arc::ptr_eq(&ring.wake, &self.notify) {
            self.service_submits
                .fetch_add(st.sqes.len() as u64, Ordering::Relaxed);
        }
        ring.in_flight
            .fetch_add(st.sqes.len() as u32, Ordering::SeqCst);
        let mut sqes = std::mem::take(&mut st.sqes);
        for sqe in sqes.drain(..) {
            push_sqe(st, sqe);
        }
        st.sqes = sqes;
    }

    /// The service thread's work on ring `x` whose owner is away: reaps
    /// it, reports the completions, and submits what they let the
    /// scheduler dispatch on the service ring `s`.
    pub(crate) fn reap_for_owner(
        &self,
        x: &Ring,
        xs: &mut RingState,
        s: &Ring,
        ss: &mut RingState,
    ) {
        loop {
            submit_pending(xs);
            reap(x, xs);
            if xs.cqes.is_empty() {
                return;
            }
            let cqes = std::mem::take(&mut xs.cqes);
            self.settle(&cqes, s, ss);
            xs.cqes = cqes;
            xs.cqes.clear();
        }
    }

    /// The owner's loop: submit, reap, report, until the ring is quiet.
    pub(crate) fn work(&self, ring: &Ring, st: &mut RingState) {
        self.flush_plug(ring, st);
        for _ in 0..WORK_ROUNDS {
            submit_pending(st);
            run_task_work(ring, st, false);
            reap(ring, st);
            if st.cqes.is_empty() {
                return;
            }
            let cqes = std::mem::take(&mut st.cqes);
            self.settle(&cqes, ring, st);
            st.cqes = cqes;
            st.cqes.clear();
        }
    }

    /// Reports completions to the scheduler, dispatches onto `ring`,
    /// pushes the SQEs (submitted by the caller's next enter) and queues
    /// the waiters in `st.wakes`. The results are delivered to the
    /// requests' slots after the core's lock is released (the lock is
    /// held for the scheduler's part only; see [`Shared::deliver`]).
    pub(crate) fn settle(&self, cqes: &[(u64, i32)], ring: &Ring, st: &mut RingState) {
        // Read before the lock (see `Core::at`).
        let now = self.now();
        let mut core = self.core();
        if Arc::ptr_eq(&ring.wake, &self.notify) {
            core.stats.service_completions += cqes.len() as u64;
        }
        for &(ud, res) in cqes {
            if let Some(d) = core.complete(ud as u32, res, now) {
                st.done.push(d);
            }
        }
        if !st.done.is_empty() {
            // Under the core's lock: whoever sees these requests gone
            // from the core sees them being delivered.
            ring.delivering.store(true, Ordering::Relaxed);
        }
        // A ring whose owner is exiting takes no new requests: the
        // service thread dispatches them.
        let exiting = ring.dead.load(Ordering::Relaxed);
        if exiting {
            // Its ring may leave the list `Shared::done` looks at before
            // a delivery after the lock would end: delivered under it.
            self.deliver(ring, st);
        }
        if core.stopping() != Some(ShutdownMode::Cancel) && !exiting {
            core.dispatch(now, || self.now(), ring.id, &mut st.sqes);
        }
        let done = core.done();
        // Requests the core failed meanwhile (a scheduler's panic) are
        // woken with the others, after the delivery: no user code (a
        // waker) runs between taking results from the core and delivering
        // them, so a panicking waker cannot leave the ring delivering.
        let failed = if core.finished_is_empty() {
            Vec::new()
        } else {
            core.take_finished()
        };
        drop(core);
        self.deliver(ring, st);
        for f in failed {
            push_finished(&mut st.wakes, &mut st.released, f, ring);
        }
        if done || exiting {
            self.notify.signal();
        }
        self.push_sqes(ring, st);
        submit_pending(st);
        match self.mode {
            SubmitMode::Local => wake_all(self, st),
            SubmitMode::Dispatcher => {
                self.relay.wake_or_publish(&mut st.wakes);
            }
        }
        let _out = CallingOut::new();
        st.released.clear();
    }

    /// Delivers the results [`Shared::settle`] took from the core to
    /// their slots (outside the core's lock: storing a result, and the
    /// slot's atomics, are no part of the serialised decision) and queues
    /// their waiters. A shutdown is over only once no ring is delivering
    /// ([`Shared::done`] waits for a delivery in progress: it is short
    /// and never blocks).
    fn deliver(&self, ring: &Ring, st: &mut RingState) {
        if st.done.is_empty() {
            return;
        }
        #[cfg(test)]
        if ring.dead.load(Ordering::Relaxed) {
            delivery_gate::pause(self.id);
        }
        for (sink, res) in st.done.drain(..) {
            let f = sink.complete(res);
            push_finished(&mut st.wakes, &mut st.released, f, ring);
        }
        ring.delivering.store(false, Ordering::Release);
    }

    /// The owner leaves the engine: completions from now on notify the
    /// service thread. Anything already there is reaped first.
    pub(crate) fn leave(&self, ring: &Ring, st: &mut RingState) {
        self.flush_plug(ring, st);
        for _ in 0..LEAVE_ROUNDS {
            self.cancel_if_stopping(ring, st);
            if !leave_ring(ring, st) {
                if ring.in_flight.load(Ordering::Relaxed) > 0
                    && !self.away_in_flight.load(Ordering::Relaxed)
                {
                    self.away_in_flight.store(true, Ordering::SeqCst);
                }
                return;
            }
            enter_again(ring, st);
            self.work(ring, st);
        }
        // Still busy: the service thread takes the rest.
        if leave_ring(ring, st) {
            self.notify.signal();
        }
    }

    /// In a `Cancel` shutdown, asks the kernel (once per ring) to cancel
    /// the requests in flight on `ring`.
    pub(crate) fn cancel_if_stopping(&self, ring: &Ring, st: &mut RingState) {
        if !self.cancelling.load(Ordering::SeqCst)
            || st.cancel_sent
            || ring.in_flight.load(Ordering::SeqCst) == 0
        {
            return;
        }
        let ids = {
            let core = self.core();
            if core.stopping() != Some(ShutdownMode::Cancel) {
                return;
            }
            core.in_flight_on(ring.id)
        };
        st.cancel_sent = true;
        for ud in ids {
            push_sqe(
                st,
                opcode::AsyncCancel::new(ud).build().user_data(CANCEL_TOKEN),
            );
        }
        submit_pending(st);
    }

    /// Blocks in this thread's ring until a completion or a wake-up, and
    /// does the work that brings (submitting the plug with the wait).
    /// The ring stays with the thread: its wait looks at the result next,
    /// then blocks again or ends in [`Driver::finish_wait`].
    ///
    /// A wake-up that the service thread reaped while the owner was away
    /// (`woken`) ends the wait at once: its eventfd count is spent.
    ///
    /// The waiter (a read of the ring's wake eventfd) is registered
    /// unless the wait is private: the thread then completes its request
    /// itself, and nobody else could.
    fn block_in_ring(&self, ring: &Ring, own: Option<SlotId>, register: Register<'_>) {
        let mut st = self.enter_own(ring);
        self.cancel_if_stopping(ring, &mut st);
        let register = || {
            // A wake noted before this wait is not this wait's.
            ring.wake.take_stamp();
            register(Waiter::Event(ring.wake.clone()))
        };
        // Whether a result is in: a request that failed at once may be
        // the one waited for, and a private wait ends with its result.
        let (result_in, private) = match self.lone_wait(ring, &mut st, own) {
            Some(p) => {
                let (failed, own) = self.flush_plug_to(ring, &mut st, true);
                match own {
                    Some(sqe) => {
                        self.wait_private(ring, &mut st, p, sqe);
                        if let Some(w) = st.cpu_wait.as_mut() {
                            w.note_private();
                        }
                        (true, true)
                    }
                    None => {
                        st.private = PrivateRing::Ready(p);
                        (register() | failed, false)
                    }
                }
            }
            None => (register() | self.flush_plug(ring, &mut st), false),
        };
        if !result_in && !std::mem::take(&mut st.woken) {
            arm_reads(ring, &mut st, None);
            enter_and_wait(&mut st, None);
        }
        self.work(ring, &mut st);
        if st.woken {
            self.note_wake_latency(ring);
        }
        // The caller looks at its result next: a wake-up reaped here has
        // done its job.
        st.woken = false;
        if private && ring.mine() == 1 {
            // The waited request, done, is the thread's only one: once
            // its result is taken the thread has nothing outstanding and
            // leaves the ring (as `finish_wait` would, which then finds
            // the ring left and takes no lock).
            self.leave(ring, &mut st);
        }
        wake_all(self, &mut st);
    }
}

impl Shared {
    /// Counts the time from another thread's wake of this ring's owner
    /// to the owner seeing it ([`crate::EngineStats::wake_latency`]).
    fn note_wake_latency(&self, ring: &Ring) {
        let t = ring.wake.take_stamp();
        if t != 0 {
            let b = latency_bucket(monotonic_ns().saturating_sub(t));
            self.wake_latency[b].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The private ring, taken out of the ring's state, if this wait may
    /// use it (see [`Private`]): the waited request is the thread's own
    /// (`own`, its slot), its one outstanding request and the one request
    /// in its plug, and nothing is on its ring. (The counts alone are not
    /// enough: a request whose `Pending` was dropped is no longer counted
    /// in `mine` but may be the one in the plug, while the waited one is
    /// on another thread's ring.) Makes it on first use.
    fn lone_wait(
        &self,
        ring: &Ring,
        st: &mut RingState,
        own: Option<SlotId>,
    ) -> Option<Box<Private>> {
        // The one plugged request's slot (checked last: the counts are
        // cheaper).
        let plugged = || {
            st.plug
                .first()
                .and_then(|op| op.sink.as_ref())
                .map(Completer::id)
        };
        if !self.private_rings
            || own.is_none()
            || st.plug.len() != 1
            || ring.in_flight.load(Ordering::Relaxed) != 0
            || ring.mine() != 1
            || self.stop_begun.load(Ordering::Relaxed)
            || plugged() != own
        {
            return None;
        }
        match std::mem::replace(&mut st.private, PrivateRing::Unavailable) {
            PrivateRing::Ready(p) => Some(p),
            PrivateRing::Unavailable => None,
            PrivateRing::Untried => Private::new().ok().map(Box::new),
        }
    }

    /// Submits the thread's lone request `sqe` on its private ring `p`
    /// and waits there until it is done (a `Cancel` shutdown has it
    /// cancelled), then reports it and puts the ring back, empty.
    fn wait_private(
        &self,
        ring: &Ring,
        st: &mut RingState,
        mut p: Box<Private>,
        sqe: squeue::Entry,
    ) {
        let ud = sqe.get_user_data();
        p.push(sqe);
        let mut cancel_sent = false;
        loop {
            p.arm_wake(ring);
            if !cancel_sent && self.cancelling.load(Ordering::SeqCst) {
                cancel_sent = true;
                p.push(opcode::AsyncCancel::new(ud).build().user_data(CANCEL_TOKEN));
            }
            if let Err(e) = p.submit_and_wait() {
                debug_assert!(transient(&e), "io_uring_enter failed: {e}");
            }
            let mut done = false;
            for cqe in p.uring.completion() {
                match cqe.user_data() {
                    WAKE_TOKEN => p.wake_armed = false,
                    CANCEL_TOKEN => {}
                    _ => {
                        done = true;
                        st.cqes.push((ud, cqe.result()));
                    }
                }
            }
            if done {
                break;
            }
        }
        st.private = PrivateRing::Ready(p);
        let cqes = std::mem::take(&mut st.cqes);
        self.settle(&cqes, ring, st);
        st.cqes = cqes;
        st.cqes.clear();
    }
}

impl Private {
    fn new() -> io::Result<Private> {
        let uring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(4)?;
        let reg = RegisteredRing::new(uring.as_raw_fd());
        Ok(Private {
            uring,
            reg,
            wake_armed: false,
            wake_buf: Box::new(0),
        })
    }

    /// Submits what is pushed and waits for one completion, naming the
    /// ring by its registered index when it has one.
    fn submit_and_wait(&mut self) -> io::Result<()> {
        match &self.reg {
            Some(r) => r.submit_and_wait(self.uring.submission().len() as u32),
            None => self.uring.submit_and_wait(1).map(drop),
        }
    }

    /// Pushes one SQE (the ring has room: it holds at most the request,
    /// its cancellation and the wake-up read).
    fn push(&mut self, sqe: squeue::Entry) {
        // SAFETY: the request's buffer lives in its slot until its
        // completion is reaped here; the wake-up read's in `wake_buf`,
        // which lives as long as the ring.
        let pushed = unsafe { self.uring.submission().push(&sqe) };
        debug_assert!(pushed.is_ok(), "the private ring's queue is full");
    }

    /// Keeps a read of `ring.private_wake` armed in the private ring.
    fn arm_wake(&mut self, ring: &Ring) {
        if !self.wake_armed {
            let p: *mut u64 = &mut *self.wake_buf;
            self.push(
                opcode::Read::new(types::Fd(ring.private_wake.fd()), p.cast(), 8)
                    .build()
                    .user_data(WAKE_TOKEN),
            );
            self.wake_armed = true;
        }
    }
}

/// Counts a visit of the ring's owner (under the ring's lock, by the
/// owner: the only writer, so a plain load and store, not an atomic
/// read-modify-write on every request).
fn visit(ring: &Ring) {
    let v = ring.visits.load(Ordering::Relaxed);
    ring.visits.store(v + 1, Ordering::Relaxed);
}

/// Keeps a read of the ring's wake eventfd (and, for the service ring,
/// of the idle timer) in the ring, so that a wait in it also ends on a
/// wake-up (or on the timer).
pub(crate) fn arm_reads(ring: &Ring, st: &mut RingState, timerfd: Option<RawFd>) {
    if !st.wake_armed {
        let p: *mut u64 = &mut *st.wake_buf;
        let sqe = opcode::Read::new(types::Fd(ring.wake.fd()), p.cast(), 8)
            .build()
            .user_data(WAKE_TOKEN);
        push_sqe(st, sqe);
        st.wake_armed = true;
    }
    if let (Some(fd), false) = (timerfd, st.timer_armed) {
        let p: *mut u64 = &mut *st.timer_buf;
        let sqe = opcode::Read::new(types::Fd(fd), p.cast(), 8)
            .build()
            .user_data(TIMER_TOKEN);
        push_sqe(st, sqe);
        st.timer_armed = true;
    }
}

/// Locks a ring for its owner's work: eventfd notifications off.
fn enter_ring(ring: &Ring) -> MutexGuard<'_, RingState> {
    let mut st = ring.st.lock().unwrap_or_else(|p| p.into_inner());
    enter_again(ring, &mut st);
    st
}

/// The ring is worked on again: eventfd notifications off. A ring not
/// away has them off already (`away` and the notification change
/// together, always under the ring's lock), and so has a ring left
/// empty (see [`leave_ring`]): only a ring that was left with requests
/// on it pays the two atomic writes.
fn enter_again(ring: &Ring, st: &mut RingState) {
    if ring.away.load(Ordering::Relaxed) {
        if st.notifying {
            st.notifying = false;
            ring.away.store(false, Ordering::SeqCst);
            st.uring.completion().disable_eventfd();
        } else {
            ring.away.store(false, Ordering::Relaxed);
        }
    }
}

/// Marks the ring away and turns notifications on; returns whether
/// completions arrived meanwhile (the caller reaps them and tries again).
///
/// A ring left empty (see [`quiet`]) is marked away without them, and
/// without the fence that orders the mark before the look at its
/// completion queue: no completion can come. A blocking wait on the
/// private ring leaves its ring so after every request, where the fence
/// and the flags' atomic writes there and back cost about 30 ns per
/// request (one thread waiting for each NOP alone).
fn leave_ring(ring: &Ring, st: &mut RingState) -> bool {
    if quiet(ring, st) {
        ring.away.store(true, Ordering::Relaxed);
        return false;
    }
    st.notifying = true;
    ring.away.store(true, Ordering::SeqCst);
    st.uring.completion().enable_eventfd();
    fence(Ordering::SeqCst);
    !st.uring.completion().is_empty() || !st.uring.submission().is_empty()
}

/// Whether nothing on the ring can complete (under its lock): no request
/// in flight, none queued to submit or reaped unseen, and no wake-up
/// read armed. Only a thread holding the ring's lock puts anything on
/// it (its owner, or the service thread taking over its plug), and each
/// enters the ring first, so the ring stays so until then.
fn quiet(ring: &Ring, st: &mut RingState) -> bool {
    !st.wake_armed
        && ring.in_flight.load(Ordering::Relaxed) == 0
        && st.uring.submission().is_empty()
        && st.uring.completion().is_empty()
}

/// While requests may be in flight on the thread's retired
/// `COOP_TASKRUN` ring ([`RingState::retired_coop`]), enters the kernel
/// once (no submission, no wait): their completions' task work runs on
/// the way back, and the service thread then reaps them. Forgets the
/// ring once it is empty.
fn enter_for_retired_coop(st: &mut RingState) {
    let Some(old) = &st.retired_coop else { return };
    if old.in_flight.load(Ordering::Relaxed) == 0 {
        st.retired_coop = None;
    } else if let Err(e) = st.uring.submitter().submit_and_wait(0) {
        debug_assert!(transient(&e), "io_uring_enter failed: {e}");
    }
}

/// Pushes one SQE, submitting when the queue is full.
fn push_sqe(st: &mut RingState, sqe: squeue::Entry) {
    loop {
        // SAFETY: every SQE points to memory that outlives the request
        // (the held ops' buffers, the boxed eventfd words).
        if unsafe { st.uring.submission().push(&sqe) }.is_ok() {
            return;
        }
        submit_pending(st);
    }
}

/// Submits the pushed SQEs (one `io_uring_enter`), if any.
pub(crate) fn submit_pending(st: &mut RingState) {
    if st.uring.submission().is_empty() {
        return;
    }
    if let Err(e) = st.uring.submit() {
        // EBUSY/EAGAIN: the completion queue is full or the kernel is
        // short of memory; what was not taken stays queued, and the
        // caller reaps, then submits again.
        debug_assert!(transient(&e), "io_uring submit failed: {e}");
    }
}

/// Errors of `io_uring_enter` after which trying again is right.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN | libc::ETIME)
    )
}

/// Submits what is queued and waits for one completion, or until
/// `timeout` (ns) has passed. A failure is left to the caller's next
/// round (the queued SQEs stay queued).
pub(crate) fn enter_and_wait(st: &mut RingState, timeout: Option<u64>) {
    let r = match timeout {
        None => st.uring.submit_and_wait(1),
        Some(ns) => {
            let ts = types::Timespec::new()
                .sec(ns / 1_000_000_000)
                .nsec((ns % 1_000_000_000) as u32);
            let args = types::SubmitArgs::new().timespec(&ts);
            st.uring.submitter().submit_with_args(1, &args)
        }
    };
    if let Err(e) = r {
        debug_assert!(transient(&e), "io_uring_enter failed: {e}");
    }
}

/// Posts the completions waiting as this thread's task work (one
/// `io_uring_enter`, whose return to user space runs it), if the ring says
/// some wait (`IORING_SQ_TASKRUN`). With `EngineBuilder::coop_taskrun`
/// rings are set up with `IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG`
/// (Linux 5.19; without them where the kernel refuses): a completion's
/// task work is queued on the submitting thread without an IPI, so a
/// running thread is not interrupted for each; a sleeping one is still
/// woken, and the work runs at its next entry into the kernel (a system
/// call, or the next interrupt or timer tick) rather than at once. Without
/// it the flag is never set.
///
/// The flag is a hint, not a count: the kernel sets it when the thread's
/// list of task work was empty (not for work joining a list that holds
/// another ring's) and clears it when any thread runs task work for the
/// ring. Blocking waits enter the kernel anyway; a look that must not
/// miss a completion without blocking (`must`: a future's `poll`,
/// `is_done`) enters it whenever requests are in flight on the ring and
/// none is reaped yet: one system call per such look on a
/// `COOP_TASKRUN` ring.
fn run_task_work(ring: &Ring, st: &mut RingState, must: bool) {
    if !st.coop {
        return;
    }
    let unseen =
        must && ring.in_flight.load(Ordering::Relaxed) > 0 && st.uring.completion().is_empty();
    if unseen || st.uring.submission().taskrun() {
        if let Err(e) = st.uring.submitter().submit_and_wait(0) {
            debug_assert!(transient(&e), "io_uring_enter failed: {e}");
        }
    }
}

/// Takes every completion on `ring` into `st.cqes` (the wake-up read's
/// and cancellations' are consumed here).
pub(crate) fn reap(ring: &Ring, st: &mut RingState) {
    let mut io = 0;
    let RingState {
        uring,
        cqes,
        wake_armed,
        woken,
        timer_armed,
        timer_fired,
        ..
    } = st;
    for cqe in uring.completion() {
        match cqe.user_data() {
            WAKE_TOKEN => {
                *wake_armed = false;
                *woken = true;
            }
            TIMER_TOKEN => {
                *timer_armed = false;
                *timer_fired |= cqe.result() >= 0;
            }
            CANCEL_TOKEN => {}
            ud => {
                io += 1;
                cqes.push((ud, cqe.result()));
            }
        }
    }
    if io > 0 {
        ring.in_flight.fetch_sub(io, Ordering::SeqCst);
    }
}

/// The core, locked. Releasing it wakes and lets go of the requests the
/// core failed on its own meanwhile ([`Core::take_finished`]), after the
/// lock is released: letting go of a request's slot may run the user's
/// code (see [`Finished`]).
pub(crate) struct CoreGuard<'a>(ManuallyDrop<MutexGuard<'a, Core>>);

impl std::ops::Deref for CoreGuard<'_> {
    type Target = Core;
    #[inline]
    fn deref(&self) -> &Core {
        &self.0
    }
}

impl std::ops::DerefMut for CoreGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Core {
        &mut self.0
    }
}

impl Drop for CoreGuard<'_> {
    fn drop(&mut self) {
        let finished = if self.0.finished_is_empty() {
            Vec::new()
        } else {
            self.0.take_finished()
        };
        // SAFETY: the guard is dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.0) };
        for f in finished {
            f.wake();
        }
    }
}

/// Keeps a finished request's waiter to wake, unless it is the owner of
/// `ring` itself (it is awake: it is the one reaping), and its hold on
/// its slot to let go of with the wakes (under the core's lock a
/// request's slot is not let go of: that may run the user's code, see
/// [`Finished`]).
/// A flow's bit in a ring's [`Ring::plug_flows`].
fn flow_bit(flow: FlowId) -> u64 {
    1 << (flow.0 % 64)
}

fn push_finished(ws: &mut Vec<Waiter>, released: &mut Vec<Release>, f: Finished, ring: &Ring) {
    let (w, hold) = f.into_parts();
    released.extend(hold);
    match &w {
        Waiter::None => {}
        Waiter::Event(e) if Arc::ptr_eq(e, &ring.wake) => {}
        _ => ws.push(w),
    }
}

/// Wakes every waiter and lets go of the finished requests' slots
/// (keeping the vectors' memory for the next ones).
fn wake_all(shared: &Shared, st: &mut RingState) {
    if st.wakes.is_empty() && st.released.is_empty() {
        return;
    }
    if !st.wakes.is_empty() {
        let n = st.wakes.len() as u64;
        shared.cross_wakes.fetch_add(n, Ordering::Relaxed);
    }
    let _out = CallingOut::new();
    for w in st.wakes.drain(..) {
        w.wake();
    }
    st.released.clear();
}

thread_local! {
    /// This thread runs others' code (wakers, what a finished request
    /// lets go of) while it holds one of its rings' locks.
    static CALLING_OUT: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as running others' code under a ring's lock until
/// dropped (also when that code panics), so that
/// [`crate::submit_plugged`], called from it, does not wait for the lock
/// its own thread holds.
struct CallingOut(bool);

impl CallingOut {
    fn new() -> CallingOut {
        CallingOut(CALLING_OUT.with(|c| c.replace(true)))
    }
}

impl Drop for CallingOut {
    fn drop(&mut self) {
        CALLING_OUT.with(|c| c.set(self.0));
    }
}

impl Driver for Shared {
    fn block(&self, waited: Option<&Hold>, slot: Option<SlotId>, register: Register<'_>) {
        // Only a thread that already has a ring sleeps in it (making one
        // here could take locks the completing thread holds).
        match self
            .local_ring(false)
            .filter(|_| self.mode == SubmitMode::Local)
        {
            Some(r) => {
                // Submitted by this thread, on this ring: its slot.
                let own = waited.is_some_and(|h| Arc::ptr_eq(&h.0, &r.mine));
                self.block_in_ring(r, slot.filter(|_| own), register)
            }
            None => {
                if !register(Waiter::Thread(std::thread::current())) {
                    std::thread::park();
                }
            }
        }
    }

    fn poll_work(&self, linger: bool) {
        if let Some(ring) = self.local_ring(false) {
            // A future polled on a ring whose event loop submits the plug
            // itself (`defer`) leaves it: its result comes through the
            // loop's `reap`, which wakes the future's waker.
            if linger || !ring.defer.load(Ordering::Relaxed) {
                self.look(ring, linger);
            }
        }
    }

    fn taken(&self) {
        self.relay.help(RELAY_FANOUT);
    }

    fn finish_wait(&self) {
        let Some(ring) = self
            .local_ring(false)
            .filter(|_| self.mode == SubmitMode::Local)
        else {
            return;
        };
        let mine = ring.mine() > 0;
        // Already left, or lingering for requests still to come back for:
        // nothing to do.
        if ring.away.load(Ordering::SeqCst) || (mine && ring.lingering.load(Ordering::SeqCst)) {
            return;
        }
        let mut st = self.enter_own(ring);
        self.work(ring, &mut st);
        self.linger_or_leave(ring, &mut st, true);
    }
}

/// A flow's handle on the engine, held by its requests' `Pending`s: each
/// request clones this (one per flow) rather than the engine's
/// [`Shared`], so the reference count every request updates belongs to
/// its flow, not to one cache line that every submitting thread writes
/// (the line that also holds the core lock's word).
pub(crate) struct FlowDriver(pub(crate) Arc<Shared>);

impl Driver for FlowDriver {
    fn block(&self, waited: Option<&Hold>, slot: Option<SlotId>, register: Register<'_>) {
        self.0.block(waited, slot, register)
    }
    fn poll_work(&self, linger: bool) {
        self.0.poll_work(linger)
    }
    fn taken(&self) {
        self.0.taken()
    }
    fn finish_wait(&self) {
        self.0.finish_wait()
    }
}

/// Tests only: pauses the delivery of an exiting thread's results for
/// one engine (in [`Shared::deliver`]), so a test can look at what the
/// rest of the engine does meanwhile. Not compiled outside tests.
#[cfg(test)]
pub(crate) mod delivery_gate {
    use std::sync::{Arc, Condvar, Mutex};

    /// A closed gate: a delivery reaching it says so and waits until it
    /// opens.
    #[derive(Default)]
    pub(crate) struct Gate {
        /// (a delivery reached it, it is open)
        state: Mutex<(bool, bool)>,
        changed: Condvar,
    }

    /// The closed gates, by engine id.
    static GATES: Mutex<Vec<(u64, Arc<Gate>)>> = Mutex::new(Vec::new());

    /// Closes a gate for engine `id`'s exiting threads' deliveries.
    pub(crate) fn close(id: u64) -> Arc<Gate> {
        let g = Arc::new(Gate::default());
        GATES.lock().unwrap().push((id, g.clone()));
        g
    }

    /// Called by a delivery of engine `id`: waits while its gate is
    /// closed.
    pub(super) fn pause(id: u64) {
        let g = GATES
            .lock()
            .unwrap()
            .iter()
            .find(|(e, _)| *e == id)
            .map(|(_, g)| g.clone());
        if let Some(g) = g {
            let mut st = g.state.lock().unwrap();
            st.0 = true;
            g.changed.notify_all();
            while !st.1 {
                st = g.changed.wait(st).unwrap();
            }
        }
    }

    impl Gate {
        /// Waits until a delivery reaches the gate (true) or `gone` says
        /// none will (false).
        pub(crate) fn reached(&self, gone: impl Fn() -> bool) -> bool {
            let mut st = self.state.lock().unwrap();
            while !st.0 {
                if gone() {
                    return false;
                }
                let t = std::time::Duration::from_millis(1);
                st = self.changed.wait_timeout(st, t).unwrap().0;
            }
            true
        }

        /// Opens the gate (and removes it: later deliveries pass).
        pub(crate) fn open(self: &Arc<Self>) {
            GATES.lock().unwrap().retain(|(_, g)| !Arc::ptr_eq(g, self));
            self.state.lock().unwrap().1 = true;
            self.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring left with nothing that can complete on it is marked away
    /// with eventfd notification off (nobody needs telling); a ring left
    /// with a request in flight, or with a wake-up read armed, turns it
    /// on (the service thread reaps it); entering the ring again turns
    /// it off.
    #[test]
    fn a_ring_left_empty_needs_no_notification() {
        let engine = crate::Engine::nop().open().unwrap();
        let shared = &engine.shared;
        let ring = shared
            .new_ring(Arc::new(EventFd::new().unwrap()), 0, false)
            .unwrap();
        let mut st = ring.st.lock().unwrap();
        let notifying = |st: &mut RingState| !st.uring.completion().eventfd_disabled();
        assert!(!leave_ring(&ring, &mut st), "nothing can arrive");
        assert!(ring.away.load(Ordering::SeqCst));
        assert!(!notifying(&mut st), "an empty ring left notifying");
        enter_again(&ring, &mut st);
        assert!(!ring.away.load(Ordering::SeqCst));
        // A request in flight, its completion not in yet (a read of an
        // eventfd nobody has written): only the in-flight count tells.
        let ev = EventFd::new().unwrap();
        read_eventfd(shared, &ring, &mut st, &ev);
        assert!(
            st.uring.completion().is_empty(),
            "the read is still in flight"
        );
        assert!(!leave_ring(&ring, &mut st), "nothing completed yet");
        assert!(ring.away.load(Ordering::SeqCst));
        assert!(notifying(&mut st), "a ring left with a request in flight");
        enter_again(&ring, &mut st);
        assert!(!ring.away.load(Ordering::SeqCst));
        assert!(!notifying(&mut st), "entered again");
        ev.signal();
        st.uring.submitter().submit_and_wait(1).unwrap();
        reap(&ring, &mut st);
        assert_eq!(st.cqes, [(1, 8)]);
        st.cqes.clear();
        // A wake-up read armed.
        arm_reads(&ring, &mut st, None);
        submit_pending(&mut st);
        leave_ring(&ring, &mut st);
        assert!(notifying(&mut st), "a ring left with a wake-up read armed");
        enter_again(&ring, &mut st);
        assert!(!notifying(&mut st), "entered again");
        ring.wake.signal();
        st.uring.submitter().submit_and_wait(1).unwrap();
        reap(&ring, &mut st);
        assert!(st.woken && st.cqes.is_empty());
        drop(st);
        drop(ring);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// `CoopTaskrun::Auto` sets a thread's ring up again the other way
    /// with a request (a read of a pipe) in flight on it: the thread's
    /// next request goes on the new ring, which has the other setup; the
    /// old ring takes no new requests, the request on it completes there
    /// and its wait, on the new ring, ends; the service thread then
    /// forgets the old ring (memory stays flat however often rings are
    /// set up again).
    #[test]
    fn a_ring_set_up_again_finishes_what_the_old_one_carries() {
        let (engine, shared, flow) = nop_engine();
        let (pipe, mut w) = pipe();
        let p = flow.read_file_async(&pipe, 0, vec![0u8; 8]);
        assert!(!p.is_done(), "submitted, not done");
        let old_id = shared.table_ring(false).unwrap().id;
        let old = shared
            .rings
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.id == old_id)
            .cloned()
            .unwrap();
        let old_coop = old.st.lock().unwrap().coop;
        assert!(old.st.lock().unwrap().cpu_wait.is_some(), "Auto samples");
        old.renew.store(true, Ordering::Relaxed);
        assert!(flow.nop_async(0, 1).wait().0.is_ok());
        let new = shared.table_ring(false).unwrap();
        if new.id == old_id {
            eprintln!("skipped: the kernel refuses COOP_TASKRUN (Linux 5.19)");
            return;
        }
        assert_eq!(new.st.lock().unwrap().coop, !old_coop);
        let want = if old_coop { [0, 1] } else { [1, 0] };
        assert_eq!(engine.stats().unwrap().coop_switches, want);
        assert!(
            new.st.lock().unwrap().cpu_wait.is_some(),
            "the sampler moved"
        );
        assert!(old.dead.load(Ordering::SeqCst));
        assert_eq!(old.in_flight.load(Ordering::SeqCst), 1, "the pipe's read");
        std::io::Write::write_all(&mut w, &[7; 8]).unwrap();
        let (res, buf) = p.wait();
        assert_eq!((res.ok(), buf), (Some(8), vec![7u8; 8]));
        let forgotten = || !shared.rings.lock().unwrap().iter().any(|r| r.id == old_id);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !forgotten() && std::time::Instant::now() < until {
            shared.notify.signal();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(forgotten(), "the old ring is still in the engine's list");
        drop(flow);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// Pushes and submits a read of `ev` on `ring` (its buffer leaked: a
    /// failing assertion must not free it under the read).
    fn read_eventfd(shared: &Shared, ring: &Ring, st: &mut RingState, ev: &EventFd) {
        let p: *mut u64 = Box::leak(Box::new(0u64));
        st.sqes.push(
            opcode::Read::new(types::Fd(ev.fd()), p.cast(), 8)
                .build()
                .user_data(1),
        );
        shared.push_sqes(ring, st);
        submit_pending(st);
    }

    /// `COOP_TASKRUN`'s `IORING_SQ_TASKRUN` flag is a hint: with two
    /// rings of one thread, the second completion's task work joins a
    /// list the first made non-empty and sets no flag on its ring. A look
    /// that must not miss a completion (a future's `poll`, `is_done`)
    /// still finds it: it enters the kernel while requests are in flight.
    #[test]
    fn a_look_that_must_not_miss_finds_a_completion_the_flag_does_not_show() {
        let engines = [(); 2].map(|_| {
            crate::Engine::nop()
                .coop_taskrun(CoopTaskrun::On)
                .open()
                .unwrap()
        });
        let rings = engines.each_ref().map(|e| {
            e.shared
                .new_ring(Arc::new(EventFd::new().unwrap()), 0, true)
                .unwrap()
        });
        let evs = [(); 2].map(|_| Arc::new(EventFd::new().unwrap()));
        let mut sts = rings.each_ref().map(|r| r.st.lock().unwrap());
        if !sts[0].coop {
            eprintln!("skipped: the kernel refuses COOP_TASKRUN (Linux 5.19)");
            return;
        }
        for i in 0..2 {
            read_eventfd(&engines[i].shared, &rings[i], &mut sts[i], &evs[i]);
        }
        // Both written by another thread while this one makes no system
        // call (whose return would run the task work).
        let writers = evs.clone();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let w = std::thread::spawn(move || {
            writers.iter().for_each(|e| e.signal());
            d.store(true, Ordering::Release);
        });
        while !done.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        run_task_work(&rings[1], &mut sts[1], true);
        engines[1].shared.work(&rings[1], &mut sts[1]);
        assert_eq!(rings[1].in_flight.load(Ordering::SeqCst), 0, "missed");
        w.join().unwrap();
        engines[0].shared.work(&rings[0], &mut sts[0]);
        drop(sts);
        drop(rings);
        for e in engines {
            e.shutdown(crate::ShutdownMode::Drain).unwrap();
        }
    }

    /// A completion queued as the owner's task work without an IPI
    /// (`COOP_TASKRUN`) is posted by the owner's work: `work` sees the
    /// ring's `TASKRUN` flag and enters the kernel, where reading the
    /// completion queue alone would miss it until the thread's next
    /// system call or interrupt.
    #[test]
    fn a_completion_waiting_as_task_work_is_reaped_by_the_owners_work() {
        let engine = crate::Engine::nop()
            .coop_taskrun(CoopTaskrun::On)
            .open()
            .unwrap();
        let shared = &engine.shared;
        let ring = shared
            .new_ring(Arc::new(EventFd::new().unwrap()), 0, true)
            .unwrap();
        let mut st = ring.st.lock().unwrap();
        let ev = Arc::new(EventFd::new().unwrap());
        read_eventfd(shared, &ring, &mut st, &ev);
        // The eventfd is written by another thread while this one makes
        // no system call (whose return would run the task work).
        let go = Arc::new(AtomicBool::new(false));
        let (writer, start) = (ev.clone(), go.clone());
        let w = std::thread::spawn(move || {
            while !start.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            writer.signal()
        });
        go.store(true, Ordering::Release);
        let mut flagged = false;
        for _ in 0..100_000_000u64 {
            if st.uring.submission().taskrun() || !st.uring.completion().is_empty() {
                flagged = st.uring.submission().taskrun();
                break;
            }
            std::hint::spin_loop();
        }
        if !flagged {
            eprintln!("skipped: the completion was posted at once (no COOP_TASKRUN, Linux 5.19)");
        }
        shared.work(&ring, &mut st);
        assert_eq!(ring.in_flight.load(Ordering::SeqCst), 0, "not reaped");
        w.join().unwrap();
        drop(st);
        drop(ring);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// A private ring is registered with its thread and entered by its
    /// index; dropping it on its thread unregisters it, and dropping it
    /// on another thread (its owner gone) leaves that thread's table
    /// alone.
    #[test]
    fn a_private_ring_is_entered_by_its_registered_index() {
        let registered = || REGISTERED.with(|r| r.borrow().len());
        let before = registered();
        let Ok(mut p) = Private::new() else {
            eprintln!("skipped: no private ring (DEFER_TASKRUN needs Linux 6.1)");
            return;
        };
        if p.reg.is_none() {
            eprintln!("skipped: the kernel refused to register the ring (Linux 5.18)");
            return;
        }
        assert_eq!(registered(), before + 1);
        for ud in 1..=3 {
            p.push(opcode::Nop::new().build().user_data(ud));
            p.submit_and_wait()
                .expect("entered by its registered index");
            let got: Vec<u64> = p.uring.completion().map(|c| c.user_data()).collect();
            assert_eq!(got, vec![ud]);
        }
        drop(p);
        assert_eq!(registered(), before, "unregistered by its owner");
        let p = Private::new().unwrap();
        assert_eq!(registered(), before + 1);
        std::thread::spawn(move || drop(p)).join().unwrap();
        assert_eq!(registered(), before + 1, "only its owner unregisters it");
    }

    // Setting rings up again (`Shared::renew_ring`) under load, shutdown
    // and thread exit.

    /// Sets this thread's ring for `s` to be set up again at its next use.
    fn ask_renew(s: &Shared) {
        if let Some(r) = s.table_ring(false) {
            r.renew.store(true, Ordering::Relaxed);
        }
    }

    /// A NOP engine (its choice of ring setup the default), its shared
    /// state, and one flow.
    fn nop_engine() -> (crate::Engine, Arc<Shared>, crate::Flow) {
        let engine = crate::Engine::nop().open().unwrap();
        let shared = engine.shared.clone();
        let flow = engine.flow(crate::FlowOptions::default()).unwrap();
        (engine, shared, flow)
    }

    /// A pipe as a `FileTarget` and its write end.
    fn pipe() -> (crate::FileTarget, std::fs::File) {
        use std::os::fd::FromRawFd;
        let mut fds = [0i32; 2];
        // SAFETY: pipe writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors this test owns.
        let (r, w) = unsafe {
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        (crate::FileTarget::new(r, 0), w)
    }

    /// Runs `f` on a thread; panics if it does not end within `secs`.
    fn within<T: Send + 'static>(
        secs: u64,
        what: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
            Ok(v) => {
                h.join().unwrap();
                v
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                h.join().unwrap();
                unreachable!()
            }
            Err(_) => panic!("{what}: still running after {secs} s (lost wake-up?)"),
        }
    }

    /// Several threads submit to shared flows (so that each thread's
    /// flush dispatches other threads' requests onto its ring), wait with
    /// blocking waits, futures and `is_done`, and have their rings set up
    /// again every few requests: every request completes, nothing hangs,
    /// and once the threads are gone the engine forgets every ring.
    #[test]
    fn renewals_under_load_lose_nothing() {
        {
            let engine = Arc::new(
                crate::Engine::nop()
                    .coop_taskrun(CoopTaskrun::Auto)
                    .open()
                    .unwrap(),
            );
            let shared = engine.shared.clone();
            let flows: Arc<Vec<crate::Flow>> = Arc::new(
                (0..4)
                    .map(|_| engine.flow(crate::FlowOptions::default()).unwrap())
                    .collect(),
            );
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    let (flows, shared) = (flows.clone(), shared.clone());
                    std::thread::spawn(move || {
                        let mut renewals = 0;
                        let mut max_retired = 0;
                        for i in 0..600u64 {
                            let n = 1 + ((i * 7 + t) % 40) as usize;
                            let mut ps: Vec<_> = (0..n)
                                .map(|k| {
                                    flows[((t + i) as usize + k) % 4]
                                        .nop_async(i * 64 + k as u64, 8)
                                })
                                .collect();
                            if i % 3 == t % 3 {
                                ask_renew(&shared);
                                renewals += 1;
                            }
                            match i % 4 {
                                0 => {
                                    for p in ps.drain(..) {
                                        assert!(p.wait().0.is_ok());
                                    }
                                }
                                1 => {
                                    for p in ps.drain(..) {
                                        assert!(crate::block_on(p).0.is_ok());
                                    }
                                }
                                2 => {
                                    for (k, p) in ps.drain(..).enumerate() {
                                        if k == 3 {
                                            ask_renew(&shared);
                                        }
                                        let mut spins = 0u64;
                                        while !p.is_done() {
                                            spins += 1;
                                            assert!(spins < 2_000_000_000, "is_done never");
                                            std::hint::spin_loop();
                                        }
                                        assert!(p.wait().0.is_ok());
                                    }
                                }
                                _ => {
                                    // Blocking reads between, on a flow.
                                    let r = flows[t as usize].nop_async(i, 8).wait();
                                    assert!(r.0.is_ok());
                                    for p in ps.drain(..).rev() {
                                        assert!(p.wait().0.is_ok());
                                    }
                                }
                            }
                            let retired = LOCAL.with(|l| l.borrow().1.len());
                            max_retired = max_retired.max(retired);
                        }
                        (renewals, max_retired)
                    })
                })
                .collect();
            let out = within(120, "threads", move || {
                threads
                    .into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>()
            });
            eprintln!("renewals asked, max retired per thread: {out:?}");
            let s = engine.stats().unwrap();
            eprintln!("coop_switches {:?}", s.coop_switches);
            if s.coop_switches == [0, 0] {
                eprintln!("no ring set up again: the kernel refuses COOP_TASKRUN (Linux 5.19)");
            } else {
                assert!(s.coop_switches[0] + s.coop_switches[1] > 100);
            }
            for &(_, m) in &out {
                assert!(m <= 4, "retired rings pile up: {m}");
            }
            let forgotten = || shared.rings.lock().unwrap().is_empty();
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !forgotten() && std::time::Instant::now() < until {
                shared.notify.signal();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert!(
                forgotten(),
                "{} rings left",
                shared.rings.lock().unwrap().len()
            );
            drop(flows);
            let engine = Arc::try_unwrap(engine).ok().unwrap();
            engine.shutdown(crate::ShutdownMode::Drain).unwrap();
        }
    }

    /// Requests in flight on retired rings (pipe reads) complete after
    /// their thread set its ring up again several times and exited.
    #[test]
    fn requests_on_retired_rings_outlive_their_thread() {
        let engine = crate::Engine::nop().open().unwrap();
        let shared = engine.shared.clone();
        let flow = Arc::new(engine.flow(crate::FlowOptions::default()).unwrap());
        let pipes: Vec<_> = (0..3).map(|_| pipe()).collect();
        let (targets, mut writers): (Vec<_>, Vec<_>) = pipes.into_iter().unzip();
        let targets = Arc::new(targets);
        let (f2, s2, t2) = (flow.clone(), shared.clone(), targets.clone());
        let t0 = std::time::Instant::now();
        let pend = within(30, "exiting thread", move || {
            let mut ps = Vec::new();
            let mut ids = Vec::new();
            for t in t2.iter() {
                ps.push(f2.read_file_async(t, 0, vec![0u8; 8]));
                // Submitted (the wait flushes the plug), then renewed.
                assert!(f2.nop_async(0, 1).wait().0.is_ok());
                ids.push(s2.table_ring(false).unwrap().id);
                if std::env::var("BFQ_TEST_NO_RENEW").is_err() {
                    ask_renew(&s2);
                }
                assert!(f2.nop_async(0, 1).wait().0.is_ok());
            }
            eprintln!(
                "ring ids {ids:?}, retired {}",
                LOCAL.with(|l| l.borrow().1.len())
            );
            ps
        });
        eprintln!("the thread took {:?} to exit", t0.elapsed());
        for w in &mut writers {
            std::io::Write::write_all(w, &[5; 8]).unwrap();
        }
        for p in pend {
            let (r, b) = within(10, "pipe read", move || p.wait());
            eprintln!("result {r:?}");
            let _ = b;
        }
        drop(flow);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// A shutdown (Cancel) while threads keep renewing their rings with
    /// pipe reads in flight: it ends, and every request ends.
    #[test]
    fn cancel_shutdown_racing_renewals_ends() {
        for round in 0..20 {
            let engine = crate::Engine::nop().open().unwrap();
            let shared = engine.shared.clone();
            let flow = Arc::new(engine.flow(crate::FlowOptions::default()).unwrap());
            let stop = Arc::new(AtomicBool::new(false));
            let threads: Vec<_> = (0..3)
                .map(|_| {
                    let (flow, shared, stop) = (flow.clone(), shared.clone(), stop.clone());
                    std::thread::spawn(move || {
                        let (t, _w) = pipe();
                        let mut held = Vec::new();
                        let mut i = 0u64;
                        while !stop.load(Ordering::Relaxed) || i < 50 {
                            held.push(flow.read_file_async(&t, 0, vec![0u8; 8]));
                            let _ = flow.nop_async(i, 8).wait();
                            ask_renew(&shared);
                            let _ = flow.nop_async(i, 8).wait();
                            i += 1;
                            if i > 5000 {
                                break;
                            }
                        }
                        for p in held {
                            let _ = p.wait();
                        }
                    })
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(5 + round));
            within(30, "cancel shutdown", move || {
                engine.shutdown(crate::ShutdownMode::Cancel).unwrap();
            });
            stop.store(true, Ordering::Relaxed);
            within(30, "threads after shutdown", move || {
                for h in threads {
                    h.join().unwrap();
                }
            });
        }
    }

    /// Pipe reads in flight on rings set up again and again (the writer
    /// feeds them slowly), waited for by blocking waits, futures and
    /// `is_done` on the thread's later rings: all complete.
    #[test]
    fn pipe_reads_across_renewals_complete() {
        let engine = crate::Engine::nop().open().unwrap();
        let shared = engine.shared.clone();
        let flows: Arc<Vec<crate::Flow>> = Arc::new(
            (0..3)
                .map(|_| engine.flow(crate::FlowOptions::default()).unwrap())
                .collect(),
        );
        let mut writers = Vec::new();
        let threads: Vec<_> = (0..3u64)
            .map(|t| {
                let (target, w) = pipe();
                writers.push(w);
                let (flows, shared) = (flows.clone(), shared.clone());
                std::thread::spawn(move || {
                    for i in 0..200u64 {
                        let ps: Vec<_> = (0..4)
                            .map(|_| flows[t as usize].read_file_async(&target, 0, vec![0u8; 8]))
                            .collect();
                        let _ = flows[((t + i) % 3) as usize].nop_async(i, 8).wait();
                        ask_renew(&shared);
                        let _ = flows[((t + i + 1) % 3) as usize].nop_async(i, 8).wait();
                        for (k, p) in ps.into_iter().enumerate() {
                            let r = match (i + k as u64) % 3 {
                                0 => p.wait(),
                                1 => crate::block_on(p),
                                _ => {
                                    while !p.is_done() {
                                        std::hint::spin_loop();
                                    }
                                    p.wait()
                                }
                            };
                            assert_eq!(r.0.ok(), Some(8));
                            if k == 1 {
                                ask_renew(&shared);
                            }
                        }
                    }
                })
            })
            .collect();
        let feeder = std::thread::spawn(move || {
            for _ in 0..800 {
                for w in &mut writers {
                    std::io::Write::write_all(w, &[1; 8]).unwrap();
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        within(120, "pipe threads", move || {
            for h in threads {
                h.join().unwrap();
            }
        });
        feeder.join().unwrap();
        let s = engine.stats().unwrap();
        eprintln!("coop_switches {:?}", s.coop_switches);
        drop(flows);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// A thread's lone blocking waits use its private ring, registered
    /// with the thread; setting its ring up again drops the private ring
    /// on the thread, which unregisters it: the thread's table of
    /// registered rings (16 entries) does not fill up, and later private
    /// waits still name their ring by its index.
    #[test]
    fn renewals_release_registered_private_rings() {
        let (engine, shared, flow) = nop_engine();
        let mut regs = Vec::new();
        for _ in 0..40 {
            assert!(flow.nop_async(0, 8).wait().0.is_ok());
            regs.push(REGISTERED.with(|r| r.borrow().len()));
            ask_renew(&shared);
        }
        let s = engine.stats().unwrap();
        eprintln!(
            "registered per round {regs:?}, private waits {}, switches {:?}",
            s.private_waits, s.coop_switches
        );
        if s.private_waits == 0 {
            eprintln!("skipped: no private ring here");
            return;
        }
        assert!(
            regs.iter().all(|&n| n <= 1),
            "a private ring left registered: {regs:?}"
        );
        drop(flow);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// `EngineStats::core_waits`: a thread that finds the core's lock
    /// held counts itself, and again when it gives up spinning and sleeps;
    /// `core_wait_ns` times its wait, which lasted at least its spin.
    #[test]
    fn a_thread_that_finds_the_core_held_is_counted_once_spinning_and_once_asleep() {
        let (engine, shared, flow) = nop_engine();
        let held = shared.core();
        let waiter = {
            let shared = shared.clone();
            std::thread::spawn(move || drop(shared.core()))
        };
        // The waiter counts itself before spinning and again before it
        // sleeps; the core stays held until it has done both (or for
        // 10 s at most, and then the count is missing).
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while shared.core_waits[1].load(Ordering::Relaxed) == 0
            && std::time::Instant::now() < give_up
        {
            std::thread::yield_now();
        }
        drop(held);
        waiter.join().unwrap();
        let stats = engine.stats().unwrap();
        let [found, slept] = stats.core_waits;
        assert!(
            found >= 1 && slept >= 1 && slept <= found,
            "{found} {slept}"
        );
        let [total, longest] = stats.core_wait_ns;
        assert!(
            longest >= CORE_SPIN_NS && total >= longest,
            "{total} {longest}"
        );
        drop(flow);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// A panicking waker run under a thread's ring lock poisons it; every
    /// path takes a poisoned ring's lock anyway, and so does setting the
    /// ring up again: each time it is asked for, the thread gets a new
    /// ring.
    #[test]
    fn a_poisoned_ring_is_set_up_again() {
        let (engine, shared, flow) = nop_engine();
        assert!(flow.nop_async(0, 8).wait().0.is_ok());
        let ring = shared.table_ring(false).unwrap();
        let first = ring.id;
        // Poison the ring's lock as a panicking waker under it would.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = ring.st.lock().unwrap();
            panic!("a waker panics");
        }));
        assert!(ring.st.is_poisoned());
        for _ in 0..10 {
            ask_renew(&shared);
            assert!(flow.nop_async(0, 8).wait().0.is_ok());
        }
        let s = engine.stats().unwrap();
        if s.coop_switches == [0, 0] && !shared.table_ring(false).unwrap().st.is_poisoned() {
            eprintln!("skipped: no COOP_TASKRUN (Linux 5.19)");
        } else {
            assert_eq!(s.coop_switches, [5, 5]);
            assert_ne!(shared.table_ring(false).unwrap().id, first);
        }
        drop(flow);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// A read left in flight on the thread's retired `COOP_TASKRUN` ring
    /// (its ring set up again without) completes while the thread makes
    /// no system call: its task work waits for the thread. `is_done`,
    /// which must not miss a result, then enters the kernel once, which
    /// posts the completion (the service thread reaps it); without that
    /// entry it would wait for the thread's next tick.
    #[test]
    fn is_done_posts_a_completion_waiting_on_a_retired_coop_ring() {
        let (engine, shared, flow) = nop_engine();
        assert!(flow.nop_async(0, 8).wait().0.is_ok());
        ask_renew(&shared);
        assert!(flow.nop_async(0, 8).wait().0.is_ok());
        let coop_id = shared.table_ring(false).unwrap().id;
        if !shared.table_ring(false).unwrap().st.lock().unwrap().coop {
            eprintln!("skipped: no COOP_TASKRUN (Linux 5.19)");
            return;
        }
        let (t, mut w) = pipe();
        let p = flow.read_file_async(&t, 0, vec![0u8; 8]);
        assert!(flow.nop_async(0, 8).wait().0.is_ok(), "the read submitted");
        let old = shared
            .rings
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.id == coop_id)
            .cloned()
            .unwrap();
        ask_renew(&shared);
        assert!(flow.nop_async(0, 8).wait().0.is_ok());
        assert!(old.dead.load(Ordering::SeqCst));
        assert_eq!(old.in_flight.load(Ordering::SeqCst), 1, "the pipe's read");
        // Written by another thread while this one makes no system call.
        let go = Arc::new(AtomicBool::new(false));
        let start = go.clone();
        let writer = std::thread::spawn(move || {
            while !start.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            std::io::Write::write_all(&mut w, &[1; 8]).unwrap();
            w
        });
        go.store(true, Ordering::Release);
        let waiting = || old.st.lock().unwrap().uring.submission().taskrun();
        let mut flagged = false;
        for _ in 0..100_000_000u64 {
            if waiting() {
                flagged = true;
                break;
            }
            std::hint::spin_loop();
        }
        if !flagged {
            eprintln!("skipped: the completion was posted at once");
        } else {
            let _ = p.is_done();
            let posted = {
                let mut st = old.st.lock().unwrap();
                !st.uring.completion().is_empty() || old.in_flight.load(Ordering::SeqCst) == 0
            };
            assert!(posted, "is_done left the completion waiting for the thread");
        }
        let _w = writer.join().unwrap();
        assert_eq!(p.wait().0.ok(), Some(8));
        drop(flow);
        engine.shutdown(crate::ShutdownMode::Drain).unwrap();
    }

    /// Polls `p` once (submitting it) with a waker that does nothing.
    fn poll_once<B: Send + 'static>(p: &mut crate::Pending<B>) -> bool {
        use std::future::Future;
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::Pin::new(p).poll(&mut cx).is_ready()
    }

    /// A bound ring keeps its owner's work: after a future's poll (which
    /// never lingers on an unbound ring) and with requests only plugged,
    /// the ring lingers instead of going away; it was set up with
    /// `COOP_TASKRUN` (`CoopTaskrun::Auto`), and is not set up again while
    /// bound.
    #[test]
    fn a_bound_ring_lingers_keeps_coop_taskrun_and_is_not_set_up_again() {
        let (_engine, s, flow) = nop_engine();
        let (target, mut w) = pipe();
        let (ring, _fd) = s.bind_ring().unwrap();
        assert!(ring.st.lock().unwrap().coop, "bound with COOP_TASKRUN");
        let mut read = flow.read_file_async(&target, 0, vec![0u8; 1]);
        assert!(ring.lingering.load(Ordering::SeqCst), "plugged: lingers");
        assert!(!poll_once(&mut read));
        assert!(ring.lingering.load(Ordering::SeqCst), "polled: lingers");
        assert!(!ring.away.load(Ordering::SeqCst));
        ask_renew(&s);
        let id = s.local_ring(false).unwrap().id;
        assert_eq!(id, ring.id, "not set up again while bound");
        std::io::Write::write_all(&mut w, b"x").unwrap();
        while !read.is_done() {
            s.look(&ring, true);
        }
        s.unbind_ring(&ring);
        // A renewal waits while the service thread holds the ring's lock.
        let renewed = (0..100_000).any(|_| {
            std::thread::yield_now();
            s.local_ring(false).unwrap().id != ring.id
        });
        assert!(renewed, "set up again once unbound");
    }

    /// A bound ring that defers its futures' submissions keeps a polled
    /// future's request in the plug (the poll does not flush it) until
    /// [`crate::submit_plugged`]; unbound, it no longer defers. A flush
    /// by the service thread meanwhile could only be a take-over
    /// (counted), which the assertions allow.
    #[test]
    fn a_deferring_ring_submits_a_polled_request_only_when_told() {
        let mut d = Deferred::new();
        let (s, ring) = (d.s.clone(), d.ring.clone());
        let taken = || s.bound_takeovers.load(Ordering::SeqCst);
        let (flushes, takeovers) = (ring.flushes.load(Ordering::SeqCst), taken());
        assert!(!poll_once(&mut d.read));
        let polled = ring.flushes.load(Ordering::SeqCst);
        let untaken = taken() == takeovers;
        crate::submit_plugged();
        let told = ring.flushes.load(Ordering::SeqCst);
        s.unbind_ring(&ring);
        let defers = ring.defer.load(Ordering::Relaxed);
        d.finish();
        assert!(polled == flushes || !untaken, "the poll flushed the plug");
        assert!(told > flushes, "submitted when told");
        assert!(!defers, "unbound: no longer defers");
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct CountsWakes(AtomicU64);

    impl std::task::Wake for CountsWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// `ThreadRing::poll_plugged`: pending with the plug empty, its waker
    /// woken when a request enters the plug of a deferring ring, ready
    /// while requests wait there, pending again once they are submitted.
    #[test]
    fn a_deferring_ring_wakes_its_loop_when_a_request_is_plugged() {
        let (_engine, s, flow) = nop_engine();
        let (target, mut w) = pipe();
        let (ring, _fd) = s.bind_ring().unwrap();
        ring.defer.store(true, Ordering::Relaxed);
        let count = Arc::new(CountsWakes::default());
        let waker = std::task::Waker::from(count.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let empty = s.poll_plugged(&ring, &mut cx).is_pending();
        let mut read = flow.read_file_async(&target, 0, vec![0u8; 1]);
        let woken = count.0.load(Ordering::SeqCst);
        let ready = s.poll_plugged(&ring, &mut cx).is_ready();
        assert!(!poll_once(&mut read));
        crate::submit_plugged();
        let after = s.poll_plugged(&ring, &mut cx).is_pending();
        std::io::Write::write_all(&mut w, b"x").unwrap();
        while !read.is_done() {
            s.look(&ring, true);
        }
        assert!(empty, "pending with nothing plugged");
        assert_eq!(woken, 1, "woken by the request plugged");
        assert!(ready, "ready while it waits in the plug");
        assert!(after, "pending once submitted");
    }

    /// Runs `f` on a thread of its own and fails if it has not returned
    /// within a minute (a hang, not a slow machine).
    fn no_hang(f: impl FnOnce() + Send + 'static) {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            f();
            let _ = tx.send(());
        });
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(()) => t.join().unwrap(),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => t.join().unwrap(),
            Err(e) => panic!("hung: {e}"),
        }
    }

    /// A waker that submits the thread's plug when woken (as an event
    /// loop's code run from a waker might).
    struct SubmitsWhenWoken;

    impl std::task::Wake for SubmitsWhenWoken {
        fn wake(self: Arc<Self>) {
            crate::submit_plugged();
        }
    }

    /// What the deferral tests start from: a NOP engine whose thread's
    /// ring is bound and defers its futures' submissions, and a read of
    /// a pipe issued on it (plugged, not polled).
    struct Deferred {
        s: Arc<Shared>,
        ring: Arc<Ring>,
        w: std::fs::File,
        read: crate::Pending<Vec<u8>>,
        _target: crate::FileTarget,
        _flow: crate::Flow,
        _engine: crate::Engine,
    }

    impl Deferred {
        fn new() -> Deferred {
            let (engine, s, flow) = nop_engine();
            let (target, w) = pipe();
            let (ring, _fd) = s.bind_ring().unwrap();
            ring.defer.store(true, Ordering::Relaxed);
            let read = flow.read_file_async(&target, 0, vec![0u8; 1]);
            Deferred {
                s,
                ring,
                w,
                read,
                _target: target,
                _flow: flow,
                _engine: engine,
            }
        }

        /// Submits the plug, completes the read and reaps it.
        fn finish(mut self) {
            crate::submit_plugged();
            std::io::Write::write_all(&mut self.w, b"x").unwrap();
            while !self.read.is_done() {
                self.s.look(&self.ring, true);
            }
        }
    }

    /// `submit_plugged` from a waker, which the owner runs under its
    /// ring's lock, returns instead of waiting for that lock.
    #[test]
    fn submit_plugged_from_a_waker_returns() {
        no_hang(|| {
            use std::future::Future;
            let mut d = Deferred::new();
            let waker = std::task::Waker::from(Arc::new(SubmitsWhenWoken));
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(std::pin::Pin::new(&mut d.read).poll(&mut cx).is_pending());
            d.finish();
        });
    }

    /// `submit_plugged` waits for the ring's lock held by another thread
    /// (the service thread's look) rather than leaving the plug to the
    /// take-over. The other thread lets go after 20 ms; a `submit_plugged`
    /// that gave up at once would find the lock still held.
    #[test]
    fn submit_plugged_waits_for_a_ring_held_elsewhere() {
        let mut d = Deferred::new();
        assert!(!poll_once(&mut d.read));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let other = d.ring.clone();
        let holder = std::thread::spawn(move || {
            let st = other.st.lock().unwrap();
            let plugged = !st.plug.is_empty();
            held_tx
                .send((other.flushes.load(Ordering::SeqCst), plugged))
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        });
        let (flushes, plugged) = held_rx.recv().unwrap();
        crate::submit_plugged();
        let now = d.ring.flushes.load(Ordering::SeqCst);
        holder.join().unwrap();
        d.finish();
        if plugged {
            assert!(now > flushes, "submitted after the wait");
        } else {
            eprintln!("skipped: the service thread took the plug over first");
        }
    }

    /// Requests left in a bound ring's plug are taken over once they have
    /// waited across two looks with no flush, however often the owner
    /// visited the ring meanwhile (an owner that keeps plugging).
    #[test]
    fn a_plug_left_waiting_is_taken_over_though_the_owner_visits() {
        let mut d = Deferred::new();
        assert!(!poll_once(&mut d.read));
        // Judged under the ring's lock, asserted once the read is done
        // (a failed assertion with the read still out would wait for it).
        let seen = {
            let (s, ring) = (&d.s, &d.ring);
            let mut st = ring.st.lock().unwrap();
            (!st.plug.is_empty()).then(|| {
                let once = s.owner_unresponsive(ring, &mut st);
                visit(ring);
                (once, s.owner_unresponsive(ring, &mut st))
            })
        };
        d.finish();
        match seen {
            None => eprintln!("skipped: the service thread took the plug over first"),
            Some(seen) => assert_eq!(seen, (false, true), "taken over once seen twice"),
        }
    }

    /// The service thread takes a bound ring over only once work has
    /// waited on it across two of its looks with no visit of the owner
    /// in between (the ring's lock held throughout, so that the service
    /// thread's own looks stay out).
    #[test]
    fn a_bound_ring_is_taken_over_only_from_an_owner_that_leaves_work_waiting() {
        let (_engine, s, flow) = nop_engine();
        let (target, mut w) = pipe();
        let (ring, _fd) = s.bind_ring().unwrap();
        let mut read = flow.read_file_async(&target, 0, vec![0u8; 1]);
        assert!(!poll_once(&mut read));
        {
            let mut st = ring.st.lock().unwrap();
            assert!(!s.owner_unresponsive(&ring, &mut st), "nothing waiting");
            assert!(!s.owner_unresponsive(&ring, &mut st), "nothing waiting");
            // The completion's task work runs as this thread returns
            // from the write.
            std::io::Write::write_all(&mut w, b"x").unwrap();
            assert!(!s.owner_unresponsive(&ring, &mut st), "seen once");
            assert!(s.owner_unresponsive(&ring, &mut st), "seen twice");
            visit(&ring);
            assert!(!s.owner_unresponsive(&ring, &mut st), "the owner came");
        }
        while !read.is_done() {
            s.look(&ring, true);
        }
    }
}
