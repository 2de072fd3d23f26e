//! The collective performance model of commlens: what NCCL does on a given
//! cluster, and how long it takes.
//!
//! * [`gpu`]: GPU models (compute capability, NVLink, memory, peak throughput);
//! * [`cluster`]: the one cluster description the model, the simulator and the
//!   planner share; [`presets`] builds the named ones;
//! * [`tuner`]: NCCL's tuner re-implemented (latency/bandwidth tables per
//!   release, algorithm/protocol/channel choice, its time estimate);
//! * [`mesh`]: NVLink mesh wiring (full mesh, DGX-1 hybrid cube-mesh) and the
//!   share of a GPU's links a communicator on part of the node can use;
//! * [`graph`]: an emulation of NCCL's topology search on a cluster, the
//!   tuner's input when no log printed the real one;
//! * [`predict`]: per-call predictions (time, algbw, busbw) that bound NCCL's
//!   model by the cluster's physical links, and nccl-tests style sweeps;
//! * [`flows`]: collectives decomposed into the point-to-point flows NCCL
//!   issues (per channel, step and chunk, on named links) for the simulator;
//! * [`alt`]: the seeds' alternative algorithms (recursive doubling,
//!   Rabenseifner, PCCL, NCCLX host-driven, zero-copy P2P) in closed α-β-γ form.
//!
//! No I/O: readers hand facts in, the CLI prints what comes out.

pub mod alt;
pub mod cluster;
pub mod flows;
pub mod gpu;
pub mod cluster_toml;
pub mod from_run;
pub mod graph;
pub mod mesh;
pub mod predict;
pub mod presets;
pub mod show;
pub mod tuner;

pub use cluster::{Cluster, LinkClass};
pub use predict::{Prediction, Predictor};
