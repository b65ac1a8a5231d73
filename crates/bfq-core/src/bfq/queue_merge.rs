//! Early queue merging of cooperating flows (heuristic 8; switch
//! `queue_merge`). Reference "Queue merging"; kernel behaviour re-derived.
//!
//! Processes that read one file in interleaved chunks (qemu's I/O threads,
//! multi-threaded readers) each look sequential-but-gappy; served one at a
//! time the disk seeks over the other's chunks. When a synchronous, non
//! seeky flow issues a request within `merge_distance` (8192) sectors of
//! where the in-service flow of the same group and class will read next,
//! its new requests are queued in the in-service flow's queue from then on
//! (the kernel's "early" merge, done at request arrival, looking at the
//! in-service flow; the kernel also searches a per-group position tree,
//! not done here). The caller still sees each request under its own
//! FlowId: the scheduler remembers, per request, which queue holds it.
//!
//! When the merged queue turns seeky, it is split at its next expiry: the
//! merged flows go back to queueing their own requests (generation counter,
//! O(1)). Merging is not done on non-rotational devices that queue
//! internally.
//!
//! **Too late for merging** (`merge_time_limit`, 100 ms, the kernel's
//! `bfq_merge_time_limit`): a flow served for longer than this since the
//! first service of its current busy period is neither merged nor merged
//! into. Cooperating processes interleave from their first requests; two
//! long-running sequential readers whose positions meet by chance (one
//! reaching the start of the region the other has just wrapped back to)
//! are not cooperators, and merging them serves both under one weight:
//! five 1:2:3:4:5 readers of adjacent regions of a loop device were
//! merged pairwise for 0.2-4 s at a time, and the merged pair shared the
//! heavier one's share equally, then rejoined B-WF2Q+ having forfeited
//! their lag.
use crate::error::SchedError;
use crate::settings::Settings;
use crate::types::{Time, MS};

/// Merge parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeConfig {
    /// Early queue merging on (`queue_merge`; heuristic 8).
    pub enabled: bool,
    /// Largest distance between the two flows' positions (sectors).
    pub distance: u64,
    /// A flow served for longer than this since its busy period's first
    /// service is too late for merging (`merge_time_limit`).
    pub time_limit: Time,
}

/// The kernel's `bfq_merge_time_limit` (HZ / 10).
pub const MERGE_TIME_LIMIT: Time = 100 * MS;

/// The largest `merge_time_limit` accepted (an hour: in effect, no limit).
pub const MAX_MERGE_TIME_LIMIT: Time = 3_600_000 * MS;

/// A flow's merge state.
#[derive(Clone, Copy, Debug, Default)]
pub struct MergeState {
    /// Merged into (flow index, that flow's generation at merge time).
    pub into: Option<(u32, u32)>,
    /// Bumped when this queue is split: merges into it become stale.
    pub generation: u32,
    /// Flows merged into this queue (not decremented on their removal;
    /// only used to know whether a split is needed).
    pub members: u32,
}

/// Whether a flow first served at `first_io` in its current busy period
/// (`served`: whether it was served in it at all) is too late for merging
/// at `now` (kernel `bfq_too_late_for_merging`).
#[inline]
pub fn too_late(cfg: &MergeConfig, served: bool, first_io: Time, now: Time) -> bool {
    served && now > first_io.saturating_add(cfg.time_limit)
}

/// Whether a request at `sector` is close to `pos`.
#[inline]
pub fn close(sector: u64, pos: u64, distance: u64) -> bool {
    sector.abs_diff(pos) <= distance
}

impl MergeConfig {
    /// The queue-merging settings over profile `d` (docs/bfq-settings.md).
    pub(crate) fn with_settings(d: &MergeConfig, s: &mut Settings) -> Result<Self, SchedError> {
        Ok(MergeConfig {
            enabled: s.bool("queue_merge", d.enabled)?,
            distance: s.u64_in("merge_distance", d.distance, 0, 1 << 40)?,
            time_limit: s.duration_in("merge_time_limit", d.time_limit, 0, MAX_MERGE_TIME_LIMIT)?,
        })
    }
}
