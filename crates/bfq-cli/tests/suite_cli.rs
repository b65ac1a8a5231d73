//! `bfq suite` from the command line: the closing message says where the
//! report is and why findings fail; a bad `--target` fails before any run.

use std::process::Command;

fn out_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("bfq-suite-cli-{}-{name}", std::process::id()))
}

#[test]
fn closing_message_names_the_report_the_count_and_each_failure_with_its_cause() {
    let out = out_dir("msg");
    let o = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["suite", "--quick", "--reps", "1", "--no-progress", "--only"])
        .arg("2010-fairness,2014-startup")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let html = out.join("report.html");
    assert!(html.exists());
    assert!(
        err.contains(&format!("report: {}", html.display())),
        "{err}"
    );
    assert!(err.contains(" findings hold, "), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let mut failing = 0;
    for e in v["experiments"].as_array().unwrap() {
        for f in e["findings"].as_array().unwrap() {
            if f["verdict"] != "HOLDS" {
                failing += 1;
                let kind = f["cause"]["kind"].as_str().unwrap();
                assert!(err.contains(f["claim"].as_str().unwrap()), "{err}");
                assert!(err.contains(&format!("cause: {kind}: ")), "{err}");
            }
        }
    }
    assert_eq!(err.matches("      cause: ").count(), failing, "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Runs `bfq suite --quick --target <target>`: it must fail (non-zero
/// exit) before any run, writing no report; returns its stderr.
fn refused(name: &str, target: &std::ffi::OsStr) -> String {
    let out = out_dir(name);
    let o = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["suite", "--quick", "--no-progress", "--target"])
        .arg(target)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let report = out.join("report.json").exists();
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        !o.status.success(),
        "exit 0 with --target {target:?}: {err}"
    );
    assert!(!report, "a report was written for --target {target:?}");
    err
}

#[test]
fn a_missing_target_fails_before_any_run() {
    let missing = std::env::temp_dir().join("bfq-no-such-target-for-suite");
    let err = refused("missing", missing.as_os_str());
    assert!(
        err.contains("--target") && err.contains("bfq-no-such-target-for-suite"),
        "{err}"
    );
}

#[test]
fn a_directory_target_fails_before_any_run() {
    let err = refused("dir", std::env::temp_dir().as_os_str());
    assert!(
        err.contains("not a regular file or a block device"),
        "{err}"
    );
}

/// A block device holding a mounted filesystem is refused before any run
/// (skipped when no mounted block device is visible).
#[test]
fn a_mounted_target_fails_before_any_run() {
    use std::os::unix::fs::FileTypeExt;
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let dev = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| s.starts_with("/dev/"))
        .find(|s| {
            std::fs::metadata(s)
                .map(|m| m.file_type().is_block_device())
                .unwrap_or(false)
        });
    let Some(dev) = dev else {
        eprintln!("skipped: no mounted block device visible");
        return;
    };
    let err = refused("mounted", dev.as_ref());
    assert!(err.contains("mounted"), "{err}");
}

#[test]
fn a_character_device_target_fails_before_any_run() {
    let err = refused("chardev", "/dev/null".as_ref());
    assert!(
        err.contains("--target /dev/null") && err.contains("not a regular file or a block device"),
        "{err}"
    );
}

/// Removes a directory when dropped (also when an assertion fails).
struct RemoveDir(std::path::PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// On a loop device (root), the real-storage suite runs and its report
/// names the device and says it was measured on real storage, in all
/// three formats. The loop device and its file go away even when an
/// assertion fails (their guards); skipped with a message where there is
/// no root or no loop device.
#[test]
fn a_loop_device_target_is_named_in_the_report() {
    use bfq_real::sys;
    if !sys::is_root() || !std::path::Path::new("/dev/loop-control").exists() {
        eprintln!(
            "SKIPPED a_loop_device_target_is_named_in_the_report: needs root and loop devices"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = match sys::LoopDevice::create(&dir.path().join("loop.img"), 64 << 20, false) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIPPED a_loop_device_target_is_named_in_the_report: {e}");
            return;
        }
    };
    let out = RemoveDir(out_dir("loop"));
    let path = dev.path().display().to_string();
    let o = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args([
            "suite",
            "--quick",
            "--reps",
            "1",
            "--no-progress",
            "--only",
            "real-fairness",
        ])
        .args(["--target", &path, "--out"])
        .arg(&out.0)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let md = std::fs::read_to_string(out.0.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("Measured on real storage: `{path}`")),
        "{md}"
    );
    assert!(md.contains(&format!("device `{path}`")), "{md}");
    assert!(!md.contains("Simulated with"), "{md}");
    let html = std::fs::read_to_string(out.0.join("report.html")).unwrap();
    assert!(html.contains(&format!("Measured on real storage: {path}")));
    assert!(html.contains(&format!("device <code>{path}</code>")));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.0.join("report.json")).unwrap()).unwrap();
    assert_eq!(v["target"], path.as_str());
    assert_eq!(v["suite"], "bfq-rs benchmark suite (real storage)");
}
