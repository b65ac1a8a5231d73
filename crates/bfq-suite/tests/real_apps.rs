//! `bfq suite --real-apps` end to end, tiny (1 reader, 1 reader + 1
//! writer, 16 MiB files, one round): every workload and configuration
//! ran, the report has the start-up times and throughputs and complete
//! findings, and nothing (mount, loop device) is left. Needs root,
//! /dev/fuse, losetup and mkfs.ext4: skips with a message without them.
//! Nothing is timed for pass or fail.

use bfq_suite::{report, run_suite, Options};
use std::path::{Path, PathBuf};
use std::process::Command;

fn missing_requirement() -> Option<String> {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    for tool in ["losetup", "mkfs.ext4"] {
        let found = Command::new("sh")
            .args([
                "-c",
                &format!("command -v {tool} || test -x /sbin/{tool} || test -x /usr/sbin/{tool}"),
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("no {tool}"));
        }
    }
    None
}

/// Mounts under the directory (FUSE or ext4) still listed.
fn mounts_under(dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4).map(str::to_string))
        .filter(|m| m.starts_with(&d))
        .collect()
}

/// Loop devices over a file.
fn loops_over(file: &Path) -> String {
    let o = Command::new("losetup")
        .arg("-j")
        .arg(file)
        .output()
        .expect("losetup");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Removes what a failed run could leave (mounts, loop devices), then the
/// directory, also when the test panics.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = bfq_mount::cleanup(Some(&self.0.join("mnt")));
        for m in mounts_under(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&m).status();
        }
        let image = self.0.join("apps.ext4");
        for line in loops_over(&image).lines() {
            if let Some(dev) = line.split(':').next() {
                let _ = Command::new("losetup").arg("-d").arg(dev).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_tiny_real_apps_run_reports_start_ups_and_throughputs_and_cleans_up() {
    if let Some(why) = missing_requirement() {
        eprintln!("skipped: real-apps needs root, /dev/fuse, losetup and mkfs.ext4 ({why})");
        return;
    }
    let dir = std::env::temp_dir().join(format!("bfq-real-apps-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let guard = Cleanup(dir.clone());
    let out = dir.join("out");
    let opts = Options {
        only: None,
        reps: Some(1),
        jobs: 1,
        quick: true,
        out: out.clone(),
        progress: false,
        target: Some(dir.clone()),
        real_apps: true,
    };
    let r = run_suite(&opts).unwrap();
    assert_eq!(r.experiments.len(), 1);
    let e = &r.experiments[0];
    assert_eq!(e.id, "real-apps");
    assert_eq!(e.cells.len(), 3 * 5);
    for c in &e.cells {
        assert!(
            c.error.is_none(),
            "{} / {}: {:?}",
            c.variant,
            c.config,
            c.error
        );
        for app in ["python3", "bash"] {
            let t = e.center(&c.variant, &c.config, app);
            assert!(
                t.is_some_and(|t| t > 0.0),
                "{} / {} {app}: {t:?}",
                c.variant,
                c.config
            );
        }
        let rd = e.center(&c.variant, &c.config, "rd");
        let wr = e.center(&c.variant, &c.config, "wr");
        match c.variant.as_str() {
            "idle" => assert!(rd.is_none() && wr.is_none()),
            "10r" => assert!(rd.is_some_and(|x| x > 0.0) && wr.is_none()),
            _ => assert!(rd.is_some_and(|x| x > 0.0) && wr.is_some_and(|x| x > 0.0)),
        }
    }
    assert_eq!(e.findings.len(), 8);
    for f in &e.findings {
        assert!(f.problems().is_empty(), "{:?}", f.problems());
    }
    report::write_all(&r, &out).unwrap();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("**python3 -c pass start-up** (s; median [min–max] over the rounds)"),
        "{md}"
    );
    assert!(md.contains("| kernel:bfq |"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["suite"], "bfq-rs benchmark suite (real applications)");
    assert!(json["experiments"][0]["cells"][0]["summary"]["python3"]["median"].is_number());
    // Nothing left: no mount under the directory, no loop device over the image.
    assert!(mounts_under(&dir).is_empty(), "{:?}", mounts_under(&dir));
    assert_eq!(loops_over(&dir.join("apps.ext4")), "");
    drop(guard);
    assert!(!dir.exists());
}
