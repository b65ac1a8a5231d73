//! Device models: the rotational disk ([`disk`]), flash ([`flash`]) and
//! the papers' presets ([`PRESETS`], [`preset`]).
//!
//! A device is a deterministic state machine driven by the simulator's
//! clock: [`Device::submit`] hands it a command at `now`;
//! [`Device::next_event`] says when it next has something to do; and
//! [`Device::advance`] processes everything due up to `now`, reporting the
//! host commands that completed.

pub mod disk;
pub mod flash;

use bfq_core::{DeviceInfo, Op, ReqId, Time};

pub use bfq_scenario::device::{preset, DeviceParams, DiskParams, FlashParams, PRESETS};
pub use disk::Disk;
pub use flash::Flash;

/// A command as the device sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevRequest {
    /// Identifier reported back on completion.
    pub id: ReqId,
    /// First sector.
    pub sector: u64,
    /// Length in sectors (> 0).
    pub sectors: u32,
    /// Read or write.
    pub op: Op,
}

/// A modelled storage device.
pub trait Device: Send {
    /// What the scheduler is told: host queue depth (1 without NCQ),
    /// internal queueing, rotational.
    fn info(&self) -> DeviceInfo;
    /// Capacity in 512-byte sectors.
    fn capacity_sectors(&self) -> u64;
    /// Accepts a command at `now`. The caller must have called
    /// [`Device::advance`] up to `now` first and must keep at most
    /// `info().queue_depth` commands outstanding.
    fn submit(&mut self, now: Time, req: DevRequest);
    /// The time of the next internal event (a completion or an internal
    /// operation starting or ending), if any.
    fn next_event(&self) -> Option<Time>;
    /// Processes every internal event due at or before `now`; appends the
    /// ids of host commands completed, with their completion times, to
    /// `done` in completion order.
    fn advance(&mut self, now: Time, done: &mut Vec<(Time, ReqId)>);
    /// Host commands submitted and not yet completed.
    fn in_flight(&self) -> usize;
}

/// Builds a boxed device from parameters.
pub fn build(params: &DeviceParams) -> Box<dyn Device> {
    build_seeded(params, 0)
}

/// Builds a boxed device whose initial state depends on `seed` (for a disk,
/// the platters' angle at time 0), as a new run on real hardware would.
pub fn build_seeded(params: &DeviceParams, seed: u64) -> Box<dyn Device> {
    match params {
        DeviceParams::Disk(p) => Box::new(Disk::new(p.clone()).with_seed(seed)),
        DeviceParams::Flash(p) => Box::new(Flash::new(p.clone())),
    }
}

/// Runs `reqs` against `dev` with at most `depth` outstanding commands,
/// each issued as soon as a slot frees, and returns (total time, per
/// command latencies). A calibration helper for tests and the suite.
pub fn run_closed_loop(
    dev: &mut dyn Device,
    reqs: impl IntoIterator<Item = DevRequest>,
    depth: usize,
) -> (Time, Vec<Time>) {
    let mut it = reqs.into_iter();
    let mut now: Time = 0;
    let mut issued_at = std::collections::BTreeMap::new();
    let mut lat = Vec::new();
    let mut done = Vec::new();
    loop {
        while dev.in_flight() < depth {
            match it.next() {
                Some(r) => {
                    issued_at.insert(r.id, now);
                    dev.submit(now, r);
                }
                None => break,
            }
        }
        match dev.next_event() {
            Some(t) => {
                now = now.max(t);
                dev.advance(now, &mut done);
                for (t, id) in done.drain(..) {
                    if let Some(a) = issued_at.remove(&id) {
                        lat.push(t - a);
                    }
                }
            }
            None => break,
        }
    }
    (now, lat)
}
