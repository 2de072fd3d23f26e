//! Sinks for results: aligned terminal tables and CSV (JSON comes from the
//! analyses' serde types directly), plus number formatting for people.
//!
//! A [`Table`] is plain strings; analyses decide what goes in it, this crate
//! only decides how it looks.
//!
//! Trace export: [`chrome`] writes an [`commlens_core::OpTable`] as Chrome
//! trace JSON and [`perfetto`] as a Perfetto protobuf trace, both streamed,
//! both with the track layout and per-operation arguments of [`timeline`]
//! (one process per rank, one track per stream, overflow tracks for
//! overlaps); callers add analysis results through [`timeline::Enrich`].
//!
//! Report: [`report`] writes one self-contained HTML page with inline SVG
//! charts from a serializable [`report::Report`] that the caller fills.

pub mod chrome;
pub mod perfetto;
pub mod report;
pub mod table;
pub mod timeline;

pub use table::{human_bytes, human_bytes_of, Align, Table};
pub use timeline::{ArgValue, Enrich, NoEnrich, TimeRange, TraceOptions, TraceSummary};
