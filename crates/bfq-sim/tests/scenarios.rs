//! Shipped scenarios, start-up traces, determinism, trace consistency and
//! error messages. All deterministic (simulated time only).

use bfq_core::Fifo;
use bfq_sim::replay::{generate_startup, startup_shape, to_csv};
use bfq_sim::{simulate, Scenario, SimOptions, SimResult};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

/// Seeds of the shipped start-up traces (scenarios/traces/*.csv).
const STARTUP_SEEDS: [(&str, u64); 3] = [("bash", 1), ("xterm", 2), ("konsole", 3)];

/// The committed start-up traces are exactly the generator's output.
/// Regenerate with `BFQ_SIM_REGEN_TRACES=1 cargo test -p bfq-sim --test scenarios`.
#[test]
fn startup_traces_match_generator() {
    for (app, seed) in STARTUP_SEEDS {
        let rows = generate_startup(&startup_shape(app).unwrap(), seed);
        let csv = to_csv(&rows);
        let path = root().join(format!("traces/{app}.csv"));
        if std::env::var_os("BFQ_SIM_REGEN_TRACES").is_some() {
            std::fs::write(&path, &csv).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap();
        assert_eq!(have, csv, "{} differs from the generator", path.display());
    }
}

fn run(s: &Scenario, seed: u64, trace: Option<&mut Vec<u8>>) -> SimResult {
    let opts = SimOptions {
        trace: trace.map(|t| t as &mut dyn std::io::Write),
        ..SimOptions::default()
    };
    simulate(s, Box::new(Fifo::new()), seed, opts).unwrap()
}

#[test]
fn every_shipped_scenario_parses_and_runs() {
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(root()).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let mut s = Scenario::from_file(&p).unwrap_or_else(|e| panic!("{e}"));
        s.duration = bfq_sim::units::Dur(2_000_000_000);
        let r = run(&s, s.seed, None);
        assert!(r.requests > 0, "{}: no request completed", p.display());
        n += 1;
    }
    assert!(n >= 20, "{n} scenarios");
}

#[test]
fn same_seed_gives_identical_json_and_trace() {
    for f in [
        "2014-5r5w-rand.toml",
        "2010-web-server.toml",
        "2014-startup-bash-10r-seq.toml",
    ] {
        let mut s = Scenario::from_file(root().join(f)).unwrap();
        s.duration = bfq_sim::units::Dur(3_000_000_000);
        let (mut t1, mut t2) = (Vec::new(), Vec::new());
        let a = run(&s, 7, Some(&mut t1)).to_json();
        let b = run(&s, 7, Some(&mut t2)).to_json();
        assert_eq!(a, b, "{f}");
        assert!(t1 == t2, "{f}: traces differ");
        assert!(t1.len() > 1000);
        let c = run(&s, 8, None).to_json();
        assert_ne!(a, c, "{f}: the seed changes nothing");
    }
}

/// The trace alone reproduces the per-flow byte counts of the JSON, and
/// every completed request was queued and dispatched before.
#[test]
fn trace_agrees_with_statistics() {
    let mut s = Scenario::from_file(root().join("2014-5r5w-seq.toml")).unwrap();
    s.duration = bfq_sim::units::Dur(3_000_000_000);
    let mut t = Vec::new();
    let r = run(&s, 1, Some(&mut t));
    let text = String::from_utf8(t).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("t_ns,event,flow,req,sector,sectors,op"));
    let mut state = std::collections::BTreeMap::new();
    let mut bytes = std::collections::BTreeMap::<String, u64>::new();
    let mut last_t = 0u64;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let tns: u64 = f[0].parse().unwrap();
        assert!(tns >= last_t, "time goes back: {l}");
        last_t = tns;
        let id: u64 = f[3].parse().unwrap();
        let prev = state.insert(id, f[1].to_string());
        match f[1] {
            "Q" => assert!(prev.is_none() || prev.as_deref() == Some("C"), "{l}"),
            "D" => assert_eq!(prev.as_deref(), Some("Q"), "{l}"),
            "C" => {
                assert_eq!(prev.as_deref(), Some("D"), "{l}");
                *bytes.entry(f[2].to_string()).or_default() += f[5].parse::<u64>().unwrap() * 512;
            }
            e => panic!("bad event {e}"),
        }
    }
    let readers: u64 = r
        .flows
        .iter()
        .filter(|f| f.name.starts_with('r'))
        .map(|f| f.bytes)
        .sum();
    let writers: u64 = r
        .flows
        .iter()
        .filter(|f| f.name.starts_with('w'))
        .map(|f| f.bytes)
        .sum();
    let traced_r: u64 = bytes
        .iter()
        .filter(|(k, _)| k.starts_with('r'))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(readers, traced_r);
    assert_eq!(
        writers, bytes["flusher"],
        "buffered writes reach the scheduler through the flusher"
    );
    assert!(writers > 0 && readers > 0);
}

#[test]
fn bad_files_name_the_file_and_field() {
    let dir = std::env::temp_dir().join(format!("bfq-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.toml");
    std::fs::write(
        &p,
        "name = \"x\"\n[[flow]]\nname = \"a\"\nblock = \"4kk\"\n",
    )
    .unwrap();
    let e = Scenario::from_file(&p).unwrap_err().to_string();
    assert!(e.starts_with(&p.display().to_string()), "{e}");
    assert!(
        e.contains("block") && e.contains("invalid size '4kk'"),
        "{e}"
    );
    std::fs::write(&p, "name = \"x\"\n[[flow]]\nname = \"a\"\nwieght = 3\n").unwrap();
    let e = Scenario::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("unknown field `wieght`"), "{e}");
    let e = Scenario::from_file(dir.join("missing.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.toml: cannot read"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}
