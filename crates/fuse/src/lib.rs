//! commlens-fuse: joins what NCCL logged (semantics: op, datatype, size,
//! communicator, algorithm) with what the GPU ran (kernel timing), for one rank
//! at a time, without a shared identifier.
//!
//! The crate owns:
//!
//! * [`entry`]: the source-agnostic inputs, [`LogEntry`] and [`KernelEntry`],
//!   with conversion from [`commlens_core::CollOp`] and a kernel-name parser;
//! * [`align`]: the thesis-faithful [`align::needleman_wunsch()`] (thesis §4.2.2)
//!   and the production aligner [`align::align_rank`] (per stream, all shared
//!   features, Send/Recv→SendRecv fusion, 2:1 batching, timing, windowed DP,
//!   per-match confidence);
//! * [`metrics`]: precision/recall/F1 of an alignment against ground truth;
//! * [`synth`]: a seeded generator of Megatron-like ranks with exact truth, the
//!   five validation cases of thesis §4.3.1 and the four scenarios of Table 4.5.
//!
//! * [`join`]: a whole run: pairs trace ranks with the table's ranks, aligns
//!   them in parallel and attaches GPU spans and kernel details to the
//!   operations ([`fuse_traces`]).
//!
//! Readers (nsys, Kineto, NCCL logs) live in `commlens-ingest`; this crate does no I/O.

pub mod align;
pub mod entry;
pub mod join;
pub mod metrics;
pub mod synth;

pub use align::{
    align_rank, align_rank_thesis, align_ranks, align_run, needleman_wunsch, AlignConfig,
    Alignment, Match, MatchShape, RankInput,
};
pub use entry::{parse_kernel_name, KernelEntry, KernelKind, LogEntry};
pub use join::{fuse_traces, FuseConfig, FuseError, FuseReport};
pub use metrics::Prf;
