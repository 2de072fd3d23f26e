//! One module per subcommand.
pub mod demo;
pub mod stats;
pub mod topo;

pub type CmdResult = Result<(), Box<dyn std::error::Error>>;
