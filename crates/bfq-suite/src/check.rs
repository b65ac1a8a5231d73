//! Small helpers for the findings' checks: tolerances stated in the
//! claims, and numbers for causes.

use crate::model::{Cause, CauseKind, ExpResult, Finding, Verdict};
use crate::paper_figures::lookup;
use crate::stats::fmt_num;
use std::fmt::Write as _;

/// Whether `x` is within `tol` (relative, e.g. 0.25 for +-25%) of `target`.
pub fn near(x: f64, target: f64, tol: f64) -> bool {
    x.is_finite() && (x - target).abs() <= tol * target.abs()
}

/// A number as the report prints it.
pub fn n(x: f64) -> String {
    fmt_num(x)
}

/// `ours X vs paper Y (+Z%)` for a cell, or just ours when the paper has
/// no number there.
pub fn vs_paper(e: &ExpResult, v: &str, c: &str, m: &str) -> String {
    let Some(ours) = e.mean(v, c, m) else {
        return format!("{c}: n/a");
    };
    match lookup(&e.paper, v, c, m) {
        Some(p) if p.value != 0.0 => format!(
            "{c} {} vs paper {} ({:+.0}%)",
            n(ours),
            n(p.value),
            (ours / p.value - 1.0) * 100.0
        ),
        _ => format!("{c} {}", n(ours)),
    }
}

/// The paper's value for a cell, if it gives one.
pub fn lookup_value(e: &ExpResult, v: &str, c: &str, m: &str) -> Option<f64> {
    lookup(&e.paper, v, c, m).map(|p| p.value)
}

/// Largest value of a slice. The input must be free of NaN ([`need`]
/// passes only finite numbers): `f64::max` would drop a NaN silently.
pub fn max(xs: &[f64]) -> f64 {
    debug_assert!(xs.iter().all(|x| !x.is_nan()), "NaN in {xs:?}");
    xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
}

/// Smallest value of a slice (NaN-free input, as [`max`]).
pub fn min(xs: &[f64]) -> f64 {
    debug_assert!(xs.iter().all(|x| !x.is_nan()), "NaN in {xs:?}");
    xs.iter().cloned().fold(f64::INFINITY, f64::min)
}

/// Why a number a finding needs is missing.
#[derive(Clone, Debug, PartialEq)]
pub enum Lack {
    /// The variant or configuration was not part of this report (`--only`,
    /// `--quick`, or a scheduler that could not run): nothing to compare.
    NotRun(String),
    /// It ran but gave no finite value (a failed run, a metric that was
    /// never produced, NaN): a failure of the reproduction.
    NoValue(String),
}

/// A number a finding needs (a cell's mean, or a value derived from
/// some), or why it is missing. Dereferences to the number as an
/// `Option` for causes and details.
#[derive(Clone, Debug, PartialEq)]
pub struct Val {
    x: Option<f64>,
    lack: Option<Lack>,
}

impl std::ops::Deref for Val {
    type Target = Option<f64>;
    fn deref(&self) -> &Option<f64> {
        &self.x
    }
}

impl Val {
    /// A finite number.
    pub fn num(x: f64) -> Val {
        if x.is_finite() {
            Val {
                x: Some(x),
                lack: None,
            }
        } else {
            Val::lack(Lack::NoValue(format!("a non-finite value ({x})")))
        }
    }
    /// A missing number.
    pub fn lack(l: Lack) -> Val {
        Val {
            x: None,
            lack: Some(l),
        }
    }
    /// `f` of the numbers of `vals`, or the first one's lack (a `NotRun`
    /// before a `NoValue`).
    pub fn derive(vals: &[Val], f: impl FnOnce(&[f64]) -> f64) -> Val {
        match first_lack(vals) {
            Some(l) => Val::lack(l),
            None => Val::num(f(&vals.iter().filter_map(|v| v.x).collect::<Vec<_>>())),
        }
    }
}

fn first_lack(vals: &[Val]) -> Option<Lack> {
    let lacks = vals.iter().filter_map(|v| v.lack.as_ref());
    lacks
        .clone()
        .find(|l| matches!(l, Lack::NotRun(_)))
        .or_else(|| lacks.clone().next())
        .cloned()
}

/// The mean of metric `m` in the cell (`v`, `c`), or why it is missing:
/// not run (the variant or configuration is not in this report) or no
/// value (it ran: the cell's error or its runs' notes say why).
pub fn val(e: &ExpResult, v: &str, c: &str, m: &str) -> Val {
    if !e.has(c) {
        return Val::lack(Lack::NotRun(
            match e.skipped.iter().find(|s| s.config == c) {
                Some(s) => format!("{c}: {}", s.why),
                None => format!("configuration {c} is not in this report"),
            },
        ));
    }
    if !e.variants.iter().any(|x| x.id == v) {
        return Val::lack(Lack::NotRun(format!(
            "variant {v} is not in this report (--quick keeps fewer)"
        )));
    }
    if let Some(s) = e.summary(v, c, m).filter(|s| s.nonfinite > 0) {
        return Val::lack(Lack::NoValue(format!(
            "{v} / {c}: {} of {} runs gave a non-finite {m} (the other runs' mean, {}, is not used)",
            s.nonfinite,
            s.nonfinite + s.n,
            n(s.mean)
        )));
    }
    if let Some(x) = e.center(v, c, m) {
        return Val::num(x);
    }
    let cell = e.cell(v, c);
    let mut why = format!("{v} / {c} ran but gave no finite {m}");
    if let Some(err) = cell.and_then(|c| c.error.as_ref()) {
        let _ = write!(why, " (error: {err})");
    }
    let mut notes: Vec<&str> = cell
        .iter()
        .flat_map(|c| {
            c.runs
                .iter()
                .flat_map(|r| r.out.notes.iter().map(|s| s.as_str()))
        })
        .collect();
    notes.dedup();
    if !notes.is_empty() {
        let _ = write!(why, " (notes: {})", notes.join("; "));
    }
    Val::lack(Lack::NoValue(why))
}

/// A finding that needs some numbers. When one did not run it is NOT
/// COMPARABLE (cause: check, saying which); when one ran but gave no
/// finite value it DOES NOT HOLD (cause: check, "no value", with the
/// run's error or notes). Otherwise `check` gets the numbers (all finite)
/// and returns whether the claim holds and our numbers as text. Cite the
/// source with [`Finding::cite`] and give the cause of a failure with
/// [`Finding::cause_unless_holds`].
pub fn need(claim: &str, vals: &[Val], check: impl FnOnce(&[f64]) -> (bool, String)) -> Finding {
    let finding = |verdict, detail: String, cause| Finding {
        claim: claim.into(),
        source: String::new(),
        verdict,
        detail,
        cause,
    };
    match first_lack(vals) {
        Some(Lack::NotRun(why)) => finding(
            Verdict::NotComparable,
            "a scheduler or workload it needs did not run (see the notes)".into(),
            Some(Cause::new(
                CauseKind::Check,
                format!("not in this report: {why}"),
            )),
        ),
        Some(Lack::NoValue(why)) => finding(
            Verdict::DoesNotHold,
            format!("no value: {why}"),
            Some(Cause::new(CauseKind::Check, format!("no value: {why}"))),
        ),
        None => {
            let xs: Vec<f64> = vals.iter().filter_map(|v| v.x).collect();
            let (ok, detail) = check(&xs);
            finding(Verdict::from_bool(ok), detail, None)
        }
    }
}

/// Numbers joined with " / " as the report prints them (missing ones
/// empty).
pub fn list(xs: &[Option<f64>]) -> String {
    xs.iter()
        .map(|x| x.map(n).unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Cause "ours vs paper" for configurations `cs` of variant `v`: each
/// one's number beside the paper's. Used where nothing more specific was
/// measured; `kind` says which part of the reproduction it is put down to.
pub fn vs_paper_cause(e: &ExpResult, kind: CauseKind, v: &str, cs: &[&str], m: &str) -> Cause {
    Cause::new(
        kind,
        format!(
            "ours vs paper ({v}): {}",
            cs.iter()
                .map(|c| vs_paper(e, v, c, m))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_is_relative_and_symmetric() {
        assert!(near(2.5, 2.22, 0.25));
        assert!(!near(2.8, 2.22, 0.25));
        assert!(near(1.7, 2.22, 0.25));
        assert!(!near(1.6, 2.22, 0.25));
        assert!(!near(f64::NAN, 1.0, 0.5));
        assert_eq!(max(&[1.0, 3.0, 2.0]), 3.0);
        assert_eq!(min(&[1.0, 3.0, 2.0]), 1.0);
    }

    /// A result with one variant "v", configuration "c" run twice (metric
    /// "x" = 1, metric "nan" NaN in every run, "part" 2 in the first run
    /// and NaN in the second, "y" never produced) and configuration
    /// "gone" skipped.
    fn result() -> ExpResult {
        use crate::model::{cfg, var, Cell, RunOut, RunRecord, Skipped};
        let mut out = RunOut::default();
        out.metrics.insert("x".into(), 1.0);
        out.metrics.insert("nan".into(), f64::NAN);
        out.notes.push("a file was not read completely".into());
        let (mut first, mut second) = (out.clone(), out);
        first.metrics.insert("part".into(), 2.0);
        second.metrics.insert("part".into(), f64::NAN);
        let runs: Vec<RunRecord> = [first, second]
            .into_iter()
            .enumerate()
            .map(|(rep, out)| RunRecord {
                rep,
                seed: 1 + rep as u64,
                out,
            })
            .collect();
        ExpResult {
            id: "t".into(),
            title: String::new(),
            source: String::new(),
            device: String::new(),
            what: String::new(),
            metrics: vec![],
            variants: vec![var("v", "v")],
            configs: vec![cfg("c", "fifo", &[])],
            skipped: vec![Skipped {
                config: "gone".into(),
                why: "not registered".into(),
            }],
            reps: 1,
            cells: vec![Cell {
                variant: "v".into(),
                config: "c".into(),
                summary: crate::runner::summarize(&runs),
                runs,
                error: None,
            }],
            findings: vec![],
            paper: vec![],
        }
    }

    #[test]
    fn val_tells_not_run_from_ran_without_a_value() {
        let e = result();
        assert_eq!(val(&e, "v", "c", "x"), Val::num(1.0));
        for (v, c, m) in [("v", "c", "nan"), ("v", "c", "y")] {
            let x = val(&e, v, c, m);
            let Some(Lack::NoValue(why)) = x.lack else {
                panic!("{x:?}")
            };
            assert!(why.contains("a file was not read completely"), "{why}");
        }
        let skipped = val(&e, "v", "gone", "x");
        assert_eq!(
            skipped.lack,
            Some(Lack::NotRun("gone: not registered".into()))
        );
        assert!(matches!(val(&e, "w", "c", "x").lack, Some(Lack::NotRun(_))));
    }

    #[test]
    fn a_metric_non_finite_in_some_runs_has_no_value_and_the_finding_does_not_hold() {
        let e = result();
        let s = e.summary("v", "c", "part").unwrap();
        assert_eq!((s.n, s.nonfinite, s.mean), (1, 1, 2.0));
        let x = val(&e, "v", "c", "part");
        let Some(Lack::NoValue(why)) = &x.lack else {
            panic!("{x:?}")
        };
        assert!(why.contains("1 of 2 runs gave a non-finite part"), "{why}");
        let f = need("c", &[x], |x| (x[0] > 0.0, "ours".into()));
        assert_eq!(f.verdict, Verdict::DoesNotHold);
        let cause = f.cause.expect("a cause");
        assert_eq!(cause.kind, CauseKind::Check);
        assert!(
            cause.evidence.contains("non-finite part"),
            "{}",
            cause.evidence
        );
    }

    #[test]
    fn need_tells_not_run_from_no_value() {
        let ok = |x: &[f64]| (x[0] > 1.0, format!("ours: {}", x[0]));
        let f = need("c", &[Val::num(2.0)], ok);
        assert_eq!((f.verdict, f.cause), (Verdict::Holds, None));
        let not_run = Val::lack(Lack::NotRun("cfq: skipped".into()));
        let nan = Val::num(f64::NAN);
        assert!(nan.is_none());
        let f = need("c", &[nan.clone(), Val::num(2.0)], ok);
        assert_eq!(f.verdict, Verdict::DoesNotHold);
        assert!(f.cause.unwrap().evidence.starts_with("no value"));
        // A configuration that did not run makes it not comparable, even
        // beside one that gave no value.
        let f = need("c", &[nan.clone(), not_run.clone()], ok);
        assert_eq!(f.verdict, Verdict::NotComparable);
        assert_eq!(f.cause.unwrap().kind, CauseKind::Check);
        assert!(Val::derive(&[Val::num(1.0), nan], |x| x[0]).is_none());
        assert_eq!(
            Val::derive(&[Val::num(1.0), Val::num(3.0)], max),
            Val::num(3.0)
        );
    }
}
