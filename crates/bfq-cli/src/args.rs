//! Argument parsers shared by the subcommands: run lengths, sizes and
//! durations in the one syntax of scenario files and scheduler settings;
//! and the `--json` / `--trace` destinations of `bfq sim` and `bfq run`.

/// The longest run any command takes: a week.
pub const MAX_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// A run length in seconds: a finite number in (0, one week].
pub fn seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= MAX_SECONDS => Ok(x),
        Ok(_) => Err(format!(
            "'{s}' is not a run length: give seconds above 0 and at most {MAX_SECONDS}"
        )),
        Err(_) => Err(format!("'{s}' is not a number of seconds")),
    }
}

/// A size in bytes (`4096`, `4k`, `128KiB`, `1.5M`, `5G`), above zero.
pub fn size(s: &str) -> Result<u64, String> {
    match bfq_core::settings::parse_size(s)? {
        0 => Err(format!("size '{s}' must be above zero")),
        v => Ok(v),
    }
}

/// `--kernel-groups per-flow|per-process|one`.
pub fn kernel_groups(s: &str) -> Result<bfq_real::KernelGroups, String> {
    bfq_real::KernelGroups::parse(s)
        .ok_or_else(|| format!("'{s}' is not per-flow, per-process or one"))
}

/// `local` or `dispatcher` (engine submit mode, docs/engine.md).
pub fn submit_mode(s: &str) -> Result<bfq_engine::SubmitMode, String> {
    match s {
        "local" => Ok(bfq_engine::SubmitMode::Local),
        "dispatcher" => Ok(bfq_engine::SubmitMode::Dispatcher),
        _ => Err(format!("'{s}' is not local or dispatcher")),
    }
}

/// `--coop-taskrun auto|on|off`.
pub fn coop_taskrun(s: &str) -> Result<bfq_engine::CoopTaskrun, String> {
    match s {
        "auto" => Ok(bfq_engine::CoopTaskrun::Auto),
        "on" => Ok(bfq_engine::CoopTaskrun::On),
        "off" => Ok(bfq_engine::CoopTaskrun::Off),
        _ => Err(format!("'{s}' is not auto, on or off")),
    }
}

/// `--client threads|tpc`.
pub fn engine_client(s: &str) -> Result<bfq_real::EngineClient, String> {
    bfq_real::EngineClient::parse(s).ok_or_else(|| format!("'{s}' is not threads or tpc"))
}

/// `--kernel-client uring|pread`.
pub fn kernel_client(s: &str) -> Result<bfq_real::KernelClient, String> {
    bfq_real::KernelClient::parse(s).ok_or_else(|| format!("'{s}' is not uring or pread"))
}

/// A duration: a number and one unit of ns, us, ms, s, m or min, h
/// (`250ms`, `1.5s`, `2min`, `1h`); a bare number is milliseconds
/// (`bfq_core::settings::DURATION_UNITS`).
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    bfq_core::settings::parse_duration(s)
        .map(std::time::Duration::from_nanos)
        .ok_or_else(|| {
            format!(
                "'{s}' is not a duration: a number and one unit of ns, us, ms, s, m or \
                 min, h (e.g. 250ms, 1.5s, 2min, 1h); a bare number is milliseconds"
            )
        })
}

/// Adds each `--set KEY=VALUE` to `settings`, later ones overriding; an
/// argument that is not `KEY=VALUE` is an error quoting it as given (a
/// bad value is refused when the scheduler is built, quoting it too).
pub fn apply_sets(settings: &mut bfq_core::Settings, sets: &[String]) -> anyhow::Result<()> {
    for kv in sets {
        let (k, v) =
            bfq_core::Settings::parse_pair(kv).map_err(|e| anyhow::anyhow!("--set: {e}"))?;
        settings.set(k, v);
    }
    Ok(())
}

/// Adds each `--set` to `settings` as [`apply_sets`] does (over a
/// scenario's settings) and returns the `--set`s alone, parsed once:
/// [`scenario_sched_error`] tells them from the file's.
pub fn overlay_sets(
    settings: &mut bfq_core::Settings,
    sets: &[String],
) -> anyhow::Result<bfq_core::Settings> {
    let mut given = bfq_core::Settings::new();
    apply_sets(&mut given, sets)?;
    for (k, v) in given.pairs() {
        settings.set(k, v);
    }
    Ok(given)
}

/// A scheduler error for the user: an unknown name lists the known ones;
/// an unknown setting names the closest setting the scheduler has (see
/// [`setting_hint`]) and where they are listed.
pub fn sched_error(e: bfq_core::SchedError) -> anyhow::Error {
    match e {
        bfq_core::SchedError::UnknownScheduler(n) => anyhow::anyhow!(
            "unknown scheduler '{n}' (known: {}; for `bfq run` and `bfq bench-engine` \
             also kernel:{})",
            bfq_schedulers::names(),
            bfq_real::desc::KERNEL_SCHEDULERS.join(", kernel:")
        ),
        bfq_core::SchedError::UnknownSetting { scheduler, key } => anyhow::anyhow!(
            "scheduler '{scheduler}' has no setting '{key}' ({})",
            setting_hint(&scheduler, &key)
        ),
        e => anyhow::Error::new(e),
    }
}

/// What to say about setting `key` that scheduler `name` does not have:
/// that it has none; or the setting whose name is closest to `key` (at
/// most a third of its letters changed, at least one: a typo such as
/// `max_budgte`; for a per-flow or per-group key such as `max_bsp.g1`,
/// the family closest to its part before the dot), and that `bfq
/// schedulers NAME` lists them all.
pub fn setting_hint(name: &str, key: &str) -> String {
    let keys: Vec<String> = bfq_schedulers::settings_of(name)
        .map(|infos| infos.into_iter().map(|i| i.key).collect())
        .unwrap_or_default();
    if keys.is_empty() {
        return format!("{name} has no settings; `bfq schedulers` lists the schedulers");
    }
    let key = bfq_core::settings::normalize(key);
    let (family, node) = match key.find(['.', ':', '@']) {
        Some(i) => (&key[..i], &key[i..]),
        None => (key.as_str(), ""),
    };
    let near = |cands: &mut dyn Iterator<Item = &str>, k: &str| {
        cands
            .map(|c| (strsim::osa_distance(c, k), c.to_string()))
            .filter(|(d, c)| *d <= (c.len() / 3).max(1))
            .min_by_key(|(d, _)| *d)
    };
    let guess = if node.is_empty() {
        near(&mut keys.iter().map(String::as_str), &key).map(|(_, k)| k)
    } else {
        let families = bfq_schedulers::node_settings_of(name);
        near(&mut families.iter().copied(), family).map(|(_, f)| f + node)
    };
    match guess {
        Some(k) => format!("did you mean '{k}'? `bfq schedulers {name}` lists its settings"),
        None => format!("`bfq schedulers {name}` lists its settings"),
    }
}

/// [`sched_error`] for a scheduler a scenario file chose: an error about
/// a setting its `[scheduler]` table gave (`from_file`; the command
/// line's `--set`s, `given` as [`overlay_sets`] returns them, did not
/// give it again) names the file and the table, so that the user knows
/// where to look.
pub fn scenario_sched_error(
    e: bfq_core::SchedError,
    file: &std::path::Path,
    from_file: &bfq_core::Settings,
    given: &bfq_core::Settings,
) -> anyhow::Error {
    use bfq_core::SchedError::{InvalidSetting, UnknownSetting};
    let key = match &e {
        UnknownSetting { key, .. } | InvalidSetting { key, .. } => Some(key.clone()),
        _ => None,
    };
    let has = |s: &bfq_core::Settings| {
        key.as_deref()
            .is_some_and(|k| s.pairs().any(|(sk, _)| sk == k))
    };
    let in_file = has(from_file) && !has(given);
    let e = sched_error(e);
    if in_file {
        e.context(format!("{}: [scheduler]", file.display()))
    } else {
        e
    }
}

/// Builds scheduler `name` with `settings` once, so that a bad name or
/// setting is refused with [`sched_error`]'s words before anything is
/// mounted or run.
pub fn check_scheduler(name: &str, settings: &bfq_core::Settings) -> anyhow::Result<()> {
    bfq_schedulers::build(name, settings)
        .map(drop)
        .map_err(sched_error)
}

/// Refuses a scheduler a real run cannot use, naming the known ones: a
/// name the registry does not have, or a `kernel:NAME` the kernel does
/// not (`kernel:` only where `kernel` is true).
pub fn check_backend(name: &str, kernel: bool) -> anyhow::Result<()> {
    match name.strip_prefix("kernel:") {
        Some(k) if kernel => bfq_real::desc::check_kernel_scheduler(k).map_err(anyhow::Error::msg),
        Some(_) => anyhow::bail!("{name}: only the project's schedulers run here, not kernel:*"),
        None if bfq_schedulers::SCHEDULERS.iter().any(|e| e.name == name) => Ok(()),
        None => Err(sched_error(bfq_core::SchedError::UnknownScheduler(
            name.to_string(),
        ))),
    }
}

/// The results' destinations shared by `bfq sim` and `bfq run`: whether
/// `--json` and `--trace` go to stdout (`-`; not both), and the `--json`
/// file, checked now so that a bad path fails before the run, not after
/// it.
pub fn json_and_trace(
    json: &Option<std::path::PathBuf>,
    trace: &Option<std::path::PathBuf>,
) -> anyhow::Result<(bool, bool, Option<JsonFile>)> {
    let is_stdout =
        |p: &Option<std::path::PathBuf>| p.as_ref().is_some_and(|p| p.as_os_str() == "-");
    let (json_stdout, trace_stdout) = (is_stdout(json), is_stdout(trace));
    if json_stdout && trace_stdout {
        anyhow::bail!("--json - and --trace - cannot both write to stdout");
    }
    if let (Some(j), Some(t)) = (json, trace) {
        if !json_stdout && one_file(j, t) {
            anyhow::bail!(
                "--json {} and --trace {} are one file: the JSON would replace the trace",
                j.display(),
                t.display()
            );
        }
    }
    let json_file = match json {
        Some(p) if !json_stdout => Some(JsonFile::check(p)?),
        _ => None,
    };
    Ok((json_stdout, trace_stdout, json_file))
}

/// Whether paths `a` and `b` name one regular file, or one that does not
/// exist yet (through links, `.` and `..`); a device such as /dev/null
/// may take both.
fn one_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    let real = |p: &std::path::Path| -> Option<std::path::PathBuf> {
        match std::fs::canonicalize(p) {
            Ok(r) => std::fs::metadata(&r).ok()?.is_file().then_some(r),
            Err(_) => {
                let dir = std::fs::canonicalize(bfq_real::outfile::parent(p)).ok()?;
                Some(dir.join(p.file_name()?))
            }
        }
    };
    matches!((real(a), real(b)), (Some(x), Some(y)) if x == y)
}

/// A `--json FILE` written whole or not at all. A regular FILE (or one
/// that does not exist yet) gets the results through a file put in place
/// over it once written and synced ([`bfq_real::outfile::Replacing`]:
/// unnamed until then, FILE's permissions and, run as root, its owner),
/// so that a run that fails or is interrupted (SIGINT, SIGTERM, SIGKILL)
/// leaves an earlier FILE as it was. A symbolic link is followed: the file it names is replaced and
/// the link kept. Anything else (`/dev/stdout`, `/dev/null`, a pipe) is
/// written to directly at the end.
pub struct JsonFile {
    path: std::path::PathBuf,
    /// Written to directly: not a regular file.
    direct: bool,
}

impl JsonFile {
    /// Checks that FILE can be written, before the run: not a directory,
    /// and, for a regular file, a temporary file can be made beside it
    /// (made and removed at once, so that a run killed later leaves
    /// nothing).
    pub fn check(path: &std::path::Path) -> anyhow::Result<JsonFile> {
        use anyhow::Context;
        let named = || format!("--json {}", path.display());
        let (path, meta) = bfq_real::outfile::resolve(path).with_context(named)?;
        let direct = meta.is_some_and(|m| !m.is_file());
        if !direct {
            bfq_real::outfile::Replacing::create(&path).with_context(named)?;
        }
        Ok(JsonFile { path, direct })
    }

    /// Writes `text`: to FILE itself if it is not a regular file, else
    /// through a file put in place over FILE once written and synced
    /// ([`bfq_real::outfile::Replacing`]).
    pub fn write(&self, text: &str) -> anyhow::Result<()> {
        use anyhow::Context;
        use std::io::Write;
        let named = || format!("writing --json {}", self.path.display());
        if self.direct {
            return std::fs::write(&self.path, text).with_context(named);
        }
        let (file, mut w) = bfq_real::outfile::Replacing::create(&self.path).with_context(named)?;
        w.write_all(text.as_bytes()).with_context(named)?;
        w.sync_all().with_context(named)?;
        file.finish().with_context(named)?;
        let dir = bfq_real::outfile::parent(&self.path);
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--json` and `--trace` naming one file (a new one, spelled two
    /// ways) are refused: the JSON replaced the trace without a word.
    /// /dev/null takes both. Fails with `one_file` answering false.
    #[test]
    fn json_and_trace_are_not_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("out");
        let b = dir.path().join(".").join("out");
        let e = json_and_trace(&Some(a.clone()), &Some(b)).err().unwrap();
        assert!(e.to_string().contains("are one file"), "{e}");
        let null = Some(std::path::PathBuf::from("/dev/null"));
        json_and_trace(&null, &null).unwrap();
        json_and_trace(&Some(a), &Some(dir.path().join("trace"))).unwrap();
    }

    /// A setting the scenario file gave and `--set` gave again (spelled
    /// otherwise) is the command line's: its error does not name the
    /// file; one from the file alone does. Fails with `overlay_sets`
    /// returning no settings (every error then named the file).
    #[test]
    fn a_setting_given_again_by_set_is_not_the_files() {
        let file = std::path::Path::new("s.toml");
        let from_file = bfq_core::Settings::from_pairs([("max_budgte", "1")]);
        let mut settings = from_file.clone();
        let given = overlay_sets(&mut settings, &["Max-Budgte=2".into()]).unwrap();
        assert_eq!(settings.pairs().collect::<Vec<_>>(), [("max_budgte", "2")]);
        let unknown = || bfq_core::SchedError::UnknownSetting {
            scheduler: "bfq".into(),
            key: "max_budgte".into(),
        };
        let e = scenario_sched_error(unknown(), file, &from_file, &given);
        assert!(!format!("{e:#}").contains("s.toml"), "{e:#}");
        let none = bfq_core::Settings::new();
        let e = scenario_sched_error(unknown(), file, &from_file, &none);
        assert!(
            format!("{e:#}").starts_with("s.toml: [scheduler]: "),
            "{e:#}"
        );
        let e = overlay_sets(&mut settings, &["oops".into()]).unwrap_err();
        assert!(e.to_string().contains("oops"), "{e}");
    }

    #[test]
    fn bad_run_lengths_are_errors() {
        for bad in ["-1", "nan", "inf", "1e300", "0", "x", ""] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds("2.5"), Ok(2.5));
        // The --seconds help texts name the limit.
        assert_eq!(MAX_SECONDS, 604800.0);
        assert_eq!(size("4KiB"), Ok(4096));
        assert_eq!(size("1.5M"), Ok(3 << 19));
        assert!(size("0").is_err());
        assert_eq!(duration("250ms"), Ok(std::time::Duration::from_millis(250)));
        assert_eq!(duration("1h"), Ok(std::time::Duration::from_secs(3600)));
        // The units the error (and `bfq sim --help`) lists are the parser's.
        let units = bfq_core::settings::DURATION_UNITS.map(|(u, _)| u);
        let msg = duration("1d").unwrap_err();
        for u in units.iter().filter(|u| **u != "µs") {
            assert!(msg.contains(&format!(" {u}")), "{u}: {msg}");
            assert!(duration(&format!("2{u}")).is_ok(), "{u}");
        }
        assert_eq!(submit_mode("local"), Ok(bfq_engine::SubmitMode::Local));
        assert_eq!(
            submit_mode("dispatcher"),
            Ok(bfq_engine::SubmitMode::Dispatcher)
        );
        assert!(submit_mode("Local").is_err());
    }

    /// Scenario files, `--flow` and `--set` read sizes and durations with
    /// the same syntax and get the same values.
    #[test]
    fn one_size_and_duration_syntax_everywhere() {
        use bfq_core::settings::{parse_duration, parse_u64};
        use bfq_scenario::units::Size;
        for (size, dur) in [("4KiB", "250ms"), ("1.5M", "1.5s"), ("64M", "500us")] {
            let toml = format!(
                "name = \"t\"\n[[flow]]\nname = \"a\"\nblock = \"{size}\"\nbytes = \"{size}\"\nthink = \"{dur}\"\n"
            );
            let sc = bfq_sim::scenario::Scenario::from_toml_str(&toml, "t").unwrap();
            let f = &sc.flows[0];
            let flow =
                bfq_real::flowspec::parse(&format!("name=a,bytes={size},think={dur}"), 0).unwrap();
            let want_size = parse_u64(size).unwrap();
            let want_dur = parse_duration(dur).unwrap();
            assert_eq!(f.block.unwrap().0, want_size, "{size}");
            assert_eq!(f.bytes.unwrap().0, want_size, "{size}");
            assert_eq!(flow.def.bytes, Some(Size(want_size)), "{size}");
            assert_eq!(self::size(size), Ok(want_size), "{size}");
            assert_eq!(f.think.0, want_dur, "{dur}");
            assert_eq!(flow.def.think.0, want_dur, "{dur}");
        }
    }
}
