//! The bandwidths the AxoNN model reads (§5.2.2): the intra-node table and β_inter, from the
//! collective model or from measured nccl-tests outputs.
//!
//! Owns [`from_cluster`]: for every (G_0, G_1) with `G_0·G_1 ≤ G_node`, the G_0 groups of G_1
//! GPUs of one node (inner groups consecutive, as the hierarchy places them) each run a 1 GB
//! AllReduce at the same time through the simulator's analytical network (the collective
//! model's time per call, GPUs' NVLink ports and NICs shared by count), and the entry is the
//! ring bus bandwidth `2(G_1−1)/G_1 · 1 GB / t` that eqs. 5.1–5.5 divide by; β_inter is the
//! node's NICs at the cluster's achieved network efficiency. [`apply_measured`] replaces
//! entries by measured bus bandwidths: a one-node run of `n` ranks sets (1, n) and scales the
//! (G_0 > 1, n) entries by the same factor; a multi-node run sets β_inter (one ring per node,
//! eq. 5.7 with G_0 = 1).

use crate::axonn::Bandwidths;
use commlens_core::OpKind;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::tuner::NcclEnv;
use commlens_model::Cluster;
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::network::{NetOp, Network};
use commlens_workload::GroupKind;
use std::collections::BTreeMap;

/// The profiling message: 1 GB, as the dissertation's database.
pub const PROFILE_BYTES: u64 = 1_000_000_000;

/// Bus bandwidth (bytes/s) of `g0` concurrent AllReduces over groups of `g1` GPUs of one node.
pub fn concurrent_allreduce_busbw(cluster: &Cluster, g0: u32, g1: u32) -> f64 {
    let mut net = AnalyticalNetwork::new(cluster, DEFAULT_VERSION, NcclEnv::default());
    for i in 0..g0 {
        let ranks: Vec<u32> = (0..g1).map(|j| i + g0 * j).collect();
        net.start(0.0, NetOp { id: i as u64, kind: OpKind::AllReduce, bytes: PROFILE_BYTES, ranks, group_kind: GroupKind::Other, root: 0 });
    }
    let mut done = 0;
    let mut t = 0.0;
    while done < g0 {
        let Some(next) = net.next_completion() else { break };
        t = next;
        done += net.advance(next).len() as u32;
    }
    if t <= 0.0 {
        return f64::INFINITY;
    }
    2.0 * (g1 as f64 - 1.0) / g1 as f64 * PROFILE_BYTES as f64 / (t * 1e-6)
}

/// The table and β_inter of `cluster` from the collective model (see the module notes).
pub fn from_cluster(cluster: &Cluster) -> Bandwidths {
    let gpn = cluster.gpus_per_node.max(1);
    let one = cluster.with_nodes(1);
    let mut intra = BTreeMap::new();
    for g1 in 2..=gpn {
        for g0 in 1..=gpn / g1 {
            intra.insert((g0, g1), concurrent_allreduce_busbw(&one, g0, g1));
        }
    }
    let beta_inter = cluster.node_net_gb_s(cluster.nodes.max(2)) * cluster.efficiency.net * 1e9;
    Bandwidths {
        gpus_per_node: gpn,
        beta_inter,
        intra,
        source: vec![format!(
            "intra-node table: 1 GB AllReduces run concurrently in every outer group on {} (collective model, analytical network); β_inter {:.1} GB/s: {} NICs × {} Gbit/s at {:.0} % efficiency",
            cluster.name,
            beta_inter / 1e9,
            cluster.nics.per_node,
            cluster.nics.gbit_s,
            cluster.efficiency.net * 100.0
        )],
    }
}

/// One measured collective: ranks, nodes and its bus bandwidth at its largest size.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredBusbw {
    pub kind: OpKind,
    pub ranks: u32,
    pub nodes: u32,
    pub busbw_gb_s: f64,
    /// Where it was read (file name).
    pub source: String,
}

/// Replaces the model's entries by measured ones (see the module notes). AllReduce,
/// AllGather and ReduceScatter count (their bus bandwidth is the ring's β); others are skipped
/// and listed in the returned notes.
pub fn apply_measured(b: &mut Bandwidths, measured: &[MeasuredBusbw]) -> Vec<String> {
    let mut notes = Vec::new();
    for m in measured {
        if !matches!(m.kind, OpKind::AllReduce | OpKind::AllGather | OpKind::ReduceScatter) {
            notes.push(format!("{}: {} is not a ring collective the model uses; skipped", m.source, m.kind.name()));
            continue;
        }
        if !(m.busbw_gb_s.is_finite() && m.busbw_gb_s > 0.0) || m.ranks < 2 {
            notes.push(format!("{}: no usable bus bandwidth ({} ranks, {} GB/s); skipped", m.source, m.ranks, m.busbw_gb_s));
            continue;
        }
        let bw = m.busbw_gb_s * 1e9;
        if m.nodes > 1 {
            b.source.push(format!("β_inter {:.1} GB/s measured ({} {} ranks on {} nodes)", m.busbw_gb_s, m.source, m.ranks, m.nodes));
            b.beta_inter = bw;
        } else if m.ranks <= b.gpus_per_node {
            let modelled = b.intra.get(&(1, m.ranks)).copied();
            let factor = modelled.map_or(1.0, |x| bw / x);
            for ((g0, g1), v) in b.intra.iter_mut() {
                if *g1 == m.ranks {
                    *v = if *g0 == 1 { bw } else { *v * factor };
                }
            }
            b.intra.insert((1, m.ranks), bw);
            b.source.push(format!(
                "intra-node (·, {}) measured: {:.1} GB/s ({}), {:.2}× the model",
                m.ranks, m.busbw_gb_s, m.source, factor
            ));
        } else {
            notes.push(format!("{}: {} ranks on one node exceed the {} GPUs per node; skipped", m.source, m.ranks, b.gpus_per_node));
        }
    }
    notes
}
