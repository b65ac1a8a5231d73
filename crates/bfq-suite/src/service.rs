//! How a scheduler served the flows, measured from the simulator's
//! request trace (`t_ns,event,flow,req,sector,sectors,op`, docs/scenarios.md):
//! dispatch runs (maximal sequences of consecutive dispatches to one
//! flow, the service a flow gets before the device turns to another),
//! each flow's waits in the scheduler (from a request's arrival to its
//! dispatch) and the device's queue depth. The findings' causes cite these
//! numbers instead of asserting how a scheduler behaves.

use std::collections::HashMap;
use std::io::{self, Write};

/// Per flow: dispatched sectors, dispatch runs, and the time its runs
/// held the device (from a run's first dispatch to the next run's).
#[derive(Clone, Debug, Default)]
struct FlowRuns {
    sectors: u64,
    runs: u64,
    longest: u64,
    time_ns: u64,
    /// Requests dispatched.
    reqs: u64,
    /// Requests whose arrival and dispatch were both seen, and their
    /// summed waits.
    waited: u64,
    wait_ns: u64,
    /// The longest wait and the dispatches of other flows' requests during
    /// it.
    worst_wait_ns: u64,
    worst_wait_others: u64,
}

/// A queued request: its flow's wait starts at `t`, when `dispatches`
/// requests had been dispatched.
#[derive(Clone, Debug)]
struct Queued {
    t: u64,
    dispatches: u64,
    /// Dispatches of its own flow's requests up to `t`.
    own: u64,
}

/// Service pattern of one run, fed line by line by the simulator's trace
/// writer (it implements [`Write`]). Memory is bounded by the number of
/// flows, the requests queued at a time and one partial line.
#[derive(Debug, Default)]
pub struct Service {
    partial: Vec<u8>,
    flows: HashMap<String, FlowRuns>,
    last: Option<String>,
    run: u64,
    depth: u64,
    depth_ns: f64,
    t0: Option<u64>,
    t_last: u64,
    /// First dispatch of the current run.
    run_start: u64,
    /// Events before this time (ns) are not counted.
    from_ns: u64,
    /// Requests queued and not yet dispatched, by trace id.
    queued: HashMap<u64, Queued>,
    dispatches: u64,
}

impl Service {
    /// An empty pattern, before the first line of trace.
    pub fn new() -> Service {
        Service::default()
    }

    /// A pattern that counts only the events from `from_ns` on (a window
    /// at the end of a run).
    pub fn from(from_ns: u64) -> Service {
        Service {
            from_ns,
            ..Service::default()
        }
    }

    fn line(&mut self, l: &str) {
        let mut it = l.split(',');
        let (Some(t), Some(ev), Some(flow)) = (it.next(), it.next(), it.next()) else {
            return;
        };
        let Ok(t) = t.parse::<u64>() else { return };
        if t < self.from_ns {
            return;
        }
        let req: Option<u64> = it.next().and_then(|s| s.parse().ok());
        let sectors: u64 = it.nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        if let Some(req) = req {
            self.wait(t, ev, flow, req);
        }
        if ev == "D" || ev == "C" {
            self.t0.get_or_insert(t);
            self.depth_ns += self.depth as f64 * t.saturating_sub(self.t_last) as f64;
            self.t_last = t;
        }
        match ev {
            "D" => {
                self.depth += 1;
                if self.last.as_deref() != Some(flow) {
                    self.close_run(t);
                    self.run_start = t;
                    self.last = Some(flow.to_string());
                    self.flows.entry(flow.to_string()).or_default().runs += 1;
                }
                self.run += sectors;
                // The flow's entry exists: its run opened it.
                if let Some(f) = self.flows.get_mut(flow) {
                    f.sectors += sectors;
                }
            }
            "C" => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }

    /// A request's wait in the scheduler: it starts at its arrival (`Q`)
    /// and ends at its dispatch (`D`).
    fn wait(&mut self, t: u64, ev: &str, flow: &str, req: u64) {
        if ev == "Q" {
            let own = self.flows.get(flow).map_or(0, |f| f.reqs);
            let q = Queued {
                t,
                dispatches: self.dispatches,
                own,
            };
            self.queued.insert(req, q);
            return;
        }
        if ev != "D" {
            return;
        }
        self.dispatches += 1;
        if !self.flows.contains_key(flow) {
            self.flows.insert(flow.to_string(), FlowRuns::default());
        }
        let Some(f) = self.flows.get_mut(flow) else {
            return;
        };
        f.reqs += 1;
        let Some(q) = self.queued.remove(&req) else {
            return;
        };
        let w = t.saturating_sub(q.t);
        f.waited += 1;
        f.wait_ns += w;
        if w > f.worst_wait_ns {
            f.worst_wait_ns = w;
            // Dispatches since its arrival, less its own flow's (itself
            // and any queued before it).
            let own = f.reqs - q.own;
            f.worst_wait_others = (self.dispatches - q.dispatches).saturating_sub(own);
        }
    }

    /// Closes the current run at `t` (the next run's first dispatch, or
    /// the last event).
    fn close_run(&mut self, t: u64) {
        if let Some(f) = self.last.as_ref().and_then(|l| self.flows.get_mut(l)) {
            f.longest = f.longest.max(self.run);
            f.time_ns += t.saturating_sub(self.run_start);
        }
        self.run = 0;
    }

    /// Ends the measurement (closes the current run).
    pub fn finish(mut self) -> Service {
        self.close_run(self.t_last);
        self
    }

    /// Share of the device time (from the first dispatch to the last
    /// event) held by the dispatch runs of the flows matching `pred`: a
    /// run holds the device from its first dispatch to the next run's
    /// (its positioning, transfer and any idling for its flow). NaN when
    /// nothing was dispatched.
    pub fn time_share(&self, pred: impl Fn(&str) -> bool) -> f64 {
        let all: u64 = self.flows.values().map(|f| f.time_ns).sum();
        let mine: u64 = self
            .flows
            .iter()
            .filter(|(n, _)| pred(n))
            .map(|(_, f)| f.time_ns)
            .sum();
        if all == 0 {
            f64::NAN
        } else {
            mine as f64 / all as f64
        }
    }

    /// Mean time (ms) a dispatch run of the flows matching `pred` held the
    /// device (NaN when none was dispatched).
    pub fn mean_run_ms(&self, pred: impl Fn(&str) -> bool) -> f64 {
        let (t, r) = self
            .flows
            .iter()
            .filter(|(n, _)| pred(n))
            .fold((0u64, 0u64), |(t, r), (_, f)| (t + f.time_ns, r + f.runs));
        if r == 0 {
            f64::NAN
        } else {
            t as f64 / r as f64 / 1e6
        }
    }

    /// Mean time (ms) between the starts of two turns of one flow
    /// matching `pred`: the span from the first dispatch to the last event
    /// over each such flow's dispatch runs, averaged over the flows that
    /// were dispatched. With every flow backlogged this is a round of
    /// B-WF2Q+ or of CFQ's service (each flow served once), what a flow
    /// that joins with a full budget waits for at most. NaN when none was
    /// dispatched.
    pub fn round_ms(&self, pred: impl Fn(&str) -> bool) -> f64 {
        let span = self.t_last.saturating_sub(self.t0.unwrap_or(0)) as f64 / 1e6;
        let (n, runs) = self
            .flows
            .iter()
            .filter(|(name, f)| pred(name) && f.runs > 0)
            .fold((0u64, 0u64), |(n, r), (_, f)| (n + 1, r + f.runs));
        if runs == 0 {
            f64::NAN
        } else {
            span * n as f64 / runs as f64
        }
    }

    /// Mean sectors per dispatch run of the flows whose name matches
    /// `pred` (NaN when none was dispatched).
    pub fn mean_run_sectors(&self, pred: impl Fn(&str) -> bool) -> f64 {
        let (s, r) = self
            .flows
            .iter()
            .filter(|(n, _)| pred(n))
            .fold((0u64, 0u64), |(s, r), (_, f)| (s + f.sectors, r + f.runs));
        if r == 0 {
            f64::NAN
        } else {
            s as f64 / r as f64
        }
    }

    /// Longest dispatch run, in sectors, of the flows matching `pred`.
    pub fn longest_run_sectors(&self, pred: impl Fn(&str) -> bool) -> f64 {
        let l = self.flows.iter().filter(|(n, _)| pred(n));
        l.map(|(_, f)| f.longest)
            .max()
            .map_or(f64::NAN, |x| x as f64)
    }

    /// Dispatch runs of the flows matching `pred`.
    pub fn runs(&self, pred: impl Fn(&str) -> bool) -> u64 {
        self.flows
            .iter()
            .filter(|(n, _)| pred(n))
            .map(|(_, f)| f.runs)
            .sum()
    }

    /// Mean requests per dispatch run of the flows matching `pred` (NaN
    /// when none was dispatched).
    pub fn mean_run_reqs(&self, pred: impl Fn(&str) -> bool) -> f64 {
        let r = self.runs(&pred);
        let n: u64 = self
            .flows
            .iter()
            .filter(|(n, _)| pred(n))
            .map(|(_, f)| f.reqs)
            .sum();
        n as f64 / r as f64
    }

    /// Mean wait (ms) of flow `flow`'s requests from their arrival to
    /// their dispatch (NaN when none was seen both arriving and
    /// dispatched). Requests that arrived before the counting window
    /// ([`Service::from`]) are left out, so a window that opens with a
    /// queue counts its waits short.
    pub fn mean_wait_ms(&self, flow: &str) -> f64 {
        self.flows
            .get(flow)
            .map_or(f64::NAN, |f| f.wait_ns as f64 / f.waited as f64 / 1e6)
    }

    /// Flow `flow`'s longest wait (ms) from a request's arrival to its
    /// dispatch, and the requests of other flows dispatched during it
    /// (NaN, 0 for a flow never dispatched).
    pub fn worst_wait(&self, flow: &str) -> (f64, u64) {
        self.flows.get(flow).map_or((f64::NAN, 0), |f| {
            (f.worst_wait_ns as f64 / 1e6, f.worst_wait_others)
        })
    }

    /// Dispatch runs per second (how often the device turns from one
    /// flow to another).
    pub fn runs_per_s(&self) -> f64 {
        let runs: u64 = self.flows.values().map(|f| f.runs).sum();
        let span = self.t_last.saturating_sub(self.t0.unwrap_or(0)) as f64 / 1e9;
        if span > 0.0 {
            runs as f64 / span
        } else {
            f64::NAN
        }
    }

    /// Mean number of requests dispatched and not yet completed, over the
    /// span from the first dispatch to the last event.
    pub fn mean_depth(&self) -> f64 {
        let span = self.t_last.saturating_sub(self.t0.unwrap_or(0)) as f64;
        if span > 0.0 {
            self.depth_ns / span
        } else {
            f64::NAN
        }
    }
}

impl Write for Service {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Whole lines are parsed from `buf` in place; only a trailing
        // partial line is kept.
        let mut rest = buf;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            let (l, tail) = (&rest[..i], &rest[i + 1..]);
            if self.partial.is_empty() {
                if let Ok(s) = std::str::from_utf8(l) {
                    self.line(s);
                }
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(l);
                if let Ok(s) = std::str::from_utf8(&whole) {
                    self.line(s);
                }
                whole.clear();
                self.partial = whole;
            }
            rest = tail;
        }
        self.partial.extend_from_slice(rest);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_depth_from_a_trace() {
        let mut s = Service::new();
        let t = "t_ns,event,flow,req,sector,sectors,op\n\
                 0,Q,a,1,0,8,R\n0,D,a,1,0,8,R\n0,D,a,2,8,8,R\n\
                 1000,C,a,1,0,8,R\n1000,D,b,3,99,8,R\n2000,C,a,2,8,8,R\n\
                 2000,D,a,4,16,8,R\n3000,C,b,3,99,8,R\n4000,C,a,4,16,8,R\n";
        // Written in two pieces that split a line.
        let (x, y) = t.split_at(40);
        s.write_all(x.as_bytes()).unwrap();
        s.write_all(y.as_bytes()).unwrap();
        let s = s.finish();
        // Runs: a (16 sectors), b (8), a (8).
        assert_eq!(s.mean_run_sectors(|f| f == "a"), 12.0);
        assert_eq!(s.longest_run_sectors(|f| f == "a"), 16.0);
        assert_eq!(s.mean_run_sectors(|f| f == "b"), 8.0);
        assert!(s.mean_run_sectors(|f| f == "c").is_nan());
        // Depth: 2 for 1 us, 2 for 1 us, 2 for 1 us, 1 for 1 us: 7/4.
        assert!((s.mean_depth() - 1.75).abs() < 1e-9, "{}", s.mean_depth());
        assert!((s.runs_per_s() - 3.0 / 4e-6).abs() < 1e-3);
        // Device time: a 0..1000 and 2000..4000 (the last event), b 1000..2000.
        assert!((s.time_share(|f| f == "a") - 0.75).abs() < 1e-9);
        assert!((s.mean_run_ms(|f| f == "a") - 0.0015).abs() < 1e-12);
        assert!((s.mean_run_ms(|f| f == "b") - 0.001).abs() < 1e-12);
        assert!(s.mean_run_ms(|f| f == "c").is_nan());
        // Rounds over the 4 us span: a had 2 runs, b 1; together 2 flows
        // in 3 runs.
        assert!((s.round_ms(|f| f == "a") - 0.002).abs() < 1e-12);
        assert!((s.round_ms(|f| f == "b") - 0.004).abs() < 1e-12);
        assert!((s.round_ms(|_| true) - 0.008 / 3.0).abs() < 1e-12);
        assert!(s.round_ms(|f| f == "c").is_nan());
    }

    /// Waits from arrival to dispatch: b's request waits behind two of a's.
    #[test]
    fn waits_from_arrival_to_dispatch() {
        let t = "0,Q,a,1,0,8,R\n0,Q,b,2,99,8,R\n0,Q,a,3,8,8,R\n\
                 0,D,a,1,0,8,R\n1000,C,a,1,0,8,R\n1000,D,a,3,8,8,R\n\
                 2000,C,a,3,8,8,R\n2000,D,b,2,99,8,R\n3000,C,b,2,99,8,R\n";
        let mut s = Service::new();
        s.write_all(t.as_bytes()).unwrap();
        let s = s.finish();
        assert_eq!(s.worst_wait("b"), (0.002, 2));
        assert_eq!(s.worst_wait("a"), (0.001, 0));
        assert!((s.mean_wait_ms("a") - 0.0005).abs() < 1e-12);
        assert_eq!(s.runs(|f| f == "a"), 1);
        assert_eq!(s.mean_run_reqs(|f| f == "a"), 2.0);
        assert!(s.worst_wait("c").0.is_nan());
    }

    /// A pattern counted from a time on ignores what came before.
    #[test]
    fn a_window_counts_only_its_events() {
        let t = "0,D,a,1,0,8,R\n1000,C,a,1,0,8,R\n1000,D,b,2,99,8,R\n\
                 2000,C,b,2,99,8,R\n2000,D,a,3,8,8,R\n3000,C,a,3,8,8,R\n";
        let mut s = Service::from(1000);
        s.write_all(t.as_bytes()).unwrap();
        let s = s.finish();
        assert_eq!(s.mean_run_sectors(|f| f == "a"), 8.0);
        assert!((s.time_share(|f| f == "b") - 0.5).abs() < 1e-9);
        assert!((s.mean_run_ms(|f| f == "a") - 0.001).abs() < 1e-12);
    }
}
