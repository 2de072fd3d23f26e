//! One module per subcommand.
pub mod demo;
pub mod hang;
pub mod stats;
pub mod topo;
pub mod trace;

pub type CmdResult = Result<(), Box<dyn std::error::Error>>;
