//! The interface between the engine and a network model.
//!
//! Owns [`Network`] (what the engine asks of a network backend) and [`NetOp`] (one collective
//! or grouped Send/Recv as the network sees it: who takes part and how many bytes). The engine
//! knows nothing about links; a backend knows nothing about programs. Two backends implement
//! it: `analytical` (per-collective time from the collective model, concurrent collectives
//! sharing links by count) and `flow` (max-min fair rates over the cluster's links, recomputed
//! when flows start and end).

use commlens_core::OpKind;

/// Identifies an operation a backend is carrying; the engine picks the number.
pub type NetOpId = u64;

/// One operation handed to the network once every member has arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct NetOp {
    pub id: NetOpId,
    pub kind: OpKind,
    /// NCCL's `count × sizeof(dtype)` of the call (per-rank send bytes for AllGather, per-rank
    /// receive bytes for ReduceScatter, buffer bytes for AllReduce/Broadcast/AllToAll); for a
    /// Send/Recv pair, the bytes sent.
    pub bytes: u64,
    /// Global ranks taking part, in communicator-rank order (for Send/Recv: `[src, dst]`).
    pub ranks: Vec<u32>,
    /// Which parallelism it serves (for per-group statistics and SimAI-style busbw rules).
    pub group_kind: commlens_workload::GroupKind,
    /// Root communicator rank of rooted collectives.
    pub root: u32,
}

/// A network backend. Time is in microseconds on the simulation clock.
pub trait Network {
    /// The operation starts at `now`. A backend may complete it at once (zero bytes).
    fn start(&mut self, now_us: f64, op: NetOp);
    /// When the earliest operation in flight will complete, assuming nothing else starts.
    fn next_completion(&self) -> Option<f64>;
    /// Moves the clock to `to_us` (never past [`Network::next_completion`]) and returns the
    /// operations that completed at or before it.
    fn advance(&mut self, to_us: f64) -> Vec<NetOpId>;
    /// Busy time per link class or link, for the utilisation report (name, busy µs, bytes).
    fn link_usage(&self) -> Vec<LinkUsage> {
        Vec::new()
    }
}

/// How much one link (or class of links) carried.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LinkUsage {
    pub name: String,
    pub bytes: f64,
    /// Microseconds during which it carried traffic.
    pub busy_us: f64,
    /// Capacity, GB/s (10^9 B/s).
    pub capacity_gb_s: f64,
}
