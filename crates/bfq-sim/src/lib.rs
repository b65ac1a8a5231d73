//! placeholder, see the crate's issue
