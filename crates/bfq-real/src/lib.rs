//! # bfq-real
//!
//! Real runs: a workload's flows as real threads against a regular file or
//! a block device, either through a [`bfq_engine::Engine`] with one of the
//! project's schedulers or, for `kernel:*` backends, with each flow's
//! thread submitting directly under one of the kernel's schedulers.
//! `bfq run`, `bfq bench-engine` and the suite's real-storage experiment
//! use it; servers embedding the engine do not need it.
//!
//! - [`desc`]: what to run ([`FlowDesc`], [`GroupDesc`], [`Backend`],
//!   [`RunConfig`]).
//! - [`flowspec`]: flows and groups given as `key=value` lists (`bfq run
//!   --flow`, `--group`), planned by the scenario model's checks.
//! - [`scenario`]: a planned scenario (the format of `bfq sim`) as flows
//!   and groups, and a run's results in the simulator's JSON format.
//! - [`run()`]: the driver, and the engine side of a run (one thread per
//!   flow).
//! - `runtime_client`: an engine run's flows served by one tokio
//!   runtime per CPU instead ([`EngineClient::ThreadPerCore`]).
//! - [`kernel`]: the kernel side of a run; where threads are put into
//!   cgroups and given their I/O priorities.
//! - [`flowproc`]: `kernel:*` flows as processes of their own (cgroup v2).
//! - [`sys`]: the kernel peers: loop devices, a block device's scheduler,
//!   blkio cgroups, I/O priorities, mount checks, interrupt handling.
//!   Every resource is a guard undone on drop.
//! - [`signature`]: what a write run would destroy (filesystem,
//!   partition table, swap and encrypted volume signatures).
//! - [`leftovers`]: what a run notes of its changes so that `bfq cleanup`
//!   can undo them after a SIGKILL, and that cleanup.
//! - [`report`]: what a run did.
//! - [`warmup`]: a sequential reader alone before the measured flows, so
//!   that a scheduler learning the device's peak rate starts warm.
//! - [`cpu_probe`] and [`cpu_busy`]: what a benchmark round ran on: how
//!   far apart two CPUs are, and how busy the CPUs were.

#![warn(missing_docs)]

pub mod cpu_busy;
pub mod cpu_probe;
pub mod desc;
pub mod flowproc;
pub mod flowspec;
pub mod kernel;
pub mod leftovers;
pub mod outfile;
mod pace;
pub mod report;
mod run;
mod runtime_client;
pub mod scenario;
pub mod signature;
pub mod sys;
pub mod timeline;
mod trace;
pub mod warmup;

pub use desc::{
    prio, Backend, Dir, EngineClient, FlowDesc, GroupDesc, KernelClient, KernelGroups, OnOff,
    Pattern, Periodic, RunConfig,
};
pub use report::{ring_setup_warning, FlowReport, RunReport};
pub use run::{
    children_cpu_seconds, create_filled, layout, process_cpu_seconds, run, target_len, target_size,
};

/// Heap allocations counted per thread, for the tests that check a flow's
/// requests allocate nothing once its buffers are in place.
#[cfg(test)]
pub(crate) mod alloc_count {
    use bfq_alloc_count::PerThread;

    #[global_allocator]
    static A: PerThread = PerThread;

    /// Runs `f` and returns its result with the allocations the calling
    /// thread made meanwhile.
    pub(crate) fn during<R>(f: impl FnOnce() -> R) -> (R, u64) {
        let before = PerThread::allocations();
        let r = f();
        (r, PerThread::allocations() - before)
    }

    /// What the allocation tests drive a flow over: a 1 MiB file of ones
    /// in a fresh directory (gone with the returned `TempDir`), and the
    /// patterns: sequential, random, and a replay of three sizes (16 KiB
    /// a round, as a trace's requests).
    pub(crate) fn file_and_patterns() -> (tempfile::TempDir, std::path::PathBuf, [crate::Pattern; 3])
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let replay = crate::Pattern::Replay(vec![(0, 4096), (8192, 8192), (32768, 4096)]);
        (
            dir,
            path,
            [crate::Pattern::Seq, crate::Pattern::Rand, replay],
        )
    }
}
