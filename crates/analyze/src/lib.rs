//! Analyses over the canonical table.
//!
//! * [`stats`]: operation counts, bytes, algorithms and message-size
//!   distributions per rank, per logical communicator and per operation kind;
//!   built by an [`stats::Aggregate`] that consumes operations one at a time,
//!   so it works on a stream as well as on a stored table;
//! * [`bottleneck`]: the slowest link inside each logical communicator
//!   (thesis eq. 4.12), from the topology NCCL printed;
//! * [`bandwidth`]: per-operation algbw/busbw (nccl-tests or thesis
//!   convention), theoretical limits from the bottleneck and efficiency, with
//!   p10/median/p90 per communicator and per message size;
//! * [`clock`]: per-rank GPU clock offsets from matched collective instances
//!   (thesis eqs. 4.7–4.8), chained across communicators, and their application;
//! * [`classify`]: the parallelism (TP/PP/DP/EP/CP/MP/embedding/world) of each
//!   logical communicator, from given Megatron sizes or inferred, with evidence;
//! * [`diff`]: comparable figures of a run and their comparison with another
//!   (regressions beyond a threshold, for CI);
//! * [`overlap`]: compute/communication overlap per rank with HTA's
//!   definitions (overlap share, exposed communication per iteration, kernel
//!   and temporal breakdowns), one sweep over the GPU activity intervals;
//! * [`volume`]: theoretical per-rank volume per parallelism type (thesis
//!   eqs. 5.2–5.6, AICB) against the observed volume (Table 5.1);
//! * [`straggler`]: per collective instance start/end skew, min-duration
//!   latency and last arriver; per rank lateness and waiting; NCCLX-style
//!   slow ranks from windowed bus bandwidth;
//! * [`iteration`]: training iterations from NVTX/ProfilerStep ranges or the
//!   period of each rank's operation sequence, with per-iteration totals;
//! * [`anomaly`]: operations and collective instances whose duration departs from
//!   their own history (median/MAD), and step changes over iterations.

pub mod anomaly;
pub mod bandwidth;
pub mod bottleneck;
pub mod classify;
pub mod clock;
pub mod diff;
pub mod hang;
pub mod signature;
pub mod iteration;
pub mod overlap;
pub mod stats;
pub mod stats_stream;
pub mod straggler;
pub mod volume;
