//! Sinks for results: aligned terminal tables and CSV (JSON comes from the
//! analyses' serde types directly), plus number formatting for people.
//!
//! A [`Table`] is plain strings; analyses decide what goes in it, this crate
//! only decides how it looks.

pub mod table;

pub use table::{human_bytes, Align, Table};
