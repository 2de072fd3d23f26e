//! The flow-level network backend: every operation is a coflow over the cluster's links, and
//! coflows share links max-min fairly, recomputed whenever one starts or ends.
//!
//! | module | owns |
//! |---|---|
//! | `topology` | the link graph of a `Cluster` (NVSwitch / NVLink mesh / PCIe inside nodes, NICs per rail, leaves and spines with the oversubscription) and routing (PXN, ECMP) |
//! | `coflow` | a `NetOp` → its flows (ring, tree, NVLS, AllToAll, Send/Recv) → per-link weights |
//! | `fair` | max-min fair coflow rates by progressive filling |
//!
//! Timing of one operation: the data phase, in which all the coflow's flows advance together
//! at one rate (a ring moves at the pace of its slowest edge), then the collective model's
//! latency for the call (its time minus the bandwidth term, so launch, per-step and network
//! latencies count once per op) as a tail that holds no link. The algorithm (ring, tree, NVLS) is the collective model's
//! choice for the call (`commlens_model::Predictor`, one per communicator shape, cached).
//!
//! Events: a coflow's bytes finishing changes the others' rates without completing anything
//! (its latency tail follows), so [`Network::next_completion`] looks ahead: it replays those
//! ends on copies of the rates until the first operation completes (usually none or one
//! replay: only bytes finishing within one latency of now count), cached until the next
//! `start` or `advance`; [`Network::advance`] to that time returns the operation. Rates are
//! recomputed at every start and at every end of a data phase.

mod coflow;
mod fair;
mod topology;

pub use topology::{ecmp_hash, Link, LinkKind, Topology};

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use commlens_core::{Algorithm, NcclVersion, OpKind};
use commlens_model::flows::wire_factor;
use commlens_model::predict::{Predictor, DEFAULT_VERSION};
use commlens_model::tuner::{tuner_bytes, NcclEnv};
use commlens_model::{Cluster, LinkClass};

use crate::network::{LinkUsage, NetOp, NetOpId, Network};

/// Settings of a [`FlowNetwork`].
#[derive(Debug, Clone)]
pub struct FlowConfig {
    /// NCCL release whose tuner picks algorithms and latencies.
    pub version: NcclVersion,
    pub env: NcclEnv,
    /// Add the collective model's latency once per operation (off: bandwidth only).
    pub latency: bool,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig { version: DEFAULT_VERSION, env: NcclEnv::default(), latency: true }
    }
}

/// Counters for benchmarks and reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowStats {
    pub ops: u64,
    /// Starts, data-phase ends and completions handled.
    pub events: u64,
    pub rate_recomputations: u64,
    /// (coflow, link) entries built over the run.
    pub link_entries: u64,
    /// Ranks beyond the cluster's GPUs, folded back onto it (the cluster is too small).
    pub ranks_out_of_range: u64,
}

/// What the collective model says about one operation.
struct Model {
    algo: Option<Algorithm>,
    latency_us: f64,
    wire: f64,
    nnodes: u32,
    /// The model's bandwidth term as algorithm bandwidth, GB/s.
    algbw_gb_s: f64,
}

struct Coflow {
    id: NetOpId,
    links: Vec<(u32, f64)>,
    size: f64,
    remaining: f64,
    rate: f64,
    /// The latency tail, µs.
    lat: f64,
    /// When its bytes are all moved: it completes `lat` later and holds no link meanwhile.
    tail_end: Option<f64>,
}

/// A coflow as `look_ahead` replays it: shared links, own activity and rate.
struct View<'a> {
    links: &'a [(u32, f64)],
    active: bool,
    rate: f64,
}

impl fair::Weighted for View<'_> {
    fn active(&self) -> bool {
        self.active
    }
    fn links(&self) -> &[(u32, f64)] {
        self.links
    }
    fn set_rate(&mut self, r: f64) {
        self.rate = r;
    }
    fn rate(&self) -> f64 {
        self.rate
    }
}

impl fair::Weighted for Coflow {
    fn active(&self) -> bool {
        self.tail_end.is_none()
    }
    fn links(&self) -> &[(u32, f64)] {
        &self.links
    }
    fn set_rate(&mut self, r: f64) {
        self.rate = r;
    }
    fn rate(&self) -> f64 {
        self.rate
    }
}

/// The flow-level network.
pub struct FlowNetwork {
    pub topo: Topology,
    cluster: Cluster,
    config: FlowConfig,
    predictors: HashMap<(u32, u32), Predictor>,
    caps: Vec<f64>,
    clock: f64,
    coflows: Vec<Coflow>,
    done: Vec<NetOpId>,
    fair: RefCell<fair::Fair>,
    /// Rates are stale (operations started since the last recomputation): starts at one
    /// instant, as an engine issues them, share one recomputation.
    dirty: bool,
    /// `next_completion`'s look-ahead, valid until the state changes.
    next_cache: Cell<Option<Option<f64>>>,
    /// Rates the look-ahead computed for the stale state (per coflow), which the next
    /// recomputation takes instead of computing them again: the same function of the same
    /// coflows and links, so the same bits. Cleared when a coflow starts.
    ahead_rates: RefCell<Option<Vec<f64>>>,
    link_bytes: Vec<f64>,
    link_users: Vec<u32>,
    busy_since: Vec<f64>,
    busy_us: Vec<f64>,
    class_users: [u32; LinkKind::ALL.len()],
    class_since: [f64; LinkKind::ALL.len()],
    class_busy: [f64; LinkKind::ALL.len()],
    acc: Vec<f64>,
    touched: Vec<u32>,
    path: Vec<u32>,
    pub stats: FlowStats,
}

fn class_ix(k: LinkKind) -> usize {
    LinkKind::ALL.iter().position(|&x| x == k).unwrap_or(0)
}

/// When a coflow's bytes end at its current rate.
fn finish(clock: f64, remaining: f64, rate: f64) -> f64 {
    if rate.is_infinite() || remaining <= 0.0 {
        clock
    } else {
        clock + remaining / rate
    }
}

/// Whether bytes are all moved at `now` (within float residue).
fn done_moving(size: f64, remaining: f64, rate: f64, now: f64) -> bool {
    rate.is_infinite() || remaining <= size * 1e-12 || remaining / rate <= tol(now)
}

fn moved_all(c: &Coflow, now: f64) -> bool {
    done_moving(c.size, c.remaining, c.rate, now)
}

/// Times closer than this (relative) are the same event.
fn tol(t: f64) -> f64 {
    1e-9 * t.abs().max(1.0)
}

impl FlowNetwork {
    pub fn new(cluster: &Cluster, config: FlowConfig) -> FlowNetwork {
        let topo = Topology::new(cluster);
        let n = topo.links.len();
        FlowNetwork {
            caps: topo.links.iter().map(|l| l.cap).collect(),
            topo,
            cluster: cluster.clone(),
            config,
            predictors: HashMap::new(),
            clock: 0.0,
            coflows: Vec::new(),
            done: Vec::new(),
            fair: RefCell::new(fair::Fair::new(n)),
            next_cache: Cell::new(None),
            ahead_rates: RefCell::new(None),
            dirty: false,
            link_bytes: vec![0.0; n],
            link_users: vec![0; n],
            busy_since: vec![0.0; n],
            busy_us: vec![0.0; n],
            class_users: [0; LinkKind::ALL.len()],
            class_since: [0.0; LinkKind::ALL.len()],
            class_busy: [0.0; LinkKind::ALL.len()],
            acc: vec![0.0; n],
            touched: Vec::new(),
            path: Vec::new(),
            stats: FlowStats::default(),
        }
    }

    /// The simulation clock, µs.
    pub fn now(&self) -> f64 {
        self.clock
    }

    /// Operations in flight (waiting out their latency or moving bytes).
    pub fn in_flight(&self) -> usize {
        self.coflows.len()
    }

    /// The collective model's algorithm and latency for `op`: the predicted time minus its
    /// bandwidth term (what remains is launch, per-step and network latency), and the wire
    /// factor of its protocol.
    fn model(&mut self, op: &NetOp, size: u64) -> Model {
        let n = op.ranks.len() as u32;
        let nnodes = coflow::by_node(&self.topo, &op.ranks).len() as u32;
        let (cluster, version, env) = (&self.cluster, self.config.version, &self.config.env);
        let p = self.predictors.entry((n, nnodes)).or_insert_with(|| Predictor::new(cluster, n, nnodes, version, env.clone()));
        let pred = p.predict(op.kind, size);
        let data_us = match (pred.algo, pred.proto) {
            (Some(a), Some(pr)) => {
                let per_rank = match op.kind {
                    OpKind::AllGather | OpKind::ReduceScatter => size / n.max(1) as u64,
                    _ => size,
                };
                let tb = tuner_bytes(op.kind, per_rank, n);
                let class = if p.nnodes > 1 { LinkClass::Net } else { cluster.intra_gb_s(p.nranks / p.nnodes.max(1)).1 };
                let (ceiling, _) = p.ceiling_algbw(op.kind, Some(a));
                match p.table.algo_lat_bw(op.kind, a, pr, tb) {
                    Some((_, bw, _)) => tb as f64 / (1000.0 * (bw * cluster.eff(class)).min(ceiling)),
                    None => 0.0,
                }
            }
            _ => size as f64 / (1000.0 * p.ceiling_algbw(op.kind, None).0),
        };
        let lat = if self.config.latency && data_us.is_finite() { (pred.time_us - data_us).max(0.0) } else { 0.0 };
        let algbw_gb_s = if data_us > 0.0 && data_us.is_finite() { size as f64 / (data_us * 1e3) } else { f64::INFINITY };
        Model { algo: pred.algo, latency_us: lat, wire: pred.proto.map_or(1.0, wire_factor), nnodes, algbw_gb_s }
    }

    /// Moves every moving coflow forward to `t` (no events in between).
    fn progress(&mut self, t: f64) {
        let dt = t - self.clock;
        if dt > 0.0 {
            for c in self.coflows.iter_mut().filter(|c| c.tail_end.is_none()) {
                c.remaining = (c.remaining - c.rate * dt).max(0.0);
            }
            self.clock = t;
        }
    }

    /// Earliest end of a data phase or of a latency tail.
    fn next_internal(&self) -> Option<f64> {
        self.coflows
            .iter()
            .map(|c| c.tail_end.unwrap_or_else(|| finish(self.clock, c.remaining, c.rate)))
            .min_by(f64::total_cmp)
    }

    fn use_links(&mut self, i: usize, on: bool) {
        let now = self.clock;
        for k in 0..self.coflows[i].links.len() {
            let (l, w) = self.coflows[i].links[k];
            let lu = l as usize;
            let ci = class_ix(self.topo.links[lu].kind);
            if on {
                if self.link_users[lu] == 0 {
                    self.busy_since[lu] = now;
                }
                self.link_users[lu] += 1;
                if self.class_users[ci] == 0 {
                    self.class_since[ci] = now;
                }
                self.class_users[ci] += 1;
            } else {
                self.link_bytes[lu] += w * self.coflows[i].size;
                self.link_users[lu] -= 1;
                if self.link_users[lu] == 0 {
                    self.busy_us[lu] += now - self.busy_since[lu];
                }
                self.class_users[ci] -= 1;
                if self.class_users[ci] == 0 {
                    self.class_busy[ci] += now - self.class_since[ci];
                }
            }
        }
    }

    /// Handles every event up to `to`; completions go to `self.done`.
    fn run_to(&mut self, to: f64) {
        if self.dirty {
            self.recompute();
        }
        while let Some(t) = self.next_internal().filter(|&t| t <= to + tol(to)) {
            if t > self.clock {
                self.progress(t);
            }
            let now = self.clock;
            let mut handled = 0;
            let mut changed = false;
            for i in 0..self.coflows.len() {
                let c = &self.coflows[i];
                if c.tail_end.is_none() && moved_all(c, now) {
                    self.coflows[i].tail_end = Some(now + self.coflows[i].lat);
                    self.use_links(i, false);
                    self.stats.events += 1;
                    handled += 1;
                    changed = true;
                }
            }
            if changed {
                self.recompute();
            }
            let mut i = 0;
            while i < self.coflows.len() {
                if self.coflows[i].tail_end.is_some_and(|e| e <= now + tol(now)) {
                    let c = self.coflows.swap_remove(i);
                    self.done.push(c.id);
                    self.stats.events += 1;
                    handled += 1;
                } else {
                    i += 1;
                }
            }
            if handled == 0 {
                // Float residue: the event's time came, nothing matched it. Never spin.
                break;
            }
        }
        if to > self.clock {
            self.progress(to);
        }
    }

    fn recompute(&mut self) {
        self.dirty = false;
        if let Some(r) = self.ahead_rates.get_mut().take().filter(|r| r.len() == self.coflows.len()) {
            for (c, r) in self.coflows.iter_mut().zip(r) {
                c.rate = r;
            }
            return;
        }
        self.stats.rate_recomputations += 1;
        self.fair.get_mut().rates(&self.caps, &mut self.coflows);
    }

    /// The first completion: replays the data phases that end before it (each recomputing
    /// rates, on copies) until a latency tail ends first.
    fn look_ahead(&self) -> Option<f64> {
        if !self.done.is_empty() {
            return Some(self.clock);
        }
        let mut v: Vec<View> = self.coflows.iter().map(|c| View { links: &c.links, active: c.tail_end.is_none(), rate: c.rate }).collect();
        let mut rem: Vec<f64> = self.coflows.iter().map(|c| c.remaining).collect();
        let mut ends: Vec<Option<f64>> = self.coflows.iter().map(|c| c.tail_end).collect();
        let mut clock = self.clock;
        if self.dirty {
            self.fair.borrow_mut().rates(&self.caps, &mut v);
            *self.ahead_rates.borrow_mut() = Some(v.iter().map(|c| c.rate).collect());
        }
        loop {
            let t_end = ends.iter().flatten().copied().min_by(f64::total_cmp);
            let t_data = v.iter().zip(&rem).filter(|(c, _)| c.active).map(|(c, &r)| finish(clock, r, c.rate)).min_by(f64::total_cmp);
            let t = match (t_end, t_data) {
                (None, None) => return None,
                (Some(e), None) => return Some(e),
                (Some(e), Some(d)) if e <= d + tol(d) => return Some(e),
                (_, Some(d)) => d,
            };
            let dt = t - clock;
            if dt > 0.0 {
                for (c, r) in v.iter().zip(rem.iter_mut()).filter(|(c, _)| c.active) {
                    *r = (*r - c.rate * dt).max(0.0);
                }
                clock = t;
            }
            for i in 0..v.len() {
                let (size, lat) = (self.coflows[i].size, self.coflows[i].lat);
                if v[i].active && done_moving(size, rem[i], v[i].rate, clock) {
                    v[i].active = false;
                    ends[i] = Some(clock + lat);
                }
            }
            self.fair.borrow_mut().rates(&self.caps, &mut v);
        }
    }

    /// Per-link bytes so far, including what active coflows have moved.
    fn bytes_now(&self) -> Vec<f64> {
        let mut b = self.link_bytes.clone();
        for c in self.coflows.iter().filter(|c| c.tail_end.is_none()) {
            let moved = c.size - c.remaining;
            for &(l, w) in &c.links {
                b[l as usize] += w * moved;
            }
        }
        b
    }
}

impl Network for FlowNetwork {
    fn start(&mut self, now_us: f64, op: NetOp) {
        self.next_cache.set(None);
        if now_us > self.clock {
            self.run_to(now_us);
        }
        self.stats.ops += 1;
        self.stats.events += 1;
        let mut op = op;
        let total = self.topo.ranks().max(1);
        for r in &mut op.ranks {
            if *r as u64 >= total {
                self.stats.ranks_out_of_range += 1;
                *r = (*r as u64 % total) as u32;
            }
        }
        if op.bytes == 0 || op.ranks.len() < 2 {
            self.done.push(op.id);
            return;
        }
        let n = op.ranks.len() as u64;
        let size = match op.kind {
            OpKind::AllGather | OpKind::ReduceScatter | OpKind::Gather | OpKind::Scatter => op.bytes.saturating_mul(n),
            _ => op.bytes,
        };
        let m = self.model(&op, size);
        let (algo, lat, mut wire) = (m.algo, m.latency_us, m.wire);
        if matches!(algo, Some(Algorithm::Nvls | Algorithm::NvlsTree)) && m.nnodes == 1 {
            // NVLS is not link-bound: NCCL's model (and nccl-tests, ~450–480 GB/s busbw on
            // H100 against 616 the links allow) puts it below the NVLink rate, limited by the
            // switch's reductions and the SMs driving them. Its switch bytes are weighted so a
            // lone NVLS call runs at the model's bandwidth and shares links in proportion.
            if let Some(up) = self.topo.switch_up(op.ranks[0]) {
                let link_gb_s = self.caps[up as usize] / 1e3;
                wire *= (link_gb_s / m.algbw_gb_s).max(1.0);
            }
        }
        let mut b = coflow::Builder {
            topo: &self.topo,
            op: op.id,
            acc: &mut self.acc,
            touched: &mut self.touched,
            path: &mut self.path,
            wire,
        };
        let size = b.op(&op, algo);
        let links = b.finish(size);
        self.stats.link_entries += links.len() as u64;
        let i = self.coflows.len();
        self.ahead_rates.get_mut().take();
        self.coflows.push(Coflow { id: op.id, links, size, remaining: size, rate: 0.0, lat, tail_end: None });
        self.use_links(i, true);
        self.dirty = true;
    }

    fn next_completion(&self) -> Option<f64> {
        if let Some(t) = self.next_cache.get() {
            return t;
        }
        let t = self.look_ahead();
        self.next_cache.set(Some(t));
        t
    }

    fn advance(&mut self, to_us: f64) -> Vec<NetOpId> {
        self.next_cache.set(None);
        self.run_to(to_us.max(self.clock));
        std::mem::take(&mut self.done)
    }

    /// Per-link bytes, busy time and capacity for every link that carried traffic, after one
    /// total per link class (`class:nic-tx`, …: bytes summed, busy = time any link of the
    /// class carried traffic, capacity summed over the class's links).
    fn link_usage(&self) -> Vec<LinkUsage> {
        let bytes = self.bytes_now();
        let now = self.clock;
        let mut out = Vec::new();
        for (ci, kind) in LinkKind::ALL.iter().enumerate() {
            let ids: Vec<usize> = (0..self.topo.links.len()).filter(|&l| self.topo.links[l].kind == *kind).collect();
            if ids.is_empty() {
                continue;
            }
            let b: f64 = ids.iter().map(|&l| bytes[l]).sum();
            let cap: f64 = ids.iter().map(|&l| self.caps[l]).sum();
            let busy = self.class_busy[ci] + if self.class_users[ci] > 0 { now - self.class_since[ci] } else { 0.0 };
            out.push(LinkUsage { name: format!("class:{}", kind.class()), bytes: b, busy_us: busy, capacity_gb_s: cap / 1e3 });
        }
        for (l, &b) in bytes.iter().enumerate() {
            let busy = self.busy_us[l] + if self.link_users[l] > 0 { now - self.busy_since[l] } else { 0.0 };
            if b > 0.0 || busy > 0.0 {
                out.push(LinkUsage { name: self.topo.name(l as u32), bytes: b, busy_us: busy, capacity_gb_s: self.caps[l] / 1e3 });
            }
        }
        out
    }
}
