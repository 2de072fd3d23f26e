//! The tuner's input from what a log printed at communicator init: the
//! search graphs every member logged (`Pattern …`), folded to their minimum
//! over the members as NCCL does before tuning (`ncclTopoPostset`/the graph
//! all-gather keep the smallest channel count and bandwidths), and the
//! communicator's shape. With them the tuner reproduces NCCL's own table.

use commlens_core::{CommIdx, OpTable};

use super::tables::N_ALGOS;
use super::{algo_index, CommShape, Graph};
use crate::cluster::{Cluster, IntraFabric};
use crate::graph::MAX_CHANNELS;

/// Search graphs of a communicator handle, merged over every member of its
/// logical communicator; `None` when no member logged one.
pub fn logged_graphs(t: &OpTable, comm: CommIdx) -> Option<[Option<Graph>; N_ALGOS]> {
    let me = t.comms.get(comm.ix())?;
    let mut graphs: [Option<Graph>; N_ALGOS] = Default::default();
    // The handle and its logical communicator's members, in table order (the first
    // graph seen gives the pattern and types): O(members), not O(handles), per call.
    let mut handles: Vec<usize> = vec![comm.ix()];
    if let Some(l) = me.logical.and_then(|l| t.logical.get(l.ix())) {
        handles.extend(l.members.iter().map(|m| m.ix()).filter(|&i| t.comms.get(i).is_some_and(|c| c.logical == me.logical)));
    }
    handles.sort_unstable();
    handles.dedup();
    for c in handles.into_iter().map(|i| &t.comms[i]) {
        for g in c.tuning.as_deref().map_or(&[][..], |i| &i.graphs[..]) {
            let Some(a) = g.algorithm() else { continue };
            let slot = &mut graphs[algo_index(a)];
            match slot {
                None => *slot = Some(Graph::from(g)),
                Some(m) => {
                    m.n_channels = m.n_channels.min(g.n_channels);
                    m.bw_intra = m.bw_intra.min(g.bw_intra);
                    m.bw_inter = m.bw_inter.min(g.bw_inter);
                    m.same_channels &= g.same_channels;
                }
            }
        }
    }
    graphs.iter().any(Option::is_some).then_some(graphs)
}

/// The shape of a logged communicator on `cluster` (ranks and nodes from the
/// init lines, GPU and CPU from the cluster); `None` without a rank count.
pub fn logged_shape(t: &OpTable, comm: CommIdx, cluster: &Cluster, graphs: &[Option<Graph>; N_ALGOS]) -> Option<CommShape> {
    let c = t.comms.get(comm.ix())?;
    let nranks = c.nranks.or_else(|| c.logical.map(|l| t.logical[l.ix()].nranks))?;
    let nnodes = c.n_nodes.unwrap_or(1).clamp(1, nranks.max(1));
    let ring_ch = graphs[1].as_ref().map_or(1, |g| g.n_channels);
    let sm = cluster.gpu.sm;
    Some(CommShape {
        nranks,
        nnodes,
        min_sm: sm,
        max_sm: sm,
        cpu: cluster.cpu,
        nvls_support: graphs[4].is_some() && cluster.intra.nvls,
        collnet_support: graphs[2].is_some() || graphs[3].is_some(),
        nvs_count: if cluster.intra.fabric == IntraFabric::NvSwitch { 4 } else { 0 },
        n_channels: (ring_ch * 2).min(MAX_CHANNELS),
        nvls_channels: graphs[4].as_ref().map_or(16, |g| g.n_channels),
    })
}
