//! Ring decompositions: AllReduce (ReduceScatter then AllGather around the
//! ring, `2(n−1)` steps), AllGather and ReduceScatter (`n−1` steps), and the
//! pipelined chains NCCL runs Broadcast and Reduce on (`n−1` hops).
//!
//! Each channel has its own node-major ring ([`Placement::ring_order`]) and
//! carries `1/channels` of every block; a channel's block part is cut into
//! chunks of the protocol's slot payload. At ring step `s` the rank at ring
//! position `p` sends to `p + 1`; its flow waits for the flow that brought it
//! the data at step `s − 1` (same channel, same chunk). Flows are listed
//! chunk-major, then by step, channel and position, which is NCCL's order:
//! the chunk loop is outermost in its ring kernels.

use commlens_core::OpKind;

use super::{chunk_count, chunk_bytes, split, CollSpec, Deps, FlowPlan, Placement, Route, Sink, NONE};
use crate::tuner::NcclEnv;

/// Ring AllReduce, AllGather or ReduceScatter.
pub(super) fn ring(spec: &CollSpec, pl: &Placement, env: &NcclEnv) -> FlowPlan {
    let n = pl.nranks as u64;
    let kind = spec.kind;
    let mut plan = FlowPlan::empty(kind, Some(commlens_core::Algorithm::Ring), spec.proto, pl.nranks, env);
    // Total data and the smallest block.
    let (total, steps) = match kind {
        OpKind::AllReduce => (spec.bytes, 2 * (n - 1)),
        _ => (spec.bytes.saturating_mul(n), n - 1),
    };
    let min_block = total / n;
    let max_block = total.div_ceil(n);
    let ch = (spec.n_channels.max(1) as u64).min(min_block.max(1));
    let max_part = max_block.div_ceil(ch);

    let routes: Vec<Route> = (0..ch as u32)
        .flat_map(|c| {
            let order = pl.ring_order(c);
            let n = order.len();
            (0..n).map(move |p| (order[p], order[(p + 1) % n])).collect::<Vec<_>>()
        })
        .map(|(s, d)| pl.route(s, d))
        .collect();
    let srcs: Vec<u32> = (0..ch as u32).flat_map(|c| pl.ring_order(c)).collect();
    let per_step: u64 = routes.iter().map(Route::flows).sum();
    let (k, coarse) = chunk_count(max_part, chunk_bytes(spec.proto, env), per_step * steps);
    if coarse {
        plan.note = Some("chunks coarsened to keep the plan under MAX_FLOWS");
    }
    plan.channels = ch as u32;
    plan.chunks = k;
    plan.flows.reserve_exact((per_step * steps * k as u64) as usize);

    let nn = n as usize;
    let mut prev_in = vec![NONE; routes.len()];
    let mut cur_in = vec![NONE; routes.len()];
    let mut sink = Sink { flows: &mut plan.flows };
    for chunk in 0..k as u64 {
        for s in 0..steps {
            for c in 0..ch as usize {
                for p in 0..nn {
                    let pu = p as u64;
                    // The block position p sends at step s.
                    let block = match kind {
                        OpKind::AllReduce if s < n - 1 => (pu + n - s) % n,
                        OpKind::AllReduce => (pu + 1 + n - (s - (n - 1))) % n,
                        OpKind::ReduceScatter => (pu + 2 * n - s - 1) % n,
                        _ => (pu + n - s) % n,
                    };
                    let blk = if kind == OpKind::AllReduce { split(total, n, block) } else { spec.bytes };
                    let bytes = split(split(blk, ch, c as u64), k as u64, chunk);
                    let slot = c * nn + p;
                    let deps = if s == 0 { Deps::NONE } else { Deps::one(prev_in[slot]) };
                    let idx = sink.routed(srcs[slot], routes[slot], bytes, s as u32, chunk as u32, c as u32, deps);
                    cur_in[c * nn + (p + 1) % nn] = idx;
                }
            }
            std::mem::swap(&mut prev_in, &mut cur_in);
        }
    }
    plan.finish()
}

/// Broadcast (root first) or Reduce (root last) as a pipelined chain along
/// each channel's ring: every hop carries the whole channel part, chunk by chunk.
pub(super) fn chain(spec: &CollSpec, pl: &Placement, env: &NcclEnv, root: u32) -> FlowPlan {
    let n = pl.nranks as usize;
    let mut plan = FlowPlan::empty(spec.kind, Some(commlens_core::Algorithm::Ring), spec.proto, pl.nranks, env);
    let total = spec.bytes;
    let ch = (spec.n_channels.max(1) as u64).min(total.max(1));
    let max_part = total.div_ceil(ch);
    let bcast = spec.kind == OpKind::Broadcast;
    let mut srcs = Vec::with_capacity(ch as usize * (n - 1));
    let mut routes = Vec::with_capacity(ch as usize * (n - 1));
    for c in 0..ch as u32 {
        let order = pl.ring_order(c);
        let at = order.iter().position(|&r| r == root).unwrap_or(0);
        // q[0] = root, then the ring after it.
        let q = |i: usize| order[(at + i) % n];
        for h in 0..n - 1 {
            let (s, d) = if bcast { (q(h), q(h + 1)) } else { (q(h + 1), q((h + 2) % n)) };
            srcs.push(s);
            routes.push(pl.route(s, d));
        }
    }
    let per_chunk: u64 = routes.iter().map(Route::flows).sum();
    let (k, coarse) = chunk_count(max_part, chunk_bytes(spec.proto, env), per_chunk);
    if coarse {
        plan.note = Some("chunks coarsened to keep the plan under MAX_FLOWS");
    }
    plan.channels = ch as u32;
    plan.chunks = k;
    plan.flows.reserve_exact((per_chunk * k as u64) as usize);
    let hops = n - 1;
    let mut last = vec![NONE; ch as usize];
    let mut sink = Sink { flows: &mut plan.flows };
    for chunk in 0..k as u64 {
        for h in 0..hops {
            for (c, prev) in last.iter_mut().enumerate() {
                let bytes = split(split(total, ch, c as u64), k as u64, chunk);
                let deps = if h == 0 { Deps::NONE } else { Deps::one(*prev) };
                let slot = c * hops + h;
                *prev = sink.routed(srcs[slot], routes[slot], bytes, h as u32, chunk as u32, c as u32, deps);
            }
        }
    }
    plan.finish()
}

#[cfg(test)]
mod tests {
    use commlens_core::{Algorithm, Protocol};

    use super::*;
    use crate::cluster::LinkClass;
    use crate::flows::{decompose, Hop};
    use crate::presets::preset;

    #[test]
    fn ring_allreduce_1024_ranks_is_sized_exactly() {
        // 128 DGX H100 nodes, 4 channels, 1 GiB: 256 KiB per channel part,
        // one 512 KiB slot: one chunk. Each channel's ring leaves each node
        // from a GPU off the next node's entry rail: one PXN hop per node.
        let c = preset("dgx-h100").unwrap().with_nodes(128);
        let spec = CollSpec::new(OpKind::AllReduce, 1 << 30, 1024, Algorithm::Ring, Protocol::Simple, 4);
        let plan = decompose(&spec, &c, &NcclEnv::default());
        let direct = 1024u64 * 2 * 1023 * 4;
        let pxn = 128u64 * 2 * 1023 * 4;
        assert_eq!(plan.flows.len() as u64, direct + pxn);
        assert_eq!(plan.flows.capacity(), plan.flows.len(), "one allocation, sized up front");
        assert_eq!(plan.chunks, 1);
        assert_eq!(plan.steps, 2046);
        let sent = plan.sent_per_rank();
        assert!(sent.iter().all(|&b| b == 2 * 1023 * (1 << 20)));
    }

    #[test]
    fn broadcast_chain_every_rank_but_the_tail_sends_everything() {
        let c = preset("dgx-h100").unwrap().with_nodes(2);
        let s = 8u64 << 20;
        let spec = CollSpec::new(OpKind::Broadcast, s, 16, Algorithm::Ring, Protocol::Simple, 2).with_root(3);
        let plan = decompose(&spec, &c, &NcclEnv::default());
        plan.validate().unwrap();
        let sent = plan.sent_per_rank();
        let recv = plan.received_per_rank();
        assert_eq!(recv[3], 0, "the root receives nothing");
        assert_eq!(sent.iter().sum::<u64>(), 15 * s, "n − 1 hops carry the buffer");
        assert!(recv.iter().enumerate().all(|(r, &b)| r == 3 || b == s));
        // 4 MiB per channel in 512 KiB chunks.
        assert_eq!(plan.chunks, 8);
        assert!(plan.flows.iter().any(|f| f.link == LinkClass::Net && f.hop != Hop::PxnToProxy));
        let spec = CollSpec::new(OpKind::Reduce, s, 16, Algorithm::Ring, Protocol::Simple, 1).with_root(5);
        let plan = decompose(&spec, &c, &NcclEnv::default());
        plan.validate().unwrap();
        assert_eq!(plan.sent_per_rank()[5], 0, "the root of a Reduce sends nothing");
        assert_eq!(plan.received_per_rank()[5], s);
    }
}
