//! The analytical network backend: each operation's time from the collective model, links
//! shared by count.
//!
//! Owns [`AnalyticalNetwork`] (the [`Network`] the simulator uses by default) and
//! [`ModelCache`] (one [`Predictor`] per communicator shape, one prediction per call shape;
//! the table writer asks it for NCCL's algorithm, protocol and channels too, so the table and
//! the timing come from the same model).
//!
//! Time: an operation alone takes the model's time, split into a latency part (the model's time
//! for zero bytes, charged once at full speed) and a bandwidth part (the rest, divided by the
//! `scale` knob for what-if runs).
//!
//! Sharing: an operation spanning several nodes holds, on each of its nodes, the NICs serving
//! its member GPUs there (GPU `l` of `g` per node uses NIC `l × nics / g`: rail-aligned
//! placement); a single-node operation holds its member GPUs' NVLink ports. Its bandwidth part
//! drains at its alone rate divided by the largest number of operations holding any of its
//! NICs or ports (processor sharing), recomputed whenever an operation starts or ends. Two
//! equal operations over the same GPUs of the same nodes thus take twice as long and a lone one
//! exactly the model's time, while the DP rings of different GPUs of a node (one rail each)
//! do not slow each other — counting per node instead made the eight DP rings of a TP-8 job
//! contend eight-way, which no rail-optimised cluster does.
//!
//! Usage ([`Network::link_usage`]) is reported per node and class (its NICs together, its
//! NVLink together): busy while any operation holds one, bytes as each member's nccl-tests bus
//! bytes (for inter-node operations the share that leaves the node) — an estimate, not a
//! packet count.

use commlens_core::{Algorithm, NcclVersion, OpKind, Protocol};
use commlens_model::predict::bus_factor;
use commlens_model::tuner::NcclEnv;
use commlens_model::{Cluster, Predictor};
use rustc_hash::FxHashMap;

use crate::network::{LinkUsage, NetOp, NetOpId, Network};

/// The model's answer for one call shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Alone, µs (the Predictor's time).
    pub total_us: f64,
    /// The part that does not depend on bytes (the model's time for an empty call), µs.
    pub latency_us: f64,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    pub n_channels: u32,
}

/// nccl-tests' `size` (the larger buffer) of a call whose NCCL `count × sizeof` is `bytes`:
/// AllGather passes the per-rank send count and ReduceScatter the per-rank receive count, so
/// their buffers are `nranks` times larger.
pub fn tests_size(kind: OpKind, bytes: u64, nranks: u32) -> u64 {
    match kind {
        OpKind::AllGather | OpKind::ReduceScatter => bytes.saturating_mul(nranks.max(1) as u64),
        _ => bytes,
    }
}

/// Predictors per communicator shape and predictions per call shape, built on first use.
#[derive(Debug, Clone)]
pub struct ModelCache {
    cluster: Cluster,
    version: NcclVersion,
    env: NcclEnv,
    predictors: FxHashMap<(u32, u32), Predictor>,
    calls: FxHashMap<(OpKind, u32, u32, u64), Timing>,
}

impl ModelCache {
    pub fn new(cluster: &Cluster, version: NcclVersion, env: NcclEnv) -> ModelCache {
        ModelCache { cluster: cluster.clone(), version, env, predictors: FxHashMap::default(), calls: FxHashMap::default() }
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Node of a global rank (consecutive ranks fill a node).
    pub fn node_of(&self, rank: u32) -> u32 {
        rank / self.cluster.gpus_per_node.max(1)
    }

    /// The nodes of `ranks` with how many of them each holds, ascending by node.
    pub fn nodes(&self, ranks: &[u32]) -> Vec<(u32, u32)> {
        let mut n: Vec<u32> = ranks.iter().map(|&r| self.node_of(r)).collect();
        n.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::new();
        for x in n {
            match out.last_mut() {
                Some(l) if l.0 == x => l.1 += 1,
                _ => out.push((x, 1)),
            }
        }
        out
    }

    /// The model's timing of one call: `kind` with NCCL's `bytes` over `nranks` ranks on
    /// `nnodes` nodes (Send and Recv are timed as one Send between two ranks).
    pub fn timing(&mut self, kind: OpKind, bytes: u64, nranks: u32, nnodes: u32) -> Timing {
        let kind = if matches!(kind, OpKind::Recv | OpKind::SendRecv) { OpKind::Send } else { kind };
        let nnodes = nnodes.clamp(1, nranks.max(1));
        let key = (kind, nranks, nnodes, bytes);
        if let Some(t) = self.calls.get(&key) {
            return *t;
        }
        let (cluster, version, env) = (&self.cluster, self.version, &self.env);
        let p = self.predictors.entry((nranks, nnodes)).or_insert_with(|| Predictor::new(cluster, nranks, nnodes, version, env.clone()));
        let full = p.predict(kind, tests_size(kind, bytes, nranks));
        let empty = p.predict(kind, 0);
        let t = Timing {
            total_us: full.time_us,
            latency_us: empty.time_us.clamp(0.0, full.time_us),
            algo: full.algo,
            proto: full.proto,
            n_channels: full.n_channels,
        };
        self.calls.insert(key, t);
        t
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct LinkState {
    active: u32,
    since: f64,
    busy_us: f64,
    bytes: f64,
}

#[derive(Debug, Clone)]
struct Flight {
    id: NetOpId,
    lat_left: f64,
    /// Bandwidth part left, in µs at the alone rate.
    work_left: f64,
    share: f64,
    /// Nodes touched (usage accounting).
    nodes: Vec<u32>,
    /// NICs (`node × nics + nic`) or GPUs (global rank) held, distinct.
    res: Vec<u32>,
    inter: bool,
}

/// The analytical backend (see the module documentation).
#[derive(Debug, Clone)]
pub struct AnalyticalNetwork {
    model: ModelCache,
    scale: f64,
    now: f64,
    flights: Vec<Flight>,
    /// Per node: its NICs together, its NVLink together (usage only).
    nic: Vec<LinkState>,
    nvl: Vec<LinkState>,
    /// Operations holding each NIC (`node × nics + nic`) and each GPU's NVLink port (rank).
    nic_holders: Vec<u32>,
    gpu_holders: Vec<u32>,
    next: Option<f64>,
}

impl AnalyticalNetwork {
    pub fn new(cluster: &Cluster, version: NcclVersion, env: NcclEnv) -> AnalyticalNetwork {
        AnalyticalNetwork { model: ModelCache::new(cluster, version, env), scale: 1.0, now: 0.0, flights: Vec::new(), nic: Vec::new(), nvl: Vec::new(), nic_holders: Vec::new(), gpu_holders: Vec::new(), next: None }
    }

    /// Multiplies every bandwidth by `scale` (`--scale-network 2`: twice as fast links);
    /// latencies stay.
    pub fn with_scale(mut self, scale: f64) -> AnalyticalNetwork {
        self.scale = if scale.is_finite() && scale > 0.0 { scale } else { 1.0 };
        self
    }

    pub fn model(&mut self) -> &mut ModelCache {
        &mut self.model
    }

    /// Operations in flight now.
    pub fn in_flight(&self) -> usize {
        self.flights.len()
    }

    fn links(&mut self, inter: bool, node: u32) -> &mut LinkState {
        let v = if inter { &mut self.nic } else { &mut self.nvl };
        if v.len() <= node as usize {
            v.resize(node as usize + 1, LinkState::default());
        }
        &mut v[node as usize]
    }

    fn holders(&mut self, inter: bool, key: u32) -> &mut u32 {
        let v = if inter { &mut self.nic_holders } else { &mut self.gpu_holders };
        if v.len() <= key as usize {
            v.resize(key as usize + 1, 0);
        }
        &mut v[key as usize]
    }

    /// The NICs or NVLink ports an operation over `ranks` holds.
    fn resources(&self, ranks: &[u32], inter: bool) -> Vec<u32> {
        let c = self.model.cluster();
        let (gpn, nics) = (c.gpus_per_node.max(1), c.nics.per_node.max(1));
        let mut res: Vec<u32> = if inter {
            ranks.iter().map(|&r| (r / gpn) * nics + (r % gpn) * nics / gpn).collect()
        } else {
            ranks.to_vec()
        };
        res.sort_unstable();
        res.dedup();
        res
    }

    /// Moves every flight's progress to `t` at its current share.
    fn progress_to(&mut self, t: f64) {
        let dt = t - self.now;
        if dt <= 0.0 {
            return;
        }
        for f in &mut self.flights {
            if f.lat_left >= dt {
                f.lat_left -= dt;
            } else {
                let r = dt - f.lat_left;
                f.lat_left = 0.0;
                f.work_left = (f.work_left - r / f.share).max(0.0);
            }
        }
        self.now = t;
    }

    /// Shares from the link counters, then the earliest completion.
    fn reshare(&mut self) {
        let mut next: Option<f64> = None;
        for f in &mut self.flights {
            let holders = if f.inter { &self.nic_holders } else { &self.gpu_holders };
            f.share = f.res.iter().map(|&k| holders[k as usize]).max().unwrap_or(1).max(1) as f64;
            let done = self.now + f.lat_left + f.work_left * f.share;
            next = Some(next.map_or(done, |x: f64| x.min(done)));
        }
        self.next = next;
    }
}

impl Network for AnalyticalNetwork {
    fn start(&mut self, now_us: f64, op: NetOp) {
        self.progress_to(now_us);
        let n = op.ranks.len() as u32;
        let nodes = self.model.nodes(&op.ranks);
        let inter = nodes.len() > 1;
        let t = self.model.timing(op.kind, op.bytes, n, nodes.len() as u32);
        // What each member puts on the wire (nccl-tests' bus bytes); across nodes, the share
        // of it that leaves the node.
        let size = tests_size(op.kind, op.bytes, n) as f64;
        let per_rank = if matches!(op.kind, OpKind::Send | OpKind::Recv | OpKind::SendRecv) { size } else { size * bus_factor(op.kind, n) };
        for &(node, members) in &nodes {
            let off_node = if inter && n > 1 { (n - members) as f64 / (n - 1) as f64 } else { 1.0 };
            let now = self.now;
            let l = self.links(inter, node);
            if l.active == 0 {
                l.since = now;
            }
            l.active += 1;
            l.bytes += per_rank * members as f64 * off_node;
        }
        let res = self.resources(&op.ranks, inter);
        for &k in &res {
            *self.holders(inter, k) += 1;
        }
        self.flights.push(Flight {
            id: op.id,
            lat_left: t.latency_us,
            work_left: (t.total_us - t.latency_us).max(0.0) / self.scale,
            share: 1.0,
            nodes: nodes.into_iter().map(|(n, _)| n).collect(),
            res,
            inter,
        });
        self.reshare();
    }

    fn next_completion(&self) -> Option<f64> {
        self.next
    }

    fn advance(&mut self, to_us: f64) -> Vec<NetOpId> {
        self.progress_to(to_us);
        let eps = 1e-9 * to_us.abs().max(1.0);
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.flights.len() {
            let f = &self.flights[i];
            if f.lat_left <= eps && f.work_left * f.share <= eps {
                let f = self.flights.remove(i);
                for &k in &f.res {
                    *self.holders(f.inter, k) -= 1;
                }
                for &node in &f.nodes {
                    let l = self.links(f.inter, node);
                    l.active -= 1;
                    if l.active == 0 {
                        l.busy_us += to_us - l.since;
                    }
                }
                done.push(f.id);
            } else {
                i += 1;
            }
        }
        if !done.is_empty() {
            self.reshare();
        }
        done
    }

    fn link_usage(&self) -> Vec<LinkUsage> {
        let c = self.model.cluster();
        let gpn = c.gpus_per_node.max(1);
        let nic_cap = c.nics.node_gb_s() * self.scale;
        let (intra_gb_s, intra_class) = c.intra_gb_s(gpn);
        let nvl_cap = intra_gb_s * gpn as f64 * self.scale;
        let mut out = Vec::new();
        for node in 0..self.nic.len().max(self.nvl.len()) {
            for (name, links, cap) in [("NIC", &self.nic, nic_cap), (intra_class.name(), &self.nvl, nvl_cap)] {
                let Some(l) = links.get(node) else { continue };
                if l.bytes == 0.0 && l.busy_us == 0.0 && l.active == 0 {
                    continue;
                }
                let ongoing = if l.active > 0 { self.now - l.since } else { 0.0 };
                out.push(LinkUsage { name: format!("node{node} {name}"), bytes: l.bytes, busy_us: l.busy_us + ongoing, capacity_gb_s: cap });
            }
        }
        out
    }
}
