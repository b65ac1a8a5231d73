//! Bad command lines give a clear error (naming the option, flow or path)
//! and a non-zero exit, before any run starts; stdout carries only what
//! was asked for; a closed pipe ends the process without a panic. Tests
//! that need root (a small tmpfs) skip with a message without it. Nothing
//! is timed: a one-minute guard only turns a hang into a failure.

mod common;

use common::{bfq, refused, refused_first, scenario, stderr};
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn bad_values_are_refused_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.img");
    let t = t.to_str().unwrap();
    refuses_bad_run_values(t);
    refuses_bad_modes(t);
    refused(&["loop", "create", t, "0"], "above zero");
    refused(
        &["loop", "create", "/nonexistent/x.img", "16M"],
        "/nonexistent/x.img",
    );
    refused(
        &[
            "loop",
            "create",
            "/nonexistent/x.img",
            "1049088",
            "--sector-size",
            "4096",
        ],
        "1049088 bytes is not a multiple of the sector size 4096",
    );
    refuses_bad_sim_values();
    refuses_bad_output_paths_first(t);
}

/// `bfq run` (target `t`) and `bench-engine`: bad `--seconds`, `--depth`,
/// `--flow` values and twice the same flow name.
fn refuses_bad_run_values(t: &str) {
    for s in ["-1", "nan", "inf", "1e300", "0"] {
        let arg = format!("--seconds={s}");
        refused(
            &["run", "--target", t, "--flow", "name=a", &arg],
            "--seconds",
        );
        refused(&["bench-engine", "nop", &arg], "--seconds");
    }
    refused(
        &["run", "--target", t, "--flow", "name=a", "--depth", "0"],
        "--depth",
    );
    // fuzz: a run of nothing is not "clean"; --minutes panicked on
    // nan, inf, negative and huge values.
    for (arg, says) in [
        (
            "--cases=0",
            "invalid value '0' for '--cases <CASES>': 0 is not in 1..",
        ),
        (
            "--ops=0",
            "invalid value '0' for '--ops <OPS>': 0 is not in 1..",
        ),
        ("--minutes=0", "give minutes above 0 and at most 10080"),
        ("--minutes=nan", "give minutes above 0 and at most 10080"),
        ("--minutes=inf", "give minutes above 0 and at most 10080"),
        ("--minutes=-1", "give minutes above 0 and at most 10080"),
        ("--minutes=1e300", "give minutes above 0 and at most 10080"),
    ] {
        refused(&["fuzz", "--target", "fifo", arg], says);
    }
    // fairness always ends with kernel:bfq: given in --schedulers it ran
    // twice.
    refused(
        &[
            "bench-engine",
            "fairness",
            "--schedulers",
            "bfq,kernel:bfq",
            "--size",
            "1k",
        ],
        "--schedulers kernel:bfq: fairness runs kernel:bfq after the engine's columns anyway",
    );
    // fairness --set: the closest setting named, as everywhere else.
    refused(
        &[
            "bench-engine",
            "fairness",
            "--set",
            "max_budgte=1",
            "--size",
            "1M",
        ],
        "--set for bfq: scheduler 'bfq' has no setting 'max_budgte' (did you mean 'max_budget'?",
    );
    // randread's flows share --depth: one below a flow count would put
    // more requests out than it says; --repeat 0 would measure once.
    // (`--size 1k` fails at once should either check be missing.)
    let randread = ["bench-engine", "randread", "--size", "1k", "--no-fio"];
    refused(
        &[&randread[..], &["--depth", "8", "--flows", "4,16"]].concat(),
        "--depth 8 is below --flows 16",
    );
    refused(
        &[&randread[..], &["--repeat", "0"]].concat(),
        "invalid value '0' for '--repeat <REPEAT>': 0 is not in 1..",
    );
    for (flow, says) in [
        (
            "name=a,bs=1000",
            "--flow[0] 'a'.bs: 1000 bytes is not a positive multiple of 512",
        ),
        ("name=a,bytes=0", "--flow[0] 'a'.bytes: must be positive"),
        (
            "name=a,every=0ms,batch=4k",
            "--flow[0] 'a'.every/batch: every must be",
        ),
        (
            "name=a,depth=0",
            "--flow[0] 'a'.depth: 0 is not in 1..=4096",
        ),
        ("name=,bs=4k", "--flow[0] ''.name: must not be empty"),
        (
            "name=a,weight=0",
            "--flow[0] 'a'.weight: 0 is not in 1..=1000",
        ),
        ("name=a,bs=4k,name=b", "--flow[0].name: given twice"),
        (
            "name=a,sync=maybe",
            "--flow[0] 'a'.sync: expected 1/0, true/false",
        ),
        ("name=a,group=g1", "--flow[0] 'a'.group: unknown group 'g1'"),
        (
            "name=a,offset=1,len=4M",
            "--flow[0] 'a'.offset: must be a multiple of 512",
        ),
        (
            "name=a,offset=18446744073709551615,len=4k",
            "--flow[0] 'a'.offset: must be a multiple of 512",
        ),
        (
            "name=a,offset=4M,len=18446744073709551104",
            "'a'.offset/len: [4194304 ..",
        ),
        (
            "name=a,offset=2M,len=4M",
            "'a'.offset/len: [2097152 .. 6291456) bytes ends at 6291456 bytes, past the \
             device's end at 4194304 bytes: the flows need a target of at least 6291456 bytes",
        ),
        // repeat is the pause and runs the count, as in scenario files.
        (
            "name=a,bytes=1M,repeat=3",
            "--flow[0] 'a'.repeat: '3' has no unit: repeat is the pause between runs, \
             with a unit, e.g. 1s; the number of runs is runs=N",
        ),
        (
            "name=a,bytes=1M,runs=3,rerun=1s",
            "--flow[0] 'a'.rerun: is not a key: the pause between runs is repeat=DURATION",
        ),
        (
            "name=a,bytes=1M,runs=3",
            "--flow[0] 'a'.runs: only with repeat",
        ),
    ] {
        // Nothing is created for a run refused.
        refused(
            &["run", "--target", t, "--create", "4M", "--flow", flow],
            says,
        );
        assert!(!Path::new(t).exists(), "{flow}: {t} was created");
    }
    refused(
        &[
            "run", "--target", t, "--create", "4M", "--flow", "name=a", "--flow", "name=a",
        ],
        "--flow[1] 'a'.name: 'a' is used by another flow",
    );
    refused(
        &[
            "run",
            "--target",
            t,
            "--create",
            "4M",
            "--flow",
            "name=a,after=b",
            "--flow",
            "name=b,after=a",
        ],
        "--flow[0] 'a'.after: 'b' is not the name of an earlier flow",
    );
    refused(
        &[
            "run",
            "--target",
            t,
            "--create",
            "100",
            "--flow",
            "name=a,bs=4k",
        ],
        "is shorter than one 4096-byte block",
    );
    assert!(!Path::new(t).exists(), "{t} was created");
    let dir = Path::new(t).parent().unwrap().to_str().unwrap();
    refused(
        &["run", "--target", dir, "--flow", "name=a"],
        "is a directory",
    );
    refused(&["run", "--target", dir, &scenario()], "is a directory");
    // A scenario's series point every 1 ms bounds a run at 100 s.
    let sc = Path::new(t).with_file_name("fine.toml");
    std::fs::write(
        &sc,
        "name = \"fine\"\nduration = \"10s\"\n[output]\nseries_interval = \"1ms\"\n\
         [[flow]]\nname = \"a\"\npattern = \"seq\"\n",
    )
    .unwrap();
    let sc = sc.to_str().unwrap();
    let long = ["run", sc, "--target", t, "--create", "4M", "--seconds"];
    refused(&[&long[..], &["3600"]].concat(), "at most 100000");
}

/// Unknown `--kernel-groups` (run and bench-engine) and `--submit`.
fn refuses_bad_modes(t: &str) {
    for cmd in [
        &["run", "--target", t, "--create", "4M", "--flow", "name=a"][..],
        &["bench-engine", "randread"][..],
    ] {
        let mut args = cmd.to_vec();
        args.extend(["--kernel-groups", "some"]);
        refused(&args, "'some' is not per-flow, per-process or one");
    }
    refused(
        &[
            "run", "--target", t, "--create", "4M", "--flow", "name=a", "--submit", "both",
        ],
        "'both' is not local or dispatcher",
    );
    // --kernel-groups places kernel:* flows in cgroups: refused with the
    // project's schedulers, the default value too.
    let flow = ["run", "--target", t, "--create", "4M", "--flow", "name=a"];
    for (sched, groups) in [("fifo", "one"), ("bfq", "per-flow")] {
        refused_first(
            &[
                &flow[..],
                &["--scheduler", sched, "--kernel-groups", groups],
            ]
            .concat(),
            &format!("--kernel-groups applies to kernel:* schedulers, not {sched} ("),
        );
        assert!(!Path::new(t).exists(), "{t} was created");
    }
    // With kernel:* it passes that check (and fails on the regular file).
    let o = refused(
        &[
            &flow[..],
            &["--scheduler", "kernel:none", "--kernel-groups", "one"],
        ]
        .concat(),
        "kernel:",
    );
    assert!(!stderr(&o).contains("--kernel-groups"), "{}", stderr(&o));
    // The other options of one kind of scheduler, given with the other.
    for (sched, opt, val, says) in [
        (
            "fifo",
            "--kernel-client",
            "pread",
            "--kernel-client applies to kernel:*",
        ),
        (
            "kernel:none",
            "--submit",
            "local",
            "--submit, --coop-taskrun and --client apply",
        ),
        (
            "kernel:none",
            "--coop-taskrun",
            "on",
            "--submit, --coop-taskrun and --client apply",
        ),
        (
            "kernel:none",
            "--client",
            "tpc",
            "--submit, --coop-taskrun and --client apply",
        ),
    ] {
        refused_first(
            &[&flow[..], &["--scheduler", sched, opt, val]].concat(),
            says,
        );
        assert!(!Path::new(t).exists(), "{t} was created");
    }
}

/// `bfq sim`: an unknown scheduler (named once) and a setting it lacks.
fn refuses_bad_sim_values() {
    refused(&["sim", &scenario(), "--scheduler", "nope"], "known: bfq,");
    // The message names the scheduler once (no repeated prefix).
    let e = stderr(&bfq(&["sim", &scenario(), "--scheduler", "nope"]));
    assert_eq!(e.matches("'nope'").count(), 1, "{e}");
    refused(
        &[
            "sim",
            &scenario(),
            "--set",
            "max_budget=1",
            "--scheduler",
            "bfq",
        ],
        "setting max_budget=1",
    );
}

/// Output paths are checked before the run (an hour long here, on target
/// `t`).
fn refuses_bad_output_paths_first(t: &str) {
    let create = ["--create", "4M"];
    let mut args = vec![
        "run",
        "--target",
        t,
        "--flow",
        "name=a",
        "--seconds",
        "3600",
    ];
    args.extend(create);
    args.extend(["--json", "/nonexistent/x.json"]);
    refused(&args, "/nonexistent/x.json");
    refused(
        &["sim", &scenario(), "-q", "--json", "/nonexistent/x.json"],
        "/nonexistent/x.json",
    );
    let dir = Path::new(t).parent().unwrap().to_str().unwrap();
    refused(&["sim", &scenario(), "-q", "--json", dir], "is a directory");
}

/// `--json` through a symbolic link replaces the file the link names and
/// keeps the link; a device (`/dev/null`) is written to, not replaced; no
/// temporary file is left beside either.
#[test]
fn json_follows_links_and_writes_devices_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let (target, link) = (dir.path().join("target.json"), dir.path().join("link.json"));
    std::fs::write(&target, "earlier\n").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let l = link.to_str().unwrap();
    let o = bfq(&["sim", &scenario(), "-q", "--json", l]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kind = std::fs::symlink_metadata(&link).unwrap().file_type();
    assert!(kind.is_symlink(), "the link is kept");
    assert!(std::fs::read_to_string(&target).unwrap().starts_with('{'));
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 2, "nothing else beside them");
    let o = bfq(&["sim", &scenario(), "-q", "--json", "/dev/null"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kind = std::fs::metadata("/dev/null").unwrap().file_type();
    assert!(kind.is_char_device(), "/dev/null is still a device");
}

/// `--json FILE` replaces FILE only once the results are written: a run
/// killed by SIGTERM leaves an earlier FILE as it was and nothing beside
/// it; a run that ends replaces it.
#[test]
fn a_killed_run_leaves_earlier_json_results() {
    let dir = tempfile::tempdir().unwrap();
    let (t, json) = (dir.path().join("t.img"), dir.path().join("r.json"));
    std::fs::write(&json, "earlier\n").unwrap();
    let mut child = long_run(&t, &["--create", "4M"], &json, Stdio::null);
    // The target is created after the outputs are checked, as the run
    // starts.
    wait_until(|| t.exists() || child.try_wait().unwrap().is_some());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(!child.wait().unwrap().success());
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "earlier\n");
    let names = || {
        let mut v: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(), ["r.json", "t.img"]);
    let (t, j) = (t.to_str().unwrap(), json.to_str().unwrap());
    let o = bfq(&[
        "run",
        "--target",
        t,
        "--flow",
        "name=a",
        "--seconds",
        "0.2",
        "--json",
        j,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["flows"].is_array(), "{v}");
    assert_eq!(names(), ["r.json", "t.img"]);
}

#[test]
fn stdout_carries_only_the_json_or_the_trace() {
    let o = bfq(&["sim", &scenario(), "-q", "--json", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is only JSON");
    assert!(v.get("flows").is_some());
    assert!(
        stderr(&o).contains("scheduler"),
        "the summary goes to stderr"
    );

    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["sim", &scenario(), "-q", "--duration", "1s", "--trace", "-"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("t_ns,event,flow,req,sector,sectors,op\n"));
    assert!(
        out.lines().skip(1).all(|l| l.split(',').count() == 7),
        "only trace rows"
    );
    assert!(!dir.path().join("-").exists(), "no file named '-'");
}

/// `bfq run --trace -` writes the engine's trace to stdout, and nothing
/// else goes there (the table goes to stderr); no file named `-`.
/// `bfq run` in `dir` of one buffered flow reading 256 KiB of a 4 MiB
/// target `t.img` it makes, with `extra` arguments.
fn small_run(dir: &Path, extra: &[&str]) -> std::process::Output {
    let args = [
        "run",
        "--target",
        "t.img",
        "--create",
        "4M",
        "--buffered",
        "--flow",
        "name=a,bytes=256k",
        "--seconds",
        "5",
    ];
    Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(args.iter().chain(extra))
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn run_writes_its_trace_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let o = small_run(dir.path(), &["--scheduler", "bfq", "--trace", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("t_ns,event,flow,req,sector,sectors,op\n"),
        "{out}"
    );
    let rows: Vec<_> = out.lines().skip(1).collect();
    assert!(!rows.is_empty(), "the trace has rows");
    assert!(
        rows.iter()
            .all(|l| l.split(',').count() == 7 && l.contains(",a,")),
        "only trace rows: {out}"
    );
    assert!(stderr(&o).contains("MiB/s"), "the table goes to stderr");
    assert!(!dir.path().join("-").exists(), "no file named '-'");
    refused(
        &[
            "run", "--target", "t.img", "--create", "4M", "--flow", "name=a", "--json", "-",
            "--trace", "-",
        ],
        "cannot both write to stdout",
    );
}

/// A trace that cannot be written whole (`/dev/full`: every write
/// fails) fails `bfq run` only after its report: the table is printed and
/// `--json FILE` written, then the error names the trace, exit 1. Fails
/// with the trace's error returned by `bfq_real::run` before the report
/// (`trace::finish(..)?` in `run_engine`, as it was) or with the command
/// ignoring `RunReport::trace_error`.
#[test]
fn a_trace_that_fails_keeps_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let o = small_run(dir.path(), &["--json", "r.json", "--trace", "/dev/full"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("trace /dev/full: No space left on device")
            && e.contains("the run itself completed"),
        "{e}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("MiB/s"),
        "the table is printed"
    );
    let json = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
    assert!(json.contains("\"name\": \"a\""), "{json}");
}

#[test]
fn a_closed_pipe_ends_the_process_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["sim", &scenario(), "-q", "--trace", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close the pipe (as `| head -1`).
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "{e}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{:?} {e}", o.status);
}

/// A tmpfs of `size` for the test's lifetime, or why there is none.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        if unsafe { libc::geteuid() } != 0 {
            return Err("needs root".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "bfq-cli-test"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            Ok(Tmpfs(dir))
        } else {
            Err("cannot mount a tmpfs".into())
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_filesystem_fails_the_run_and_leaves_no_partial_file() {
    let fs = match Tmpfs::mount("1M") {
        Ok(m) => m,
        Err(why) => {
            eprintln!("SKIPPED a_full_filesystem_fails_the_run: {why}");
            return;
        }
    };
    let new = fs.0.path().join("new.img");
    let n = new.to_str().unwrap();
    refused(
        &[
            "run",
            "--target",
            n,
            "--create",
            "8M",
            "--flow",
            "name=a",
            "--buffered",
        ],
        "new.img",
    );
    assert!(!new.exists(), "the partly filled file was removed");
    // A sparse 64 MiB target on a 1 MiB filesystem: every write fails
    // with ENOSPC once it is full, and the run says so.
    let sparse = fs.0.path().join("sparse.img");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let s = sparse.to_str().unwrap();
    refused(
        &[
            "run",
            "--target",
            s,
            "--flow",
            "name=w,op=write,bs=64k,bytes=16M",
            "--allow-writes",
            "--buffered",
            "--seconds",
            "30",
        ],
        "requests failed",
    );
}

#[test]
fn real_apps_needs_an_existing_target_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    refused(&["suite", "--real-apps", "--out", out], "--target DIR");
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    refused(
        &["suite", "--real-apps", "--target", missing, "--out", out],
        missing,
    );
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    refused(
        &["suite", "--real-apps", "--target", file, "--out", out],
        "not a directory",
    );
}

/// `bench-engine fairness` refuses a block not in whole sectors or too
/// large for a `u32`, a device too small for its five readers, a depth
/// out of range, an unknown setting and weights out of range or of one
/// reader before it makes (and fills) its file. Root only (it checks that first); skips otherwise.
#[test]
fn fairness_refuses_bad_options_before_making_its_file() {
    if !bfq_real::sys::is_root() {
        eprintln!("SKIPPED fairness_refuses_bad_options_before_making_its_file: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fair.img");
    let f = file.to_str().unwrap();
    let fairness = ["bench-engine", "fairness", "--seconds", "1", "--file", f];
    let cases: [(&[&str], &str); 10] = [
        (
            &["--block", "1000"],
            "--block 1000: must be a multiple of 512",
        ),
        (
            &["--block", "4G"],
            "--block 4G: must be a multiple of 512 bytes, at most 64M",
        ),
        (
            &["--size", "1M", "--block", "2M"],
            "too small for 5 readers",
        ),
        (&["--depth", "0"], "--depth 0: must be in 1..=4096"),
        (&["--set", "nosuch=1"], "no setting 'nosuch'"),
        (
            &["--schedulers", "fifo,bfq", "--set", "max_budget=-1"],
            "max_budget=-1",
        ),
        (
            &["--weights", "100"],
            "one reader gets all of the bandwidth",
        ),
        (
            &["--weights", "0:100"],
            "'0' in '0:100' is not a weight in 1..=1000",
        ),
        (
            &["--weights", "100:1001"],
            "'1001' in '100:1001' is not a weight",
        ),
        (&["--weights", "100:300,"], "'' in '' is not a weight"),
    ];
    for (more, says) in cases {
        let args: Vec<&str> = fairness.iter().chain(more).copied().collect();
        refused_first(&args, says);
        assert!(!file.exists(), "{more:?}: the file was made");
    }
}

/// What users get wrong is refused before anything runs, with what to do
/// instead: a misspelt setting names the closest one (or that the
/// scheduler has none) and `bfq schedulers NAME`, in `sim`, `run` and
/// `mount` alike, and the scenario file when its `[scheduler]` gave it; `mount` and `bench-core` list the known schedulers; `sim --duration`
/// out of range names `--duration` (not the scenario's own fields) and,
/// past its series' bound, the interval that would do; `suite --jobs 0`
/// is refused.
#[test]
fn mistakes_are_refused_saying_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.img");
    let t = t.to_str().unwrap();
    refused_first(
        &["sim", &scenario(), "-q", "--set", "max_budgte=1"],
        "scheduler 'bfq-2010' has no setting 'max_budgte' (did you mean 'max_budget'? \
         `bfq schedulers bfq-2010` lists its settings)",
    );
    refused_first(
        &[
            "sim",
            &scenario(),
            "-q",
            "--scheduler",
            "throttle-max",
            "--set",
            "max_bsp.g1=1M",
        ],
        "has no setting 'max_bsp.g1' (did you mean 'max_bps.g1'?",
    );
    refused_first(
        &["sim", &scenario(), "-q", "--set", "colour=1"],
        "has no setting 'colour' (`bfq schedulers bfq-2010` lists its settings)",
    );
    // A setting of the scenario file's [scheduler] table names the file.
    let sc = dir.path().join("typo.toml");
    std::fs::write(
        &sc,
        "name = \"t\"\n[scheduler]\nname = \"bfq\"\nmax_budgte = 1\n[[flow]]\nname = \"a\"\n",
    )
    .unwrap();
    let sc = sc.to_str().unwrap();
    let in_file = format!("{sc}: [scheduler]: scheduler 'bfq' has no setting 'max_budgte'");
    refused_first(&["sim", sc, "-q"], &in_file);
    refused_first(&["run", sc, "--target", t, "--create", "4M"], &in_file);
    let o = refused(&["sim", sc, "-q", "--set", "max_budgte=2"], "'max_budgte'");
    assert!(!stderr(&o).contains("[scheduler]"), "{}", stderr(&o));
    let run = ["run", "--target", t, "--create", "4M", "--flow", "name=a"];
    refused_first(
        &[&run[..], &["--set", "max_budget=64"]].concat(),
        "scheduler 'fifo' has no setting 'max_budget' (fifo has no settings;",
    );
    refused_first(
        &[&run[..], &["--scheduler", "bfq", "--set", "slice-idl=2ms"]].concat(),
        "(did you mean 'slice_idle'?",
    );
    assert!(!Path::new(t).exists(), "{t} was created");
    let (back, mnt) = (dir.path().join("back"), dir.path().join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    std::fs::create_dir_all(&mnt).unwrap();
    let mount = ["mount", back.to_str().unwrap(), mnt.to_str().unwrap()];
    refused_first(
        &[&mount[..], &["--scheduler", "nope"]].concat(),
        "unknown scheduler 'nope' (known: bfq,",
    );
    refused_first(
        &[&mount[..], &["--set", "slice_idl=1ms"]].concat(),
        "(did you mean 'slice_idle'? `bfq schedulers bfq` lists its settings)",
    );
    refused_first(
        &["bench-core", "--scheduler", "nope", "--requests", "10"],
        "unknown scheduler 'nope' (known: bfq,",
    );
    for (d, says) in [
        ("0", "--duration 0: must be more than 0"),
        ("169h", "--duration 169h: must be at most 7 days"),
        ("30h", "series_interval to at least 1.08s"),
    ] {
        let o = refused(&["sim", &scenario(), "-q", "--duration", d], says);
        assert!(stderr(&o).contains("--duration"), "{}", stderr(&o));
    }
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let suite = [
        "suite",
        "--quick",
        "--only",
        "2010-fairness",
        "--no-progress",
    ];
    refused_first(
        &[&suite[..], &["--jobs", "0", "--out", out]].concat(),
        "--jobs must be at least 1",
    );
    assert!(!Path::new(out).exists(), "{out} was written");
}

/// `bfq loop remove` of a loop device with no file attached says so
/// (not losetup's "No such device or address"). Root only.
#[test]
fn removing_a_loop_device_with_no_file_says_so() {
    if !bfq_real::sys::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let free = (0..256).map(|n| format!("loop{n}")).find(|n| {
        Path::new("/dev").join(n).exists() && !Path::new("/sys/block").join(n).join("loop").exists()
    });
    let Some(free) = free else {
        eprintln!("skipped: no loop device without a file");
        return;
    };
    let dev = format!("/dev/{free}");
    refused_first(
        &["loop", "remove", &dev],
        &format!("{dev} has no file attached"),
    );
}

/// A write run over a target that holds a filesystem is refused, naming
/// it, unless `--force-overwrite` is given with `--allow-writes` (fails
/// without the signature check in bfq-real's `check_flows`).
#[test]
fn writes_over_a_filesystem_need_force_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("xfs.img");
    let mut data = vec![0u8; 4 << 20];
    data[..4].copy_from_slice(b"XFSB");
    std::fs::write(&img, &data).unwrap();
    let t = img.to_str().unwrap();
    let write = [
        "run",
        "--target",
        t,
        "--flow",
        "name=w,op=write,bs=64k,bytes=256k",
        "--buffered",
        "--allow-writes",
        "--seconds",
        "5",
    ];
    refused(&write, "holds an XFS filesystem");
    refused(&write, "--force-overwrite");
    let o = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(write)
        .arg("--force-overwrite")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let alone = [
        "run",
        "--target",
        t,
        "--flow",
        "name=r",
        "--force-overwrite",
    ];
    refused(&alone, "--allow-writes");
}

/// A block device a user cannot open: the error says who can (root or
/// the device's group), not only "Permission denied". Run as root, the
/// command as `nobody` (skipped where that cannot be done). Fails without
/// the PermissionDenied arm of bfq-real's `target_size`.
#[test]
fn a_device_without_permission_says_who_may_open_it() {
    if !bfq_real::sys::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = match bfq_real::sys::LoopDevice::create(&dir.path().join("d.img"), 16 << 20, false) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipped: no loop device: {e}");
            return;
        }
    };
    let o = Command::new("runuser")
        .args([
            "-u",
            "nobody",
            "--",
            env!("CARGO_BIN_EXE_bfq"),
            "run",
            "--target",
        ])
        .arg(dev.path())
        .args(["--flow", "name=r", "--seconds", "1"])
        .output();
    let Ok(o) = o else {
        eprintln!("skipped: no runuser");
        return;
    };
    let err = stderr(&o);
    if !err.contains("bfq: error") {
        eprintln!("skipped: bfq did not run as nobody: {err}");
        return;
    }
    assert!(!o.status.success());
    assert!(
        err.contains("Permission denied") && err.contains("run as root"),
        "{err}"
    );
}

/// A 600 s `bfq run` of one reader on `t` with `--json json` and
/// `extra`, started with standard output and error as `io` makes them.
fn long_run(t: &Path, extra: &[&str], json: &Path, io: fn() -> Stdio) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["run", "--target"])
        .arg(t)
        .args(extra)
        .args(["--flow", "name=a", "--seconds", "600", "--json"])
        .arg(json)
        .stdout(io())
        .stderr(io())
        .spawn()
        .unwrap()
}

/// Waits until `cond` holds (a one-minute guard against a hang, not a
/// measurement).
fn wait_until(mut cond: impl FnMut() -> bool) {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cond() {
        assert!(std::time::Instant::now() < give_up, "the run did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether process `pid` has a handler for signal `sig` installed
/// (`SigCgt` in /proc/PID/status).
fn catches(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (sig - 1)) != 0)
}

/// A long engine run on a file in `dir`, once it catches SIGINT and
/// SIGTERM, with the `--json` path it was given.
fn catching_run(dir: &Path) -> (std::process::Child, std::path::PathBuf) {
    let (t, json) = (dir.join("t.img"), dir.join("r.json"));
    std::fs::write(&t, vec![1u8; 4 << 20]).unwrap();
    let child = long_run(&t, &["--buffered"], &json, Stdio::piped);
    wait_until(|| catches(child.id(), libc::SIGTERM) && catches(child.id(), libc::SIGINT));
    (child, json)
}

/// SIGTERM during an engine `bfq run` ends the flows early: the table of
/// what they did until then is printed, the command exits 143 saying so,
/// and no `--json` file is written (fails with `keep_partial` left false:
/// no table).
#[test]
fn an_interrupted_run_prints_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let (child, json) = catching_run(dir.path());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(out.contains(" for ") && out.contains("\n  a "), "{out}");
    assert!(err.contains("interrupted by signal 15 after"), "{err}");
    assert!(!json.exists(), "no --json file");
}

/// A second signal during a run (the first one's orderly stop taking
/// too long, as on a device that does not answer) exits at once, saying
/// that `bfq cleanup` puts back what the run changed (fails with the
/// handler only noting the signal: the run stops as after one, without
/// the message).
#[test]
fn a_second_interrupt_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (child, json) = catching_run(dir.path());
    // SAFETY: signalling our own child; two different signals, so that
    // the second is not merged into the first while that one is pending.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(matches!(o.status.code(), Some(130 | 143)), "{err}");
    assert!(
        err.contains("interrupted again: exiting now; `sudo bfq cleanup`"),
        "{err}"
    );
    assert!(!json.exists(), "no --json file");
}
