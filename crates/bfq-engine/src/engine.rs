//! The engine's public API: [`EngineBuilder`], [`Engine`], [`Flow`].

use crate::admit::{Admission, DEFAULT_MAX_REQUESTS, MAX_REQUESTS_LIMIT};
use crate::buf::{IoBuf, IoBufMut};
use crate::clock::{monotonic_ns, monotonic_timerfd};
use crate::completion::{IoResult, Pending};
use crate::core::{engine_gone, Core, CoreConfig, Op, OpKind, TraceSink};
pub use crate::core::{EngineStats, FileTarget, ShutdownMode, TraceEvent};
use crate::driver::{FlowDriver, Shared, SubmitMode};
use crate::target_check::{dio_align, DioAlign, TargetRules};
use crate::taskrun::CoopTaskrun;
use bfq_core::{
    DeviceInfo, FlowId, FlowInternals, FlowSpec, GroupId, Internals, IoClass, IoPrio, SchedError,
    Scheduler, Settings, SECTOR_BYTES,
};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Where requests go.
#[derive(Debug)]
enum TargetSpec {
    Path(PathBuf),
    File(File),
    Nop,
}

/// The largest [`EngineBuilder::queue_depth`] (4096).
pub const MAX_QUEUE_DEPTH: u32 = 4096;

/// The [`EngineBuilder::queue_depth`] of a builder given none (32).
const DEFAULT_QUEUE_DEPTH: u32 = 32;

/// The longest [`EngineBuilder::sqpoll`] idle time, in ms (one minute).
pub const MAX_SQPOLL_IDLE_MS: u32 = 60_000;

/// `Ok` if `value` of setting `name` is in `lo..=hi`, else an
/// `InvalidInput` error naming both.
fn in_range<T: PartialOrd + std::fmt::Display>(
    name: &str,
    value: T,
    lo: T,
    hi: T,
) -> io::Result<()> {
    if lo <= value && value <= hi {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{name}={value}: must be in {lo}..={hi}"),
    ))
}

/// Opens an [`Engine`]. See the crate documentation for an example.
pub struct EngineBuilder {
    target: TargetSpec,
    scheduler: String,
    settings: Settings,
    instance: Option<Box<dyn Scheduler>>,
    /// As given (`None`: the default, [`DEFAULT_QUEUE_DEPTH`]).
    queue_depth: Option<u32>,
    max_requests: u32,
    direct: bool,
    writable: bool,
    create_size: Option<u64>,
    device: Option<DeviceInfo>,
    allow_short: bool,
    service_nice: i32,
    submit_mode: SubmitMode,
    private_rings: bool,
    coop_taskrun: CoopTaskrun,
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
            queue_depth: None,
            max_requests: DEFAULT_MAX_REQUESTS,
            direct: true,
            writable: false,
            create_size: None,
            device: None,
            allow_short: false,
            service_nice: 0,
            submit_mode: SubmitMode::default(),
            private_rings: true,
            coop_taskrun: CoopTaskrun::Auto,
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

    /// Requests on the device at once: `1..=4096`
    /// ([`MAX_QUEUE_DEPTH`]), checked by [`open`](EngineBuilder::open);
    /// default 32. A [`device_info`](EngineBuilder::device_info) gives
    /// it too: see there.
    pub fn queue_depth(mut self, depth: u32) -> Self {
        self.queue_depth = Some(depth);
        self
    }

    /// The most requests the engine holds at once, all flows together:
    /// in threads' plugs, queued in the scheduler, on the device, or
    /// with their result on its way (the block layer's `nr_requests`,
    /// which bounds a queue's requests the same way). `1..=4_194_304`
    /// (2^22), checked by [`open`](EngineBuilder::open) (`InvalidInput`
    /// naming the range); default 65 536, which no sane use reaches (a
    /// thousand flows keeping 64 requests each outstanding stay below
    /// it) while it keeps the memory of the requests held to about
    /// 30 MiB (about 0.4-0.5 KiB a request, the caller's `Pending`s
    /// included; docs/engine.md, "Faults").
    ///
    /// A request beyond it fails at once, its [`Pending`] resolving with
    /// the buffer and an `io::ErrorKind::WouldBlock` error naming the
    /// bound (the kernel's answer, `EAGAIN`, to a request that may not
    /// wait for a free tag); a blocking [`Flow::read`] or
    /// [`Flow::write`] returns it the same way. It fails rather than
    /// making the caller wait because `read_async` must never block an
    /// async runtime's thread: a caller that wants back-pressure awaits
    /// its earlier requests before submitting more, and one that gets
    /// `WouldBlock` may submit again once some of them are done.
    /// [`EngineStats::refused_full`] counts the refusals,
    /// [`EngineStats::held`] the requests held.
    pub fn max_requests(mut self, n: u32) -> Self {
        self.max_requests = n;
        self
    }

    /// `O_DIRECT` (default true). Direct requests need offsets and
    /// lengths in whole blocks of the target ([`Engine::block_size`]:
    /// others are refused, `InvalidInput`) and buffer addresses aligned
    /// as the kernel wants ([`AlignedBuf`](crate::AlignedBuf) is
    /// 4096-aligned; the kernel's `EINVAL` for a buffer not aligned to
    /// what it reports is told as such, `InvalidInput`).
    pub fn direct(mut self, direct: bool) -> Self {
        self.direct = direct;
        self
    }

    /// Open the target for writing too (default read-only; a
    /// [`create`](EngineBuilder::create) opens it for writing whatever
    /// this says, before or after). A write to a target open read-only
    /// is refused before it is submitted (`InvalidInput`, naming this
    /// option); with [`Engine::builder_for_file`] the file's own access
    /// mode counts.
    pub fn writable(mut self, writable: bool) -> Self {
        self.writable = writable;
        self
    }

    /// Create the target file if missing and extend it to at least `size`
    /// bytes (implies writable, whatever
    /// [`writable`](EngineBuilder::writable) says, before or after). Only
    /// for a regular file given by path ([`Engine::builder`]):
    /// [`open`](EngineBuilder::open) refuses it (`InvalidInput`) for a
    /// block device or any other kind of file, and for the targets of
    /// [`Engine::builder_for_file`] and [`Engine::nop`].
    ///
    /// The file is **sparse**: reads of ranges never written touch no
    /// storage and measure nothing. To measure reads, fill it first with
    /// `bfq_real::create_filled` (what `bfq run --create` does).
    pub fn create(mut self, size: u64) -> Self {
        self.create_size = Some(size);
        self
    }

    /// Describes the device to the scheduler (default: queue depth as set,
    /// rotational from sysfs, `queues_internally` when depth > 1).
    ///
    /// Its `queue_depth` is the engine's depth as well (the requests it
    /// keeps on the device at once), checked by
    /// [`open`](EngineBuilder::open) as
    /// [`queue_depth`](EngineBuilder::queue_depth) is (`1..=4096`,
    /// `InvalidInput` naming the setting and the range).
    /// Given both, they must agree: `open` refuses different depths
    /// (`InvalidInput` naming both) rather than run one and describe
    /// another. [`Engine::device_info`] reports what the engine runs.
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

    /// Who enters the kernel: every submitting thread on its own ring
    /// ([`SubmitMode::Local`], default) or one dispatcher thread
    /// ([`SubmitMode::Dispatcher`]). See docs/engine.md.
    ///
    /// The mode also decides where a future's `Waker` is called, and
    /// where a buffer whose [`Pending`](crate::Pending) was dropped
    /// before its result is dropped (the engine runs that user code
    /// outside its locks, on the thread that reaped the request's
    /// completion): in local mode mostly on the submitting thread itself,
    /// else on the thread whose ring carried the request or on the
    /// service thread (rings whose owner is away, idle timers); in
    /// dispatcher mode on the service thread, which reaps every
    /// completion (it wakes the first waiter of each batch and drops the
    /// buffers), and on client threads, each of which wakes up to 4 other
    /// waiters when it takes a result. So wakers and buffer drops must be
    /// cheap and never block: in dispatcher mode one that sleeps stalls
    /// every flow for as long. A runtime's waker (queue a task, maybe
    /// unpark a thread) is fine. See docs/engine.md, "Where user code
    /// runs".
    pub fn submit_mode(mut self, mode: SubmitMode) -> Self {
        self.submit_mode = mode;
        self
    }

    /// Local mode: a blocking wait for a thread's only outstanding
    /// request, dispatched as the wait submits it, submits it on the
    /// thread's private ring (`IORING_SETUP_SINGLE_ISSUER |
    /// DEFER_TASKRUN`: its completion is posted when the thread waits,
    /// without interrupting it) and sleeps there until it is done. On by
    /// default; used only where the kernel offers it (Linux 6.1 and
    /// later). See docs/engine.md, "The private ring".
    pub fn private_rings(mut self, on: bool) -> Self {
        self.private_rings = on;
        self
    }

    /// Local mode: how each thread's ring takes its completions: with
    /// `IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG` (Linux 5.19; a completion
    /// then does not interrupt its thread while it runs, no IPI: it is
    /// posted at the thread's next entry into the kernel, or its next
    /// interrupt or timer tick if it computes without system calls, and
    /// every request on that thread's ring waits so, other flows' requests
    /// it dispatched included; a future's `poll` and `is_done` make a
    /// system call while requests are in flight on such a ring), without
    /// it, or chosen per thread by how much it waits for a CPU
    /// ([`CoopTaskrun::Auto`], the default). See [`CoopTaskrun`] and
    /// docs/engine-measurements.md, "Where a result waits".
    pub fn coop_taskrun(mut self, mode: CoopTaskrun) -> Self {
        self.coop_taskrun = mode;
        self
    }

    /// Former name of [`EngineBuilder::service_nice`].
    pub fn dispatcher_nice(self, nice: i32) -> Self {
        self.service_nice(nice)
    }

    /// Nice value of the service thread: `-20..=19` (the kernel's
    /// range), checked by [`open`](EngineBuilder::open); default 0. In
    /// dispatcher mode negative values, which need root, keep woken
    /// submitters from preempting it.
    pub fn service_nice(mut self, nice: i32) -> Self {
        self.service_nice = nice;
        self
    }

    /// Hand every read and write to io_uring's worker threads
    /// (`IOSQE_ASYNC`) instead of issuing it on the submitting thread: the
    /// block layer's submission work then runs in parallel on other cores.
    pub fn async_submit(mut self, on: bool) -> Self {
        self.async_submit = on;
        self
    }

    /// Dispatcher mode only: submit through a kernel polling thread
    /// (`IORING_SETUP_SQPOLL`) that spins for `idle_ms` after the last
    /// request before sleeping: the block layer's submission work moves
    /// off the dispatcher thread, at the price of a busy core while
    /// requests flow. `0..=60_000` ([`MAX_SQPOLL_IDLE_MS`]), checked by
    /// [`open`](EngineBuilder::open); 0 (default) = off.
    pub fn sqpoll(mut self, idle_ms: u32) -> Self {
        self.sqpoll_idle_ms = idle_ms;
        self
    }

    /// Calls `sink` (under the engine's scheduling lock, on whichever
    /// thread made the event) for every request queued
    /// (`Q`), dispatched (`D`) and completed (`C`): the events of the
    /// simulator's trace. Keep it cheap (e.g. a buffered writer).
    pub fn trace(mut self, sink: impl FnMut(&TraceEvent) + Send + 'static) -> Self {
        self.trace = Some(Box::new(sink));
        self
    }

    /// Checks each numeric setting against its documented range: a
    /// value outside it is refused (`InvalidInput` naming the setting and
    /// the range), never clamped. Returns the queue depth
    /// ([`EngineBuilder::depth`]).
    fn check_ranges(&self) -> io::Result<u32> {
        let depth = self.depth()?;
        in_range("max_requests", self.max_requests, 1, MAX_REQUESTS_LIMIT)?;
        in_range("service_nice", self.service_nice, -20, 19)?;
        in_range("sqpoll", self.sqpoll_idle_ms, 0, MAX_SQPOLL_IDLE_MS)?;
        Ok(depth)
    }

    /// The engine's queue depth: [`EngineBuilder::device_info`]'s, else
    /// [`EngineBuilder::queue_depth`]'s (the two agreeing if both are
    /// given), checked against its range.
    fn depth(&self) -> io::Result<u32> {
        let depth = match (self.device, self.queue_depth) {
            (Some(d), Some(q)) if d.queue_depth != q => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "queue_depth={q} and device_info's queue_depth={}: \
                         the engine runs one depth, give them equal or give one",
                        d.queue_depth
                    ),
                ));
            }
            (Some(d), _) => ("device_info's queue_depth", d.queue_depth),
            (None, q) => ("queue_depth", q.unwrap_or(DEFAULT_QUEUE_DEPTH)),
        };
        in_range(depth.0, depth.1, 1, MAX_QUEUE_DEPTH)?;
        Ok(depth.1)
    }

    /// Opens the target, builds the scheduler and starts the service
    /// thread.
    ///
    /// A setting refused (out of its range, an unknown scheduler or
    /// setting) fails with `InvalidInput` naming it. A target that cannot
    /// be opened or described fails with the OS's error as it is, like
    /// [`File::open`]'s: its kind, and its code in
    /// [`raw_os_error`](io::Error::raw_os_error) (`ENOENT`, `EACCES` for
    /// a file the caller may not open as asked, `EISDIR` for a directory,
    /// `EINVAL` where the filesystem refuses `O_DIRECT`, ...); its message
    /// does not name the path, which the caller has.
    pub fn open(self) -> io::Result<Engine> {
        let depth = self.check_ranges()?;
        let admission = Arc::new(Admission::new(self.max_requests));
        let mut sched = match self.instance {
            Some(s) => s,
            None => bfq_schedulers::build(&self.scheduler, &self.settings)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        };
        let target = target_file(self.target, self.writable, self.direct, self.create_size)?;
        let device = self.device.unwrap_or(DeviceInfo {
            queue_depth: depth,
            queues_internally: depth > 1,
            rotational: target.rotational,
        });
        sched.set_device(device);
        let timerfd = monotonic_timerfd()?;
        // The engine's times are ns of CLOCK_MONOTONIC since this.
        let origin_mono = monotonic_ns();
        let core = Core::new(
            sched,
            CoreConfig {
                depth,
                allow_short: self.allow_short,
                async_submit: self.async_submit,
                target: target.file.as_ref().map(|f| f.as_raw_fd()),
                dio_mem_align: target.mem_align,
                timerfd: timerfd.as_raw_fd(),
                origin_mono,
                trace: self.trace,
                admission: admission.clone(),
            },
        );
        let shared = Shared::new(
            self.submit_mode,
            (self.private_rings, self.coop_taskrun),
            core,
            timerfd,
            origin_mono,
            depth,
        )?;
        let sqpoll = match self.submit_mode {
            SubmitMode::Dispatcher => self.sqpoll_idle_ms,
            SubmitMode::Local => 0,
        };
        let thread = crate::service::spawn(shared.clone(), self.service_nice, sqpoll)?;
        Ok(Engine {
            shared,
            admission,
            thread: Some(thread),
            _file: target.file.map(Arc::new),
            len: target.len,
            block_size: target.block_size,
            rules: target.rules,
            device,
        })
    }
}

/// The open target of an [`EngineBuilder`]'s [`TargetSpec`] (opened here
/// if given by path).
struct Opened {
    file: Option<File>,
    /// Length in bytes; unbounded for a NOP engine.
    len: u64,
    /// [`direct_io_block`]; 512 for a NOP engine.
    block_size: u32,
    rotational: bool,
    /// What each request for the target is checked against.
    rules: TargetRules,
    /// The buffer alignment the kernel reports for direct I/O (0: none).
    mem_align: u32,
}

fn target_file(
    target: TargetSpec,
    writable: bool,
    direct: bool,
    create: Option<u64>,
) -> io::Result<Opened> {
    if create.is_some() && !matches!(target, TargetSpec::Path(_)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "create(size) needs a target given by path (Engine::builder)",
        ));
    }
    let f = match target {
        TargetSpec::Nop => {
            return Ok(Opened {
                file: None,
                len: u64::MAX,
                block_size: 512,
                rotational: false,
                rules: TargetRules::NONE,
                mem_align: 0,
            })
        }
        TargetSpec::File(f) => f,
        TargetSpec::Path(p) => open_target(&p, writable, direct, create)?,
    };
    let (len, rotational) = describe(&f)?;
    let align = dio_align(&f)?;
    let rules = TargetRules::of(&f, align);
    Ok(Opened {
        len,
        block_size: block_of(align),
        rotational,
        rules,
        mem_align: align.mem.filter(|_| rules.direct()).unwrap_or(0),
        file: Some(f),
    })
}

/// Opens the target. With `O_NOATIME` where the caller may (its owner, or
/// with `CAP_FOWNER`), as fio does: otherwise every read updates the
/// file's (or device node's) access time, about 0.1 us of kernel time
/// per request (`touch_atime`, `perf`, 4 KiB random reads on a loop
/// device); without it where it is refused (`EPERM`). Errors are the
/// OS's, unchanged (their code kept), but for a directory's `EINVAL`
/// (`O_DIRECT` on a directory), told as `EISDIR`.
fn open_target(p: &Path, writable: bool, direct: bool, create: Option<u64>) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(writable || create.is_some());
    if create.is_some() {
        o.create(true);
    }
    let mut flags = libc::O_CLOEXEC;
    if direct {
        flags |= libc::O_DIRECT;
    }
    let f = o
        .custom_flags(flags | libc::O_NOATIME)
        .open(p)
        .or_else(|e| match e.raw_os_error() {
            Some(libc::EPERM) => o.custom_flags(flags).open(p),
            _ => Err(e),
        })
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) if std::fs::metadata(p).is_ok_and(|m| m.is_dir()) => {
                io::Error::from_raw_os_error(libc::EISDIR)
            }
            _ => e,
        })?;
    if let Some(size) = create {
        let m = f.metadata()?;
        if !m.is_file() {
            let what = match m.file_type().is_block_device() {
                true => "a block device",
                false => "not a regular file",
            };
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "create(size) is for regular files: {} is {what}",
                    p.display()
                ),
            ));
        }
        if m.len() < size {
            f.set_len(size)?;
        }
    }
    Ok(f)
}

/// Size in bytes and whether rotational; `EISDIR` for a directory.
fn describe(f: &File) -> io::Result<(u64, bool)> {
    let m = f.metadata()?;
    if m.is_dir() {
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    }
    if m.file_type().is_block_device() {
        let mut size: u64 = 0;
        // SAFETY: an ioctl writing into a properly sized local.
        if unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let rdev = m.rdev();
        let rot = sysfs_rotational(libc::major(rdev), libc::minor(rdev));
        Ok((size, rot))
    } else {
        let dev = m.dev();
        let rot = sysfs_rotational(libc::major(dev), libc::minor(dev));
        Ok((m.len(), rot))
    }
}

/// The unit of `O_DIRECT` offsets and lengths on `f`, in bytes (at least
/// 512, a sector): a block device's logical block size (`BLKSSZGET`:
/// 4096 on a 4Kn disk or a loop device made with `--sector-size 4096`),
/// a regular file's direct-I/O offset alignment as its filesystem reports
/// it (`statx`'s `STATX_DIOALIGN`, the logical block size of the device
/// below on ext4 and XFS), or 512 where neither is known. A request
/// through `O_DIRECT` whose offset or length is not a multiple of it
/// fails with `EINVAL`; [`Engine::block_size`] is this for the engine's
/// target, and where the kernel reports it an engine refuses such a
/// request for its target before submitting it (`InvalidInput`, naming
/// the block size).
pub fn direct_io_block(f: &File) -> io::Result<u32> {
    Ok(block_of(dio_align(f)?))
}

fn block_of(align: DioAlign) -> u32 {
    align.offset.unwrap_or(512).max(512)
}

const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

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
/// left ([`ShutdownMode::Cancel`]) and joins the service thread.
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
    /// The count of requests held ([`EngineBuilder::max_requests`]).
    admission: Arc<Admission>,
    thread: Option<JoinHandle<()>>,
    /// The target, open until the engine is dropped.
    _file: Option<Arc<File>>,
    len: u64,
    block_size: u32,
    /// What each request for the target is checked against.
    rules: TargetRules,
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

#[cold]
fn invalid(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
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
    /// `O_DIRECT`, are the caller's). The engine reads them once, when it
    /// opens, to check requests before they are submitted (a write to a
    /// file open read-only, an `O_DIRECT` request not in whole direct-I/O
    /// blocks): flags changed later (`fcntl(F_SETFL)` on a descriptor
    /// sharing the open file) are not seen.
    pub fn builder_for_file(file: File) -> EngineBuilder {
        EngineBuilder::new(TargetSpec::File(file))
    }

    /// An engine whose every request is an io_uring NOP: measures the
    /// scheduler and the engine without storage. A read or write moves no
    /// bytes (a read's buffer is left as it was) and reports its full
    /// length, `Ok(buf.len())`, as a device serving it whole would.
    /// Requests that name their own file ([`Flow::read_file_async`])
    /// still go to that file, so this is also the engine of a front end
    /// serving many files.
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

    /// The target's logical block size at open time, the unit of
    /// `O_DIRECT` offsets and lengths ([`direct_io_block`]; 512 for NOP).
    /// On a target open with `O_DIRECT` whose block the kernel reports (a
    /// block device; a regular file where `statx` gives its direct-I/O
    /// alignment, as on ext4 and XFS), a read or write not in whole blocks
    /// is refused before it is submitted: `InvalidInput`, naming the
    /// block size (counted in [`EngineStats::refused_invalid`]). Where
    /// the kernel reports none (tmpfs takes any alignment) it is the
    /// kernel's to refuse. A caller whose offsets or sizes come from its
    /// users can check them against this first (`bfq run` refuses such
    /// flows before it starts).
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// The device description given to the scheduler.
    pub fn device_info(&self) -> DeviceInfo {
        self.device
    }

    /// Opens a flow.
    pub fn flow(&self, opts: FlowOptions) -> io::Result<Flow> {
        let now = self.shared.now();
        let r = self.shared.core().add_flow(now, opts.spec);
        let id = r.map_err(|e| self.refused(e))?;
        Ok(Flow {
            shared: self.shared.clone(),
            admission: self.admission.clone(),
            driver: Arc::new(FlowDriver(self.shared.clone())),
            id,
            sync: opts.sync,
            rules: self.rules,
        })
    }

    fn refused(&self, e: SchedError) -> io::Error {
        let core = self.shared.core();
        if core.closed || core.stopping().is_some() {
            engine_gone()
        } else {
            sched_err(e)
        }
    }

    /// Creates a group under `parent` with a weight (1..=1000).
    pub fn add_group(&self, parent: GroupId, weight: u32) -> io::Result<GroupId> {
        let r = self.shared.core().add_group(parent, weight);
        r.map_err(|e| self.refused(e))
    }

    /// Removes an empty group: one that holds no flow and no group
    /// (`InvalidInput` otherwise, and for the root group, which is never
    /// removed).
    ///
    /// A closed flow (its [`Flow`] dropped) stays in its group until every
    /// request it submitted is done, those whose [`Pending`] was dropped
    /// included: the group is refused meanwhile (the error says so). Wait
    /// for a flow's requests before dropping it, or try again once they
    /// are done.
    pub fn remove_group(&self, group: GroupId) -> io::Result<()> {
        let r = self.shared.core().remove_group(group);
        r.map_err(|e| {
            let busy = matches!(e, SchedError::GroupNotEmpty(g) if g != GroupId::ROOT);
            match self.refused(e) {
                e if busy && e.kind() == io::ErrorKind::InvalidInput => io::Error::new(
                    e.kind(),
                    format!(
                        "{e} (a closed flow stays in its group until every \
                         request it submitted is done)"
                    ),
                ),
                e => e,
            }
        })
    }

    /// What the scheduler's mechanisms did so far (B_max, peak rate,
    /// injection; see [`Internals`]).
    pub fn scheduler_internals(&self) -> io::Result<Internals> {
        let now = self.shared.now();
        let r = self.shared.core().internals(now);
        r.ok_or_else(|| io::Error::other("the scheduler panicked"))
    }

    /// Binds the calling thread's ring to the thread's own event loop
    /// (tokio, mio, `epoll`): the returned [`ThreadRing`](crate::ThreadRing)'s descriptor
    /// turns readable when completions wait on the ring, and the event
    /// loop reaps them on this thread ([`ThreadRing::reap`](crate::ThreadRing::reap)) instead of
    /// the service thread reaping them and waking the loop from another
    /// CPU. For thread-per-core servers whose runtime parks in its own
    /// poller (docs/engine.md, "Thread-per-core servers"). Local submit
    /// mode only (`Unsupported` in dispatcher mode); one per thread and
    /// engine at a time (`AlreadyExists`); the OS error if the thread's
    /// ring cannot be set up.
    pub fn thread_ring(&self) -> io::Result<crate::ThreadRing> {
        crate::ThreadRing::bind(self)
    }

    /// The engine's counters.
    pub fn stats(&self) -> io::Result<EngineStats> {
        let mut s = self.shared.core().snapshot();
        s.parks = self.shared.parks.load(Ordering::Relaxed);
        s.linger_wakes = self.shared.linger_wakes.load(Ordering::Relaxed);
        s.service_submits = self.shared.service_submits.load(Ordering::Relaxed);
        s.cross_wakes = self.shared.cross_wakes.load(Ordering::Relaxed);
        s.coop_switches = self
            .shared
            .coop_switches
            .each_ref()
            .map(|c| c.load(Ordering::Relaxed));
        s.ring_setup_failed = self.shared.ring_setup_failed.load(Ordering::Relaxed);
        s.bound_takeovers = self.shared.bound_takeovers.load(Ordering::Relaxed);
        s.ring_setup_errno = match self.shared.ring_setup_errno.load(Ordering::Relaxed) {
            0 => None,
            e => Some(e),
        };
        s.core_waits = self
            .shared
            .core_waits
            .each_ref()
            .map(|c| c.load(Ordering::Relaxed));
        s.core_wait_ns = self
            .shared
            .core_wait_ns
            .each_ref()
            .map(|c| c.load(Ordering::Relaxed));
        for (to, from) in s.wake_latency.iter_mut().zip(&self.shared.wake_latency) {
            *to = from.load(Ordering::Relaxed);
        }
        Ok(s)
    }

    /// Stops the engine: new requests fail, pending ones are served or
    /// cancelled per `mode` (`DrainFor(limit)`: served for up to `limit`,
    /// then cancelled), every buffer goes back to its submitter, and the
    /// service thread is joined. Returns the final counters.
    pub fn shutdown(mut self, mode: ShutdownMode) -> io::Result<EngineStats> {
        self.stop(mode)
    }

    fn stop(&mut self, mode: ShutdownMode) -> io::Result<EngineStats> {
        let Some(thread) = self.thread.take() else {
            return self.stats();
        };
        // Requests submitted from now on are not served by a `Drain`
        // (those still in plugs before this are).
        self.shared.stop_begun.store(true, Ordering::SeqCst);
        match mode {
            ShutdownMode::DrainFor(limit) => {
                self.begin_stop(ShutdownMode::Drain);
                if !self.shared.wait_service_exit(limit) {
                    self.begin_stop(ShutdownMode::Cancel);
                }
            }
            mode => self.begin_stop(mode),
        }
        if thread.join().is_err() {
            return Err(io::Error::other("the service thread panicked"));
        }
        self.stats()
    }

    /// Starts a `Drain` or a `Cancel` (also after a `Drain`): tells the
    /// core, and wakes every thread sleeping in its ring and the service
    /// thread, which finish or cancel what is theirs.
    fn begin_stop(&self, mode: ShutdownMode) {
        self.shared.core().begin_shutdown(mode);
        if mode == ShutdownMode::Cancel {
            self.shared.cancelling.store(true, Ordering::SeqCst);
        }
        // Owners blocked in their rings wake up (and cancel what is
        // theirs); the service thread does the rest.
        for r in self
            .shared
            .rings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            r.wake.signal();
            r.private_wake.signal();
        }
        self.shared.notify.signal();
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
    /// The engine's count of requests held (see [`crate::admit`]).
    admission: Arc<Admission>,
    /// What this flow's `Pending`s hold (see [`FlowDriver`]).
    driver: Arc<FlowDriver>,
    id: FlowId,
    sync: bool,
    /// The engine's checks of a request for its target.
    rules: TargetRules,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow").field("id", &self.id.0).finish()
    }
}

/// A request before it becomes an [`Op`].
struct Raw<'a> {
    kind: OpKind,
    file: Option<&'a FileTarget>,
    offset: u64,
    ptr: *mut u8,
    len: usize,
}

impl Flow {
    /// The scheduler's id of this flow.
    pub fn id(&self) -> FlowId {
        self.id
    }

    /// What the scheduler's mechanisms did for this flow so far: turns,
    /// the budgets granted, requests injected, service charged (see
    /// [`FlowInternals`]; `None` fields for a policy without them). Takes
    /// the core's lock once; for a driver that samples it over a run.
    pub fn internals(&self) -> io::Result<FlowInternals> {
        let r = self.shared.core().flow_internals(self.id);
        r.ok_or_else(|| io::Error::other("the scheduler panicked"))
    }

    /// Hands a request to the engine. `then_wait`: the caller blocks on
    /// it at once (its wait submits it, one syscall for both).
    fn submit<B: Send + 'static>(&self, r: Raw<'_>, buf: B, then_wait: bool) -> Pending<B> {
        let Raw {
            kind,
            file,
            offset,
            ptr,
            len,
        } = r;
        let (mine, sink) = crate::slot::acquire(buf);
        let mut pending = Pending::new(mine, self.driver.clone());
        let mut op = Op {
            kind,
            flow: self.id,
            offset,
            ptr,
            len: 0,
            sync: self.sync,
            file: file.cloned(),
            sink: Some(sink),
            before_stop: false,
        };
        let refusal = match u32::try_from(len) {
            Err(_) => Some(invalid("a request is at most 4 GiB - 1")),
            Ok(_) if offset.checked_add(len as u64).is_none() => Some(invalid(
                "a request must end below 2^64 bytes (offset + length < 2^64)",
            )),
            Ok(l) if file.is_none() && self.rules.refuses(kind, offset, l) => {
                Some(self.rules.refusal(kind, offset, l))
            }
            Ok(l) => {
                op.len = l;
                None
            }
        };
        if let Some(e) = refusal {
            self.admission.refuse_invalid();
            op.finish(Err(e));
            return pending;
        }
        // Counted in here; counted off by the core where it gives the
        // request its result (`Op::take_sink`).
        if !self.admission.admit() {
            op.finish(Err(self.admission.full_error()));
            return pending;
        }
        pending.set_hold(self.shared.submit(op, then_wait));
        pending
    }

    /// Starts reading `buf.len()` bytes at `offset`; await or
    /// [`wait`](Pending::wait) the result, which is as
    /// [`read`](Flow::read)'s (see its "Errors"). Never blocks: a request
    /// beyond [`EngineBuilder::max_requests`] resolves at once with
    /// `WouldBlock`.
    ///
    /// # When it is submitted
    ///
    /// In local mode (the default) the request first goes into the
    /// calling thread's plug, and is submitted at the thread's next wait,
    /// `poll` or [`is_done`](Pending::is_done) on any of this engine's
    /// requests, or when the plug holds 32. A future that is not polled
    /// (nor anything else done on the engine on that thread) leaves it
    /// there until the engine's service thread takes the thread's ring
    /// over: it looks every 1 ms and takes a ring whose owner has not been
    /// back since its previous look, so the request reaches the device
    /// typically a few ms late. Poll or await it soon after issuing it.
    /// (On a ring whose event loop defers submissions,
    /// [`ThreadRing::defer_submits`](crate::ThreadRing::defer_submits),
    /// a poll leaves it in the plug too, until the loop submits the plug.)
    /// In [`SubmitMode::Dispatcher`] the service thread submits it at
    /// once.
    pub fn read_async<B: IoBufMut>(&self, offset: u64, buf: B) -> Pending<B> {
        self.read_inner(None, offset, buf, false)
    }

    fn read_inner<B: IoBufMut>(
        &self,
        file: Option<&FileTarget>,
        offset: u64,
        mut buf: B,
        then_wait: bool,
    ) -> Pending<B> {
        let r = Raw {
            kind: OpKind::Read,
            file,
            offset,
            ptr: buf.stable_mut_ptr(),
            len: buf.bytes_len(),
        };
        self.submit(r, buf, then_wait)
    }

    fn write_inner<B: IoBuf>(
        &self,
        file: Option<&FileTarget>,
        offset: u64,
        buf: B,
        then_wait: bool,
    ) -> Pending<B> {
        let r = Raw {
            kind: OpKind::Write,
            file,
            offset,
            ptr: buf.stable_ptr() as *mut u8,
            len: buf.bytes_len(),
        };
        self.submit(r, buf, then_wait)
    }

    /// Starts writing `buf` at `offset`; await or
    /// [`wait`](Pending::wait) the result, which is as
    /// [`write`](Flow::write)'s (see [`read`](Flow::read)'s "Errors").
    /// Submitted as [`read_async`](Flow::read_async)'s request is: poll
    /// or await it soon after issuing it.
    pub fn write_async<B: IoBuf>(&self, offset: u64, buf: B) -> Pending<B> {
        self.write_inner(None, offset, buf, false)
    }

    /// Starts reading `buf.len()` bytes at `offset` of `file` (not the
    /// engine's target), scheduled with this flow's other requests.
    pub fn read_file_async<B: IoBufMut>(
        &self,
        file: &FileTarget,
        offset: u64,
        buf: B,
    ) -> Pending<B> {
        self.read_inner(Some(file), offset, buf, false)
    }

    /// Starts writing `buf` at `offset` of `file`.
    pub fn write_file_async<B: IoBuf>(&self, file: &FileTarget, offset: u64, buf: B) -> Pending<B> {
        self.write_inner(Some(file), offset, buf, false)
    }

    /// Reads `buf.len()` bytes at `offset`, blocking. The buffer always
    /// comes back, with the byte count or the error.
    ///
    /// # Errors
    ///
    /// `Ok(n)`: `n` bytes moved, always the whole buffer unless
    /// [`EngineBuilder::allow_short`] (an [`Engine::nop`] engine reports
    /// the whole length and moves nothing). Otherwise, by
    /// [`io::ErrorKind`] (each counted in [`EngineStats`] by how the
    /// request ended):
    ///
    /// | error | meaning |
    /// |---|---|
    /// | `UnexpectedEof` (read), `WriteZero` (write) | a short transfer (end of file, a device shrunk), the byte count in the message; `Ok(n)` with `allow_short(true)` |
    /// | `WouldBlock` | refused at the bound: the engine already held [`EngineBuilder::max_requests`] requests (the message names the bound); nothing was submitted, submit again once earlier requests are done |
    /// | `InvalidInput` | a bad request, refused before it was queued: longer than 4 GiB - 1, not ending below 2^64 bytes, a write to a target open read-only (the message names [`EngineBuilder::writable`]), on an `O_DIRECT` target an offset or length not a multiple of [`Engine::block_size`] where the kernel reports it (the message names it), or refused by the scheduler (the flow is unknown or closed); the engine and every other flow are unaffected |
    /// | `BrokenPipe` | a broken scheduler (it panicked: every request queued then fails so, and every later one), or the engine has stopped |
    /// | `ECANCELED` ([`raw_os_error`](io::Error::raw_os_error)) | shutdown: a `Cancel` shutdown or a `DrainFor` deadline cancelled it, or it was submitted after a shutdown began |
    /// | any other OS error ([`raw_os_error`](io::Error::raw_os_error)) | the device's, from the kernel as it is (`EIO`, `ENOSPC`, `ENXIO` for a removed device, `EINVAL`, ...): only this request fails, the engine serves on; an `EINVAL` for an `O_DIRECT` buffer not aligned to what the kernel reports is told as such (`InvalidInput`) |
    pub fn read<B: IoBufMut>(&self, offset: u64, buf: B) -> IoResult<B> {
        self.read_inner(None, offset, buf, true).wait()
    }

    /// Writes `buf` at `offset`, blocking. The buffer always comes back,
    /// with the byte count or the error.
    ///
    /// # Errors
    ///
    /// As [`read`](Flow::read)'s ("Errors"), with `WriteZero` for a short
    /// write and `InvalidInput` for a write to a target open read-only
    /// (open it with [`EngineBuilder::writable`]`(true)`).
    pub fn write<B: IoBuf>(&self, offset: u64, buf: B) -> IoResult<B> {
        self.write_inner(None, offset, buf, true).wait()
    }

    /// A request the scheduler sees as a read of `sectors` sectors at
    /// `sector`, served by an io_uring NOP (no storage touched); its
    /// result is its length, `sectors * 512` bytes. `sectors = 0` is an
    /// empty request (`Ok(0)`), which the scheduler sees as one sector,
    /// as it does an empty read.
    pub fn nop_async(&self, sector: u64, sectors: u32) -> Pending<()> {
        let len = (u64::from(sectors) * SECTOR_BYTES) as usize;
        let r = Raw {
            kind: OpKind::Nop,
            file: None,
            offset: sector.saturating_mul(SECTOR_BYTES),
            ptr: std::ptr::null_mut(),
            len,
        };
        self.submit(r, (), false)
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.shared.close_flow(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;
    use std::sync::atomic::AtomicU8;
    use std::sync::TryLockError;

    /// A buffer whose `Drop` (the user's code) records whether the
    /// engine's core lock was free while it ran, and then maybe panics.
    struct LockCheck {
        byte: Box<[u8; 1]>,
        shared: Arc<Shared>,
        /// 0: not dropped yet; 1: dropped with the lock free; 2: held.
        seen: Arc<AtomicU8>,
        panic: bool,
    }

    // SAFETY: the byte is boxed: it stays put while the value moves.
    unsafe impl IoBuf for LockCheck {
        fn stable_ptr(&self) -> *const u8 {
            self.byte.as_ptr()
        }
        fn bytes_len(&self) -> usize {
            1
        }
    }
    // SAFETY: as above, and the byte is writable.
    unsafe impl IoBufMut for LockCheck {
        fn stable_mut_ptr(&mut self) -> *mut u8 {
            self.byte.as_mut_ptr()
        }
    }

    impl Drop for LockCheck {
        /// The lock is free unless this thread holds it: another thread
        /// holds it for a moment only, so a bounded number of tries tells.
        fn drop(&mut self) {
            let free = (0..100_000).any(|_| match self.shared.core.try_lock() {
                Ok(_) | Err(TryLockError::Poisoned(_)) => true,
                Err(TryLockError::WouldBlock) => {
                    std::thread::yield_now();
                    false
                }
            });
            self.seen.store(if free { 1 } else { 2 }, Ordering::SeqCst);
            assert!(!self.panic, "a buffer whose drop panics");
        }
    }

    /// A pipe: (read end as a file target, write end).
    fn pipe() -> (FileTarget, File) {
        let mut fds = [0; 2];
        // SAFETY: plain syscall into a valid array; the result is checked.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: two fresh descriptors we own.
        let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        (FileTarget::new(r, 0), w)
    }

    /// A request whose submitter dropped its `Pending` first: the engine
    /// is the last holder of the buffer, and drops it when the request
    /// completes (a read of a pipe, completed by writing to the pipe after
    /// the drop). That drop is the user's code: it runs with the engine's
    /// core lock released (a `Drop` calling into the engine does not
    /// deadlock), and a panic there does not stop the engine (it serves
    /// the next request; its shutdown returns).
    #[test]
    fn a_buffer_the_engine_drops_runs_its_drop_outside_the_core_lock() {
        use std::io::Write;
        for mode in [SubmitMode::Local, SubmitMode::Dispatcher] {
            for panic in [false, true] {
                let engine = Engine::nop().submit_mode(mode).open().unwrap();
                let flow = engine.flow(FlowOptions::weight(100)).unwrap();
                let (target, mut w) = pipe();
                let seen = Arc::new(AtomicU8::new(0));
                let buf = LockCheck {
                    byte: Box::new([0]),
                    shared: engine.shared.clone(),
                    seen: seen.clone(),
                    panic,
                };
                drop(flow.read_file_async(&target, 0, buf));
                assert_eq!(seen.load(Ordering::SeqCst), 0, "the read is still waiting");
                w.write_all(b"x").unwrap();
                // The engine serves requests until the read's completion
                // has dropped the buffer, and after.
                let served = |what: &str| {
                    let (r, ()) = flow.nop_async(0, 1).wait();
                    assert!(r.is_ok(), "{mode:?} panic={panic}: {what}: {r:?}");
                };
                while seen.load(Ordering::SeqCst) == 0 {
                    served("before the buffer is dropped");
                }
                served("after the buffer is dropped");
                drop(flow);
                let stats = engine.shutdown(ShutdownMode::Drain);
                assert!(stats.is_ok(), "{mode:?} panic={panic}: {stats:?}");
                assert_eq!(
                    seen.load(Ordering::SeqCst),
                    1,
                    "{mode:?} panic={panic}: the buffer was dropped under the core lock"
                );
            }
        }
    }

    /// A request the scheduler held back (the device queue full) and
    /// dispatched when another thread's request completed goes on that
    /// thread's ring: it is counted as completed on a foreign ring, and
    /// its waiter is woken by that thread; requests completed on their
    /// own thread's ring are not counted so.
    #[test]
    fn a_request_dispatched_by_another_thread_counts_as_foreign() {
        use std::io::Write;
        let engine = Engine::nop().queue_depth(1).open().unwrap();
        let a = engine.flow(FlowOptions::weight(100)).unwrap();
        let b = engine.flow(FlowOptions::weight(100)).unwrap();
        let (target, mut w) = pipe();
        // On this thread's ring, in flight until the pipe is written.
        let read = a.read_file_async(&target, 0, vec![0u8; 1]);
        while engine.stats().unwrap().in_flight == 0 {
            assert!(!read.is_done(), "nothing was written to the pipe");
        }
        let stats = engine.stats().unwrap();
        assert_eq!((stats.foreign_completions, stats.cross_wakes), (0, 0));
        let waiter = std::thread::spawn(move || {
            b.nop_async(0, 1).wait().0.unwrap();
            b
        });
        // The other thread's request waits in the scheduler (the device
        // queue holds one request).
        while engine.stats().unwrap().queued == 0 {
            std::thread::yield_now();
        }
        w.write_all(b"x").unwrap();
        assert_eq!(read.wait().0.unwrap(), 1);
        let b = waiter.join().unwrap();
        let stats = engine.stats().unwrap();
        assert_eq!(stats.completed, 2);
        assert_eq!(stats.foreign_completions, 1, "{stats:?}");
        assert_eq!(stats.own_latency.iter().sum::<u64>(), 1);
        assert_eq!(stats.foreign_latency.iter().sum::<u64>(), 1);
        assert!(stats.cross_wakes + stats.service_completions >= 1);
        drop((a, b));
        engine.shutdown(ShutdownMode::Drain).unwrap();
    }

    /// A blocking wait on the private ring registers no waiter with the
    /// request's slot (the waiting thread completes the request itself);
    /// a wait on the thread's shared ring does (another thread may
    /// complete the request there and must wake it).
    #[test]
    fn a_private_wait_registers_no_waiter() {
        use crate::slot::REGISTERED;
        let registered = || REGISTERED.with(|r| r.get());
        for private in [true, false] {
            let engine = Engine::nop().private_rings(private).open().unwrap();
            let flow = engine.flow(FlowOptions::weight(100)).unwrap();
            let (mut private_waits, mut shared_waits) = (0, 0);
            for _ in 0..200 {
                let before = (engine.stats().unwrap().private_waits, registered());
                let (r, ()) = flow.nop_async(0, 1).wait();
                r.unwrap();
                let after = (engine.stats().unwrap().private_waits, registered());
                if after.0 > before.0 {
                    private_waits += 1;
                    assert_eq!(after.1, before.1, "a private wait registered a waiter");
                } else {
                    shared_waits += 1;
                    assert!(after.1 > before.1, "a shared wait registered no waiter");
                }
            }
            if private && private_waits == 0 {
                eprintln!("skipped: no private ring (DEFER_TASKRUN needs Linux 6.1)");
            }
            if !private {
                assert_eq!((private_waits, shared_waits), (0, 200));
            }
            drop(flow);
            engine.shutdown(ShutdownMode::Drain).unwrap();
        }
    }

    /// A shutdown is over only once every result taken from the core is
    /// delivered to its slot (results are delivered after the core's
    /// lock is released): the service thread's `done` waits for a ring
    /// still delivering.
    #[test]
    fn a_shutdown_waits_for_results_being_delivered() {
        let engine = Engine::nop().open().unwrap();
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        flow.nop_async(0, 1).wait().0.unwrap();
        let rings = engine.shared.rings.lock().unwrap().clone();
        let set = |on: bool| {
            for r in &rings {
                r.delivering.store(on, Ordering::SeqCst);
            }
        };
        set(true);
        engine.shared.core().begin_shutdown(ShutdownMode::Drain);
        let shared = engine.shared.clone();
        let look = std::thread::spawn(move || shared.done());
        // However long this thread is descheduled, `done` cannot return
        // before the delivery ends.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!look.is_finished(), "done while a ring delivers results");
        set(false);
        assert!(look.join().unwrap());
        drop((rings, flow));
        engine.shutdown(ShutdownMode::Drain).unwrap();
    }

    /// A thread that exits with a request on its ring reaps it and
    /// delivers its result under the core's lock (its ring, with nothing
    /// in flight, may leave the list the service thread's `done` looks
    /// at): a `Drain` shutdown does not return while that delivery is
    /// paused, and the result is in once it has.
    #[test]
    fn a_shutdown_waits_for_an_exiting_threads_delivery() {
        use crate::driver::delivery_gate;
        use std::io::Write;
        let mut paused = 0;
        // The exiting thread reaps its request itself unless the service
        // thread took its lingering ring over first (a thread descheduled
        // for over a millisecond): tried again then.
        for _ in 0..20 {
            let engine = Engine::nop().open().unwrap();
            let flow = engine.flow(FlowOptions::weight(100)).unwrap();
            let gate = delivery_gate::close(engine.shared.id);
            let (target, mut w) = pipe();
            let exiting = std::thread::scope(|sc| {
                let t = sc.spawn(|| {
                    let read = flow.read_file_async(&target, 0, vec![0u8; 1]);
                    // Its wait puts both requests on this thread's ring.
                    flow.nop_async(0, 1).wait().0.unwrap();
                    w.write_all(b"x").unwrap();
                    read
                });
                if !gate.reached(|| t.is_finished()) {
                    gate.open();
                    drop(t.join().unwrap().wait());
                    return None;
                }
                let shared = engine.shared.clone();
                let stop = std::thread::spawn(move || engine.shutdown(ShutdownMode::Drain));
                // However long this thread is descheduled, the shutdown
                // cannot return before the delivery ends.
                for _ in 0..1000 {
                    if stop.is_finished() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let early = stop.is_finished();
                gate.open();
                let read = t.join().unwrap();
                Some((early, stop, read, shared))
            });
            let Some((early, stop, read, shared)) = exiting else {
                continue;
            };
            paused += 1;
            let stats = stop.join().unwrap();
            let (r, buf) = read.wait();
            assert!(
                !early,
                "the shutdown returned while an exiting thread delivered"
            );
            assert!(stats.is_ok(), "{stats:?}");
            assert_eq!((r.unwrap(), buf), (1, vec![b'x']));
            drop((flow, shared));
            break;
        }
        assert_eq!(paused, 1, "no exiting thread delivered its own result");
    }

    /// A request the scheduler still queues when a `Cancel` shutdown
    /// fails it, whose submitter dropped its `Pending` first: its buffer's
    /// drop runs with the core lock released too.
    #[test]
    fn a_queued_request_cancelled_drops_its_buffer_outside_the_core_lock() {
        let engine = Engine::nop()
            .scheduler("fifo")
            .queue_depth(1)
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        // The device's one slot: a read of a pipe nobody writes to.
        let (first, _w1) = pipe();
        let busy = flow.read_file_async(&first, 0, vec![0u8; 1]);
        let (second, _w2) = pipe();
        let seen = Arc::new(AtomicU8::new(0));
        let buf = LockCheck {
            byte: Box::new([0]),
            shared: engine.shared.clone(),
            seen: seen.clone(),
            panic: false,
        };
        let queued = flow.read_file_async(&second, 0, buf);
        // Hands this thread's plug to the scheduler: the read is queued.
        assert!(!queued.is_done());
        drop(queued);
        assert_eq!(seen.load(Ordering::SeqCst), 0);
        engine.shutdown(ShutdownMode::Cancel).unwrap();
        assert_eq!(
            seen.load(Ordering::SeqCst),
            1,
            "the buffer was dropped under the core lock"
        );
        let (r, _) = busy.wait();
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
    }
}
