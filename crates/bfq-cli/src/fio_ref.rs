//! fio as an independent reference for `bfq bench-engine randread`: the
//! same jobs x depth of 4 KiB random reads with fio's io_uring engine, on
//! one of the kernel's schedulers (`none` by default), every job a thread
//! of one fio process in the benchmark's own cgroup (and on its CPUs).

use bfq_real::{FlowReport, RunReport};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The prefix of fio's columns: `fio:none`, `fio:bfq`.
pub const PREFIX: &str = "fio:";

/// Whether `fio` can be run; `None` when it is missing, with why.
pub fn available() -> Result<String, String> {
    match Command::new("fio").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(format!("fio --version failed: {}", o.status)),
        Err(e) => Err(format!(
            "fio not found ({e}); install it, e.g. apt-get install fio"
        )),
    }
}

/// Runs `jobs` fio jobs of `depth` 4 KiB random reads each over the whole
/// device for `seconds`, with the device's scheduler set to `sched` for
/// the run (put back afterwards).
pub fn randread(
    dev: &Path,
    sched: &str,
    (jobs, depth): (u32, u32),
    seconds: Duration,
) -> anyhow::Result<RunReport> {
    let _signals = bfq_real::sys::catch_interrupts();
    let _sched = bfq_real::sys::SchedulerGuard::set(dev, sched)?;
    let cpu0 = bfq_real::children_cpu_seconds();
    let out = Command::new("fio")
        .arg("--name=randread")
        .arg(format!("--filename={}", dev.display()))
        .args([
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=io_uring",
        ])
        .arg(format!("--iodepth={depth}"))
        .arg(format!("--numjobs={jobs}"))
        .args(["--thread", "--group_reporting", "--time_based"])
        .arg(format!("--runtime={}ms", seconds.as_millis().max(1)))
        .args(["--norandommap", "--randrepeat=0", "--output-format=json"])
        .output()?;
    let cpu = bfq_real::children_cpu_seconds() - cpu0;
    if let Some(sig) = bfq_real::sys::interrupted() {
        anyhow::bail!(
            "interrupted by signal {sig}: {}'s scheduler put back",
            dev.display()
        );
    }
    if !out.status.success() {
        anyhow::bail!(
            "fio failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut r = parse(&String::from_utf8_lossy(&out.stdout), dev, cpu)?;
    r.backend = format!("{PREFIX}{sched}");
    Ok(r)
}

/// fio's JSON (one group-reported job) as a [`RunReport`].
fn parse(text: &str, dev: &Path, cpu_seconds: f64) -> anyhow::Result<RunReport> {
    // fio may print notes before the JSON.
    let start = text
        .find('{')
        .ok_or_else(|| anyhow::anyhow!("no JSON from fio"))?;
    let v: serde_json::Value = serde_json::from_str(&text[start..])?;
    let read = &v["jobs"][0]["read"];
    let (Some(ios), Some(bytes), Some(ms)) = (
        read["total_ios"].as_u64(),
        read["io_bytes"].as_u64(),
        read["runtime"].as_u64(),
    ) else {
        anyhow::bail!("fio's JSON has no jobs[0].read total_ios/io_bytes/runtime");
    };
    let errors = v["jobs"][0]["error"].as_u64().unwrap_or(0);
    Ok(RunReport {
        backend: format!("{PREFIX}none"),
        target: dev.display().to_string(),
        seconds: ms.max(1) as f64 / 1e3,
        flows: vec![FlowReport {
            name: "fio".into(),
            weight: 100,
            ios,
            bytes,
            errors,
            lat_mean_us: read["clat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1e3,
            ..Default::default()
        }],
        cpu_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fios_json() {
        let text = r#"note: both iodepth >= 1 and synchronous I/O engine are selected
{"fio version": "fio-3.33", "jobs": [{"jobname": "randread", "error": 0,
 "read": {"io_bytes": 409600, "total_ios": 100, "runtime": 2000, "iops": 50.0,
          "clat_ns": {"mean": 12000.0}}}]}"#;
        let r = parse(text, Path::new("/dev/loop0"), 0.5).unwrap();
        assert_eq!((r.total_ios(), r.total_bytes()), (100, 409600));
        assert_eq!(r.seconds, 2.0);
        assert_eq!(r.iops(), 50.0);
        assert_eq!(r.flows[0].lat_mean_us, 12.0);
        assert_eq!(r.cpu_us_per_io(), 5000.0);
        assert!(parse("{\"jobs\": []}", Path::new("x"), 0.0).is_err());
        assert!(parse("garbage", Path::new("x"), 0.0).is_err());
    }
}
