//! The policy file: which processes get which weight, class and group.
//!
//! ```toml
//! idle_timeout = "10s"        # a flow ends after this long without I/O
//! group_weight = 100          # weight of a cgroup's group unless a rule says
//!
//! [[rule]]                     # the first rule whose every key matches wins
//! cgroup = "/system.slice/backup.service"   # cgroup path prefix (v2 path)
//! uid = 1000                   # caller's uid
//! exe = "rsync"                # executable's file name (/proc/PID/exe)
//! weight = 50                  # flow weight 1..=1000
//! class = "idle"               # rt | be | idle
//! level = 7                    # 0..=7
//! group = "backup"             # a named group instead of the cgroup's
//! group_weight = 100           # weight of the group the flow lands in
//! ```
//!
//! Without a rule (or for keys a rule leaves out) the flow's class and
//! level come from the process's I/O priority (`ioprio_get`, as set by
//! `ionice`), its weight from the level as in the kernel
//! ((8 - level) * 10), and its group is its cgroup's.

use bfq_engine::IoClass;
use serde::Deserialize;
use std::path::Path;

/// Default time without I/O after which a process's flow ends.
pub const DEFAULT_IDLE_TIMEOUT_NS: u64 = 10_000_000_000;
/// Bounds of `idle_timeout`: 100 ms ..= 1 h.
pub const IDLE_TIMEOUT_RANGE_NS: (u64, u64) = (100_000_000, 3_600_000_000_000);
/// Default weight of a group (the kernel's default cgroup io weight).
pub const DEFAULT_GROUP_WEIGHT: u32 = 100;
/// At most this many rules (a limit on everything).
pub const MAX_RULES: usize = 1024;

/// The parsed policy file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Nanoseconds without I/O after which a flow ends.
    pub idle_timeout_ns: u64,
    /// Weight of a cgroup's group when no rule sets one.
    pub group_weight: u32,
    /// Rules, first match wins.
    pub rules: Vec<Rule>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            idle_timeout_ns: DEFAULT_IDLE_TIMEOUT_NS,
            group_weight: DEFAULT_GROUP_WEIGHT,
            rules: Vec::new(),
        }
    }
}

/// One rule: what it matches, what it sets.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Matches a cgroup path equal to this or below it.
    pub cgroup: Option<String>,
    /// Matches the caller's uid.
    pub uid: Option<u32>,
    /// Matches the executable's file name.
    pub exe: Option<String>,
    /// Flow weight 1..=1000.
    pub weight: Option<u32>,
    /// `rt`, `be` or `idle`.
    pub class: Option<String>,
    /// Level 0..=7.
    pub level: Option<u8>,
    /// A named group (shared by every flow the rule matches).
    pub group: Option<String>,
    /// Weight of the flow's group, 1..=1000.
    pub group_weight: Option<u32>,
}

/// The file as read: its rules as tables, each read into a [`Rule`] on
/// its own ([`read_rules`]) so that an error names the rule.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    idle_timeout: Option<String>,
    group_weight: Option<u32>,
    #[serde(default)]
    rule: Vec<toml::Spanned<toml::Table>>,
}

/// Reads and checks each `[[rule]]` of `text` (the file's text, for the
/// line a rule starts on): an error names the rule by its number from 1
/// and its line, then the key (`rule 2 (line 7): unknown field `colour`,
/// expected one of ...`), where the TOML parser alone would give only a
/// line and column.
fn read_rules(text: &str, rules: Vec<toml::Spanned<toml::Table>>) -> Result<Vec<Rule>, String> {
    if rules.len() > MAX_RULES {
        return Err(format!("{} rules: at most {MAX_RULES}", rules.len()));
    }
    let mut out = Vec::with_capacity(rules.len());
    for (i, t) in rules.into_iter().enumerate() {
        let start = t.span().start.min(text.len());
        let line = text.as_bytes()[..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        let at = format!("rule {} (line {line})", i + 1);
        let r: Rule = toml::Value::Table(t.into_inner())
            .try_into()
            .map_err(|e: toml::de::Error| format!("{at}: {}", e.message().trim_end()))?;
        r.check(&at)?;
        out.push(r);
    }
    Ok(out)
}

/// What identifies a caller for matching.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// User id.
    pub uid: u32,
    /// cgroup v2 path (`/user.slice/...`), or v1's first hierarchy's.
    pub cgroup: String,
    /// File name of the executable.
    pub exe: String,
}

/// Parses a class name.
pub fn parse_class(s: &str) -> Option<IoClass> {
    match s {
        "rt" | "realtime" => Some(IoClass::Rt),
        "be" | "best-effort" => Some(IoClass::Be),
        "idle" => Some(IoClass::Idle),
        _ => None,
    }
}

fn check_weight(what: &str, w: Option<u32>) -> Result<(), String> {
    match w {
        Some(w) if !(1..=1000).contains(&w) => Err(format!("{what} = {w}: must be 1..=1000")),
        _ => Ok(()),
    }
}

impl Rule {
    /// Checks the values' ranges; errors start with `at`, which names
    /// the rule.
    fn check(&self, at: &str) -> Result<(), String> {
        let at = |e: String| format!("{at}: {e}");
        check_weight("weight", self.weight).map_err(at)?;
        check_weight("group_weight", self.group_weight).map_err(at)?;
        if let Some(c) = &self.class {
            parse_class(c).ok_or_else(|| at(format!("class = {c:?}: must be rt, be or idle")))?;
        }
        if let Some(l) = self.level {
            if l > 7 {
                return Err(at(format!("level = {l}: must be 0..=7")));
            }
        }
        if let Some(g) = &self.group {
            if g.is_empty() || g.len() > 255 {
                return Err(at("group: 1 to 255 characters".into()));
            }
        }
        Ok(())
    }

    /// Whether every key the rule gives matches the caller.
    pub fn matches(&self, c: &Caller) -> bool {
        self.uid.is_none_or(|u| u == c.uid)
            && self.exe.as_ref().is_none_or(|e| *e == c.exe)
            && self
                .cgroup
                .as_ref()
                .is_none_or(|p| cgroup_under(&c.cgroup, p))
    }
}

/// `path` is `prefix` or below it (component-wise: `/a/b` is under `/a`,
/// `/ab` is not).
fn cgroup_under(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        return true;
    }
    path == prefix || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

impl Policy {
    /// Parses and checks a policy file's text.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut p = Policy::default();
        if let Some(t) = f.idle_timeout {
            let ns = bfq_core::settings::parse_duration(&t)
                .ok_or_else(|| format!("idle_timeout = {t:?}: not a duration (e.g. \"10s\")"))?;
            let (lo, hi) = IDLE_TIMEOUT_RANGE_NS;
            if !(lo..=hi).contains(&ns) {
                return Err(format!("idle_timeout = {t:?}: must be 100ms..=1h"));
            }
            p.idle_timeout_ns = ns;
        }
        if let Some(w) = f.group_weight {
            check_weight("group_weight", Some(w))?;
            p.group_weight = w;
        }
        p.rules = read_rules(text, f.rule)?;
        Ok(p)
    }

    /// Reads a policy file.
    pub fn load(path: &Path) -> Result<Policy, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Policy::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The first rule matching the caller.
    pub fn rule_for(&self, c: &Caller) -> Option<&Rule> {
        self.rules.iter().find(|r| r.matches(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(uid: u32, cgroup: &str, exe: &str) -> Caller {
        Caller {
            uid,
            cgroup: cgroup.into(),
            exe: exe.into(),
        }
    }

    #[test]
    fn parses_and_matches_first_rule() {
        let p = Policy::parse(
            r#"
            idle_timeout = "2s"
            group_weight = 200
            [[rule]]
            cgroup = "/system.slice/backup.service"
            weight = 50
            class = "idle"
            [[rule]]
            uid = 1000
            exe = "dd"
            weight = 300
            group = "batch"
            group_weight = 400
            [[rule]]
            uid = 1000
            level = 0
            "#,
        )
        .unwrap();
        assert_eq!(p.idle_timeout_ns, 2_000_000_000);
        assert_eq!(p.group_weight, 200);
        let r = p
            .rule_for(&caller(0, "/system.slice/backup.service/sub", "tar"))
            .unwrap();
        assert_eq!(r.weight, Some(50));
        assert!(p
            .rule_for(&caller(0, "/system.slice/backup.servicex", "tar"))
            .is_none());
        assert_eq!(
            p.rule_for(&caller(1000, "/user.slice", "dd"))
                .unwrap()
                .group
                .as_deref(),
            Some("batch")
        );
        assert_eq!(
            p.rule_for(&caller(1000, "/user.slice", "cat"))
                .unwrap()
                .level,
            Some(0)
        );
        assert!(p.rule_for(&caller(1001, "/", "dd")).is_none());
    }

    #[test]
    fn rejects_bad_values_and_unknown_keys() {
        for (text, want) in [
            ("[[rule]]\nweight = 0", "weight = 0"),
            ("[[rule]]\nweight = 1001", "weight = 1001"),
            ("[[rule]]\nclass = \"fast\"", "class"),
            ("[[rule]]\nlevel = 8", "level = 8"),
            ("[[rule]]\ncolour = 1", "colour"),
            ("idle_timeout = \"1ms\"", "idle_timeout"),
            ("idle_timeout = \"soon\"", "idle_timeout"),
            ("group_weight = 0", "group_weight"),
            ("weigth = 3", "weigth"),
        ] {
            let e = Policy::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn errors_in_a_rule_name_the_rule_its_line_and_the_key() {
        let text =
            "idle_timeout = \"2s\"\n\n[[rule]]\nuid = 0\n\n[[rule]]\nexe = \"dd\"\ncolour = 1\n";
        let e = Policy::parse(text).unwrap_err();
        assert!(
            e.starts_with("rule 2 (line 6): unknown field `colour`, expected one of"),
            "{e}"
        );
        let e = Policy::parse("[[rule]]\nuid = \"root\"\n").unwrap_err();
        assert!(
            e.starts_with("rule 1 (line 1): invalid type: string"),
            "{e}"
        );
        let e = Policy::parse("[[rule]]\n[[rule]]\nlevel = 300\n").unwrap_err();
        assert!(e.starts_with("rule 2 (line 2): "), "{e}");
        assert!(e.contains("300"), "{e}");
        let e = Policy::parse("[[rule]]\nuid = 1\n[[rule]]\nweight = 0\n").unwrap_err();
        assert_eq!(e, "rule 2 (line 3): weight = 0: must be 1..=1000");
    }

    #[test]
    fn cgroup_prefix_is_component_wise() {
        assert!(cgroup_under("/a/b", "/a"));
        assert!(cgroup_under("/a", "/a/"));
        assert!(!cgroup_under("/ab", "/a"));
        assert!(cgroup_under("/anything", "/"));
    }
}
