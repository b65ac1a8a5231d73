//! Plain data of the scheduler interface: time, identifiers, requests,
//! flows, groups, the device description and the dispatch decision.

/// Time in nanoseconds since an arbitrary origin chosen by the driver
/// (simulator or engine). The core never reads a clock.
pub type Time = u64;

/// One millisecond in [`Time`] units.
pub const MS: Time = 1_000_000;
/// One microsecond in [`Time`] units.
pub const US: Time = 1_000;
/// One second in [`Time`] units.
pub const SEC: Time = 1_000_000_000;

/// Size of a sector: every length and position is in 512-byte sectors.
pub const SECTOR_BYTES: u64 = 512;

/// The largest time a driver may pass: 2^62 ns (about 146 years after its
/// origin). Every setting's duration is at most an hour
/// ([`crate::settings::MAX_DURATION`]), so no deadline a scheduler
/// computes overflows. Later times are refused
/// ([`crate::table::check_time`]); an `Idle` answer within the last hour
/// may name a time past it, where the scheduler's clock has ended.
pub const MAX_TIME: Time = 1 << 62;

/// The low bits of a [`FlowId`] or [`GroupId`] index the scheduler's
/// tables; the bits above are the generation of that index.
pub const ID_INDEX_BITS: u32 = 22;

/// How many flows (and, separately, groups) one scheduler holds at once at
/// most: 2^22. Creating more is refused with
/// [`crate::SchedError::TooManyIds`].
pub const MAX_LIVE_IDS: usize = 1 << ID_INDEX_BITS;

const ID_INDEX_MASK: u32 = (1 << ID_INDEX_BITS) - 1;

/// Identifies a flow (an application, process or tenant: the unit that gets
/// a share). Assigned by the scheduler in [`crate::Scheduler::add_flow`].
///
/// The first 2^22 flows of a scheduler get `0, 1, 2, ...`; once flows have
/// been removed, their table entries are reused with a new generation in
/// the id's upper bits, so memory stays flat however many flows come and
/// go. An id of a removed flow is refused until its index has been reused
/// 1024 times (the generation wraps); each reuse waits until 256 other
/// indexes are free, so that takes at least 256 K flows created after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u32);

impl FlowId {
    /// The table index of this id (its low [`ID_INDEX_BITS`] bits).
    #[inline]
    pub const fn index(self) -> usize {
        (self.0 & ID_INDEX_MASK) as usize
    }
}

/// Identifies a group (like a cgroup). [`GroupId::ROOT`] always exists.
/// Indexes are reused with a generation as for [`FlowId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u32);

impl GroupId {
    /// The root group, parent of every top-level group and flow.
    pub const ROOT: GroupId = GroupId(0);

    /// The table index of this id (its low [`ID_INDEX_BITS`] bits).
    #[inline]
    pub const fn index(self) -> usize {
        (self.0 & ID_INDEX_MASK) as usize
    }
}

/// Identifies a request. Chosen by the caller; must be unique among the
/// requests the scheduler currently holds (queued or in flight).
pub type ReqId = u64;

/// Direction of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read from the device.
    Read,
    /// Write to the device.
    Write,
}

/// I/O priority class, as `ionice -c`: served in strict priority
/// RT > BE > IDLE (an IDLE flow is still served after a starvation
/// timeout, 200 ms for BFQ).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IoClass {
    /// Real time: served before every best-effort and idle flow.
    Rt = 0,
    /// Best effort: the default class.
    Be = 1,
    /// Idle: served only when no other class has requests (after a starvation timeout anyway).
    Idle = 2,
}

impl IoClass {
    /// Number of classes.
    pub const COUNT: usize = 3;
    /// All classes in service order.
    pub const ALL: [IoClass; 3] = [IoClass::Rt, IoClass::Be, IoClass::Idle];

    /// Parses `rt`, `be` or `idle` (case-insensitive).
    pub fn parse(s: &str) -> Option<IoClass> {
        match s.to_ascii_lowercase().as_str() {
            "rt" | "realtime" | "real-time" => Some(IoClass::Rt),
            "be" | "best-effort" | "besteffort" => Some(IoClass::Be),
            "idle" => Some(IoClass::Idle),
            _ => None,
        }
    }

    /// Lower-case name, as accepted by [`IoClass::parse`].
    pub fn as_str(self) -> &'static str {
        match self {
            IoClass::Rt => "rt",
            IoClass::Be => "be",
            IoClass::Idle => "idle",
        }
    }
}

/// I/O priority: class and level 0 (highest) ..= 7 (lowest), as `ionice`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IoPrio {
    /// Priority class.
    pub class: IoClass,
    /// Level within the class, 0 (highest) ..= 7 (lowest); sets the default weight.
    pub level: u8,
}

impl IoPrio {
    /// The default priority of a process: best effort, level 4.
    pub const DEFAULT: IoPrio = IoPrio {
        class: IoClass::Be,
        level: 4,
    };

    /// The weight a flow gets from its priority level when no explicit
    /// weight is given: `(8 - level) * 10`, as today's kernel BFQ does
    /// (level 4 -> 40).
    pub fn default_weight(self) -> u32 {
        (8 - u32::from(self.level.min(7))) * 10
    }
}

impl Default for IoPrio {
    fn default() -> Self {
        IoPrio::DEFAULT
    }
}

/// Minimum weight of a flow or group.
pub const MIN_WEIGHT: u32 = 1;
/// Maximum weight of a flow or group.
pub const MAX_WEIGHT: u32 = 1000;
/// Default weight of a group (as the kernel's `bfq.weight`).
pub const DEFAULT_GROUP_WEIGHT: u32 = 100;

/// How to create a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Explicit weight 1..=1000; `None` derives it from `prio.level`.
    pub weight: Option<u32>,
    /// I/O priority class and level.
    pub prio: IoPrio,
    /// Parent group.
    pub group: GroupId,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            weight: None,
            prio: IoPrio::DEFAULT,
            group: GroupId::ROOT,
        }
    }
}

impl FlowSpec {
    /// A best-effort flow with the given weight in the root group.
    pub fn with_weight(weight: u32) -> Self {
        FlowSpec {
            weight: Some(weight),
            ..FlowSpec::default()
        }
    }

    /// The weight this spec gives: the explicit one or the level's default.
    pub fn effective_weight(&self) -> u32 {
        self.weight.unwrap_or_else(|| self.prio.default_weight())
    }
}

/// One I/O request as the scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Caller-chosen identifier, unique among held requests.
    pub id: ReqId,
    /// The flow that issued it.
    pub flow: FlowId,
    /// First sector.
    pub sector: u64,
    /// Length in sectors (> 0).
    pub sectors: u32,
    /// Read or write.
    pub op: Op,
    /// Synchronous: the issuer waits for it before issuing more (reads,
    /// O_DIRECT/O_SYNC writes). Asynchronous: writeback, read-ahead, or a
    /// flow keeping several requests outstanding.
    pub sync: bool,
}

impl Request {
    /// The sector just past the end of the request.
    pub fn end(&self) -> u64 {
        self.sector + u64::from(self.sectors)
    }
}

/// What the driver tells the scheduler about the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// How many requests the driver lets be outstanding on the device:
    /// `1..=`[`DeviceInfo::MAX_QUEUE_DEPTH`]; schedulers take a larger
    /// value as the maximum and 0 as 1 ([`DeviceInfo::depth`]).
    pub queue_depth: u32,
    /// The device reorders queued commands itself (NCQ/TCQ, SSD, virtual
    /// disk). BFQ does not idle for throughput on such devices.
    pub queues_internally: bool,
    /// Rotational medium (seek and rotational latency dominate).
    pub rotational: bool,
}

impl DeviceInfo {
    /// The deepest device queue a scheduler plans for (the kernel's
    /// `nr_requests` limit is of the same order).
    pub const MAX_QUEUE_DEPTH: u32 = 1 << 16;

    /// `queue_depth` within `1..=MAX_QUEUE_DEPTH`.
    pub fn depth(&self) -> u32 {
        self.queue_depth.clamp(1, Self::MAX_QUEUE_DEPTH)
    }
}

impl Default for DeviceInfo {
    fn default() -> Self {
        DeviceInfo {
            queue_depth: 1,
            queues_internally: false,
            rotational: true,
        }
    }
}

/// The scheduler's answer to [`crate::Scheduler::dispatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Send this request to the device now.
    Request(Request),
    /// Keep the device idle: call `dispatch` again at `until` (or earlier,
    /// after any new request or completion). BFQ returns this while idling
    /// for the active flow's next request; throttling policies return it
    /// while waiting for tokens.
    Idle {
        /// When to ask again, in ns; always later than the `now` of the
        /// call.
        until: Time,
    },
    /// Requests are held but none may go now; call `dispatch` again after
    /// the next completion or new request (e.g. waiting for in-flight
    /// requests to drain). Also the answer to a `now` past [`MAX_TIME`].
    Wait,
    /// Nothing is queued.
    Empty,
}
