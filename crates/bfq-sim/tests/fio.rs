//! fio job files as scenarios: the mapping of each option, errors naming
//! unknown options, warnings for options without effect, and job files in
//! the shapes of fio's own examples run in the simulator.

use bfq_sim::fio::{load, to_scenario_toml};
use bfq_sim::{simulate, Scenario, SimOptions};
use std::path::Path;

fn job_file(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fio")
        .join(name)
}

fn scenario(text: &str) -> (Scenario, Vec<String>) {
    let t = to_scenario_toml(text, "t").unwrap();
    (Scenario::from_toml_str(&t.toml, "t").unwrap(), t.warnings)
}

#[test]
fn mixed_random_job_is_a_read_and_a_write_flow_per_job() {
    let (sc, warnings) = load(&job_file("mixed-random.fio")).unwrap();
    let plan = sc.plan().unwrap();
    assert_eq!(plan.duration, 3_000_000_000);
    // numjobs=4 copies of a read flow and of a write flow
    assert_eq!(plan.flows.len(), 8);
    for f in &plan.flows {
        assert_eq!(f.pattern, bfq_sim::scenario::Pattern::Rand);
        assert_eq!((f.block * 512, f.depth), (4096, 16));
        assert!(
            f.sync,
            "direct=1: reads and O_DIRECT writes are synchronous"
        );
        assert!(!f.buffered);
        assert_eq!(f.bytes, None, "time_based: no byte limit");
        assert_eq!(f.region_len * 512, 1 << 30);
    }
    let reads = plan
        .flows
        .iter()
        .filter(|f| f.name.starts_with("file1-read"))
        .count();
    assert_eq!(reads, 4);
    assert!(warnings.iter().any(|w| w.starts_with("filename: ignored")));
    assert!(warnings.iter().any(|w| w.contains("rw=randrw")));
}

#[test]
fn sizes_depths_times_and_classes_map() {
    let (sc, _) = scenario(
        "[global]\nsize=100m\nbs=8k\n[a]\nrw=rw\ndirect=1\nrwmixread=75\nioengine=io_uring\niodepth=8\n\
         thinktime=250\nstartdelay=2\nruntime=1500ms\nprio=2\n[b]\nrw=write\nprioclass=3\noffset=1g\nfilesize=10m\n",
    );
    let plan = sc.plan().unwrap();
    let by = |n: &str| plan.flows.iter().find(|f| f.name == n).unwrap();
    let (ar, aw, b) = (by("a-read"), by("a-write"), by("b"));
    assert_eq!(ar.bytes, Some(75 << 20));
    assert_eq!(aw.bytes, Some(25 << 20));
    assert_eq!((ar.depth, ar.block * 512, ar.readahead), (8, 8192, 0));
    assert_eq!(ar.think, 250_000, "thinktime is in microseconds");
    assert_eq!(ar.start, 2_000_000_000, "startdelay is in seconds");
    assert_eq!(ar.prio.level, 2);
    assert_eq!(
        ar.duration,
        Some(1_500_000_000),
        "runtime counts from the start"
    );
    // b ends by its size: the run lasts until it has (at most 24 h)
    assert_eq!(b.duration, None);
    assert_eq!(plan.duration, 24 * 3600 * 1_000_000_000);
    // psync (the default engine): depth 1; buffered writes (direct=0).
    assert_eq!(b.depth, 1);
    assert!(b.buffered && !b.sync);
    assert_eq!(b.prio.class, bfq_core::IoClass::Idle);
    assert_eq!(
        (b.region_start * 512, b.region_len * 512, b.bytes),
        (1 << 30, 10 << 20, Some(100 << 20))
    );
}

#[test]
fn unknown_options_are_errors_that_name_them() {
    let e = to_scenario_toml("[j]\nrw=read\nverify=md5\nloops=2\n", "t").unwrap_err();
    assert!(
        e.contains("job [j]") && e.contains("verify") && e.contains("loops"),
        "{e}"
    );
    for (text, want) in [
        ("[j]\nrw=trim\n", "rw=trim"),
        ("[j]\nioengine=mmap\n", "ioengine=mmap"),
        ("[j]\nbs=4q\n", "bs=4q"),
        ("[j]\nthinktime=5y\n", "thinktime=5y"),
        ("[j]\nbsrange=4k-64k\n", "bsrange"),
        ("[j]\ntime_based\n", "time_based needs runtime"),
        ("[j]\ncgroup_weight=5\n", "cgroup_weight needs cgroup"),
        (
            "[a]\ncgroup=x\ncgroup_weight=5\n[b]\ncgroup=x\ncgroup_weight=6\n",
            "weights 5 and 6",
        ),
        ("[j]\nruntime=0\n", "runtime: must be positive"),
        (
            "[a]\nsize=1m\n[b]\nwait_for=c\n",
            "job [b]: wait_for=c: no job of that name before this one",
        ),
        (
            "[a]\nrw=read\n[b]\nstonewall\nsize=1m\n",
            "job [b]: waits for job [a] (stonewall or wait_for), which has neither runtime nor size",
        ),
        ("[a]\nsize=1m\n[b]\nstonewall=2\n", "stonewall=2: expected 1/0, true/false, on/off, yes/no"),
        ("[global]\nbs=4k\n", "no job section"),
        ("rw=read\n", "outside a [section]"),
        ("[j]\ninclude other.fio\n", "includes"),
    ] {
        let e = to_scenario_toml(text, "t").unwrap_err();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn example_job_files_run_in_the_simulator() {
    for name in ["mixed-random.fio", "depths.fio", "tenants.fio"] {
        let (sc, _) = load(&job_file(name)).unwrap();
        let sched = Box::new(bfq_core::Bfq::from_settings(&bfq_core::Settings::new()).unwrap());
        let r = simulate(&sc, sched, sc.seed, SimOptions::default()).unwrap();
        assert!(
            r.flows.iter().all(|f| f.bytes > 0),
            "{name}: a flow did nothing"
        );
    }
}

#[test]
fn tenants_get_their_cgroup_weights_and_the_logger_its_rate() {
    let (sc, _) = load(&job_file("tenants.fio")).unwrap();
    let plan = sc.plan().unwrap();
    let weights: Vec<(String, u32)> = plan
        .groups
        .iter()
        .map(|g| (g.path.clone(), g.weight))
        .collect();
    assert!(
        weights.contains(&("/tenant-a".into(), 100))
            && weights.contains(&("/tenant-b".into(), 300))
    );
    let sched = Box::new(bfq_core::Bfq::from_settings(&bfq_core::Settings::new()).unwrap());
    let r = simulate(&sc, sched, sc.seed, SimOptions::default()).unwrap();
    let by = |n: &str| r.flows.iter().find(|f| f.name == n).unwrap();
    // rate=256k: 256 KiB/s, as a batch every 100 ms (the batch rounded
    // down to whole 4 KiB blocks: 24 KiB); the run lasts 4 s, batches at
    // 0, 0.1, ... 3.9 s.
    assert_eq!(plan.duration, 4_000_000_000);
    let logger = by("logger").bytes as f64;
    assert!(
        (logger - 40.0 * 24576.0).abs() <= 24576.0,
        "logger wrote {logger} bytes"
    );
    let (a, b) = (by("tenant-a").bytes as f64, by("tenant-b").bytes as f64);
    assert!(b > 2.0 * a, "tenant-b (300) got {b}, tenant-a (100) {a}");
}

#[test]
fn block_sizes_outside_512_bytes_to_16_mib_are_errors() {
    for bs in [
        "bs=0",
        "blocksize=0",
        "bs=1000",
        "bs=32m",
        "bs=256",
        "bsrange=0-0",
    ] {
        let text = format!("[j]\nrw=read\nsize=1m\nrate=1m\n{bs}\n");
        let e = to_scenario_toml(&text, "t").unwrap_err();
        assert!(e.contains("512") && e.contains("16 MiB"), "{bs}: {e}");
    }
    for bs in ["bs=512", "bs=16m", "bs=4k,64k"] {
        let text = format!("[j]\nrw=randrw\nsize=64m\nrate=1m\n{bs}\n");
        assert!(to_scenario_toml(&text, "t").is_ok(), "{bs}");
    }
}

/// Bytes per 100 ms batch of the flow named `name` (None: no rate cap).
fn batch(sc: &Scenario, name: &str) -> Option<u64> {
    let plan = sc.plan().unwrap();
    let f = plan.flows.iter().find(|f| f.name == name).unwrap();
    f.periodic.as_ref().map(|p| p.bytes.0)
}

#[test]
fn rate_applies_per_direction_as_in_fio() {
    let job = "[j]\nrw=randrw\ndirect=1\nruntime=1\ntime_based\nbs=4k\n";
    // a single value caps each direction, not split by the mix
    let (sc, _) = scenario(&format!("{job}rate=1m\n"));
    assert_eq!(batch(&sc, "j-read"), Some(102_400));
    assert_eq!(batch(&sc, "j-write"), Some(102_400));
    // an empty side leaves that direction uncapped
    let (sc, _) = scenario(&format!("{job}rate=,500k\n"));
    assert_eq!(batch(&sc, "j-read"), None);
    assert_eq!(batch(&sc, "j-write"), Some(49_152));
    let (sc, _) = scenario(&format!("{job}rate=500k,\n"));
    assert_eq!(batch(&sc, "j-read"), Some(49_152));
    assert_eq!(batch(&sc, "j-write"), None);
    let (sc, _) = scenario(&format!("{job}rate_iops=,10\n"));
    assert_eq!(batch(&sc, "j-read"), None);
    assert_eq!(batch(&sc, "j-write"), Some(4096));
}

#[test]
fn jobs_have_their_own_ends_and_stonewall_phases_follow_each_other() {
    // each job's own runtime: no longer one end for all
    let (sc, _) = scenario("[a]\nruntime=2\ntime_based\n[b]\nruntime=3\nstartdelay=1\n");
    let plan = sc.plan().unwrap();
    assert_eq!(plan.duration, 4_000_000_000);
    assert_eq!(plan.flows[0].duration, Some(2_000_000_000));
    assert_eq!(
        (plan.flows[1].start, plan.flows[1].duration),
        (1_000_000_000, Some(3_000_000_000))
    );
    let (sc, warnings) = load(&job_file("phases.fio")).unwrap();
    let plan = sc.plan().unwrap();
    let names: Vec<&str> = plan.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["fill", "rand.1", "rand.2", "seq", "late"]);
    let after: Vec<&[usize]> = plan.flows.iter().map(|f| f.after.as_slice()).collect();
    // rand after fill; seq after both rand copies; late (after seq, no
    // stonewall of its own) starts with seq, and waits for fill too
    assert_eq!(after, [&[][..], &[0], &[0], &[1, 2], &[1, 2, 0]]);
    assert_eq!(plan.flows[1].duration, Some(2_000_000_000));
    assert_eq!(
        (plan.flows[1].bytes, plan.flows[3].bytes),
        (None, Some(32 << 20))
    );
    assert_eq!(plan.duration, 24 * 3600 * 1_000_000_000);
    assert!(warnings
        .iter()
        .any(|w| w.contains("until the last job has ended")));
    // in the simulator each phase starts when the one before has ended
    let sched = Box::new(bfq_core::Bfq::from_settings(&bfq_core::Settings::new()).unwrap());
    let mut trace = Vec::new();
    let opts = SimOptions {
        trace: Some(&mut trace),
        ..SimOptions::default()
    };
    let r = simulate(&sc, sched, sc.seed, opts).unwrap();
    let text = String::from_utf8(trace).unwrap();
    // (first request queued, last queued, last completed) of a flow
    let span = |name: &str| {
        let ev = |kind: &str| -> Vec<u64> {
            text.lines()
                .skip(1)
                .map(|l| l.split(',').collect::<Vec<_>>())
                .filter(|v| v[2] == name && v[1] == kind)
                .map(|v| v[0].parse().unwrap())
                .collect()
        };
        let (q, c) = (ev("Q"), ev("C"));
        (q[0], *q.last().unwrap(), *c.last().unwrap())
    };
    let (fill, r1, r2, seq) = (span("fill"), span("rand.1"), span("rand.2"), span("seq"));
    assert!(r1.0 >= fill.2 && r2.0 >= fill.2);
    assert!(r1.1 - r1.0 <= 2_000_000_000, "runtime=2 from its own start");
    assert!(r1.1 - r1.0 > 1_900_000_000);
    let rand_end = r1.2.max(r2.2);
    assert!(seq.0 >= rand_end && span("late").0 >= rand_end);
    assert_eq!(r.flows[0].bytes, 64 << 20);
    assert_eq!(r.flows[3].bytes, 32 << 20);
    assert!(r.sim_time_s < 10.0, "the run ends with its last job");
}

/// Two jobs of one name are two jobs, as fio runs them (`fio
/// --parse-only` accepts such a file and fio reports both); the second
/// flow is named `NAME#2`, and `wait_for=NAME` waits for every earlier
/// job of that name (fio's `waitee_running` checks each one).
/// Fails with the names left as they are (`rename_taken` not called:
/// the scenario refuses `'job' is used by another flow`), or with
/// `wait_for_jobs` returning the first job of the name alone.
#[test]
fn jobs_of_one_name_are_separate_jobs_as_in_fio() {
    let (sc, warnings) = scenario("[global]\nsize=1m\n[job]\nrw=read\n[job]\nrw=randread\n");
    let plan = sc.plan().unwrap();
    let names: Vec<&str> = plan.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["job", "job#2"]);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("flow 'job' is named 'job#2'")),
        "{warnings:?}"
    );
    // wait_for waits for both jobs named b
    let (sc, _) = scenario("[b]\nsize=1m\n[b]\nsize=2m\n[a]\nsize=1m\nwait_for=b\n");
    let plan = sc.plan().unwrap();
    assert_eq!(plan.flows[2].after, [0, 1]);
    // a job waiting for its own name waits for none (fio skips its name)
    let (sc, _) = scenario("[b]\nsize=1m\n[b]\nsize=1m\nwait_for=b\n");
    assert!(sc.plan().unwrap().flows[1].after.is_empty());
    // a renamed flow does not take the name of a later section, nor of a
    // read/write pair's flow
    let (sc, _) = scenario(
        "[a]\nsize=1m\n[a]\nsize=1m\n[a#2]\nsize=1m\n[x]\nrw=randrw\nsize=1m\n[x-read]\nsize=1m\n",
    );
    let plan = sc.plan().unwrap();
    let names: Vec<&str> = plan.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["a", "a#3", "a#2", "x-read", "x-write", "x-read#2"]);
    // fio would also wait for a later job of the name: refused, naming it
    let e = to_scenario_toml(
        "[b]\nsize=1m\n[a]\nsize=1m\nwait_for=b\n[b]\nsize=1m\n",
        "t",
    )
    .unwrap_err();
    assert!(
        e.contains("job [a]: wait_for=b: job section 3 is also named [b], after this one"),
        "{e}"
    );
}
