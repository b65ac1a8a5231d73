//! The scheduler configurations the experiments use, by the setting names
//! of docs/schedulers.md. Labels are the rows of the report's tables.

use crate::model::{cfg, Config};

/// BFQ as in the 2010 paper, with B_max in sectors and T_wait = 4 ms.
pub fn bfq2010(b_max: u32) -> Config {
    cfg(
        &format!("bfq-2010 B_max={b_max}"),
        "bfq-2010",
        &[("max_budget", &b_max.to_string()), ("slice_idle", "4ms")],
    )
}

/// SCAN-EDF with granularity Delta (ms) and T_wait (ms).
pub fn scan_edf(delta_ms: u32, t_wait_ms: u32) -> Config {
    cfg(
        &format!("scan-edf Delta={delta_ms}ms T_wait={t_wait_ms}ms"),
        "scan-edf",
        &[
            ("delta", &format!("{delta_ms}ms")),
            ("t_wait", &format!("{t_wait_ms}ms")),
        ],
    )
}

/// YFQ with a batch size and T_wait (ms).
pub fn yfq(bt: u32, t_wait_ms: u32) -> Config {
    cfg(
        &format!("yfq BT={bt} T_wait={t_wait_ms}ms"),
        "yfq",
        &[("bt_size", &bt.to_string()), ("t_wait", &format!("{t_wait_ms}ms"))],
    )
}

/// CFQ with its sync time slice (ms); 100 ms is the default (label `cfq`).
pub fn cfq(slice_ms: u32) -> Config {
    if slice_ms == 100 {
        cfg("cfq", "cfq", &[])
    } else {
        cfg(
            &format!("cfq slice={slice_ms}ms"),
            "cfq",
            &[("slice_sync", &format!("{slice_ms}ms"))],
        )
    }
}

/// C-LOOK.
pub fn clook() -> Config {
    cfg("clook", "clook", &[])
}

/// The anticipatory scheduler.
pub fn anticipatory() -> Config {
    cfg("as", "as", &[])
}

/// A scheduler with its default settings, labelled by its name.
pub fn plain(name: &str) -> Config {
    cfg(name, name, &[])
}
