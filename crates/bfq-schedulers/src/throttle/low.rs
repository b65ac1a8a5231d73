//! throttle-low's LOW/MAX state machine, as blk-throttle's low limits
//! (`CONFIG_BLK_DEV_THROTTLING_LOW`, Linux 4.10-6.8; the 2018 article ran
//! 4.18, Sections 6-7 and 9).
//!
//! **LOW**: every node is held to its low limit. **MAX**: a node with a
//! low limit may use `low + low / 2 * scale` (bandwidth and IOPS each,
//! never above its max limit; `throtl_adjusted_limit`), where `scale` is
//! the number of whole slices since the upgrade (at most 4096), and nodes
//! without a low limit have their max limits.
//!
//! The checks run when a request arrives, at each throttling group on its
//! way up (`blk_throtl_bio`), never on a timer:
//! - *upgrade* LOW -> MAX (`throtl_upgrade_check`, at most once per slice
//!   per group; and at once when a request is held back by a group's
//!   limit, `throtl_can_upgrade` with that group left out), at least a
//!   slice after the last downgrade, when every leaf group with a low
//!   limit, or one of its groups up the hierarchy, *can upgrade*
//!   (`throtl_hierarchy_can_upgrade`): it has requests held back by its
//!   low limit in **every direction that has a low limit**, or it is idle
//!   and has not been over its low limit for a slice
//!   (`throtl_tg_can_upgrade`);
//! - *downgrade* (`throtl_downgrade_check`, once per slice per leaf group,
//!   in MAX): the group's rate over the time since its last check is
//!   compared with its low limit (at or above it counts as an overflow);
//!   when the group and every group above it have not overflowed for a
//!   slice, are not idle (or have children) and the upgrade is a slice
//!   old (`throtl_hierarchy_can_downgrade`), `scale` halves
//!   (`throtl_downgrade_state`), and at 0 the state goes back to LOW.
//!
//! A group's overflow time is the *earliest* over the directions with a
//! low limit (`__tg_last_low_overflow_time`), and a direction that never
//! had a request keeps 0. So a group of readers with the same low limit
//! for reads and writes (the article's Table 2) never has requests held
//! in both directions, can upgrade only when idle, and always passes the
//! overflow test of the downgrade: in MAX it steps the scale down at each
//! of its checks while it is not idle, whatever its rate. This is the
//! article's "when the random reader is slightly below 10MB/s, the
//! low-limit mechanism limits the max bandwidth of every active group to
//! its low limit" (Sec. 9, Fig. 1).
//!
//! *Idle* (`throtl_tg_is_idle`), by the group's own idle threshold and
//! latency target ([`Targets`]): a group without a low limit; or its last
//! completion is more than 4 x its idle threshold ago (at most 5 s); or
//! its mean think time (completion to its next arrival, 7/8 old + 1/8 new)
//! exceeds its idle threshold; or fewer than 1 in 5 of its recent requests
//! took longer than the device's latency for their size plus its latency
//! target (the counts are halved every slice). A request's latency runs
//! from its arrival at the throttle to its completion, time held by a
//! limit included (4.18, [`Throttle::on_completion`]); the device's
//! latency from its dispatch to its completion. On a rotational device
//! requests under 1 ms are not counted and the device's latency is 4 ms
//! for every size; on others it is the
//! mean measured in LOW per size class (4 KiB, 8 KiB, ... 1 MiB), updated
//! at most once a second from at least 32 requests (7/8 old + 1/8 new,
//! never below a smaller class; `throtl_update_latency_buckets`), 0 until
//! then.

use super::{dir_of, Mode, Node, NodeState, Throttle, DIRS};
use crate::util::{node_settings, parse_dur};
use bfq_core::settings::{format_duration, MAX_DURATION};
use bfq_core::{GroupId, Request, SchedError, Settings, Time, MS, SEC, SECTOR_BYTES, US};
use std::collections::HashMap;

/// Size classes of the device latency (`LATENCY_BUCKET_SIZE`).
const CLASSES: usize = 9;
/// The device latency of a rotational device (`DFL_HD_BASELINE_LATENCY`)
/// and the shortest request latency counted on one
/// (`LATENCY_FILTERED_HD`).
const HD_LATENCY: Time = 4 * MS;
const HD_FILTERED: Time = MS;
/// The longest idle gap that makes a group idle (`MAX_IDLE_TIME`).
const MAX_IDLE: Time = 5 * SEC;
/// The largest scale (`throtl_adjusted_limit`).
const MAX_SCALE: u64 = 4096;

/// A node's idle threshold and latency target, io.low's `idle=` and
/// `latency=` (`idletime_threshold`, `latency_target`), which
/// [`Throttle::is_idle`] uses.
///
/// The kernel has no default: a group's io.low takes effect only when it
/// gives a low limit, `idle=` and `latency=` (`tg_set_limit`); here a node
/// with a low limit has the `idle_time` and `latency` settings unless it
/// sets `idle_time.fN|gN` or `latency.fN|gN` of its own (the 2018 article
/// set 1000 us and 100 us for every group). Below a group under the root,
/// a node's idle threshold is at most its parent's and its latency target
/// at least its parent's (`tg_conf_updated`); below a group without a low
/// limit (the kernel's unset values), the node has none and is always
/// idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Targets {
    pub(super) idle: Time,
    pub(super) latency: Time,
}

/// The configured [`Targets`]: for every node, and each node's own.
#[derive(Debug, Default)]
pub(super) struct TargetCfg {
    all: Option<Targets>,
    idle: HashMap<Node, Time>,
    latency: HashMap<Node, Time>,
}

/// Reads `{key}.fN|gN` durations in `US..=MAX_DURATION` (not the root).
fn node_durations(s: &mut Settings, key: &str) -> Result<HashMap<Node, Time>, SchedError> {
    let mut m = HashMap::new();
    for (node, v) in node_settings(s, key)? {
        let who = match node {
            Node::Flow(f) => format!("f{}", f.0),
            Node::Group(g) => format!("g{}", g.0),
        };
        let bad = |why: String| SchedError::InvalidSetting {
            key: format!("{key}.{who}"),
            value: v.clone(),
            why,
        };
        if node == Node::Group(GroupId::ROOT) {
            return Err(bad("the root group is never throttled".into()));
        }
        let t = parse_dur(key, &v)?;
        if t < US {
            let max = format_duration(MAX_DURATION);
            return Err(bad(format!("must be a duration in 1us..={max}")));
        }
        m.insert(node, t);
    }
    Ok(m)
}

impl TargetCfg {
    /// `idle_time` (1 ms) and `latency` (100 us) for every node, and
    /// `idle_time.fN|gN`, `latency.fN|gN` for one; each in 1 us..=1 h.
    pub(super) fn read(s: &mut Settings) -> Result<Self, SchedError> {
        Ok(TargetCfg {
            all: Some(Targets {
                idle: s.duration_in("idle_time", MS, US, MAX_DURATION)?,
                latency: s.duration_in("latency", 100 * US, US, MAX_DURATION)?,
            }),
            idle: node_durations(s, "idle_time")?,
            latency: node_durations(s, "latency")?,
        })
    }

    /// The targets of `node`, which has a low limit, below `parent` (a
    /// group other than the root, if any).
    pub(super) fn of(&self, node: Node, parent: Option<&NodeState>) -> Option<Targets> {
        let all = self.all?;
        let own = Targets {
            idle: self.idle.get(&node).copied().unwrap_or(all.idle),
            latency: self.latency.get(&node).copied().unwrap_or(all.latency),
        };
        match parent {
            None => Some(own),
            Some(p) => p.targets.map(|p| Targets {
                idle: own.idle.min(p.idle),
                latency: own.latency.max(p.latency),
            }),
        }
    }
}

/// The device's latency per direction and size class.
#[derive(Clone, Debug, Default)]
pub(super) struct Baseline {
    rotational: bool,
    sum: [[Time; CLASSES]; DIRS],
    n: [[u64; CLASSES]; DIRS],
    lat: [[Time; CLASSES]; DIRS],
    valid: [[bool; CLASSES]; DIRS],
    last_calc: Time,
}

/// The size class of a request of `sectors` (`request_bucket_index`).
pub(super) fn class(sectors: u32) -> usize {
    let order = u32::BITS - sectors.max(1).saturating_sub(1).leading_zeros();
    (order as usize).saturating_sub(3).min(CLASSES - 1)
}

impl Baseline {
    pub(super) fn new(rotational: bool) -> Self {
        let lat = if rotational { HD_LATENCY } else { 0 };
        Baseline {
            rotational,
            lat: [[lat; CLASSES]; DIRS],
            ..Baseline::default()
        }
    }

    /// The device latency of a request of `sectors` in direction `d`.
    pub(super) fn latency(&self, d: usize, sectors: u32) -> Time {
        self.lat[d][class(sectors)]
    }

    pub(super) fn sample(&mut self, d: usize, sectors: u32, lat: Time) {
        if !self.rotational {
            self.sum[d][class(sectors)] += lat;
            self.n[d][class(sectors)] += 1;
        }
    }

    /// At most once a second: each class with 32 samples or more moves
    /// 1/8 towards their mean, and no class is below a smaller one.
    pub(super) fn update(&mut self, now: Time) {
        if self.rotational || now < self.last_calc + SEC {
            return;
        }
        self.last_calc = now;
        for d in 0..DIRS {
            let mut last = 0;
            for i in 0..CLASSES {
                let mut mean = 0;
                if self.n[d][i] >= 32 {
                    mean = self.sum[d][i] / self.n[d][i];
                    (self.sum[d][i], self.n[d][i]) = (0, 0);
                }
                if mean == 0 {
                    self.lat[d][i] = self.lat[d][i].max(last);
                    continue;
                }
                let l = if self.valid[d][i] {
                    (self.lat[d][i] * 7 + mean) / 8
                } else {
                    mean
                };
                self.lat[d][i] = l.max(last);
                self.valid[d][i] = true;
                last = self.lat[d][i];
            }
        }
    }
}

impl Throttle {
    /// A request arrives (`blk_throtl_bio`): the checks of every
    /// throttling group on its way up, until one holds it.
    pub(super) fn on_arrival(&mut self, f: u32, req: &Request, now: Time) {
        self.base.update(now);
        let d = dir_of(req.op);
        let bytes = u64::from(req.sectors) * SECTOR_BYTES;
        if let Some(h) = self.home(f) {
            let n = self.node(h);
            // think time (`blk_throtl_update_idletime`)
            if n.last_finish != 0 && now > n.last_finish && n.last_finish != n.checked_finish {
                n.avg_idle = (n.avg_idle * 7 + now - n.last_finish) / 8;
                n.checked_finish = n.last_finish;
            }
        }
        let mut cur = self.home(f);
        while let Some(node) = cur {
            let n = self.node(node);
            if n.dir[d].last_overflow == 0 {
                n.dir[d].last_overflow = now;
            }
            self.downgrade_check(node, now);
            self.upgrade_check(node, now);
            let n = self.node(node);
            if n.dir[d].queued {
                // FIFO: it waits behind the requests held here
                n.dir[d].last_overflow = now;
                return;
            }
            if n.dir[d].lim.ready_at(now, bytes) > now {
                n.dir[d].last_overflow = now;
                if self.can_upgrade(Some(node), now) {
                    self.upgrade(now);
                    continue;
                }
                return;
            }
            cur = self.parent(node);
        }
    }

    /// A request completes (`blk_throtl_bio_endio`, `blk_throtl_stat_add`):
    /// its group's last completion and latency count, and in LOW the
    /// device's latency sample (from the dispatch to the device).
    ///
    /// The group's latency runs from the request's `arrival` at the
    /// throttle: 4.18 stamps a bio when it first enters blk-throttle
    /// (`blk_throtl_assoc_bio`) and a held bio keeps that stamp when it is
    /// released (it skips blk-throttle then, `BIO_THROTTLED`), so the time
    /// held by a limit counts. (Later kernels, where blk-cgroup stamps the
    /// bio, stamp it again at the release.)
    pub(super) fn on_completion(
        &mut self,
        req: &Request,
        arrival: Time,
        dispatched: Time,
        now: Time,
    ) {
        let d = dir_of(req.op);
        if self.mode == Mode::Low {
            self.base
                .sample(d, req.sectors, now.saturating_sub(dispatched));
        }
        let Some(h) = self.home(req.flow.index() as u32) else {
            return;
        };
        let lat = now.saturating_sub(arrival);
        let filtered = if self.rotational { HD_FILTERED } else { 0 };
        let base = self.base.latency(d, req.sectors);
        let slice = self.slice;
        let n = self.node(h);
        n.last_finish = now;
        if let Some(t) = n.targets.filter(|_| lat >= filtered) {
            n.bad_cnt += u32::from(lat > base + t.latency);
            n.bio_cnt += 1;
        }
        if now > n.cnt_reset_at || n.bio_cnt > 1024 {
            n.cnt_reset_at = now + slice;
            n.bio_cnt /= 2;
            n.bad_cnt /= 2;
        }
    }

    fn is_leaf(&self, node: Node) -> bool {
        matches!(node, Node::Flow(_)) || self.state(node).children == 0
    }

    /// `throtl_tg_is_idle`, with the node's own [`Targets`] (none: idle).
    pub(super) fn is_idle(&self, n: &NodeState, now: Time) -> bool {
        let Some(t) = n.targets else {
            return true;
        };
        now.saturating_sub(n.last_finish) > (4 * t.idle).min(MAX_IDLE)
            || n.avg_idle > t.idle
            || (n.bio_cnt > 0 && n.bad_cnt * 5 < n.bio_cnt)
    }

    /// The node's own overflow time: the earliest over the directions
    /// with a low limit, `now` without one (`__tg_last_low_overflow_time`).
    fn own_overflow(&self, n: &NodeState, now: Time) -> Time {
        n.dir
            .iter()
            .filter(|d| d.low_cfg != (0, 0))
            .map(|d| d.last_overflow)
            .fold(now, Time::min)
    }

    /// The latest of the node's overflow time and those of the groups
    /// above it that have a low limit (`tg_last_low_overflow_time`).
    pub(super) fn overflow(&self, node: Node, now: Time) -> Time {
        let mut t = self.own_overflow(self.state(node), now);
        let mut cur = self.parent(node);
        while let Some(p) = cur {
            if self.state(p).has_low() {
                t = t.max(self.own_overflow(self.state(p), now));
            }
            cur = self.parent(p);
        }
        t
    }

    /// `throtl_tg_can_upgrade`.
    pub(super) fn tg_can_upgrade(&self, node: Node, now: Time) -> bool {
        let n = self.state(node);
        if n.dir.iter().all(|d| d.low_cfg == (0, 0) || d.queued) {
            return true;
        }
        now >= self.overflow(node, now) + self.slice && self.is_idle(n, now)
    }

    /// The node or a group above it can upgrade
    /// (`throtl_hierarchy_can_upgrade`).
    fn hierarchy_can_upgrade(&self, node: Node, now: Time) -> bool {
        let mut cur = Some(node);
        while let Some(nd) = cur {
            if self.tg_can_upgrade(nd, now) {
                return true;
            }
            cur = self.parent(nd);
        }
        false
    }

    /// Every leaf with a low limit but `except` can upgrade, a slice after
    /// the last downgrade (`throtl_can_upgrade`; leaves without a low
    /// limit always can).
    pub(super) fn can_upgrade(&self, except: Option<Node>, now: Time) -> bool {
        if self.mode != Mode::Low || now < self.downgrade_at + self.slice {
            return false;
        }
        self.low_nodes
            .iter()
            .filter(|&&n| Some(n) != except && self.is_leaf(n))
            .all(|&n| self.hierarchy_can_upgrade(n, now))
    }

    /// `throtl_tg_can_downgrade`.
    fn tg_can_downgrade(&self, node: Node, now: Time) -> bool {
        let n = self.state(node);
        now >= self.upgrade_at + self.slice
            && now >= self.overflow(node, now) + self.slice
            && (!self.is_idle(n, now) || !self.is_leaf(node))
    }

    /// The node and every group above it can downgrade
    /// (`throtl_hierarchy_can_downgrade`).
    pub(super) fn hierarchy_can_downgrade(&self, node: Node, now: Time) -> bool {
        let mut cur = Some(node);
        while let Some(nd) = cur {
            if !self.tg_can_downgrade(nd, now) {
                return false;
            }
            cur = self.parent(nd);
        }
        true
    }

    /// LOW, at most once per slice per node (`throtl_upgrade_check`).
    fn upgrade_check(&mut self, node: Node, now: Time) {
        let slice = self.slice;
        if self.mode != Mode::Low || now < self.state(node).last_check + slice {
            return;
        }
        self.node(node).last_check = now;
        if now >= self.own_overflow(self.state(node), now) + slice && self.can_upgrade(None, now) {
            self.upgrade(now);
        }
    }

    /// MAX, at most once per slice per leaf (`throtl_downgrade_check`).
    pub(super) fn downgrade_check(&mut self, node: Node, now: Time) {
        let slice = self.slice;
        if self.mode != Mode::Max || self.low_nodes.is_empty() || !self.is_leaf(node) {
            return;
        }
        let last = self.state(node).last_check;
        if now < last + slice {
            return;
        }
        self.node(node).last_check = now;
        if now < self.overflow(node, now) + slice {
            return;
        }
        let elapsed = u128::from((now - last).max(1));
        for d in &mut self.node(node).dir {
            let (lb, li) = d.low_cfg;
            let bps = u128::from(d.bytes) * u128::from(SEC) / elapsed;
            let iops = u128::from(d.ios) * u128::from(SEC) / elapsed;
            if (lb > 0 && bps >= u128::from(lb)) || (li > 0 && iops >= u128::from(li)) {
                d.last_overflow = now;
            }
        }
        if self.hierarchy_can_downgrade(node, now) {
            self.downgrade(now);
        }
        for d in &mut self.node(node).dir {
            (d.bytes, d.ios) = (0, 0);
        }
    }

    /// LOW -> MAX at scale 0 (`throtl_upgrade_state`).
    pub(super) fn upgrade(&mut self, now: Time) {
        self.scale = 0;
        self.upgrade_at = now;
        self.set_mode(Mode::Max, now);
    }

    /// The scale halves; at 0, back to LOW (`throtl_downgrade_state`).
    pub(super) fn downgrade(&mut self, now: Time) {
        self.scale /= 2;
        if self.scale > 0 {
            self.upgrade_at = now - (self.scale * self.slice).min(now);
            self.apply_limits(now);
        } else {
            self.downgrade_at = now;
            self.set_mode(Mode::Low, now);
        }
    }

    /// MAX: the scale is the number of whole slices since `upgrade_at`
    /// (`throtl_adjusted_limit`), reread whenever limits are used.
    pub(super) fn refresh_scale(&mut self, now: Time) {
        if self.mode != Mode::Max || self.low_nodes.is_empty() || self.scale >= MAX_SCALE {
            return;
        }
        let scale = (now.saturating_sub(self.upgrade_at) / self.slice).min(MAX_SCALE);
        if scale > self.scale {
            self.scale = scale;
            self.apply_limits(now);
        }
    }
}
