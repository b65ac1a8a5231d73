//! Scenario files (TOML): the public contract documented in
//! docs/scenarios.md and shared with the engine (`bfq run`) and the suite.
//!
//! [`Scenario`] is the file as written (serde, unknown fields refused);
//! [`Scenario::plan`] resolves it against the device into a [`Plan`]:
//! presets and overrides applied, regions in sectors, groups and flows
//! checked. Every error names the file, the field and what is wrong.

use crate::device::{preset, DeviceParams, PRESETS};
use crate::replay::{parse_csv, parse_msr, ReplayFormat, ReplayRow};
use crate::units::{Dur, Extent, Range, Size};
use bfq_core::{IoClass, IoPrio, Op, Settings, Time, SEC, SECTOR_BYTES};
use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The most points an output series may have (duration / series_interval).
pub const MAX_SERIES_POINTS: u64 = 100_000;

/// The most runs a repeating flow may record (`completions_s` and
/// `run_times_s` hold one entry per run): `runs`, or one more than the
/// run's duration over `repeat`.
pub const MAX_RUNS: u64 = 100_000;

/// The longest simulated duration: 7 days.
pub const MAX_SIM_DURATION: Time = 7 * 24 * 3600 * SEC;

/// A bad scenario: which file, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {field}{sep}{why}", sep = if field.is_empty() { "" } else { ": " })]
pub struct ScenarioError {
    /// The file (or the caller's name for the text).
    pub origin: String,
    /// The field, e.g. `flow[2] 'file1'.block` (may be empty for syntax
    /// errors, whose message carries line, column and key).
    pub field: String,
    /// What is wrong.
    pub why: String,
}

/// A scenario file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Title.
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// Simulated time limit (finite flows may end sooner). Default 30 s.
    #[serde(default = "default_duration")]
    pub duration: Dur,
    /// Seed of every random choice (overridable with `--seed`). Default 1.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The device: a preset and field overrides.
    #[serde(default)]
    pub device: DeviceDef,
    /// The scheduler: name and settings.
    #[serde(default)]
    pub scheduler: SchedulerDef,
    /// Groups (cgroups), by path.
    #[serde(default, rename = "group")]
    pub groups: Vec<GroupDef>,
    /// The flows.
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowDef>,
    /// Output options.
    #[serde(default)]
    pub output: OutputDef,
    /// Where the scenario came from (file path or caller-given name).
    #[serde(skip)]
    pub origin: String,
    /// Directory relative paths (replay files) are resolved against.
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// Replay files loaded at parse time, by flow index.
    #[serde(skip)]
    pub replays: Vec<Option<Arc<Vec<ReplayRow>>>>,
}

fn default_duration() -> Dur {
    Dur(30 * SEC)
}
fn default_seed() -> u64 {
    1
}

/// `[device]`: `preset = "name"` plus any field of that preset to override.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceDef {
    /// Preset name (default `maxtor-stm332061`).
    pub preset: String,
    /// Overridden fields, sorted by name.
    pub overrides: Vec<(String, toml::Value)>,
}

impl Default for DeviceDef {
    fn default() -> Self {
        DeviceDef {
            preset: "maxtor-stm332061".into(),
            overrides: Vec::new(),
        }
    }
}

impl<'de> Deserialize<'de> for DeviceDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = toml::Table::deserialize(d)?;
        let mut def = DeviceDef::default();
        for (k, v) in t {
            if k == "preset" {
                def.preset = v
                    .as_str()
                    .ok_or_else(|| de::Error::custom("preset must be a string"))?
                    .to_string();
            } else {
                def.overrides.push((k, v));
            }
        }
        Ok(def)
    }
}

/// `[scheduler]`: `name` plus the scheduler's settings by their documented
/// names (values may be strings, integers, floats or booleans). A nested
/// table, as TOML reads a dotted key (`max_bps.g1 = "10M"`) or a
/// `[scheduler.max_bps]` table, is flattened to `outer.inner` keys.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SchedulerDef {
    /// Scheduler name for `bfq_schedulers::build` (default `fifo`).
    pub name: Option<String>,
    /// Settings, in file order of keys (sorted).
    pub settings: Settings,
}

impl<'de> Deserialize<'de> for SchedulerDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = toml::Table::deserialize(d)?;
        let mut def = SchedulerDef::default();
        let mut flat = Vec::new();
        flatten_settings("", t, &mut flat).map_err(de::Error::custom)?;
        for (k, s) in flat {
            if k == "name" {
                def.name = Some(s);
                continue;
            }
            // Two spellings of one setting ("max_bps.g1" and a dotted
            // max_bps.g1, or max-budget and max_budget): TOML refuses a
            // key given twice, and so does this.
            let before = def.settings.pairs().count();
            def.settings.set(k.as_str(), s);
            if def.settings.pairs().count() == before {
                return Err(de::Error::custom(format!(
                    "scheduler setting '{k}' is given twice"
                )));
            }
        }
        Ok(def)
    }
}

/// Appends the settings of table `t` to `out` as (key, value text), a
/// nested table's keys prefixed with its own and a dot (`prefix` is the
/// tables' keys so far, with the dot); a value that is neither a table, a
/// string, a number nor a boolean is an error naming its key.
fn flatten_settings(
    prefix: &str,
    t: toml::Table,
    out: &mut Vec<(String, String)>,
) -> Result<(), String> {
    for (k, v) in t {
        let key = format!("{prefix}{k}");
        let s = match v {
            toml::Value::Table(inner) => {
                flatten_settings(&format!("{key}."), inner, out)?;
                continue;
            }
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            _ => {
                return Err(format!(
                    "scheduler setting '{key}' must be a string, number or boolean"
                ))
            }
        };
        out.push((key, s));
    }
    Ok(())
}

/// `[[group]]`: a group (cgroup) by path; parents are created as needed
/// with the default weight 100.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupDef {
    /// `/a` or `/a/b`.
    pub path: String,
    /// 1..=1000, default 100.
    #[serde(default = "default_group_weight")]
    pub weight: u32,
}

fn default_group_weight() -> u32 {
    bfq_core::DEFAULT_GROUP_WEIGHT
}

/// `[output]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OutputDef {
    /// Interval of the per-flow throughput time series (default 1 s).
    #[serde(default = "default_interval")]
    pub series_interval: Dur,
}

impl Default for OutputDef {
    fn default() -> Self {
        OutputDef {
            series_interval: default_interval(),
        }
    }
}

fn default_interval() -> Dur {
    Dur(SEC)
}

/// Direction.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum OpDef {
    /// `read` (default).
    #[default]
    Read,
    /// `write`.
    Write,
}

impl From<OpDef> for Op {
    fn from(o: OpDef) -> Op {
        match o {
            OpDef::Read => Op::Read,
            OpDef::Write => Op::Write,
        }
    }
}

/// Access pattern of a flow.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Sequential through the region (wrapping around).
    #[default]
    Seq,
    /// Uniformly random block-aligned positions in the region.
    Rand,
    /// Replay of a file (`replay = "path"`).
    Replay,
    /// The 2010 paper's web-server process (Section V-E), see [`WebDef`].
    Web,
}

/// I/O class.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ClassDef {
    /// `rt`: real time, served before the other classes.
    Rt,
    /// `be`: best effort (the default).
    Be,
    /// `idle`: served only when no other class has requests.
    Idle,
}

/// Where a flow's file lies.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegionDef {
    /// Start: `"0%"`, `"10G"`, `"-128M"` (from the end). Default 0.
    #[serde(default = "zero_extent")]
    pub start: Extent,
    /// Length: `"128M"` or `"10%"`. Default: to the end of the device.
    pub size: Option<Extent>,
}

fn zero_extent() -> Extent {
    Extent::Bytes(0)
}

/// ON/OFF behaviour: read/write `on` bytes, then sleep `off`, repeat.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OnOffDef {
    /// Bytes per ON phase, uniform in the range.
    pub on: Range<Size>,
    /// Length of an OFF phase, uniform in the range.
    pub off: Range<Dur>,
}

/// Periodic soft real-time flow: every `every`, a batch of `bytes` is
/// released; a batch completing later than `deadline` after its release
/// is a deadline miss (a dropped frame).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PeriodicDef {
    /// Period.
    pub every: Dur,
    /// Bytes per batch.
    pub bytes: Size,
    /// Relative deadline (default: the period).
    pub deadline: Option<Dur>,
    /// Batches released within this long of the start of the flow's run
    /// are read but left out of its batch latency and deadline misses
    /// (default: none): a new flow starts with the budget a scheduler gives
    /// any new flow, not yet the one its periodic pattern earns, so its
    /// first batches measure the start, not the steady state that bounds
    /// such as the 2010 paper's Eq. (3) describe. At most 7 days.
    #[serde(default)]
    pub warm_up: Option<Dur>,
}

impl PeriodicDef {
    /// The first release time measured in a run that started at `start`
    /// (`warm_up` after it).
    pub fn measured_from(&self, start: Time) -> Time {
        start + self.warm_up.map_or(0, |d| d.0)
    }
}

/// The 2010 paper's web-server process (Section V-E): reads files one
/// after another; with probability `small_prob` a small file of `small`
/// bytes at a random place in the first `split` of the region, otherwise a
/// large file of `large` bytes in the rest; every `log_every` files it
/// appends `log` bytes to a common log (a buffered write).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WebDef {
    /// Size of a small file (default 16k).
    #[serde(default = "web_small")]
    pub small: Size,
    /// Probability that the next file is small, 0..=1 (default 0.9).
    #[serde(default = "web_small_prob")]
    pub small_prob: f64,
    /// Size of a large file, uniform in the range (default 1M..30M).
    #[serde(default = "web_large")]
    pub large: Range<Size>,
    /// A log append every this many files (default 10).
    #[serde(default = "web_log_every")]
    pub log_every: u32,
    /// Size of a log append, uniform in the range (default 1k..16k).
    #[serde(default = "web_log")]
    pub log: Range<Size>,
    /// Fraction of the region holding the small files, 0..=1 (default 0.5); the large ones lie in the rest.
    #[serde(default = "web_split")]
    pub split: f64,
}

fn web_small() -> Size {
    Size(16 << 10)
}
fn web_small_prob() -> f64 {
    0.9
}
fn web_large() -> Range<Size> {
    Range {
        lo: Size(1 << 20),
        hi: Size(30 << 20),
    }
}
fn web_log_every() -> u32 {
    10
}
fn web_log() -> Range<Size> {
    Range {
        lo: Size(1 << 10),
        hi: Size(16 << 10),
    }
}
fn web_split() -> f64 {
    0.5
}

impl Default for WebDef {
    fn default() -> Self {
        WebDef {
            small: web_small(),
            small_prob: web_small_prob(),
            large: web_large(),
            log_every: web_log_every(),
            log: web_log(),
            split: web_split(),
        }
    }
}

/// `[[flow]]`: one workload (or `count` identical ones).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowDef {
    /// Name in outputs (with `count > 1`: `name.1`, `name.2`, ...).
    pub name: String,
    /// Identical copies of this flow (default 1), e.g. the 100 processes
    /// of the 2010 DBMS and web-server workloads.
    #[serde(default = "one")]
    pub count: u32,
    /// `read` (default) or `write`.
    #[serde(default)]
    pub op: OpDef,
    /// `seq` (default), `rand`, `replay` or `web`.
    #[serde(default)]
    pub pattern: Pattern,
    /// Replay file, relative to the scenario file (pattern = replay).
    pub replay: Option<String>,
    /// `csv` (default) or `msr`.
    pub replay_format: Option<ReplayFormat>,
    /// Request size (default 128k for seq/web, 4k for rand).
    pub block: Option<Size>,
    /// The program waits for its requests (flagged sync, as Linux flags
    /// reads and O_DIRECT writes): the next is issued a `gap` after a
    /// completion (default true for reads and false for writes).
    pub sync: Option<bool>,
    /// Outstanding requests (default 1); with `sync = true` an io_uring or
    /// AIO program of O_DIRECT requests.
    pub depth: Option<u32>,
    /// Maximum OS read-ahead window of a sync reader (Linux
    /// `read_ahead_kb`, default 128k for seq and web sync reads; "0"
    /// disables: one `block` request at a time). A seq reader of depth 1
    /// (greedy or periodic) follows bfq-sim's `readahead`; web and on_off
    /// readers keep `1 + readahead / block` requests in flight.
    pub readahead: Option<Size>,
    /// Time from a completion the program waits for to its next request:
    /// waking up, returning to user space, copying the data and calling
    /// again (sync flows; default `20us` plus 0.5 ns per byte of `block`,
    /// i.e. a 2 GB/s copy; async flows: 0). Drawn per request uniformly
    /// in [gap/2, 3 gap/2] from the seed. At most 1 s.
    pub gap: Option<Dur>,
    /// When the asynchronous read-ahead window is issued: `"ondemand"`
    /// (default; Linux: at the marker, one window ahead) or `"single"`
    /// (once the marked page was read: one request in flight, the readers
    /// the 2010 paper measured).
    pub readahead_style: Option<crate::readahead::Style>,
    /// File-system block map of a read-ahead reader's file, as ext2/ext3
    /// map data through indirect blocks (1024 pointers per 4 KiB block:
    /// `"4M"`): before the first window that reaches each further
    /// `indirect_every` of the file, the reader reads that range's 4 KiB
    /// indirect block synchronously, and issues the window a `gap` after it
    /// arrives (default `"0"`: none, as with ext4 extents; else 64k..=1G).
    pub indirect_every: Option<Size>,
    /// The flow's start (and each repeated run's) is delayed by a
    /// uniform draw in [0, start_jitter] from the seed, as program starts
    /// vary on real machines (default `5ms`; at most 10 s).
    pub start_jitter: Option<Dur>,
    /// Writes go through the page cache and the system-wide flusher
    /// (default false: direct I/O).
    #[serde(default)]
    pub buffered: bool,
    /// Where the flow's file lies (default: the whole device).
    pub region: Option<RegionDef>,
    /// Stop after this many bytes per run (default: no limit).
    pub bytes: Option<Size>,
    /// Weight 1..=1000 (default from class and level, as the kernel).
    pub weight: Option<u32>,
    /// `rt`, `be` (default) or `idle`.
    pub class: Option<ClassDef>,
    /// Priority level 0..=7 (default 4).
    pub level: Option<u8>,
    /// Group path (default the root).
    pub group: Option<String>,
    /// When the flow starts (default 0); with `after`, not before the
    /// flows it waits for have ended.
    #[serde(default)]
    pub start: Dur,
    /// When the flow stops, since time 0 (default: the end of the run):
    /// see [`FlowPlan::stop`].
    pub stop: Option<Dur>,
    /// How long the flow lasts from its first run's start (default: no
    /// limit): see [`FlowPlan::duration`].
    pub duration: Option<Dur>,
    /// Names of earlier `[[flow]]` entries whose every copy must have
    /// ended before this flow starts (default none): see [`FlowPlan::after`].
    #[serde(default)]
    pub after: Vec<String>,
    /// Pause after each completed request before issuing the next
    /// (default 0).
    #[serde(default)]
    pub think: Dur,
    /// Restart the whole flow this long after each run ends.
    pub repeat: Option<Dur>,
    /// Number of runs when repeating (default: until the end).
    pub runs: Option<u32>,
    /// ON/OFF behaviour.
    pub on_off: Option<OnOffDef>,
    /// Periodic soft real-time behaviour.
    pub periodic: Option<PeriodicDef>,
    /// Web-server parameters (pattern = web).
    pub web: Option<WebDef>,
}

fn one() -> u32 {
    1
}

impl FlowDef {
    /// A flow named `name` with every other field at its default (what a
    /// `[[flow]]` entry of only a name gives): a greedy sequential reader.
    pub fn named(name: &str) -> FlowDef {
        FlowDef {
            name: name.to_string(),
            count: 1,
            op: OpDef::Read,
            pattern: Pattern::Seq,
            replay: None,
            replay_format: None,
            block: None,
            sync: None,
            depth: None,
            readahead: None,
            gap: None,
            readahead_style: None,
            indirect_every: None,
            start_jitter: None,
            buffered: false,
            region: None,
            bytes: None,
            weight: None,
            class: None,
            level: None,
            group: None,
            start: Dur(0),
            stop: None,
            duration: None,
            after: Vec::new(),
            think: Dur(0),
            repeat: None,
            runs: None,
            on_off: None,
            periodic: None,
            web: None,
        }
    }
}

/// A time in seconds for messages (`20s`, `0.5s`).
fn secs(t: Time) -> String {
    format!("{}s", t as f64 / SEC as f64)
}

/// Finds group `path` in `groups`, or appends it after its parents (each
/// created, with the default weight, when missing); sets its weight when
/// given. Returns its index.
fn ensure_group(groups: &mut Vec<GroupPlan>, path: &str, weight: Option<u32>) -> usize {
    if let Some(i) = groups.iter().position(|g| g.path == path) {
        if let Some(w) = weight {
            groups[i].weight = w;
        }
        return i;
    }
    let parent = match path.rfind('/') {
        Some(0) | None => None,
        Some(k) => Some(ensure_group(groups, &path[..k], None)),
    };
    groups.push(GroupPlan {
        path: path.to_string(),
        parent,
        weight: weight.unwrap_or(bfq_core::DEFAULT_GROUP_WEIGHT),
    });
    groups.len() - 1
}

/// A flow's request shape, resolved and checked while planning it.
struct Shape {
    op: Op,
    /// Sectors.
    block: u32,
    sync: bool,
    depth: u32,
    /// Largest read-ahead window, sectors.
    readahead: u64,
    /// Linux read-ahead drives the flow.
    ra: bool,
    /// Bytes of file data per indirect block (0: none).
    indirect_every: u64,
    gap: Time,
    start_jitter: Time,
}

/// A group resolved: parent index into [`Plan::groups`] (None = root).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupPlan {
    /// The group's path as written in the scenario (`a/b`).
    pub path: String,
    /// Index of the parent group in [`Plan::groups`] (None: the root).
    pub parent: Option<usize>,
    /// Weight 1..=1000 in the parent's tree.
    pub weight: u32,
}

/// A flow resolved against the device: everything in sectors and ns.
#[derive(Clone, Debug)]
pub struct FlowPlan {
    /// Name in outputs (`name.N` for copies).
    pub name: String,
    /// Read or write.
    pub op: Op,
    /// Access pattern.
    pub pattern: Pattern,
    /// Request size, sectors.
    pub block: u32,
    /// The program waits for its requests (flagged synchronous).
    pub sync: bool,
    /// Outstanding requests.
    pub depth: u32,
    /// Largest read-ahead window, sectors (0: none).
    pub readahead: u64,
    /// Linux read-ahead (sync window, async window at a marker, growth)
    /// drives this flow's requests.
    pub ra: bool,
    /// When the asynchronous read-ahead window is issued.
    pub ra_style: crate::readahead::Style,
    /// File data mapped per indirect block, sectors (0: no block-map reads).
    pub indirect_every: u64,
    /// Time from a completion to the next request, ns (drawn in [gap/2, 3 gap/2]).
    pub gap: Time,
    /// Largest random delay of each start, ns.
    pub start_jitter: Time,
    /// Writes go through the page cache and the flusher.
    pub buffered: bool,
    /// First sector of the flow's file.
    pub region_start: u64,
    /// Length of the flow's file, sectors.
    pub region_len: u64,
    /// Bytes per run (None: no limit).
    pub bytes: Option<u64>,
    /// Explicit weight 1..=1000 (None: from the priority level).
    pub weight: Option<u32>,
    /// I/O priority class and level.
    pub prio: IoPrio,
    /// Index of the flow's group in [`Plan::groups`] (None: the root).
    pub group: Option<usize>,
    /// Start, ns (with `after`: the earliest start).
    pub start: Time,
    /// Per-flow end: from this time (ns since 0) the flow issues nothing
    /// more, its requests in flight complete, and no later run starts.
    pub stop: Option<Time>,
    /// The flow stops this long (ns) after its first run started, as with
    /// `stop` (fio's `runtime`).
    pub duration: Option<Time>,
    /// Indices in [`Plan::flows`] of the flows that must all have ended
    /// before this one starts (fio's `stonewall` and `wait_for`); every
    /// one comes before it.
    pub after: Vec<usize>,
    /// Pause after each completed request, ns.
    pub think: Time,
    /// Restart this long after each run ends, ns.
    pub repeat: Option<Time>,
    /// Number of runs when repeating (None: until the end).
    pub runs: Option<u32>,
    /// ON/OFF behaviour.
    pub on_off: Option<OnOffDef>,
    /// Periodic soft real-time behaviour.
    pub periodic: Option<PeriodicDef>,
    /// Web-server behaviour (pattern = web).
    pub web: Option<WebDef>,
    /// Rows of the replay file (pattern = replay).
    pub replay: Option<Arc<Vec<ReplayRow>>>,
    /// Replay at the recorded times, whatever the completions (MSR traces), instead of as fast as completions allow.
    pub replay_open_loop: bool,
    /// Index of the `[[flow]]` entry and the copy number.
    pub def_index: usize,
    /// Copy number within its `[[flow]]` entry (0-based).
    pub copy: u32,
}

/// A scenario resolved against its device.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The device model.
    pub device: DeviceParams,
    /// Groups, parents before children.
    pub groups: Vec<GroupPlan>,
    /// Flows, copies expanded.
    pub flows: Vec<FlowPlan>,
    /// Length of the run, ns.
    pub duration: Time,
    /// Interval of the throughput series, ns.
    pub series_interval: Time,
}

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            origin: origin.clone(),
            field: String::new(),
            why: format!("cannot read: {e}"),
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Scenario::from_toml_str_in(&text, &origin, &base)
    }

    /// Parses and checks scenario text; `origin` names it in errors;
    /// replay paths are relative to the current directory.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        Scenario::from_toml_str_in(text, origin, Path::new(""))
    }

    /// As [`Scenario::from_toml_str`], with replay paths relative to `base`.
    pub fn from_toml_str_in(
        text: &str,
        origin: &str,
        base: &Path,
    ) -> Result<Scenario, ScenarioError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| ScenarioError {
            origin: origin.to_string(),
            field: String::new(),
            why: e.to_string().trim_end().to_string(),
        })?;
        s.origin = origin.to_string();
        s.base_dir = base.to_path_buf();
        s.load_replays()?;
        s.plan()?;
        Ok(s)
    }

    fn err(&self, field: impl Into<String>, why: impl Into<String>) -> ScenarioError {
        ScenarioError {
            origin: self.origin.clone(),
            field: field.into(),
            why: why.into(),
        }
    }

    fn flow_field(&self, i: usize, field: &str) -> String {
        format!("flow[{i}] '{}'.{field}", self.flows[i].name)
    }

    fn load_replays(&mut self) -> Result<(), ScenarioError> {
        let mut out = Vec::with_capacity(self.flows.len());
        for (i, f) in self.flows.iter().enumerate() {
            if f.pattern != Pattern::Replay {
                if f.replay.is_some() {
                    return Err(self.err(
                        self.flow_field(i, "replay"),
                        "only with pattern = \"replay\"",
                    ));
                }
                out.push(None);
                continue;
            }
            let Some(rel) = &f.replay else {
                return Err(self.err(
                    self.flow_field(i, "replay"),
                    "pattern = \"replay\" needs replay = \"file.csv\"",
                ));
            };
            let path = self.base_dir.join(rel);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                self.err(
                    self.flow_field(i, "replay"),
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            let rows = match f.replay_format.unwrap_or(ReplayFormat::Csv) {
                ReplayFormat::Csv => parse_csv(&text),
                ReplayFormat::Msr => parse_msr(&text),
            }
            .map_err(|e| {
                self.err(
                    self.flow_field(i, "replay"),
                    format!("{}: {e}", path.display()),
                )
            })?;
            out.push(Some(Arc::new(rows)));
        }
        self.replays = out;
        Ok(())
    }

    /// The device parameters: preset with overrides applied and checked.
    pub fn device_params(&self) -> Result<DeviceParams, ScenarioError> {
        let mut p = preset(&self.device.preset).ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
            self.err(
                "device.preset",
                format!(
                    "unknown preset '{}' (known: {})",
                    self.device.preset,
                    names.join(", ")
                ),
            )
        })?;
        for (k, v) in &self.device.overrides {
            p.set(k, v)
                .map_err(|why| self.err(format!("device.{k}"), why))?;
        }
        p.validate()
            .map_err(|(f, why)| self.err(format!("device.{f}"), why))?;
        Ok(p)
    }

    /// Resolves the scenario against its `[device]` (see [`Plan`]).
    pub fn plan(&self) -> Result<Plan, ScenarioError> {
        let device = self.device_params()?;
        let cap = device.capacity();
        self.plan_on(device, cap)
    }

    /// Resolves the scenario against a device of `capacity` bytes (e.g. a
    /// real device for the engine): regions given in percent or from the
    /// end follow that capacity. `Plan::device` keeps the scenario's model.
    pub fn plan_with_capacity(&self, capacity: u64) -> Result<Plan, ScenarioError> {
        let device = self.device_params()?;
        self.plan_on(device, capacity)
    }

    fn plan_on(&self, device: DeviceParams, capacity: u64) -> Result<Plan, ScenarioError> {
        let cap = capacity / SECTOR_BYTES;
        self.check_run_length()?;
        let groups = self.plan_groups()?;
        if self.flows.is_empty() {
            return Err(self.err("flow", "a scenario needs at least one [[flow]]"));
        }
        let mut flows = Vec::new();
        for i in 0..self.flows.len() {
            let flow = self.plan_flow(i, cap, &groups, &flows)?;
            let count = self.flows[i].count;
            for copy in 0..count {
                let mut c = flow.clone();
                if count > 1 {
                    c.name = format!("{}.{}", flow.name, copy + 1);
                }
                c.copy = copy;
                flows.push(c);
            }
        }
        Ok(Plan {
            device,
            groups,
            flows,
            duration: self.duration.0,
            series_interval: self.output.series_interval.0,
        })
    }

    /// An error on field `field` of flow `i`.
    fn flow_err(&self, i: usize, field: &str, why: impl Into<String>) -> ScenarioError {
        self.err(self.flow_field(i, field), why)
    }

    /// Checks the run's `duration` (positive, at most
    /// [`MAX_SIM_DURATION`]) and `output.series_interval` (at least 1 ms,
    /// at most [`MAX_SERIES_POINTS`] points over the run).
    fn check_run_length(&self) -> Result<(), ScenarioError> {
        if self.duration.0 == 0 {
            return Err(self.err("duration", "must be positive"));
        }
        if self.output.series_interval.0 == 0 {
            return Err(self.err("output.series_interval", "must be positive"));
        }
        if self.duration.0 > MAX_SIM_DURATION {
            return Err(self.err("duration", "must be at most 7 days of simulated time"));
        }
        self.check_output_bounds(self.duration.0)
    }

    /// Checks that a run of `duration` ns keeps every per-flow output
    /// bounded: `output.series_interval` at least 1 ms and at most
    /// [`MAX_SERIES_POINTS`] points, and each repeating flow at most
    /// [`MAX_RUNS`] runs (one more than `duration / repeat`, or `runs` if
    /// fewer).
    /// Planning checks the scenario's own duration; a real run given
    /// another length checks that one.
    pub fn check_output_bounds(&self, duration: Time) -> Result<(), ScenarioError> {
        let interval = self.output.series_interval.0;
        if interval < bfq_core::MS {
            return Err(self.err(
                "output.series_interval",
                format!("{} is below the least, 1ms", secs(interval)),
            ));
        }
        let points = duration / interval;
        if points > MAX_SERIES_POINTS {
            // The shortest interval in whole ms that gives few enough.
            let least = duration.div_ceil(MAX_SERIES_POINTS).div_ceil(bfq_core::MS) * bfq_core::MS;
            return Err(self.err(
                "output.series_interval",
                format!(
                    "{} gives {points} points over the duration ({}), at most \
                     {MAX_SERIES_POINTS}: set [output] series_interval to at least {}",
                    secs(interval),
                    secs(duration),
                    secs(least)
                ),
            ));
        }
        for (i, f) in self.flows.iter().enumerate() {
            let Some(repeat) = f.repeat else { continue };
            let by_time = (duration / repeat.0.max(1)).saturating_add(1);
            let runs = f.runs.map_or(by_time, |n| by_time.min(u64::from(n)));
            if runs > MAX_RUNS {
                return Err(self.flow_err(
                    i,
                    "repeat",
                    format!(
                        "may give {runs} runs over the duration ({}), at most {MAX_RUNS}: \
                         set runs, or a longer repeat",
                        secs(duration)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks the `[[group]]` entries (paths such as `/a/b`, each once,
    /// weights 1..=1000) and resolves them, undeclared parents created
    /// with the default weight, parents before children.
    fn plan_groups(&self) -> Result<Vec<GroupPlan>, ScenarioError> {
        let mut groups: Vec<GroupPlan> = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            let p = g.path.trim_end_matches('/');
            if !p.starts_with('/') || p.len() < 2 || p.contains("//") {
                return Err(self.err(
                    format!("group[{i}].path"),
                    format!("'{}' is not a path such as \"/a\" or \"/a/b\"", g.path),
                ));
            }
            if !(bfq_core::MIN_WEIGHT..=bfq_core::MAX_WEIGHT).contains(&g.weight) {
                return Err(self.err(
                    format!("group[{i}].weight"),
                    format!("{} is not in 1..=1000", g.weight),
                ));
            }
            if self.groups[..i]
                .iter()
                .any(|o| o.path.trim_end_matches('/') == p)
            {
                return Err(self.err(format!("group[{i}].path"), format!("'{p}' defined twice")));
            }
            ensure_group(&mut groups, p, Some(g.weight));
        }
        Ok(groups)
    }

    /// Checks `[[flow]]` entry `i` and resolves it against a device of
    /// `cap` sectors, `groups` and the flows planned before it; the result
    /// is its first copy (named as written, copy 0).
    fn plan_flow(
        &self,
        i: usize,
        cap: u64,
        groups: &[GroupPlan],
        planned: &[FlowPlan],
    ) -> Result<FlowPlan, ScenarioError> {
        let f = &self.flows[i];
        self.check_flow_name(i)?;
        let s = self.flow_shape(i, f)?;
        let (region_start, region_len) = self.flow_region(i, f, cap, s.block)?;
        let prio = self.flow_prio(i, f)?;
        let group = self.flow_group(i, f, groups)?;
        self.check_flow_limits(i, f, s.block)?;
        self.check_periodic(i, f)?;
        let web = self.flow_web(i, f)?;
        if f.pattern == Pattern::Replay && (f.on_off.is_some() || f.periodic.is_some()) {
            return Err(self.flow_err(
                i,
                "pattern",
                "replay cannot be combined with on_off or periodic",
            ));
        }
        self.check_end(i, f)?;
        let after = self.after_flows(i, planned)?;
        Ok(FlowPlan {
            name: f.name.clone(),
            op: s.op,
            pattern: f.pattern,
            block: s.block,
            sync: s.sync,
            depth: s.depth,
            readahead: s.readahead,
            ra: s.ra,
            ra_style: f.readahead_style.unwrap_or_default(),
            indirect_every: s.indirect_every / SECTOR_BYTES,
            gap: s.gap,
            start_jitter: s.start_jitter,
            buffered: f.buffered,
            region_start,
            region_len,
            bytes: f.bytes.map(|b| b.0),
            weight: f.weight,
            prio,
            group,
            start: f.start.0,
            stop: f.stop.map(|d| d.0),
            duration: f.duration.map(|d| d.0),
            after,
            think: f.think.0,
            repeat: f.repeat.map(|d| d.0),
            runs: f.runs,
            on_off: f.on_off,
            periodic: f.periodic,
            web,
            replay: self.replays.get(i).cloned().flatten(),
            replay_open_loop: f.replay_format == Some(ReplayFormat::Msr),
            def_index: i,
            copy: 0,
        })
    }

    /// Checks flow `i`'s `name` (not empty, no commas, quotes or newlines,
    /// not `flusher`, unique) and `count` (1..=100000).
    fn check_flow_name(&self, i: usize) -> Result<(), ScenarioError> {
        let f = &self.flows[i];
        if f.name.trim().is_empty() {
            return Err(self.flow_err(i, "name", "must not be empty"));
        }
        if f.name.contains([',', '"', '\n', '\r']) || f.name == "flusher" {
            return Err(self.flow_err(
                i,
                "name",
                "must not contain commas, quotes or newlines, nor be \"flusher\"",
            ));
        }
        if self.flows[..i].iter().any(|o| o.name == f.name) {
            return Err(self.flow_err(i, "name", format!("'{}' is used by another flow", f.name)));
        }
        if f.count == 0 || f.count > 100_000 {
            return Err(self.flow_err(i, "count", format!("{} is not in 1..=100000", f.count)));
        }
        Ok(())
    }

    /// Resolves and checks flow `i`'s request shape: operation, block,
    /// sync, depth, buffering, read-ahead, gap, block-map reads and start
    /// jitter.
    fn flow_shape(&self, i: usize, f: &FlowDef) -> Result<Shape, ScenarioError> {
        let op: Op = f.op.into();
        let block = self.flow_block(i, f)?;
        let sync = f.sync.unwrap_or(op == Op::Read);
        let depth = f.depth.unwrap_or(1);
        if depth == 0 || depth > 4096 {
            return Err(self.flow_err(i, "depth", format!("{depth} is not in 1..=4096")));
        }
        self.check_buffered(i, f, op)?;
        let (readahead, ra) = self.flow_readahead(i, f, op, sync, depth)?;
        let gap = self.flow_gap(i, f, sync, block)?;
        let indirect_every = self.flow_indirect_every(i, f, ra)?;
        let start_jitter = f.start_jitter.map(|g| g.0).unwrap_or(5 * bfq_core::MS);
        if start_jitter > 10 * SEC {
            return Err(self.flow_err(i, "start_jitter", "must be at most 10s"));
        }
        Ok(Shape {
            op,
            block,
            sync,
            depth,
            readahead,
            ra,
            indirect_every,
            gap,
            start_jitter,
        })
    }

    /// Flow `i`'s request size in sectors: `block`, default 4 KiB for
    /// random patterns and 128 KiB otherwise, a multiple of 512 up to 64M.
    fn flow_block(&self, i: usize, f: &FlowDef) -> Result<u32, ScenarioError> {
        let def_block = if f.pattern == Pattern::Rand {
            4 << 10
        } else {
            128 << 10
        };
        let block = f.block.map(|b| b.0).unwrap_or(def_block);
        if block == 0 || !block.is_multiple_of(SECTOR_BYTES) {
            return Err(self.flow_err(
                i,
                "block",
                format!("{block} bytes is not a positive multiple of 512"),
            ));
        }
        if block > 64 << 20 {
            return Err(self.flow_err(i, "block", "must be at most 64M"));
        }
        Ok((block / SECTOR_BYTES) as u32)
    }

    /// Checks that only writes are buffered, with pattern seq or rand and
    /// no on_off, periodic or think.
    fn check_buffered(&self, i: usize, f: &FlowDef, op: Op) -> Result<(), ScenarioError> {
        if f.buffered && op != Op::Write {
            return Err(self.flow_err(i, "buffered", "only writes can be buffered"));
        }
        if f.buffered
            && (f.on_off.is_some()
                || f.periodic.is_some()
                || f.think.0 > 0
                || !matches!(f.pattern, Pattern::Seq | Pattern::Rand))
        {
            return Err(self.flow_err(
                i,
                "buffered",
                "buffered writers support pattern seq or rand with bytes/start/repeat only \
                 (no on_off, periodic, think or replay)",
            ));
        }
        Ok(())
    }

    /// Flow `i`'s largest read-ahead window in sectors (default 128 KiB
    /// for sync seq and web readers, else 0; at most 64M) and whether
    /// Linux read-ahead drives it (plain greedy sequential sync readers of
    /// depth 1).
    fn flow_readahead(
        &self,
        i: usize,
        f: &FlowDef,
        op: Op,
        sync: bool,
        depth: u32,
    ) -> Result<(u64, bool), ScenarioError> {
        let def_ra = if matches!(f.pattern, Pattern::Seq | Pattern::Web) && sync && op == Op::Read {
            128 << 10
        } else {
            0
        };
        let readahead = f.readahead.map(|s| s.0).unwrap_or(def_ra) / SECTOR_BYTES;
        if readahead > (64 << 20) / SECTOR_BYTES {
            return Err(self.flow_err(i, "readahead", "must be at most 64M"));
        }
        if readahead > 0 && depth > 1 && f.readahead.is_some() {
            return Err(self.flow_err(
                i,
                "readahead",
                "read-ahead is for buffered readers of depth 1 (an io_uring/AIO reader \
                 with depth > 1 reads O_DIRECT: set readahead = \"0\")",
            ));
        }
        // Linux read-ahead drives plain greedy sequential sync readers
        let ra = readahead > 0
            && sync
            && op == Op::Read
            && depth == 1
            && f.pattern == Pattern::Seq
            && f.on_off.is_none();
        Ok((readahead, ra))
    }

    /// Flow `i`'s time from a completion to its next request, ns: `gap`,
    /// default 20 us + 0.5 ns per byte of block for sync flows other than
    /// replays, else 0; at most 1 s.
    fn flow_gap(
        &self,
        i: usize,
        f: &FlowDef,
        sync: bool,
        block: u32,
    ) -> Result<Time, ScenarioError> {
        let def_gap = if sync && f.pattern != Pattern::Replay {
            20 * bfq_core::US + u64::from(block) * SECTOR_BYTES / 2
        } else {
            0
        };
        let gap = f.gap.map(|g| g.0).unwrap_or(def_gap);
        if gap > SEC {
            return Err(self.flow_err(i, "gap", "must be at most 1s"));
        }
        Ok(gap)
    }

    /// Flow `i`'s file data per indirect block, bytes (0: none); only for
    /// readers under read-ahead (`ra`), a multiple of 4k in 64k..=1G.
    fn flow_indirect_every(&self, i: usize, f: &FlowDef, ra: bool) -> Result<u64, ScenarioError> {
        let indirect_every = f.indirect_every.map(|s| s.0).unwrap_or(0);
        if indirect_every > 0 {
            if !ra {
                return Err(self.flow_err(
                    i,
                    "indirect_every",
                    "is for sequential sync readers under read-ahead (pattern = \"seq\", depth 1, readahead > 0)",
                ));
            }
            if !(64 << 10..=1 << 30).contains(&indirect_every)
                || !indirect_every.is_multiple_of(4096)
            {
                return Err(self.flow_err(
                    i,
                    "indirect_every",
                    "must be 0 or a multiple of 4k in 64k..=1G",
                ));
            }
        }
        Ok(indirect_every)
    }

    /// Flow `i`'s file as (first sector, sectors) on a device of `cap`
    /// sectors (default: the whole device); it must hold one block.
    fn flow_region(
        &self,
        i: usize,
        f: &FlowDef,
        cap: u64,
        block: u32,
    ) -> Result<(u64, u64), ScenarioError> {
        if let Some(r) = &f.region {
            self.check_region_sectors(i, r)?;
        }
        match region_misfit(f.region.as_ref(), cap, block) {
            Some(why) => Err(self.flow_err(i, "region", why + &self.device_needed(cap))),
            None => Ok(resolve_region(f.region.as_ref(), cap)),
        }
    }

    /// `: the scenario needs a device of at least N bytes`, N the
    /// smallest device above `cap` sectors on which every flow's region
    /// holds one of its blocks (not only the region found too small:
    /// the next one may need more), or nothing where no device would.
    fn device_needed(&self, cap: u64) -> String {
        let blocks: Vec<u64> = (0..self.flows.len())
            .map(|j| self.flow_block(j, &self.flows[j]).map_or(1, u64::from))
            .collect();
        let fits = |c: u64| {
            self.flows
                .iter()
                .zip(&blocks)
                .all(|(f, &b)| region_fits(f.region.as_ref(), c, b))
        };
        smallest_fit(cap, fits).map_or(String::new(), |need| {
            format!(
                ": the scenario needs a device of at least {} bytes",
                u128::from(need) * u128::from(SECTOR_BYTES)
            )
        })
    }

    /// Checks that flow `i`'s region, where given in bytes, starts and
    /// ends on a 512-byte sector: requests are laid out from the region's
    /// start in whole sectors, and O_DIRECT refuses others (a percentage is
    /// rounded down to a sector); and that its size is a length, not a
    /// position counted back from the end (`"-1G"`, which only the start
    /// may be).
    fn check_region_sectors(&self, i: usize, r: &RegionDef) -> Result<(), ScenarioError> {
        if let Some(Extent::FromEnd(b)) = r.size {
            return Err(self.flow_err(
                i,
                "region.size",
                format!(
                    "-{b} bytes counts back from the device's end, which only region.start \
                     may: give a length (\"128M\", \"10%\"), or none for the rest of the device"
                ),
            ));
        }
        let unaligned = |e: Option<Extent>| match e {
            Some(Extent::Bytes(b) | Extent::FromEnd(b)) => !b.is_multiple_of(SECTOR_BYTES),
            _ => false,
        };
        for (field, e) in [("region.start", Some(r.start)), ("region.size", r.size)] {
            if unaligned(e) {
                return Err(self.flow_err(
                    i,
                    field,
                    "must be a multiple of 512 bytes (a sector: O_DIRECT needs whole sectors)",
                ));
            }
        }
        Ok(())
    }

    /// Checks flow `i`'s `weight` (1..=1000) and resolves its I/O priority:
    /// `class` (default best effort) and `level` (0..=7, default 4).
    fn flow_prio(&self, i: usize, f: &FlowDef) -> Result<IoPrio, ScenarioError> {
        if let Some(w) = f.weight {
            if !(bfq_core::MIN_WEIGHT..=bfq_core::MAX_WEIGHT).contains(&w) {
                return Err(self.flow_err(i, "weight", format!("{w} is not in 1..=1000")));
            }
        }
        let level = f.level.unwrap_or(4);
        if level > 7 {
            return Err(self.flow_err(i, "level", format!("{level} is not in 0..=7")));
        }
        let class = match f.class {
            None | Some(ClassDef::Be) => IoClass::Be,
            Some(ClassDef::Rt) => IoClass::Rt,
            Some(ClassDef::Idle) => IoClass::Idle,
        };
        Ok(IoPrio { class, level })
    }

    /// Flow `i`'s group: an index into `groups` (None: the root, `/`).
    fn flow_group(
        &self,
        i: usize,
        f: &FlowDef,
        groups: &[GroupPlan],
    ) -> Result<Option<usize>, ScenarioError> {
        Ok(match &f.group {
            None => None,
            Some(g) if g == "/" => None,
            Some(g) => Some(
                groups
                    .iter()
                    .position(|x| x.path == g.trim_end_matches('/'))
                    .ok_or_else(|| {
                        self.flow_err(
                            i,
                            "group",
                            format!(
                                "unknown group '{g}' (declare it in a [[group]], or with \
                                 --group on the command line)"
                            ),
                        )
                    })?,
            ),
        })
    }

    /// Checks flow `i`'s `bytes` (positive), `runs` (at least 1, only with
    /// `repeat`),
    /// `on_off.on` (at least one block) and `start` (at most 7 days).
    fn check_flow_limits(&self, i: usize, f: &FlowDef, block: u32) -> Result<(), ScenarioError> {
        if f.bytes.is_some_and(|b| b.0 == 0) {
            return Err(self.flow_err(i, "bytes", "must be positive"));
        }
        if f.repeat.is_none() && f.runs.is_some() {
            return Err(self.flow_err(
                i,
                "runs",
                "only with repeat, the pause between runs (repeat = \"0s\": back to back)",
            ));
        }
        if f.runs == Some(0) {
            return Err(self.flow_err(i, "runs", "must be at least 1"));
        }
        if let Some(oo) = &f.on_off {
            if oo.on.lo.0 < u64::from(block) * SECTOR_BYTES {
                return Err(self.flow_err(
                    i,
                    "on_off.on",
                    "must be at least one block (a burst issues whole requests)",
                ));
            }
        }
        // A flow may start after a shortened run's end (`--duration`),
        // not after any run could end.
        if f.start.0 > MAX_SIM_DURATION {
            return Err(self.flow_err(i, "start", "must be at most 7 days"));
        }
        Ok(())
    }

    /// Checks flow `i`'s `periodic` behaviour: deadline positive, warm-up
    /// at most 7 days, every at least 100 us, bytes positive, no on_off.
    fn check_periodic(&self, i: usize, f: &FlowDef) -> Result<(), ScenarioError> {
        let Some(p) = &f.periodic else {
            return Ok(());
        };
        if p.deadline.is_some_and(|d| d.0 == 0) {
            return Err(self.flow_err(i, "periodic.deadline", "must be positive"));
        }
        if p.warm_up.is_some_and(|d| d.0 > MAX_SIM_DURATION) {
            return Err(self.flow_err(i, "periodic.warm_up", "must be at most 7 days"));
        }
        if p.every.0 < 100 * bfq_core::US || p.bytes.0 == 0 {
            return Err(self.flow_err(
                i,
                "periodic",
                "every must be at least 100us and bytes positive",
            ));
        }
        if f.on_off.is_some() {
            return Err(self.flow_err(i, "periodic", "cannot be combined with on_off"));
        }
        Ok(())
    }

    /// Flow `i`'s web-server behaviour (pattern = web only; defaults
    /// filled in): small_prob in 0..=1, split in (0, 1), sizes positive.
    fn flow_web(&self, i: usize, f: &FlowDef) -> Result<Option<WebDef>, ScenarioError> {
        if f.web.is_some() && f.pattern != Pattern::Web {
            return Err(self.flow_err(i, "web", "only with pattern = \"web\""));
        }
        if f.pattern != Pattern::Web {
            return Ok(None);
        }
        let w = f.web.unwrap_or_default();
        if !((0.0..=1.0).contains(&w.small_prob) && 0.0 < w.split && w.split < 1.0) {
            return Err(self.flow_err(i, "web", "small_prob must be in 0..=1 and split in (0, 1)"));
        }
        if w.small.0 == 0 || w.large.lo.0 == 0 {
            return Err(self.flow_err(i, "web", "file sizes must be positive"));
        }
        Ok(Some(w))
    }

    /// Checks a flow's own end (`stop`, `duration`): after its start and
    /// within the run.
    fn check_end(&self, i: usize, f: &FlowDef) -> Result<(), ScenarioError> {
        let fe = |field: &str, why: String| self.flow_err(i, field, why);
        let run = self.duration.0;
        if let Some(stop) = f.stop.map(|d| d.0) {
            if stop <= f.start.0 {
                return Err(fe(
                    "stop",
                    format!("{} must be after start ({})", secs(stop), secs(f.start.0)),
                ));
            }
            if stop > run {
                return Err(fe(
                    "stop",
                    format!(
                        "{} is past the end of the run (duration = {})",
                        secs(stop),
                        secs(run)
                    ),
                ));
            }
        }
        if let Some(d) = f.duration.map(|d| d.0) {
            if d == 0 {
                return Err(fe("duration", "must be positive".into()));
            }
            if f.start.0.saturating_add(d) > run {
                return Err(fe(
                    "duration",
                    format!(
                        "start + duration = {} is past the end of the run (duration = {})",
                        secs(f.start.0.saturating_add(d)),
                        secs(run)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Resolves flow `i`'s `after` names to the planned copies of earlier
    /// `[[flow]]` entries; each must end on its own (a byte count, a
    /// replay, `stop` or `duration`, and a bounded number of runs), or the
    /// flow could never start.
    fn after_flows(&self, i: usize, planned: &[FlowPlan]) -> Result<Vec<usize>, ScenarioError> {
        let fe = |why: String| self.err(self.flow_field(i, "after"), why);
        let mut out = Vec::new();
        for name in &self.flows[i].after {
            let Some(k) = self.flows[..i].iter().position(|o| &o.name == name) else {
                return Err(fe(format!(
                    "'{name}' is not the name of an earlier flow (a flow waits only for flows \
                     listed before it)"
                )));
            };
            let o = &self.flows[k];
            let finite = o.stop.is_some()
                || o.duration.is_some()
                || ((o.bytes.is_some() || o.pattern == Pattern::Replay)
                    && (o.repeat.is_none() || o.runs.is_some()));
            if !finite {
                return Err(fe(format!(
                    "'{name}' never ends before the run does (give it bytes, stop or duration)"
                )));
            }
            for (j, p) in planned.iter().enumerate() {
                if p.def_index == k && !out.contains(&j) {
                    out.push(j);
                }
            }
        }
        Ok(out)
    }

    /// The scheduler name: the file's, or `fifo`.
    pub fn scheduler_name(&self) -> &str {
        self.scheduler.name.as_deref().unwrap_or("fifo")
    }
}

/// A region as (first sector, sectors) on a device of `cap` sectors:
/// the whole device without one, to the device's end without a size.
fn resolve_region(given: Option<&RegionDef>, cap: u64) -> (u64, u64) {
    let Some(r) = given else {
        return (0, cap);
    };
    let s = r.start.resolve(cap * SECTOR_BYTES) / SECTOR_BYTES;
    let l = match r.size {
        None => cap.saturating_sub(s),
        Some(e) => e.resolve(cap * SECTOR_BYTES) / SECTOR_BYTES,
    };
    (s, l)
}

/// Whether a region (`given`, or the whole device when `None`) holds a
/// request of `block` sectors within a device of `cap` sectors.
fn region_fits(given: Option<&RegionDef>, cap: u64, block: u64) -> bool {
    let (s, l) = resolve_region(given, cap);
    l >= block && s + l <= cap
}

/// Why a region (`given`, or the whole device when `None`) does not fit
/// a device of `cap` sectors and requests of `block` sectors, or `None`
/// where it fits. Its two causes have their own words: a region given
/// past the device's end, and a region shorter than one block
/// (`Scenario::device_needed` then names the device every region fits).
fn region_misfit(given: Option<&RegionDef>, cap: u64, block: u32) -> Option<String> {
    let block = u64::from(block);
    if region_fits(given, cap, block) {
        return None;
    }
    let (rs, rl) = resolve_region(given, cap);
    let bytes = |sectors: u128| sectors * u128::from(SECTOR_BYTES);
    let (start, end) = (bytes(rs.into()), bytes(u128::from(rs) + u128::from(rl)));
    let device = bytes(cap.into());
    let why = if given.is_none() || (rs + rl <= cap && rs < cap) {
        format!(
            "[{start} .. {end}) bytes is shorter than one {}-byte block (the device has {device} bytes)",
            bytes(block.into())
        )
    } else if rl == 0 {
        format!("starts at {start} bytes, not before the device's end at {device} bytes")
    } else {
        format!(
            "[{start} .. {end}) bytes ends at {end} bytes, past the device's end at {device} bytes"
        )
    };
    Some(why)
}

/// The smallest device size in sectors above `cap` that `fits`, found by
/// halving (a region's room grows with the device: its start in bytes or
/// percent, its size in bytes or to the end), or `None` where no size up
/// to 2^52 sectors (2 EiB) does (a region in percent that adds up past 100%,
/// a size beyond its start counted from the end).
fn smallest_fit(cap: u64, fits: impl Fn(u64) -> bool) -> Option<u64> {
    let (mut lo, mut hi) = (cap, 1u64 << 52);
    if cap >= hi || !fits(hi) {
        return None;
    }
    // fits(hi), and lo does not fit or is cap.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Scenario::from_toml_str(text, "t.toml")
            .unwrap_err()
            .to_string()
    }

    const OK: &str = "name = \"x\"\n[[flow]]\nname = \"a\"\n";

    #[test]
    fn a_repeating_flow_records_a_bounded_number_of_runs() {
        let flow = |rest: &str| {
            format!(
                "name = \"x\"\nduration = \"1000s\"\n[[flow]]\nname = \"a\"\n\
                 bytes = \"4k\"\n{rest}"
            )
        };
        let plan = |rest: &str| Scenario::from_toml_str(&flow(rest), "t.toml")?.plan();
        // No pause between runs: one run per request, without a bound.
        let e = plan("repeat = \"0s\"\n").unwrap_err().to_string();
        assert!(
            e.contains("flow[0] 'a'.repeat: may give 1000000000001 runs"),
            "{e}"
        );
        // 1 ms pauses over 1000 s: up to 1 000 001 runs.
        assert!(plan("repeat = \"1ms\"\n").is_err());
        // A count of runs, or pauses long enough, bound them.
        plan("repeat = \"0s\"\nruns = 100000\n").unwrap();
        plan("repeat = \"20ms\"\n").unwrap();
        // At least one run.
        let e = plan("repeat = \"1s\"\nruns = 0\n").unwrap_err().to_string();
        assert!(e.contains("flow[0] 'a'.runs: must be at least 1"), "{e}");
        // Checked against another run length, as `bfq run --seconds` does.
        let sc = Scenario::from_toml_str(&flow("repeat = \"20ms\"\n"), "t.toml").unwrap();
        assert!(sc.check_output_bounds(1999 * SEC).is_ok());
        let e = sc.check_output_bounds(2001 * SEC).unwrap_err().to_string();
        assert!(e.contains("at most 100000: set runs"), "{e}");
    }

    #[test]
    fn minimal_parses() {
        let s = Scenario::from_toml_str(OK, "t.toml").unwrap();
        assert_eq!(s.scheduler_name(), "fifo");
        let p = s.plan().unwrap();
        assert_eq!(p.flows.len(), 1);
        assert_eq!(p.flows[0].block, 256);
        assert!(p.flows[0].sync);
        assert_eq!(p.flows[0].readahead, 256);
    }

    #[test]
    fn errors_name_file_field_and_problem() {
        let e = err("name = \"x\"\nbogus = 1\n[[flow]]\nname = \"a\"\n");
        assert!(
            e.starts_with("t.toml: ") && e.contains("unknown field `bogus`"),
            "{e}"
        );
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\nblock = \"12q\"\n");
        assert!(
            e.contains("invalid size '12q'") && e.contains("line 4"),
            "{e}"
        );
        let e = err("name = \"x\"\n[device]\npreset = \"floppy\"\n[[flow]]\nname = \"a\"\n");
        assert!(e.contains("device.preset: unknown preset 'floppy'"), "{e}");
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\ngroup = \"/nope\"\n");
        assert!(
            e.contains("flow[0] 'a'.group: unknown group '/nope'"),
            "{e}"
        );
        let e = err("name = \"x\"\n[device]\nrpm = \"fast\"\n[[flow]]\nname = \"a\"\n");
        assert!(
            e.contains("device.rpm: expected a non-negative integer"),
            "{e}"
        );
        let e = err("name = \"x\"\n[device]\nchannels = 4\n[[flow]]\nname = \"a\"\n");
        assert!(e.contains("device.channels: unknown disk field"), "{e}");
        let e = err(
            "name = \"x\"\n[[flow]]\nname = \"a\"\nregion = { start = \"99%\", size = \"10G\" }\n",
        );
        assert!(e.contains("flow[0] 'a'.region"), "{e}");
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\npattern = \"replay\"\nreplay = \"/no/such.csv\"\n");
        assert!(
            e.contains("flow[0] 'a'.replay: cannot read /no/such.csv"),
            "{e}"
        );
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\nop = \"erase\"\n");
        assert!(e.contains("unknown variant `erase`"), "{e}");
        let e = err(
            "name = \"x\"\n[[flow]]\nname = \"a\"\non_off = { on = \"5M..1M\", off = \"1ms\" }\n",
        );
        assert!(e.contains("end below its start"), "{e}");
    }

    #[test]
    fn program_fields_have_ranges_and_defaults() {
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\ngap = \"2s\"\n");
        assert!(e.contains("flow[0] 'a'.gap: must be at most 1s"), "{e}");
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\nstart_jitter = \"11s\"\n");
        assert!(e.contains("'a'.start_jitter: must be at most 10s"), "{e}");
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\ndepth = 4\nreadahead = \"128k\"\n");
        assert!(
            e.contains("'a'.readahead: read-ahead is for buffered readers"),
            "{e}"
        );
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\nreadahead_style = \"2.4\"\n");
        assert!(e.contains("unknown variant `2.4`"), "{e}");
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\nreadahead = \"65M\"\n");
        assert!(e.contains("'a'.readahead: must be at most 64M"), "{e}");
        for bad in ["32k", "2G", "100000"] {
            let e = err(&format!(
                "name = \"x\"\n[[flow]]\nname = \"a\"\nindirect_every = \"{bad}\"\n"
            ));
            assert!(
                e.contains("'a'.indirect_every: must be 0 or a multiple of 4k in 64k..=1G"),
                "{e}"
            );
        }
        let e = err(
            "name = \"x\"\n[[flow]]\nname = \"a\"\npattern = \"rand\"\nindirect_every = \"4M\"\n",
        );
        assert!(e.contains("'a'.indirect_every: is for sequential"), "{e}");
        // sync at any depth; defaults: a 128 KiB reader waits 20 us + 64 us
        let s = Scenario::from_toml_str(
            "name = \"x\"\n[[flow]]\nname = \"a\"\n[[flow]]\nname = \"b\"\npattern = \"rand\"\ndepth = 8\n[[flow]]\nname = \"w\"\nop = \"write\"\n",
            "t",
        )
        .unwrap();
        let p = s.plan().unwrap();
        assert!(p.flows[0].ra && p.flows[0].sync);
        assert_eq!(p.flows[0].gap, 20_000 + 65_536);
        assert_eq!(p.flows[0].start_jitter, 5_000_000);
        assert_eq!(p.flows[0].indirect_every, 0);
        assert!(p.flows[1].sync && !p.flows[1].ra);
        assert_eq!((p.flows[1].depth, p.flows[1].gap), (8, 20_000 + 2_048));
        assert_eq!(p.flows[2].gap, 0);
    }

    #[test]
    fn a_named_flow_is_a_flow_entry_of_only_a_name() {
        let parsed: FlowDef = toml::from_str("name = \"a\"").unwrap();
        assert_eq!(FlowDef::named("a"), parsed);
    }

    /// A scenario of one flow `a` with the region `r` (a TOML table).
    fn region(r: &str) -> String {
        format!("name = \"x\"\n[[flow]]\nname = \"a\"\nregion = {r}\n")
    }

    #[test]
    fn regions_in_bytes_are_whole_sectors() {
        let e = err(&region("{ start = 1, size = \"4M\" }"));
        assert!(
            e.contains("flow[0] 'a'.region.start: must be a multiple of 512"),
            "{e}"
        );
        let e = err(&region("{ start = \"-1000\" }"));
        assert!(e.contains("'a'.region.start: must be a multiple"), "{e}");
        let e = err(&region("{ size = 4097 }"));
        assert!(e.contains("'a'.region.size: must be a multiple"), "{e}");
        // Percentages are rounded down to a sector.
        Scenario::from_toml_str(&region("{ start = \"33.3%\", size = \"1M\" }"), "t").unwrap();
    }

    /// What users get wrong is refused naming the value and what to give:
    /// a region's size counted back from the end (which only its start
    /// may be), a group of weight 0, a run too long for its series'
    /// interval (with the interval that would do) or for 7 days.
    #[test]
    fn mistakes_are_refused_naming_the_value() {
        let e = err(&region("{ size = \"-1G\" }"));
        assert!(
            e.contains("'a'.region.size: -1073741824 bytes counts back from the device's end"),
            "{e}"
        );
        Scenario::from_toml_str(&region("{ start = \"-1G\" }"), "t").unwrap();
        let e = err("name = \"x\"\n[[group]]\npath = \"/g\"\nweight = 0\n[[flow]]\nname = \"a\"\n");
        assert!(e.contains("group[0].weight: 0 is not in 1..=1000"), "{e}");
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\ndepth = 5000\n");
        assert!(e.contains("'a'.depth: 5000 is not in 1..=4096"), "{e}");
        let e = err("name = \"x\"\n[[flow]]\nname = \"a\"\ncount = 0\n");
        assert!(e.contains("'a'.count: 0 is not in 1..=100000"), "{e}");
        let long = |d: &str, more: &str| {
            format!("name = \"x\"\nduration = \"{d}\"\n{more}[[flow]]\nname = \"a\"\n")
        };
        let e = err(&long("30h", ""));
        assert!(
            e.contains(
                "output.series_interval: 1s gives 108000 points over the duration (108000s), \
                 at most 100000: set [output] series_interval to at least 1.08s"
            ),
            "{e}"
        );
        Scenario::from_toml_str(&long("30h", "[output]\nseries_interval = \"1.08s\"\n"), "t")
            .unwrap();
        let e = err(&long("200h", ""));
        assert!(e.contains("duration: must be at most 7 days"), "{e}");
        let e = err(&long("1s", "[output]\nseries_interval = \"500us\"\n"));
        assert!(
            e.contains("output.series_interval: 0.0005s is below the least, 1ms"),
            "{e}"
        );
    }

    /// A dotted key in `[scheduler]` (a nested table to TOML) and a
    /// `[scheduler.KEY]` table are settings `KEY.inner`, as quoted keys.
    #[test]
    fn nested_scheduler_tables_are_dotted_settings() {
        let s = Scenario::from_toml_str(
            "name = \"x\"\n[scheduler]\nname = \"throttle-max\"\nmax_bps.g1 = \"10M\"\n\
             \"max_iops.f0\" = 200\n[scheduler.max_iops]\ng2 = 5\n[[flow]]\nname = \"a\"\n",
            "t",
        )
        .unwrap();
        let pairs: Vec<_> = s.scheduler.settings.pairs().collect();
        for want in [
            ("max_bps.g1", "10M"),
            ("max_iops.g2", "5"),
            ("max_iops.f0", "200"),
        ] {
            assert!(pairs.contains(&want), "{want:?} in {pairs:?}");
        }
        let e = err("name = \"x\"\n[scheduler]\nmax_bps.g1 = [1]\n[[flow]]\nname = \"a\"\n");
        assert!(
            e.contains("scheduler setting 'max_bps.g1' must be a string"),
            "{e}"
        );
        // One setting twice, quoted and dotted, or with '-' and '_'.
        // Mutation: the count check in `SchedulerDef`'s deserializer
        // removed (the one read last silently wins).
        for twice in [
            "\"max_bps.g1\" = \"1M\"\nmax_bps.g1 = \"2M\"\n",
            "max-budget = 1000\nmax_budget = 2000\n",
        ] {
            let e = err(&format!(
                "name = \"x\"\n[scheduler]\nname = \"bfq\"\n{twice}[[flow]]\nname = \"a\"\n"
            ));
            assert!(e.contains("is given twice"), "{twice}: {e}");
        }
    }

    /// The error of planning a 4 KiB reader of region `r` (a TOML inline
    /// table, or none) on a device of `cap` bytes.
    fn misfit(r: Option<&str>, cap: u64) -> String {
        let region = r.map(|r| format!("region = {r}\n")).unwrap_or_default();
        let text = format!("name = \"x\"\n[[flow]]\nname = \"a\"\nblock = \"4k\"\n{region}");
        // Parsed only: `from_toml_str` plans on the scenario's own device.
        let s: Scenario = toml::from_str(&text).unwrap();
        s.plan_with_capacity(cap).unwrap_err().to_string()
    }

    #[test]
    fn a_region_past_the_end_names_the_end_and_the_device_it_needs() {
        let e = misfit(Some("{ start = \"32M\", size = \"64M\" }"), 64 << 20);
        assert!(
            e.contains(
                "flow[0] 'a'.region: [33554432 .. 100663296) bytes ends at 100663296 bytes, \
                 past the device's end at 67108864 bytes: the scenario needs a device of at \
                 least 100663296 bytes"
            ),
            "{e}"
        );
        // Without a size the region runs to the end: a block past its start.
        let e = misfit(Some("{ start = \"128M\" }"), 64 << 20);
        assert!(
            e.contains(
                "'a'.region: starts at 134217728 bytes, not before the device's end at \
                 67108864 bytes: the scenario needs a device of at least 134221824 bytes"
            ),
            "{e}"
        );
        // A start in percent: the target where what is left after it
        // holds the size (128M / (1 - 0.966667), in whole sectors).
        let e = misfit(Some("{ start = \"96.6667%\", size = \"128M\" }"), 1 << 30);
        assert!(
            e.contains(
                "[1037950464 .. 1172168192) bytes ends at 1172168192 bytes, past the device's \
                 end at 1073741824 bytes: the scenario needs a device of at least 4026556928 \
                 bytes"
            ),
            "{e}"
        );
        // Percentages that add up past 100%: no target would do.
        let e = misfit(Some("{ start = \"50%\", size = \"60%\" }"), 64 << 20);
        assert!(e.contains("past the device's end at 67108864 bytes"), "{e}");
        assert!(!e.contains("needs a device"), "{e}");
        // Sizes that hold the regions are accepted.
        let text =
            "name = \"x\"\n[[flow]]\nname = \"a\"\nregion = { start = \"32M\", size = \"64M\" }\n";
        let s: Scenario = toml::from_str(text).unwrap();
        s.plan_with_capacity(96 << 20).unwrap();
    }

    /// The device named is one that holds every flow's region, not only
    /// the first that does not fit (the regions of
    /// `scenarios/2010-table4-w2-1.toml`: the first flow needs 256 MiB, the
    /// second, 128M from 96.6667%, 3.75 GiB). Fails with `device_needed`
    /// checking the failing flow's region alone.
    #[test]
    fn the_device_needed_holds_every_region() {
        let text = "name = \"x\"\n[[flow]]\nname = \"a\"\n\
                    region = { start = \"0%\", size = \"256M\" }\n[[flow]]\nname = \"b\"\n\
                    region = { start = \"96.6667%\", size = \"128M\" }\n";
        let s: Scenario = toml::from_str(text).unwrap();
        let e = s.plan_with_capacity(64 << 20).unwrap_err().to_string();
        assert!(
            e.contains(
                "flow[0] 'a'.region: [0 .. 268435456) bytes ends at 268435456 bytes, past the \
                 device's end at 67108864 bytes: the scenario needs a device of at least \
                 4026556928 bytes"
            ),
            "{e}"
        );
        s.plan_with_capacity(4026556928).unwrap();
    }

    #[test]
    fn a_region_shorter_than_a_block_says_so() {
        let e = misfit(Some("{ start = 0, size = \"2k\" }"), 64 << 20);
        assert!(
            e.contains(
                "'a'.region: [0 .. 2048) bytes is shorter than one 4096-byte block \
                 (the device has 67108864 bytes)"
            ),
            "{e}"
        );
        assert!(!e.contains("needs a device"), "{e}");
        // To the device's end, 2 KiB after the start: a bigger target helps.
        let e = misfit(Some("{ start = 67106816 }"), 64 << 20);
        assert!(
            e.contains(
                "[67106816 .. 67108864) bytes is shorter than one 4096-byte block (the \
                 device has 67108864 bytes): the scenario needs a device of at least \
                 67110912 bytes"
            ),
            "{e}"
        );
        // The whole of a device smaller than a block.
        let e = misfit(None, 2048);
        assert!(
            e.contains(
                "[0 .. 2048) bytes is shorter than one 4096-byte block (the device has \
                 2048 bytes): the scenario needs a device of at least 4096 bytes"
            ),
            "{e}"
        );
    }

    #[test]
    fn groups_create_parents() {
        let s = Scenario::from_toml_str(
            "name = \"x\"\n[[group]]\npath = \"/a/b\"\nweight = 300\n[[flow]]\nname = \"f\"\ngroup = \"/a/b\"\n",
            "t",
        )
        .unwrap();
        let p = s.plan().unwrap();
        assert_eq!(p.groups.len(), 2);
        assert_eq!(p.groups[0].path, "/a");
        assert_eq!(p.groups[1].parent, Some(0));
        assert_eq!(p.flows[0].group, Some(1));
    }
}
