//! fio job files as scenarios (docs/fio.md).
//!
//! A job file (fio's ini format: `[global]` and job sections of
//! `key=value` lines) becomes scenario TOML, which then goes through the
//! scenario format's own checks ([`Scenario::from_toml_str`]). Each job
//! section is a `[[flow]]` (`numjobs` copies); `rw=rw`/`randrw` is a read
//! flow and a write flow. Options that describe a workload are mapped;
//! options that do not change it are accepted with a warning; anything
//! else is an error naming the option.

use crate::scenario::{Scenario, ScenarioError};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use toml::{Table, Value};

/// Options accepted with a warning: they name files, logs or reports, or
/// tune fio itself, and do not change the I/O a job makes.
const NO_EFFECT: &[&str] = &[
    "name",
    "description",
    "filename",
    "directory",
    "filename_format",
    "group_reporting",
    "thread",
    "randrepeat",
    "allrandrepeat",
    "norandommap",
    "random_generator",
    "invalidate",
    "unlink",
    "create_on_open",
    "fadvise_hint",
    "ramp_time",
    "per_job_logs",
    "write_bw_log",
    "write_lat_log",
    "write_iops_log",
    "log_avg_msec",
    "clocksource",
    "gtod_reduce",
    "disable_lat",
    "disable_clat",
    "disable_slat",
    "disable_bw_measurement",
    "lat_percentiles",
    "clat_percentiles",
    "percentile_list",
    "ioscheduler",
    "kb_base",
    "overwrite",
    "exitall",
    "new_group",
    "iodepth_batch",
    "iodepth_batch_submit",
    "iodepth_batch_complete",
    "iodepth_low",
    "fixedbufs",
    "registerfiles",
    "sqthread_poll",
    "hipri",
];

/// Options that describe the workload and are mapped.
const MAPPED: &[&str] = &[
    "rw",
    "readwrite",
    "rwmixread",
    "rwmixwrite",
    "bs",
    "blocksize",
    "size",
    "offset",
    "filesize",
    "iodepth",
    "numjobs",
    "thinktime",
    "rate",
    "rate_iops",
    "runtime",
    "time_based",
    "startdelay",
    "ioengine",
    "direct",
    "buffered",
    "prio",
    "prioclass",
    "cgroup",
    "cgroup_weight",
    "timeout",
    "bsrange",
    "stonewall",
    "wait_for",
];

/// The run's limit when a job ends by its `size` alone: the run then
/// lasts until every job has ended, as fio's, but at most this long
/// (microseconds; 24 h).
const SIZE_LIMITED_RUN_US: u64 = 24 * 3600 * 1_000_000;

/// One section's options, `[global]` ones first.
type Opts = BTreeMap<String, String>;

/// A parsed job file: the sections in order.
fn parse_ini(text: &str) -> Result<Vec<(String, Opts)>, String> {
    let mut sections: Vec<(String, Opts)> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        // A comment runs from `;` or `#` at the start or after a blank.
        let cut = raw
            .char_indices()
            .find(|&(i, c)| {
                (c == ';' || c == '#') && (i == 0 || raw[..i].ends_with(char::is_whitespace))
            })
            .map_or(raw.len(), |(i, _)| i);
        let line = raw[..cut].trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sections.push((name.trim().to_string(), Opts::new()));
            continue;
        }
        let Some((_, opts)) = sections.last_mut() else {
            return Err(format!("line {}: option outside a [section]", n + 1));
        };
        let (k, v) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (line, "1"),
        };
        if v.contains("${") || k.starts_with("include") {
            return Err(format!(
                "line {}: includes and ${{VARS}} are not supported",
                n + 1
            ));
        }
        opts.insert(k.to_string(), v.to_string());
    }
    Ok(sections)
}

/// A fio size (`4k`, `1m`, `2g`, `512`, `4KiB`): bytes, 1024-based as
/// fio's default `kb_base`.
fn size(key: &str, v: &str) -> Result<u64, String> {
    let s = v.trim().to_ascii_lowercase();
    let s = s.trim_end_matches("ib").trim_end_matches('b');
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mult: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        "p" => 1 << 50,
        _ => return Err(format!("{key}={v}: not a size (e.g. 4k, 128m, 1g)")),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{key}={v}: not a size (e.g. 4k, 128m, 1g)"))
}

/// A fio time with its option's default unit: microseconds.
fn time_us(key: &str, v: &str, default_unit_us: u64) -> Result<u64, String> {
    let s = v.trim().to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mult = match unit {
        "" => default_unit_us,
        "us" | "usec" => 1,
        "ms" | "msec" => 1_000,
        "s" | "sec" => 1_000_000,
        "m" | "min" => 60_000_000,
        "h" => 3_600_000_000,
        _ => return Err(format!("{key}={v}: not a time (e.g. 100us, 5ms, 10s)")),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{key}={v}: not a time (e.g. 100us, 5ms, 10s)"))
}

fn flag(key: &str, v: &str) -> Result<bool, String> {
    bfq_core::settings::parse_bool(v).ok_or_else(|| {
        format!(
            "{key}={v}: expected {}",
            bfq_core::settings::bool_spellings()
        )
    })
}

fn int(key: &str, v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| format!("{key}={v}: expected an integer {lo}..={hi}"))
}

/// The read or write value of fio's `read,write[,trim]` list (`bs=4k,8k`):
/// one value is for both; an empty side is unset (`rate=,500k` caps
/// writes only, `bs=,8k` reads default blocks).
fn for_dir(v: &str, write: bool) -> Option<&str> {
    let s = match v.split_once(',') {
        Some((_, w)) if write => w.split(',').next().unwrap_or(""),
        Some((r, _)) => r,
        None => v,
    };
    let s = s.trim();
    (!s.is_empty()).then_some(s)
}

/// The translation of one job file.
#[derive(Debug)]
pub struct FioScenario {
    /// Scenario TOML (what `bfq sim` / `bfq run` run).
    pub toml: String,
    /// Options accepted without effect, and approximations made.
    pub warnings: Vec<String>,
}

struct Job<'a> {
    name: &'a str,
    o: Opts,
}

impl Job<'_> {
    fn get(&self, k: &str) -> Option<&str> {
        self.o.get(k).map(String::as_str)
    }
    fn err(&self, e: String) -> String {
        format!("job [{}]: {e}", self.name)
    }
}

/// Translates a job file's text to scenario TOML.
pub fn to_scenario_toml(text: &str, title: &str) -> Result<FioScenario, String> {
    let sections = parse_ini(text)?;
    let mut global = Opts::new();
    let mut jobs = Vec::new();
    for (name, opts) in &sections {
        if name == "global" {
            global.extend(opts.clone());
            continue;
        }
        let mut o = global.clone();
        o.extend(opts.clone());
        jobs.push(Job { name, o });
    }
    if jobs.is_empty() {
        return Err("no job section (only [global])".into());
    }
    let mut warnings = Vec::new();
    let mut flows = Vec::new();
    let mut groups: BTreeMap<String, u64> = BTreeMap::new();
    let mut outs: Vec<JobOut> = Vec::new();
    let mut taken = Taken {
        used: BTreeSet::new(),
        sections: jobs.iter().map(|j| j.name.to_string()).collect(),
    };
    for job in &jobs {
        check_options(job, &mut warnings)?;
        let (after, phase) = waits_for(&jobs, &outs)?;
        let names: Vec<String> = after
            .iter()
            .flat_map(|&j| outs[j].names.iter().cloned())
            .collect();
        let mut out = job_flows(job, &names, &mut groups, &mut warnings).map_err(|e| job.err(e))?;
        rename_taken(job, &mut out, &mut taken, &mut warnings);
        out.phase = phase;
        out.after = after;
        flows.extend(out.flows.iter().cloned());
        outs.push(out);
    }
    let duration_us = run_limit(&jobs, &outs, &mut warnings);
    let mut top = Table::new();
    top.insert("name".into(), Value::String(title.to_string()));
    top.insert(
        "description".into(),
        Value::String(format!("fio job file {title}")),
    );
    if let Some(d) = duration_us {
        top.insert("duration".into(), Value::String(format!("{d}us")));
    }
    let g: Vec<Value> = groups
        .into_iter()
        .map(|(path, w)| {
            let mut t = Table::new();
            t.insert("path".into(), Value::String(path));
            t.insert("weight".into(), Value::Integer(w as i64));
            Value::Table(t)
        })
        .collect();
    if !g.is_empty() {
        top.insert("group".into(), Value::Array(g));
    }
    top.insert("flow".into(), Value::Array(flows));
    let toml = toml::to_string(&top).map_err(|e| e.to_string())?;
    Ok(FioScenario { toml, warnings })
}

/// The flow names given so far, and every job section's name.
struct Taken {
    used: BTreeSet<String>,
    sections: BTreeSet<String>,
}

/// Gives `out`'s flows names no earlier flow has. fio runs two jobs of
/// one name as two jobs (its reports name both alike); a scenario's flows
/// need names of their own, so a repeated name becomes `NAME#K`, K the
/// smallest from 2 that names no other flow or job section, with a
/// warning. The names later jobs wait for follow the new names.
fn rename_taken(job: &Job, out: &mut JobOut, taken: &mut Taken, warnings: &mut Vec<String>) {
    for (f, name) in out.flows.iter_mut().zip(out.names.iter_mut()) {
        if taken.used.contains(name.as_str()) {
            let new = (2..)
                .map(|k| format!("{name}#{k}"))
                .find(|n| !taken.used.contains(n) && !taken.sections.contains(n))
                .expect("a free name");
            warnings.push(format!(
                "job [{}]: flow '{name}' is named '{new}': an earlier job has its name (fio runs \
                 both, as two jobs)",
                job.name
            ));
            if let Some(t) = f.as_table_mut() {
                t.insert("name".into(), Value::String(new.clone()));
            }
            *name = new;
        }
        taken.used.insert(name.clone());
    }
}

fn check_options(job: &Job, warnings: &mut Vec<String>) -> Result<(), String> {
    let mut unknown = Vec::new();
    for k in job.o.keys() {
        if MAPPED.contains(&k.as_str()) {
            continue;
        }
        if NO_EFFECT.contains(&k.as_str()) {
            let w = format!("{k}: ignored (does not change the workload)");
            if !warnings.contains(&w) {
                warnings.push(w);
            }
            continue;
        }
        unknown.push(k.as_str());
    }
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(job.err(format!(
            "unsupported option(s): {} (supported: {})",
            unknown.join(", "),
            MAPPED.join(", ")
        )))
    }
}

/// (op, pattern) pairs of a job's `rw`, with the share of each.
fn directions(job: &Job) -> Result<Vec<(&'static str, &'static str, f64)>, String> {
    let rw = job.get("rw").or(job.get("readwrite")).unwrap_or("read");
    // fio's rw=randread:8 (an offset modifier) is not a workload we model.
    let mixread = match (job.get("rwmixread"), job.get("rwmixwrite")) {
        (Some(r), _) => int("rwmixread", r, 0, 100)? as f64 / 100.0,
        (None, Some(w)) => 1.0 - int("rwmixwrite", w, 0, 100)? as f64 / 100.0,
        (None, None) => 0.5,
    };
    Ok(match rw {
        "read" => vec![("read", "seq", 1.0)],
        "write" => vec![("write", "seq", 1.0)],
        "randread" => vec![("read", "rand", 1.0)],
        "randwrite" => vec![("write", "rand", 1.0)],
        "rw" | "readwrite" => vec![("read", "seq", mixread), ("write", "seq", 1.0 - mixread)],
        "randrw" => vec![("read", "rand", mixread), ("write", "rand", 1.0 - mixread)],
        other => {
            return Err(format!(
                "rw={other}: expected read, write, randread, randwrite, rw, readwrite or randrw"
            ))
        }
    })
}

/// (depth, sync) from ioengine, iodepth, direct/buffered, for a direction.
fn engine(job: &Job, write: bool) -> Result<(u64, bool, bool), String> {
    let direct = match (job.get("direct"), job.get("buffered")) {
        (Some(d), _) => flag("direct", d)?,
        (None, Some(b)) => !flag("buffered", b)?,
        (None, None) => false,
    };
    let depth = match job.get("ioengine").unwrap_or("psync") {
        "sync" | "psync" | "vsync" | "pvsync" | "pvsync2" => 1,
        "libaio" | "io_uring" | "posixaio" => match job.get("iodepth") {
            Some(d) => int("iodepth", d, 1, 4096)?,
            None => 1,
        },
        other => {
            return Err(format!(
                "ioengine={other}: supported are sync, psync, vsync, pvsync, pvsync2, libaio, io_uring, posixaio"
            ))
        }
    };
    // Linux flags reads and O_DIRECT writes synchronous; buffered writes
    // go through the page cache and the flusher.
    let sync = !write || direct;
    Ok((depth, sync, direct))
}

/// What one job became.
struct JobOut {
    /// Its `[[flow]]` tables.
    flows: Vec<Value>,
    /// Their names (what later jobs wait for).
    names: Vec<String>,
    /// Its `startdelay`, us.
    start_us: u64,
    /// Its `runtime`, us.
    runtime_us: Option<u64>,
    /// It ends on its own: by its runtime or its size.
    bounded: bool,
    /// Its phase: the number of `stonewall` barriers before it.
    phase: usize,
    /// Indices of the earlier jobs it waits for.
    after: Vec<usize>,
}

/// The earlier jobs `job` waits for, and its phase, as fio starts jobs:
/// a job with `stonewall` waits until every job before it has ended, and
/// the jobs after it (up to the next `stonewall`) start with it, so a
/// phase waits for the phase before it (which waited for the one before);
/// `wait_for=NAME` waits for the jobs named NAME ([`wait_for_jobs`]). A job also waits for
/// its own `startdelay`, counted from the start of the run as in fio.
fn waits_for(jobs: &[Job], outs: &[JobOut]) -> Result<(Vec<usize>, usize), String> {
    let (earlier, job) = (&jobs[..outs.len()], &jobs[outs.len()]);
    let stonewall = job
        .get("stonewall")
        .map(|v| flag("stonewall", v))
        .transpose()
        .map_err(|e| job.err(e))?
        .unwrap_or(false);
    let prev = outs.last().map_or(0, |o| o.phase);
    let phase = if stonewall && !outs.is_empty() {
        prev + 1
    } else {
        prev
    };
    let mut after: Vec<usize> = match phase {
        0 => Vec::new(),
        p => (0..outs.len())
            .filter(|&k| outs[k].phase == p - 1)
            .collect(),
    };
    if let Some(name) = job.get("wait_for") {
        for k in wait_for_jobs(jobs, outs.len(), name).map_err(|e| job.err(e))? {
            if !after.contains(&k) {
                after.push(k);
            }
        }
    }
    if let Some(&k) = after.iter().find(|&&k| !outs[k].bounded) {
        return Err(job.err(format!(
            "waits for job [{}] (stonewall or wait_for), which has neither runtime nor size \
             and never ends",
            earlier[k].name
        )));
    }
    Ok((after, phase))
}

/// The jobs that `wait_for=NAME` in job `k` waits for, as fio's: every
/// job named NAME, unless NAME is job `k`'s own name (fio then waits for
/// none). fio needs one of them before job `k`; one after it is refused
/// here, as a flow waits only for flows before it.
fn wait_for_jobs(jobs: &[Job], k: usize, name: &str) -> Result<Vec<usize>, String> {
    if jobs[k].name == name {
        return Ok(Vec::new());
    }
    let named = |r: std::ops::Range<usize>| r.filter(|&j| jobs[j].name == name).collect::<Vec<_>>();
    let before = named(0..k);
    if before.is_empty() {
        return Err(format!(
            "wait_for={name}: no job of that name before this one (fio waits only for \
             earlier jobs)"
        ));
    }
    if let Some(&later) = named(k + 1..jobs.len()).first() {
        return Err(format!(
            "wait_for={name}: job section {} is also named [{name}], after this one: fio would wait for \
             it too, but a flow here waits only for flows before it (rename it)",
            later + 1
        ));
    }
    Ok(before)
}

/// The run's `duration` (us; None: the scenario default, 30 s). Without
/// barriers, when every job has a runtime: the latest `startdelay +
/// runtime`. When every job ends on its own but some by their size alone,
/// or some wait for others: [`SIZE_LIMITED_RUN_US`], as the run ends when
/// the last flow has ended. Otherwise (a job with neither runtime nor
/// size runs as long as the run): the latest runtime end, or the default.
fn run_limit(jobs: &[Job], outs: &[JobOut], warnings: &mut Vec<String>) -> Option<u64> {
    let latest = outs
        .iter()
        .filter_map(|o| o.runtime_us.map(|r| o.start_us + r))
        .max();
    let waits = outs.iter().any(|o| !o.after.is_empty());
    if outs.iter().all(|o| o.runtime_us.is_some()) && !waits {
        return latest;
    }
    if outs.iter().all(|o| o.bounded) {
        warnings.push(
            "jobs end by their size or after others: the run lasts until the last job has \
             ended (at most 24 h)"
                .into(),
        );
        return Some(latest.unwrap_or(0).max(SIZE_LIMITED_RUN_US));
    }
    let open: Vec<&str> = jobs
        .iter()
        .zip(outs)
        .filter(|(_, o)| !o.bounded)
        .map(|(j, _)| j.name)
        .collect();
    match latest {
        Some(l) => warnings.push(format!(
            "job(s) [{}]: neither runtime nor size: they run until the run ends at {:.3} s",
            open.join("], ["),
            l as f64 / 1e6
        )),
        None => {
            warnings.push("no runtime: the run is limited to the scenario default (30s)".into())
        }
    }
    latest
}

/// A job's options common to its directions (`rw=rw` makes two flows).
struct JobCommon {
    /// `numjobs`: copies of each flow.
    numjobs: u64,
    /// `time_based`: run for `runtime`, whatever `size`.
    time_based: bool,
    /// `runtime` (or `timeout`), us.
    runtime: Option<u64>,
    /// `startdelay`, us.
    start: u64,
    /// `thinktime`, us.
    think: u64,
    /// `size`, bytes.
    size_b: Option<u64>,
    /// `filesize`, bytes.
    filesize: Option<u64>,
}

/// Translates one job to its `[[flow]]` tables (one per direction of its
/// `rw`), each waiting for the flows named in `after`; its cgroup joins
/// `groups` (path to weight).
fn job_flows(
    job: &Job,
    after: &[String],
    groups: &mut BTreeMap<String, u64>,
    warnings: &mut Vec<String>,
) -> Result<JobOut, String> {
    let dirs = directions(job)?;
    if dirs.len() == 2 {
        warnings.push(format!(
            "job [{}]: rw={}: a read flow and a write flow (two processes to the scheduler); rwmixread splits size between them; rate is per direction",
            job.name,
            job.get("rw").or(job.get("readwrite")).unwrap_or("")
        ));
    }
    let c = job_common(job)?;
    let group = job_group(job, groups)?;
    let mut out = Vec::new();
    for dir in dirs {
        if dir.2 <= 0.0 {
            continue;
        }
        let f = direction_flow(job, &c, dir, after, group.as_deref())?;
        out.push(Value::Table(f));
    }
    let names = out
        .iter()
        .filter_map(|f| f.get("name").and_then(Value::as_str).map(String::from))
        .collect();
    Ok(JobOut {
        flows: out,
        names,
        start_us: c.start,
        runtime_us: c.runtime,
        bounded: c.runtime.is_some() || c.size_b.is_some(),
        phase: 0,
        after: Vec::new(),
    })
}

/// Reads and checks a job's [`JobCommon`] options: `numjobs` 1..=4096,
/// `runtime` positive (seconds by default), `startdelay`, `thinktime`,
/// `size`, `filesize`; `time_based` needs a runtime.
fn job_common(job: &Job) -> Result<JobCommon, String> {
    let numjobs = job
        .get("numjobs")
        .map(|v| int("numjobs", v, 1, 4096))
        .transpose()?
        .unwrap_or(1);
    let time_based = job
        .get("time_based")
        .map(|v| flag("time_based", v))
        .transpose()?
        .unwrap_or(false);
    let runtime = match (job.get("runtime"), job.get("timeout")) {
        (Some(v), _) => Some(time_us("runtime", v, 1_000_000)?),
        (None, Some(v)) => Some(time_us("timeout", v, 1_000_000)?),
        (None, None) => None,
    };
    if runtime == Some(0) {
        return Err("runtime: must be positive".into());
    }
    let start = job
        .get("startdelay")
        .map(|v| time_us("startdelay", v, 1_000_000))
        .transpose()?
        .unwrap_or(0);
    let think = job
        .get("thinktime")
        .map(|v| time_us("thinktime", v, 1))
        .transpose()?
        .unwrap_or(0);
    let size_b = job.get("size").map(|v| size("size", v)).transpose()?;
    let filesize = job
        .get("filesize")
        .map(|v| size("filesize", v))
        .transpose()?;
    if time_based && runtime.is_none() {
        return Err("time_based needs runtime".into());
    }
    Ok(JobCommon {
        numjobs,
        time_based,
        runtime,
        start,
        think,
        size_b,
        filesize,
    })
}

/// A job's group path from `cgroup` (with `cgroup_weight` 1..=1000,
/// default 100, the same in every job of that cgroup), added to `groups`.
fn job_group(job: &Job, groups: &mut BTreeMap<String, u64>) -> Result<Option<String>, String> {
    let Some(c) = job.get("cgroup") else {
        if job.get("cgroup_weight").is_some() {
            return Err("cgroup_weight needs cgroup".into());
        }
        return Ok(None);
    };
    let path = format!("/{}", c.trim_matches('/'));
    let w = job
        .get("cgroup_weight")
        .map(|v| int("cgroup_weight", v, 1, 1000))
        .transpose()?
        .unwrap_or(100);
    match groups.get(&path) {
        Some(&old) if old != w => {
            return Err(format!(
                "cgroup {path}: weights {old} and {w} in different jobs"
            ))
        }
        _ => groups.insert(path.clone(), w),
    };
    Ok(Some(path))
}

/// The `[[flow]]` table of one direction `(op, pattern, share)` of a job:
/// its share of `size`, `rate` as a periodic flow, and the job's common
/// options, waiting for the flows named in `after`.
fn direction_flow(
    job: &Job,
    c: &JobCommon,
    (op, pattern, share): (&str, &str, f64),
    after: &[String],
    group: Option<&str>,
) -> Result<Table, String> {
    let write = op == "write";
    let mut f = Table::new();
    let name = if share < 1.0 {
        format!("{}-{op}", job.name)
    } else {
        job.name.to_string()
    };
    f.insert("name".into(), Value::String(name));
    if c.numjobs > 1 {
        f.insert("count".into(), Value::Integer(c.numjobs as i64));
    }
    f.insert("op".into(), Value::String(op.into()));
    f.insert("pattern".into(), Value::String(pattern.into()));
    let bs = request_fields(job, write, &mut f)?;
    region_field(job, c, &mut f)?;
    if let (Some(b), false) = (c.size_b, c.time_based) {
        let bytes = ((b as f64 * share) as u64).max(bs) / bs * bs;
        f.insert("bytes".into(), Value::Integer(bytes as i64));
    }
    if let Some(rate) = rate_bytes(job, write, bs)? {
        // A rate limit as a periodic flow: a batch every 100 ms.
        let batch = (rate / 10).max(bs) / bs * bs;
        let mut p = Table::new();
        p.insert("every".into(), Value::String("100ms".into()));
        p.insert("bytes".into(), Value::Integer(batch as i64));
        f.insert("periodic".into(), Value::Table(p));
    }
    if c.think > 0 {
        f.insert("think".into(), Value::String(format!("{}us", c.think)));
    }
    if c.start > 0 {
        f.insert("start".into(), Value::String(format!("{}us", c.start)));
    }
    if let Some(r) = c.runtime {
        f.insert("duration".into(), Value::String(format!("{r}us")));
    }
    if !after.is_empty() {
        let names = after.iter().map(|n| Value::String(n.clone())).collect();
        f.insert("after".into(), Value::Array(names));
    }
    prio(job, &mut f)?;
    if let Some(g) = group {
        f.insert("group".into(), Value::String(g.to_string()));
    }
    Ok(f)
}

/// Inserts a direction's request fields into flow `f`: block, depth and
/// sync from the engine, buffered writes, no read-ahead for O_DIRECT or
/// deep readers. Returns the block size, bytes.
fn request_fields(job: &Job, write: bool, f: &mut Table) -> Result<u64, String> {
    let bs = block_size(job, write)?;
    f.insert("block".into(), Value::Integer(bs as i64));
    let (depth, sync, direct) = engine(job, write)?;
    f.insert("depth".into(), Value::Integer(depth as i64));
    f.insert("sync".into(), Value::Boolean(sync));
    if write && !direct {
        f.insert("buffered".into(), Value::Boolean(true));
    }
    if !write && (direct || depth > 1) {
        f.insert("readahead".into(), Value::String("0".into()));
    }
    Ok(bs)
}

/// Inserts flow `f`'s region: `offset` (bytes or a percentage) and
/// `filesize`, else `size`, as its length.
fn region_field(job: &Job, c: &JobCommon, f: &mut Table) -> Result<(), String> {
    let mut region = Table::new();
    if let Some(o) = job.get("offset") {
        let v = if o.ends_with('%') {
            Value::String(o.into())
        } else {
            Value::Integer(size("offset", o)? as i64)
        };
        region.insert("start".into(), v);
    }
    if let Some(len) = c.filesize.or(c.size_b) {
        region.insert("size".into(), Value::Integer(len as i64));
    }
    if !region.is_empty() {
        f.insert("region".into(), Value::Table(region));
    }
    Ok(())
}

/// Smallest and largest block (bytes): a sector, and 16 MiB.
const BS_RANGE: (u64, u64) = (512, 16 << 20);

/// `bs` / `blocksize`, or a `bsrange` of one size; default 4k (fio's).
/// A multiple of 512 bytes in [`BS_RANGE`].
fn block_size(job: &Job, write: bool) -> Result<u64, String> {
    let (key, bs) = if let Some(v) = job.get("bs").or(job.get("blocksize")) {
        match for_dir(v, write) {
            Some(b) => ("bs", size("bs", b)?),
            None => return Ok(4096),
        }
    } else if let Some(v) = job.get("bsrange") {
        let Some(r) = for_dir(v, write) else {
            return Ok(4096);
        };
        let (lo, hi) = r.split_once('-').unwrap_or((r, r));
        let (lo, hi) = (size("bsrange", lo)?, size("bsrange", hi)?);
        if lo != hi {
            return Err(format!(
                "bsrange={v}: mixed block sizes are not modelled (give one size)"
            ));
        }
        ("bsrange", lo)
    } else {
        return Ok(4096);
    };
    let (lo, hi) = BS_RANGE;
    if bs < lo || bs > hi || bs % 512 != 0 {
        return Err(format!(
            "{key}: block of {bs} bytes: expected a multiple of 512 from 512 to 16 MiB"
        ));
    }
    Ok(bs)
}

/// Bytes per second from `rate` or `rate_iops` for one direction, as fio:
/// one value caps each direction, an empty side (`rate=,500k`) or 0
/// leaves that direction uncapped.
fn rate_bytes(job: &Job, write: bool, bs: u64) -> Result<Option<u64>, String> {
    let rate = if let Some(r) = job.get("rate") {
        for_dir(r, write).map(|v| size("rate", v)).transpose()?
    } else if let Some(r) = job.get("rate_iops") {
        for_dir(r, write)
            .map(|v| int("rate_iops", v, 0, 10_000_000).map(|n| n * bs))
            .transpose()?
    } else {
        None
    };
    Ok(rate.filter(|&r| r > 0))
}

fn prio(job: &Job, f: &mut Table) -> Result<(), String> {
    if let Some(c) = job.get("prioclass") {
        let class = match int("prioclass", c, 1, 3)? {
            1 => "rt",
            2 => "be",
            _ => "idle",
        };
        f.insert("class".into(), Value::String(class.into()));
    }
    if let Some(l) = job.get("prio") {
        f.insert("level".into(), Value::Integer(int("prio", l, 0, 7)? as i64));
    }
    Ok(())
}

/// Whether `path` names a fio job file (by its `.fio` extension).
pub fn is_job_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "fio")
}

/// Reads a fio job file as a scenario; also returns the warnings.
pub fn scenario_from_file(path: &Path) -> Result<(Scenario, Vec<String>), ScenarioError> {
    let origin = path.display().to_string();
    let err = |why: String| ScenarioError {
        origin: origin.clone(),
        field: String::new(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let title = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let t = to_scenario_toml(&text, &title).map_err(err)?;
    let sc = Scenario::from_toml_str(&t.toml, &origin)?;
    Ok((sc, t.warnings))
}

/// Reads a scenario: a fio job file (`.fio`) or scenario TOML. Warnings
/// (fio options without effect, approximations) come back with it.
pub fn load(path: &Path) -> Result<(Scenario, Vec<String>), ScenarioError> {
    if is_job_file(path) {
        scenario_from_file(path)
    } else {
        Scenario::from_file(path).map(|s| (s, Vec::new()))
    }
}
