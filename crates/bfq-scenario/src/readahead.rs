//! How a simulated reader issues its read-ahead (a flow's
//! `readahead_style`; the read-ahead model itself is bfq-sim's
//! `readahead`).

use serde::Deserialize;

/// When the asynchronous window is issued.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum Style {
    /// At the marker, even while its page is in flight (2.6.23 to today).
    #[default]
    #[serde(rename = "ondemand")]
    Ondemand,
    /// Once the program read the marked page: one window in flight.
    #[serde(rename = "single")]
    Single,
}
