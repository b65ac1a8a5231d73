//! Named scheduler settings (`key=value`), parsed once at construction.
//!
//! Every scheduler takes its tunables from a [`Settings`] list so that the
//! scenario files, `--set key=value` and the engine API share one syntax:
//! integers (`16384`), durations (`8ms`, `125ms`, `2s`, `500us`, bare numbers
//! are milliseconds), booleans ([`BOOL_WORDS`]), words from a scheduler's
//! list and floats.
//!
//! Every numeric setting has a valid range, checked when the scheduler is
//! built: integers name theirs at the call ([`Settings::u64_in`],
//! [`Settings::u64_zero_or_in`]), words their list ([`Settings::word`]),
//! durations are `0..=`[`MAX_DURATION`] unless a narrower range is given
//! ([`Settings::duration_in`]). The settings a scheduler read, with their
//! kinds, defaults and ranges, are listed by [`Settings::read`].

use crate::error::SchedError;
use crate::types::{Time, MS, SEC, US};

/// The longest duration any setting takes: one hour. Every timer a
/// scheduler arms is a sum of such durations, so it never overflows a
/// [`Time`] below [`crate::MAX_TIME`].
pub const MAX_DURATION: Time = 3600 * SEC;

/// What kind of value a setting takes, with its valid range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingKind {
    /// An unsigned integer in `lo..=hi`.
    Integer {
        /// Smallest valid value.
        lo: u64,
        /// Largest valid value.
        hi: u64,
    },
    /// A duration in nanoseconds in `lo..=hi`.
    Duration {
        /// Shortest valid duration, in ns.
        lo: Time,
        /// Longest valid duration, in ns.
        hi: Time,
    },
    /// 0, or an unsigned integer in `lo..=hi` (0 switches something
    /// off or makes it automatic; the values between are refused).
    IntegerOrZero {
        /// Smallest valid value above 0.
        lo: u64,
        /// Largest valid value.
        hi: u64,
    },
    /// A finite number.
    Number,
    /// A boolean, written as any of [`BOOL_WORDS`].
    Bool,
    /// One of a list of words ([`Settings::word`]).
    Word {
        /// The words, one per value, in the scheduler's order.
        names: Vec<&'static str>,
        /// Other spellings accepted for the same values.
        aliases: Vec<&'static str>,
    },
    /// Free text (keys read by pattern, e.g. per-flow values).
    Text,
}

/// Every spelling of a boolean setting: true, then false.
pub const BOOL_WORDS: [(&str, &str); 4] =
    [("1", "0"), ("true", "false"), ("on", "off"), ("yes", "no")];

impl SettingKind {
    /// The kind and its valid values as `bfq schedulers NAME` lists them
    /// (`integer 1..=100`, `0 or integer 32..=16777216`, the words; a
    /// boolean's spellings are [`bool_spellings`]).
    pub fn describe(&self) -> String {
        match self {
            SettingKind::Integer { lo, hi } => format!("integer {lo}..={hi}"),
            SettingKind::IntegerOrZero { lo, hi } => format!("0 or integer {lo}..={hi}"),
            SettingKind::Duration { lo, hi } => {
                format!(
                    "duration {}..={}",
                    format_duration(*lo),
                    format_duration(*hi)
                )
            }
            SettingKind::Number => "number".into(),
            SettingKind::Bool => "boolean".into(),
            SettingKind::Word { names, aliases } => format!("word {}", word_list(names, aliases)),
            SettingKind::Text => "text".into(),
        }
    }
}

/// `kernel|bfq-plus-2014|2010 (also paper, plus)`.
fn word_list(names: &[&str], aliases: &[&str]) -> String {
    let mut s = names.join("|");
    if !aliases.is_empty() {
        s += &format!(" (also {})", aliases.join(", "));
    }
    s
}

/// `1/0, true/false, on/off, yes/no`: every spelling of a boolean.
pub fn bool_spellings() -> String {
    let v: Vec<String> = BOOL_WORDS.iter().map(|(t, f)| format!("{t}/{f}")).collect();
    v.join(", ")
}

/// One setting a scheduler read: key, kind and range, default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingInfo {
    /// The key (lower case, `_` separated).
    pub key: String,
    /// Kind and valid range.
    pub kind: SettingKind,
    /// The default, as it would be written.
    pub default: String,
}

/// An ordered list of `key=value` settings. Later entries override earlier
/// ones. [`Settings::finish`] reports any key no one asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    entries: Vec<(String, String, bool)>,
    scheduler: String,
    read: Vec<SettingInfo>,
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
            _ => Err(SchedError::NotKeyValue(kv.to_string())),
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

    /// Every setting read so far (by the scheduler being built), with its
    /// kind, range and default, in the order read.
    pub fn read(&self) -> &[SettingInfo] {
        &self.read
    }

    fn note(&mut self, key: &str, kind: SettingKind, default: String) {
        let key = normalize(key);
        if !self.read.iter().any(|i| i.key == key) {
            self.read.push(SettingInfo { key, kind, default });
        }
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let key = normalize(key);
        self.entries.iter_mut().find(|e| e.0 == key).map(|e| {
            e.2 = true;
            e.1.clone()
        })
    }

    /// The error for `value`, not valid for setting `key`: `why`.
    pub(crate) fn invalid(key: &str, value: &str, why: impl Into<String>) -> SchedError {
        SchedError::InvalidSetting {
            key: key.to_string(),
            value: value.to_string(),
            why: why.into(),
        }
    }

    /// An unsigned integer in `lo..=hi` (also accepts `k`, `M`, `G`
    /// suffixes as powers of 1024).
    pub fn u64_in(&mut self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64, SchedError> {
        self.note(key, SettingKind::Integer { lo, hi }, default.to_string());
        let Some(raw) = self.take(key) else {
            return Ok(default);
        };
        let range = format!("must be an integer in {lo}..={hi}");
        match parse_u64(&raw) {
            Some(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(Self::invalid(key, &raw, range)),
        }
    }

    /// 0 or an unsigned integer in `lo..=hi` (the syntax of
    /// [`Settings::u64_in`]); the values from 1 to `lo - 1` are refused.
    pub fn u64_zero_or_in(
        &mut self,
        key: &str,
        default: u64,
        lo: u64,
        hi: u64,
    ) -> Result<u64, SchedError> {
        self.note(
            key,
            SettingKind::IntegerOrZero { lo, hi },
            default.to_string(),
        );
        let Some(raw) = self.take(key) else {
            return Ok(default);
        };
        match parse_u64(&raw) {
            Some(v) if v == 0 || (lo..=hi).contains(&v) => Ok(v),
            _ => Err(Self::invalid(
                key,
                &raw,
                format!("must be 0 or an integer in {lo}..={hi}"),
            )),
        }
    }

    /// A floating-point setting.
    pub fn f64(&mut self, key: &str, default: f64) -> Result<f64, SchedError> {
        self.note(key, SettingKind::Number, default.to_string());
        match self.take(key) {
            None => Ok(default),
            Some(v) => match v.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                _ => Err(Self::invalid(key, &v, "expected a number")),
            },
        }
    }

    /// A boolean setting: any spelling of [`BOOL_WORDS`], in any case.
    pub fn bool(&mut self, key: &str, default: bool) -> Result<bool, SchedError> {
        self.note(key, SettingKind::Bool, u8::from(default).to_string());
        let Some(v) = self.take(key) else {
            return Ok(default);
        };
        parse_bool(&v).ok_or_else(|| {
            Self::invalid(key, &v, format!("expected a boolean: {}", bool_spellings()))
        })
    }

    /// A word setting: one of `words`, each spelling with its value (the
    /// first spelling of a value is its name, listed and used for the
    /// default; any later one is an alias). The one list the value is
    /// parsed with, listed by [`Settings::read`] and named in the error.
    pub fn word<T: Copy + PartialEq>(
        &mut self,
        key: &str,
        default: T,
        words: &[(&'static str, T)],
    ) -> Result<T, SchedError> {
        let (mut names, mut aliases, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for &(w, v) in words {
            if values.contains(&v) {
                aliases.push(w);
            } else {
                values.push(v);
                names.push(w);
            }
        }
        let default_name = words
            .iter()
            .find(|(_, v)| *v == default)
            .map_or("", |w| w.0);
        let why = format!("expected {}", word_list(&names, &aliases));
        self.note(
            key,
            SettingKind::Word { names, aliases },
            default_name.to_string(),
        );
        let Some(raw) = self.take(key) else {
            return Ok(default);
        };
        match words.iter().find(|(w, _)| *w == raw) {
            Some(&(_, v)) => Ok(v),
            None => Err(Self::invalid(key, &raw, why)),
        }
    }

    /// A duration setting in nanoseconds in `0..=`[`MAX_DURATION`]: `8ms`,
    /// `1.5s`, `500us`, `100ns`; a bare number is milliseconds (as the
    /// kernel's sysfs files).
    pub fn duration(&mut self, key: &str, default: Time) -> Result<Time, SchedError> {
        self.duration_in(key, default, 0, MAX_DURATION)
    }

    /// A duration setting in `lo..=hi` nanoseconds.
    pub fn duration_in(
        &mut self,
        key: &str,
        default: Time,
        lo: Time,
        hi: Time,
    ) -> Result<Time, SchedError> {
        self.note(
            key,
            SettingKind::Duration { lo, hi },
            format_duration(default),
        );
        let Some(raw) = self.take(key) else {
            return Ok(default);
        };
        match parse_duration(&raw) {
            Some(v) if (lo..=hi).contains(&v) => Ok(v),
            Some(_) => Err(Self::invalid(
                key,
                &raw,
                format!(
                    "must be a duration in {}..={}",
                    format_duration(lo),
                    format_duration(hi)
                ),
            )),
            None => Err(Self::invalid(
                key,
                &raw,
                "expected a duration such as 8ms, 1.5s or 500us",
            )),
        }
    }

    /// A string setting, any text (keys read by pattern; a setting with a
    /// list of values is a [`Settings::word`]).
    pub fn string(&mut self, key: &str, default: &str) -> String {
        self.note(key, SettingKind::Text, default.to_string());
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

/// A setting's key as the schedulers match it: trimmed, `-` as `_`,
/// lower case.
pub fn normalize(key: &str) -> String {
    key.trim().replace('-', "_").to_ascii_lowercase()
}

/// Parses an unsigned integer with an optional binary suffix (see
/// [`parse_size`]).
pub fn parse_u64(s: &str) -> Option<u64> {
    parse_size(s).ok()
}

/// Parses a size in bytes: `4096`, `4k`, `128KiB`, `1.5M`, `5G`, `2T`
/// (binary multiples; `b`/`ib` suffixes optional). The one size syntax of
/// scenario files, `--flow` and scheduler settings.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let lower = t.to_ascii_lowercase();
    let lower = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower)
        .to_string();
    let (num, mult): (&str, u64) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1 << 10),
        Some('m') => (&lower[..lower.len() - 1], 1 << 20),
        Some('g') => (&lower[..lower.len() - 1], 1 << 30),
        Some('t') => (&lower[..lower.len() - 1], 1 << 40),
        Some(_) => (&lower[..], 1),
        None => return Err("empty size".into()),
    };
    let num = num.trim();
    if let Ok(v) = num.parse::<u64>() {
        return v
            .checked_mul(mult)
            .ok_or_else(|| format!("size '{s}' is too large"));
    }
    match num.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x * (mult as f64) < 1.8e19 => {
            Ok((x * mult as f64).round() as u64)
        }
        _ => Err(format!(
            "invalid size '{s}': expected bytes such as 4096, \"4k\", \"128M\", \"5G\""
        )),
    }
}

/// Writes a duration in the largest unit that keeps it whole (`8ms`,
/// `1s`, `1500us`, `0`).
pub fn format_duration(ns: Time) -> String {
    if ns == 0 {
        return "0".into();
    }
    for (unit, mult) in [("s", SEC), ("ms", MS), ("us", US)] {
        if ns / mult * mult == ns {
            return format!("{}{unit}", ns / mult);
        }
    }
    format!("{ns}ns")
}

/// Parses a boolean: any spelling of [`BOOL_WORDS`], in any case. The one
/// boolean syntax of scheduler settings, `--flow` and fio job files.
pub fn parse_bool(s: &str) -> Option<bool> {
    let lower = s.trim().to_ascii_lowercase();
    BOOL_WORDS.iter().find_map(|&(t, f)| match lower.as_str() {
        x if x == t => Some(true),
        x if x == f => Some(false),
        _ => None,
    })
}

/// The units of a duration ([`parse_duration`]) and their lengths in ns.
pub const DURATION_UNITS: [(&str, Time); 8] = [
    ("ns", 1),
    ("us", US),
    ("µs", US),
    ("ms", MS),
    ("s", SEC),
    ("m", 60 * SEC),
    ("min", 60 * SEC),
    ("h", 3600 * SEC),
];

/// Parses a duration to ns: a decimal number and one unit of
/// [`DURATION_UNITS`] (`8ms`, `1.5s`, `500us`, `100ns`, `2min`, `1h`); a
/// bare number is milliseconds.
pub fn parse_duration(s: &str) -> Option<Time> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let x: f64 = num.parse().ok()?;
    let unit = unit.trim();
    let mult = match DURATION_UNITS.iter().find(|(u, _)| *u == unit) {
        Some(&(_, m)) => m as f64,
        None if unit.is_empty() => MS as f64,
        None => return None,
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
    fn booleans_have_one_syntax() {
        for t in ["1", "true", "on", "yes", "TRUE", " On "] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "false", "off", "no", "No"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("maybe"), None);
        let mut s = Settings::from_pairs([("a", "yes"), ("b", "maybe")]);
        assert!(s.bool("a", false).unwrap());
        let e = s.bool("b", false).unwrap_err().to_string();
        assert!(e.contains(&bool_spellings()), "{e}");
    }

    #[test]
    fn parses_and_reports_unknown() {
        let mut s =
            Settings::from_pairs([("slice-idle", "2ms"), ("max_budget", "4k"), ("zzz", "1")]);
        s.for_scheduler("bfq");
        assert_eq!(s.duration("slice_idle", 0).unwrap(), 2 * MS);
        assert_eq!(s.u64_in("max_budget", 0, 0, 1 << 20).unwrap(), 4096);
        assert!(s.bool("low_latency", true).unwrap());
        let e = s.finish().unwrap_err();
        assert_eq!(e.to_string(), "scheduler 'bfq' has no setting 'zzz'");
    }

    #[test]
    fn bad_values_are_errors() {
        let mut s = Settings::from_pairs([("a", "x"), ("b", "3parsecs"), ("c", "maybe")]);
        assert!(s.u64_in("a", 0, 0, 10).is_err());
        assert!(s.duration("b", 0).is_err());
        assert!(s.bool("c", false).is_err());
        assert_eq!(parse_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_duration("125"), Some(125 * MS));
        assert_eq!(parse_duration("1h"), Some(3600 * SEC));
        assert_eq!(parse_duration("2min"), parse_duration("120s"));
        assert_eq!(parse_duration("1d"), None);
        assert!(Settings::parse_pair("novalue").is_err());
    }

    #[test]
    fn out_of_range_values_name_the_setting_and_the_range() {
        let mut s = Settings::from_pairs([("d", "10000000000s"), ("n", "18446744073709551615")]);
        let e = s.duration("d", MS).unwrap_err().to_string();
        assert_eq!(e, "setting d=10000000000s: must be a duration in 0..=3600s");
        let e = s.u64_in("n", 1, 1, 64).unwrap_err().to_string();
        assert_eq!(
            e,
            "setting n=18446744073709551615: must be an integer in 1..=64"
        );
        let mut s = Settings::from_pairs([("d", "2h")]);
        assert!(s.duration_in("d", 0, MS, SEC).is_err());
        assert_eq!(s.read()[0].kind, SettingKind::Duration { lo: MS, hi: SEC });
        assert_eq!(format_duration(1500 * US), "1500us");
    }

    /// What a setting lists is what it takes: the gap of a zero-or-range
    /// integer, every word and alias, every boolean spelling; errors echo
    /// the value as given.
    #[test]
    fn listed_ranges_and_words_are_the_ones_checked() {
        let mut s = Settings::from_pairs([("m", "+5"), ("w", "plus"), ("x", "nosuch")]);
        let e = s.u64_zero_or_in("m", 0, 32, 64).unwrap_err().to_string();
        assert_eq!(e, "setting m=+5: must be 0 or an integer in 32..=64");
        let kind = SettingKind::IntegerOrZero { lo: 32, hi: 64 };
        assert_eq!(s.read()[0].kind, kind);
        assert_eq!(kind.describe(), "0 or integer 32..=64");
        for (v, ok) in [
            ("0", true),
            ("31", false),
            ("32", true),
            ("64", true),
            ("65", false),
        ] {
            let mut s = Settings::from_pairs([("m", v)]);
            assert_eq!(s.u64_zero_or_in("m", 0, 32, 64).is_ok(), ok, "{v}");
        }
        let words = [("a", 1), ("plus", 2), ("b", 1)];
        assert_eq!(s.word("w", 1, &words), Ok(2));
        let e = s.word("x", 1, &words).unwrap_err().to_string();
        assert_eq!(e, "setting x=nosuch: expected a|plus (also b)");
        assert_eq!(s.read()[1].kind.describe(), "word a|plus (also b)");
        assert_eq!(s.read()[1].default, "a");
        for (t, f) in BOOL_WORDS {
            let mut s = Settings::from_pairs([("t", t.to_uppercase()), ("f", f.to_string())]);
            assert_eq!(
                (s.bool("t", false), s.bool("f", true)),
                (Ok(true), Ok(false))
            );
        }
        let e = Settings::from_pairs([("b", "y")])
            .bool("b", true)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "setting b=y: expected a boolean: 1/0, true/false, on/off, yes/no"
        );
        for bad in ["max_budget", "=5", " =5", ""] {
            let e = Settings::parse_pair(bad).unwrap_err().to_string();
            assert_eq!(e, format!("'{bad}' is not a setting: expected KEY=VALUE"));
        }
    }
}
