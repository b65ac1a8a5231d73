//! Per-flow ends and starts: `stop`, `duration` and `after`
//! (docs/scenarios.md): a flow issues nothing past its own end, a flow
//! waiting for others starts only once they have all ended, and the
//! settings are checked. Deterministic (simulated time only).

use bfq_core::Fifo;
use bfq_sim::{simulate, Scenario, SimOptions, SimResult};

const MS: u64 = 1_000_000;

fn run(text: &str) -> (SimResult, Vec<(u64, char, String)>) {
    let sc = Scenario::from_toml_str(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let mut trace = Vec::new();
    let opts = SimOptions {
        trace: Some(&mut trace),
        ..SimOptions::default()
    };
    let r = simulate(&sc, Box::new(Fifo::new()), sc.seed, opts).unwrap();
    let events = String::from_utf8(trace)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            (
                v[0].parse().unwrap(),
                v[1].chars().next().unwrap(),
                v[2].to_string(),
            )
        })
        .collect();
    (r, events)
}

/// Times of flow `name`'s events of kind `ev` (`Q`, `D`, `C`).
fn times(events: &[(u64, char, String)], name: &str, ev: char) -> Vec<u64> {
    events
        .iter()
        .filter(|(_, e, n)| *e == ev && n == name)
        .map(|(t, _, _)| *t)
        .collect()
}

fn err(text: &str) -> String {
    Scenario::from_toml_str(text, "t.toml")
        .unwrap_err()
        .to_string()
}

#[test]
fn a_flow_issues_nothing_after_its_stop() {
    let (r, ev) = run("name = \"x\"\nduration = \"4s\"\n\
         [[flow]]\nname = \"a\"\nstop = \"1.5s\"\n\
         [[flow]]\nname = \"r\"\npattern = \"rand\"\ndepth = 4\nstop = \"2s\"\n\
         [[flow]]\nname = \"b\"\nregion = { start = \"50%\" }\n");
    for (name, stop) in [("a", 1500 * MS), ("r", 2000 * MS)] {
        let q = times(&ev, name, 'Q');
        let c = times(&ev, name, 'C');
        assert!(!q.is_empty() && q.iter().all(|&t| t <= stop), "{name}");
        // the run ends with the last completion of what was in flight
        let last = *c.last().unwrap();
        assert!(
            last >= *q.last().unwrap() && last < stop + 200 * MS,
            "{name}"
        );
        let f = r.flows.iter().find(|f| f.name == name).unwrap();
        assert_eq!(f.completions_s, vec![last as f64 / 1e9], "{name}");
    }
    // the other flow goes on to the end of the run
    assert!(*times(&ev, "b", 'Q').last().unwrap() > 3900 * MS);
}

#[test]
fn duration_counts_from_the_flows_own_start() {
    let (_, ev) = run("name = \"x\"\nduration = \"3s\"\n\
         [[flow]]\nname = \"a\"\nstart = \"500ms\"\nduration = \"1s\"\n\
         [[flow]]\nname = \"b\"\nregion = { start = \"50%\" }\n");
    let q = times(&ev, "a", 'Q');
    // start jitter: at most 5 ms
    assert!(q[0] >= 500 * MS && q[0] <= 505 * MS);
    assert!(*q.last().unwrap() <= q[0] + 1000 * MS);
    assert!(*q.last().unwrap() > q[0] + 900 * MS);
}

#[test]
fn repeats_end_at_the_stop() {
    let (r, ev) = run("name = \"x\"\nduration = \"5s\"\n\
         [[flow]]\nname = \"a\"\nbytes = \"1M\"\nrepeat = \"200ms\"\nstop = \"2s\"\n");
    let q = times(&ev, "a", 'Q');
    assert!(q.iter().all(|&t| t <= 2000 * MS));
    let f = &r.flows[0];
    assert!(f.completions_s.len() >= 3, "{:?}", f.completions_s);
    assert!(r.sim_time_s <= 2.2, "the run ends when the last flow has");
}

#[test]
fn a_buffered_writer_stops_dirtying_at_its_stop() {
    let (r, _) = run(
        "name = \"x\"\nduration = \"3s\"\n[output]\nseries_interval = \"100ms\"\n\
         [[flow]]\nname = \"w\"\nop = \"write\"\nbuffered = true\nstop = \"1s\"\n\
         [[flow]]\nname = \"b\"\nregion = { start = \"50%\" }\n",
    );
    let w = r.flows.iter().find(|f| f.name == "w").unwrap();
    assert!(w.bytes > 0);
    // its writeback in flight at 1 s (up to 64 requests of 512 KiB)
    // completes, then nothing more is written for it
    let end = w.completions_s[0];
    assert!((1.0..2.0).contains(&end), "{end}");
    let after = (end * 10.0).ceil() as usize;
    assert!(
        w.series_mib_s[after..].iter().all(|&x| x == 0.0),
        "{:?}",
        w.series_mib_s
    );
    assert!(w.series_mib_s[after - 1] > 0.0);
}

#[test]
fn a_flow_after_others_starts_when_they_have_all_ended() {
    let (r, ev) = run(
        "name = \"x\"\nduration = \"10s\"\n\
         [[flow]]\nname = \"a\"\ncount = 2\nbytes = \"4M\"\n\
         [[flow]]\nname = \"t\"\nduration = \"700ms\"\nregion = { start = \"25%\" }\n\
         [[flow]]\nname = \"b\"\nafter = [\"a\", \"t\"]\nduration = \"1s\"\nregion = { start = \"50%\" }\n\
         [[flow]]\nname = \"c\"\nafter = [\"b\"]\nstart = \"5s\"\nbytes = \"1M\"\nregion = { start = \"75%\" }\n",
    );
    let ends = ["a.1", "a.2", "t"]
        .iter()
        .map(|n| *times(&ev, n, 'C').last().unwrap())
        .max()
        .unwrap();
    let b = times(&ev, "b", 'Q');
    assert!(
        b[0] >= ends && b[0] <= ends + 5 * MS,
        "b starts at {} (deps end {ends})",
        b[0]
    );
    assert!(*b.last().unwrap() <= b[0] + 1000 * MS);
    // c waits for b and for its own start, whichever is later
    let b_end = *times(&ev, "b", 'C').last().unwrap();
    assert!(b_end < 5000 * MS);
    let c = times(&ev, "c", 'Q');
    assert!(c[0] >= 5000 * MS && c[0] <= 5005 * MS);
    // throughput counts from when b could start, not from time 0
    let fb = r.flows.iter().find(|f| f.name == "b").unwrap();
    let span = (b_end - ends) as f64 / 1e9;
    let want = fb.bytes as f64 / 1048576.0 / span;
    assert!(
        (fb.throughput_mib_s - want).abs() / want < 0.02,
        "{} vs {want}",
        fb.throughput_mib_s
    );
}

#[test]
fn a_flow_whose_wait_outlasts_its_stop_never_runs() {
    let (r, ev) = run("name = \"x\"\nduration = \"4s\"\n\
         [[flow]]\nname = \"a\"\nduration = \"2s\"\n\
         [[flow]]\nname = \"b\"\nafter = [\"a\"]\nstop = \"1s\"\nregion = { start = \"50%\" }\n\
         [[flow]]\nname = \"c\"\nafter = [\"b\"]\nbytes = \"1M\"\nregion = { start = \"75%\" }\n");
    assert!(times(&ev, "b", 'Q').is_empty());
    assert_eq!(r.flows[1].bytes, 0);
    // b ended at its stop, unstarted; c waits for b only
    let c = times(&ev, "c", 'Q');
    assert!(c[0] >= 1000 * MS && c[0] <= 1005 * MS, "{}", c[0]);
}

#[test]
fn ends_and_waits_are_checked() {
    let base = "name = \"x\"\nduration = \"10s\"\n[[flow]]\nname = \"a\"\nbytes = \"1M\"\n";
    for (flow, want) in [
        (
            "stop = \"1s\"\nstart = \"2s\"",
            "flow[1] 'b'.stop: 1s must be after start (2s)",
        ),
        (
            "stop = \"11s\"",
            "flow[1] 'b'.stop: 11s is past the end of the run (duration = 10s)",
        ),
        (
            "duration = \"0s\"",
            "flow[1] 'b'.duration: must be positive",
        ),
        (
            "start = \"5s\"\nduration = \"6s\"",
            "flow[1] 'b'.duration: start + duration = 11s is past the end of the run",
        ),
        (
            "after = [\"zz\"]",
            "flow[1] 'b'.after: 'zz' is not the name of an earlier flow",
        ),
        (
            "after = [\"b\"]",
            "flow[1] 'b'.after: 'b' is not the name of an earlier flow",
        ),
    ] {
        let e = err(&format!("{base}[[flow]]\nname = \"b\"\n{flow}\n"));
        assert!(e.contains(want), "{flow}: {e}");
    }
    let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\n[[flow]]\nname = \"b\"\nafter = [\"a\"]\n");
    assert!(
        e.contains("'a' never ends before the run does (give it bytes, stop or duration)"),
        "{e}"
    );
    let e = err(
        "name = \"x\"\n[[flow]]\nname = \"a\"\nbytes = \"1M\"\nrepeat = \"1s\"\n[[flow]]\nname = \"b\"\nafter = [\"a\"]\n",
    );
    assert!(e.contains("'a' never ends"), "{e}");
}

#[test]
fn same_seed_same_output_with_waits() {
    let text = "name = \"x\"\nduration = \"3s\"\n\
         [[flow]]\nname = \"a\"\nbytes = \"2M\"\n\
         [[flow]]\nname = \"b\"\nafter = [\"a\"]\nduration = \"1s\"\npattern = \"rand\"\n";
    let (r1, e1) = run(text);
    let (r2, e2) = run(text);
    assert_eq!(e1, e2);
    assert_eq!(format!("{r1:?}"), format!("{r2:?}"));
}
