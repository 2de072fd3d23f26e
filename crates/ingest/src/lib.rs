//! Sources of commlens: readers that turn what NCCL and the profilers write
//! into the canonical table of `commlens-core`.
//!
//! * [`nccl_log`]: `NCCL_DEBUG=INFO|TRACE` logs (streaming, byte-oriented);
//! * [`topo_xml`]: the topology XML of `NCCL_TOPO_DUMP_FILE`, into the same
//!   `Topology` the log's topology dump gives;
//! * [`inputs`]: expands files and folders (and unpacks archives), reads logs
//!   in parallel, merges the per-file tables and assembles global ranks and
//!   logical communicators;
//! * [`kind`]: what each input file is; [`load_any`]: every kind together,
//!   each file by its own reader, unknown files in folders skipped with a note;
//! * [`merge`]: joins per-file tables, remapping their indices;
//! * [`lines`], [`lines_mapped`], [`bytes`]: the buffered and the memory-mapped
//!   line readers and byte-scanning helpers.

pub mod bytes;
pub mod error;
pub mod example_plugin;
pub mod gpu_clock;
pub mod hang_dump;
pub mod inputs;
pub mod inspector;
pub mod json_util;
pub mod kernel_name;
pub mod kind;
pub mod kineto;
pub mod lines;
pub mod lines_mapped;
mod lines_windows;
pub mod load_any;
pub mod merge;
pub mod nccl_log;
pub mod nccl_tests;
pub mod noted;
pub mod nsys;
pub mod plugin_out;
pub mod plugin_follow;
mod plugin_out_decode;
mod plugin_out_table;
mod same_content;
pub mod topo_xml;

pub use error::IngestError;
pub use inputs::{
    expand_inputs, expand_inputs_noted, load_any, load_inputs, sniff, unpack_archives, Expanded, InputFormat, Loaded,
};
pub use kind::{classify, FileKind, Side};
