//! BFQ: Budget Fair Queueing, as in the 2010 paper (Sec. II, Fig. 3 and
//! Fig. 4) with today's kernel defaults.
//!
//! One flow at a time — the *active* flow — is served exclusively, in
//! C-LOOK order, until its budget is exhausted, its queue stays empty for
//! T_wait, or its turn lasts T_max. Then B-WF2Q+ picks the next flow, by
//! budgets and weights, so that each flow gets its weighted share of the
//! *service* (sectors), whatever the device's throughput.
//!
//! Where each mechanism lives:
//! - B-WF2Q+ timestamps, eligibility, V and back-shifting: [`wf2q`];
//! - budget assignment and over-charging: [`budget`];
//! - T_wait idling and seeky detection: [`idling`];
//! - C-LOOK, FIFO expiry and backward seeks inside a flow: [`queue`];
//! - classes (RT > BE > IDLE, idle starvation timeout) and hierarchical
//!   groups: [`wf2q`] (one tree per class per group);
//! - the service loop (Fig. 3): this module.

pub mod budget;
pub mod idling;
pub mod queue;
pub mod wf2q;

use crate::error::SchedError;
use crate::scheduler::Scheduler;
use crate::settings::Settings;
use crate::table::{RequestTable, Topology};
use crate::types::*;
use budget::{BudgetConfig, ExpireReason};
use idling::{IdleConfig, SeekHistory};
use queue::{FlowQueue, QueueConfig};
use wf2q::{EState, EntityId, Kind, Wf2q};

/// Every setting of the `bfq` scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BfqConfig {
    pub budget: BudgetConfig,
    pub idle: IdleConfig,
    pub queue: QueueConfig,
    /// T_max: longest turn before the flow is expired and over-charged.
    pub timeout_sync: Time,
    /// An idle-class flow is served anyway after this long without service.
    pub idle_class_timeout: Time,
}

impl Default for BfqConfig {
    fn default() -> Self {
        BfqConfig {
            budget: BudgetConfig::paper_2010(16384),
            idle: IdleConfig {
                slice_idle: 8 * MS,
                slice_idle_seeky: 2 * MS,
                idle_on_queueing_devices: false,
                seek_threshold: 800,
            },
            queue: QueueConfig {
                fifo_expire_sync: 125 * MS,
                fifo_expire_async: 250 * MS,
                back_seek_max: 32768,
                back_seek_penalty: 2,
            },
            timeout_sync: 125 * MS,
            idle_class_timeout: 200 * MS,
        }
    }
}

impl BfqConfig {
    /// Reads the settings documented in docs/schedulers.md (`max_budget`,
    /// `initial_budget`, `budget_inc_step`, `min_budget`, `slice_idle`,
    /// `slice_idle_seeky`, `idle_on_queueing_devices`, `seek_threshold`,
    /// `fifo_expire_sync`, `fifo_expire_async`, `back_seek_max` (KiB, as
    /// sysfs), `back_seek_penalty`, `timeout_sync`, `idle_class_timeout`).
    pub fn from_settings(s: &mut Settings) -> Result<Self, SchedError> {
        let d = BfqConfig::default();
        let max_budget = s.u64_in("max_budget", d.budget.max_budget, 1, 1 << 24)?;
        let paper = BudgetConfig::paper_2010(max_budget);
        let budget = BudgetConfig {
            max_budget,
            initial_budget: s.u64_in("initial_budget", paper.initial_budget, 1, max_budget)?,
            inc_step: s.u64_in("budget_inc_step", paper.inc_step, 1, max_budget)?,
            min_budget: s.u64_in("min_budget", paper.min_budget, 1, max_budget)?,
        };
        let idle = IdleConfig {
            slice_idle: s.duration("slice_idle", d.idle.slice_idle)?,
            slice_idle_seeky: s.duration("slice_idle_seeky", d.idle.slice_idle_seeky)?,
            idle_on_queueing_devices: s
                .bool("idle_on_queueing_devices", d.idle.idle_on_queueing_devices)?,
            seek_threshold: s.u64("seek_threshold", d.idle.seek_threshold)?,
        };
        let queue = QueueConfig {
            fifo_expire_sync: s.duration("fifo_expire_sync", d.queue.fifo_expire_sync)?,
            fifo_expire_async: s.duration("fifo_expire_async", d.queue.fifo_expire_async)?,
            back_seek_max: s.u64("back_seek_max", d.queue.back_seek_max / 2)? * 2,
            back_seek_penalty: s.u64_in("back_seek_penalty", d.queue.back_seek_penalty, 1, 1000)?,
        };
        let timeout_sync = s.duration("timeout_sync", d.timeout_sync)?;
        if timeout_sync == 0 {
            return Err(SchedError::InvalidSetting {
                key: "timeout_sync".into(),
                value: "0".into(),
                why: "must be positive".into(),
            });
        }
        Ok(BfqConfig {
            budget,
            idle,
            queue,
            timeout_sync,
            idle_class_timeout: s.duration("idle_class_timeout", d.idle_class_timeout)?,
        })
    }
}

/// Per-flow state.
#[derive(Clone, Debug)]
pub struct FlowState {
    entity: EntityId,
    queue: FlowQueue,
    /// Budget for the flow's next turn.
    budget: u64,
    /// Dispatched, not completed.
    in_flight: u32,
    /// C-LOOK head: end of the last dispatched request.
    head: u64,
    seek: SeekHistory,
    /// Whether its latest request was synchronous.
    sync: bool,
    /// Total sectors dispatched (for statistics and tests).
    served_total: u64,
}

/// The active flow's turn.
#[derive(Clone, Copy, Debug)]
struct Turn {
    flow: FlowId,
    entity: EntityId,
    /// Budget of this turn.
    budget: u64,
    /// Sectors dispatched in this turn.
    served: u64,
    /// When the turn began (budget timeout).
    started: Time,
    /// Idling: the turn ends at this time unless a request arrives.
    idle_until: Option<Time>,
}

/// Group-level data.
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupState {
    entity: Option<EntityId>,
}

/// The BFQ scheduler.
#[derive(Debug)]
pub struct Bfq {
    name: &'static str,
    cfg: BfqConfig,
    device: DeviceInfo,
    table: RequestTable<()>,
    topo: Topology<FlowState, GroupState>,
    wf2q: Wf2q,
    turn: Option<Turn>,
}

impl Bfq {
    /// BFQ with the given configuration.
    pub fn new(cfg: BfqConfig) -> Self {
        Bfq {
            name: "bfq",
            cfg,
            device: DeviceInfo::default(),
            table: RequestTable::new(),
            topo: Topology::new(GroupState::default()),
            wf2q: Wf2q::new(cfg.idle_class_timeout),
            turn: None,
        }
    }

    /// BFQ built from `key=value` settings; unknown keys are errors.
    pub fn from_settings(settings: &Settings) -> Result<Self, SchedError> {
        let mut s = settings.clone();
        s.for_scheduler("bfq");
        let cfg = BfqConfig::from_settings(&mut s)?;
        s.finish()?;
        Ok(Bfq::new(cfg))
    }

    /// Names this instance (profiles share the implementation).
    pub fn with_name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The configuration in force.
    pub fn config(&self) -> &BfqConfig {
        &self.cfg
    }

    /// The active flow, if any.
    pub fn active_flow(&self) -> Option<FlowId> {
        self.turn.map(|t| t.flow)
    }

    /// The budget a flow will get on its next turn.
    pub fn flow_budget(&self, flow: FlowId) -> Option<u64> {
        self.topo.flow(flow).ok().map(|f| f.data.budget)
    }

    /// Sectors dispatched for a flow so far.
    pub fn flow_served(&self, flow: FlowId) -> Option<u64> {
        self.topo.flow(flow).ok().map(|f| f.data.served_total)
    }

    /// Checks internal invariants (tests; debug builds call it often).
    pub fn check_invariants(&self) {
        self.wf2q.check_invariants();
    }

    fn flow_state(&self, f: FlowId) -> &FlowState {
        &self.topo.any_flow(f).data
    }

    fn flow_state_mut(&mut self, f: FlowId) -> &mut FlowState {
        &mut self.topo.any_flow_mut(f).data
    }

    /// Ends the active flow's turn (Fig. 3 lines 24-38 and 59-66).
    fn expire(&mut self, reason: ExpireReason) {
        let Some(turn) = self.turn.take() else { return };
        let bcfg = self.cfg.budget;
        let charge = bcfg.charge(reason, turn.budget, turn.served);
        let qcfg = self.cfg.queue;
        let fs = &mut self.topo.any_flow_mut(turn.flow).data;
        let mut next = bcfg.next_budget(reason, turn.budget, turn.served);
        let busy = !fs.queue.is_empty();
        if busy {
            // The next request must fit in a budget.
            let head = fs.head;
            if let Some(slot) = fs.queue.peek(&self.table, head, 0, &qcfg) {
                next = next.max(u64::from(self.table.slot(slot).req.sectors));
            }
        }
        fs.budget = next;
        self.wf2q.expire(turn.entity, charge, busy, next);
    }

    /// Starts the turn of the next flow chosen by B-WF2Q+.
    fn start_turn(&mut self, now: Time) -> bool {
        let Some((f, entity)) = self.wf2q.select(now) else {
            return false;
        };
        let flow = FlowId(f);
        let budget = self.wf2q.entity(entity).budget;
        self.turn = Some(Turn {
            flow,
            entity,
            budget,
            served: 0,
            started: now,
            idle_until: None,
        });
        true
    }

    fn wait_time(&self, fs: &FlowState, class: IoClass) -> Option<Time> {
        self.cfg
            .idle
            .wait_time(&self.device, class, fs.sync, fs.seek.is_seeky())
    }

    /// Ends the turn of a flow about to be freed.
    fn expire_if_active(&mut self, flow: FlowId) {
        if self.turn.is_some_and(|t| t.flow == flow) {
            self.expire(ExpireReason::Removed);
        }
    }
}

impl Scheduler for Bfq {
    fn name(&self) -> &str {
        self.name
    }

    fn set_device(&mut self, device: DeviceInfo) {
        self.device = device;
    }

    fn add_group(&mut self, parent: GroupId, weight: u32) -> Result<GroupId, SchedError> {
        let g = self.topo.add_group(parent, weight, GroupState::default())?;
        let e = self.wf2q.new_entity(
            Kind::Group(g),
            parent,
            IoClass::Be,
            weight,
            self.cfg.budget.initial_budget,
        );
        self.topo.group_mut(g)?.data.entity = Some(e);
        self.wf2q.add_group(g, e, 0);
        Ok(g)
    }

    fn remove_group(&mut self, group: GroupId) -> Result<(), SchedError> {
        let entry = self.topo.remove_group(group)?;
        self.wf2q.remove_group(group);
        if let Some(e) = entry.data.entity {
            self.wf2q.free_entity(e);
        }
        Ok(())
    }

    fn add_flow(&mut self, _now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        let weight = self.topo.check_spec(&spec)?;
        let budget = self.cfg.budget.initial_budget;
        let next = FlowId(self.topo.flow_capacity() as u32);
        let entity = self.wf2q.new_entity(
            Kind::Flow(next.0),
            spec.group,
            spec.prio.class,
            weight,
            budget,
        );
        let state = FlowState {
            entity,
            queue: FlowQueue::default(),
            budget,
            in_flight: 0,
            head: 0,
            seek: SeekHistory::default(),
            sync: true,
            served_total: 0,
        };
        let id = self.topo.add_flow(spec, state)?;
        debug_assert_eq!(id, next);
        Ok(id)
    }

    fn remove_flow(&mut self, _now: Time, flow: FlowId) -> Result<(), SchedError> {
        let f = self.topo.flow(flow)?;
        let entity = f.data.entity;
        if f.held == 0 {
            self.expire_if_active(flow);
        }
        if self.topo.retire_flow(flow)? {
            self.wf2q.free_entity(entity);
        }
        Ok(())
    }

    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        self.topo.check_flow(req.flow)?;
        let slot = self.table.insert(now, req, ())?;
        let threshold = self.cfg.idle.seek_threshold;
        let f = self.topo.hold(req.flow)?;
        let fs = &mut f.data;
        let was_empty = fs.queue.is_empty();
        fs.queue.push(&self.table, slot);
        fs.seek.record(req.sector, req.end(), threshold);
        fs.sync = req.sync;
        let (entity, budget) = (fs.entity, fs.budget.max(u64::from(req.sectors)));
        fs.budget = budget;
        if was_empty {
            match self.turn {
                // Fig. 3 lines 14-16: the active flow's next request
                // arrived: stop waiting.
                Some(ref mut t) if t.flow == req.flow => t.idle_until = None,
                // Fig. 3 line 13: a newly backlogged flow joins B-WF2Q+.
                _ => {
                    if self.wf2q.entity(entity).state == EState::Idle {
                        self.wf2q.activate(entity, budget);
                    }
                }
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, now: Time) -> Dispatch {
        loop {
            let Some(turn) = self.turn else {
                if !self.start_turn(now) {
                    return if self.table.queued() == 0 {
                        Dispatch::Empty
                    } else {
                        Dispatch::Wait
                    };
                }
                continue;
            };
            // Budget timeout: T_max elapsed in this turn.
            if now.saturating_sub(turn.started) >= self.cfg.timeout_sync && turn.served > 0 {
                self.expire(ExpireReason::Timeout);
                continue;
            }
            let fs = self.flow_state(turn.flow);
            let class = self.wf2q.entity(turn.entity).class;
            if fs.queue.is_empty() {
                // Fig. 3 lines 50-51 and 59-66: wait T_wait for the next
                // request of a synchronous flow, once its last request
                // completed; otherwise the turn ends.
                match self.wait_time(fs, class) {
                    None => {
                        self.expire(ExpireReason::NoMoreRequests);
                        continue;
                    }
                    Some(_) if fs.in_flight > 0 => return Dispatch::Wait,
                    Some(_) => match turn.idle_until {
                        Some(until) if now < until => return Dispatch::Idle { until },
                        Some(_) => {
                            self.expire(ExpireReason::TooIdle);
                            continue;
                        }
                        None => {
                            // Idling not armed (e.g. the request completed
                            // before this turn began): arm it now.
                            let until = now + self.wait_time(fs, class).unwrap_or(0);
                            self.turn.as_mut().expect("turn").idle_until = Some(until);
                            return Dispatch::Idle { until };
                        }
                    },
                }
            }
            let head = fs.head;
            let flow = turn.flow;
            let qcfg = self.cfg.queue;
            let fs = &mut self.topo.any_flow_mut(flow).data;
            let slot = fs
                .queue
                .peek(&self.table, head, now, &qcfg)
                .expect("non-empty queue");
            let sectors = u64::from(self.table.slot(slot).req.sectors);
            if turn.served + sectors > turn.budget.max(sectors) && turn.served > 0 {
                // Fig. 3 lines 24-38: not enough budget left.
                self.expire(ExpireReason::BudgetExhausted);
                continue;
            }
            fs.queue.remove(&self.table, slot);
            let req = self.table.dispatch(now, slot);
            fs.head = req.end();
            fs.in_flight += 1;
            fs.served_total += sectors;
            let t = self.turn.as_mut().expect("turn");
            t.served += sectors;
            t.idle_until = None;
            self.wf2q.served(turn.entity, sectors);
            #[cfg(debug_assertions)]
            if self.table.queued() % 64 == 0 {
                self.wf2q.check_invariants();
            }
            return Dispatch::Request(req);
        }
    }

    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        let slot = self.table.complete(id)?;
        let flow = slot.req.flow;
        let fs = self.flow_state_mut(flow);
        fs.in_flight -= 1;
        let (entity, idle_now) = (fs.entity, fs.in_flight == 0 && fs.queue.is_empty());
        let class = self.wf2q.entity(entity).class;
        if let Some(turn) = self.turn {
            if turn.flow == flow && idle_now {
                // The last request completed with nothing queued: start
                // waiting T_wait for the next one (kernel arms the idle
                // timer on completion, as think time runs from there).
                let wait = self.wait_time(self.flow_state(flow), class);
                self.turn.as_mut().expect("turn").idle_until = wait.map(|w| now + w);
            }
        }
        let f = self.topo.any_flow(flow);
        if f.retired && f.held == 1 {
            self.expire_if_active(flow);
        }
        if self.topo.release(flow) {
            self.wf2q.free_entity(entity);
        }
        Ok(())
    }

    fn queued(&self) -> usize {
        self.table.queued()
    }

    fn in_flight(&self) -> usize {
        self.table.in_flight()
    }
}
