//! NCCL's double binary tree AllReduce and the tree helpers NVLS-Tree reuses.
//!
//! Across nodes NCCL builds two complementary binary trees ([`dtree`]: tree 1
//! is tree 0 shifted by one rank for an even node count, mirrored for an odd
//! one, so a node interior in one tree is a leaf in the other); inside a node
//! the GPUs form a chain whose head talks to the network. Half the channels
//! run tree 0 and half tree 1 (NCCL duplicates its channels for the second
//! tree), so each tree carries half the data. Per channel and chunk the data
//! is reduced up the tree (a flow from every rank but the root to its parent,
//! waiting for the flows from its children), then broadcast down (a flow from
//! every rank to each child, waiting for the flow from its parent, or at the
//! root for the reduction). Up-flow steps are the sender's height in the
//! tree, down-flow steps the tree height plus the sender's depth.

use commlens_core::Algorithm;
use serde::Serialize;

use super::{chunk_bytes, chunk_count, split, CollSpec, Deps, FlowPlan, Placement, Sink, NONE};
use crate::tuner::NcclEnv;

/// One member's links in a binary tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TreeLinks {
    pub parent: Option<u32>,
    pub children: [Option<u32>; 2],
}

impl TreeLinks {
    /// Whether `other` is this member's parent or child.
    pub fn is_neighbour(&self, other: u32) -> bool {
        self.parent == Some(other) || self.children.contains(&Some(other))
    }
}

/// NCCL's binary tree over `n` members: member 0 is the root with one child
/// (the highest power of two below `n`); member `r`'s parent and children
/// follow its lowest set bit.
pub fn btree(n: u32, r: u32) -> TreeLinks {
    let none = TreeLinks { parent: None, children: [None, None] };
    if n <= 1 || r >= n {
        return none;
    }
    if r == 0 {
        let top = 1u32 << (31 - (n - 1).leading_zeros());
        return TreeLinks { parent: None, children: [Some(top), None] };
    }
    let bit = r & r.wrapping_neg();
    let mut up = (r ^ bit) | (bit << 1);
    if up >= n {
        up = r ^ bit;
    }
    let mut children = [None, None];
    if bit > 1 {
        children[0] = Some(r - bit / 2);
        let mut d = bit / 2;
        while d > 0 && r + d >= n {
            d /= 2;
        }
        if d > 0 {
            children[1] = Some(r + d);
        }
    }
    TreeLinks { parent: Some(up), children }
}

/// The two complementary trees of a double binary tree over `n` members.
pub fn dtree(n: u32, r: u32) -> [TreeLinks; 2] {
    let t0 = btree(n, r);
    if n <= 1 {
        return [t0, t0];
    }
    // Tree 1 in a relabelled space: v = f(r) (mirror for odd n, shift by one
    // for even n); links map back with f⁻¹.
    let odd = n % 2 == 1;
    let to_v = if odd { n - 1 - r } else { (r + n - 1) % n };
    let from_v = |v: u32| if odd { n - 1 - v } else { (v + 1) % n };
    let v = btree(n, to_v);
    let back = |x: Option<u32>| x.map(from_v);
    let t1 = TreeLinks { parent: back(v.parent), children: [back(v.children[0]), back(v.children[1])] };
    [t0, t1]
}

/// A tree over ranks (members not in it have no parent and are not reached).
pub(super) struct RankTree {
    pub parent: Vec<u32>,
    pub children: Vec<[u32; 3]>,
    /// Members from the root down, breadth first.
    pub bfs: Vec<u32>,
    pub height: Vec<u32>,
    pub depth: Vec<u32>,
    pub root: u32,
}

impl RankTree {
    pub fn new(parent: Vec<u32>, root: u32) -> RankTree {
        let n = parent.len();
        let mut children = vec![[NONE; 3]; n];
        for (x, &p) in parent.iter().enumerate() {
            if p != NONE {
                let slot = children[p as usize].iter().position(|&c| c == NONE).expect("at most three children");
                children[p as usize][slot] = x as u32;
            }
        }
        let mut bfs = Vec::with_capacity(n);
        let mut depth = vec![0u32; n];
        bfs.push(root);
        let mut i = 0;
        while i < bfs.len() {
            let x = bfs[i] as usize;
            for &c in children[x].iter().filter(|&&c| c != NONE) {
                depth[c as usize] = depth[x] + 1;
                bfs.push(c);
            }
            i += 1;
        }
        let mut height = vec![0u32; n];
        for &x in bfs.iter().rev() {
            let p = parent[x as usize];
            if p != NONE && x != root {
                height[p as usize] = height[p as usize].max(height[x as usize] + 1);
            }
        }
        RankTree { parent, children, bfs, height, depth, root }
    }

    fn kids(&self, x: u32) -> impl Iterator<Item = u32> + '_ {
        self.children[x as usize].iter().copied().filter(|&c| c != NONE)
    }
}

/// What a tree pass needs besides the tree.
pub(super) struct TreePass<'a> {
    pub bytes: u64,
    pub step0: u32,
    pub chunk: u32,
    pub channel: u32,
    /// Per rank: a flow that must finish before the rank's data is ready (or `NONE`).
    pub ready: Option<&'a [u32]>,
}

/// Emits the reduce-up and broadcast-down flows of one chunk on one tree.
/// Returns, per rank, the deps after which it holds the result (in `done`).
pub(super) fn emit_tree(sink: &mut Sink, pl: &Placement, t: &RankTree, pass: &TreePass, up: &mut [u32], done: &mut [Deps]) {
    let ready = |x: u32| pass.ready.map_or(NONE, |r| r[x as usize]);
    let h = t.height[t.root as usize];
    let gather = |x: u32, up: &[u32]| {
        let mut d = [NONE; 4];
        let mut k = 0;
        if ready(x) != NONE {
            d[k] = ready(x);
            k += 1;
        }
        for c in t.kids(x) {
            d[k] = up[c as usize];
            k += 1;
        }
        Deps::list(&d[..k])
    };
    for &x in t.bfs.iter().rev() {
        if x == t.root {
            continue;
        }
        let deps = gather(x, up);
        let p = t.parent[x as usize];
        let step = pass.step0 + t.height[x as usize];
        up[x as usize] = sink.routed(x, pl.route(x, p), pass.bytes, step, pass.chunk, pass.channel, deps);
    }
    done[t.root as usize] = gather(t.root, up);
    for &x in &t.bfs {
        let step = pass.step0 + h + t.depth[x as usize];
        let deps = done[x as usize];
        for c in t.kids(x) {
            let i = sink.routed(x, pl.route(x, c), pass.bytes, step, pass.chunk, pass.channel, deps);
            done[c as usize] = Deps::one(i);
        }
    }
}

/// The rank tree of channel `c` on tree `which`: node heads (local `c` of
/// each node, so heads share a rail) in NCCL's node tree, a chain inside each node.
pub(super) fn rank_tree(pl: &Placement, which: usize, c: u32) -> RankTree {
    let n = pl.nranks as usize;
    let nodes = pl.nnodes();
    let mut parent = vec![NONE; n];
    let head = |j: u32| pl.rank(j, c % pl.node_size(j));
    let mut root = head(0);
    for j in 0..nodes {
        let size = pl.node_size(j);
        for i in 1..size {
            parent[pl.rank(j, (c + i) % size) as usize] = pl.rank(j, (c + i - 1) % size);
        }
        match dtree(nodes, j)[which].parent {
            Some(pj) => parent[head(j) as usize] = head(pj),
            None => root = head(j),
        }
    }
    RankTree::new(parent, root)
}

/// Double binary tree AllReduce.
pub(super) fn allreduce(spec: &CollSpec, pl: &Placement, env: &NcclEnv) -> FlowPlan {
    let n = pl.nranks as u64;
    let mut plan = FlowPlan::empty(spec.kind, Some(Algorithm::Tree), spec.proto, pl.nranks, env);
    let total = spec.bytes;
    let want = (spec.n_channels.max(1) as u64).min(total.max(1));
    let ch = (want + want % 2).max(2);
    let max_part = total.div_ceil(ch);
    let per_chunk = ch * 2 * (n - 1) * 2; // upper bound with PXN hops
    let (k, coarse) = chunk_count(max_part, chunk_bytes(spec.proto, env), per_chunk);
    if coarse {
        plan.note = Some("chunks coarsened to keep the plan under MAX_FLOWS");
    }
    let trees: Vec<RankTree> = (0..ch as u32).map(|c| rank_tree(pl, usize::from(c as u64 >= ch / 2), c)).collect();
    plan.channels = ch as u32;
    plan.chunks = k;
    plan.flows.reserve((ch * 2 * (n - 1) * k as u64) as usize);
    let mut up = vec![NONE; n as usize];
    let mut done = vec![Deps::NONE; n as usize];
    let mut sink = Sink { flows: &mut plan.flows };
    for chunk in 0..k {
        for (c, t) in trees.iter().enumerate() {
            let bytes = split(split(total, ch, c as u64), k as u64, chunk as u64);
            let pass = TreePass { bytes, step0: 0, chunk, channel: c as u32, ready: None };
            emit_tree(&mut sink, pl, t, &pass, &mut up, &mut done);
        }
    }
    plan.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reaches_root(n: u32, t: usize) -> bool {
        (0..n).all(|mut r| {
            for _ in 0..=n {
                match dtree(n, r)[t].parent {
                    Some(p) => r = p,
                    None => return true,
                }
            }
            false
        })
    }

    #[test]
    fn trees_are_consistent_for_every_size() {
        for n in 1..=300u32 {
            for t in 0..2 {
                let roots = (0..n).filter(|&r| dtree(n, r)[t].parent.is_none()).count();
                assert_eq!(roots, 1, "n={n} tree {t}");
                for r in 0..n {
                    let l = dtree(n, r)[t];
                    if let Some(p) = l.parent {
                        assert!(dtree(n, p)[t].children.contains(&Some(r)), "n={n} t={t} r={r} p={p}");
                    }
                    for c in l.children.into_iter().flatten() {
                        assert!(c < n && dtree(n, c)[t].parent == Some(r), "n={n} t={t} r={r} c={c}");
                    }
                }
                assert!(reaches_root(n, t), "n={n} tree {t}");
            }
        }
    }

    #[test]
    fn trees_are_complementary_for_even_sizes() {
        // A member interior (with children) in tree 0 is a leaf in tree 1.
        for n in (4..=256u32).step_by(2) {
            for r in 0..n {
                let [a, b] = dtree(n, r);
                let interior = |l: TreeLinks| l.children.iter().any(Option::is_some);
                assert!(!(interior(a) && interior(b)), "n={n} r={r}");
            }
        }
    }

    #[test]
    fn btree_shape_for_eight() {
        assert_eq!(btree(8, 0).children, [Some(4), None]);
        assert_eq!(btree(8, 4), TreeLinks { parent: Some(0), children: [Some(2), Some(6)] });
        assert_eq!(btree(8, 6), TreeLinks { parent: Some(4), children: [Some(5), Some(7)] });
        assert_eq!(btree(8, 7).parent, Some(6));
    }
}
