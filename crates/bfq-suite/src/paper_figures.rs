//! The papers' own numbers, to print beside ours. Each entry names the
//! paper, the table or figure, and quotes the text it came from
//! (the papers, listed in the README). Units are the papers' (MB/s as printed; we report
//! MiB/s). Keys (`experiment`, `variant`, `config`, `metric`) match the
//! suite's experiments so the report can put them in the same cell.
//!
//! Table III of the 2010 paper is garbled in the text extraction: each
//! block of two rows ("Throughput (2 files)", "Throughput (5 files)")
//! appears *before* its scheduler's name. We read each block as belonging
//! to the name that follows it, which is the only reading consistent with
//! the paper's prose (YFQ's 5.44 + 5.44 matches its ~10.8 MB/s aggregate
//! of Table II; AS "has the most asymmetric bandwidth distribution").

use serde::Serialize;

/// One number from a paper.
#[derive(Clone, Debug, Serialize)]
pub struct PaperFigure {
    /// Experiment id.
    pub experiment: &'static str,
    /// Variant id.
    pub variant: &'static str,
    /// Configuration id.
    pub config: &'static str,
    /// Metric id.
    pub metric: &'static str,
    /// The number, in `unit`.
    pub value: f64,
    /// Semi-width of the 95% CI when the paper gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95: Option<f64>,
    /// `=` exact, `~` approximate or derived, `<` an upper bound.
    pub relation: &'static str,
    /// Unit of `value` (e.g. `MB/s`, `ms`).
    pub unit: &'static str,
    /// Paper and table/figure.
    pub source: &'static str,
    /// The text it came from.
    pub text: &'static str,
}

#[allow(clippy::too_many_arguments)]
const fn pf(
    experiment: &'static str,
    variant: &'static str,
    config: &'static str,
    metric: &'static str,
    value: f64,
    ci: f64,
    unit: &'static str,
    source: &'static str,
    text: &'static str,
) -> PaperFigure {
    PaperFigure {
        experiment,
        variant,
        config,
        metric,
        value,
        ci95: if ci > 0.0 { Some(ci) } else { None },
        relation: "=",
        unit,
        source,
        text,
    }
}

const fn approx(mut p: PaperFigure, relation: &'static str) -> PaperFigure {
    p.relation = relation;
    p
}

const T2: &str = "2010 paper, Table II";
const T3: &str = "2010 paper, Table III";
const T4: &str = "2010 paper, Table IV";
const T5: &str = "2010 paper, Table V";
const T6: &str = "2010 paper, Table VI";
const T7: &str = "2010 paper, Table VII";

const BFQ4: &str = "bfq-2010 B_max=4096";
const SE80: &str = "scan-edf Delta=80ms T_wait=4ms";
const YFQ4: &str = "yfq BT=4 T_wait=4ms";

/// Every number taken from the papers.
pub static FIGURES: &[PaperFigure] = &[
    // ---- 2010, Table II: aggregate throughput, two 128 MB files
    pf("2010-throughput", "2files", "bfq-2010 B_max=16384", "agg", 22.46, 0.81, "MB/s", T2, "BFQ 22.46 ± 0.81, 16384 sect"),
    pf("2010-throughput", "2files", "scan-edf Delta=640ms T_wait=0ms", "agg", 21.18, 0.47, "MB/s", T2, "SCAN-EDF T_wait = 0 ms 21.18 ± 0.47, 640 ms"),
    pf("2010-throughput", "2files", "scan-edf Delta=640ms T_wait=4ms", "agg", 23.39, 0.51, "MB/s", T2, "SCAN-EDF T_wait = 4 ms 23.39 ± 0.51"),
    pf("2010-throughput", "2files", "yfq BT=16 T_wait=0ms", "agg", 10.64, 0.25, "MB/s", T2, "YFQ T_wait = 0 ms 10.64 ± 0.25, 16 reqs"),
    pf("2010-throughput", "2files", "yfq BT=16 T_wait=4ms", "agg", 10.80, 0.20, "MB/s", T2, "YFQ T_wait = 4 ms 10.80 ± 0.20"),
    pf("2010-throughput", "2files", "cfq", "agg", 16.91, 1.30, "MB/s", T2, "CFQ 16.91 ± 1.30, 100 ms"),
    pf("2010-throughput", "2files", "clook", "agg", 20.59, 0.76, "MB/s", T2, "C-LOOK 20.59 ± 0.76"),
    pf("2010-throughput", "2files", "as", "agg", 32.97, 1.89, "MB/s", T2, "AS 32.97 ± 1.89"),
    // ---- 2010, Table III: equal weights (see the module note on its layout)
    pf("2010-fairness", "2files", BFQ4, "thr.1", 9.95, 0.43, "MB/s", T3, "BFQ (B_max = 4096): Throughput (2 files) 9.95 ±0.43 ... 9.81 ±0.47"),
    pf("2010-fairness", "2files", BFQ4, "thr.2", 9.81, 0.47, "MB/s", T3, "BFQ (B_max = 4096): Throughput (2 files) 9.95 ±0.43 ... 9.81 ±0.47"),
    approx(pf("2010-fairness", "2files", BFQ4, "dev", 0.7, 0.0, "%", T3, "derived from the means 9.95 and 9.81"), "~"),
    pf("2010-fairness", "5files", BFQ4, "thr.1", 4.29, 0.10, "MB/s", T3, "BFQ: Throughput (5 files) 4.29 ±0.10 4.30 ±0.09 4.30 ±0.07 4.29 ±0.10 4.31 ±0.09"),
    pf("2010-fairness", "5files", BFQ4, "thr.5", 4.31, 0.09, "MB/s", T3, "BFQ: Throughput (5 files) ... 4.31 ±0.09"),
    approx(pf("2010-fairness", "5files", BFQ4, "dev", 0.3, 0.0, "%", T3, "derived from the means 4.29-4.31"), "~"),
    pf("2010-fairness", "2files", SE80, "thr.1", 10.72, 0.22, "MB/s", T3, "SCAN-EDF (Delta = 80 ms, T_wait = 4 ms): Throughput (2 files) 10.72 ±0.22 ... 9.62 ±0.19"),
    pf("2010-fairness", "2files", SE80, "thr.2", 9.62, 0.19, "MB/s", T3, "SCAN-EDF: 9.62 ±0.19"),
    approx(pf("2010-fairness", "2files", SE80, "dev", 5.4, 0.0, "%", T3, "derived from the means 10.72 and 9.62"), "~"),
    pf("2010-fairness", "5files", SE80, "thr.1", 2.17, 0.02, "MB/s", T3, "SCAN-EDF: Throughput (5 files) 2.17 ±0.02 (x4) 2.19 ±0.03"),
    pf("2010-fairness", "2files", YFQ4, "thr.1", 5.44, 0.10, "MB/s", T3, "YFQ (BT_size = 4, T_wait = 4 ms): Throughput (2 files) 5.44 ±0.10 ... 5.44 ±0.10"),
    pf("2010-fairness", "2files", YFQ4, "thr.2", 5.44, 0.10, "MB/s", T3, "YFQ: 5.44 ±0.10"),
    approx(pf("2010-fairness", "2files", YFQ4, "dev", 0.0, 0.0, "%", T3, "derived from the means 5.44 and 5.44"), "~"),
    pf("2010-fairness", "5files", YFQ4, "thr.1", 1.39, 0.02, "MB/s", T3, "YFQ: Throughput (5 files) 1.39 ±0.02 (x4) 1.39 ±0.03"),
    pf("2010-fairness", "2files", "cfq", "thr.1", 11.92, 0.44, "MB/s", T3, "CFQ (T_slice = 100 ms): Throughput (2 files) 11.92 ±0.44 ... 8.61 ±0.67"),
    pf("2010-fairness", "2files", "cfq", "thr.2", 8.61, 0.67, "MB/s", T3, "CFQ: 8.61 ±0.67"),
    approx(pf("2010-fairness", "2files", "cfq", "dev", 16.1, 0.0, "%", T3, "derived from the means 11.92 and 8.61"), "~"),
    pf("2010-fairness", "5files", "cfq", "thr.1", 5.24, 0.14, "MB/s", T3, "CFQ: Throughput (5 files) 5.24 ±0.14 4.91 ±0.15 4.66 ±0.11 4.37 ±0.10 4.01 ±0.17"),
    pf("2010-fairness", "5files", "cfq", "thr.5", 4.01, 0.17, "MB/s", T3, "CFQ: ... 4.01 ±0.17"),
    approx(pf("2010-fairness", "5files", "cfq", "dev", 17.1, 0.0, "%", T3, "derived from the means 5.24 ... 4.01 (mean 4.64)"), "~"),
    pf("2010-fairness", "2files", "clook", "thr.1", 11.52, 1.78, "MB/s", T3, "C-LOOK: Throughput (2 files) 11.52 ±1.78 ... 10.57 ±0.55"),
    pf("2010-fairness", "2files", "clook", "thr.2", 10.57, 0.55, "MB/s", T3, "C-LOOK: 10.57 ±0.55"),
    approx(pf("2010-fairness", "2files", "clook", "dev", 4.3, 0.0, "%", T3, "derived from the means 11.52 and 10.57"), "~"),
    pf("2010-fairness", "5files", "clook", "thr.1", 5.56, 0.67, "MB/s", T3, "C-LOOK: Throughput (5 files) 5.56 ±0.67 5.14 ±0.41 5.05 ±0.50 4.95 ±0.35 4.83 ±0.09"),
    pf("2010-fairness", "2files", "as", "thr.1", 32.41, 13.39, "MB/s", T3, "AS: Throughput (2 files) 32.41 ±13.39 ... 17.78 ±1.10"),
    pf("2010-fairness", "2files", "as", "thr.2", 17.78, 1.10, "MB/s", T3, "AS: 17.78 ±1.10"),
    approx(pf("2010-fairness", "2files", "as", "dev", 29.1, 0.0, "%", T3, "derived from the means 32.41 and 17.78"), "~"),
    pf("2010-fairness", "5files", "as", "thr.1", 32.83, 11.95, "MB/s", T3, "AS: Throughput (5 files) 32.83 ±11.95 31.72 ±1.37 29.80 ±0.50 12.56 ±10.46 18.29 ±0.43"),
    // ---- 2010, Table IV: BFQ with asymmetric weights
    pf("2010-weights", "w2-1", BFQ4, "thr.1", 14.62, 0.60, "MB/s", T4, "Weight 2 2 2 1 1; Throughput (2 files) 14.62 ±0.60 ... 7.31 ±0.32"),
    pf("2010-weights", "w2-1", BFQ4, "thr.2", 7.31, 0.32, "MB/s", T4, "Throughput (2 files) ... 7.31 ±0.32"),
    pf("2010-weights", "w2-2-2-1-1", BFQ4, "thr.1", 5.60, 0.08, "MB/s", T4, "Throughput (5 files) 5.60 ±0.08 5.60 ±0.08 5.60 ±0.08 2.81 ±0.04 2.81 ±0.04"),
    pf("2010-weights", "w2-2-2-1-1", BFQ4, "thr.4", 2.81, 0.04, "MB/s", T4, "Throughput (5 files) ... 2.81 ±0.04"),
    pf("2010-weights", "w10-1", BFQ4, "thr.1", 26.81, 0.60, "MB/s", T4, "Weight 10 2 2 1 1; Throughput (2 files) 26.81 ±0.60 ... 2.77 ±0.16"),
    pf("2010-weights", "w10-1", BFQ4, "thr.2", 2.77, 0.16, "MB/s", T4, "Throughput (2 files) ... 2.77 ±0.16"),
    approx(pf("2010-weights", "w10-1", BFQ4, "dev", 3.5, 0.0, "%", T4, "derived from the means 26.81 and 2.77 (share of the weight-1 file 9.4% vs 9.1% ideal)"), "~"),
    pf("2010-weights", "w10-2-2-1-1", BFQ4, "thr.1", 16.06, 0.28, "MB/s", T4, "Throughput (5 files) 16.06 ±0.28 3.25 ±0.07 3.25 ±0.07 1.64 ±0.04 1.65 ±0.04"),
    pf("2010-weights", "w10-2-2-1-1", BFQ4, "thr.2", 3.25, 0.07, "MB/s", T4, "Throughput (5 files) ... 3.25 ±0.07"),
    pf("2010-weights", "w10-1", SE80, "thr.1", 26.58, 0.50, "MB/s", "2010 paper, Section V-D (text)", "the throughputs were {26.58 ± 0.50, 6.92 ± 0.20} MB/s for SCAN-EDF"),
    pf("2010-weights", "w10-1", SE80, "thr.2", 6.92, 0.20, "MB/s", "2010 paper, Section V-D (text)", "{26.58 ± 0.50, 6.92 ± 0.20} MB/s for SCAN-EDF"),
    pf("2010-weights", "w10-1", YFQ4, "thr.1", 22.70, 0.12, "MB/s", "2010 paper, Section V-D (text)", "and {22.70 ± 0.12, 5.41 ± 0.12} MB/s for YFQ"),
    pf("2010-weights", "w10-1", YFQ4, "thr.2", 5.41, 0.12, "MB/s", "2010 paper, Section V-D (text)", "{22.70 ± 0.12, 5.41 ± 0.12} MB/s for YFQ"),
    // ---- 2010, Table V: web server
    pf("2010-web", "web", BFQ4, "small_s", 1.74, 0.11, "s", T5, "BFQ 1.74 ± 0.11 | 2.26 ± 2.34 | 17.13 ± 0.65"),
    pf("2010-web", "web", SE80, "small_s", 7.68, 0.20, "s", T5, "SCAN-EDF 7.68 ± 0.20 | 3.29 ± 3.10 | 8.71 ± 0.09"),
    pf("2010-web", "web", YFQ4, "small_s", 0.40, 0.01, "s", T5, "YFQ 0.40 ± 0.01 | 1.36 ± 1.71 | 6.87 ± 0.09"),
    pf("2010-web", "web", "cfq", "small_s", 3.86, 0.17, "s", T5, "CFQ 3.86 ± 0.17 | 2.97 ± 2.47 | 18.20 ± 0.79"),
    pf("2010-web", "web", "clook", "small_s", 7.78, 0.27, "s", T5, "C-LOOK 7.78 ± 0.27 | 9.65 ± 3.93 | 19.47 ± 0.66"),
    pf("2010-web", "web", "as", "small_s", 7.69, 0.27, "s", T5, "AS 7.69 ± 0.27 | 16.61 ± 4.00 | 20.60 ± 1.22"),
    pf("2010-web", "web", BFQ4, "agg", 17.13, 0.65, "MB/s", T5, "BFQ ... 17.13 ± 0.65"),
    pf("2010-web", "web", SE80, "agg", 8.71, 0.09, "MB/s", T5, "SCAN-EDF ... 8.71 ± 0.09"),
    pf("2010-web", "web", YFQ4, "agg", 6.87, 0.09, "MB/s", T5, "YFQ ... 6.87 ± 0.09"),
    pf("2010-web", "web", "cfq", "agg", 18.20, 0.79, "MB/s", T5, "CFQ ... 18.20 ± 0.79"),
    pf("2010-web", "web", "clook", "agg", 19.47, 0.66, "MB/s", T5, "C-LOOK ... 19.47 ± 0.66"),
    pf("2010-web", "web", "as", "agg", 20.60, 1.22, "MB/s", T5, "AS ... 20.60 ± 1.22"),
    // ---- 2010, Table VI: DBMS
    pf("2010-dbms", "depth1", BFQ4, "compl_s", 0.92, 0.12, "s", T6, "BFQ 1 0.92 ± 0.12 0.44 ± 0.00"),
    pf("2010-dbms", "depth10", BFQ4, "compl_s", 7.93, 0.29, "s", T6, "BFQ 10 7.93 ± 0.29 0.49 ± 0.00"),
    pf("2010-dbms", "depth1", SE80, "compl_s", 0.93, 0.0, "s", T6, "SCAN-EDF 1 0.93 ± 0.00 0.44 ± 0.00"),
    pf("2010-dbms", "depth10", SE80, "compl_s", 6.49, 0.85, "s", T6, "SCAN-EDF 10 6.49 ± 0.85 0.60 ± 0.00"),
    pf("2010-dbms", "depth1", YFQ4, "compl_s", 0.69, 0.01, "s", T6, "YFQ 1 0.69 ± 0.01 0.59 ± 0.00"),
    pf("2010-dbms", "depth10", YFQ4, "compl_s", 6.59, 0.06, "s", T6, "YFQ 10 6.59 ± 0.06 0.59 ± 0.00"),
    pf("2010-dbms", "depth1", "cfq", "compl_s", 0.91, 0.09, "s", T6, "CFQ 1 0.91 ± 0.09 0.45 ± 0.00"),
    pf("2010-dbms", "depth10", "cfq", "compl_s", 8.01, 0.30, "s", T6, "CFQ 10 8.01 ± 0.30 0.49 ± 0.00"),
    pf("2010-dbms", "depth1", "clook", "compl_s", 0.67, 0.01, "s", T6, "C-LOOK/ AS 1 0.67 ± 0.01 0.62 ± 0.00"),
    pf("2010-dbms", "depth10", "clook", "compl_s", 5.52, 0.12, "s", T6, "C-LOOK/ AS 10 5.52 ± 0.12 0.71 ± 0.00"),
    pf("2010-dbms", "depth1", "as", "compl_s", 0.67, 0.01, "s", T6, "C-LOOK/ AS 1 0.67 ± 0.01 0.62 ± 0.00"),
    pf("2010-dbms", "depth10", "as", "compl_s", 5.52, 0.12, "s", T6, "C-LOOK/ AS 10 5.52 ± 0.12 0.71 ± 0.00"),
    pf("2010-dbms", "depth1", BFQ4, "agg", 0.44, 0.0, "MB/s", T6, "BFQ 1 ... 0.44 ± 0.00"),
    pf("2010-dbms", "depth10", BFQ4, "agg", 0.49, 0.0, "MB/s", T6, "BFQ 10 ... 0.49 ± 0.00"),
    pf("2010-dbms", "depth1", SE80, "agg", 0.44, 0.0, "MB/s", T6, "SCAN-EDF 1 ... 0.44 ± 0.00"),
    pf("2010-dbms", "depth10", SE80, "agg", 0.60, 0.0, "MB/s", T6, "SCAN-EDF 10 ... 0.60 ± 0.00"),
    pf("2010-dbms", "depth1", YFQ4, "agg", 0.59, 0.0, "MB/s", T6, "YFQ 1 ... 0.59 ± 0.00"),
    pf("2010-dbms", "depth10", YFQ4, "agg", 0.59, 0.0, "MB/s", T6, "YFQ 10 ... 0.59 ± 0.00"),
    pf("2010-dbms", "depth1", "cfq", "agg", 0.45, 0.0, "MB/s", T6, "CFQ 1 ... 0.45 ± 0.00"),
    pf("2010-dbms", "depth10", "cfq", "agg", 0.49, 0.0, "MB/s", T6, "CFQ 10 ... 0.49 ± 0.00"),
    pf("2010-dbms", "depth1", "clook", "agg", 0.62, 0.0, "MB/s", T6, "C-LOOK/ AS 1 ... 0.62 ± 0.00"),
    pf("2010-dbms", "depth10", "clook", "agg", 0.71, 0.0, "MB/s", T6, "C-LOOK/ AS 10 ... 0.71 ± 0.00"),
    pf("2010-dbms", "depth1", "as", "agg", 0.62, 0.0, "MB/s", T6, "C-LOOK/ AS 1 ... 0.62 ± 0.00"),
    pf("2010-dbms", "depth10", "as", "agg", 0.71, 0.0, "MB/s", T6, "C-LOOK/ AS 10 ... 0.71 ± 0.00"),
    // ---- 2010, Table VII: video streaming
    pf("2010-video", "30movies", BFQ4, "streams", 24.00, 0.0, "streams", T7, "BFQ 4096 sect 24.00 ± 0.00 7.56 ± 0.87"),
    pf("2010-video", "30movies", "bfq-2010 B_max=8192", "streams", 23.95, 0.42, "streams", T7, "8192 sect 23.95 ± 0.42 8.15 ± 1.08"),
    pf("2010-video", "30movies", "bfq-2010 B_max=16384", "streams", 18.70, 9.45, "streams", T7, "16384 sect 18.70 ± 9.45 12.78 ± 5.64"),
    pf("2010-video", "30movies", "scan-edf Delta=20ms T_wait=4ms", "streams", 12.00, 0.0, "streams", T7, "SCAN-EDF 20 ms 12.00 ± 0.00 8.93 ± 0.22"),
    pf("2010-video", "30movies", YFQ4, "streams", 19.00, 0.0, "streams", T7, "YFQ 4 reqs 19.00 ± 0.00 5.85 ± 0.55"),
    pf("2010-video", "30movies", "cfq slice=20ms", "streams", 14.35, 1.40, "streams", T7, "CFQ 20 ms 14.35 ± 1.40 12.59 ± 2.12"),
    pf("2010-video", "30movies", "clook", "streams", 1.8, 1.16, "streams", T7, "C-LOOK 1.8 ± 1.16 22.66 ± 0.96"),
    pf("2010-video", "30movies", "as", "streams", 1.1, 1.04, "streams", T7, "AS 1.1 ± 1.04 28.39 ± 5.36"),
    pf("2010-video", "30movies", BFQ4, "agg", 7.56, 0.87, "MB/s", T7, "BFQ 4096 sect ... 7.56 ± 0.87"),
    pf("2010-video", "30movies", BFQ4, "agg_24", 7.56, 0.87, "MB/s", T7, "BFQ 4096 sect 24.00 ± 0.00 7.56 ± 0.87 (24 movies over the last 5 s)"),
    pf("2010-video", "30movies", "cfq slice=20ms", "agg", 12.59, 2.12, "MB/s", T7, "CFQ 20 ms ... 12.59 ± 2.12"),
    pf("2010-video", "30movies", "clook", "agg", 22.66, 0.96, "MB/s", T7, "C-LOOK ... 22.66 ± 0.96"),
    pf("2010-video", "30movies", "as", "agg", 28.39, 5.36, "MB/s", T7, "AS ... 28.39 ± 5.36"),
    // ---- 2014 report (its figures have no printed numbers; these are from the text)
    approx(pf("2014-throughput", "10r-seq-short", "cfq", "agg", 59.6, 0.0, "MB/s", "2014 report, Section 7.2.1 (text)", "CFQ is a little bit slower, and its average aggregate throughput over the first 15 seconds is 59.6 MB/s (workload not named; we place it at 10r-seq)"), "~"),
    approx(pf("2014-startup", "bash/10r-seq", "bfq-plus-2014", "startup_s", 0.20, 0.0, "s", "2014 report, Section 7.3.1 (text on Fig. 5(b), 10r-seq; bash's disk time under BFQ+, read as its start-up time)", "the percentage of disk time devoted to bash is very low during the benchmark, about 0.20 seconds against a one-second pause between invocations"), "~"),
    approx(pf("2014-startup", "bash/10r-seq", "bfq-plus-2014 low_latency=0", "startup_s", 0.55, 0.0, "s", "2014 report, Section 7.3.1 (text)", "the bash start-up time under BFQ+ with low_latency disabled was already below 0.55 seconds with any of the workloads"), "<"),
    approx(pf("2014-startup-ncq", "bash/10r-seq", "bfq-plus-2014", "startup_s", 0.32, 0.0, "s", "2014 report, Table 2", "BFQ+ bash start-up range 0.27 - 0.32 s, konsole 10.7 - 196 s (over the four workloads)"), "<"),
    approx(pf("2014-startup-ncq", "bash/10r-seq", crate::exp2014::BFQ, "startup_s", 0.74, 0.0, "s", "2014 report, Table 2", "BFQ bash 0.51 - 0.74 s, konsole 30.9 - 188 s"), "<"),
    approx(pf("2014-startup-ncq", "bash/10r-seq", "cfq", "startup_s", 7.44, 0.0, "s", "2014 report, Table 2", "CFQ bash 1.05 - 7.44 s, konsole 14.7 - 2940 s"), "<"),
    approx(pf("2014-startup-ncq", "bash/10r-seq", "noop", "startup_s", 10.8, 0.0, "s", "2014 report, Table 2", "NOOP bash 6.19 - 10.8 s, konsole 1.55 - 408 s"), "<"),
    // ---- 2018 article (figures without printed numbers; text estimates)
    approx(pf("2018-io-control", "seq-readers/rand-target", "prop-bfq", "total", 234.0, 0.0, "MB/s", "2018 article, Section 9, Fig. 1 (text)", "this throughput is about 90% of the maximum throughput that could be reached ... (500+23)/2 ~ 260 MB/s"), "~"),
    approx(pf("2018-io-control", "seq-readers/rand-target", "low-none", "total", 52.0, 0.0, "MB/s", "2018 article, Section 9, Fig. 1 (text)", "low-none then reaches less than 20% of the total throughput that could be reached while still preserving the target bandwidth (~260 MB/s)"), "<"),
    approx(pf("2018-io-control", "seq-readers/rand-target", "low-none", "target", 10.0, 0.0, "MB/s", "2018 article, Section 9, Fig. 1 (text)", "low-none does guarantee the configured low limit to the target"), "~"),
];

/// The figures of one experiment.
pub fn for_experiment(id: &str) -> Vec<PaperFigure> {
    FIGURES
        .iter()
        .filter(|f| f.experiment == id)
        .cloned()
        .collect()
}

/// The figure for a cell and metric, if the paper gives one.
pub fn lookup<'a>(
    figs: &'a [PaperFigure],
    variant: &str,
    config: &str,
    metric: &str,
) -> Option<&'a PaperFigure> {
    figs.iter()
        .find(|f| f.variant == variant && f.config == config && f.metric == metric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_names_a_known_experiment_variant_and_config() {
        let exps = crate::experiments();
        for f in FIGURES {
            let e = exps
                .iter()
                .find(|e| e.id == f.experiment)
                .unwrap_or_else(|| panic!("{}: unknown experiment", f.experiment));
            assert!(
                e.variants.iter().any(|v| v.id == f.variant),
                "{} {}: unknown variant",
                f.experiment,
                f.variant
            );
            assert!(
                e.configs.iter().any(|c| c.label == f.config),
                "{} {}: unknown config",
                f.experiment,
                f.config
            );
            assert!(
                e.metrics.iter().any(|m| m.key == f.metric),
                "{} {}: unknown metric",
                f.experiment,
                f.metric
            );
            assert!(!f.text.is_empty() && !f.source.is_empty());
        }
    }
}
