//! The HTML report's charts, as inline SVG: horizontal grouped bars (one
//! group per workload, one labelled bar per scheduler configuration) with
//! the value printed at the end of each bar, 95% CI whiskers and the
//! paper's value as an outlined diamond; latency CDFs on a log axis. A
//! value axis spanning more than a decade is logarithmic; ticks are round
//! numbers (1, 2, 5 x 10^k). Colours are the Okabe-Ito colour-blind-safe
//! palette, one per scheduler (configurations of one scheduler share its
//! colour and are told apart by their labels). Every chart scales to the
//! page width (viewBox), so nothing is clipped at phone width.

use crate::model::{Config, ExpResult, Metric, Variant};
use crate::paper_figures::{lookup, PaperFigure};
use crate::stats::{fmt_num, Summary};
use std::fmt::Write as _;

/// Okabe & Ito (2008), colour-blind safe; yellow left out (unreadable on
/// white), grey added for an eighth scheduler.
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#999999",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Colour of each configuration: one each when the palette has enough,
/// else one per distinct scheduler, in order of first appearance.
pub fn colours(configs: &[Config]) -> Vec<&'static str> {
    if configs.len() <= PALETTE.len() {
        return (0..configs.len()).map(|i| PALETTE[i]).collect();
    }
    let mut seen: Vec<&str> = vec![];
    configs
        .iter()
        .map(|c| {
            let i = match seen.iter().position(|s| *s == c.scheduler) {
                Some(i) => i,
                None => {
                    seen.push(&c.scheduler);
                    seen.len() - 1
                }
            };
            PALETTE[i % PALETTE.len()]
        })
        .collect()
}

/// The legend shown beside a chart: one entry per colour.
pub fn legend(e: &ExpResult) -> String {
    let cols = colours(&e.configs);
    let per_config = e.configs.len() <= PALETTE.len();
    let mut s = String::from("<div class=\"legend\">");
    let mut shown: Vec<&str> = vec![];
    for (c, col) in e.configs.iter().zip(&cols) {
        if shown.contains(col) {
            continue;
        }
        shown.push(col);
        let name = if per_config { &c.label } else { &c.scheduler };
        let _ = write!(
            s,
            "<span><i style=\"background:{col}\"></i>{}</span>",
            esc(name)
        );
    }
    s.push_str(
        "<span><b class=\"dia\">&#9671;</b> paper's value</span><span>&#9500; 95% CI</span></div>",
    );
    s
}

/// A tick's text: a round number without trailing zeros.
fn tick_txt(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Round tick values covering `[lo, hi]`: linear steps of 1, 2 or 5 x
/// 10^k (about five ticks), or on a log axis the decades (with 2 and 5
/// between them when the axis spans at most three decades).
pub fn ticks(lo: f64, hi: f64, log: bool) -> Vec<f64> {
    if log {
        let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        let dense = b - a <= 3;
        let mut t = vec![];
        for d in a..=b {
            for m in [1.0, 2.0, 5.0] {
                let v = m * 10f64.powi(d);
                if (m == 1.0 || dense) && v >= lo * 0.999 && v <= hi * 1.001 {
                    t.push(v);
                }
            }
        }
        return t;
    }
    let raw = (hi - lo) / 5.0;
    let e = raw.log10().floor() as i32;
    let m = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|m| m * 10f64.powi(e) >= raw)
        .unwrap_or(10.0);
    // k * m * 10^e, computed so that 0.6 is 6 / 10 (not 3 * 0.2)
    let at = |k: f64| {
        if e < 0 {
            k * m / 10f64.powi(-e)
        } else {
            k * m * 10f64.powi(e)
        }
    };
    let step = at(1.0);
    let mut t = vec![];
    let mut k = (lo / step).floor();
    while at(k) <= hi + step * 1e-9 {
        t.push(at(k));
        k += 1.0;
    }
    t
}

/// A value axis: linear from 0, or log10 when the values span more than a
/// decade.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
    x0: f64,
    w: f64,
}

impl Axis {
    fn new(vals: &[f64], x0: f64, w: f64) -> Axis {
        let pos: Vec<f64> = vals.iter().cloned().filter(|v| *v > 0.0).collect();
        let max = pos.iter().cloned().fold(0.0, f64::max);
        let min = pos.iter().cloned().fold(f64::INFINITY, f64::min);
        if max <= 0.0 || !max.is_finite() {
            return Axis {
                log: false,
                lo: 0.0,
                hi: 1.0,
                x0,
                w,
            };
        }
        if max / min > 10.0 {
            let lo = 10f64.powf(min.log10().floor());
            let hi = 10f64.powf(max.log10().ceil());
            Axis {
                log: true,
                lo,
                hi,
                x0,
                w,
            }
        } else {
            // the first round tick at or above the largest value
            let t = ticks(0.0, max * 1.05, false);
            let step = if t.len() >= 2 { t[1] - t[0] } else { max };
            Axis {
                log: false,
                lo: 0.0,
                hi: (max * 1.05 / step).ceil() * step,
                x0,
                w,
            }
        }
    }
    /// x position of a value (clamped to the axis).
    fn x(&self, v: f64) -> f64 {
        let f = if self.log {
            let v = v.max(self.lo);
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.x0 + f.clamp(0.0, 1.0) * self.w
    }
}

/// Geometry of the bar chart (viewBox units).
const LABEL_W: f64 = 230.0;
const PLOT_W: f64 = 470.0;
const VALUE_W: f64 = 200.0;
const BAR_H: f64 = 13.0;
const BAR_GAP: f64 = 3.0;
const GROUP_H: f64 = 20.0;

/// A grouped horizontal bar chart of one metric: a group per variant that
/// has values, a bar per configuration, its value (and the paper's) at the
/// bar's end.
pub fn bar_chart(e: &ExpResult, m: &Metric, vars: &[&Variant]) -> String {
    if vars.is_empty() || e.configs.is_empty() {
        return String::new();
    }
    let cols = colours(&e.configs);
    let ax = Axis::new(&bar_values(e, m, vars), LABEL_W, PLOT_W);
    let top = 34.0;
    let mut y = top;
    let mut body = String::new();
    for v in vars {
        let _ = write!(
            body,
            "<text x=\"4\" y=\"{:.1}\" class=\"grp\">{}</text>",
            y + 14.0,
            esc(&v.label)
        );
        y += GROUP_H;
        for (c, col) in e.configs.iter().zip(&cols) {
            bar(&mut body, e, m, v, c, col, &ax, y);
            y += BAR_H + BAR_GAP;
        }
        y += 4.0;
    }
    let height = y + 8.0;
    let width = LABEL_W + PLOT_W + VALUE_W;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"100%\" style=\"max-width:{width:.0}px\" role=\"img\" aria-label=\"{}\"><style>text{{font:11px system-ui,sans-serif;fill:#222}}.grp{{font-weight:600}}.tick{{fill:#555}}.val{{fill:#222}}.pap{{fill:#555}}</style>",
        esc(&m.label)
    );
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"12\" text-anchor=\"middle\" class=\"tick\">{} ({}){}</text>",
        LABEL_W + PLOT_W / 2.0,
        esc(&m.label),
        esc(&m.unit),
        if ax.log { ", log scale" } else { "" }
    );
    s.push_str(&grid(&ax, top, height));
    s.push_str(&body);
    let _ = write!(
        s,
        "<line x1=\"{LABEL_W}\" y1=\"{:.1}\" x2=\"{LABEL_W}\" y2=\"{:.1}\" stroke=\"#555\"/></svg>",
        top - 6.0,
        height - 6.0
    );
    s
}

/// Every value a bar chart draws (means, their intervals' upper ends,
/// the paper's values in the same unit), for its axis.
fn bar_values(e: &ExpResult, m: &Metric, vars: &[&Variant]) -> Vec<f64> {
    let mut vals = vec![];
    for v in vars {
        for c in &e.configs {
            if let Some(sm) = e.summary(&v.id, &c.label, &m.key) {
                vals.push(sm.mean + sm.ci95);
                vals.push(sm.mean);
            }
            if let Some(p) = lookup(&e.paper, &v.id, &c.label, &m.key) {
                if p.unit == m.unit {
                    vals.push(p.value);
                }
            }
        }
    }
    vals
}

/// The bar chart's vertical grid lines and tick values, from `top` to
/// `height`.
fn grid(ax: &Axis, top: f64, height: f64) -> String {
    let mut s = String::new();
    for t in ticks(ax.lo, ax.hi, ax.log) {
        let x = ax.x(t);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#e3e3e3\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"tick\">{}</text>",
            top - 6.0,
            height - 6.0,
            top - 10.0,
            tick_txt(t)
        );
    }
    s
}

/// One bar: label, bar, whisker, paper's diamond, value text.
#[allow(clippy::too_many_arguments)]
fn bar(
    s: &mut String,
    e: &ExpResult,
    m: &Metric,
    v: &Variant,
    c: &Config,
    col: &str,
    ax: &Axis,
    y: f64,
) {
    let mid = y + BAR_H / 2.0;
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
        LABEL_W - 6.0,
        mid + 4.0,
        esc(&c.label)
    );
    let sm = e.summary(&v.id, &c.label, &m.key);
    let paper = lookup(&e.paper, &v.id, &c.label, &m.key).filter(|p| p.unit == m.unit);
    let (mut end, mut text) = match sm {
        Some(sm) => {
            let title = format!(
                "{} / {}: {}",
                v.label,
                c.label,
                crate::stats::fmt_summary(&sm)
            );
            (mean_bar(s, &sm, &title, col, ax, y), fmt_num(sm.mean))
        }
        None => (LABEL_W, "no value".to_string()),
    };
    if let Some(p) = paper {
        end = end.max(diamond(s, p, ax, mid));
        let rel = if p.relation == "=" { "" } else { p.relation };
        text = format!("{text}  (paper {rel}{})", fmt_num(p.value));
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" class=\"val\">{}</text>",
        end + 5.0,
        mid + 4.0,
        esc(&text)
    );
}

/// The bar of a mean (its tooltip `title`) at row `y`, with the whisker
/// of its 95% interval; returns where it ends on the right.
fn mean_bar(s: &mut String, sm: &Summary, title: &str, col: &str, ax: &Axis, y: f64) -> f64 {
    let mid = y + BAR_H / 2.0;
    let x = ax.x(sm.mean);
    let _ = write!(
        s,
        "<rect x=\"{LABEL_W}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{BAR_H}\" fill=\"{col}\"><title>{}</title></rect>",
        (x - LABEL_W).max(0.5),
        esc(title)
    );
    let mut end = x;
    if sm.ci95 > 0.0 {
        let (x1, x2) = (ax.x(sm.mean - sm.ci95), ax.x(sm.mean + sm.ci95));
        let _ = write!(
            s,
            "<path d=\"M{x1:.1} {mid:.1}H{x2:.1}M{x1:.1} {:.1}V{:.1}M{x2:.1} {:.1}V{:.1}\" stroke=\"#222\" fill=\"none\"/>",
            mid - 3.0,
            mid + 3.0,
            mid - 3.0,
            mid + 3.0
        );
        end = end.max(x2);
    }
    end
}

/// The paper's value as an outlined diamond centred on row `mid`;
/// returns its right edge.
fn diamond(s: &mut String, p: &PaperFigure, ax: &Axis, mid: f64) -> f64 {
    let px = ax.x(p.value);
    let _ = write!(
        s,
        "<path d=\"M{px:.1} {:.1}L{:.1} {mid:.1}L{px:.1} {:.1}L{:.1} {mid:.1}Z\" fill=\"#fff\" stroke=\"#000\" stroke-width=\"1.5\"><title>paper: {} {} ({})</title></path>",
        mid - 6.0,
        px + 5.0,
        mid + 6.0,
        px - 5.0,
        esc(&fmt_num(p.value)),
        esc(p.unit),
        esc(p.source)
    );
    px + 5.0
}

/// A CDF line: colour, configuration label, `[latency_ms, fraction]` points.
type CdfLine<'a> = (&'a str, &'a str, &'a Vec<[f64; 2]>);

/// Geometry of the CDF chart (viewBox units): plot left, top, width, height.
const CDF_BOX: (f64, f64, f64, f64) = (50.0, 16.0, 560.0, 220.0);

/// Latency CDFs (first repetition) of the first variant that has them.
pub fn cdf_chart(e: &ExpResult) -> String {
    let Some(v) = e.variants.iter().find(|v| {
        e.cells
            .iter()
            .any(|c| c.variant == v.id && c.runs.first().is_some_and(|r| r.out.cdf.is_some()))
    }) else {
        return String::new();
    };
    let cols = colours(&e.configs);
    let lines = cdf_lines(e, v, &cols);
    if lines.is_empty() {
        return String::new();
    }
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.2.iter().map(|p| p[0]))
        .filter(|x| *x > 0.0)
        .collect();
    let minx = xs.iter().cloned().fold(f64::INFINITY, f64::min).max(1e-3);
    let maxx = xs.iter().cloned().fold(0.0, f64::max).max(minx * 10.0);
    let (lx0, lx1) = (minx.log10().floor(), maxx.log10().ceil());
    let (left, top, pw, ph) = CDF_BOX;
    let width = left + pw + 250.0;
    let height = top + ph + 44.0;
    let xp = |x: f64| left + (x.max(minx).log10() - lx0) / (lx1 - lx0) * pw;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"100%\" style=\"max-width:{width:.0}px\" role=\"img\" aria-label=\"latency CDF\"><style>text{{font:11px system-ui,sans-serif;fill:#222}}</style>"
    );
    s.push_str(&cdf_grid((lx0, lx1), &xp, &v.label));
    for (i, line) in lines.iter().enumerate() {
        let dash = i >= PALETTE.len() || cols_repeat(&cols, line.0, i);
        s.push_str(&cdf_path(line, i, dash, &xp));
    }
    s.push_str("</svg>");
    s
}

/// The configurations' CDF lines of variant `v` (first repetition).
fn cdf_lines<'a>(e: &'a ExpResult, v: &Variant, cols: &[&'a str]) -> Vec<CdfLine<'a>> {
    let mut lines = vec![];
    for (c, col) in e.configs.iter().zip(cols) {
        if let Some(cdf) = e
            .cell(&v.id, &c.label)
            .and_then(|cell| cell.runs.first())
            .and_then(|r| r.out.cdf.as_ref())
        {
            if !cdf.is_empty() {
                lines.push((*col, c.label.as_str(), cdf));
            }
        }
    }
    lines
}

/// Fraction (0..1) to the CDF chart's y.
fn cdf_y(f: f64) -> f64 {
    let (_, top, _, ph) = CDF_BOX;
    top + ph - f * ph
}

/// The CDF chart's grid: latency ticks (decades `lx` of ms, placed by
/// `xp`), fraction ticks and the x axis' title naming `variant`.
fn cdf_grid(lx: (f64, f64), xp: &dyn Fn(f64) -> f64, variant: &str) -> String {
    let (left, top, pw, ph) = CDF_BOX;
    let mut s = String::new();
    for t in ticks(10f64.powf(lx.0), 10f64.powf(lx.1), true) {
        let x = xp(t);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#e3e3e3\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + ph,
            top + ph + 14.0,
            tick_txt(t)
        );
    }
    for k in 0..=4 {
        let f = k as f64 / 4.0;
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#e3e3e3\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{f:.2}</text>",
            cdf_y(f),
            left + pw,
            cdf_y(f),
            left - 4.0,
            cdf_y(f) + 4.0
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">request latency, ms (log scale), {}</text>",
        left + pw / 2.0,
        top + ph + 34.0,
        esc(variant)
    );
    s
}

/// One CDF line (dashed when its colour repeats) and its legend entry,
/// the `i`-th beside the plot.
fn cdf_path(line: &CdfLine, i: usize, dashed: bool, xp: &dyn Fn(f64) -> f64) -> String {
    let (left, top, pw, _) = CDF_BOX;
    let (col, label, cdf) = *line;
    let mut d = String::new();
    for (k, p) in cdf.iter().enumerate() {
        let _ = write!(
            d,
            "{}{:.1} {:.1}",
            if k == 0 { "M" } else { "L" },
            xp(p[0]),
            cdf_y(p[1])
        );
    }
    let dash = if dashed {
        " stroke-dasharray=\"5 3\""
    } else {
        ""
    };
    let ly = top + i as f64 * 16.0;
    format!(
        "<path d=\"{d}\" stroke=\"{col}\" stroke-width=\"2\" fill=\"none\"{dash}><title>{}</title></path><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{col}\" stroke-width=\"3\"{dash}/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        esc(label),
        left + pw + 12.0,
        ly + 5.0,
        left + pw + 32.0,
        ly + 5.0,
        left + pw + 38.0,
        ly + 9.0,
        esc(label)
    )
}

/// Whether an earlier line already used this colour (then dash this one).
fn cols_repeat(cols: &[&str], col: &str, i: usize) -> bool {
    cols.iter().take(i).filter(|c| **c == col).count() > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round() {
        assert_eq!(ticks(0.0, 37.4, false), vec![0.0, 10.0, 20.0, 30.0]);
        assert_eq!(ticks(0.0, 0.71, false), vec![0.0, 0.2, 0.4, 0.6]);
        assert_eq!(ticks(0.0, 26.7, false), vec![0.0, 10.0, 20.0]);
        assert_eq!(ticks(0.0, 12.0, false), vec![0.0, 5.0, 10.0]);
    }

    #[test]
    fn a_linear_axis_ends_at_a_round_tick_above_every_value() {
        for max in [0.71, 9.9, 26.7, 32.97, 509.9] {
            let a = Axis::new(&[max / 3.0, max], 0.0, 100.0);
            assert!(!a.log);
            assert!(a.hi >= max, "{max}: axis ends at {}", a.hi);
            assert!(a.x(max) < 100.0, "{max} drawn at the axis end");
            let t = ticks(a.lo, a.hi, false);
            assert!(*t.last().unwrap() >= max * 0.999, "{max}: {t:?}");
        }
    }

    #[test]
    fn log_ticks_are_decades_with_2_and_5_on_short_axes() {
        assert_eq!(
            ticks(0.1, 100.0, true),
            vec![0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(
            ticks(0.01, 1000.0, true),
            vec![0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
        );
    }

    #[test]
    fn axis_is_log_when_values_span_more_than_a_decade() {
        assert!(Axis::new(&[0.4, 57.0], 0.0, 100.0).log);
        assert!(!Axis::new(&[8.0, 28.0], 0.0, 100.0).log);
        let a = Axis::new(&[0.4, 57.0], 0.0, 100.0);
        assert!((a.x(1.0) - 100.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn one_colour_per_scheduler_from_a_colour_blind_safe_palette() {
        let cs = vec![
            crate::model::cfg("bfq-2010 B_max=512", "bfq-2010", &[]),
            crate::model::cfg("bfq-2010 B_max=4096", "bfq-2010", &[]),
            crate::model::cfg("cfq", "cfq", &[]),
        ];
        let c = colours(&cs);
        assert_eq!(c.len(), 3);
        assert!(c[0] != c[1] && c[1] != c[2] && c[0] != c[2]);
        let many: Vec<Config> = (0..10)
            .map(|i| crate::model::cfg(&format!("bfq {i}"), if i < 6 { "bfq" } else { "cfq" }, &[]))
            .collect();
        let c = colours(&many);
        assert_eq!(c[0], c[5]);
        assert_ne!(c[5], c[6]);
        assert!(c.iter().all(|x| PALETTE.contains(x)));
        assert_eq!(tick_txt(10.0), "10");
        assert_eq!(tick_txt(0.05), "0.05");
    }
}
