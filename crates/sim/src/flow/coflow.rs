//! A [`NetOp`] as a coflow: the point-to-point flows of the whole operation, routed over the
//! [`Topology`], summed per link and divided by the operation's size (`size`: nccl-tests'
//! buffer bytes, `max(send, recv)`), so every link gets a weight of bytes per byte of progress.
//!
//! Decompositions (aggregated over the operation, not per step, so large jobs stay cheap):
//! * ring (AllReduce `2(n−1)/n · S` per edge, AllGather/ReduceScatter `(n−1) · block`,
//!   Broadcast/Reduce a chain of `n − 1` edges of `S`; inside one NVLink mesh node every
//!   member's ring traffic spread over its NVLinks to the other members, as NCCL's channels
//!   over several ring orders spread it): members grouped per node in the order
//!   nodes first appear, GPUs in local order; across nodes one channel per GPU of a node, each
//!   rotating the node's GPUs, so channel `c` crosses nodes on rail `c` (NCCL's node-major
//!   rings; `commlens_model::flows::Placement::ring_order` does the same);
//! * tree (AllReduce, when the collective model picks Tree or CollNet): a chain inside each
//!   node carrying `S` each way, NCCL's double binary tree over nodes carrying `S/2` per tree
//!   each way, spread over the node's GPUs (rails);
//! * NVLS (NVLink SHARP): every GPU sends `S` to the NVSwitch and receives `S` (AllReduce),
//!   `block` up and `(n−1)·block` down (AllGather) or the reverse (ReduceScatter); across
//!   nodes (NVLS, NVLS-Tree) the node's slices go per rail as a ring or a double tree;
//! * AllToAll `S/n` to every peer; Gather/Scatter `S` between the root and each member;
//!   Send/Recv one flow `[src, dst]`.

use commlens_core::{Algorithm, OpKind};
use commlens_model::flows::dtree;

use super::topology::Topology;
use crate::network::NetOp;

/// Builds one coflow's link weights. Scratch buffers are the network's, reused.
pub(super) struct Builder<'a> {
    pub topo: &'a Topology,
    pub op: u64,
    pub acc: &'a mut Vec<f64>,
    pub touched: &'a mut Vec<u32>,
    pub path: &'a mut Vec<u32>,
    /// Bytes on the wire per payload byte (protocol overhead).
    pub wire: f64,
}

impl Builder<'_> {
    fn add(&mut self, l: u32, bytes: f64) {
        let slot = &mut self.acc[l as usize];
        if *slot == 0.0 {
            self.touched.push(l);
        }
        *slot += bytes;
    }

    fn flow(&mut self, src: u32, dst: u32, bytes: f64) {
        if src == dst || bytes <= 0.0 {
            return;
        }
        self.path.clear();
        self.topo.route(src, dst, self.op, self.path);
        for i in 0..self.path.len() {
            let l = self.path[i];
            self.add(l, bytes * self.wire);
        }
    }

    /// GPU ↔ NVSwitch traffic of NVLS.
    fn switch(&mut self, r: u32, up: f64, down: f64) {
        if let (Some(u), Some(d)) = (self.topo.switch_up(r), self.topo.switch_down(r)) {
            if up > 0.0 {
                self.add(u, up * self.wire);
            }
            if down > 0.0 {
                self.add(d, down * self.wire);
            }
        }
    }

    /// The weights per byte of `size`, sorted by link; clears the scratch.
    pub fn finish(self, size: f64) -> Vec<(u32, f64)> {
        let mut v: Vec<(u32, f64)> = self.touched.iter().map(|&l| (l, self.acc[l as usize] / size)).collect();
        for &l in self.touched.iter() {
            self.acc[l as usize] = 0.0;
        }
        self.touched.clear();
        v.sort_unstable_by_key(|e| e.0);
        v
    }

    /// Adds the flows of `op` decomposed as `algo`; returns the size (progress bytes).
    pub fn op(&mut self, op: &NetOp, algo: Option<Algorithm>) -> f64 {
        let n = op.ranks.len() as u32;
        let s = op.bytes as f64;
        let groups = by_node(self.topo, &op.ranks);
        let nnodes = groups.len();
        let nvls_ok = self.topo.switch_up(op.ranks[0]).is_some();
        let root = op.ranks.get(op.root as usize).copied().unwrap_or(op.ranks[0]);
        match op.kind {
            OpKind::AllReduce => {
                match algo {
                    Some(Algorithm::Nvls | Algorithm::NvlsTree) if nvls_ok => {
                        for &r in &op.ranks {
                            self.switch(r, s, s);
                        }
                        if nnodes > 1 {
                            let m = groups.iter().map(Vec::len).min().unwrap_or(1);
                            for l in 0..m {
                                let rail: Vec<u32> = groups.iter().map(|g| g[l]).collect();
                                if algo == Some(Algorithm::NvlsTree) {
                                    self.dtree(&rail, s / m as f64);
                                } else {
                                    let nn = nnodes as f64;
                                    self.ring(&[rail], 2.0 * (nn - 1.0) / nn * s / m as f64);
                                }
                            }
                        }
                    }
                    Some(Algorithm::Tree | Algorithm::CollNetDirect | Algorithm::CollNetChain) if nnodes > 1 => {
                        for g in &groups {
                            for w in g.windows(2) {
                                self.flow(w[0], w[1], s);
                                self.flow(w[1], w[0], s);
                            }
                        }
                        let m = groups.iter().map(Vec::len).min().unwrap_or(1);
                        for l in 0..m {
                            let rail: Vec<u32> = groups.iter().map(|g| g[l]).collect();
                            self.dtree(&rail, s / m as f64);
                        }
                    }
                    _ => {
                        let nf = n as f64;
                        self.ring(&groups, 2.0 * (nf - 1.0) / nf * s);
                    }
                }
                s
            }
            OpKind::AllGather | OpKind::ReduceScatter => {
                let nf = n as f64;
                if algo == Some(Algorithm::Nvls) && nvls_ok && nnodes == 1 {
                    let (up, down) = if op.kind == OpKind::AllGather { (s, (nf - 1.0) * s) } else { ((nf - 1.0) * s, s) };
                    for &r in &op.ranks {
                        self.switch(r, up, down);
                    }
                } else {
                    self.ring(&groups, (nf - 1.0) * s);
                }
                s * nf
            }
            OpKind::Broadcast | OpKind::Reduce => {
                self.chain(&groups, root, s, op.kind == OpKind::Reduce);
                s
            }
            OpKind::AllToAll => {
                let per = s / n as f64;
                for &a in &op.ranks {
                    for &b in &op.ranks {
                        self.flow(a, b, per);
                    }
                }
                s
            }
            OpKind::Gather | OpKind::Scatter => {
                for &r in &op.ranks {
                    if op.kind == OpKind::Gather {
                        self.flow(r, root, s);
                    } else {
                        self.flow(root, r, s);
                    }
                }
                s * n as f64
            }
            OpKind::Send | OpKind::Recv | OpKind::SendRecv => {
                if n == 2 {
                    self.flow(op.ranks[0], op.ranks[1], s);
                } else {
                    // nccl-tests' sendrecv pattern: every member to the next.
                    for i in 0..n as usize {
                        self.flow(op.ranks[i], op.ranks[(i + 1) % n as usize], s);
                    }
                }
                s
            }
        }
    }

    /// Channels of a ring over `groups`: one per GPU of the largest node when the ring
    /// crosses nodes (each enters nodes on another rail), else one.
    fn channels(groups: &[Vec<u32>]) -> usize {
        if groups.len() > 1 {
            groups.iter().map(Vec::len).max().unwrap_or(1).max(1)
        } else {
            1
        }
    }

    fn channel_order(groups: &[Vec<u32>], c: usize, out: &mut Vec<u32>) {
        out.clear();
        for g in groups {
            let k = g.len();
            for i in 0..k {
                out.push(g[(c + i) % k]);
            }
        }
    }

    /// A ring over the members, every edge carrying `per_edge` bytes in total.
    fn ring(&mut self, groups: &[Vec<u32>], per_edge: f64) {
        if groups.len() == 1 && self.mesh_rings(&groups[0], per_edge) {
            return;
        }
        let ch = Self::channels(groups);
        let mut order = Vec::new();
        for c in 0..ch {
            Self::channel_order(groups, c, &mut order);
            let n = order.len();
            if n < 2 {
                return;
            }
            for i in 0..n {
                self.flow(order[i], order[(i + 1) % n], per_edge / ch as f64);
            }
        }
    }

    /// NCCL's rings inside one NVLink mesh node: channels over several ring orders, so each
    /// member's ring traffic (`per_edge`) leaves over every NVLink to the other members, in
    /// proportion to the link's rate; false (nothing added) off a mesh or where the members'
    /// ring cannot stay on NVLink (`Topology::mesh_ring`). Where the wiring, not a GPU's links
    /// to the members, bounds the rings (a DGX-1V's 6 GPUs all pass the one link 4-5), each
    /// link is loaded as if the GPU's rings carried only what they can (`mesh_ring`), so the
    /// time is the rings' and that GPU's link bytes are overstated.
    fn mesh_rings(&mut self, members: &[u32], per_edge: f64) -> bool {
        let ring = self.topo.mesh_ring(members.len());
        if members.len() < 2 || ring <= 0.0 {
            return false;
        }
        let out = |b: &Self, a: u32| -> f64 { members.iter().filter_map(|&m| b.topo.mesh_link(a, m)).map(|l| b.topo.links[l as usize].cap).sum() };
        if members.iter().any(|&a| out(self, a) <= 0.0) {
            return false;
        }
        for &a in members {
            let carried = out(self, a).min(ring);
            for &b in members {
                if let Some(l) = self.topo.mesh_link(a, b) {
                    let share = self.topo.links[l as usize].cap / carried;
                    self.add(l, per_edge * share * self.wire);
                }
            }
        }
        true
    }

    /// A pipelined chain from `root` along each channel's ring (towards it for Reduce); inside
    /// one mesh node every member but the last forwards `bytes`, so the mesh's rings carry it
    /// at the rate of a ring of `bytes` per edge.
    fn chain(&mut self, groups: &[Vec<u32>], root: u32, bytes: f64, reduce: bool) {
        if groups.len() == 1 && self.mesh_rings(&groups[0], bytes) {
            return;
        }
        let ch = Self::channels(groups);
        let mut order = Vec::new();
        for c in 0..ch {
            Self::channel_order(groups, c, &mut order);
            let n = order.len();
            let p = order.iter().position(|&r| r == root).unwrap_or(0);
            for i in 0..n.saturating_sub(1) {
                let (a, b) = (order[(p + i) % n], order[(p + i + 1) % n]);
                if reduce {
                    self.flow(b, a, bytes / ch as f64);
                } else {
                    self.flow(a, b, bytes / ch as f64);
                }
            }
        }
    }

    /// NCCL's double binary tree over `members` (one per node): `bytes / 2` per tree, up and
    /// down every tree edge.
    fn dtree(&mut self, members: &[u32], bytes: f64) {
        let n = members.len() as u32;
        for v in 0..n {
            for t in dtree(n, v) {
                if let Some(p) = t.parent {
                    self.flow(members[v as usize], members[p as usize], bytes / 2.0);
                    self.flow(members[p as usize], members[v as usize], bytes / 2.0);
                }
            }
        }
    }
}

/// Members per node, nodes in order of first appearance, GPUs in local order.
pub(super) fn by_node(topo: &Topology, ranks: &[u32]) -> Vec<Vec<u32>> {
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let mut index: rustc_hash::FxHashMap<u32, usize> = Default::default();
    for &r in ranks {
        // A multi-node NVLink domain behaves as one node.
        let node = topo.locality(r);
        let i = *index.entry(node).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(r);
    }
    for g in &mut groups {
        g.sort_unstable_by_key(|&r| (topo.node(r), topo.local(r)));
        g.dedup();
    }
    groups
}
