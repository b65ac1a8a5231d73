//! The three report files: `report.json` (every number), `report.md`
//! (tables with the papers' numbers beside ours, and the findings) and
//! `report.html` (one self-contained page with inline SVG charts). No
//! timestamps or wall-clock figures: the same options give the same bytes.

use crate::model::*;
use crate::paper_figures::{lookup, PaperFigure};
use crate::runner::Report;
use crate::stats::{fmt_num, fmt_pm, fmt_summary};
use std::fmt::Write as _;
use std::path::Path;

/// Writes report.json, report.md and report.html into `dir`.
pub fn write_all(r: &Report, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("report.json"), to_json(r))?;
    std::fs::write(dir.join("report.md"), to_markdown(r))?;
    std::fs::write(dir.join("report.html"), to_html(r))?;
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

/// A cell's text: ours (with CI) and the paper's when it has one.
fn cell_text(e: &ExpResult, v: &str, c: &str, m: &str) -> String {
    let ours = match e.cell(v, c) {
        None => "—".to_string(),
        Some(cell) => match cell.summary.get(m) {
            Some(s) => fmt_summary(s),
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

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Where the numbers come from: the simulator, or the real device.
fn provenance(r: &Report) -> String {
    match &r.target {
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
            let vars: Vec<&Variant> = e
                .variants
                .iter()
                .filter(|v| has_values(e, &v.id, &m.key))
                .collect();
            if vars.is_empty() {
                continue;
            }
            let _ = writeln!(s, "**{}** ({})\n", m.label, m.unit);
            let _ = write!(s, "| scheduler |");
            for v in &vars {
                let _ = write!(s, " {} |", md_escape(&v.label));
            }
            let _ = write!(s, "\n|---|");
            for _ in &vars {
                s.push_str("---|");
            }
            s.push('\n');
            for c in &e.configs {
                let _ = write!(s, "| {} |", c.label);
                for v in &vars {
                    let _ = write!(s, " {} |", cell_text(e, &v.id, &c.label, &m.key));
                }
                s.push('\n');
            }
            s.push('\n');
        }
        let mut notes: Vec<String> = vec![];
        for c in &e.cells {
            for run in &c.runs {
                for n in &run.out.notes {
                    let t = format!("{} / {} (seed {}): {}", c.variant, c.config, run.seed, n);
                    notes.push(t);
                }
            }
        }
        if !notes.is_empty() {
            let _ = writeln!(s, "Run notes:\n");
            for n in notes {
                let _ = writeln!(s, "- {}", md_escape(&n));
            }
            s.push('\n');
        }
        if !e.findings.is_empty() {
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
        }
        if !e.paper.is_empty() {
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
        }
    }
    s
}

// ------------------------------------------------------------------ HTML

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const PALETTE: [&str; 14] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1f77b4", "#2ca02c", "#d62728", "#8c564b",
];

/// A grouped bar chart (groups = variants, bars = configurations) with 95%
/// CI whiskers and the paper's values as black diamonds.
fn bar_chart(e: &ExpResult, m: &Metric) -> String {
    let vars: Vec<&Variant> = e
        .variants
        .iter()
        .filter(|v| has_values(e, &v.id, &m.key))
        .collect();
    if vars.is_empty() || e.configs.is_empty() {
        return String::new();
    }
    let nb = e.configs.len();
    let bw = 14.0;
    let gap = 18.0;
    let gw = nb as f64 * bw + gap;
    let left = 60.0;
    let top = 20.0;
    let ph = 200.0;
    let width = left + gw * vars.len() as f64 + 20.0;
    let height = top + ph + 90.0;
    let mut maxv: f64 = 0.0;
    for v in &vars {
        for c in &e.configs {
            if let Some(sm) = e.summary(&v.id, &c.label, &m.key) {
                maxv = maxv.max(sm.mean + sm.ci95);
            }
            if let Some(p) = lookup(&e.paper, &v.id, &c.label, &m.key) {
                if p.unit != "MB/s" || m.unit == "MiB/s" {
                    maxv = maxv.max(p.value);
                }
            }
        }
    }
    if maxv <= 0.0 || !maxv.is_finite() {
        maxv = 1.0;
    }
    let maxv = maxv * 1.08;
    let y = |v: f64| top + ph - (v / maxv) * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\" aria-label=\"{}\">",
        esc(&m.label)
    );
    // axis and grid
    for k in 0..=4 {
        let v = maxv * k as f64 / 4.0;
        let yy = y(v);
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{}</text>",
            width - 10.0,
            left - 4.0,
            yy + 3.0,
            fmt_num(v)
        );
    }
    let _ = write!(
        s,
        "<text x=\"12\" y=\"{:.1}\" font-size=\"11\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        top + ph / 2.0,
        top + ph / 2.0,
        esc(&m.unit)
    );
    for (gi, v) in vars.iter().enumerate() {
        let gx = left + gi as f64 * gw + gap / 2.0;
        for (ci, c) in e.configs.iter().enumerate() {
            let x = gx + ci as f64 * bw;
            if let Some(sm) = e.summary(&v.id, &c.label, &m.key) {
                let yy = y(sm.mean.max(0.0));
                let _ = write!(
                    s,
                    "<rect x=\"{x:.1}\" y=\"{yy:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} / {}: {}</title></rect>",
                    bw - 2.0,
                    (top + ph - yy).max(0.0),
                    PALETTE[ci % PALETTE.len()],
                    esc(&v.label),
                    esc(&c.label),
                    esc(&fmt_summary(&sm))
                );
                if sm.ci95 > 0.0 {
                    let cx = x + (bw - 2.0) / 2.0;
                    let (y1, y2) = (y((sm.mean - sm.ci95).max(0.0)), y(sm.mean + sm.ci95));
                    let _ = write!(
                        s,
                        "<path d=\"M{cx:.1} {y1:.1}V{y2:.1}M{:.1} {y1:.1}H{:.1}M{:.1} {y2:.1}H{:.1}\" stroke=\"#222\" fill=\"none\"/>",
                        cx - 3.0,
                        cx + 3.0,
                        cx - 3.0,
                        cx + 3.0
                    );
                }
            }
            if let Some(p) = lookup(&e.paper, &v.id, &c.label, &m.key) {
                let cx = x + (bw - 2.0) / 2.0;
                let py = y(p.value.min(maxv));
                let _ = write!(
                    s,
                    "<path d=\"M{cx:.1} {:.1}L{:.1} {py:.1}L{cx:.1} {:.1}L{:.1} {py:.1}Z\" fill=\"#000\"><title>paper: {} {}</title></path>",
                    py - 4.0,
                    cx + 4.0,
                    py + 4.0,
                    cx - 4.0,
                    esc(&paper_txt(p)),
                    esc(p.unit)
                );
            }
        }
        let lx = gx + (nb as f64 * bw) / 2.0;
        let _ = write!(
            s,
            "<text x=\"{lx:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\" transform=\"rotate(-30 {lx:.1} {:.1})\">{}</text>",
            top + ph + 14.0,
            top + ph + 14.0,
            esc(&v.label)
        );
    }
    let _ = write!(
        s,
        "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/></svg>",
        top + ph,
        width - 10.0,
        top + ph
    );
    s
}

/// Latency CDFs (first repetition) of the first variant that has them.
fn cdf_chart(e: &ExpResult) -> String {
    let Some(v) = e.variants.iter().find(|v| {
        e.cells
            .iter()
            .any(|c| c.variant == v.id && c.runs.first().is_some_and(|r| r.out.cdf.is_some()))
    }) else {
        return String::new();
    };
    let mut lines: Vec<(usize, &str, &Vec<[f64; 2]>)> = vec![];
    for (ci, c) in e.configs.iter().enumerate() {
        if let Some(cdf) = e
            .cell(&v.id, &c.label)
            .and_then(|cell| cell.runs.first())
            .and_then(|r| r.out.cdf.as_ref())
        {
            if !cdf.is_empty() {
                lines.push((ci, &c.label, cdf));
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    // log10 x axis in ms
    let minx = lines
        .iter()
        .flat_map(|l| l.2.iter().map(|p| p[0]))
        .filter(|x| *x > 0.0)
        .fold(f64::INFINITY, f64::min)
        .max(1e-3);
    let maxx = lines
        .iter()
        .flat_map(|l| l.2.iter().map(|p| p[0]))
        .fold(0.0, f64::max)
        .max(minx * 10.0);
    let (lx0, lx1) = (minx.log10().floor(), maxx.log10().ceil());
    let (left, top, pw, ph) = (60.0, 20.0, 560.0, 220.0);
    let width = left + pw + 220.0;
    let height = top + ph + 40.0;
    let xp = |x: f64| left + (x.max(minx).log10() - lx0) / (lx1 - lx0) * pw;
    let yp = |f: f64| top + ph - f * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\" aria-label=\"latency CDF\">"
    );
    let mut d = lx0 as i32;
    while d as f64 <= lx1 {
        let x = xp(10f64.powi(d));
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            top + ph,
            top + ph + 14.0,
            fmt_num(10f64.powi(d))
        );
        d += 1;
    }
    for k in 0..=4 {
        let f = k as f64 / 4.0;
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{f:.2}</text>",
            yp(f),
            left + pw,
            yp(f),
            left - 4.0,
            yp(f) + 3.0
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">request latency, ms (log scale), {}</text>",
        left + pw / 2.0,
        top + ph + 32.0,
        esc(&v.label)
    );
    for (i, (ci, label, cdf)) in lines.iter().enumerate() {
        let mut d = String::new();
        for (k, p) in cdf.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1} {:.1}",
                if k == 0 { "M" } else { "L" },
                xp(p[0]),
                yp(p[1])
            );
        }
        let col = PALETTE[ci % PALETTE.len()];
        let _ = write!(
            s,
            "<path d=\"{d}\" stroke=\"{col}\" stroke-width=\"2\" fill=\"none\"><title>{}</title></path><rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{col}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            esc(label),
            left + pw + 14.0,
            top + i as f64 * 16.0,
            left + pw + 28.0,
            top + i as f64 * 16.0 + 9.0,
            esc(label)
        );
    }
    s.push_str("</svg>");
    s
}

fn legend(e: &ExpResult) -> String {
    let mut s = String::from("<div class=\"legend\">");
    for (ci, c) in e.configs.iter().enumerate() {
        let _ = write!(
            s,
            "<span><i style=\"background:{}\"></i>{}</span>",
            PALETTE[ci % PALETTE.len()],
            esc(&c.label)
        );
    }
    s.push_str("<span><b>&#9670;</b> paper</span></div>");
    s
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

/// The findings table of report.html.
fn findings_html(r: &Report) -> String {
    let (h, n, c) = verdict_counts(r);
    let mut s = format!(
        "<h2>Findings</h2><p>{h} hold, {n} do not hold, {c} not comparable. Each claim states the tolerance it is checked with; each finding that does not hold names its cause (device model, workload model, scheduler, or check) with the evidence.</p><div class=\"wide\"><table class=\"findings\"><tr><th>experiment</th><th>paper's finding</th><th>verdict</th><th>ours</th></tr>\n"
    );
    for e in &r.experiments {
        for f in &e.findings {
            let _ = writeln!(
                s,
                "<tr><td><a href=\"#{}\">{}</a></td><td>{}<br><span class=\"src\">{}</span></td><td><span class=\"{}\">{}</span></td><td>{}{}</td></tr>",
                esc(&e.id),
                esc(&e.id),
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

/// The HTML report: one page, no external resources.
pub fn to_html(r: &Report) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>bfq-rs benchmark suite report</title><style>");
    s.push_str("body{font-family:system-ui,sans-serif;margin:24px;max-width:1300px;color:#222}table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}.HOLDS{color:#fff;background:#2e7d32;padding:1px 5px;border-radius:3px}.DOES_NOT_HOLD{color:#fff;background:#c62828;padding:1px 5px;border-radius:3px}.NOT_COMPARABLE{color:#fff;background:#777;padding:1px 5px;border-radius:3px}.legend span{margin-right:14px;font-size:12px;white-space:nowrap}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}.note{background:#fff8e1;border-left:4px solid #f9a825;padding:4px 8px;margin:4px 0;font-size:13px}section{border-top:2px solid #ddd;margin-top:24px}.paper{color:#555;font-size:11px}");
    s.push_str("</style></head><body>\n<h1>bfq-rs benchmark suite report</h1>\n");
    let _ = writeln!(
        s,
        "<p>{} Every number is the mean over repetitions with different seeds &plusmn; the semi-width of its 95% confidence interval (Student t); whiskers in the charts show that interval, black-outlined diamonds the papers' own values. Throughputs are in MB/s (10<sup>6</sup> bytes/s), the papers' unit. Options: quick = {}.</p>",
        esc(&provenance(r)).replace('`', ""),
        r.options.quick
    );
    s.push_str(&findings_html(r));
    for e in &r.experiments {
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
        if !e.configs.is_empty() {
            s.push_str(&legend(e));
        }
        for m in &e.metrics {
            let vars: Vec<&Variant> = e
                .variants
                .iter()
                .filter(|v| has_values(e, &v.id, &m.key))
                .collect();
            if vars.is_empty() {
                continue;
            }
            let _ = writeln!(s, "<h3>{} ({})</h3>", esc(&m.label), esc(&m.unit));
            if m.chart {
                s.push_str(&bar_chart(e, m));
                s.push('\n');
            }
            s.push_str("<table><tr><th>scheduler</th>");
            for v in &vars {
                let _ = write!(s, "<th>{}</th>", esc(&v.label));
            }
            s.push_str("</tr>\n");
            for c in &e.configs {
                let _ = write!(s, "<tr><td>{}</td>", esc(&c.label));
                for v in &vars {
                    let ours = e
                        .summary(&v.id, &c.label, &m.key)
                        .map(|x| fmt_summary(&x))
                        .unwrap_or_else(|| "&mdash;".into());
                    let paper = lookup(&e.paper, &v.id, &c.label, &m.key)
                        .map(|p| {
                            format!(
                                "<br><span class=\"paper\" title=\"{}: {}\">paper {}</span>",
                                esc(p.source),
                                esc(p.text),
                                esc(&paper_txt(p))
                            )
                        })
                        .unwrap_or_default();
                    let _ = write!(s, "<td>{ours}{paper}</td>");
                }
                s.push_str("</tr>\n");
            }
            s.push_str("</table>\n");
        }
        let cdf = cdf_chart(e);
        if !cdf.is_empty() {
            s.push_str("<h3>Latency CDF (first repetition)</h3>\n");
            s.push_str(&cdf);
            s.push('\n');
        }
        s.push_str("</section>\n");
    }
    s.push_str("</body></html>\n");
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
