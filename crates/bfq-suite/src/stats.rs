//! Statistics over repetitions: mean and the semi-width of the 95%
//! confidence interval of the mean (Student t), as the papers report
//! `v ± s`.

use serde::Serialize;

/// Two-sided 97.5% quantiles of Student's t for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// t quantile for a two-sided 95% interval with `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    match df {
        0 => f64::NAN,
        1..=30 => T975[df - 1],
        31..=40 => 2.021,
        41..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

/// Mean, 95% confidence semi-width, and range of a sample.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Semi-width of the 95% confidence interval of the mean (0 with one
    /// value: no interval can be given).
    pub ci95: f64,
    /// Sample standard deviation (n - 1).
    pub sd: f64,
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Runs whose value was not finite (NaN or infinite): left out of
    /// the other fields, and a finding that needs the metric does not
    /// hold ([`crate::check::val`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub nonfinite: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    /// Summarises `xs` (`None` if empty).
    pub fn of(xs: &[f64]) -> Option<Summary> {
        let n = xs.len();
        if n == 0 {
            return None;
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let ci95 = if n > 1 {
            t95(n - 1) * sd / (n as f64).sqrt()
        } else {
            0.0
        };
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Summary {
            n,
            mean,
            ci95,
            sd,
            median,
            min: xs.iter().cloned().fold(f64::INFINITY, f64::min),
            max: xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            nonfinite: 0,
        })
    }
}

/// Decimals suited to a number's size.
fn decimals(v: f64) -> usize {
    let a = v.abs();
    if a >= 100.0 {
        1
    } else if a >= 10.0 || a == 0.0 {
        2
    } else if a >= 0.1 {
        3
    } else {
        4
    }
}

/// Formats a number with a precision suited to its size.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    format!("{v:.*}", decimals(v))
}

/// `mean ± ci`, the interval with the mean's decimals.
pub fn fmt_pm(mean: f64, ci: f64) -> String {
    if !mean.is_finite() {
        return "—".into();
    }
    let d = if mean == 0.0 {
        decimals(ci)
    } else {
        decimals(mean)
    };
    format!("{} ± {ci:.*}", fmt_num(mean), d)
}

/// `mean ± ci` (or just the mean with one repetition), followed by how
/// many runs gave no finite value, if any.
pub fn fmt_summary(s: &Summary) -> String {
    let v = if s.n > 1 {
        fmt_pm(s.mean, s.ci95)
    } else {
        fmt_num(s.mean)
    };
    match s.nonfinite {
        0 => v,
        k => format!("{v} ({k} of {} runs non-finite)", k + s.n),
    }
}

/// `median [min–max]`, for metrics reported by their median (the range
/// is the spread over the repetitions), followed by how many runs gave no
/// finite value, if any.
pub fn fmt_median(s: &Summary) -> String {
    let v = if s.n > 1 {
        format!(
            "{} [{}–{}]",
            fmt_num(s.median),
            fmt_num(s.min),
            fmt_num(s.max)
        )
    } else {
        fmt_num(s.median)
    };
    match s.nonfinite {
        0 => v,
        k => format!("{v} ({k} of {} runs non-finite)", k + s.n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_of_known_sample() {
        // 1..=5: mean 3, sd sqrt(2.5), t(4) = 2.776
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(s.n, 5);
        assert!((s.mean - 3.0).abs() < 1e-12);
        assert!((s.sd - 2.5f64.sqrt()).abs() < 1e-12);
        let want = 2.776 * 2.5f64.sqrt() / 5f64.sqrt();
        assert!((s.ci95 - want).abs() < 1e-9, "{} vs {want}", s.ci95);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert_eq!(s.median, 3.0);
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 9.0]).unwrap().median, 3.5);
        assert_eq!(fmt_median(&s), "3.000 [1.000–5.000]");
    }

    #[test]
    fn single_value_and_constant() {
        let s = Summary::of(&[7.5]).unwrap();
        assert_eq!((s.mean, s.ci95, s.sd), (7.5, 0.0, 0.0));
        let s = Summary::of(&[2.0, 2.0, 2.0]).unwrap();
        assert_eq!(s.ci95, 0.0);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn t_table() {
        assert_eq!(t95(1), 12.706);
        assert_eq!(t95(9), 2.262);
        assert_eq!(t95(19), 2.093);
        assert_eq!(t95(1000), 1.960);
        assert!(t95(0).is_nan());
        // monotone decreasing
        for df in 1..200 {
            assert!(t95(df) >= t95(df + 1));
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_num(22.456), "22.46");
        assert_eq!(fmt_num(123.45), "123.5");
        assert_eq!(fmt_num(0.5), "0.500");
        assert_eq!(fmt_num(f64::NAN), "—");
        let s = Summary::of(&[1.0, 3.0]).unwrap();
        assert!(fmt_summary(&s).starts_with("2.000 ± "));
        let partial = Summary { nonfinite: 1, ..s };
        assert!(
            fmt_summary(&partial).ends_with(" (1 of 3 runs non-finite)"),
            "{}",
            fmt_summary(&partial)
        );
    }
}
