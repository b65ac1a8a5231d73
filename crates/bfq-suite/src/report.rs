//! The three report files: `report.json` (every number), `report.md`
//! (tables with the papers' numbers beside ours, and the findings) and
//! `report.html` (one self-contained page with inline SVG charts). No
//! timestamps or wall-clock figures: the same options give the same bytes.

use crate::charts;
use crate::model::*;
use crate::paper_figures::{lookup, PaperFigure};
use crate::runner::Report;
use crate::stats::{fmt_median, fmt_num, fmt_pm, fmt_summary, Summary};
use std::fmt::Write as _;
use std::path::Path;

/// Writes report.json, report.md and report.html into `dir`.
pub fn write_all(r: &Report, dir: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, text) in [
        ("report.json", to_json(r)),
        ("report.md", to_markdown(r)),
        ("report.html", to_html(r)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Pretty JSON of the whole report.
pub fn to_json(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("serializable");
    s.push('\n');
    s
}

fn paper_txt(p: &PaperFigure) -> String {
    let rel = if p.relation == "=" { "" } else { p.relation };
    match p.ci95 {
        Some(ci) => format!("{rel}{}", fmt_pm(p.value, ci)),
        None => format!("{rel}{}", fmt_num(p.value)),
    }
}

/// A summary as its metric is reported: median and range, or mean and CI.
fn summary_text(e: &ExpResult, m: &str, s: &Summary) -> String {
    if e.metrics.iter().any(|x| x.key == m && x.median) {
        fmt_median(s)
    } else {
        fmt_summary(s)
    }
}

/// A cell's text: ours (with CI) and the paper's when it has one.
fn cell_text(e: &ExpResult, v: &str, c: &str, m: &str) -> String {
    let ours = match e.cell(v, c) {
        None => "—".to_string(),
        Some(cell) => match cell.summary.get(m) {
            Some(s) => summary_text(e, m, s),
            None if cell.error.is_some() => "error".into(),
            None => "—".into(),
        },
    };
    match lookup(&e.paper, v, c, m) {
        Some(p) => format!("{ours} (paper {})", paper_txt(p)),
        None => ours,
    }
}

/// Whether a metric has any value in a variant (skip empty columns).
fn has_values(e: &ExpResult, v: &str, m: &str) -> bool {
    e.cells
        .iter()
        .any(|c| c.variant == v && c.summary.contains_key(m))
}

/// The configurations a metric's table lists: those with a value of it in
/// some variant, or a failed run (a configuration that never produces
/// the metric, e.g. BFQ's budgets under CFQ, is left out).
fn configs_with<'a>(e: &'a ExpResult, m: &Metric) -> Vec<&'a Config> {
    e.configs
        .iter()
        .filter(|c| {
            e.cells.iter().any(|x| {
                x.config == c.label && (x.summary.contains_key(&m.key) || x.error.is_some())
            })
        })
        .collect()
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Where the numbers come from: the simulator, or the real device.
fn provenance(r: &Report) -> String {
    match &r.target {
        Some(t) if r.suite.contains("real applications") => format!(
            "Measured on real storage: `{t}`, through `bfq mount` (FUSE) for this project's schedulers and an ext4 image on a direct-I/O loop device for the kernel's, the configurations interleaved in each round, one run at a time. Tables headed \"median [min–max]\" give the median over the rounds and their range."
        ),
        Some(t) => format!(
            "Measured on real storage: `{t}`, through the io_uring engine (and the kernel's schedulers where named), one run at a time."
        ),
        None => "Simulated with bfq-sim (the papers' drives as device models).".into(),
    }
}

/// How many findings of the report have each verdict.
pub fn verdict_counts(r: &Report) -> (usize, usize, usize) {
    let count = |v: Verdict| {
        r.experiments
            .iter()
            .flat_map(|e| &e.findings)
            .filter(|f| f.verdict == v)
            .count()
    };
    (
        count(Verdict::Holds),
        count(Verdict::DoesNotHold),
        count(Verdict::NotComparable),
    )
}

/// The findings section of report.md: counts, then one row per finding
/// with its source, verdict, our numbers and, unless it holds, its cause.
fn findings_markdown(r: &Report) -> String {
    let mut s = String::from("## Findings\n\n");
    let (h, n, c) = verdict_counts(r);
    let _ = writeln!(
        s,
        "{h} hold, {n} do not hold, {c} not comparable. Each claim states the tolerance it is checked with; each finding that does not hold names its cause: the device model, the workload model, the scheduler, or the check.\n"
    );
    let _ = writeln!(
        s,
        "| experiment | paper's finding | source | verdict | ours | cause |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for e in &r.experiments {
        for f in &e.findings {
            let cause = f
                .cause
                .as_ref()
                .map(|c| format!("**{}**: {}", c.kind.as_str(), md_escape(&c.evidence)))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "| {} | {} | {} | **{}** | {} | {} |",
                e.id,
                md_escape(&f.claim),
                md_escape(&f.source),
                f.verdict.as_str(),
                md_escape(&f.detail),
                cause
            );
        }
    }
    s.push('\n');
    s
}

/// The Markdown report.
pub fn to_markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# bfq-rs benchmark suite report\n");
    let _ = writeln!(
        s,
        "{} Every number is the mean over repetitions with different seeds ± the semi-width of its 95% confidence interval (Student t). Throughputs are in MB/s (10^6 bytes/s), the papers' unit. Options: quick = {}, reps = {}, only = {}.\n",
        provenance(r),
        r.options.quick,
        r.options
            .reps
            .map(|x| x.to_string())
            .unwrap_or_else(|| "per experiment".into()),
        r.options
            .only
            .as_ref()
            .map(|o| o.join(","))
            .unwrap_or_else(|| "all".into())
    );
    s.push_str(&findings_markdown(r));
    for e in &r.experiments {
        s.push_str(&experiment_markdown(r, e));
    }
    s
}

/// One experiment's section of report.md: what it runs, its notes, one
/// table per metric, the runs' notes, its findings and the paper's
/// numbers it uses.
fn experiment_markdown(r: &Report, e: &ExpResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## {}: {}\n", e.id, e.title);
    let _ = writeln!(
        s,
        "*{}* — device `{}` — {} repetition(s)\n",
        e.source,
        r.target.as_deref().unwrap_or(&e.device),
        e.reps
    );
    let _ = writeln!(s, "{}\n", e.what);
    for sk in &e.skipped {
        let _ = writeln!(s, "> **Note:** {} — {}\n", sk.config, sk.why);
    }
    for c in &e.cells {
        if let Some(err) = &c.error {
            let _ = writeln!(
                s,
                "> **Error:** {} / {}: {}\n",
                c.variant,
                c.config,
                md_escape(err)
            );
        }
    }
    for m in &e.metrics {
        s.push_str(&metric_markdown(e, m));
    }
    s.push_str(&run_notes_markdown(e));
    s.push_str(&exp_findings_markdown(e));
    s.push_str(&paper_markdown(e));
    s
}

/// The variants where some configuration has a value of metric `m`.
fn variants_with<'a>(e: &'a ExpResult, m: &Metric) -> Vec<&'a Variant> {
    e.variants
        .iter()
        .filter(|v| has_values(e, &v.id, &m.key))
        .collect()
}

/// A metric's table in report.md (empty when no cell has a value).
fn metric_markdown(e: &ExpResult, m: &Metric) -> String {
    let mut s = String::new();
    let vars = variants_with(e, m);
    if vars.is_empty() {
        return s;
    }
    let how = if m.median {
        "; median [min–max] over the rounds"
    } else {
        ""
    };
    let _ = writeln!(s, "**{}** ({}{how})\n", m.label, m.unit);
    let _ = write!(s, "| scheduler |");
    for v in &vars {
        let _ = write!(s, " {} |", md_escape(&v.label));
    }
    let _ = write!(s, "\n|---|");
    for _ in &vars {
        s.push_str("---|");
    }
    s.push('\n');
    for c in configs_with(e, m) {
        let _ = write!(s, "| {} |", c.label);
        for v in &vars {
            let _ = write!(s, " {} |", cell_text(e, &v.id, &c.label, &m.key));
        }
        s.push('\n');
    }
    s.push('\n');
    s
}

/// The runs' notes of an experiment, as a list.
fn run_notes_markdown(e: &ExpResult) -> String {
    let mut s = String::new();
    let notes: Vec<String> = e
        .cells
        .iter()
        .flat_map(|c| {
            c.runs.iter().flat_map(move |run| {
                run.out.notes.iter().map(move |n| {
                    format!("{} / {} (seed {}): {}", c.variant, c.config, run.seed, n)
                })
            })
        })
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(s, "Run notes:\n");
        for n in notes {
            let _ = writeln!(s, "- {}", md_escape(&n));
        }
        s.push('\n');
    }
    s
}

/// An experiment's findings, with their causes, as a list.
fn exp_findings_markdown(e: &ExpResult) -> String {
    let mut s = String::new();
    if e.findings.is_empty() {
        return s;
    }
    let _ = writeln!(s, "Findings:\n");
    for f in &e.findings {
        let _ = writeln!(
            s,
            "- **{}** — {} *({})* — {}{}",
            f.verdict.as_str(),
            f.claim,
            f.source,
            f.detail,
            f.cause
                .as_ref()
                .map(|c| format!(" — **cause ({})**: {}", c.kind.as_str(), c.evidence))
                .unwrap_or_default()
        );
    }
    s.push('\n');
    s
}

/// The paper's numbers an experiment uses, folded.
fn paper_markdown(e: &ExpResult) -> String {
    let mut s = String::new();
    if e.paper.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "<details><summary>The paper's numbers used here</summary>\n"
    );
    for p in &e.paper {
        let _ = writeln!(
            s,
            "- {} / {} / {}: {} {} — {}: \"{}\"",
            p.variant,
            p.config,
            p.metric,
            paper_txt(p),
            p.unit,
            p.source,
            p.text
        );
    }
    let _ = writeln!(s, "\n</details>\n");
    s
}

// ------------------------------------------------------------------ HTML

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn cause_html(f: &Finding) -> String {
    f.cause
        .as_ref()
        .map(|c| {
            format!(
                "<br><span class=\"cause\"><b>cause ({})</b>: {}</span>",
                esc(c.kind.as_str()),
                esc(&c.evidence)
            )
        })
        .unwrap_or_default()
}

/// The findings table of report.html: a heading row per experiment (its
/// title and how many of its findings hold), then its findings.
fn findings_html(r: &Report) -> String {
    let (h, n, c) = verdict_counts(r);
    let mut s = format!(
        "<h2>Findings</h2><p>{h} hold, {n} do not hold, {c} not comparable. Each claim states the tolerance it is checked with; each finding that does not hold names its cause (device model, workload model, scheduler, or check) with the evidence.</p><div class=\"wide\"><table class=\"findings\"><tr><th>paper's finding</th><th>verdict</th><th>ours</th></tr>\n"
    );
    for e in &r.experiments {
        let holds = e
            .findings
            .iter()
            .filter(|f| f.verdict == Verdict::Holds)
            .count();
        let _ = writeln!(
            s,
            "<tr><td colspan=\"3\" class=\"grp\"><a href=\"#{}\">{}</a>: {} <span class=\"src\">({holds} of {} hold)</span></td></tr>",
            esc(&e.id),
            esc(&e.id),
            esc(&e.title),
            e.findings.len()
        );
        for f in &e.findings {
            let _ = writeln!(
                s,
                "<tr><td>{}<br><span class=\"src\">{}</span></td><td><span class=\"{}\">{}</span></td><td>{}{}</td></tr>",
                esc(&f.claim),
                esc(&f.source),
                f.verdict.as_str().replace(' ', "_"),
                f.verdict.as_str(),
                esc(&f.detail),
                cause_html(f)
            );
        }
    }
    s.push_str("</table></div>\n");
    s
}

/// One metric's table in the HTML report: ours with the paper's value
/// under it.
fn html_table(e: &ExpResult, m: &Metric, vars: &[&Variant]) -> String {
    let mut s = String::from("<div class=\"wide\"><table><tr><th>scheduler</th>");
    for v in vars {
        let _ = write!(s, "<th>{}</th>", esc(&v.label));
    }
    s.push_str("</tr>\n");
    for c in configs_with(e, m) {
        let _ = write!(s, "<tr><td>{}</td>", esc(&c.label));
        for v in vars {
            let ours = e
                .summary(&v.id, &c.label, &m.key)
                .map(|x| summary_text(e, &m.key, &x))
                .unwrap_or_else(|| "&mdash;".into());
            let paper = lookup(&e.paper, &v.id, &c.label, &m.key)
                .map(|p| {
                    format!(
                        "<br><span class=\"paper\" title=\"{}: {}\">paper {} {}</span>",
                        esc(p.source),
                        esc(p.text),
                        esc(&paper_txt(p)),
                        esc(p.unit)
                    )
                })
                .unwrap_or_default();
            let _ = write!(s, "<td>{ours}{paper}</td>");
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table></div>\n");
    s
}

/// The HTML report: one page, no external resources.
pub fn to_html(r: &Report) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>bfq-rs benchmark suite report</title><style>");
    s.push_str("body{font-family:system-ui,sans-serif;margin:16px auto;padding:0 12px;max-width:1340px;color:#222;line-height:1.4}table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}table.findings td,table.findings th{text-align:left}table.findings td.grp{background:#eef2f7;font-weight:600;padding-top:6px}table.findings td:first-child{width:40%}table.findings td:nth-child(2){width:1%;white-space:nowrap}.HOLDS,.DOES_NOT_HOLD,.NOT_COMPARABLE{color:#fff;padding:1px 5px;border-radius:3px;white-space:nowrap;font-size:12px}.HOLDS{background:#1b7837}.DOES_NOT_HOLD{background:#b2182b}.NOT_COMPARABLE{background:#666}.cause{color:#5a1a1a}.src{color:#555;font-size:12px}.wide{overflow-x:auto;max-width:100%}.chartrow{display:flex;flex-wrap:wrap;gap:8px 20px;align-items:flex-start}.chart{flex:1 1 600px;min-width:0;max-width:900px;overflow-x:auto}.chart svg{min-width:640px;display:block}.legend{flex:0 1 200px;display:flex;flex-direction:column;gap:4px;font-size:13px;padding-top:24px}.legend span{white-space:nowrap}.legend i{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-1px}.dia{font-size:15px}.note{background:#fff8e1;border-left:4px solid #f9a825;padding:4px 8px;margin:4px 0;font-size:13px}section{border-top:2px solid #ddd;margin-top:24px}.paper{color:#555;font-size:11px}p.finding{margin:6px 0}@media (max-width:700px){body{padding:0 6px}table.findings,table.findings tbody,table.findings tr,table.findings td{display:block;border:none}table.findings tr:first-child{display:none}table.findings tr{border-bottom:1px solid #ccc;padding:6px 0}table.findings td{padding:2px 0}table.findings td:first-child{width:auto}.legend{flex-direction:row;flex-wrap:wrap;padding-top:0}}");
    s.push_str("</style></head><body>\n<h1>bfq-rs benchmark suite report</h1>\n");
    let _ = writeln!(
        s,
        "<p>{} Every number is the mean over repetitions with different seeds &plusmn; the semi-width of its 95% confidence interval (Student t); whiskers in the charts show that interval, black-outlined diamonds the papers' own values. Throughputs are in MB/s (10<sup>6</sup> bytes/s), the papers' unit. Options: quick = {}.</p>",
        esc(&provenance(r)).replace('`', ""),
        r.options.quick
    );
    s.push_str(&findings_html(r));
    for e in &r.experiments {
        s.push_str(&experiment_html(r, e));
    }
    s.push_str("</body></html>\n");
    s
}

/// One experiment's section of report.html: what it runs, its notes and
/// findings, a chart and a table per metric, the latency CDF.
fn experiment_html(r: &Report, e: &ExpResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<section id=\"{}\"><h2>{}: {}</h2><p><em>{}</em> &mdash; device <code>{}</code> &mdash; {} repetition(s)</p><p>{}</p>",
        esc(&e.id),
        esc(&e.id),
        esc(&e.title),
        esc(&e.source),
        esc(r.target.as_deref().unwrap_or(&e.device)),
        e.reps,
        esc(&e.what)
    );
    s.push_str(&notes_html(e));
    for f in &e.findings {
        let _ = writeln!(
            s,
            "<p class=\"finding\"><span class=\"{}\">{}</span> {} <span class=\"src\">({})</span> &mdash; {}{}</p>",
            f.verdict.as_str().replace(' ', "_"),
            f.verdict.as_str(),
            esc(&f.claim),
            esc(&f.source),
            esc(&f.detail),
            cause_html(f)
        );
    }
    for m in &e.metrics {
        s.push_str(&metric_html(e, m));
    }
    let cdf = charts::cdf_chart(e);
    if !cdf.is_empty() {
        s.push_str("<h3>Latency CDF (first repetition)</h3>\n<div class=\"chartrow\"><div class=\"chart\">");
        s.push_str(&cdf);
        s.push_str("</div></div>\n");
    }
    s.push_str("</section>\n");
    s
}

/// The skipped configurations and failed cells of an experiment.
fn notes_html(e: &ExpResult) -> String {
    let mut s = String::new();
    for sk in &e.skipped {
        let _ = writeln!(
            s,
            "<div class=\"note\"><b>Note:</b> {} &mdash; {}</div>",
            esc(&sk.config),
            esc(&sk.why)
        );
    }
    for c in &e.cells {
        if let Some(err) = &c.error {
            let _ = writeln!(
                s,
                "<div class=\"note\"><b>Error:</b> {} / {}: {}</div>",
                esc(&c.variant),
                esc(&c.config),
                esc(err)
            );
        }
    }
    s
}

/// A metric's heading, chart (with its legend beside it) and table.
fn metric_html(e: &ExpResult, m: &Metric) -> String {
    let mut s = String::new();
    let vars = variants_with(e, m);
    if vars.is_empty() {
        return s;
    }
    let how = if m.median {
        "; median [min–max] over the rounds"
    } else {
        ""
    };
    let _ = writeln!(s, "<h3>{} ({}{how})</h3>", esc(&m.label), esc(&m.unit));
    if m.chart {
        let _ = writeln!(
            s,
            "<div class=\"chartrow\"><div class=\"chart\">{}</div>{}</div>",
            charts::bar_chart(e, m, &vars),
            charts::legend(e)
        );
    }
    s.push_str(&html_table(e, m, &vars));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{summarize, ReportOptions};
    use crate::stats::Summary;

    fn synthetic() -> Report {
        let mk = |cfg: &str, vals: &[f64]| {
            let runs: Vec<RunRecord> = vals
                .iter()
                .enumerate()
                .map(|(i, v)| RunRecord {
                    rep: i,
                    seed: 1 + i as u64,
                    out: RunOut {
                        metrics: [("agg".to_string(), *v)].into_iter().collect(),
                        cdf: Some(vec![[0.1, 0.0], [1.0, 0.5], [10.0, 1.0]]),
                        notes: vec![],
                    },
                })
                .collect();
            Cell {
                variant: "2files".into(),
                config: cfg.into(),
                summary: summarize(&runs),
                runs,
                error: None,
            }
        };
        let e = ExpResult {
            id: "2010-throughput".into(),
            title: "Synthetic <test>".into(),
            source: "2010 paper, Table II".into(),
            device: "ibm-dtla-307030".into(),
            what: "synthetic".into(),
            metrics: vec![metric("agg", "Aggregate throughput", "MiB/s", true)],
            variants: vec![var("2files", "2 files")],
            configs: vec![cfg("cfq", "cfq", &[]), cfg("clook", "clook", &[])],
            skipped: vec![Skipped {
                config: "yfq".into(),
                why: "scheduler 'yfq' is not registered in bfq-schedulers yet: skipped".into(),
            }],
            reps: 3,
            cells: vec![
                mk("cfq", &[10.0, 12.0, 14.0]),
                mk("clook", &[20.0, 20.0, 20.0]),
            ],
            findings: vec![
                Finding {
                    claim: "C-LOOK beats CFQ".into(),
                    source: "2010 paper, Table II, Sec. V-C".into(),
                    verdict: Verdict::Holds,
                    detail: "20 vs 12".into(),
                    cause: None,
                },
                Finding {
                    claim: "CFQ beats C-LOOK".into(),
                    source: "2010 paper, Table II, Sec. V-C".into(),
                    verdict: Verdict::DoesNotHold,
                    detail: "12 vs 20".into(),
                    cause: Some(Cause::new(CauseKind::DeviceModel, "seek 7 ms vs 8.5 ms")),
                },
            ],
            paper: crate::paper_figures::for_experiment("2010-throughput"),
        };
        Report {
            suite: "test".into(),
            target: None,
            options: ReportOptions {
                quick: true,
                reps: Some(3),
                only: None,
            },
            experiments: vec![e],
        }
    }

    #[test]
    fn markdown_has_tables_paper_numbers_notes_and_findings() {
        let md = to_markdown(&synthetic());
        let s = Summary::of(&[10.0, 12.0, 14.0]).unwrap();
        let want = format!("| cfq | {} (paper 16.91 ± 1.30) |", fmt_summary(&s));
        assert!(md.contains(&want), "{md}");
        assert!(
            md.contains("| clook | 20.00 ± 0.00 (paper 20.59 ± 0.76) |"),
            "{md}"
        );
        assert!(md.contains("| scheduler | 2 files |"), "{md}");
        assert!(
            md.contains("> **Note:** yfq — scheduler 'yfq' is not registered"),
            "{md}"
        );
        assert!(
            md.contains(
                "| 2010-throughput | C-LOOK beats CFQ | 2010 paper, Table II, Sec. V-C | **HOLDS** | 20 vs 12 |  |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| **DOES NOT HOLD** | 12 vs 20 | **device model**: seek 7 ms vs 8.5 ms |"),
            "{md}"
        );
        assert!(
            md.contains("1 hold, 1 do not hold, 0 not comparable"),
            "{md}"
        );
        assert!(md.contains("CFQ 16.91 ± 1.30, 100 ms"), "{md}");
    }

    /// The synthetic report plus a metric only C-LOOK produces (as
    /// BFQ's budgets) and one that is NaN in CFQ's third run.
    fn with_partial_metrics() -> Report {
        let mut r = synthetic();
        let e = &mut r.experiments[0];
        e.metrics
            .push(metric("budget", "Mean budget", "sectors", false));
        e.metrics.push(metric("lat", "Latency", "ms", false));
        for c in &mut e.cells {
            for (i, run) in c.runs.iter_mut().enumerate() {
                if c.config == "clook" {
                    run.out.metrics.insert("budget".into(), 100.0);
                }
                let lat = if c.config == "cfq" && i == 2 {
                    f64::NAN
                } else {
                    5.0
                };
                run.out.metrics.insert("lat".into(), lat);
            }
            c.summary = summarize(&c.runs);
        }
        r
    }

    #[test]
    fn tables_count_non_finite_runs_and_leave_out_configs_without_the_metric() {
        let r = with_partial_metrics();
        let md = to_markdown(&r);
        let table = |label: &str| -> String {
            let after = md.split(&format!("**{label}**")).nth(1).unwrap();
            after.split("\n\n").nth(1).unwrap().to_string()
        };
        let budget = table("Mean budget");
        assert!(budget.contains("| clook | 100.0 ± 0.0 |"), "{budget}");
        assert!(!budget.contains("| cfq |"), "{budget}");
        let lat = table("Latency");
        assert!(
            lat.contains("| cfq | 5.000 ± 0.000 (1 of 3 runs non-finite) |"),
            "{lat}"
        );
        assert!(lat.contains("| clook | 5.000 ± 0.000 |"), "{lat}");
        let html = to_html(&r);
        assert!(html.contains("5.000 ± 0.000 (1 of 3 runs non-finite)"));
        let v: serde_json::Value = serde_json::from_str(&to_json(&r)).unwrap();
        let cells = &v["experiments"][0]["cells"];
        assert_eq!(cells[0]["summary"]["lat"]["nonfinite"], 1);
        assert_eq!(cells[0]["summary"]["lat"]["n"], 2);
        assert!(cells[1]["summary"]["lat"].get("nonfinite").is_none());
    }

    #[test]
    fn a_real_storage_report_names_the_device_and_says_it_is_real() {
        let mut r = synthetic();
        r.target = Some("/dev/loop7".into());
        let md = to_markdown(&r);
        assert!(
            md.contains("Measured on real storage: `/dev/loop7`"),
            "{md}"
        );
        assert!(md.contains("device `/dev/loop7`"), "{md}");
        assert!(!md.contains("Simulated"), "{md}");
        let html = to_html(&r);
        assert!(html.contains("Measured on real storage: /dev/loop7"));
        assert!(html.contains("device <code>/dev/loop7</code>"));
        assert!(!html.contains("Simulated"));
        assert!(to_markdown(&synthetic()).contains("Simulated with bfq-sim"));
    }

    #[test]
    fn median_metrics_show_median_and_range_and_findings_use_the_median() {
        let mut r = synthetic();
        let e = &mut r.experiments[0];
        e.metrics[0] = metric("agg", "Aggregate throughput", "MiB/s", false).by_median();
        e.cells[0] = {
            let mut c = e.cells[0].clone();
            for (run, v) in c.runs.iter_mut().zip([10.0, 11.0, 30.0]) {
                run.out.metrics.insert("agg".into(), v);
            }
            c.summary = summarize(&c.runs);
            c
        };
        assert_eq!(e.center("2files", "cfq", "agg"), Some(11.0));
        assert_eq!(e.mean("2files", "cfq", "agg"), Some(17.0));
        assert_eq!(
            *crate::check::val(e, "2files", "cfq", "agg"),
            Some(11.0),
            "findings check the median"
        );
        let md = to_markdown(&r);
        assert!(
            md.contains("**Aggregate throughput** (MiB/s; median [min–max] over the rounds)"),
            "{md}"
        );
        assert!(md.contains("| cfq | 11.00 [10.00–30.00]"), "{md}");
        assert!(to_html(&r).contains("11.00 [10.00–30.00]"));
    }

    #[test]
    fn html_is_self_contained_with_svg() {
        let html = to_html(&synthetic());
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<svg"), "no SVG");
        assert!(html.contains("<rect"), "no bars");
        assert!(html.contains("latency CDF"), "no CDF");
        assert!(html.contains("Synthetic &lt;test&gt;"), "not escaped");
        assert!(
            html.contains("<b>cause (device model)</b>: seek 7 ms vs 8.5 ms"),
            "no cause"
        );
        // the findings table: a heading row per experiment with its count
        assert!(
            html.contains("<td colspan=\"3\" class=\"grp\"><a href=\"#2010-throughput\">2010-throughput</a>: Synthetic &lt;test&gt; <span class=\"src\">(1 of 2 hold)</span></td>"),
            "no experiment row"
        );
        assert!(html.contains("<span class=\"DOES_NOT_HOLD\">DOES NOT HOLD</span>"));
        // no external resources: the only URL is the SVG namespace
        let stripped = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(!stripped.contains("http://") && !stripped.contains("https://"));
        for bad in ["<script src", "<link ", "<img ", "@import", "url("] {
            assert!(!stripped.contains(bad), "{bad}");
        }
    }

    #[test]
    fn json_has_every_run_and_summary() {
        let j = to_json(&synthetic());
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        let e = &v["experiments"][0];
        assert_eq!(e["cells"][0]["runs"].as_array().unwrap().len(), 3);
        assert_eq!(e["cells"][0]["summary"]["agg"]["mean"], 12.0);
        assert_eq!(e["findings"][0]["verdict"], "HOLDS");
        assert!(e["findings"][0].get("cause").is_none());
        assert_eq!(e["findings"][1]["verdict"], "DOES NOT HOLD");
        assert_eq!(e["findings"][1]["cause"]["kind"], "device model");
        assert_eq!(e["findings"][1]["cause"]["evidence"], "seek 7 ms vs 8.5 ms");
        assert_eq!(e["findings"][1]["source"], "2010 paper, Table II, Sec. V-C");
        assert_eq!(e["skipped"][0]["config"], "yfq");
    }
}
