//! The engine's public API: [`EngineBuilder`], [`Engine`], [`Flow`].

use crate::buf::{IoBuf, IoBufMut};
use crate::completion::{IoResult, Pending, Sink, Slot, Waiter, WakeRelay};
use crate::dispatcher::{Dispatcher, DispatcherConfig, TraceSink};
use bfq_core::{
    DeviceInfo, FlowId, FlowSpec, GroupId, IoClass, IoPrio, SchedError, Scheduler, Settings,
    SECTOR_BYTES,
};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What a request does once the scheduler dispatches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    Read,
    Write,
    /// An io_uring NOP: goes through the scheduler, touches no storage.
    Nop,
}

/// A request on its way to the dispatcher. Dropping it without a result
/// (engine gone, shutdown) completes it with `ECANCELED`, so no submitter
/// ever waits forever.
pub(crate) struct Op {
    pub kind: OpKind,
    pub flow: FlowId,
    pub offset: u64,
    pub ptr: *mut u8,
    pub len: u32,
    pub sync: bool,
    /// The request's own file ([`Flow::read_file_async`]), else the
    /// engine's target.
    pub file: Option<FileTarget>,
    sink: Option<Arc<dyn Sink>>,
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

// SAFETY: `ptr` points into the buffer owned by `sink`'s slot, which lives
// as long as the Op holds it; the Op only moves between threads.
unsafe impl Send for Op {}

impl Op {
    /// Delivers the result (once) and wakes the waiter.
    pub(crate) fn finish(&mut self, res: io::Result<usize>) {
        self.finish_deferred(res).wake();
    }

    /// Delivers the result (once); the caller wakes the returned waiter.
    pub(crate) fn finish_deferred(&mut self, res: io::Result<usize>) -> Waiter {
        match self.sink.take() {
            Some(s) => s.complete(res),
            None => Waiter::None,
        }
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

/// Messages to the dispatcher thread.
pub(crate) enum Cmd {
    Submit(Op),
    AddFlow(FlowSpec, mpsc::SyncSender<Result<FlowId, SchedError>>),
    RemoveFlow(FlowId),
    AddGroup(GroupId, u32, mpsc::SyncSender<Result<GroupId, SchedError>>),
    RemoveGroup(GroupId, mpsc::SyncSender<Result<(), SchedError>>),
    Stats(mpsc::SyncSender<EngineStats>),
    Shutdown(ShutdownMode),
}

/// State shared by the engine, its flows and the dispatcher.
pub(crate) struct Shared {
    tx: Sender<Cmd>,
    /// Set by the dispatcher before it blocks; a submitter that clears it
    /// writes the eventfd to wake it.
    pub parked: AtomicBool,
    pub eventfd: OwnedFd,
    pub submitted: AtomicU64,
    pub relay: Arc<WakeRelay>,
}

impl Shared {
    fn send(&self, cmd: Cmd) -> Result<(), Cmd> {
        self.tx.send(cmd).map_err(|e| e.0)?;
        if self.parked.swap(false, Ordering::SeqCst) {
            self.wake();
        }
        Ok(())
    }

    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to our eventfd.
        unsafe {
            libc::write(
                self.eventfd.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            );
        }
    }
}

/// One trace event (see [`EngineBuilder::trace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Nanoseconds since the engine started.
    pub t: bfq_core::Time,
    /// `Q` queued in the scheduler, `D` dispatched to the device, `C`
    /// completed.
    pub event: char,
    pub flow: FlowId,
    /// Request number, unique over the engine's life.
    pub req: u64,
    pub sector: u64,
    pub sectors: u32,
    pub write: bool,
}

/// How [`Engine::shutdown`] treats requests not yet done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    /// Refuse new requests, serve every queued and in-flight one, then stop.
    Drain,
    /// Refuse new requests, fail queued ones with `ECANCELED`, ask the
    /// kernel to cancel in-flight ones and wait for all of them.
    Cancel,
}

/// Counters of the dispatcher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Requests completed (successfully or not) by the device.
    pub completed: u64,
    /// Of those, completed with an error (or a short transfer).
    pub errors: u64,
    /// Requests cancelled before reaching the device.
    pub cancelled: u64,
    /// Requests queued in the scheduler now.
    pub queued: u64,
    /// Requests on the device now.
    pub in_flight: u64,
    /// Times the dispatcher blocked waiting for an event.
    pub parks: u64,
    /// Idle timers armed for the scheduler.
    pub timers_armed: u64,
    /// Idle timers that fired.
    pub timers_fired: u64,
}

/// Where requests go.
#[derive(Debug)]
enum TargetSpec {
    Path(PathBuf),
    File(File),
    Nop,
}

/// Opens an [`Engine`]. See the crate documentation for an example.
pub struct EngineBuilder {
    target: TargetSpec,
    scheduler: String,
    settings: Settings,
    instance: Option<Box<dyn Scheduler>>,
    queue_depth: u32,
    direct: bool,
    writable: bool,
    create_size: Option<u64>,
    device: Option<DeviceInfo>,
    allow_short: bool,
    dispatcher_nice: i32,
    async_submit: bool,
    sqpoll_idle_ms: u32,
    trace: Option<TraceSink>,
}

impl EngineBuilder {
    fn new(target: TargetSpec) -> Self {
        EngineBuilder {
            target,
            scheduler: "fifo".into(),
            settings: Settings::new(),
            instance: None,
            queue_depth: 32,
            direct: true,
            writable: false,
            create_size: None,
            device: None,
            allow_short: false,
            dispatcher_nice: 0,
            async_submit: false,
            sqpoll_idle_ms: 0,
            trace: None,
        }
    }

    /// Scheduler by registry name (`fifo`, `bfq`, ...); default `fifo`.
    pub fn scheduler(mut self, name: &str) -> Self {
        self.scheduler = name.to_string();
        self
    }

    /// The scheduler's settings (`key=value`).
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Adds one setting.
    pub fn set(mut self, key: &str, value: &str) -> Self {
        self.settings.set(key, value);
        self
    }

    /// Uses this scheduler instance instead of one from the registry.
    pub fn scheduler_instance(mut self, s: Box<dyn Scheduler>) -> Self {
        self.instance = Some(s);
        self
    }

    /// Requests on the device at once (default 32).
    pub fn queue_depth(mut self, depth: u32) -> Self {
        self.queue_depth = depth.clamp(1, 4096);
        self
    }

    /// `O_DIRECT` (default true). Direct requests need buffer addresses,
    /// lengths and offsets aligned to the logical block size
    /// ([`AlignedBuf`](crate::AlignedBuf)).
    pub fn direct(mut self, direct: bool) -> Self {
        self.direct = direct;
        self
    }

    /// Open the target for writing too (default read-only).
    pub fn writable(mut self, writable: bool) -> Self {
        self.writable = writable;
        self
    }

    /// Create the target file if missing and extend it to at least `size`
    /// bytes (implies writable). Only for regular files.
    ///
    /// The file is **sparse**: reads of ranges never written touch no
    /// storage and measure nothing. To measure reads, fill it first with
    /// [`crate::workload::create_filled`] (what `bfq run --create` does).
    pub fn create(mut self, size: u64) -> Self {
        self.create_size = Some(size);
        self.writable = true;
        self
    }

    /// Describes the device to the scheduler (default: queue depth as set,
    /// rotational from sysfs, `queues_internally` when depth > 1).
    pub fn device_info(mut self, d: DeviceInfo) -> Self {
        self.device = Some(d);
        self
    }

    /// Report short transfers as `Ok(n)` instead of an error (default:
    /// a short read fails with `UnexpectedEof`, a short write with
    /// `WriteZero`).
    pub fn allow_short(mut self, allow: bool) -> Self {
        self.allow_short = allow;
        self
    }

    /// Nice value of the dispatcher thread (default 0; negative values
    /// need root and keep woken submitters from preempting it).
    pub fn dispatcher_nice(mut self, nice: i32) -> Self {
        self.dispatcher_nice = nice.clamp(-20, 19);
        self
    }

    /// Hand every read and write to io_uring's worker threads
    /// (`IOSQE_ASYNC`) instead of issuing it on the dispatcher thread: the
    /// block layer's submission work then runs in parallel on other cores.
    pub fn async_submit(mut self, on: bool) -> Self {
        self.async_submit = on;
        self
    }

    /// Submit through a kernel polling thread (`IORING_SETUP_SQPOLL`) that
    /// spins for `idle_ms` after the last request before sleeping: the
    /// block layer's submission work moves off the dispatcher thread, at
    /// the price of a busy core while requests flow. 0 (default) = off.
    pub fn sqpoll(mut self, idle_ms: u32) -> Self {
        self.sqpoll_idle_ms = idle_ms;
        self
    }

    /// Calls `sink` on the dispatcher thread for every request queued
    /// (`Q`), dispatched (`D`) and completed (`C`): the events of the
    /// simulator's trace. Keep it cheap (e.g. a buffered writer).
    pub fn trace(mut self, sink: impl FnMut(&TraceEvent) + Send + 'static) -> Self {
        self.trace = Some(Box::new(sink));
        self
    }

    /// Opens the target, builds the scheduler and starts the dispatcher.
    pub fn open(self) -> io::Result<Engine> {
        let mut sched = match self.instance {
            Some(s) => s,
            None => bfq_schedulers::build(&self.scheduler, &self.settings)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        };
        let (file, len, block_size, rotational) = match self.target {
            TargetSpec::Nop => (None, u64::MAX, 512, false),
            TargetSpec::File(f) => {
                let (len, bs, rot) = describe(&f)?;
                (Some(f), len, bs, rot)
            }
            TargetSpec::Path(p) => {
                let f = open_target(&p, self.writable, self.direct, self.create_size)?;
                let (len, bs, rot) = describe(&f)?;
                (Some(f), len, bs, rot)
            }
        };
        let device = self.device.unwrap_or(DeviceInfo {
            queue_depth: self.queue_depth,
            queues_internally: self.queue_depth > 1,
            rotational,
        });
        sched.set_device(device);
        // SAFETY: plain syscall; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: efd is a fresh descriptor we own.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            tx,
            parked: AtomicBool::new(false),
            eventfd,
            submitted: AtomicU64::new(0),
            relay: Arc::default(),
        });
        let cfg = DispatcherConfig {
            depth: device.queue_depth.max(1),
            allow_short: self.allow_short,
            nice: self.dispatcher_nice,
            async_submit: self.async_submit,
            sqpoll_idle_ms: self.sqpoll_idle_ms,
            trace: self.trace,
        };
        // The ring is created on the dispatcher thread (single issuer).
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let shared2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("bfq-dispatch".into())
            .spawn(
                move || match Dispatcher::new(sched, file, rx, shared2, cfg) {
                    Ok(d) => {
                        let _ = ready_tx.send(Ok(()));
                        d.run()
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                },
            )?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(io::Error::other("the dispatcher thread failed to start"));
            }
        }
        Ok(Engine {
            shared,
            thread: Some(thread),
            len,
            block_size,
            device,
        })
    }
}

fn open_target(p: &Path, writable: bool, direct: bool, create: Option<u64>) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(writable);
    if create.is_some() {
        o.create(true);
    }
    let mut flags = libc::O_CLOEXEC;
    if direct {
        flags |= libc::O_DIRECT;
    }
    o.custom_flags(flags);
    let f = o
        .open(p)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open {}: {e}", p.display())))?;
    if let Some(size) = create {
        let m = f.metadata()?;
        if m.file_type().is_file() && m.len() < size {
            f.set_len(size)?;
        }
    }
    Ok(f)
}

/// Size in bytes, logical block size, rotational.
fn describe(f: &File) -> io::Result<(u64, u32, bool)> {
    let m = f.metadata()?;
    if m.file_type().is_block_device() {
        let mut size: u64 = 0;
        let mut bs: libc::c_int = 512;
        // SAFETY: ioctls writing into properly sized locals.
        unsafe {
            if libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size) < 0 {
                return Err(io::Error::last_os_error());
            }
            libc::ioctl(f.as_raw_fd(), BLKSSZGET, &mut bs);
        }
        let rdev = m.rdev();
        let rot = sysfs_rotational(libc::major(rdev), libc::minor(rdev));
        Ok((size, bs.max(512) as u32, rot))
    } else {
        let dev = m.dev();
        let rot = sysfs_rotational(libc::major(dev), libc::minor(dev));
        Ok((m.len(), 512, rot))
    }
}

const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;

fn sysfs_rotational(major: u32, minor: u32) -> bool {
    let base = format!("/sys/dev/block/{major}:{minor}");
    for p in [
        format!("{base}/queue/rotational"),
        format!("{base}/../queue/rotational"),
    ] {
        if let Ok(s) = std::fs::read_to_string(p) {
            return s.trim() == "1";
        }
    }
    false
}

/// An io_uring engine serving one target through one scheduler.
///
/// Cheap to share: wrap it in an `Arc`, or hand out [`Flow`]s (which keep
/// working until the engine shuts down). Dropping the engine cancels what is
/// left ([`ShutdownMode::Cancel`]) and joins the dispatcher thread.
pub struct Engine {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    len: u64,
    block_size: u32,
    device: DeviceInfo,
}

/// How to open a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowOptions {
    /// The scheduler's view: weight, class and level, group.
    pub spec: FlowSpec,
    /// Requests are synchronous (the issuer waits for each; default true).
    /// Flows keeping many requests outstanding may say false.
    pub sync: bool,
}

impl Default for FlowOptions {
    fn default() -> Self {
        FlowOptions {
            spec: FlowSpec::default(),
            sync: true,
        }
    }
}

impl FlowOptions {
    /// A best-effort flow with this weight (1..=1000) in the root group.
    pub fn weight(weight: u32) -> Self {
        FlowOptions {
            spec: FlowSpec::with_weight(weight),
            sync: true,
        }
    }
    /// Sets the class and level (0..=7).
    pub fn prio(mut self, class: IoClass, level: u8) -> Self {
        self.spec.prio = IoPrio { class, level };
        self
    }
    /// Puts the flow in a group.
    pub fn group(mut self, group: GroupId) -> Self {
        self.spec.group = group;
        self
    }
    /// Marks its requests synchronous or not.
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }
}

fn engine_gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the engine has shut down")
}

fn sched_err(e: SchedError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

impl Engine {
    /// An engine on a regular file or block device.
    pub fn builder(path: impl AsRef<Path>) -> EngineBuilder {
        EngineBuilder::new(TargetSpec::Path(path.as_ref().to_path_buf()))
    }

    /// An engine on a file the caller already opened (its flags, e.g.
    /// `O_DIRECT`, are the caller's).
    pub fn builder_for_file(file: File) -> EngineBuilder {
        EngineBuilder::new(TargetSpec::File(file))
    }

    /// An engine whose every request is an io_uring NOP: measures the
    /// scheduler and the engine without storage. Requests that name their
    /// own file ([`Flow::read_file_async`]) still go to that file, so this
    /// is also the engine of a front end serving many files.
    pub fn nop() -> EngineBuilder {
        EngineBuilder::new(TargetSpec::Nop)
    }

    /// Size of the target in bytes at open time (`u64::MAX` for NOP).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the target was empty at open time.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Logical block size (alignment for `O_DIRECT`).
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// The device description given to the scheduler.
    pub fn device_info(&self) -> DeviceInfo {
        self.device
    }

    fn call<T>(&self, make: impl FnOnce(mpsc::SyncSender<T>) -> Cmd) -> io::Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.shared.send(make(tx)).map_err(|_| engine_gone())?;
        rx.recv().map_err(|_| engine_gone())
    }

    /// Opens a flow.
    pub fn flow(&self, opts: FlowOptions) -> io::Result<Flow> {
        let id = self
            .call(|tx| Cmd::AddFlow(opts.spec, tx))?
            .map_err(sched_err)?;
        Ok(Flow {
            shared: self.shared.clone(),
            id,
            sync: opts.sync,
        })
    }

    /// Creates a group under `parent` with a weight (1..=1000).
    pub fn add_group(&self, parent: GroupId, weight: u32) -> io::Result<GroupId> {
        self.call(|tx| Cmd::AddGroup(parent, weight, tx))?
            .map_err(sched_err)
    }

    /// Removes an empty group.
    pub fn remove_group(&self, group: GroupId) -> io::Result<()> {
        self.call(|tx| Cmd::RemoveGroup(group, tx))?
            .map_err(sched_err)
    }

    /// The dispatcher's counters.
    pub fn stats(&self) -> io::Result<EngineStats> {
        self.call(Cmd::Stats)
    }

    /// Stops the engine: new requests fail, pending ones are served or
    /// cancelled per `mode`, every buffer goes back to its submitter, and
    /// the dispatcher thread is joined. Returns the final counters.
    pub fn shutdown(mut self, mode: ShutdownMode) -> io::Result<EngineStats> {
        self.stop(mode)
    }

    fn stop(&mut self, mode: ShutdownMode) -> io::Result<EngineStats> {
        let stats = self.stats().unwrap_or_default();
        let _ = self.shared.send(Cmd::Shutdown(mode));
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                return Err(io::Error::other("the dispatcher thread panicked"));
            }
        }
        Ok(stats)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.stop(ShutdownMode::Cancel);
    }
}

/// A client of the engine: one scheduler flow (an application, tenant,
/// VM...). Submit from any number of threads (`Flow` is `Send + Sync`).
/// Dropping it removes the flow from the scheduler; requests already
/// submitted still complete.
pub struct Flow {
    shared: Arc<Shared>,
    id: FlowId,
    sync: bool,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow").field("id", &self.id.0).finish()
    }
}

impl Flow {
    /// The scheduler's id of this flow.
    pub fn id(&self) -> FlowId {
        self.id
    }

    #[allow(clippy::too_many_arguments)]
    fn submit<B: Send + 'static>(
        &self,
        kind: OpKind,
        file: Option<&FileTarget>,
        offset: u64,
        ptr: *mut u8,
        len: usize,
        buf: B,
    ) -> Pending<B> {
        let slot = Slot::new(buf);
        let pending = Pending::new(slot.clone(), self.shared.relay.clone());
        let sink: Arc<dyn Sink> = slot;
        let mut op = Op {
            kind,
            flow: self.id,
            offset,
            ptr,
            len: 0,
            sync: self.sync,
            file: file.cloned(),
            sink: Some(sink),
        };
        let why = match u32::try_from(len) {
            Err(_) => Some("a request is at most 4 GiB - 1"),
            Ok(_) if offset.checked_add(len as u64).is_none() => {
                Some("a request must end below 2^64 bytes")
            }
            Ok(l) => {
                op.len = l;
                None
            }
        };
        if let Some(why) = why {
            op.finish(Err(io::Error::new(io::ErrorKind::InvalidInput, why)));
            return pending;
        }
        self.shared.submitted.fetch_add(1, Ordering::Relaxed);
        if let Err(Cmd::Submit(mut op)) = self.shared.send(Cmd::Submit(op)) {
            op.finish(Err(engine_gone()));
        }
        pending
    }

    /// Starts reading `buf.len()` bytes at `offset`; await or
    /// [`wait`](Pending::wait) the result.
    pub fn read_async<B: IoBufMut>(&self, offset: u64, mut buf: B) -> Pending<B> {
        let ptr = buf.stable_mut_ptr();
        let len = buf.bytes_len();
        self.submit(OpKind::Read, None, offset, ptr, len, buf)
    }

    /// Starts writing `buf` at `offset`.
    pub fn write_async<B: IoBuf>(&self, offset: u64, buf: B) -> Pending<B> {
        let ptr = buf.stable_ptr() as *mut u8;
        let len = buf.bytes_len();
        self.submit(OpKind::Write, None, offset, ptr, len, buf)
    }

    /// Starts reading `buf.len()` bytes at `offset` of `file` (not the
    /// engine's target), scheduled with this flow's other requests.
    pub fn read_file_async<B: IoBufMut>(
        &self,
        file: &FileTarget,
        offset: u64,
        mut buf: B,
    ) -> Pending<B> {
        let ptr = buf.stable_mut_ptr();
        let len = buf.bytes_len();
        self.submit(OpKind::Read, Some(file), offset, ptr, len, buf)
    }

    /// Starts writing `buf` at `offset` of `file`.
    pub fn write_file_async<B: IoBuf>(&self, file: &FileTarget, offset: u64, buf: B) -> Pending<B> {
        let ptr = buf.stable_ptr() as *mut u8;
        let len = buf.bytes_len();
        self.submit(OpKind::Write, Some(file), offset, ptr, len, buf)
    }

    /// Reads `buf.len()` bytes at `offset`, blocking.
    pub fn read<B: IoBufMut>(&self, offset: u64, buf: B) -> IoResult<B> {
        self.read_async(offset, buf).wait()
    }

    /// Writes `buf` at `offset`, blocking.
    pub fn write<B: IoBuf>(&self, offset: u64, buf: B) -> IoResult<B> {
        self.write_async(offset, buf).wait()
    }

    /// A request the scheduler sees as a read of `sectors` sectors at
    /// `sector`, served by an io_uring NOP (no storage touched).
    pub fn nop_async(&self, sector: u64, sectors: u32) -> Pending<()> {
        let len = (u64::from(sectors.max(1)) * SECTOR_BYTES) as usize;
        self.submit(
            OpKind::Nop,
            None,
            sector.saturating_mul(SECTOR_BYTES),
            std::ptr::null_mut(),
            len,
            (),
        )
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        let _ = self.shared.send(Cmd::RemoveFlow(self.id));
    }
}
