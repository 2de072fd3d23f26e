//! What NCCL logs about its own tuning at communicator init: the result of
//! each topology search (`Pattern 4, crossNic 0, nChannels 12, bw 20.0/20.0,
//! type NVL/PIX, sameChannels 1`), the per-thread work thresholds
//! (`threadThresholds 8/8/64 | 32/8/64 | 512 | 512`) and, with
//! `NCCL_DEBUG_SUBSYS=TUNING`, the latency/bandwidth table of every
//! collective × algorithm × protocol (`AllReduce | 16.0/ 1.6 | …`).
//!
//! These are facts, not a model: the collective model (`commlens-model`)
//! takes the graphs as its input when a log provides them, and its own
//! tables are checked against the printed ones.

use serde::{Deserialize, Serialize};

use crate::enums::{Algorithm, OpKind, Protocol};
use crate::topo::LinkKind;

/// One topology-search result (`ncclTopoGraph` as `ncclTopoPrintGraph`/init prints it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchGraph {
    /// NCCL's pattern id: 1 balanced tree, 2 split tree, 3 tree, 4 ring,
    /// 5 NVLS, 6 CollNet direct.
    pub pattern: u8,
    pub cross_nic: u8,
    pub n_channels: u32,
    /// Per-channel bandwidth inside a node / between nodes, GB/s.
    pub bw_intra: f64,
    pub bw_inter: f64,
    /// Path types inside a node / to the network (`NVL/PIX`, `SYS/SYS`, `LOC/PIX`).
    pub type_intra: LinkKind,
    pub type_inter: LinkKind,
    pub same_channels: bool,
    /// 1-based line of the log.
    pub line: u64,
}

impl SearchGraph {
    /// The algorithm a pattern serves (ring 4 → Ring; 1–3 → Tree; 5 → NVLS; 6 → CollNet direct).
    pub fn algorithm(&self) -> Option<Algorithm> {
        match self.pattern {
            1..=3 => Some(Algorithm::Tree),
            4 => Some(Algorithm::Ring),
            5 => Some(Algorithm::Nvls),
            6 => Some(Algorithm::CollNetDirect),
            _ => None,
        }
    }
}

/// One cell of NCCL's printed tuning table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TuningCell {
    pub kind: OpKind,
    pub algo: Algorithm,
    pub proto: Protocol,
    /// Latency in µs.
    pub latency_us: f64,
    /// Algorithm bandwidth in GB/s (0: disabled).
    pub bw_gb_s: f64,
}

/// What one communicator's init printed about tuning (empty fields when not logged).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TuningInfo {
    /// Search results in print order (ring first, then tree, then CollNet/NVLS when searched).
    pub graphs: Vec<SearchGraph>,
    /// `threadThresholds` fields in print order.
    pub thread_thresholds: Vec<u64>,
    /// The latency/bandwidth table (rank 0 only prints it).
    pub table: Vec<TuningCell>,
    /// `Max NThreads` per algorithm × protocol in table order, when printed.
    pub max_threads: Vec<(Algorithm, Protocol, u32)>,
}

impl TuningInfo {
    pub fn is_empty(&self) -> bool {
        self.graphs.is_empty() && self.thread_thresholds.is_empty() && self.table.is_empty()
    }

    /// The search result for an algorithm, if logged.
    pub fn graph(&self, algo: Algorithm) -> Option<&SearchGraph> {
        self.graphs.iter().find(|g| g.algorithm() == Some(algo))
    }

    /// A printed table cell.
    pub fn cell(&self, kind: OpKind, algo: Algorithm, proto: Protocol) -> Option<&TuningCell> {
        self.table.iter().find(|c| c.kind == kind && c.algo == algo && c.proto == proto)
    }
}
