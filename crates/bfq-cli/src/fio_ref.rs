//! fio as an independent reference for `bfq bench-engine randread`: the
//! same jobs x depth of 4 KiB random reads with fio's io_uring engine, on
//! one of the kernel's schedulers (`none` by default), every job a thread
//! of one fio process in the benchmark's own cgroup (and on its CPUs),
//! over the same region of the device as the engine's flows.

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

/// Runs `jobs` fio jobs of `depth` 4 KiB random reads each over the
/// first `region` bytes of the device for `seconds`, with the device's
/// scheduler set to `sched` for the run (put back afterwards).
pub fn randread(
    dev: &Path,
    sched: &str,
    (jobs, depth): (u32, u32),
    region: u64,
    seconds: Duration,
) -> anyhow::Result<RunReport> {
    let _signals = bfq_real::sys::catch_interrupts();
    let _sched = bfq_real::sys::SchedulerGuard::set(dev, sched)?;
    let cpu0 = bfq_real::children_cpu_seconds();
    let out = Command::new("fio")
        .arg("--name=randread")
        .arg(format!("--filename={}", dev.display()))
        .arg(format!("--size={}", region / 4096 * 4096))
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
        .args(["--norandommap", "--randrepeat=0", "--lat_percentiles=1"])
        .arg("--output-format=json")
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

/// fio's JSON (one group-reported job) as a [`RunReport`]. The CPU time
/// is that of fio's job threads while they ran (`usr_cpu` + `sys_cpu`, in
/// percent of `job_runtime`, the jobs' summed run time), as the engine's
/// is its threads' during its run; fio's start-up (about 0.15 s of CPU
/// here, which at a few hundred requests a second would be hundreds of
/// microseconds per request) is left out. `process_cpu_seconds` (the
/// whole child's, start-up included) is used only when the JSON lacks
/// those fields.
fn parse(text: &str, dev: &Path, process_cpu_seconds: f64) -> anyhow::Result<RunReport> {
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
    // A request's whole time, submission to completion seen by its job
    // (`lat_ns`, with percentiles under `--lat_percentiles=1`), as the
    // engine's flows time theirs; completion alone (`clat_ns`) from a fio
    // that reports no `lat_ns`.
    let lat = match &read["lat_ns"] {
        l if l["mean"].is_number() => l,
        _ => &read["clat_ns"],
    };
    let job = &v["jobs"][0];
    let errors = job["error"].as_u64().unwrap_or(0);
    let cpu_seconds = match (
        job["usr_cpu"].as_f64(),
        job["sys_cpu"].as_f64(),
        job["job_runtime"].as_f64(),
    ) {
        (Some(usr), Some(sys), Some(ms)) => (usr + sys) / 100.0 * ms / 1e3,
        _ => process_cpu_seconds,
    };
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
            lat_mean_us: us(&lat["mean"]),
            lat_p50_us: us(&lat["percentile"]["50.000000"]),
            lat_p99_us: us(&lat["percentile"]["99.000000"]),
            lat_max_us: us(&lat["max"]),
            ..Default::default()
        }],
        cpu_seconds,
        scheduler: None,
        engine: None,
        timeline: Vec::new(),
        trace_error: None,
        interrupted: None,
    })
}

/// A latency from fio's JSON, in ns, as us (0 when missing).
fn us(ns: &serde_json::Value) -> f64 {
    ns.as_f64().unwrap_or(0.0) / 1e3
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
    }

    /// With `--lat_percentiles=1` the whole time's mean, median, 99th
    /// percentile and maximum are the flow's, not the completion part's.
    #[test]
    fn reads_the_whole_latency_and_its_percentiles() {
        let text = r#"{"jobs": [{"jobname": "randread", "error": 0,
 "read": {"io_bytes": 409600, "total_ios": 100, "runtime": 2000,
          "clat_ns": {"mean": 11000.0, "max": 90000,
                      "percentile": {"50.000000": 10000, "99.000000": 40000}},
          "lat_ns": {"mean": 12000.0, "max": 91000,
                     "percentile": {"50.000000": 11000, "99.000000": 41000}}}}]}"#;
        let f = &parse(text, Path::new("/dev/loop0"), 0.5).unwrap().flows[0];
        let got = (f.lat_mean_us, f.lat_p50_us, f.lat_p99_us, f.lat_max_us);
        assert_eq!(got, (12.0, 11.0, 41.0, 91.0));
    }

    #[test]
    fn cpu_is_the_job_threads_own() {
        // 4 jobs of 2 s (job_runtime 8000 ms), 6.25% CPU each: 0.5 s, not
        // the child's 0.65 s that includes fio's start-up.
        let text = r#"{"jobs": [{"jobname": "randread", "error": 0,
 "job_runtime": 8000, "usr_cpu": 1.25, "sys_cpu": 5.0,
 "read": {"io_bytes": 4096000, "total_ios": 1000, "runtime": 2000}}]}"#;
        let r = parse(text, Path::new("/dev/loop0"), 0.65).unwrap();
        assert!((r.cpu_seconds - 0.5).abs() < 1e-9, "{}", r.cpu_seconds);
        assert!((r.cpu_us_per_io() - 500.0).abs() < 1e-6);
        assert!(parse("garbage", Path::new("x"), 0.0).is_err());
    }
}
