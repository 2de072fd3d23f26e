//! One module per subcommand.
mod bench_json;
mod json_pretty;
mod json_text;
mod stats_json;
pub mod cluster;
pub mod demo;
pub mod diff;
pub mod export;
pub mod fuse;
pub mod hang;
pub mod model;
pub mod plan;
pub mod predict;
pub mod report;
pub mod simulate;
mod simulate_sweep;
pub mod stats;
pub mod topo;
pub mod trace;
pub mod watch;

pub type CmdResult = Result<(), Box<dyn std::error::Error>>;
