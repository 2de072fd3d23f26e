//! NVLink SHARP (NVLS): reductions and multicasts done by the NVSwitch,
//! modelled as flows to and from a virtual switch endpoint ([`SWITCH`]) on
//! NVLink.
//!
//! * One node, AllReduce: every rank sends its channel part to the switch
//!   (step 0); the switch returns the reduced part to every rank (step 1),
//!   waiting for every contribution of the node (a range dep).
//! * Several nodes (NVLS-Tree, and NVLS when it spans nodes): the switch
//!   returns to each GPU only its slice of the part (a reduce-scatter, step 1);
//!   the GPUs of the same local index then run a double binary tree over the
//!   nodes on their slice (network flows on their own rail); each GPU stores its
//!   reduced slice to the switch and the switch multicasts the whole part back.
//! * One node, AllGather / ReduceScatter: each rank sends its block (AG) or the
//!   other ranks' blocks (RS) to the switch, and receives the other blocks
//!   (AG) or its reduced block (RS).

use commlens_core::{Algorithm, OpKind};

use super::tree::{dtree, emit_tree, RankTree, TreePass};
use super::{chunk_bytes, chunk_count, split, CollSpec, Deps, FlowPlan, Placement, Sink, NONE, SWITCH};
use crate::cluster::LinkClass;
use crate::tuner::NcclEnv;

/// NVLS / NVLS-Tree AllReduce.
pub(super) fn allreduce(spec: &CollSpec, pl: &Placement, env: &NcclEnv) -> FlowPlan {
    let n = pl.nranks as u64;
    let nodes = pl.nnodes();
    let algo = if nodes > 1 { Algorithm::NvlsTree } else { spec.algo };
    let mut plan = FlowPlan::empty(spec.kind, Some(algo), spec.proto, pl.nranks, env);
    if nodes > 1 && spec.algo == Algorithm::Nvls {
        plan.note = Some("multi-node NVLS decomposed as NVLS-Tree (network part as a double binary tree)");
    }
    let total = spec.bytes;
    let ch = (spec.n_channels.max(1) as u64).min(total.max(1));
    let max_part = total.div_ceil(ch);
    let per_chunk = if nodes > 1 { ch * (4 * n + 4 * n) } else { ch * 2 * n };
    let (k, coarse) = chunk_count(max_part, chunk_bytes(spec.proto, env), per_chunk);
    if coarse {
        plan.note = Some("chunks coarsened to keep the plan under MAX_FLOWS");
    }
    plan.channels = ch as u32;
    plan.chunks = k;
    plan.flows.reserve((per_chunk * k as u64) as usize);

    // Per channel and local index: the tree over the nodes holding that local GPU.
    let gpn = pl.gpus_per_node();
    let trees: Vec<RankTree> = if nodes > 1 {
        (0..ch as u32)
            .flat_map(|c| (0..gpn).map(move |l| (c, l)))
            .map(|(c, l)| rail_tree(pl, usize::from(c as u64 >= ch.div_ceil(2) && ch > 1), l))
            .collect()
    } else {
        Vec::new()
    };
    let mut slice_in = vec![NONE; n as usize];
    let mut up = vec![NONE; n as usize];
    let mut done = vec![Deps::NONE; n as usize];
    let mut node_start = vec![0u32; nodes as usize + 1];
    let mut sink = Sink { flows: &mut plan.flows };
    for chunk in 0..k {
        for c in 0..ch as u32 {
            let part = split(split(total, ch, c as u64), k as u64, chunk as u64);
            // Step 0: every rank's part to its node's switch.
            for j in 0..nodes {
                node_start[j as usize] = sink.next_index();
                for l in 0..pl.node_size(j) {
                    sink.direct(pl.rank(j, l), SWITCH, LinkClass::NvLink, part, 0, chunk, c, Deps::NONE);
                }
            }
            node_start[nodes as usize] = sink.next_index();
            if nodes == 1 {
                let all = Deps::range(node_start[0], node_start[1]);
                for r in 0..pl.nranks {
                    sink.direct(SWITCH, r, LinkClass::NvLink, part, 1, chunk, c, all);
                }
                continue;
            }
            // Step 1: each GPU gets its reduced slice.
            for j in 0..nodes {
                let size = pl.node_size(j);
                let contrib = Deps::range(node_start[j as usize], node_start[j as usize + 1]);
                for l in 0..size {
                    let r = pl.rank(j, l);
                    slice_in[r as usize] = sink.direct(SWITCH, r, LinkClass::NvLink, split(part, size as u64, l as u64), 1, chunk, c, contrib);
                }
            }
            // Steps 2..: one tree per rail over the nodes, on the slices.
            let mut tree_height = 0;
            for l in 0..gpn {
                let t = &trees[(c * gpn + l) as usize];
                if t.bfs.len() < 2 {
                    done[t.root as usize] = Deps::one(slice_in[t.root as usize]);
                    continue;
                }
                tree_height = tree_height.max(t.height[t.root as usize]);
                let size = pl.node_size(pl.node(t.root)) as u64;
                let pass = TreePass { bytes: split(part, size, l as u64), step0: 2, chunk, channel: c, ready: Some(&slice_in) };
                emit_tree(&mut sink, pl, t, &pass, &mut up, &mut done);
            }
            // Multicast: each GPU stores its reduced slice, the switch sends the part to all.
            let store = 2 + 2 * tree_height;
            for j in 0..nodes {
                let size = pl.node_size(j);
                let first = sink.next_index();
                for l in 0..size {
                    let r = pl.rank(j, l);
                    sink.direct(r, SWITCH, LinkClass::NvLink, split(part, size as u64, l as u64), store, chunk, c, done[r as usize]);
                }
                let stored = Deps::range(first, sink.next_index());
                for l in 0..size {
                    sink.direct(SWITCH, pl.rank(j, l), LinkClass::NvLink, part, store + 1, chunk, c, stored);
                }
            }
        }
    }
    plan.finish()
}

/// Tree `which` over the nodes that hold local GPU `l` (all of them but
/// possibly a partial last node).
fn rail_tree(pl: &Placement, which: usize, l: u32) -> RankTree {
    let members: Vec<u32> = (0..pl.nnodes()).filter(|&j| pl.node_size(j) > l).collect();
    let m = members.len() as u32;
    let mut parent = vec![NONE; pl.nranks as usize];
    let mut root = pl.rank(members[0], l);
    for (i, &j) in members.iter().enumerate() {
        let r = pl.rank(j, l);
        match dtree(m, i as u32)[which].parent {
            Some(pi) => parent[r as usize] = pl.rank(members[pi as usize], l),
            None => root = r,
        }
    }
    RankTree::new(parent, root)
}

/// Single-node NVLS AllGather or ReduceScatter.
pub(super) fn gather_scatter(spec: &CollSpec, pl: &Placement, env: &NcclEnv) -> FlowPlan {
    let n = pl.nranks as u64;
    let mut plan = FlowPlan::empty(spec.kind, Some(Algorithm::Nvls), spec.proto, pl.nranks, env);
    let b = spec.bytes;
    let ch = (spec.n_channels.max(1) as u64).min(b.max(1));
    let (to_sw, from_sw) = if spec.kind == OpKind::AllGather { (b, (n - 1) * b) } else { ((n - 1) * b, b) };
    let max_part = to_sw.max(from_sw).div_ceil(ch);
    let (k, coarse) = chunk_count(max_part, chunk_bytes(spec.proto, env), ch * 2 * n);
    if coarse {
        plan.note = Some("chunks coarsened to keep the plan under MAX_FLOWS");
    }
    plan.channels = ch as u32;
    plan.chunks = k;
    plan.flows.reserve((ch * 2 * n * k as u64) as usize);
    let mut sink = Sink { flows: &mut plan.flows };
    for chunk in 0..k {
        for c in 0..ch as u32 {
            let piece = |total: u64| split(split(total, ch, c as u64), k as u64, chunk as u64);
            let first = sink.next_index();
            for r in 0..pl.nranks {
                sink.direct(r, SWITCH, LinkClass::NvLink, piece(to_sw), 0, chunk, c, Deps::NONE);
            }
            let all = Deps::range(first, sink.next_index());
            for r in 0..pl.nranks {
                sink.direct(SWITCH, r, LinkClass::NvLink, piece(from_sw), 1, chunk, c, all);
            }
        }
    }
    plan.finish()
}
