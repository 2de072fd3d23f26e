//! Analyses over the canonical table.
//!
//! * [`stats`]: operation counts, bytes, algorithms and message-size
//!   distributions per rank, per logical communicator and per operation kind;
//!   built by an [`stats::Aggregate`] that consumes operations one at a time,
//!   so it works on a stream as well as on a stored table;
//! * [`bottleneck`]: the slowest link inside each logical communicator
//!   (thesis eq. 4.12), from the topology NCCL printed.

pub mod bottleneck;
pub mod hang;
pub mod stats;
