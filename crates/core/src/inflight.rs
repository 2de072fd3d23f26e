//! In-flight state of a (possibly hung) job, per rank and communicator, in
//! the spirit of NCCLX's CollTrace: the last completed operations, the ones
//! running on the GPU, and the ones enqueued behind them.
//!
//! This is what our profiler plugin dumps on a signal or a timeout, what
//! `commlens hang` reads back (the JSON schema is these types, serde-derived;
//! see `docs/hang-dump.md`), and what `commlens-analyze::hang` reasons about.

use serde::{Deserialize, Serialize};

/// Current format version of a rank's dump.
pub const HANG_DUMP_VERSION: u32 = 1;
/// Value of the `format` field that identifies a dump.
pub const HANG_DUMP_FORMAT: &str = "commlens-hang";

/// One rank's dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankInflight {
    pub format: String,
    pub version: u32,
    pub host: String,
    pub pid: u32,
    /// Rank in the world communicator, when the dumping side knew it.
    pub global_rank: Option<u32>,
    /// When the dump was taken (epoch ns).
    pub time_ns: i64,
    /// Why it was taken: `signal`, `timeout`, `request`, `exit`.
    #[serde(default)]
    pub reason: String,
    pub comms: Vec<CommInflight>,
}

/// One communicator as seen by one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommInflight {
    /// `commHash`: the same on every member.
    pub comm_hash: u64,
    pub nranks: u32,
    /// This rank's rank inside the communicator.
    pub rank: u32,
    /// Free-form name (`TP0`), when known.
    #[serde(default)]
    pub desc: String,
    /// Most recent completed operations, oldest first (bounded ring).
    #[serde(default)]
    pub past: Vec<InflightOp>,
    /// Operations whose kernel started and has not finished.
    #[serde(default)]
    pub current: Vec<InflightOp>,
    /// Operations enqueued whose kernel has not started.
    #[serde(default)]
    pub pending: Vec<InflightOp>,
}

/// One operation in a dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InflightOp {
    /// Per-communicator sequence number (NCCL's `seqNumber`/`opCount`): the
    /// same operation has the same `seq` on every member.
    pub seq: u64,
    /// `AllReduce`, `Send`, …
    pub op: String,
    #[serde(default)]
    pub bytes: u64,
    /// Peer for Send/Recv, root for rooted collectives.
    #[serde(default)]
    pub peer: Option<u32>,
    #[serde(default)]
    pub enqueue_ns: Option<i64>,
    #[serde(default)]
    pub start_ns: Option<i64>,
    #[serde(default)]
    pub end_ns: Option<i64>,
    /// Progress of a running operation: work units done out of total
    /// (proxy steps or channels), when the plugin saw them.
    #[serde(default)]
    pub progress_done: Option<u64>,
    #[serde(default)]
    pub progress_total: Option<u64>,
}
