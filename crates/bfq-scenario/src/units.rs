//! Value types of scenario files: byte sizes, durations, disk positions and
//! random ranges, each parsed from the strings documented in
//! docs/scenarios.md ("128k", "1.5s", "50%", "64M..512M").
//!
//! Sizes are binary (k = 1024). Durations take `ns`, `us`, `ms`, `s`,
//! `min`; a bare number is milliseconds, as for scheduler settings.

use bfq_core::settings::parse_duration;
use bfq_core::Time;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A size in bytes, written `4096`, `"4k"`, `"128KiB"`, `"1.5M"`, `"5G"`,
/// `"2T"` (binary multiples).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

impl Size {
    /// Bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
    /// Whole 512-byte sectors (rounded up).
    pub fn sectors(self) -> u64 {
        self.0.div_ceil(bfq_core::SECTOR_BYTES)
    }
}

/// Parses a size string (see [`Size`]): the one size syntax of scenarios,
/// `--flow` and `--set`.
pub use bfq_core::settings::parse_size;

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as 4096, \"4k\", \"128M\" or \"5G\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom(format!("size {v} is negative")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// A duration in nanoseconds, written `"8ms"`, `"1.5s"`, `"500us"`,
/// `"100ns"`, `"2min"`; a bare number (integer or float) is milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Time);

impl Dur {
    /// Nanoseconds.
    pub fn ns(self) -> Time {
        self.0
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as \"8ms\", \"1.5s\" or \"500us\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                u64::try_from(v)
                    .ok()
                    .and_then(|v| v.checked_mul(bfq_core::MS))
                    .map(Dur)
                    .ok_or_else(|| E::custom(format!("duration {v} ms is out of range")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                if (0.0..1e13).contains(&v) {
                    Ok(Dur((v * bfq_core::MS as f64).round() as Time))
                } else {
                    Err(E::custom(format!("duration {v} ms is out of range")))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_duration(v).map(Dur).ok_or_else(|| {
                    E::custom(format!(
                        "invalid duration '{v}': expected e.g. \"8ms\", \"1.5s\", \"500us\""
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// A position or length on the device: a fraction of the capacity
/// (`"25%"`), an absolute size (`"10G"`, `4096`), or, for a start, a size
/// counted back from the end of the device (`"-128M"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Extent {
    /// Percent of the device capacity, 0..=100.
    Percent(f64),
    /// Bytes from the beginning.
    Bytes(u64),
    /// Bytes back from the end of the device.
    FromEnd(u64),
}

impl Extent {
    /// Resolves to bytes on a device of `capacity` bytes (not checked
    /// against the capacity).
    pub fn resolve(self, capacity: u64) -> u64 {
        match self {
            Extent::Percent(p) => ((capacity as f64) * p / 100.0).round() as u64,
            Extent::Bytes(b) => b,
            Extent::FromEnd(b) => capacity.saturating_sub(b),
        }
    }
}

/// Parses an [`Extent`].
pub fn parse_extent(s: &str) -> Result<Extent, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        return match p.trim().parse::<f64>() {
            Ok(x) if (0.0..=100.0).contains(&x) => Ok(Extent::Percent(x)),
            _ => Err(format!("invalid percentage '{s}': expected 0%..100%")),
        };
    }
    if let Some(r) = t.strip_prefix('-') {
        return parse_size(r).map(Extent::FromEnd);
    }
    parse_size(t).map(Extent::Bytes)
}

impl<'de> Deserialize<'de> for Extent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Extent;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a position such as \"25%\", \"10G\" or \"-128M\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Extent, E> {
                u64::try_from(v).map(Extent::Bytes).map_err(|_| {
                    E::custom("negative position: use \"-SIZE\" to count from the end")
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Extent, E> {
                Ok(Extent::Bytes(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Extent, E> {
                parse_extent(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A uniform random range `"LO..HI"` (inclusive) of sizes or durations; a
/// single value means a fixed one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range<T> {
    /// Smallest value.
    pub lo: T,
    /// Largest value.
    pub hi: T,
}

fn split_range(s: &str) -> (&str, Option<&str>) {
    match s.split_once("..") {
        Some((a, b)) => (a, Some(b.trim_start_matches('='))),
        None => (s, None),
    }
}

impl<'de> Deserialize<'de> for Range<Size> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Size::deserialize_range(d)?;
        Ok(v)
    }
}

impl Size {
    fn deserialize_range<'de, D: Deserializer<'de>>(d: D) -> Result<Range<Size>, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Range<Size>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size range such as \"64M..512M\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Range<Size>, E> {
                let s = Size(u64::try_from(v).map_err(|_| E::custom("negative size"))?);
                Ok(Range { lo: s, hi: s })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Range<Size>, E> {
                Ok(Range {
                    lo: Size(v),
                    hi: Size(v),
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Range<Size>, E> {
                let (a, b) = split_range(v);
                let lo = parse_size(a).map_err(E::custom)?;
                let hi = match b {
                    Some(b) => parse_size(b).map_err(E::custom)?,
                    None => lo,
                };
                if hi < lo {
                    return Err(E::custom(format!(
                        "range '{v}' has its end below its start"
                    )));
                }
                Ok(Range {
                    lo: Size(lo),
                    hi: Size(hi),
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Range<Dur> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Range<Dur>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration range such as \"1ms..200ms\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Range<Dur>, E> {
                let ms = u64::try_from(v).map_err(|_| E::custom("negative duration"))?;
                let d = Dur(ms.saturating_mul(bfq_core::MS));
                Ok(Range { lo: d, hi: d })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Range<Dur>, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Range<Dur>, E> {
                let (a, b) = split_range(v);
                let p = |x: &str| {
                    parse_duration(x)
                        .ok_or_else(|| E::custom(format!("invalid duration '{x}' in range '{v}'")))
                };
                let lo = p(a)?;
                let hi = match b {
                    Some(b) => p(b)?,
                    None => lo,
                };
                if hi < lo {
                    return Err(E::custom(format!(
                        "range '{v}' has its end below its start"
                    )));
                }
                Ok(Range {
                    lo: Dur(lo),
                    hi: Dur(hi),
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("128KiB").unwrap(), 128 << 10);
        assert_eq!(parse_size("1.5M").unwrap(), 3 << 19);
        assert_eq!(parse_size("5G").unwrap(), 5 << 30);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert!(parse_size("12x").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn extents() {
        assert_eq!(parse_extent("50%").unwrap().resolve(1000), 500);
        assert_eq!(parse_extent("-100").unwrap().resolve(1000), 900);
        assert_eq!(parse_extent("1k").unwrap().resolve(1 << 20), 1024);
        assert!(parse_extent("150%").is_err());
    }
}
