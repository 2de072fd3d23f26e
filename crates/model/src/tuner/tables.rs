//! NCCL's tuning constants (`src/graph/tuning.cc`), per release epoch. These
//! are facts read from NCCL's public source and checked against the tables
//! NCCL prints with `NCCL_DEBUG_SUBSYS=TUNING` (2.26.6 and 2.27.7 logs in
//! `../shared/data/real`, reproduced to the printed 0.1 by `tests/tuning_real.rs`).
//!
//! Indices: algorithms in NCCL's order (Tree, Ring, CollNetDirect,
//! CollNetChain, NVLS, NVLSTree, PAT), protocols (LL, LL128, Simple), hardware
//! (NVLink, PCI, NET), compute-capability rows (Volta, Ampere, Hopper,
//! Blackwell), scale columns (1 node, 2 nodes, more).

use commlens_core::NcclVersion;

pub const N_ALGOS: usize = 7;
pub const N_PROTOS: usize = 3;
pub const HW_NVLINK: usize = 0;
pub const HW_PCI: usize = 1;
pub const HW_NET: usize = 2;

/// Release epochs whose constants differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Epoch {
    /// ≤ 2.11: Tree, Ring, CollNet only; per-collective LL128 caps.
    Legacy,
    /// 2.12 – 2.18: compute-capability tables, ring LL at 1/4 (1/3 for one-node gathers).
    Mid,
    /// 2.19 and later: ring LL at 1/2, NVLS/NVLS-tree, PAT from 2.23, Blackwell rows from 2.24.
    Modern,
}

impl Epoch {
    pub fn of(v: NcclVersion) -> Epoch {
        if v < NcclVersion::new(2, 12, 0) {
            Epoch::Legacy
        } else if v < NcclVersion::new(2, 19, 0) {
            Epoch::Mid
        } else {
            Epoch::Modern
        }
    }
}

/// Base latency per algorithm × protocol, µs.
pub fn base_lat(epoch: Epoch) -> [[f64; N_PROTOS]; N_ALGOS] {
    match epoch {
        Epoch::Legacy => [
            [4.4, 4.4, 0.0],
            [3.6, 10.0, 8.4],
            [4.4, 4.4, 0.0],
            [4.4, 4.4, 0.0],
            [0.0; 3],
            [0.0; 3],
            [0.0; 3],
        ],
        Epoch::Mid | Epoch::Modern => [
            [6.8, 14.0, 8.4],
            [6.6, 14.0, 8.4],
            [0.0; 3],
            [0.0; 3],
            [0.0; 3],
            [0.0; 3],
            [0.0; 3],
        ],
    }
}

/// Hardware latency per hardware × algorithm × protocol, µs.
pub fn hw_lat(epoch: Epoch) -> [[[f64; N_PROTOS]; N_ALGOS]; 3] {
    match epoch {
        Epoch::Legacy => [
            [[0.52, 1.2, 28.0], [0.47, 1.9, 3.4], [0.5, 1.2, 4.0], [0.5, 1.2, 4.0], [0.0; 3], [0.0; 3], [0.0; 3]],
            [[1.0, 1.9, 28.0], [1.0, 2.5, 5.7], [1.0, 1.9, 5.5], [1.0, 1.9, 5.5], [0.0; 3], [0.0; 3], [0.0; 3]],
            [[5.0, 8.5, 50.0], [2.7, 4.0, 9.6], [5.0, 5.0, 10.7], [5.0, 5.0, 10.7], [0.0; 3], [0.0; 3], [0.0; 3]],
        ],
        Epoch::Mid | Epoch::Modern => [
            [
                [0.6, 1.25, 4.0],
                [0.6, 1.9, 3.4],
                [0.0, 0.0, 3.7],
                [0.0, 0.0, 2.8],
                [0.0, 0.0, 25.0],
                [0.0, 0.0, 25.0],
                [0.0, 0.0, 0.0],
            ],
            [
                [1.0, 1.9, 4.0],
                [1.0, 2.5, 5.7],
                [0.0, 0.0, 3.7],
                [0.0, 0.0, 2.8],
                [0.0, 0.0, 0.0],
                [0.0, 0.0, 0.0],
                [0.0, 0.0, 0.0],
            ],
            [
                [5.0, 8.5, 14.0],
                [2.7, 4.0, 14.0],
                [0.0, 0.0, 31.0],
                [0.0, 0.0, 30.0],
                [0.0, 0.0, 18.0],
                [0.0, 0.0, 14.0],
                [0.0, 0.0, 14.0],
            ],
        ],
    }
}

/// LL bandwidth cap per (GPU generation on one node | CPU vendor on several) × scale.
pub fn ll_max_bws(epoch: Epoch) -> [[f64; 3]; 4] {
    let hopper = if epoch == Epoch::Modern { [141.0, 45.0, 35.0] } else { [87.7, 22.5, 19.0] };
    [[39.0, 39.0, 20.4], [87.7, 22.5, 19.0], hopper, [2.0 * hopper[0], 2.0 * hopper[1], 2.0 * hopper[2]]]
}

pub const PER_CH_MAX_RING_LL128_BWS: [[f64; 3]; 4] =
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 36.7], [2.0 * 36.7, 2.0 * 36.7, 2.0 * 36.7]];
pub const PER_CH_MAX_TREE_LL128_BWS: [[f64; 3]; 4] =
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 29.0], [2.0 * 36.7, 2.0 * 36.7, 2.0 * 29.0]];
pub const PER_CH_MAX_TREE_BWS: [[f64; 3]; 4] =
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [38.7, 41.4, 36.0], [2.0 * 38.7, 2.0 * 41.4, 2.0 * 36.0]];

/// Legacy per-collective LL128 caps per channel (Broadcast, Reduce, AllGather, ReduceScatter, AllReduce).
pub const LEGACY_LL128_MAX_BW_PER_CH: [f64; 5] = [18.8, 12.0, 18.3, 15.2, 16.7];

/// Tree AllReduce correction per protocol for sizes 64 B · 2^i (`treeCorrectionFactor`).
pub const TREE_CORRECTION: [[f64; 23]; 3] = [
    [1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0],
    [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9],
];

/// Legacy (≤ 2.11) correction table, 22 sizes.
pub const LEGACY_TREE_CORRECTION: [[f64; 22]; 3] = [
    [1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.5, 0.6, 0.6, 0.7, 0.7, 0.8, 0.9, 0.9, 1.0],
    [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.6, 0.6, 0.7, 0.8, 0.9],
];

/// Thread counts (`NCCL_SIMPLE_MAX_NTHREADS`, `NCCL_LL_MAX_NTHREADS`, `NCCL_LL128_MAX_NTHREADS`, `NCCL_MAX_NTHREADS`).
pub const SIMPLE_MAX_NTHREADS: u32 = 512;
pub const LL_MAX_NTHREADS: u32 = 512;
pub const LL128_MAX_NTHREADS: u32 = 640;
pub const MAX_NTHREADS: u32 = 640;
/// Per-thread work before more channels/threads are used (LL, LL128, Simple).
pub const THREAD_THRESHOLDS: [u64; 3] = [8, 8, 64];
/// `PCI_BW`: a ring slower than this gets 256 Simple threads.
pub const PCI_BW: f64 = 12.0;
/// Collectives batched per work element (`NCCL_MAX_DEV_WORK_BATCH_COLLS`).
pub const MAX_DEV_WORK_BATCH_COLLS: u32 = 32;
