//! Collectives decomposed into the point-to-point transfers NCCL issues, per
//! channel, step and chunk, on named link classes: the input of a flow-level
//! network simulator (SimAI's FlowModel class), which times them later.
//!
//! This module owns the flow types ([`Flow`], [`FlowPlan`]), chunking ([`chunk_bytes`]) and the entry points
//! [`decompose`] and [`decompose_p2p`]. The algorithms live in submodules:
//! `placement` ([`Placement`]: rank `r` on node `r / gpus_per_node`, link
//! classes, NIC rails, PXN proxies, node-major ring orders), `ring` (ring AllReduce / AllGather / ReduceScatter, pipelined Broadcast and
//! Reduce chains), `tree` (NCCL's double binary tree AllReduce), `nvls`
//! (NVLink SHARP through a virtual switch endpoint [`SWITCH`]) and `p2p`
//! (AllToAll, Gather/Scatter and grouped Send/Recv).
//!
//! Conventions every plan keeps (checked by [`FlowPlan::validate`]):
//! * flows carry payload bytes; protocol overhead on the wire (LL doubles the
//!   bytes, LL128 adds 8/120) is [`FlowPlan::wire_factor`];
//! * a flow's [`Deps`] name flows that come earlier in [`FlowPlan::flows`]
//!   (so the graph is acyclic by construction) and whose step is not later;
//!   a flow with no deps may start at time 0;
//! * sizes are split exactly: blocks, channel parts and chunks differ by at
//!   most one byte, so totals are conserved to the byte and per-rank totals
//!   are within a few bytes of the closed forms (`2(n−1)/n·S` for ring
//!   AllReduce) when `S` is not a multiple of `nranks × channels × chunks`;
//! * a PXN route is two flows: an NVLink hop to the GPU on the destination's
//!   rail ([`Hop::PxnToProxy`]), then the network hop ([`Hop::PxnFromProxy`])
//!   depending on it, both in the same step. Per-rank payload counts skip the
//!   proxy's forward.

mod nvls;
mod p2p;
mod placement;
mod ring;
mod tree;

pub use placement::Placement;
pub use tree::{btree, dtree, TreeLinks};

use placement::Route;

use commlens_core::{Algorithm, OpKind, Protocol};
use serde::Serialize;

use crate::cluster::{Cluster, LinkClass};
use crate::tuner::{Choice, NcclEnv};

/// The virtual endpoint standing for the NVSwitch in NVLS flows.
pub const SWITCH: u32 = u32::MAX;
/// `NCCL_STEPS`: slots of a channel's FIFO.
pub const NCCL_STEPS: u64 = 8;
/// `NCCL_BUFFSIZE` default (Simple protocol), bytes.
pub const DEFAULT_BUFFSIZE: u64 = 4 << 20;
/// LL payload per slot: a 512 KiB LL buffer over 8 slots, half of each 16-byte line is flags.
pub const LL_SLOT_PAYLOAD: u64 = 32 << 10;
/// LL128 payload per slot: a 4,915,200-byte buffer over 8 slots, 120 of every 128 bytes data.
pub const LL128_SLOT_PAYLOAD: u64 = 576_000;
/// `NCCL_P2P_NET_CHUNKSIZE` default, bytes.
pub const DEFAULT_P2P_NET_CHUNK: u64 = 128 << 10;
/// `NCCL_P2P_NVL_CHUNKSIZE` default, bytes.
pub const DEFAULT_P2P_NVL_CHUNK: u64 = 512 << 10;
/// `NCCL_P2P_PCI_CHUNKSIZE` default, bytes.
pub const DEFAULT_P2P_PCI_CHUNK: u64 = 128 << 10;
/// Above this many flows a plan coarsens its chunks (and says so in [`FlowPlan::note`]).
pub const MAX_FLOWS: u64 = 1 << 26;

const NONE: u32 = u32::MAX;
const RANGE_TAG: u32 = u32::MAX - 1;

/// Which leg of a route a flow is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Hop {
    /// Straight from source to destination.
    Direct,
    /// PXN, first leg: over NVLink to the GPU on the destination NIC's rail.
    PxnToProxy,
    /// PXN, second leg: from that GPU over the network (forwarded data).
    PxnFromProxy,
}

/// The flows a flow waits for: up to three indices into [`FlowPlan::flows`],
/// or one contiguous range of them (NVLS: the switch's result waits for every
/// contribution). Stored inline: no heap allocation per flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Deps([u32; 3]);

impl Deps {
    pub const NONE: Deps = Deps([NONE; 3]);

    pub fn one(a: u32) -> Deps {
        Deps([a, NONE, NONE])
    }

    /// Up to three indices (`NONE`-free); panics on more, a decomposition bug.
    pub fn list(ix: &[u32]) -> Deps {
        assert!(ix.len() <= 3, "a flow waits for at most three flows or one range");
        let mut d = [NONE; 3];
        d[..ix.len()].copy_from_slice(ix);
        Deps(d)
    }

    /// Every flow in `start..end`.
    pub fn range(start: u32, end: u32) -> Deps {
        if end <= start {
            Deps::NONE
        } else {
            Deps([start, end, RANGE_TAG])
        }
    }

    pub fn is_range(&self) -> bool {
        self.0[2] == RANGE_TAG
    }

    pub fn len(&self) -> usize {
        if self.is_range() {
            (self.0[1] - self.0[0]) as usize
        } else {
            self.0.iter().filter(|&&x| x != NONE).count()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> DepIter {
        DepIter { d: *self, pos: 0 }
    }

    /// The highest index waited for.
    pub fn max(&self) -> Option<u32> {
        if self.is_range() {
            Some(self.0[1] - 1)
        } else {
            self.0.iter().copied().filter(|&x| x != NONE).max()
        }
    }
}

/// Iterator over a [`Deps`].
pub struct DepIter {
    d: Deps,
    pos: u32,
}

impl Iterator for DepIter {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        let a = self.d.0;
        if a[2] == RANGE_TAG {
            let i = a[0] + self.pos;
            if i < a[1] {
                self.pos += 1;
                return Some(i);
            }
            return None;
        }
        while (self.pos as usize) < 3 {
            let x = a[self.pos as usize];
            self.pos += 1;
            if x != NONE {
                return Some(x);
            }
        }
        None
    }
}

/// One point-to-point transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Flow {
    /// Global rank, or [`SWITCH`].
    pub src: u32,
    pub dst: u32,
    /// Payload bytes.
    pub bytes: u64,
    /// Algorithm step (ring step, tree level, AllToAll round).
    pub step: u32,
    /// Chunk of the channel's data this flow carries (pipelining index).
    pub chunk: u32,
    pub channel: u16,
    pub link: LinkClass,
    pub hop: Hop,
    pub deps: Deps,
}

/// Bytes per link class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PerLink {
    pub nvlink: u64,
    pub pcie: u64,
    pub sys: u64,
    pub net: u64,
}

impl PerLink {
    pub fn get(&self, c: LinkClass) -> u64 {
        match c {
            LinkClass::NvLink => self.nvlink,
            LinkClass::Pcie => self.pcie,
            LinkClass::Sys => self.sys,
            LinkClass::Net => self.net,
        }
    }

    fn add(&mut self, c: LinkClass, b: u64) {
        match c {
            LinkClass::NvLink => self.nvlink += b,
            LinkClass::Pcie => self.pcie += b,
            LinkClass::Sys => self.sys += b,
            LinkClass::Net => self.net += b,
        }
    }
}

/// A collective (or a group of point-to-point calls) as flows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowPlan {
    pub kind: OpKind,
    /// The algorithm decomposed (`None` for point-to-point plans).
    pub algo: Option<Algorithm>,
    pub proto: Protocol,
    pub nranks: u32,
    /// Channels used (after clamping: every channel carries at least a byte
    /// per block when the data allows it; trees use an even count).
    pub channels: u32,
    /// Steps (the highest `step` + 1).
    pub steps: u32,
    /// Chunks per channel and step (1 for point-to-point plans).
    pub chunks: u32,
    /// The chunk unit: the protocol's slot payload (collectives).
    pub chunk_bytes: u64,
    /// Network chunk of point-to-point transfers (`NCCL_P2P_NET_CHUNKSIZE`).
    pub p2p_net_chunk: u64,
    /// Bytes on the wire per payload byte (Simple 1, LL 2, LL128 128/120).
    pub wire_factor: f64,
    /// What the decomposition substituted or assumed, when anything.
    pub note: Option<&'static str>,
    pub flows: Vec<Flow>,
}

impl FlowPlan {
    fn empty(kind: OpKind, algo: Option<Algorithm>, proto: Protocol, nranks: u32, env: &NcclEnv) -> FlowPlan {
        FlowPlan {
            kind,
            algo,
            proto,
            nranks,
            channels: 0,
            steps: 0,
            chunks: 0,
            chunk_bytes: chunk_bytes(proto, env),
            p2p_net_chunk: env.p2p_net_chunksize.filter(|&c| c > 0).unwrap_or(DEFAULT_P2P_NET_CHUNK),
            wire_factor: wire_factor(proto),
            note: None,
            flows: Vec::new(),
        }
    }

    fn finish(mut self) -> FlowPlan {
        self.steps = self.flows.iter().map(|f| f.step + 1).max().unwrap_or(0);
        self
    }

    /// Payload bytes each rank sends (PXN forwards not counted again).
    pub fn sent_per_rank(&self) -> Vec<u64> {
        let mut v = vec![0u64; self.nranks as usize];
        for f in &self.flows {
            if f.src != SWITCH && f.hop != Hop::PxnFromProxy {
                v[f.src as usize] += f.bytes;
            }
        }
        v
    }

    /// Payload bytes each rank receives (PXN proxies' receipts not counted).
    pub fn received_per_rank(&self) -> Vec<u64> {
        let mut v = vec![0u64; self.nranks as usize];
        for f in &self.flows {
            if f.dst != SWITCH && f.hop != Hop::PxnToProxy {
                v[f.dst as usize] += f.bytes;
            }
        }
        v
    }

    /// Bytes each rank forwards as a PXN proxy.
    pub fn forwarded_per_rank(&self) -> Vec<u64> {
        let mut v = vec![0u64; self.nranks as usize];
        for f in &self.flows {
            if f.hop == Hop::PxnFromProxy {
                v[f.src as usize] += f.bytes;
            }
        }
        v
    }

    /// Bytes carried per link class (every hop counted).
    pub fn bytes_per_link(&self) -> PerLink {
        let mut p = PerLink::default();
        for f in &self.flows {
            p.add(f.link, f.bytes);
        }
        p
    }

    /// Bytes over every flow (every hop counted).
    pub fn total_bytes(&self) -> u64 {
        self.flows.iter().map(|f| f.bytes).sum()
    }

    /// Network-level pieces a flow is posted as: point-to-point flows go in
    /// `NCCL_P2P_*_CHUNKSIZE` pieces; collective flows are already one chunk.
    pub fn pieces(&self, f: &Flow) -> u64 {
        if self.algo.is_some() {
            return 1;
        }
        let unit = match f.link {
            LinkClass::Net => self.p2p_net_chunk,
            LinkClass::NvLink => DEFAULT_P2P_NVL_CHUNK,
            LinkClass::Pcie | LinkClass::Sys => DEFAULT_P2P_PCI_CHUNK,
        };
        f.bytes.div_ceil(unit).max(1)
    }

    /// Checks the invariants every plan keeps: no flow to itself, deps earlier
    /// in the list and not in a later step, ranks in range, channels in range.
    pub fn validate(&self) -> Result<(), String> {
        for (i, f) in self.flows.iter().enumerate() {
            if f.src == f.dst {
                return Err(format!("flow {i}: {} sends to itself", f.src));
            }
            for r in [f.src, f.dst] {
                if r != SWITCH && r >= self.nranks {
                    return Err(format!("flow {i}: rank {r} out of {}", self.nranks));
                }
            }
            if (f.channel as u32) >= self.channels.max(1) {
                return Err(format!("flow {i}: channel {} of {}", f.channel, self.channels));
            }
            for d in f.deps.iter() {
                if d as usize >= i {
                    return Err(format!("flow {i} waits for later flow {d}"));
                }
                if self.flows[d as usize].step > f.step {
                    return Err(format!("flow {i} (step {}) waits for flow {d} of a later step", f.step));
                }
            }
        }
        Ok(())
    }
}

/// What to decompose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollSpec {
    pub kind: OpKind,
    /// The call's `count × element size`: the buffer for AllReduce, Broadcast
    /// and Reduce; one rank's block for AllGather (send) and ReduceScatter
    /// (receive); what each rank sends to each peer for AllToAll, Gather and
    /// Scatter, and per Send/Recv.
    pub bytes: u64,
    pub nranks: u32,
    pub algo: Algorithm,
    pub proto: Protocol,
    pub n_channels: u32,
    /// Root of Broadcast, Reduce, Gather and Scatter.
    pub root: u32,
    /// PXN rail routing; `None`: on when the cluster's NICs are rail-aligned.
    pub pxn: Option<bool>,
}

impl CollSpec {
    pub fn new(kind: OpKind, bytes: u64, nranks: u32, algo: Algorithm, proto: Protocol, n_channels: u32) -> CollSpec {
        CollSpec { kind, bytes, nranks, algo, proto, n_channels, root: 0, pxn: None }
    }

    /// The tuner's choice for the call.
    pub fn from_choice(kind: OpKind, bytes: u64, nranks: u32, c: &Choice) -> CollSpec {
        CollSpec::new(kind, bytes, nranks, c.algo, c.proto, c.n_channels)
    }

    pub fn with_root(mut self, root: u32) -> CollSpec {
        self.root = root;
        self
    }

    pub fn with_pxn(mut self, on: bool) -> CollSpec {
        self.pxn = Some(on);
        self
    }
}

/// The payload of one chunk for a protocol: Simple `NCCL_BUFFSIZE / NCCL_STEPS`
/// (512 KiB by default), LL 32 KiB, LL128 576,000 bytes.
pub fn chunk_bytes(proto: Protocol, env: &NcclEnv) -> u64 {
    match proto {
        Protocol::Simple => (env.buffsize.filter(|&b| b > 0).unwrap_or(DEFAULT_BUFFSIZE) / NCCL_STEPS).max(1),
        Protocol::Ll => LL_SLOT_PAYLOAD,
        Protocol::Ll128 => LL128_SLOT_PAYLOAD,
    }
}

/// Wire bytes per payload byte of a protocol.
pub fn wire_factor(proto: Protocol) -> f64 {
    match proto {
        Protocol::Simple => 1.0,
        Protocol::Ll => 2.0,
        Protocol::Ll128 => 128.0 / 120.0,
    }
}

/// `i`-th of `parts` near-equal pieces of `total` (the first `total % parts` get one byte more).
#[inline]
pub(crate) fn split(total: u64, parts: u64, i: u64) -> u64 {
    let parts = parts.max(1);
    total / parts + u64::from(i < total % parts)
}

/// Where flows go and what every one of them shares.
struct Sink<'p> {
    flows: &'p mut Vec<Flow>,
}

impl Sink<'_> {
    #[inline]
    fn next_index(&self) -> u32 {
        self.flows.len() as u32
    }

    /// Pushes one direct flow; returns its index.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn direct(&mut self, src: u32, dst: u32, link: LinkClass, bytes: u64, step: u32, chunk: u32, channel: u32, deps: Deps) -> u32 {
        let i = self.next_index();
        self.flows.push(Flow { src, dst, bytes, step, chunk, channel: channel as u16, link, hop: Hop::Direct, deps });
        i
    }

    /// Pushes a routed transfer (one flow, or two through a PXN proxy);
    /// returns the index of the flow that delivers to the destination.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn routed(&mut self, src: u32, r: Route, bytes: u64, step: u32, chunk: u32, channel: u32, deps: Deps) -> u32 {
        let ch = channel as u16;
        if r.proxy == NONE {
            return self.direct(src, r.dst, r.link, bytes, step, chunk, channel, deps);
        }
        let i = self.next_index();
        self.flows.push(Flow { src, dst: r.proxy, bytes, step, chunk, channel: ch, link: LinkClass::NvLink, hop: Hop::PxnToProxy, deps });
        self.flows.push(Flow {
            src: r.proxy,
            dst: r.dst,
            bytes,
            step,
            chunk,
            channel: ch,
            link: LinkClass::Net,
            hop: Hop::PxnFromProxy,
            deps: Deps::one(i),
        });
        i + 1
    }
}

/// Chunks per channel part: enough slots for the largest part, coarsened so
/// the plan stays under [`MAX_FLOWS`] (`flows_per_chunk` flows per chunk index).
fn chunk_count(max_part: u64, chunk: u64, flows_per_chunk: u64) -> (u32, bool) {
    let k = max_part.div_ceil(chunk.max(1)).max(1);
    let cap = (MAX_FLOWS / flows_per_chunk.max(1)).max(1);
    if k > cap {
        (cap as u32, true)
    } else {
        (k as u32, false)
    }
}

/// Decomposes one collective call on `cluster` into flows.
///
/// Ring, Tree and NVLS(-Tree) are decomposed as NCCL runs them; algorithms
/// without a decomposition of their own here (CollNet, PAT, Tree for other
/// than AllReduce, NVLS for a multi-node AllGather/ReduceScatter) fall back to
/// the ring and say so in [`FlowPlan::note`]. AllToAll, Gather and Scatter are
/// grouped point-to-point transfers; Send/Recv/SendRecv decompose as
/// nccl-tests' `sendrecv` pattern (every rank sends `bytes` to rank + 1).
pub fn decompose(spec: &CollSpec, cluster: &Cluster, env: &NcclEnv) -> FlowPlan {
    let n = spec.nranks;
    let pl = Placement::new(cluster, n, spec.pxn.unwrap_or(cluster.nics.rail_aligned));
    let algo = spec.algo;
    if n <= 1 {
        return FlowPlan::empty(spec.kind, Some(algo), spec.proto, n, env);
    }
    let root = spec.root % n;
    match spec.kind {
        OpKind::AllToAll => p2p::alltoall(spec, &pl, env),
        OpKind::Gather | OpKind::Scatter => {
            let pairs: Vec<(u32, u32, u64)> = (0..n)
                .filter(|&r| r != root)
                .map(|r| if spec.kind == OpKind::Gather { (r, root, spec.bytes) } else { (root, r, spec.bytes) })
                .collect();
            let mut p = p2p::pairs(&pairs, &pl, spec.n_channels, env);
            p.kind = spec.kind;
            p
        }
        OpKind::Send | OpKind::Recv | OpKind::SendRecv => {
            let pairs: Vec<(u32, u32, u64)> = (0..n).map(|r| (r, (r + 1) % n, spec.bytes)).collect();
            let mut p = p2p::pairs(&pairs, &pl, spec.n_channels, env);
            p.kind = spec.kind;
            p
        }
        OpKind::Broadcast | OpKind::Reduce => {
            let mut p = ring::chain(spec, &pl, env, root);
            if algo != Algorithm::Ring {
                p.note = p.note.or(Some("Broadcast/Reduce run as NCCL's pipelined ring chain"));
            }
            p
        }
        OpKind::AllReduce => match algo {
            Algorithm::Ring => ring::ring(spec, &pl, env),
            Algorithm::Tree => tree::allreduce(spec, &pl, env),
            Algorithm::Nvls | Algorithm::NvlsTree => nvls::allreduce(spec, &pl, env),
            Algorithm::CollNetDirect | Algorithm::CollNetChain => {
                let mut p = tree::allreduce(spec, &pl, env);
                p.note = Some("CollNet (in-network SHARP reduction) decomposed as NCCL's tree: no switch endpoint for the network");
                p
            }
            Algorithm::Pat => {
                let mut p = ring::ring(spec, &pl, env);
                p.note = Some("PAT does not serve AllReduce: decomposed as ring");
                p
            }
        },
        OpKind::AllGather | OpKind::ReduceScatter => match algo {
            Algorithm::Ring => ring::ring(spec, &pl, env),
            Algorithm::Nvls if pl.nnodes() == 1 => nvls::gather_scatter(spec, &pl, env),
            _ => {
                let mut p = ring::ring(spec, &pl, env);
                p.algo = Some(Algorithm::Ring);
                p.note = Some("no decomposition of this algorithm for AllGather/ReduceScatter here: decomposed as ring");
                p
            }
        },
    }
}

/// Grouped point-to-point transfers `(src, dst, bytes)` among `nranks` ranks:
/// one flow per pair (two through a PXN proxy), spread over `n_channels`
/// channels, all in step 0 and free to overlap. Self-pairs are local copies
/// and make no flow. Network flows are posted in `NCCL_P2P_NET_CHUNKSIZE`
/// pieces ([`FlowPlan::pieces`]).
pub fn decompose_p2p(pairs: &[(u32, u32, u64)], nranks: u32, cluster: &Cluster, n_channels: u32, env: &NcclEnv) -> FlowPlan {
    let pl = Placement::new(cluster, nranks, cluster.nics.rail_aligned);
    p2p::pairs(pairs, &pl, n_channels, env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_is_small_and_deps_iterate() {
        assert!(std::mem::size_of::<Flow>() <= 40, "{}", std::mem::size_of::<Flow>());
        assert_eq!(Deps::NONE.iter().count(), 0);
        assert_eq!(Deps::list(&[4, 9]).iter().collect::<Vec<_>>(), vec![4, 9]);
        assert_eq!(Deps::range(3, 6).iter().collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(Deps::range(3, 6).len(), 3);
        assert_eq!(Deps::range(3, 3), Deps::NONE);
        assert_eq!(Deps::list(&[1, 7, 2]).max(), Some(7));
    }

    #[test]
    fn chunk_sizes_follow_the_protocol_and_env() {
        let env = NcclEnv::default();
        assert_eq!(chunk_bytes(Protocol::Simple, &env), 512 << 10);
        let env = NcclEnv { buffsize: Some(8 << 20), ..Default::default() };
        assert_eq!(chunk_bytes(Protocol::Simple, &env), 1 << 20);
        assert_eq!(chunk_bytes(Protocol::Ll, &env), 32 << 10);
    }

    #[test]
    fn splits_are_exact() {
        let total: u64 = (0..7).map(|i| split(100, 7, i)).sum();
        assert_eq!(total, 100);
        assert_eq!(split(100, 7, 0), 15);
        assert_eq!(split(100, 7, 6), 14);
    }
}
