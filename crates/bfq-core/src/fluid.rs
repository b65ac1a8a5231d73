//! The ideal fluid system, as an independent reference for tests: a GPS
//! server that, for each amount of service the real scheduler dispatched,
//! shares that same amount among the flows backlogged *in the fluid system*
//! in proportion to their weights (water-filling when some flows' fluid
//! backlog drains). 2010 paper Sec. II-D: the "corresponding" ideal system
//! that B-WF2Q+ tracks batch by batch. A flow's lag is what the fluid system
//! served it minus what the real one did.
//!
//! It also checks Theorem 1 of the 2010 paper directly on a service log:
//! over any interval [t1, t2] during which flow i is continuously
//! (quasi-)backlogged, phi_i * W(t1, t2) - W_i(t1, t2) <= B_max + B_i,max +
//! L_max, with phi_i the flow's weight over the sum of the weights of the
//! flows present during the interval.

/// GPS fluid reference driven by the real system's dispatched service.
#[derive(Clone, Debug, Default)]
pub struct Fluid {
    weight: Vec<f64>,
    arrived: Vec<f64>,
    served: Vec<f64>,
}

impl Fluid {
    /// An empty system.
    pub fn new() -> Self {
        Fluid::default()
    }

    /// Adds a flow; returns its index.
    pub fn add_flow(&mut self, weight: u32) -> usize {
        self.weight.push(f64::from(weight));
        self.arrived.push(0.0);
        self.served.push(0.0);
        self.weight.len() - 1
    }

    /// Work arrives for `flow`.
    pub fn arrive(&mut self, flow: usize, sectors: u64) {
        self.arrived[flow] += sectors as f64;
    }

    /// The real system served `amount` sectors: the fluid system serves the
    /// same amount, shared by weight among its backlogged flows.
    pub fn serve(&mut self, amount: u64) {
        let mut left = amount as f64;
        while left > 1e-9 {
            let backlogged: Vec<usize> = (0..self.weight.len())
                .filter(|&i| self.arrived[i] - self.served[i] > 1e-9)
                .collect();
            if backlogged.is_empty() {
                return;
            }
            let wsum: f64 = backlogged.iter().map(|&i| self.weight[i]).sum();
            // Service per unit of weight until the first fluid flow drains.
            let drain = backlogged
                .iter()
                .map(|&i| (self.arrived[i] - self.served[i]) / self.weight[i])
                .fold(f64::INFINITY, f64::min);
            let per_weight = (left / wsum).min(drain);
            for &i in &backlogged {
                let x = (per_weight * self.weight[i]).min(self.arrived[i] - self.served[i]);
                self.served[i] += x;
            }
            left -= per_weight * wsum;
        }
    }

    /// Service the fluid system gave `flow` so far.
    pub fn served(&self, flow: usize) -> f64 {
        self.served[flow]
    }

    /// Fluid service minus real service.
    pub fn lag(&self, flow: usize, real_served: u64) -> f64 {
        self.served[flow] - real_served as f64
    }
}

/// One entry of a service log: at `time`, `sectors` of `flow` dispatched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// Time of the dispatch, in ns.
    pub time: u64,
    /// Index of the flow.
    pub flow: usize,
    /// Sectors dispatched.
    pub sectors: u64,
}

/// D(t) = phi_i * W(from, t) - W_i(from, t) after each dispatch of a
/// time-ordered service log within `[from, to]`.
fn deficits(
    log: &[Served],
    flow: usize,
    phi: f64,
    from: u64,
    to: u64,
) -> impl Iterator<Item = f64> + '_ {
    let within = log.iter().filter(move |s| s.time >= from && s.time <= to);
    within.scan(0.0f64, move |d, s| {
        *d += phi * s.sectors as f64;
        if s.flow == flow {
            *d -= s.sectors as f64;
        }
        Some(*d)
    })
}

/// Largest value of phi_i * W(t1, t2) - W_i(t1, t2) over t1 <= t2 within
/// `[from, to]`, from a time-ordered service log. O(log length).
pub fn max_service_deficit(log: &[Served], flow: usize, phi: f64, from: u64, to: u64) -> f64 {
    // The answer is max over t1 <= t2 of D(t2) - D(t1): track the running
    // minimum of D.
    let (mut min_d, mut worst) = (0.0f64, 0.0f64);
    for d in deficits(log, flow, phi, from, to) {
        min_d = min_d.min(d);
        worst = worst.max(d - min_d);
    }
    worst
}

/// Largest value of phi_i * W(from, t) - W_i(from, t) over t within
/// `[from, to]`: a flow's shortfall since `from` (a flow that starts then
/// has no lag), from a time-ordered service log. O(log length).
pub fn max_deficit_since(log: &[Served], flow: usize, phi: f64, from: u64, to: u64) -> f64 {
    deficits(log, flow, phi, from, to).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fluid_shares_by_weight_and_water_fills() {
        let mut f = Fluid::new();
        let a = f.add_flow(1);
        let b = f.add_flow(3);
        f.arrive(a, 1000);
        f.arrive(b, 100);
        f.serve(200);
        // b drains its 100 while a gets 33.3, then a takes the rest.
        assert!((f.served(b) - 100.0).abs() < 1e-6);
        assert!((f.served(a) - 100.0).abs() < 1e-6);
        assert!((f.lag(a, 50) - 50.0).abs() < 1e-6);
    }

    #[test]
    fn deficit_over_worst_interval() {
        let log = [
            Served {
                time: 0,
                flow: 1,
                sectors: 100,
            },
            Served {
                time: 1,
                flow: 1,
                sectors: 100,
            },
            Served {
                time: 2,
                flow: 0,
                sectors: 100,
            },
        ];
        // phi = 1/2: worst interval is [0, 1]: 0.5*200 - 0 = 100.
        assert!((max_service_deficit(&log, 0, 0.5, 0, 10) - 100.0).abs() < 1e-9);
        // Since time 1: 0.5*100 after the first dispatch, then 0.5*200 - 100 = 0.
        assert!((max_deficit_since(&log, 0, 0.5, 1, 10) - 50.0).abs() < 1e-9);
    }
}
