//! Small helpers for the findings' checks: tolerances stated in the
//! claims, and numbers for causes.

use crate::model::ExpResult;
use crate::paper_figures::lookup;
use crate::stats::fmt_num;

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

/// Largest value of a slice (NaN-free input).
pub fn max(xs: &[f64]) -> f64 {
    xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
}

/// Smallest value of a slice.
pub fn min(xs: &[f64]) -> f64 {
    xs.iter().cloned().fold(f64::INFINITY, f64::min)
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
}
