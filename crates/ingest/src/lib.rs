//! Sources of commlens: readers that turn what NCCL and the profilers write
//! into the canonical table of `commlens-core`.
//!
//! * [`nccl_log`]: `NCCL_DEBUG=INFO|TRACE` logs (streaming, byte-oriented);
//! * [`topo_xml`]: the topology XML of `NCCL_TOPO_DUMP_FILE`, into the same
//!   `Topology` the log's topology dump gives;
//! * [`inputs`]: expands files and folders, reads them in parallel, merges
//!   the per-file tables and assembles global ranks and logical communicators;
//! * [`merge`]: joins per-file tables, remapping their indices;
//! * [`lines`], [`lines_mapped`], [`bytes`]: the buffered and the memory-mapped
//!   line readers and byte-scanning helpers.

pub mod bytes;
pub mod error;
pub mod example_plugin;
pub mod hang_dump;
pub mod inputs;
pub mod inspector;
pub mod json_util;
pub mod kernel_name;
pub mod kineto;
pub mod lines;
pub mod lines_mapped;
pub mod merge;
pub mod nccl_log;
pub mod nccl_tests;
pub mod nsys;
pub mod plugin_out;
mod plugin_out_decode;
mod plugin_out_table;
pub mod topo_xml;

pub use error::IngestError;
pub use inputs::{expand_inputs, expand_inputs_noted, load_any, load_inputs, sniff, Expanded, InputFormat, Loaded};
