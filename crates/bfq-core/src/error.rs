//! The errors every scheduler returns for bad input. No scheduler panics on
//! input from its caller; it returns one of these and changes nothing.

use crate::types::{FlowId, GroupId, ReqId, Time, MAX_TIME};
use std::fmt;

/// Bad input to a scheduler, or a bad setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchedError {
    /// No such flow (never created, or removed).
    UnknownFlow(FlowId),
    /// No such group.
    UnknownGroup(GroupId),
    /// The group still holds flows or groups (for the root group: it is
    /// never removed).
    GroupNotEmpty(GroupId),
    /// Weight outside 1..=1000.
    InvalidWeight(u32),
    /// Priority level outside 0..=7.
    InvalidLevel(u8),
    /// A request of zero sectors.
    ZeroLength(ReqId),
    /// A request whose end (`sector + sectors`) is past the last sector a
    /// `u64` can address.
    SectorOverflow(ReqId),
    /// Creating one more flow or group than a scheduler holds at once
    /// ([`crate::MAX_LIVE_IDS`]).
    TooManyIds(&'static str),
    /// A call's `now` past [`crate::MAX_TIME`], the end of a scheduler's
    /// clock.
    TimeOutOfRange(Time),
    /// A request id the scheduler already holds.
    DuplicateRequest(ReqId),
    /// Completion of a request the scheduler does not hold.
    UnknownRequest(ReqId),
    /// Completion of a request that is queued but was never dispatched.
    NotDispatched(ReqId),
    /// A setting name the scheduler does not know.
    UnknownSetting {
        /// The scheduler built.
        scheduler: String,
        /// The setting's name as given.
        key: String,
    },
    /// A setting value that does not parse or is out of range.
    InvalidSetting {
        /// The setting's name.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it (e.g. the valid range).
        why: String,
    },
    /// A scheduler name nobody provides.
    UnknownScheduler(String),
    /// A setting given as text that is not `key=value` (as given).
    NotKeyValue(String),
}

impl fmt::Display for SchedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedError::UnknownFlow(id) => write!(f, "unknown flow {}", id.0),
            SchedError::UnknownGroup(id) => write!(f, "unknown group {}", id.0),
            SchedError::GroupNotEmpty(id) if *id == GroupId::ROOT => {
                write!(f, "the root group cannot be removed")
            }
            SchedError::GroupNotEmpty(id) => {
                write!(f, "group {} still holds flows or groups", id.0)
            }
            SchedError::InvalidWeight(w) => {
                write!(f, "weight {w} is out of range (1..=1000)")
            }
            SchedError::InvalidLevel(l) => {
                write!(f, "priority level {l} is out of range (0..=7)")
            }
            SchedError::ZeroLength(id) => write!(f, "request {id} has zero length"),
            SchedError::SectorOverflow(id) => {
                write!(f, "request {id} ends past the last addressable sector")
            }
            SchedError::TooManyIds(what) => write!(
                f,
                "too many {what}: a scheduler holds at most {} at once",
                crate::types::MAX_LIVE_IDS
            ),
            SchedError::TimeOutOfRange(t) => {
                write!(
                    f,
                    "time {t} ns is past the end of a scheduler's clock ({MAX_TIME} ns)"
                )
            }
            SchedError::DuplicateRequest(id) => {
                write!(f, "request id {id} is already held by the scheduler")
            }
            SchedError::UnknownRequest(id) => {
                write!(f, "request {id} is not held by the scheduler")
            }
            SchedError::NotDispatched(id) => {
                write!(f, "request {id} was completed but never dispatched")
            }
            SchedError::UnknownSetting { scheduler, key } => {
                write!(f, "scheduler '{scheduler}' has no setting '{key}'")
            }
            SchedError::InvalidSetting { key, value, why } => {
                write!(f, "setting {key}={value}: {why}")
            }
            SchedError::UnknownScheduler(name) => write!(f, "unknown scheduler '{name}'"),
            SchedError::NotKeyValue(text) => {
                write!(f, "'{text}' is not a setting: expected KEY=VALUE")
            }
        }
    }
}

impl std::error::Error for SchedError {}
