//! Named scheduler settings (`key=value`), parsed once at construction.
//!
//! Every scheduler takes its tunables from a [`Settings`] list so that the
//! scenario files, `--set key=value` and the engine API share one syntax:
//! integers (`16384`), durations (`8ms`, `125ms`, `2s`, `500us`, bare numbers
//! are milliseconds), booleans (`1/0`, `true/false`, `on/off`) and floats.

use crate::error::SchedError;
use crate::types::{Time, MS, SEC, US};

/// An ordered list of `key=value` settings. Later entries override earlier
/// ones. [`Settings::finish`] reports any key no one asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    entries: Vec<(String, String, bool)>,
    scheduler: String,
}

impl Settings {
    /// An empty list.
    pub fn new() -> Self {
        Settings::default()
    }

    /// Builds from `(key, value)` pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut s = Settings::new();
        for (k, v) in pairs {
            s.set(k, v);
        }
        s
    }

    /// Parses `key=value`.
    pub fn parse_pair(kv: &str) -> Result<(String, String), SchedError> {
        match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(SchedError::InvalidSetting {
                key: kv.to_string(),
                value: String::new(),
                why: "expected key=value".into(),
            }),
        }
    }

    /// Adds or overrides a setting.
    pub fn set<K: Into<String>, V: Into<String>>(&mut self, key: K, value: V) {
        let key = normalize(&key.into());
        let value = value.into();
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == key) {
            e.1 = value;
        } else {
            self.entries.push((key, value, false));
        }
    }

    /// All pairs, in insertion order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|e| (e.0.as_str(), e.1.as_str()))
    }

    /// Whether no settings are present.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Names the scheduler reading these settings (for error messages).
    pub fn for_scheduler(&mut self, name: &str) {
        self.scheduler = name.to_string();
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let key = normalize(key);
        self.entries.iter_mut().find(|e| e.0 == key).map(|e| {
            e.2 = true;
            e.1.clone()
        })
    }

    fn invalid(key: &str, value: &str, why: impl Into<String>) -> SchedError {
        SchedError::InvalidSetting {
            key: key.to_string(),
            value: value.to_string(),
            why: why.into(),
        }
    }

    /// An unsigned integer setting (also accepts `k`, `M`, `G` suffixes as
    /// powers of 1024).
    pub fn u64(&mut self, key: &str, default: u64) -> Result<u64, SchedError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => {
                parse_u64(&v).ok_or_else(|| Self::invalid(key, &v, "expected an unsigned integer"))
            }
        }
    }

    /// An unsigned integer in `lo..=hi`.
    pub fn u64_in(&mut self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64, SchedError> {
        let v = self.u64(key, default)?;
        if v < lo || v > hi {
            return Err(Self::invalid(
                key,
                &v.to_string(),
                format!("must be in {lo}..={hi}"),
            ));
        }
        Ok(v)
    }

    /// A floating-point setting.
    pub fn f64(&mut self, key: &str, default: f64) -> Result<f64, SchedError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => match v.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                _ => Err(Self::invalid(key, &v, "expected a number")),
            },
        }
    }

    /// A boolean setting: `1/0`, `true/false`, `on/off`, `yes/no`.
    pub fn bool(&mut self, key: &str, default: bool) -> Result<bool, SchedError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "on" | "yes" => Ok(true),
                "0" | "false" | "off" | "no" => Ok(false),
                _ => Err(Self::invalid(key, &v, "expected 1/0, true/false or on/off")),
            },
        }
    }

    /// A duration setting in nanoseconds: `8ms`, `1.5s`, `500us`, `100ns`;
    /// a bare number is milliseconds (as the kernel's sysfs files).
    pub fn duration(&mut self, key: &str, default: Time) -> Result<Time, SchedError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => parse_duration(&v).ok_or_else(|| {
                Self::invalid(key, &v, "expected a duration such as 8ms, 1.5s or 500us")
            }),
        }
    }

    /// A string setting.
    pub fn string(&mut self, key: &str, default: &str) -> String {
        self.take(key).unwrap_or_else(|| default.to_string())
    }

    /// Fails on the first setting no one read.
    pub fn finish(self) -> Result<(), SchedError> {
        match self.entries.into_iter().find(|e| !e.2) {
            None => Ok(()),
            Some((key, _, _)) => Err(SchedError::UnknownSetting {
                scheduler: self.scheduler,
                key,
            }),
        }
    }
}

fn normalize(key: &str) -> String {
    key.trim().replace('-', "_").to_ascii_lowercase()
}

/// Parses an unsigned integer with optional binary suffix k/M/G (x1024^n).
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1u64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (&s[..], 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Parses a duration (`8ms`, `1.5s`, `500us`, `100ns`, bare = ms) to ns.
pub fn parse_duration(s: &str) -> Option<Time> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let x: f64 = num.parse().ok()?;
    let mult = match unit.trim() {
        "" | "ms" => MS as f64,
        "s" => SEC as f64,
        "us" | "µs" => US as f64,
        "ns" => 1.0,
        "min" | "m" => 60.0 * SEC as f64,
        _ => return None,
    };
    let ns = x * mult;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return None;
    }
    Some(ns.round() as Time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_unknown() {
        let mut s =
            Settings::from_pairs([("slice-idle", "2ms"), ("max_budget", "4k"), ("zzz", "1")]);
        s.for_scheduler("bfq");
        assert_eq!(s.duration("slice_idle", 0).unwrap(), 2 * MS);
        assert_eq!(s.u64("max_budget", 0).unwrap(), 4096);
        assert!(s.bool("low_latency", true).unwrap());
        let e = s.finish().unwrap_err();
        assert_eq!(e.to_string(), "scheduler 'bfq' has no setting 'zzz'");
    }

    #[test]
    fn bad_values_are_errors() {
        let mut s = Settings::from_pairs([("a", "x"), ("b", "3parsecs"), ("c", "maybe")]);
        assert!(s.u64("a", 0).is_err());
        assert!(s.duration("b", 0).is_err());
        assert!(s.bool("c", false).is_err());
        assert_eq!(parse_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_duration("125"), Some(125 * MS));
        assert!(Settings::parse_pair("novalue").is_err());
    }
}
