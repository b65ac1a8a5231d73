//! Flows and groups given on the command line as `key=value` lists
//! (`bfq run --flow`, `--group`), e.g.
//! `name=a,op=read,pattern=seq,bs=64k,depth=1,weight=100`: the keys are
//! docs/engine.md's ("--flow keys").
//!
//! They are read into the scenario model (bfq-scenario's [`FlowDef`] and
//! [`GroupDef`]) and planned by it ([`plan`]), so that a `--flow` is
//! checked by the same code as a scenario file's `[[flow]]`: ranges,
//! regions, `after`, groups, ON/OFF phases. This module checks only the
//! syntax: each value's form, keys given twice, keys that go in pairs.

use crate::desc::{FlowDesc, GroupDesc};
use bfq_core::settings::{bool_spellings, parse_bool, parse_duration, parse_size};
use bfq_core::{IoClass, SEC};
use bfq_scenario::scenario::{
    ClassDef, GroupDef, OnOffDef, OpDef, OutputDef, PeriodicDef, MAX_SERIES_POINTS,
};
use bfq_scenario::units::{Dur, Extent, Range, Size};
use bfq_scenario::{FlowDef, Pattern, RegionDef, Scenario, ScenarioError};
use std::time::Duration;

/// A `--flow`: the flow in the scenario model, and whether it gave its
/// region (`offset`, `len`); without one it gets an equal share of what
/// the explicit regions leave of the target ([`crate::layout`]).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    /// The flow as a scenario file's `[[flow]]` would give it.
    pub def: FlowDef,
    /// `offset` or `len` was given.
    pub region_given: bool,
}

/// Command-line flows and groups planned for a run.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The flows, in command-line order.
    pub flows: Vec<FlowDesc>,
    /// The groups, parents before children.
    pub groups: Vec<GroupDesc>,
    /// A throughput point every second, or every `duration / 100000`
    /// (whole seconds) for longer runs.
    pub series_interval: Duration,
}

/// The keys of a `--flow` or `--group` in order, aliases (`rw`, `block`)
/// under their main name; refuses a pair that is not `key=value` and a
/// key given twice. `what` names the list in errors (`--flow[0]`).
fn key_values<'a>(s: &'a str, what: &str) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for kv in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("{what}: '{kv}' is not key=value"))?;
        let k = match k.trim() {
            "rw" => "op",
            "block" => "bs",
            k => k,
        };
        if out.iter().any(|(o, _)| *o == k) {
            return Err(format!("{what}.{k}: given twice"));
        }
        out.push((k, v.trim()));
    }
    Ok(out)
}

fn dur(v: &str) -> Result<Dur, String> {
    parse_duration(v)
        .map(Dur)
        .ok_or_else(|| format!("'{v}' is not a duration such as 250ms, 1.5s or 500us"))
}

fn size(v: &str) -> Result<Size, String> {
    parse_size(v).map(Size)
}

/// `repeat`'s pause between runs, a duration with its unit: a bare
/// number (a run count in earlier `--flow`s, a pause in milliseconds
/// in [`parse_duration`]) is refused.
fn pause(v: &str) -> Result<Dur, String> {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "'{v}' has no unit: repeat is the pause between runs, with a unit, e.g. 1s; \
             the number of runs is runs=N"
        ));
    }
    dur(v)
}

/// A whole number; `range` says which in errors (the scenario model
/// checks the range itself).
fn number<T: std::str::FromStr>(v: &str, range: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("'{v}' is not a whole number in {range}"))
}

/// Parses flow description number `index` (`--flow`); it is named
/// `flow{index}` when no `name` is given.
pub fn parse(s: &str, index: usize) -> Result<FlowSpec, String> {
    let pairs = key_values(s, &format!("--flow[{index}]"))?;
    let name = pairs
        .iter()
        .find(|(k, _)| *k == "name")
        .map_or(format!("flow{index}"), |(_, v)| v.to_string());
    let field = |k: &str| format!("--flow[{index}] '{name}'.{k}");
    let mut f = FlowDef::named(&name);
    // A --flow is a 4 KiB reader flagged synchronous whatever its
    // direction (Linux flags O_DIRECT writes synchronous too).
    f.block = Some(Size(4096));
    f.sync = Some(true);
    let mut p = Pairs::default();
    for (k, v) in pairs {
        set_key(&mut f, &mut p, k, v).map_err(|why| format!("{}: {why}", field(k)))?;
    }
    let region_given = p.offset.is_some() || p.len.is_some();
    p.apply(&mut f)
        .map_err(|(k, why)| format!("{}: {why}", field(k)))?;
    Ok(FlowSpec {
        def: f,
        region_given,
    })
}

/// The keys of a `--flow`, as it takes them (`set_key`).
pub const FLOW_KEYS: [&str; 24] = [
    "name", "op", "pattern", "bs", "depth", "sync", "weight", "class", "level", "bytes", "think",
    "on", "off", "every", "batch", "runs", "repeat", "start", "stop", "duration", "after",
    "offset", "len", "group",
];

/// Sets key `k` of a flow to `v`: in `f`, or in `p` for the keys that
/// count only with another. The error says what is wrong with `v`.
fn set_key(f: &mut FlowDef, p: &mut Pairs, k: &str, v: &str) -> Result<(), String> {
    match k {
        "name" => {}
        "op" => {
            f.op = match v {
                "read" | "r" => OpDef::Read,
                "write" | "w" => OpDef::Write,
                _ => return Err(format!("'{v}' is not read or write")),
            }
        }
        "pattern" => {
            f.pattern = match v {
                "seq" => Pattern::Seq,
                "rand" => Pattern::Rand,
                _ => return Err(format!("'{v}' is not seq or rand")),
            }
        }
        "bs" => f.block = Some(size(v)?),
        "depth" => f.depth = Some(number(v, "1..=4096")?),
        "sync" => {
            f.sync = Some(parse_bool(v).ok_or_else(|| format!("expected {}", bool_spellings()))?)
        }
        "weight" => f.weight = Some(number(v, "1..=1000")?),
        "class" => {
            f.class = Some(match IoClass::parse(v) {
                Some(IoClass::Rt) => ClassDef::Rt,
                Some(IoClass::Be) => ClassDef::Be,
                Some(IoClass::Idle) => ClassDef::Idle,
                None => return Err(format!("'{v}' is not rt, be or idle")),
            })
        }
        "level" => f.level = Some(number(v, "0..=7")?),
        "bytes" => f.bytes = Some(size(v)?),
        "think" => f.think = dur(v)?,
        "on" => p.on = Some(size(v)?),
        "off" => p.off = Some(dur(v)?),
        "every" => p.every = Some(dur(v)?),
        "batch" => p.batch = Some(size(v)?),
        "runs" => p.runs = Some(number(v, "1..")?),
        "repeat" => p.repeat = Some(pause(v)?),
        "rerun" => {
            return Err(
                "is not a key: the pause between runs is repeat=DURATION (e.g. 1s), \
                        the number of runs runs=N"
                    .into(),
            )
        }
        "start" => f.start = dur(v)?,
        "stop" => f.stop = Some(dur(v)?),
        "duration" => f.duration = Some(dur(v)?),
        "after" => f.after = v.split('+').map(|n| n.trim().to_string()).collect(),
        "offset" => p.offset = Some(size(v)?.0),
        "len" => p.len = Some(size(v)?.0),
        "group" => f.group = Some(v.to_string()),
        _ => return Err(format!("unknown key (the keys: {})", FLOW_KEYS.join(", "))),
    }
    Ok(())
}

/// The keys that count only with another: `on` and `off`, `every` and
/// `batch`, `offset` and `len`, `runs` (with `repeat`).
#[derive(Default)]
struct Pairs {
    offset: Option<u64>,
    len: Option<u64>,
    on: Option<Size>,
    off: Option<Dur>,
    every: Option<Dur>,
    batch: Option<Size>,
    runs: Option<u32>,
    repeat: Option<Dur>,
}

impl Pairs {
    /// Sets `f`'s ON/OFF phases, periodic batches, region and runs,
    /// refusing half a pair: the key and what is wrong.
    fn apply(self, f: &mut FlowDef) -> Result<(), (&'static str, &'static str)> {
        match (self.on, self.off) {
            (Some(on), Some(off)) => {
                f.on_off = Some(OnOffDef {
                    on: Range { lo: on, hi: on },
                    off: Range { lo: off, hi: off },
                })
            }
            (None, None) => {}
            (Some(_), None) => return Err(("on", "needs off (on and off go together)")),
            (None, Some(_)) => return Err(("off", "needs on (on and off go together)")),
        }
        match (self.every, self.batch) {
            (Some(every), Some(bytes)) => {
                f.periodic = Some(PeriodicDef {
                    every,
                    bytes,
                    deadline: None,
                    warm_up: None,
                })
            }
            (None, None) => {}
            (Some(_), None) => return Err(("every", "needs batch (they go together)")),
            (None, Some(_)) => return Err(("batch", "needs every (they go together)")),
        }
        if self.offset.is_some() || self.len.is_some() {
            let len = self.len.ok_or(("offset", "needs len"))?;
            f.region = Some(RegionDef {
                start: Extent::Bytes(self.offset.unwrap_or(0)),
                size: Some(Extent::Bytes(len)),
            });
        }
        // A scenario's `repeat` (the pause after each run; runs until
        // the end without `runs`) and `runs` (their number), checked by
        // the scenario model.
        f.repeat = self.repeat;
        f.runs = self.runs;
        Ok(())
    }
}

/// Parses group description number `index` (`--group path=/a,weight=300`:
/// a scenario file's `[[group]]`).
pub fn parse_group(s: &str, index: usize) -> Result<GroupDef, String> {
    let what = format!("--group[{index}]");
    let mut path = None;
    let mut weight = bfq_core::DEFAULT_GROUP_WEIGHT;
    for (k, v) in key_values(s, &what)? {
        match k {
            "path" => path = Some(v.to_string()),
            "weight" => {
                weight = number(v, "1..=1000").map_err(|why| format!("{what}.weight: {why}"))?
            }
            _ => return Err(format!("{what}.{k}: unknown key (path, weight)")),
        }
    }
    let path = path.ok_or_else(|| format!("{what}.path: missing (e.g. path=/a,weight=300)"))?;
    Ok(GroupDef { path, weight })
}

/// Plans the command line's `flows` and `groups` as a scenario of
/// `duration` on a target of `capacity` bytes: every check of a scenario
/// file applies, each error naming the `--flow` (position and name) or
/// `--group` and the key.
pub fn plan(
    flows: &[FlowSpec],
    groups: &[GroupDef],
    duration: Duration,
    capacity: u64,
) -> Result<Planned, String> {
    let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let interval = ns.div_ceil(MAX_SERIES_POINTS).div_ceil(SEC).max(1) * SEC;
    let sc = Scenario {
        name: "command line".into(),
        description: String::new(),
        duration: Dur(ns),
        seed: 0,
        device: Default::default(),
        scheduler: Default::default(),
        groups: groups.to_vec(),
        flows: flows.iter().map(|f| f.def.clone()).collect(),
        output: OutputDef {
            series_interval: Dur(interval),
        },
        origin: "command line".into(),
        base_dir: Default::default(),
        replays: Vec::new(),
    };
    let plan = sc
        .plan_with_capacity(capacity)
        .map_err(command_line_error)?;
    let (mut descs, groups) = crate::scenario::from_plan(&plan).map_err(|e| e.to_string())?;
    for (d, f) in descs.iter_mut().zip(flows) {
        if !f.region_given {
            d.region = None;
        }
    }
    Ok(Planned {
        flows: descs,
        groups,
        series_interval: Duration::from_nanos(interval),
    })
}

/// A scenario error in command-line words: `flow[0] 'a'.block` as
/// `--flow[0] 'a'.bs`, `group[1].weight` as `--group[1].weight`, the
/// run's `duration` as `--seconds`.
fn command_line_error(e: ScenarioError) -> String {
    let field = if let Some(rest) = e.field.strip_prefix("flow[") {
        match rest.rsplit_once("'.") {
            Some((head, key)) => format!("--flow[{head}'.{}", flow_key(key)),
            None => format!("--flow[{rest}"),
        }
    } else if let Some(rest) = e.field.strip_prefix("group[") {
        format!("--group[{rest}")
    } else if e.field == "duration" {
        "--seconds".into()
    } else {
        e.field
    };
    // The run's length is --seconds here, and its flows are no scenario.
    let why = e
        .why
        .replace("the run (duration = ", "the run (--seconds ")
        .replace("the scenario needs a device", "the flows need a target");
    format!("{field}: {why}")
}

/// The `--flow` key of a scenario flow field.
fn flow_key(field: &str) -> &str {
    match field {
        "block" => "bs",
        "on_off.on" => "on",
        "on_off" | "on_off.off" => "off",
        "periodic" => "every/batch",
        "region.start" => "offset",
        "region.size" => "len",
        "region" => "offset/len",
        k => k,
    }
}

/// Refuses empty and repeated flow names (results are keyed by name).
pub fn check_names(flows: &[FlowDesc]) -> Result<(), String> {
    for (i, f) in flows.iter().enumerate() {
        if f.name.trim().is_empty() {
            return Err(format!("flow {i}: the name must not be empty"));
        }
        if flows[..i].iter().any(|o| o.name == f.name) {
            return Err(format!("flow name '{}' is given twice", f.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::{Dir, Pattern as DescPattern};

    const GIB: u64 = 1 << 30;

    /// The flows `specs` planned for 10 s on a 1 GiB target.
    fn planned(specs: &[&str]) -> Result<Planned, String> {
        let flows = specs
            .iter()
            .enumerate()
            .map(|(i, s)| parse(s, i))
            .collect::<Result<Vec<_>, _>>()?;
        plan(&flows, &[], Duration::from_secs(10), GIB)
    }

    /// The error of planning `specs`.
    fn error(specs: &[&str]) -> String {
        planned(specs).unwrap_err()
    }

    #[test]
    fn parses_flow_specs() {
        let p = planned(&[
            "name=b,bytes=1M",
            "name=c,bytes=1M",
            "name=a,op=write,pattern=rand,bs=64k,depth=4,weight=300,class=rt,level=2,bytes=1M,\
             think=1ms,on=1M,off=5ms,runs=2,repeat=1s,offset=4k,len=1M,\
             stop=3s,duration=2s,after=b+c",
        ])
        .unwrap();
        let f = &p.flows[2];
        assert_eq!(f.name, "a");
        assert_eq!(f.dir, Dir::Write);
        assert_eq!(f.pattern, DescPattern::Rand);
        assert_eq!((f.block, f.depth, f.weight), (65536, 4, Some(300)));
        assert_eq!((f.prio.class, f.prio.level), (IoClass::Rt, 2));
        assert_eq!(f.region, Some((4096, 1 << 20)));
        assert_eq!(f.on_off.unwrap().on_bytes, (1 << 20, 1 << 20));
        assert_eq!((f.runs, f.repeat), (2, Duration::from_secs(1)));
        assert_eq!(f.stop, Some(Duration::from_secs(3)));
        assert_eq!(f.duration, Some(Duration::from_secs(2)));
        assert_eq!(f.after, ["b", "c"]);
        // Linux flags O_DIRECT requests synchronous whatever the depth.
        assert!(f.sync);
        // Without offset and len a flow shares what is left of the target.
        assert_eq!(p.flows[0].region, None);
        let f = &planned(&["every=40ms,batch=256k"]).unwrap().flows[0];
        assert_eq!(f.periodic.unwrap().every, Duration::from_millis(40));
        assert_eq!((f.name.as_str(), f.block, f.runs), ("flow0", 4096, 1));
        assert_eq!(p.series_interval, Duration::from_secs(1));
    }

    #[test]
    fn booleans_take_every_spelling() {
        for (v, want) in [("on", true), ("yes", true), ("1", true), ("false", false)] {
            let f = &planned(&[&format!("depth=4,sync={v}")]).unwrap().flows[0];
            assert_eq!(f.sync, want, "{v}");
        }
        let e = error(&["sync=maybe"]);
        assert!(e.contains("--flow[0] 'flow0'.sync: expected 1/0"), "{e}");
    }

    #[test]
    fn every_error_names_the_flow_and_the_key() {
        for (spec, want) in [
            (
                "name=a,weight=0",
                "--flow[0] 'a'.weight: 0 is not in 1..=1000",
            ),
            ("name=a,level=9", "--flow[0] 'a'.level: 9 is not in 0..=7"),
            (
                "name=a,weight=x",
                "--flow[0] 'a'.weight: 'x' is not a whole number",
            ),
            (
                "name=a,depth=0",
                "--flow[0] 'a'.depth: 0 is not in 1..=4096",
            ),
            (
                "name=a,bs=1000",
                "--flow[0] 'a'.bs: 1000 bytes is not a positive",
            ),
            ("bs=65M", "--flow[0] 'flow0'.bs: must be at most 64M"),
            (
                "name=a,bogus=1",
                "--flow[0] 'a'.bogus: unknown key (the keys: name, op, pattern, bs,",
            ),
            (
                "name=a,pattern=zig",
                "--flow[0] 'a'.pattern: 'zig' is not seq or rand",
            ),
            (
                "name=a,class=rr",
                "--flow[0] 'a'.class: 'rr' is not rt, be or idle",
            ),
            ("name=a,on=1M", "--flow[0] 'a'.on: needs off"),
            ("name=a,offset=4k", "--flow[0] 'a'.offset: needs len"),
            (
                "name=a,start=2s,stop=1s",
                "--flow[0] 'a'.stop: 1s must be after start",
            ),
            (
                "name=a,stop=20s",
                "--flow[0] 'a'.stop: 20s is past the end of the run (--seconds 10s)",
            ),
            (
                "name=a,duration=0s",
                "--flow[0] 'a'.duration: must be positive",
            ),
            (
                "name=a,every=10us,batch=4k",
                "--flow[0] 'a'.every/batch: every must be",
            ),
            (
                "name=a,runs=0,repeat=1s",
                "--flow[0] 'a'.runs: must be at least 1",
            ),
            ("name=a,runs=3", "--flow[0] 'a'.runs: only with repeat"),
            (
                "name=a,repeat=1x",
                "--flow[0] 'a'.repeat: '1x' is not a duration",
            ),
            (
                "name=a,op=erase",
                "--flow[0] 'a'.op: 'erase' is not read or write",
            ),
            ("name=a,bs", "--flow[0]: 'bs' is not key=value"),
        ] {
            let e = error(&[spec]);
            assert!(e.starts_with(want), "{spec}: {e}");
        }
    }

    /// Every key the unknown-key error lists is one `--flow` takes.
    #[test]
    fn the_listed_keys_are_the_keys_taken() {
        for k in FLOW_KEYS {
            let (mut f, mut p) = (FlowDef::named("a"), Pairs::default());
            if let Err(e) = set_key(&mut f, &mut p, k, "") {
                assert!(!e.starts_with("unknown key"), "{k}: {e}");
            }
        }
    }

    #[test]
    fn repeat_is_the_pause_and_runs_the_count_as_in_scenario_files() {
        // Without runs a flow runs again after each pause until the end.
        let f = &planned(&["name=a,bytes=1M,repeat=1s"]).unwrap().flows[0];
        assert_eq!((f.runs, f.repeat), (u32::MAX, Duration::from_secs(1)));
        let f = &planned(&["name=a,bytes=1M,runs=3,repeat=0s"])
            .unwrap()
            .flows[0];
        assert_eq!((f.runs, f.repeat), (3, Duration::ZERO));
        // The run count and the pause of earlier --flows do not slip
        // into the new meanings: a bare number and rerun are refused,
        // naming the keys to use.
        for spec in ["name=a,repeat=2", "name=a,repeat=0", "name=a,repeat=1.5"] {
            let e = error(&[spec]);
            assert!(e.starts_with("--flow[0] 'a'.repeat: '"), "{spec}: {e}");
            assert!(
                e.contains(
                    "has no unit: repeat is the pause between runs, with a unit, e.g. 1s; \
                     the number of runs is runs=N"
                ),
                "{spec}: {e}"
            );
        }
        let e = error(&["name=a,rerun=1s"]);
        assert!(e.starts_with("--flow[0] 'a'.rerun: is not a key"), "{e}");
        assert!(e.contains("repeat=DURATION") && e.contains("runs=N"), "{e}");
        // A pause of 0 needs a count, as in a scenario file.
        let e = error(&["name=a,bytes=1M,repeat=0s"]);
        assert!(e.starts_with("--flow[0] 'a'.repeat: may give"), "{e}");
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        let e = error(&["name=a,bs=4k,name=b"]);
        assert_eq!(e, "--flow[0].name: given twice");
        // Aliases are the same key.
        let e = error(&["name=a,bs=4k,block=8k"]);
        assert_eq!(e, "--flow[0].bs: given twice");
    }

    #[test]
    fn regions_must_fit_the_target_in_whole_sectors() {
        // offset + len past 2^64 does not wrap round.
        let e = error(&["name=a,offset=18446744073709551615,len=4k"]);
        assert!(
            e.starts_with("--flow[0] 'a'.offset: must be a multiple of 512"),
            "{e}"
        );
        let e = error(&["name=a,offset=1G,len=18446744073709551104"]);
        assert!(e.starts_with("--flow[0] 'a'.offset/len: ["), "{e}");
        assert!(
            e.contains("past the device's end at 1073741824 bytes"),
            "{e}"
        );
        let e = error(&["name=a,offset=1020M,len=8M"]);
        assert_eq!(
            e,
            "--flow[0] 'a'.offset/len: [1069547520 .. 1077936128) bytes ends at 1077936128 \
             bytes, past the device's end at 1073741824 bytes: the flows need a target of at \
             least 1077936128 bytes"
        );
        let e = error(&["name=a,offset=1,len=4M"]);
        assert!(
            e.starts_with("--flow[0] 'a'.offset: must be a multiple of 512"),
            "{e}"
        );
        let e = error(&["name=a,len=4097"]);
        assert!(
            e.starts_with("--flow[0] 'a'.len: must be a multiple of 512"),
            "{e}"
        );
        let f = &planned(&["name=a,offset=1016M,len=8M"]).unwrap().flows[0];
        assert_eq!(f.region, Some((1016 << 20, 8 << 20)));
    }

    #[test]
    fn after_names_an_earlier_flow_that_ends() {
        let e = error(&["name=a,after=b", "name=b,after=a"]);
        assert!(
            e.starts_with("--flow[0] 'a'.after: 'b' is not the name of an earlier flow"),
            "{e}"
        );
        let e = error(&["name=a,bytes=1M", "name=b,after=c"]);
        assert!(e.starts_with("--flow[1] 'b'.after: 'c' is not"), "{e}");
        let e = error(&["name=a", "name=b,after=a"]);
        assert!(e.contains("'a' never ends"), "{e}");
        planned(&["name=a,bytes=1M,runs=3,repeat=0s", "name=b,after=a"]).unwrap();
    }

    #[test]
    fn an_on_phase_holds_one_block() {
        let e = error(&["name=a,bs=64k,on=4k,off=1ms"]);
        assert!(
            e.starts_with("--flow[0] 'a'.on: must be at least one block"),
            "{e}"
        );
        let e = error(&["name=a,on=1,off=1ms"]);
        assert!(
            e.starts_with("--flow[0] 'a'.on: must be at least one block"),
            "{e}"
        );
    }

    #[test]
    fn groups_are_declared_with_group() {
        let e = error(&["name=a,group=/g1"]);
        assert!(
            e.starts_with("--flow[0] 'a'.group: unknown group '/g1'"),
            "{e}"
        );
        assert!(e.contains("--group"), "{e}");
        let groups = [parse_group("path=/g1/g2,weight=300", 0).unwrap()];
        let flows = [parse("name=a,group=/g1/g2", 0).unwrap()];
        let p = plan(&flows, &groups, Duration::from_secs(10), GIB).unwrap();
        assert_eq!(p.flows[0].group.as_deref(), Some("/g1/g2"));
        let g = p.groups.iter().find(|g| g.name == "/g1/g2").unwrap();
        assert_eq!((g.weight, g.parent.as_deref()), (300, Some("/g1")));
        let bad = [parse_group("path=/g,weight=0", 0).unwrap()];
        let e = plan(&flows, &bad, Duration::from_secs(10), GIB).unwrap_err();
        assert_eq!(e, "--group[0].weight: 0 is not in 1..=1000");
        let e = parse_group("weight=5", 1).unwrap_err();
        assert!(e.starts_with("--group[1].path: missing"), "{e}");
        let e = parse_group("path=/a,path=/b", 1).unwrap_err();
        assert_eq!(e, "--group[1].path: given twice");
    }

    #[test]
    fn a_long_run_keeps_its_series_bounded() {
        let flows = [parse("name=a", 0).unwrap()];
        let week = Duration::from_secs(604_800);
        let p = plan(&flows, &[], week, GIB).unwrap();
        assert_eq!(p.series_interval, Duration::from_secs(7));
    }
}
