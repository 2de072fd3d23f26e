//! The canonical data model of commlens.
//!
//! Every source (NCCL debug logs, Nsight Systems, Kineto, our profiler plugin, the
//! simulator) is turned into the types of this crate, and every analysis and sink
//! reads only these types. The crate owns:
//!
//! * [`enums`]: NCCL's vocabulary (operation kinds, datatypes, reduction ops,
//!   algorithms, protocols) with decoding from log integers and plugin strings;
//! * [`model`]: processes, devices (ranks), per-process communicator handles,
//!   logical communicators and the [`model::CollOp`] record, gathered in an
//!   [`model::OpTable`];
//! * [`rank_ops`]: the packed storage of one rank's operations;
//! * [`topo`]: the hardware topology graph NCCL prints at init;
//! * [`tuning`]: what NCCL logs about its tuning (search graphs, thresholds, the
//!   latency/bandwidth table);
//! * [`assemble`]: global-rank assignment and logical-communicator inference,
//!   which turn per-process facts into one consistent table;
//! * [`jobs`]: which processes belong to one job (joined by communicators);
//! * [`timing`]: wall time per phase on stderr (`COMMLENS_TIMINGS=1`).
//!
//! Units are explicit in field names: `_bytes`, `_ns` (nanoseconds), `_gb_s`
//! (gigabytes per second, 1e9 bytes/s, as NCCL prints them).

pub mod assemble;
pub mod enums;
pub mod inflight;
pub mod jobs;
pub mod model;
pub mod rank_ops;
pub mod timing;
pub mod topo;
pub mod tuning;

pub use enums::{Algorithm, DataType, NcclVersion, OpKind, Protocol, RedOp};
pub use model::{
    CollOp, CommIdx, CommMember, DevIdx, Device, GpuSpan, LogicalComm, LogicalCommIdx, OpTable,
    ProcIdx, Process, SourceKind,
};
pub use rank_ops::RankOps;
pub use topo::{LinkKind, NodeKind, Topology};
