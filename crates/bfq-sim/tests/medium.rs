//! `bfq`'s medium probe (`rotational_probe`): a flash device that says it
//! is rotational keeps `bfq`'s throughput, and the papers' disks are never
//! taken for flash. Deterministic: simulated time only.

use bfq_core::{Bfq, Settings};
use bfq_sim::{simulate, Scenario, SimOptions, SimResult};

fn scenario(file: &str, device_extra: &str, duration: &str) -> Scenario {
    let path = format!("{}/../../scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replacen("[device]\n", &format!("[device]\n{device_extra}"), 1);
    let old = text.lines().find(|l| l.starts_with("duration = ")).unwrap();
    let text = text.replacen(old, &format!("duration = \"{duration}\""), 1);
    Scenario::from_toml_str(&text, &path).unwrap()
}

fn run(s: &Scenario, profile: &str, kv: &[(&str, &str)]) -> SimResult {
    let bfq = Bfq::from_profile(profile, &Settings::from_pairs(kv.iter().copied())).unwrap();
    simulate(s, Box::new(bfq), 1, SimOptions::default()).unwrap()
}

#[test]
fn a_flash_device_that_says_it_is_rotational_keeps_bfqs_throughput() {
    // The 2018 article's static sequential workload (random target of
    // weight 300, four sequential readers of weight 100) on its SSD.
    let file = "2018-ssd-rand-reader-vs-seq-readers.toml";
    let honest = run(&scenario(file, "", "10s"), "bfq", &[]);
    let says_rot = scenario(file, "reports_rotational = true\n", "10s");
    let probed = run(&says_rot, "bfq", &[]);
    let trusted = run(&says_rot, "bfq", &[("rotational_probe", "0")]);
    let (h, p, t) = (
        honest.aggregate_mib_s,
        probed.aggregate_mib_s,
        trusted.aggregate_mib_s,
    );
    eprintln!("total MiB/s: non-rotational {h:.1}, says rotational {p:.1} probed, {t:.1} trusted");
    assert!(p > 0.95 * h, "{p} vs {h}");
    assert!(t < 0.6 * h, "the flag alone costs throughput: {t} vs {h}");
    assert!(probed.flows[0].throughput_mib_s > 10.0);
}

#[test]
fn the_papers_disks_are_never_taken_for_flash() {
    // Random readers, random readers beside writers, the 2010 paper's
    // random 4 KiB readers, and a random reader whose 1 MiB region the
    // drive's cache holds beside one that seeks over 5 GiB: the lone seeky
    // reads that take milliseconds hold most of the sampled time, so the
    // probe never overrules the flag and the output is the same as with
    // the probe off.
    let hot = Scenario::from_toml_str(HOT_REGION, "hot.toml").unwrap();
    let files = [
        "2014-10r-rand.toml",
        "2014-5r5w-rand.toml",
        "2010-dbms-depth1.toml",
    ];
    let named = files.map(|f| (f, scenario(f, "", "20s")));
    for (file, s) in named.iter().chain([("hot region", hot)].iter()) {
        let on = run(s, "bfq", &[]);
        let off = run(s, "bfq", &[("rotational_probe", "0")]);
        let bytes = |r: &SimResult| r.flows.iter().map(|f| f.bytes).collect::<Vec<_>>();
        assert!(bytes(&on).iter().sum::<u64>() > 0, "{file}");
        assert_eq!(bytes(&on), bytes(&off), "{file}");
    }
}

/// A disk (the 2014 report's system 3) with a 4 KiB random reader over
/// 1 MiB, one over 5 GiB, and a sequential reader.
const HOT_REGION: &str = r#"
name = "hot region"
duration = "20s"
[device]
preset = "maxtor-stm332061"
[[flow]]
name = "hot"
pattern = "rand"
block = "4k"
region = { start = "0", size = "1M" }
[[flow]]
name = "cold"
pattern = "rand"
block = "4k"
region = { start = "10G", size = "5G" }
[[flow]]
name = "seq"
pattern = "seq"
block = "128k"
region = { start = "20G", size = "5G" }
"#;
