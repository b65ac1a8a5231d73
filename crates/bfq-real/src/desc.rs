//! What a real run runs: flows described in a small, scenario-independent
//! form ([`FlowDesc`], [`GroupDesc`]), who schedules them ([`Backend`]) and
//! how the run is set up ([`RunConfig`]). `bfq run` converts scenario
//! flows to these ([`crate::scenario`]); the benchmarks build them directly.

use bfq_core::{IoClass, IoPrio, Settings};
use serde::{Deserialize, Serialize};
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Access pattern of a flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Pattern {
    /// Sequential through the region, wrapping around.
    Seq,
    /// Uniformly random block-aligned offsets in the region.
    Rand,
    /// These (offset relative to the region, length) requests in order.
    Replay(Vec<(u64, u32)>),
}

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dir {
    /// Read.
    Read,
    /// Write (refused unless the run allows writes).
    Write,
}

/// One flow of a workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowDesc {
    /// Name in reports; unique within a run.
    pub name: String,
    /// Read or write.
    pub dir: Dir,
    /// Where in its region requests go.
    pub pattern: Pattern,
    /// Request size in bytes.
    pub block: u32,
    /// Requests kept outstanding.
    pub depth: u32,
    /// Whether the scheduler sees the requests as synchronous. Linux flags
    /// every read, and every `O_DIRECT` write, synchronous whatever the
    /// depth; a scenario's `sync = false` flow (simulated asynchronous
    /// I/O, e.g. writeback) is not.
    pub sync: bool,
    /// Region `(offset, len)` in bytes; `None` = an equal share of the
    /// target laid out after the explicit regions.
    pub region: Option<(u64, u64)>,
    /// Stop after this many bytes (per repetition); `None` = until the run ends.
    pub bytes: Option<u64>,
    /// Pause between a completion and the next request.
    pub think: Duration,
    /// ON/OFF: move a number of bytes uniform in `on_bytes`, then stay
    /// silent for a time uniform in `off`, and again.
    pub on_off: Option<OnOff>,
    /// Periodic: every `every`, release a batch of `bytes`.
    pub periodic: Option<Periodic>,
    /// Runs of the `bytes` budget (default 1): a scenario's `runs`.
    pub runs: u32,
    /// Pause after each run but the last: a scenario's `repeat`.
    pub repeat: Duration,
    /// Start this long after the run starts (with `after`: at the earliest).
    pub start: Duration,
    /// Issue nothing from this long after the run starts (requests in
    /// flight complete); `None`: until the run ends.
    pub stop: Option<Duration>,
    /// Issue nothing from this long after the flow's first request.
    pub duration: Option<Duration>,
    /// Names of flows of the run that must all have ended (their threads
    /// done) before this one starts.
    pub after: Vec<String>,
    /// Explicit weight; `None` derives it from the level.
    pub weight: Option<u32>,
    /// I/O priority class and level (the weight's default).
    #[serde(with = "prio_wire")]
    pub prio: IoPrio,
    /// Group name (see [`GroupDesc`]); `None` = root.
    pub group: Option<String>,
}

impl FlowDesc {
    /// A greedy synchronous reader of `block`-byte requests.
    pub fn reader(name: &str, pattern: Pattern, block: u32) -> Self {
        FlowDesc {
            name: name.to_string(),
            dir: Dir::Read,
            pattern,
            block,
            depth: 1,
            sync: true,
            region: None,
            bytes: None,
            think: Duration::ZERO,
            on_off: None,
            periodic: None,
            runs: 1,
            repeat: Duration::ZERO,
            start: Duration::ZERO,
            stop: None,
            duration: None,
            after: Vec::new(),
            weight: None,
            prio: IoPrio::DEFAULT,
            group: None,
        }
    }

    /// The weight the flow gets.
    pub fn effective_weight(&self) -> u32 {
        self.weight.unwrap_or_else(|| self.prio.default_weight())
    }
}

/// An I/O priority as a flow's process receives it: `[class, level]`,
/// class 0 real time, 1 best effort, 2 idle.
mod prio_wire {
    use bfq_core::{IoClass, IoPrio};
    use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(p: &IoPrio, s: S) -> Result<S::Ok, S::Error> {
        (p.class as u8, p.level).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<IoPrio, D::Error> {
        let (c, level): (u8, u8) = Deserialize::deserialize(d)?;
        let class = match c {
            0 => IoClass::Rt,
            1 => IoClass::Be,
            2 => IoClass::Idle,
            _ => return Err(de::Error::custom(format!("I/O class {c} is not 0, 1 or 2"))),
        };
        Ok(IoPrio { class, level })
    }
}

/// ON/OFF behaviour (ranges are inclusive, sampled uniformly).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OnOff {
    /// Bytes of an ON phase, uniform in `lo..=hi`.
    pub on_bytes: (u64, u64),
    /// Length of an OFF phase, uniform in `lo..=hi`.
    pub off: (Duration, Duration),
}

/// Periodic behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Periodic {
    /// Period.
    pub every: Duration,
    /// Bytes per batch.
    pub bytes: u64,
}

/// A group of flows (engine groups; nested blkio cgroups on the kernel side).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDesc {
    /// Name flows refer to; unique within a run.
    pub name: String,
    /// Weight 1..=1000 in the parent's tree.
    pub weight: u32,
    /// Parent group (None: the root).
    pub parent: Option<String>,
}

/// Who schedules.
#[derive(Clone, Debug, PartialEq)]
pub enum Backend {
    /// The engine with a scheduler of the registry.
    Engine {
        /// Scheduler registry name (`bfq`, `fifo`, ...).
        scheduler: String,
        /// Its settings.
        settings: Settings,
    },
    /// The kernel's scheduler of the block device (`bfq`, `mq-deadline`,
    /// `kyber`, `none`).
    Kernel {
        /// The kernel scheduler's name as `/sys/block/DEV/queue/scheduler`
        /// lists it.
        scheduler: String,
    },
}

/// The kernel's schedulers a `kernel:NAME` backend may name.
pub const KERNEL_SCHEDULERS: [&str; 4] = ["bfq", "mq-deadline", "kyber", "none"];

/// Refuses a kernel scheduler name not in [`KERNEL_SCHEDULERS`], naming
/// them.
pub fn check_kernel_scheduler(name: &str) -> Result<(), String> {
    if KERNEL_SCHEDULERS.contains(&name) {
        return Ok(());
    }
    Err(format!(
        "unknown kernel scheduler '{name}' (kernel:{})",
        KERNEL_SCHEDULERS.join(", kernel:")
    ))
}

impl Backend {
    /// Parses `--scheduler`: `kernel:NAME` or a registry name.
    pub fn parse(s: &str, settings: Settings) -> Backend {
        match s.strip_prefix("kernel:") {
            Some(k) => Backend::Kernel {
                scheduler: k.to_string(),
            },
            None => Backend::Engine {
                scheduler: s.to_string(),
                settings,
            },
        }
    }

    /// `fifo`, `bfq`, `kernel:bfq`...
    pub fn label(&self) -> String {
        match self {
            Backend::Engine { scheduler, .. } => scheduler.clone(),
            Backend::Kernel { scheduler } => format!("kernel:{scheduler}"),
        }
    }
}

/// How `kernel:*` runs place flow threads in cgroups.
///
/// The kernel's BFQ honours arbitrary per-flow weights and groups only
/// through cgroups, but a cgroup per flow also changes what it does: it
/// then schedules *groups*, idling on each group's behalf before serving
/// another, and a loop device gets one worker per cgroup. A program whose
/// threads share one cgroup (fio's jobs, any multi-threaded server) gets
/// neither.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KernelGroups {
    /// Each flow in its own blkio cgroup carrying its weight, groups as
    /// nested cgroups (the only way to give the kernel arbitrary weights).
    #[default]
    PerFlow,
    /// Every flow thread stays in the run's own cgroup, weighed by the
    /// kernel from its I/O priority: only runs whose flows' weights are
    /// their levels' ((8 - level) * 10) or all equal, without groups.
    One,
    /// Each flow a process of its own ([`crate::flowproc`]) in its own
    /// cgroup: what `PerFlow` does on cgroup v2, whose io controller takes
    /// processes, not threads; on cgroup v1 it can be asked for.
    PerProcess,
}

impl KernelGroups {
    /// Parses `per-flow` or `one`.
    pub fn parse(s: &str) -> Option<KernelGroups> {
        match s {
            "per-flow" => Some(KernelGroups::PerFlow),
            "one" => Some(KernelGroups::One),
            "per-process" => Some(KernelGroups::PerProcess),
            _ => None,
        }
    }

    /// `per-flow`, `one` or `per-process`.
    pub fn name(self) -> &'static str {
        match self {
            KernelGroups::PerFlow => "per-flow",
            KernelGroups::One => "one",
            KernelGroups::PerProcess => "per-process",
        }
    }
}

/// How a `kernel:*` flow of depth 1 issues its requests.
///
/// The engine's flows submit through io_uring: each flow thread pushes its
/// request on its own ring and waits for the completion in
/// `io_uring_enter`. [`KernelClient::Uring`] does the same on the kernel
/// side, so that a comparison of a kernel scheduler with the engine's
/// differs in the scheduler, not in the clients; [`KernelClient::Pread`]
/// issues blocking `pread`/`pwrite` calls instead (the block layer's
/// synchronous direct-I/O path, as `fio --ioengine=psync`). Flows deeper
/// than 1 always use their own ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KernelClient {
    /// Each flow thread submits through its own io_uring ring and waits
    /// in `io_uring_enter` (default: as the engine's flows).
    #[default]
    Uring,
    /// Each flow thread issues blocking `pread`/`pwrite` calls.
    Pread,
}

impl KernelClient {
    /// Parses `uring` or `pread`.
    pub fn parse(s: &str) -> Option<KernelClient> {
        match s {
            "uring" => Some(KernelClient::Uring),
            "pread" => Some(KernelClient::Pread),
            _ => None,
        }
    }

    /// `uring` or `pread`.
    pub fn name(self) -> &'static str {
        match self {
            KernelClient::Uring => "uring",
            KernelClient::Pread => "pread",
        }
    }
}

/// Who drives an engine run's flows.
/// [`EngineClient::Threads`] gives each flow a blocking thread of its
/// own, which keeps the flow's `depth` requests out; with
/// [`EngineClient::ThreadPerCore`] one current-thread tokio runtime per
/// CPU the run may use (its thread pinned there, its ring bound to the
/// runtime with `Engine::thread_ring`, its tasks' submissions deferred
/// to the runtime's park) serves every flow, each flow's
/// `depth` requests being tasks of one read each spread over the
/// runtimes in turn, as a thread-per-core server on an async runtime
/// would issue them (docs/engine.md, "Thread-per-core servers").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineClient {
    /// One blocking thread per flow (default).
    #[default]
    Threads,
    /// One tokio runtime per CPU, a task per request kept out.
    ThreadPerCore,
}

impl EngineClient {
    /// Parses `threads` or `tpc`.
    pub fn parse(s: &str) -> Option<EngineClient> {
        match s {
            "threads" => Some(EngineClient::Threads),
            "tpc" => Some(EngineClient::ThreadPerCore),
            _ => None,
        }
    }

    /// `threads` or `tpc`.
    pub fn name(self) -> &'static str {
        match self {
            EngineClient::Threads => "threads",
            EngineClient::ThreadPerCore => "tpc",
        }
    }
}

/// A run of a workload.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Regular file or block device the flows read and write.
    pub target: PathBuf,
    /// Who schedules.
    pub backend: Backend,
    /// Stop after this long (flows with a byte budget may end earlier).
    pub duration: Duration,
    /// `O_DIRECT` (default true).
    pub direct: bool,
    /// Writes are refused unless this is set.
    pub allow_writes: bool,
    /// Writes are refused, even when allowed, to a target whose start holds
    /// a filesystem, partition table, swap area or encrypted volume
    /// ([`crate::signature`]) unless this is set too.
    pub force_overwrite: bool,
    /// The engine's device queue depth.
    pub queue_depth: u32,
    /// Size of a regular-file target to create (filled with data) if it
    /// does not exist.
    pub create_size: Option<u64>,
    /// Groups of the flows (parents before children).
    pub groups: Vec<GroupDesc>,
    /// How `kernel:*` runs place flows in cgroups.
    pub kernel_groups: KernelGroups,
    /// How `kernel:*` flows of depth 1 issue requests (default
    /// [`KernelClient::Uring`], as the engine's flows).
    pub kernel_client: KernelClient,
    /// Nice value of the engine's service thread
    /// (`EngineBuilder::service_nice`): in local mode it serves idle
    /// timers and the rings flow threads left; in dispatcher mode it
    /// submits and reaps every request.
    pub dispatcher_nice: i32,
    /// Who submits (each flow's thread on its own ring, or, in dispatcher
    /// mode, the engine's service thread for all).
    pub submit_mode: bfq_engine::SubmitMode,
    /// Local mode: a lone blocking wait may use the thread's private ring
    /// (`EngineBuilder::private_rings`; default on).
    pub private_rings: bool,
    /// Local mode: whether rings are set up with `COOP_TASKRUN`
    /// (`EngineBuilder::coop_taskrun`; default `Auto`).
    pub coop_taskrun: bfq_engine::CoopTaskrun,
    /// Who drives the flows of an engine run (default
    /// [`EngineClient::Threads`]).
    pub client: EngineClient,
    /// Engine reads and writes go through io_uring's workers (IOSQE_ASYNC).
    pub async_submit: bool,
    /// Engine submissions through an SQPOLL kernel thread (idle ms; 0 = off).
    pub sqpoll_idle_ms: u32,
    /// Interval of each flow's throughput series.
    pub series_interval: Duration,
    /// Read the engine's scheduler for each flow every this long
    /// ([`crate::timeline`]: turns, budgets, injected requests, charged
    /// service) into [`crate::RunReport::timeline`]; engine backends only,
    /// nothing for kernel:* (default None: not read). At least
    /// [`crate::timeline::MIN_INTERVAL`], at most
    /// [`crate::timeline::MAX_POINTS`] points over `duration`.
    pub timeline: Option<Duration>,
    /// Write the simulator's trace CSV (`t_ns,event,flow,req,sector,
    /// sectors,op`; engine backends only) to this file, or to standard
    /// output when the path is `-`.
    pub trace: Option<PathBuf>,
    /// Before the flows, one sequential reader reads alone for this long
    /// through the same scheduler, so that a scheduler that learns the
    /// device's peak rate starts the flows with it ([`crate::warmup`];
    /// more than 0 and at most 60 s; default None: a cold start).
    pub warm_up: Option<Duration>,
    /// Where the caller catches SIGINT and SIGTERM
    /// ([`crate::sys::catch_interrupts`]): end the flows early and report
    /// what they did until then ([`crate::RunReport::interrupted`]) rather
    /// than fail (default false: the run fails with
    /// `ErrorKind::Interrupted`). An engine run's trace is then not put in
    /// place.
    pub keep_partial: bool,
}

impl RunConfig {
    /// A run of `backend` on `target` for `duration`, with the defaults of the other fields.
    pub fn new(target: impl Into<PathBuf>, backend: Backend, duration: Duration) -> Self {
        RunConfig {
            target: target.into(),
            backend,
            duration,
            direct: true,
            allow_writes: false,
            force_overwrite: false,
            queue_depth: 64,
            create_size: None,
            groups: Vec::new(),
            kernel_groups: KernelGroups::PerFlow,
            kernel_client: KernelClient::Uring,
            dispatcher_nice: 0,
            submit_mode: bfq_engine::SubmitMode::default(),
            private_rings: true,
            coop_taskrun: bfq_engine::CoopTaskrun::Auto,
            client: EngineClient::Threads,
            async_submit: false,
            sqpoll_idle_ms: 0,
            series_interval: Duration::from_secs(1),
            timeline: None,
            trace: None,
            warm_up: None,
            keep_partial: false,
        }
    }
}

/// Convenience: the priority of a flow from class and level.
pub fn prio(class: IoClass, level: u8) -> IoPrio {
    IoPrio { class, level }
}

/// The groups ordered so that every parent comes before its children;
/// an error names groups whose parent is unknown or part of a cycle.
pub(crate) fn parents_first(groups: &[GroupDesc]) -> io::Result<Vec<&GroupDesc>> {
    let mut done: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(groups.len());
    let mut todo: Vec<&GroupDesc> = groups.iter().collect();
    while !todo.is_empty() {
        let before = todo.len();
        let (ready, rest): (Vec<&GroupDesc>, Vec<&GroupDesc>) = todo
            .into_iter()
            .partition(|g| g.parent.as_deref().is_none_or(|p| done.contains(p)));
        for g in ready {
            done.insert(&g.name);
            out.push(g);
        }
        if rest.len() == before {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "groups with unknown or cyclic parents",
            ));
        }
        todo = rest;
    }
    Ok(out)
}

/// A group of weight 100 (tests).
#[cfg(test)]
pub(crate) fn test_group(name: &str, parent: Option<&str>) -> GroupDesc {
    GroupDesc {
        name: name.into(),
        weight: 100,
        parent: parent.map(Into::into),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str, parent: Option<&str>) -> GroupDesc {
        test_group(name, parent)
    }

    #[test]
    fn groups_come_parents_first_and_cycles_are_refused() {
        let groups = [
            g("a/b/c", Some("a/b")),
            g("a/b", Some("a")),
            g("a", None),
            g("d", None),
        ];
        let order: Vec<&str> = parents_first(&groups)
            .unwrap()
            .iter()
            .map(|g| g.name.as_str())
            .collect();
        let pos = |n: &str| order.iter().position(|x| *x == n).unwrap();
        assert_eq!(order.len(), 4);
        assert!(pos("a") < pos("a/b") && pos("a/b") < pos("a/b/c"));
        let cyclic = [g("x", Some("y")), g("y", Some("x"))];
        assert_eq!(
            parents_first(&cyclic).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(parents_first(&[g("x", Some("missing"))]).is_err());
    }
}
