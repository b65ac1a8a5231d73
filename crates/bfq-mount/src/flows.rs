//! Flows and groups from the callers of FUSE requests.
//!
//! One flow per process (thread group), in one group per cgroup (or per
//! policy group name). A flow ends when its process has had no I/O for
//! the policy's `idle_timeout` or has exited ([`FlowTable::reap`], run every
//! second); a group ends with its last flow. Both are reference counted:
//! a request in progress keeps its flow, a flow keeps its group, so nothing
//! is removed from the scheduler under a request and nothing is left in it.

use crate::policy::{parse_class, Caller, Policy};
use crate::procinfo::{self, ProcKey};
use bfq_engine::{Engine, Flow, FlowOptions, GroupId, IoClass};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// At most this many threads are remembered (a limit on everything); past
/// it the cache is emptied and refilled.
const MAX_THREADS: usize = 65536;

/// A remembered thread is checked again (its start time in /proc) when
/// it was last checked longer ago than this: a thread id of a thread that
/// exited can be given to a new thread of another process, whose requests
/// must not go to the old process's flow for longer than this.
const REVALIDATE_NS: u64 = 1_000_000_000;

/// What the table remembers of a thread.
#[derive(Clone, Copy, Debug)]
struct ThreadEntry {
    /// Its process.
    key: ProcKey,
    /// The thread's own start time (/proc/TID/stat), which tells a reused
    /// thread id from the thread first seen (0: unknown).
    start: u64,
    /// When `start` was last found unchanged, ns since the table's origin.
    checked_ns: u64,
}

/// One group of the scheduler; removed when its last flow ends.
pub struct GroupEntry {
    /// The group's id in the engine.
    pub id: GroupId,
    /// The group's name, as the mount policy's rule gave it.
    pub name: String,
    /// Weight 1..=1000.
    pub weight: u32,
    engine: Arc<Engine>,
}

impl Drop for GroupEntry {
    fn drop(&mut self) {
        let _ = self.engine.remove_group(self.id);
    }
}

/// I/O counters of a flow.
#[derive(Default)]
pub struct Counters {
    /// Bytes read.
    pub read_bytes: AtomicU64,
    /// Bytes written.
    pub write_bytes: AtomicU64,
    /// Requests finished.
    pub requests: AtomicU64,
    /// Sum and maximum of request latencies (ns), submit to completion.
    pub lat_sum_ns: AtomicU64,
    /// Largest request latency, ns.
    pub lat_max_ns: AtomicU64,
}

/// One process's flow.
pub struct FlowEntry {
    flow: Option<Flow>,
    /// The process: thread group id and start time.
    pub key: ProcKey,
    /// Executable name (from /proc).
    pub exe: String,
    /// I/O priority class (`ioprio_get`).
    pub class: IoClass,
    /// Priority level 0..=7.
    pub level: u8,
    /// Weight 1..=1000 in its group.
    pub weight: u32,
    /// The group the flow belongs to (kept alive by its flows).
    pub group: Arc<GroupEntry>,
    /// Nanoseconds since the table's origin at the last request.
    pub last_io: AtomicU64,
    /// What the flow did.
    pub counters: Counters,
}

impl FlowEntry {
    /// The engine flow.
    pub fn flow(&self) -> &Flow {
        self.flow.as_ref().expect("flow present until drop")
    }

    /// Records one finished request.
    pub fn account(&self, write: bool, bytes: u64, lat_ns: u64) {
        let c = &self.counters;
        if write {
            c.write_bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            c.read_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.lat_sum_ns.fetch_add(lat_ns, Ordering::Relaxed);
        c.lat_max_ns.fetch_max(lat_ns, Ordering::Relaxed);
    }
}

impl Drop for FlowEntry {
    fn drop(&mut self) {
        // The flow goes before its group (field order would drop it after).
        drop(self.flow.take());
    }
}

/// Totals of flows that have ended, so the statistics keep them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ended {
    /// Flows that have ended.
    pub flows: u64,
    /// Bytes they read.
    pub read_bytes: u64,
    /// Bytes they wrote.
    pub write_bytes: u64,
}

struct Inner {
    /// By process.
    flows: HashMap<ProcKey, Arc<FlowEntry>>,
    /// Thread id -> process (revalidated every [`REVALIDATE_NS`]; dropped
    /// by `reap` with its flow).
    threads: HashMap<u32, ThreadEntry>,
    groups: HashMap<String, Weak<GroupEntry>>,
    ended: Ended,
}

/// Every live flow and group.
pub struct FlowTable {
    engine: Arc<Engine>,
    policy: Policy,
    origin: Instant,
    inner: Mutex<Inner>,
}

/// A snapshot of one flow for the statistics.
#[derive(Clone, Debug)]
pub struct FlowView {
    /// The flow: its process (id and start time; a reused pid is another
    /// flow).
    pub key: ProcKey,
    /// Thread group id (the process id).
    pub tgid: u32,
    /// Executable name.
    pub exe: String,
    /// Group name.
    pub group: String,
    /// Group weight.
    pub group_weight: u32,
    /// Flow weight in its group.
    pub weight: u32,
    /// I/O priority class.
    pub class: IoClass,
    /// Priority level 0..=7.
    pub level: u8,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Requests finished.
    pub requests: u64,
    /// Sum of request latencies, ns.
    pub lat_sum_ns: u64,
    /// Largest request latency, ns.
    pub lat_max_ns: u64,
}

impl FlowTable {
    /// An empty table whose flows go through `engine`, placed by `policy`.
    pub fn new(engine: Arc<Engine>, policy: Policy) -> Self {
        FlowTable {
            engine,
            policy,
            origin: Instant::now(),
            inner: Mutex::new(Inner {
                flows: HashMap::new(),
                threads: HashMap::new(),
                groups: HashMap::new(),
                ended: Ended::default(),
            }),
        }
    }

    /// The engine the flows go through.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// The flow of the process behind thread `tid` (the FUSE request's
    /// pid), created on first use. `uid` is the request's.
    pub fn flow_for(&self, tid: u32, uid: u32) -> io::Result<Arc<FlowEntry>> {
        let now = self.now_ns();
        let recheck = {
            let inner = self.inner.lock().unwrap();
            match inner.threads.get(&tid) {
                Some(t) if now.saturating_sub(t.checked_ns) < REVALIDATE_NS => {
                    if let Some(f) = inner.flows.get(&t.key) {
                        f.last_io.store(now, Ordering::Relaxed);
                        return Ok(f.clone());
                    }
                    None
                }
                Some(t) => Some(t.start),
                None => None,
            }
        };
        // Remembered, but not checked for a while: still the same thread?
        // (/proc is read without the lock.)
        let thread_start = procinfo::start_time(tid);
        if let Some(start) = recheck.filter(|&s| thread_start == Some(s)) {
            let mut inner = self.inner.lock().unwrap();
            if let Some(t) = inner.threads.get_mut(&tid).filter(|t| t.start == start) {
                t.checked_ns = now;
                let key = t.key;
                if let Some(f) = inner.flows.get(&key) {
                    f.last_io.store(now, Ordering::Relaxed);
                    return Ok(f.clone());
                }
            }
        }
        // Unknown thread, a reused thread id, or pid 0 (a request the
        // kernel makes itself, e.g. a release after the process exited):
        // key it by what /proc says, or by pid 0 = the kernel.
        let key = procinfo::proc_key(tid).unwrap_or(ProcKey { tgid: 0, start: 0 });
        let mut inner = self.inner.lock().unwrap();
        if inner.threads.len() >= MAX_THREADS {
            inner.threads.clear();
        }
        inner.threads.insert(
            tid,
            ThreadEntry {
                key,
                start: thread_start.unwrap_or(0),
                checked_ns: now,
            },
        );
        if let Some(f) = inner.flows.get(&key) {
            f.last_io.store(now, Ordering::Relaxed);
            return Ok(f.clone());
        }
        let entry = Arc::new(self.new_flow(&mut inner, tid, key, uid)?);
        entry.last_io.store(now, Ordering::Relaxed);
        inner.flows.insert(key, entry.clone());
        Ok(entry)
    }

    fn new_flow(
        &self,
        inner: &mut Inner,
        tid: u32,
        key: ProcKey,
        uid: u32,
    ) -> io::Result<FlowEntry> {
        let pid = if key.tgid == 0 { tid } else { key.tgid };
        let caller = Caller {
            uid,
            cgroup: procinfo::cgroup(pid),
            exe: procinfo::exe_name(pid),
        };
        let (mut class, mut level) = procinfo::io_priority(tid);
        let rule = self.policy.rule_for(&caller).cloned().unwrap_or_default();
        if let Some(c) = rule.class.as_deref().and_then(parse_class) {
            class = c;
        }
        if let Some(l) = rule.level {
            level = l;
        }
        let weight = rule.weight.unwrap_or((8 - u32::from(level.min(7))) * 10);
        let gname = rule.group.clone().unwrap_or_else(|| caller.cgroup.clone());
        let gweight = rule.group_weight.unwrap_or(self.policy.group_weight);
        let group = self.group(inner, &gname, gweight)?;
        let opts = FlowOptions::weight(weight)
            .prio(class, level)
            .group(group.id);
        let flow = self.engine.flow(opts)?;
        Ok(FlowEntry {
            flow: Some(flow),
            key,
            exe: caller.exe,
            class,
            level,
            weight,
            group,
            last_io: AtomicU64::new(0),
            counters: Counters::default(),
        })
    }

    fn group(&self, inner: &mut Inner, name: &str, weight: u32) -> io::Result<Arc<GroupEntry>> {
        if let Some(g) = inner.groups.get(name).and_then(Weak::upgrade) {
            return Ok(g);
        }
        let id = self.engine.add_group(GroupId::ROOT, weight)?;
        let g = Arc::new(GroupEntry {
            id,
            name: name.to_string(),
            weight,
            engine: self.engine.clone(),
        });
        inner.groups.insert(name.to_string(), Arc::downgrade(&g));
        Ok(g)
    }

    /// Ends the flows of processes that exited or have been idle for the
    /// policy's timeout, and forgets their threads and groups. Returns how
    /// many flows ended.
    pub fn reap(&self) -> usize {
        let timeout = self.policy.idle_timeout_ns;
        let idle = |f: &FlowEntry, now: u64| {
            now.saturating_sub(f.last_io.load(Ordering::Relaxed)) >= timeout
        };
        // The processes are looked up in /proc without the lock, which
        // every request's flow lookup takes.
        let keys: Vec<ProcKey> = self.inner.lock().unwrap().flows.keys().copied().collect();
        let dead: Vec<ProcKey> = keys
            .into_iter()
            .filter(|k| k.tgid != 0 && !procinfo::alive(*k))
            .collect();
        let now = self.now_ns();
        let mut inner = self.inner.lock().unwrap();
        let mut gone: Vec<ProcKey> = inner
            .flows
            .iter()
            .filter(|(k, f)| idle(f, now) || dead.contains(k))
            .map(|(k, _)| *k)
            .collect();
        gone.sort_by_key(|k| (k.tgid, k.start));
        for k in &gone {
            if let Some(f) = inner.flows.remove(k) {
                let c = &f.counters;
                inner.ended.flows += 1;
                inner.ended.read_bytes += c.read_bytes.load(Ordering::Relaxed);
                inner.ended.write_bytes += c.write_bytes.load(Ordering::Relaxed);
            }
        }
        let Inner {
            flows,
            threads,
            groups,
            ..
        } = &mut *inner;
        threads.retain(|_, t| flows.contains_key(&t.key));
        groups.retain(|_, g| g.strong_count() > 0);
        gone.len()
    }

    /// Live flows and groups (the scheduler's view: what has not ended).
    pub fn counts(&self) -> (usize, usize) {
        let inner = self.inner.lock().unwrap();
        let groups = inner
            .groups
            .values()
            .filter(|g| g.strong_count() > 0)
            .count();
        (inner.flows.len(), groups)
    }

    /// Totals of the flows that ended.
    pub fn ended(&self) -> Ended {
        self.inner.lock().unwrap().ended
    }

    /// A snapshot of every live flow.
    pub fn views(&self) -> Vec<FlowView> {
        let inner = self.inner.lock().unwrap();
        let mut v: Vec<FlowView> = inner
            .flows
            .values()
            .map(|f| {
                let c = &f.counters;
                FlowView {
                    key: f.key,
                    tgid: f.key.tgid,
                    exe: f.exe.clone(),
                    group: f.group.name.clone(),
                    group_weight: f.group.weight,
                    weight: f.weight,
                    class: f.class,
                    level: f.level,
                    read_bytes: c.read_bytes.load(Ordering::Relaxed),
                    write_bytes: c.write_bytes.load(Ordering::Relaxed),
                    requests: c.requests.load(Ordering::Relaxed),
                    lat_sum_ns: c.lat_sum_ns.load(Ordering::Relaxed),
                    lat_max_ns: c.lat_max_ns.load(Ordering::Relaxed),
                }
            })
            .collect();
        v.sort_by(|a, b| (&a.group, a.tgid).cmp(&(&b.group, b.tgid)));
        v
    }

    /// Ends every flow (at unmount).
    pub fn clear(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.flows.clear();
        inner.threads.clear();
        inner.groups.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(policy: Policy) -> FlowTable {
        let engine = Arc::new(Engine::nop().scheduler("bfq").open().unwrap());
        FlowTable::new(engine, policy)
    }

    #[test]
    fn one_flow_per_process_and_reaped_when_idle() {
        let t = table(Policy {
            idle_timeout_ns: 100_000_000,
            ..Policy::default()
        });
        let me = std::process::id();
        let a = t.flow_for(me, 0).unwrap();
        let b = t.flow_for(me, 0).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.key.tgid, me);
        assert_eq!(t.counts(), (1, 1));
        drop((a, b));
        assert_eq!(t.reap(), 0);
        std::thread::sleep(std::time::Duration::from_millis(150));
        assert_eq!(t.reap(), 1);
        assert_eq!(t.counts(), (0, 0));
        assert_eq!(t.ended().flows, 1);
    }

    #[test]
    fn a_reused_thread_id_is_keyed_again() {
        let mut t = table(Policy::default());
        // The table is 2 s old, so an entry checked at 0 is due.
        t.origin = Instant::now() - std::time::Duration::from_secs(2);
        let me = std::process::id();
        let real = t.flow_for(me, 0).unwrap();
        // What the table would hold if this thread id had belonged to a
        // thread of another (still live) process, last checked long ago.
        let other = ProcKey {
            tgid: me,
            start: real.key.start + 1,
        };
        let old = Arc::new({
            let mut inner = t.inner.lock().unwrap();
            t.new_flow(&mut inner, me, other, 0).unwrap()
        });
        {
            let mut inner = t.inner.lock().unwrap();
            inner.flows.insert(other, old.clone());
            let e = inner.threads.get_mut(&me).unwrap();
            e.key = other;
            e.start += 1;
        }
        // Checked recently: the cache is trusted.
        assert_eq!(t.flow_for(me, 0).unwrap().key, other);
        // Last checked more than REVALIDATE_NS ago.
        t.inner
            .lock()
            .unwrap()
            .threads
            .get_mut(&me)
            .unwrap()
            .checked_ns = 0;
        // Checked again: the thread's start time differs, so it is keyed
        // by what /proc says now.
        assert_eq!(t.flow_for(me, 0).unwrap().key, real.key);
        let e = *t.inner.lock().unwrap().threads.get(&me).unwrap();
        assert_eq!(e.key, real.key);
        assert_eq!(Some(e.start), procinfo::start_time(me));
    }

    #[test]
    fn exited_process_flow_ends_and_policy_applies() {
        let p = Policy::parse(
            "[[rule]]\nexe = \"sleep\"\nweight = 300\ngroup = \"g\"\ngroup_weight = 700",
        )
        .unwrap();
        let t = table(p);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        // /proc/PID/exe of a fresh child may still be the parent's until exec.
        let mut f = t.flow_for(pid, 0).unwrap();
        for _ in 0..100 {
            if f.exe == "sleep" {
                break;
            }
            drop(f);
            t.clear();
            std::thread::sleep(std::time::Duration::from_millis(10));
            f = t.flow_for(pid, 0).unwrap();
        }
        assert_eq!(
            (f.weight, f.group.name.as_str(), f.group.weight),
            (300, "g", 700)
        );
        drop(f);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(t.reap(), 1);
        assert_eq!(t.counts(), (0, 0));
    }
}
