//! The modelled devices' parameters ([`DeviceParams`]: a scenario's
//! `[device]` table) and presets for the papers' devices (figures: drive datasheets;
//! the 2010 BFQ paper Section V-B; the 2014 BFQ+ report Table 1; the 2018
//! throttling article's test bed). Sequential rates, capacities and NCQ are
//! the papers' figures; seek times, heads, caches and bus rates are
//! typical datasheet values for drives of that family and era (assumed,
//! documented in docs/scenarios.md).
//!
//! | name | device | seq. outer / inner | notes |
//! |---|---|---|---|
//! | `ibm-dtla-307030` | IBM Deskstar DTLA-307030, 30 GB, 7200 rpm | 36 / 23.4 MB/s | 2010 paper |
//! | `maxtor-6l080l0` | MAXTOR 6L080L0, 82 GB, 7200 rpm | 55 / 30 MB/s | 2014 report, system 1 |
//! | `maxtor-7l250s0` | MAXTOR 7L250S0, 250 GB, 7200 rpm, NCQ 32 | 61 / 33 MB/s | 2014 report, system 2 |
//! | `maxtor-stm332061` | MAXTOR STM332061, 320 GB, 7200 rpm | 89 / 55 MB/s | 2014 report, system 3 |
//! | `ssd-plextor-m5s` | PLEXTOR PX-256M5S SATA SSD | ~510 MB/s seq, ~160 MB/s random 4 KiB at depth, ~23 MB/s one sync 4 KiB reader | 2018 article |

mod disk;
mod flash;

use crate::units::{parse_size, Dur};
use bfq_core::{Time, MS, US};
pub use disk::DiskParams;
pub use flash::FlashParams;
use serde::Serialize;

/// Parameters of any modelled device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum DeviceParams {
    /// A rotational disk.
    Disk(DiskParams),
    /// A flash device.
    Flash(FlashParams),
}

/// Every preset name with a one-line description.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "ibm-dtla-307030",
        "IBM DTLA-307030 30 GB 7200 rpm ATA disk, 36 MB/s outer, 35% lower inner (2010 paper)",
    ),
    (
        "maxtor-6l080l0",
        "MAXTOR 6L080L0 82 GB 7200 rpm, 55 MB/s, no NCQ (2014 report, system 1)",
    ),
    (
        "maxtor-7l250s0",
        "MAXTOR 7L250S0 250 GB 7200 rpm, 61 MB/s, NCQ depth 32 (2014 report, system 2)",
    ),
    (
        "maxtor-stm332061",
        "MAXTOR STM332061 320 GB 7200 rpm, 89 MB/s outer, 55 inner, no NCQ (2014 report, system 3)",
    ),
    (
        "ssd-plextor-m5s",
        "PLEXTOR PX-256M5S SATA SSD: ~500 MB/s seq, ~160 MB/s random, 23 MB/s one sync 4k reader (2018 article)",
    ),
];

#[allow(clippy::too_many_arguments)]
fn disk(
    capacity: u64,
    heads: u32,
    rate_outer: f64,
    rate_inner: f64,
    seeks_ms: (f64, f64, f64),
    bus_rate: f64,
    cache_mib: u64,
    ncq_depth: u32,
) -> DiskParams {
    let ms = |x: f64| (x * MS as f64).round() as Time;
    DiskParams {
        capacity,
        rpm: 7200,
        heads,
        zones: 16,
        rate_outer,
        rate_inner,
        seek_single: ms(seeks_ms.0),
        seek_avg: ms(seeks_ms.1),
        seek_full: ms(seeks_ms.2),
        write_settle: ms(0.5),
        head_switch: ms(0.8),
        overhead: ms(0.2),
        hit_overhead: ms(0.05),
        bus_rate,
        cache_size: cache_mib << 20,
        cache_segments: 8,
        read_ahead: 512 << 10,
        min_prefetch: 0,
        write_cache: true,
        // The drives write cached data to the media at once (Maxtor's
        // "write cache stacking": "a disk write task begins to store the
        // host data to disk"); deferring it is a vendor-specific power
        // saving option (IBM/Hitachi "Delayed Write"), off at power-on.
        destage_delay: 0,
        // Maxtor's read-ahead mode: after a read, read-ahead "continues
        // sequentially until the allocated buffer is full".
        read_ahead_first: true,
        ncq_depth,
        ncq_max_wait: if ncq_depth > 1 { 500 * MS } else { 0 },
    }
}

/// The parameters of preset `name`.
pub fn preset(name: &str) -> Option<DeviceParams> {
    Some(match name.to_ascii_lowercase().as_str() {
        "ibm-dtla-307030" => DeviceParams::Disk(disk(
            60_036_480 * 512,
            4,
            36.0,
            23.4,
            (1.2, 8.5, 15.0),
            100.0,
            2,
            1,
        )),
        "maxtor-6l080l0" => DeviceParams::Disk(disk(
            160_086_528 * 512,
            4,
            55.0,
            30.0,
            (0.8, 9.4, 17.8),
            133.0,
            2,
            1,
        )),
        "maxtor-7l250s0" => DeviceParams::Disk(disk(
            490_234_752 * 512,
            6,
            61.0,
            33.0,
            (0.8, 9.0, 17.0),
            150.0,
            16,
            32,
        )),
        "maxtor-stm332061" => DeviceParams::Disk(disk(
            625_142_448 * 512,
            4,
            89.0,
            55.0,
            (0.8, 8.5, 17.0),
            300.0,
            16,
            1,
        )),
        "ssd-plextor-m5s" => DeviceParams::Flash(FlashParams {
            capacity: 500_118_192 * 512,
            channels: 4,
            dies: 2,
            page_size: 16 << 10,
            // 178 us per sync 4 KiB read (23 MB/s, the article) = 123 + 25 command
            // + 8 bus + the host's 22 us gap between a completion and the next read
            read_latency: 123 * US,
            program_latency: 900 * US,
            cmd_overhead: 25 * US,
            bus_rate: 510.0,
            queue_depth: 32,
            // Not given by the article or the drive's data sheet (its DRAM
            // holds the mapping tables too): a write buffer of a few tens
            // of MiB, as SATA SSDs of its generation have.
            write_buffer: 32 << 20,
            // A page-mapping FTL, as SATA SSDs of its generation have.
            coalesce_writes: true,
            reports_rotational: false,
        }),
        _ => return None,
    })
}

fn as_size(v: &toml::Value) -> Result<u64, String> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        toml::Value::String(s) => parse_size(s),
        _ => Err("expected a size such as \"30G\" or 4096".into()),
    }
}

fn as_dur(v: &toml::Value) -> Result<Time, String> {
    use serde::Deserialize;
    Dur::deserialize(v.clone())
        .map(|d| d.0)
        .map_err(|e| e.message().to_string())
}

fn as_f64(v: &toml::Value) -> Result<f64, String> {
    match v {
        toml::Value::Integer(i) if *i > 0 => Ok(*i as f64),
        toml::Value::Float(f) if f.is_finite() && *f > 0.0 => Ok(*f),
        _ => Err("expected a positive number".into()),
    }
}

fn as_u32(v: &toml::Value) -> Result<u32, String> {
    match v {
        toml::Value::Integer(i) if *i >= 0 && *i <= u32::MAX as i64 => Ok(*i as u32),
        _ => Err("expected a non-negative integer".into()),
    }
}

fn as_bool(v: &toml::Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| "expected true or false".into())
}

impl DeviceParams {
    /// Overrides one field by name (as in a scenario's `[device]` table).
    /// Errors say what is wrong with the value, or that no such field
    /// exists for this kind of device.
    pub fn set(&mut self, key: &str, v: &toml::Value) -> Result<(), String> {
        match self {
            DeviceParams::Disk(p) => match key {
                "capacity" => p.capacity = as_size(v)?,
                "rpm" => p.rpm = as_u32(v)?,
                "heads" => p.heads = as_u32(v)?,
                "zones" => p.zones = as_u32(v)?,
                "rate_outer" => p.rate_outer = as_f64(v)?,
                "rate_inner" => p.rate_inner = as_f64(v)?,
                "seek_single" => p.seek_single = as_dur(v)?,
                "seek_avg" => p.seek_avg = as_dur(v)?,
                "seek_full" => p.seek_full = as_dur(v)?,
                "write_settle" => p.write_settle = as_dur(v)?,
                "head_switch" => p.head_switch = as_dur(v)?,
                "overhead" => p.overhead = as_dur(v)?,
                "hit_overhead" => p.hit_overhead = as_dur(v)?,
                "bus_rate" => p.bus_rate = as_f64(v)?,
                "cache_size" => p.cache_size = as_size(v)?,
                "cache_segments" => p.cache_segments = as_u32(v)?,
                "read_ahead" => p.read_ahead = as_size(v)?,
                "min_prefetch" => p.min_prefetch = as_size(v)?,
                "write_cache" => p.write_cache = as_bool(v)?,
                "destage_delay" => p.destage_delay = as_dur(v)?,
                "read_ahead_first" => p.read_ahead_first = as_bool(v)?,
                "ncq_depth" => p.ncq_depth = as_u32(v)?,
                "ncq_max_wait" => p.ncq_max_wait = as_dur(v)?,
                _ => return Err(format!("unknown disk field '{key}'")),
            },
            DeviceParams::Flash(p) => match key {
                "capacity" => p.capacity = as_size(v)?,
                "channels" => p.channels = as_u32(v)?,
                "dies" => p.dies = as_u32(v)?,
                "page_size" => p.page_size = as_size(v)?,
                "read_latency" => p.read_latency = as_dur(v)?,
                "program_latency" => p.program_latency = as_dur(v)?,
                "cmd_overhead" => p.cmd_overhead = as_dur(v)?,
                "bus_rate" => p.bus_rate = as_f64(v)?,
                "queue_depth" => p.queue_depth = as_u32(v)?,
                "write_buffer" => p.write_buffer = as_size(v)?,
                "coalesce_writes" => p.coalesce_writes = as_bool(v)?,
                "reports_rotational" => p.reports_rotational = as_bool(v)?,
                _ => return Err(format!("unknown flash field '{key}'")),
            },
        }
        Ok(())
    }

    /// Checks the parameters; returns `(field, why)` for the first problem.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        match self {
            DeviceParams::Disk(p) => p.validate(),
            DeviceParams::Flash(p) => p.validate(),
        }
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        match self {
            DeviceParams::Disk(p) => p.capacity,
            DeviceParams::Flash(p) => p.capacity,
        }
    }
}
