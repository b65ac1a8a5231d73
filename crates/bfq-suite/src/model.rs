//! The suite's data model: experiments, their variants (workloads) and
//! scheduler configurations, what one run yields, and the results of an
//! experiment with their aggregates.

use crate::stats::Summary;
use serde::Serialize;
use std::collections::BTreeMap;

/// One scheduler configuration of an experiment (a row of its tables).
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// Row label, e.g. `bfq-2010 B_max=4096`.
    pub label: String,
    /// Name for `bfq_schedulers::build`.
    pub scheduler: String,
    /// Scheduler settings (`key`, `value`), written to the scenario's
    /// `[scheduler]` table.
    pub settings: Vec<(String, String)>,
}

/// Shorthand for a [`Config`].
pub fn cfg(label: &str, scheduler: &str, settings: &[(&str, &str)]) -> Config {
    Config {
        label: label.into(),
        scheduler: scheduler.into(),
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// One workload of an experiment (a column of its tables).
#[derive(Clone, Debug, Serialize)]
pub struct Variant {
    /// Stable id, e.g. `10r-seq`.
    pub id: String,
    /// Label in tables.
    pub label: String,
}

/// Shorthand for a [`Variant`].
pub fn var(id: &str, label: &str) -> Variant {
    Variant {
        id: id.into(),
        label: label.into(),
    }
}

/// A quantity measured by an experiment.
#[derive(Clone, Debug, Serialize)]
pub struct Metric {
    /// Key in `RunOut::metrics`.
    pub key: String,
    /// Label in tables and charts.
    pub label: String,
    /// Unit.
    pub unit: String,
    /// Drawn as a bar chart in the HTML report.
    pub chart: bool,
    /// Reported and checked by its median over the repetitions, with the
    /// range as spread (instead of the mean and its 95% interval).
    pub median: bool,
}

/// Shorthand for a [`Metric`].
pub fn metric(key: &str, label: &str, unit: &str, chart: bool) -> Metric {
    Metric {
        key: key.into(),
        label: label.into(),
        unit: unit.into(),
        chart,
        median: false,
    }
}

impl Metric {
    /// The metric reported and checked by its median and range.
    pub fn by_median(mut self) -> Metric {
        self.median = true;
        self
    }
}

/// What one run (one variant, configuration and seed) yields.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunOut {
    /// Metric values by key.
    pub metrics: BTreeMap<String, f64>,
    /// `[latency_ms, fraction]` points of the latency CDF of interest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cdf: Option<Vec<[f64; 2]>>,
    /// Remarks about this run (e.g. an application that never finished
    /// starting: its start-up time is a lower bound).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Options that shape scenarios.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// Shorter simulated durations (and fewer repetitions).
    pub quick: bool,
    /// Seed of this repetition.
    pub seed: u64,
    /// Directory where the start-up replay files are (absolute).
    pub traces_dir: std::path::PathBuf,
    /// Real storage for the `real-*` experiments (`--target`).
    pub target: Option<std::path::PathBuf>,
}

/// Runs one variant with one configuration.
pub type RunFn = fn(&Variant, &Config, &Ctx) -> anyhow::Result<RunOut>;

/// Whether a paper's finding holds in our results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Our numbers meet the paper's claim within the tolerance the claim
    /// states.
    #[serde(rename = "HOLDS")]
    Holds,
    /// They do not; the finding carries a [`Cause`].
    #[serde(rename = "DOES NOT HOLD")]
    DoesNotHold,
    /// Nothing to compare: the paper gives no number for it, or a
    /// scheduler or workload it needs did not run; the finding's cause
    /// says which.
    #[serde(rename = "NOT COMPARABLE")]
    NotComparable,
}

impl Verdict {
    /// The verdict as reports print it (`HOLDS`, `DOES NOT HOLD`, `NOT COMPARABLE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Holds => "HOLDS",
            Verdict::DoesNotHold => "DOES NOT HOLD",
            Verdict::NotComparable => "NOT COMPARABLE",
        }
    }
    /// Holds if `b`.
    pub fn from_bool(b: bool) -> Verdict {
        if b {
            Verdict::Holds
        } else {
            Verdict::DoesNotHold
        }
    }
}

/// Which part of our reproduction a finding that does not hold is put
/// down to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CauseKind {
    /// The simulated drive differs from the paper's (rates, seek and
    /// rotation, queueing).
    #[serde(rename = "device model")]
    DeviceModel,
    /// Our programs differ from the paper's (a synthetic stand-in, a
    /// shorter run, a stream or trace shape).
    #[serde(rename = "workload model")]
    WorkloadModel,
    /// Our scheduler behaves differently from the one the paper measured.
    #[serde(rename = "scheduler")]
    Scheduler,
    /// The check cannot be evaluated as the paper states it (e.g. a
    /// configuration that did not run).
    #[serde(rename = "check")]
    Check,
}

impl CauseKind {
    /// The cause's part as reports print it (`device model`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::DeviceModel => "device model",
            CauseKind::WorkloadModel => "workload model",
            CauseKind::Scheduler => "scheduler",
            CauseKind::Check => "check",
        }
    }
}

/// Why a finding does not hold (or cannot be compared): the part of the
/// reproduction responsible and the evidence, with numbers from the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cause {
    /// Which part of the reproduction.
    pub kind: CauseKind,
    /// One sentence of evidence (numbers from this run's own results).
    pub evidence: String,
}

impl Cause {
    /// A cause of `kind` with one sentence of `evidence`.
    pub fn new(kind: CauseKind, evidence: impl Into<String>) -> Cause {
        Cause {
            kind,
            evidence: evidence.into(),
        }
    }
    /// `kind: evidence`, for one-line summaries.
    pub fn line(&self) -> String {
        format!("{}: {}", self.kind.as_str(), self.evidence)
    }
}

/// One finding of a paper, checked against our results.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// The paper's claim, with the tolerance we check it with.
    pub claim: String,
    /// Paper, table or figure, and section the claim is from.
    pub source: String,
    /// Whether our results bear the claim out.
    pub verdict: Verdict,
    /// Our numbers.
    pub detail: String,
    /// Why it does not hold (or is not comparable); None when it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
}

impl Finding {
    /// Sets the paper, table/figure and section the claim cites.
    pub fn cite(mut self, source: &str) -> Finding {
        self.source = source.into();
        self
    }
    /// Gives the cause, computed only when the finding does not hold and
    /// has none yet (a NOT COMPARABLE finding keeps its own).
    pub fn cause_unless_holds(mut self, cause: impl FnOnce() -> Cause) -> Finding {
        if self.verdict != Verdict::Holds && self.cause.is_none() {
            self.cause = Some(cause());
        }
        self
    }
    /// Whether the finding is complete: a source, and a cause unless it
    /// holds.
    pub fn problems(&self) -> Vec<String> {
        let mut out = vec![];
        if self.source.trim().is_empty() {
            out.push(format!(
                "finding '{}' cites no table/figure and section",
                self.claim
            ));
        }
        if self.verdict != Verdict::Holds
            && self
                .cause
                .as_ref()
                .is_none_or(|c| c.evidence.trim().is_empty())
        {
            out.push(format!(
                "finding '{}' is {} without a cause",
                self.claim,
                self.verdict.as_str()
            ));
        }
        out
    }
}

/// Checks an experiment's findings.
pub type FindingFn = fn(&ExpResult) -> Vec<Finding>;

/// An experiment of the suite.
pub struct Experiment {
    /// Stable id (docs/suite.md).
    pub id: &'static str,
    /// One-line title.
    pub title: &'static str,
    /// Paper, section, table or figure.
    pub source: &'static str,
    /// Device preset.
    pub device: &'static str,
    /// What it runs (docs and reports).
    pub what: &'static str,
    /// What each run measures.
    pub metrics: Vec<Metric>,
    /// Workload variants (rows of the paper's table or figure).
    pub variants: Vec<Variant>,
    /// Scheduler configurations compared.
    pub configs: Vec<Config>,
    /// Repetitions in the full suite.
    pub reps: usize,
    /// Part of `--quick` (with `quick_variants` only, if not empty).
    pub in_quick: bool,
    /// Variant ids kept by `--quick` (empty: all).
    pub quick_variants: Vec<&'static str>,
    /// Runs one variant under one configuration.
    pub run: RunFn,
    /// Checks the paper's findings against the results.
    pub findings: FindingFn,
}

/// One run's record.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    /// Repetition number, from 0.
    pub rep: usize,
    /// Seed of the run (each repetition its own).
    pub seed: u64,
    /// The run's metrics.
    #[serde(flatten)]
    pub out: RunOut,
}

/// All runs of one variant and configuration, with aggregates.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// Variant id.
    pub variant: String,
    /// Configuration id.
    pub config: String,
    /// Each repetition.
    pub runs: Vec<RunRecord>,
    /// Per metric: mean and 95% CI over the repetitions.
    pub summary: BTreeMap<String, Summary>,
    /// Error of a failed run, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A scheduler configuration left out, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// Configuration id.
    pub config: String,
    /// Why it did not run.
    pub why: String,
}

/// The results of one experiment.
#[derive(Clone, Debug, Serialize)]
pub struct ExpResult {
    /// Experiment id (see [`Experiment::id`]).
    pub id: String,
    /// One-line title.
    pub title: String,
    /// Paper, section, table or figure.
    pub source: String,
    /// Device preset.
    pub device: String,
    /// What it runs.
    pub what: String,
    /// What each run measured.
    pub metrics: Vec<Metric>,
    /// Workload variants run.
    pub variants: Vec<Variant>,
    /// Configurations run.
    pub configs: Vec<Config>,
    /// Configurations left out, and why.
    pub skipped: Vec<Skipped>,
    /// Repetitions per cell.
    pub reps: usize,
    /// Every variant x configuration.
    pub cells: Vec<Cell>,
    /// The paper's findings with their verdicts.
    pub findings: Vec<Finding>,
    /// The paper's own numbers for this experiment.
    pub paper: Vec<crate::paper_figures::PaperFigure>,
}

impl ExpResult {
    /// The cell of a variant and configuration.
    pub fn cell(&self, variant: &str, config: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.variant == variant && c.config == config)
    }
    /// Mean of a metric (None if the configuration was skipped or failed).
    pub fn mean(&self, variant: &str, config: &str, metric: &str) -> Option<f64> {
        self.cell(variant, config)?
            .summary
            .get(metric)
            .map(|s| s.mean)
            .filter(|m| m.is_finite())
    }
    /// The value findings use: the median for metrics reported by their
    /// median ([`Metric::median`]), the mean otherwise.
    pub fn center(&self, variant: &str, config: &str, metric: &str) -> Option<f64> {
        if self.metrics.iter().any(|m| m.key == metric && m.median) {
            self.summary(variant, config, metric)
                .map(|s| s.median)
                .filter(|m| m.is_finite())
        } else {
            self.mean(variant, config, metric)
        }
    }
    /// Summary of a metric.
    pub fn summary(&self, variant: &str, config: &str, metric: &str) -> Option<Summary> {
        self.cell(variant, config)?.summary.get(metric).copied()
    }
    /// Whether the configuration ran.
    pub fn has(&self, config: &str) -> bool {
        self.configs.iter().any(|c| c.label == config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(verdict: Verdict, cause: Option<Cause>) -> Finding {
        Finding {
            claim: "X beats Y (1.5x +- 20%)".into(),
            source: "2010 paper, Table II, Sec. V-C".into(),
            verdict,
            detail: "ours: 1.2x".into(),
            cause,
        }
    }

    #[test]
    fn a_finding_that_does_not_hold_needs_a_cause() {
        assert!(finding(Verdict::Holds, None).problems().is_empty());
        assert_eq!(finding(Verdict::DoesNotHold, None).problems().len(), 1);
        assert_eq!(finding(Verdict::NotComparable, None).problems().len(), 1);
        let empty = Some(Cause::new(CauseKind::Check, " "));
        assert_eq!(finding(Verdict::DoesNotHold, empty).problems().len(), 1);
        let c = Some(Cause::new(CauseKind::DeviceModel, "seek 7 ms, paper's 8.5"));
        assert!(finding(Verdict::DoesNotHold, c).problems().is_empty());
        let mut f = finding(Verdict::Holds, None);
        f.source.clear();
        assert_eq!(f.problems().len(), 1);
    }

    #[test]
    fn cause_is_kept_only_for_findings_that_do_not_hold() {
        let c = || Cause::new(CauseKind::Scheduler, "e");
        assert!(finding(Verdict::Holds, None)
            .cause_unless_holds(c)
            .cause
            .is_none());
        assert_eq!(
            finding(Verdict::DoesNotHold, None)
                .cause_unless_holds(c)
                .cause
                .map(|c| c.kind),
            Some(CauseKind::Scheduler)
        );
    }
}
