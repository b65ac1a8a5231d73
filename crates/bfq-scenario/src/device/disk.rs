//! Parameters of the rotational disk model (the model itself, and what
//! each parameter does: bfq-sim's `device::disk`).

use bfq_core::Time;
use serde::Serialize;

/// Parameters of a rotational disk. Every field may be overridden in a
/// scenario's `[device]` table (docs/scenarios.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiskParams {
    /// Capacity in bytes.
    pub capacity: u64,
    /// Spindle speed.
    pub rpm: u32,
    /// Recording surfaces (heads).
    pub heads: u32,
    /// Number of recording zones.
    pub zones: u32,
    /// Sustained sequential rate at the outer edge (sector 0), MB/s (10^6).
    pub rate_outer: f64,
    /// Sustained sequential rate at the inner edge, MB/s.
    pub rate_inner: f64,
    /// Single-cylinder seek, ns.
    pub seek_single: Time,
    /// Average seek, ns.
    pub seek_avg: Time,
    /// Full-stroke seek, ns.
    pub seek_full: Time,
    /// Extra settle time of a write seek, ns.
    pub write_settle: Time,
    /// Head switch time, ns (also the track skew).
    pub head_switch: Time,
    /// Controller overhead per command going to the media, ns.
    pub overhead: Time,
    /// Controller overhead of a command served from the cache, ns.
    pub hit_overhead: Time,
    /// Interface rate, MB/s (cache hits and write-back transfers).
    pub bus_rate: f64,
    /// Cache size in bytes (read segments and write-back buffer share it).
    pub cache_size: u64,
    /// Read cache segments.
    pub cache_segments: u32,
    /// Read-ahead after a read, bytes (0 disables the read cache).
    pub read_ahead: u64,
    /// Minimum read-ahead, bytes: the drive finishes reading this much
    /// after a read before it serves another command (0: read-ahead is
    /// abandoned as soon as a command needs the head).
    pub min_prefetch: u64,
    /// Write-back caching (writes complete on arrival).
    pub write_cache: bool,
    /// Idle time before the drive starts writing cached data to the
    /// media, ns, 0..=1 s. 0 (the presets): at once, as the drives'
    /// manuals describe write-back caching; a positive delay models a
    /// drive that defers it (a power-saving "delayed write").
    pub destage_delay: Time,
    /// After a read the drive finishes its read-ahead (up to `read_ahead`)
    /// before it writes cached data to the media; a host command still
    /// stops the read-ahead at once. `false`: destaging cuts the
    /// read-ahead short.
    pub read_ahead_first: bool,
    /// Internal queue depth; 1 means no NCQ.
    pub ncq_depth: u32,
    /// NCQ aging: a command waiting longer than this is served first, ns
    /// (0: pure shortest-positioning-time-first).
    pub ncq_max_wait: Time,
}

impl DiskParams {
    /// Checks ranges; returns the first problem as `(field, why)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let pos = |f: &'static str, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err((f, "must be positive".to_string()))
            }
        };
        pos("capacity", self.capacity >= 1 << 20)?;
        pos("rpm", self.rpm > 0)?;
        pos("heads", self.heads > 0)?;
        pos("zones", self.zones > 0)?;
        pos("rate_outer", self.rate_outer > 0.0)?;
        pos("rate_inner", self.rate_inner > 0.0)?;
        pos("bus_rate", self.bus_rate > 0.0)?;
        pos("cache_segments", self.cache_segments > 0)?;
        if self.rate_inner > self.rate_outer {
            return Err((
                "rate_inner",
                "must not exceed rate_outer (inner tracks hold fewer sectors)".into(),
            ));
        }
        if !(self.seek_single <= self.seek_avg && self.seek_avg <= self.seek_full) {
            return Err((
                "seek_avg",
                "need seek_single <= seek_avg <= seek_full".into(),
            ));
        }
        if self.destage_delay > bfq_core::SEC {
            return Err(("destage_delay", "must be in 0..=1s".into()));
        }
        if self.ncq_depth == 0 || self.ncq_depth > 32 {
            return Err(("ncq_depth", "must be in 1..=32 (1 = no NCQ)".into()));
        }
        Ok(())
    }
}
