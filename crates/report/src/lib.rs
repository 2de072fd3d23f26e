//! Report assembly: the data a commlens report shows, built from a loaded run
//! (an assembled `OpTable`, the kernel traces it came with, nccl-tests
//! outputs). The analyses (`commlens-analyze`) compute figures; this crate
//! chooses and shapes them for the sinks (`commlens-export`'s HTML report,
//! Chrome/Perfetto traces, `commlens-parquet`'s extra columns), so the
//! binary only parses arguments, loads and dispatches, and everything it
//! shows can be built without it.
//!
//! - [`build`]: a whole `Report` ([`build::build`]) or the report of
//!   nccl-tests outputs alone ([`build::benchmark_report`]).
//! - [`sections`]: one report section per analysis result.
//! - [`enrich`]: per-operation figures (bandwidth, parallelism class, fusion
//!   confidence, the model's expectation) for trace arguments and columns;
//!   iteration and NVTX ranges of kernel traces; `diff`'s timing figures.
//! - [`expected`]: what the collective model (`commlens-model`) expects of
//!   every operation on the run's own cluster, and the report's model sections.
//! - [`baseline`]: nccl-tests results as baselines (curves, per-op comparison,
//!   `stats` tables).
//! - [`volumes`]: the model file's theoretical volumes beside the observed ones.
//! - [`render`]: analysis results as text/CSV tables (`stats`, `topo`, the
//!   bottleneck and anomaly tables) and the readers' reports as the summary on
//!   stderr; [`job`]: the job line (NCCL versions, nodes) they start with.

pub mod baseline;
pub mod build;
pub mod enrich;
pub mod expected;
pub mod job;
pub mod render;
pub mod sections;
pub mod volumes;

pub use build::{benchmark_report, build};
