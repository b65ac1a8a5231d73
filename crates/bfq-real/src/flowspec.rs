//! Flows given as `key=value` lists (`bfq run --flow`), e.g.
//! `name=a,op=read,pattern=seq,bs=64k,depth=1,weight=100`: the keys are
//! docs/engine.md's ("--flow keys").

use crate::desc::{Dir, FlowDesc, OnOff, Pattern, Periodic};
use bfq_core::settings::{parse_duration, parse_size};
use bfq_core::{IoClass, SECTOR_BYTES};
use std::time::Duration;

fn bad(s: &str, why: &str) -> String {
    format!("--flow '{s}': {why}")
}

fn dur(s: &str, v: &str) -> Result<Duration, String> {
    parse_duration(v).map(Duration::from_nanos).ok_or_else(|| {
        bad(
            s,
            &format!("'{v}' is not a duration such as 250ms, 1.5s or 500us"),
        )
    })
}

fn positive_dur(s: &str, key: &str, v: &str) -> Result<Duration, String> {
    match dur(s, v)? {
        d if d.is_zero() => Err(bad(s, &format!("{key} must be above zero"))),
        d => Ok(d),
    }
}

/// A size of key `k` (zero allowed, as an offset).
fn offset_size(s: &str, k: &str, v: &str) -> Result<u64, String> {
    parse_size(v).map_err(|e| bad(s, &format!("{k}: {e}")))
}

/// A size of key `k`, above zero.
fn size(s: &str, k: &str, v: &str) -> Result<u64, String> {
    match offset_size(s, k, v)? {
        0 => Err(bad(s, &format!("{k}: size '{v}' must be above zero"))),
        n => Ok(n),
    }
}

/// Parses one flow description (`--flow`); `index` names it when no
/// `name` is given (`flow0`, `flow1`...).
pub fn parse(s: &str, index: usize) -> Result<FlowDesc, String> {
    let mut f = FlowDesc::reader(&format!("flow{index}"), Pattern::Seq, 4096);
    let mut pairs = Pairs::default();
    for kv in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| bad(s, &format!("'{kv}' is not key=value")))?;
        set_key(&mut f, &mut pairs, s, k.trim(), v.trim())?;
    }
    pairs.apply(&mut f, s)?;
    Ok(f)
}

/// Sets key `k` of flow description `s` to `v`: in `f`, or in `pairs`
/// for the keys that only count with another.
fn set_key(f: &mut FlowDesc, pairs: &mut Pairs, s: &str, k: &str, v: &str) -> Result<(), String> {
    match k {
        "name" if v.is_empty() => return Err(bad(s, "name must not be empty")),
        "name" => f.name = v.to_string(),
        "op" | "rw" => {
            f.dir = match v {
                "read" | "r" => Dir::Read,
                "write" | "w" => Dir::Write,
                _ => return Err(bad(s, "op is read or write")),
            }
        }
        "pattern" => {
            f.pattern = match v {
                "seq" => Pattern::Seq,
                "rand" => Pattern::Rand,
                _ => return Err(bad(s, "pattern is seq or rand")),
            }
        }
        "bs" | "block" => {
            let b = size(s, k, v)?;
            if b % SECTOR_BYTES != 0 || b > 64 << 20 {
                return Err(bad(s, "bs must be a multiple of 512 bytes, at most 64M"));
            }
            f.block = b as u32;
        }
        "depth" => match v.parse::<u32>() {
            Ok(d) if (1..=4096).contains(&d) => f.depth = d,
            _ => return Err(bad(s, "depth must be in 1..=4096")),
        },
        "sync" => {
            f.sync = match v {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => return Err(bad(s, "sync is true or false")),
            }
        }
        "weight" => f.weight = Some(v.parse().map_err(|_| bad(s, "bad weight"))?),
        "class" => {
            f.prio.class = IoClass::parse(v).ok_or_else(|| bad(s, "class is rt, be or idle"))?
        }
        "level" => f.prio.level = v.parse().map_err(|_| bad(s, "bad level"))?,
        "bytes" => f.bytes = Some(size(s, k, v)?),
        "think" => f.think = dur(s, v)?,
        "on" => pairs.on = Some(size(s, k, v)?),
        "off" => pairs.off = Some(dur(s, v)?),
        "every" => pairs.every = Some(positive_dur(s, k, v)?),
        "batch" => pairs.batch = Some(size(s, k, v)?),
        "repeat" => f.repeat = v.parse().map_err(|_| bad(s, "bad repeat"))?,
        "rerun" => f.rerun_after = dur(s, v)?,
        "start" => f.start = dur(s, v)?,
        "stop" => f.stop = Some(positive_dur(s, k, v)?),
        "duration" => f.duration = Some(positive_dur(s, k, v)?),
        "after" => f.after = v.split('+').map(|n| n.trim().to_string()).collect(),
        "offset" => pairs.offset = Some(offset_size(s, k, v)?),
        "len" => pairs.len = Some(size(s, k, v)?),
        "group" => f.group = Some(v.to_string()),
        _ => return Err(bad(s, &format!("unknown key '{k}'"))),
    }
    Ok(())
}

/// The keys that count only with another: `on` and `off`, `every` and
/// `batch`, `offset` and `len`.
#[derive(Default)]
struct Pairs {
    offset: Option<u64>,
    len: Option<u64>,
    on: Option<u64>,
    off: Option<Duration>,
    every: Option<Duration>,
    batch: Option<u64>,
}

impl Pairs {
    /// Sets `f`'s on/off phases, periodic batches and region, refusing
    /// half a pair, and a stop not after the start.
    fn apply(self, f: &mut FlowDesc, s: &str) -> Result<(), String> {
        match (self.on, self.off) {
            (Some(on), Some(off)) => {
                f.on_off = Some(OnOff {
                    on_bytes: (on, on),
                    off: (off, off),
                })
            }
            (None, None) => {}
            _ => return Err(bad(s, "on and off go together")),
        }
        match (self.every, self.batch) {
            (Some(every), Some(bytes)) => f.periodic = Some(Periodic { every, bytes }),
            (None, None) => {}
            _ => return Err(bad(s, "every and batch go together")),
        }
        if f.stop.is_some_and(|t| t <= f.start) {
            return Err(bad(s, "stop must be after start"));
        }
        if self.offset.is_some() || self.len.is_some() {
            let o = self.offset.unwrap_or(0);
            let l = self.len.ok_or_else(|| bad(s, "offset needs len"))?;
            f.region = Some((o, l));
        }
        Ok(())
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

    #[test]
    fn parses_flow_specs() {
        let f = parse(
            "name=a,op=write,pattern=rand,bs=64k,depth=4,weight=300,class=rt,level=2,bytes=1M,\
             think=1ms,on=1M,off=5ms,every=40ms,batch=256k,repeat=2,rerun=1s,offset=4k,len=1M,\
             stop=3s,duration=2s,after=b+c",
            0,
        )
        .unwrap();
        assert_eq!(f.name, "a");
        assert_eq!(f.dir, Dir::Write);
        assert_eq!(f.pattern, Pattern::Rand);
        assert_eq!((f.block, f.depth, f.weight), (65536, 4, Some(300)));
        assert_eq!((f.prio.class, f.prio.level), (IoClass::Rt, 2));
        assert_eq!(f.region, Some((4096, 1 << 20)));
        assert_eq!(f.on_off.unwrap().on_bytes, (1 << 20, 1 << 20));
        assert_eq!(f.periodic.unwrap().every, Duration::from_millis(40));
        assert_eq!((f.repeat, f.rerun_after), (2, Duration::from_secs(1)));
        assert_eq!(f.stop, Some(Duration::from_secs(3)));
        assert_eq!(f.duration, Some(Duration::from_secs(2)));
        assert_eq!(f.after, ["b", "c"]);
        assert!(parse("start=2s,stop=1s", 0).is_err());
        assert!(parse("duration=0s", 0).is_err());
        // Linux flags O_DIRECT requests synchronous whatever the depth.
        assert!(f.sync);
        assert!(!parse("depth=4,sync=false", 0).unwrap().sync);
        assert!(parse("sync=maybe", 0).is_err());
        assert!(parse("bogus=1", 0).is_err());
        assert!(parse("on=1M", 0).is_err());
        assert!(parse("offset=4k", 0).is_err());
    }
}
