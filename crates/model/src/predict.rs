//! Predictions for single calls and nccl-tests style sweeps.
//!
//! NCCL's tuner decides the algorithm, protocol and channels; its time model
//! (latency + bytes / bandwidth, with the tree correction and ring plateau)
//! gives the shape of the curve. Its bandwidths are NCCL's own view of the
//! links, so the prediction scales them by the achieved fraction of the
//! bottleneck link class ([`crate::cluster::Efficiency`]) and bounds them by
//! what the cluster's links can physically carry for the algorithm
//! ([`Predictor::ceiling_algbw`]). AllToAll and Send/Recv, which NCCL runs as
//! grouped point-to-point transfers outside the tuner, are timed from the
//! same links.
//!
//! Sizes follow nccl-tests: `size` is the buffer size nccl-tests prints
//! (`max(send, recv)` bytes), busbw uses its bus factors.

use commlens_core::{Algorithm, NcclVersion, OpKind, Protocol};
use serde::Serialize;

use crate::cluster::{Cluster, LinkClass};
use crate::graph::{graphs_for, nccl_intra_bw};
use crate::tuner::{tune, tuner_bytes, Choice, Graph, NcclEnv, TuneInput, TuneTable};
use crate::tuner::tables::{hw_lat, Epoch, HW_NET, HW_NVLINK, HW_PCI, N_ALGOS};
use crate::tuner::{algo_index, proto_index};

/// The largest communicator the model times (16 M ranks, two orders of
/// magnitude above the largest jobs run): a log declaring more is damaged,
/// and its communicators get no prediction rather than a meaningless one.
pub const MAX_RANKS: u32 = 1 << 24;

/// The one-way network latency NCCL's NET latency constants correspond to (InfiniBand), µs.
const IB_LATENCY_US: f64 = 2.0;

/// Host time of one call per GPU its thread drives, µs: superbench's all_reduce_perf and
/// reduce_perf on 8 A100s driven by one thread (`nGpus 8`) take 35.2 µs per call at 0-64 B
/// whatever the size (the thread launches the call on each GPU in turn): 35.2 / 8.
pub const HOST_CALL_US: f64 = 4.4;

/// Host time of each Send or Recv of a grouped call (NCCL schedules them one by one on the
/// CPU), µs: superbench's alltoall_perf on the same 8 GPUs from one thread takes 87 µs per
/// call at 32 B-2 MiB, flat (host-bound), each GPU posting 7 sends and 7 receives:
/// (87 − 35.2) / (8 × 14).
pub const HOST_P2P_OP_US: f64 = 0.46;

/// The NCCL release assumed when none is known.
pub const DEFAULT_VERSION: NcclVersion = NcclVersion::new(2, 27, 7);

/// One predicted call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    pub kind: OpKind,
    /// nccl-tests `size`: bytes of the larger of the send and receive buffers.
    pub size_bytes: u64,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    pub n_channels: u32,
    pub time_us: f64,
    pub algbw_gb_s: f64,
    pub busbw_gb_s: f64,
    /// NCCL's own estimate for the call, µs (none for point-to-point).
    pub nccl_time_us: Option<f64>,
    /// The link class that bounds the bandwidth.
    pub bottleneck: LinkClass,
}

/// nccl-tests' bus factor for a collective over `n` ranks.
pub fn bus_factor(kind: OpKind, n: u32) -> f64 {
    let n = n.max(1) as f64;
    match kind {
        OpKind::AllReduce => 2.0 * (n - 1.0) / n,
        OpKind::AllGather | OpKind::ReduceScatter | OpKind::AllToAll | OpKind::Gather | OpKind::Scatter => {
            (n - 1.0) / n
        }
        _ => 1.0,
    }
}

/// Predicts calls of one communicator shape on one cluster.
#[derive(Debug, Clone)]
pub struct Predictor {
    pub cluster: Cluster,
    pub nranks: u32,
    pub nnodes: u32,
    pub table: TuneTable,
    /// Per-GPU intra-node bandwidth as NCCL rates it, GB/s, and its link class.
    intra_bw: f64,
    intra_class: LinkClass,
    /// NCCL's ring graph shares its channels between rings (then its tuner
    /// charges a chained Broadcast/Reduce one hop; see [`Predictor::chain_hops_us`]).
    ring_same_channels: bool,
    /// GPUs one host thread drives (nccl-tests' `nGpus`; 1 for a process per GPU): the host
    /// time of a grouped point-to-point call grows with it.
    gpus_per_thread: u32,
}

impl Predictor {
    /// `nranks` ranks over `nnodes` nodes of `cluster`, NCCL `version`, environment `env`.
    pub fn new(cluster: &Cluster, nranks: u32, nnodes: u32, version: NcclVersion, env: NcclEnv) -> Predictor {
        let (shape, graphs) = graphs_for(cluster, nranks.max(1), nnodes.max(1));
        Predictor::with_graphs(cluster, shape, graphs, version, env)
    }

    /// As [`Predictor::new`], with search results a log printed.
    pub fn with_graphs(
        cluster: &Cluster,
        shape: crate::tuner::CommShape,
        graphs: [Option<Graph>; N_ALGOS],
        version: NcclVersion,
        env: NcclEnv,
    ) -> Predictor {
        let (nranks, nnodes) = (shape.nranks.max(1), shape.nnodes.clamp(1, shape.nranks.max(1)));
        let ppn = (nranks / nnodes).max(1);
        let ring_same_channels = graphs[1].as_ref().is_none_or(|g| g.same_channels);
        let table = tune(&TuneInput { version, shape, graphs, env });
        let (intra_bw, _, intra_class) =
            if ppn > 1 { nccl_intra_bw(cluster, ppn) } else { (f64::INFINITY, commlens_core::LinkKind::Loc, LinkClass::NvLink) };
        Predictor { cluster: cluster.clone(), nranks, nnodes, table, intra_bw, intra_class, ring_same_channels, gpus_per_thread: 1 }
    }

    /// The same predictor for a benchmark whose threads drive `gpus` GPUs each (nccl-tests'
    /// `nGpus`).
    pub fn with_gpus_per_thread(mut self, gpus: u32) -> Predictor {
        self.gpus_per_thread = gpus.max(1);
        self
    }

    /// A predictor for one communicator of a table: NCCL's own search graphs
    /// when its init logged them (the tuner then reproduces NCCL's table), else
    /// the emulated search on `cluster`; ranks and nodes from the init lines.
    pub fn for_comm(
        cluster: &Cluster,
        t: &commlens_core::OpTable,
        comm: commlens_core::CommIdx,
        version: NcclVersion,
        env: NcclEnv,
    ) -> Option<Predictor> {
        use crate::tuner::logged::{logged_graphs, logged_shape};
        let declared = t.comms.get(comm.ix())?.nranks.unwrap_or(0);
        if declared > MAX_RANKS {
            return None;
        }
        if let Some(graphs) = logged_graphs(t, comm) {
            let shape = logged_shape(t, comm, cluster, &graphs)?;
            return Some(Predictor::with_graphs(cluster, shape, graphs, version, env));
        }
        let c = t.comms.get(comm.ix())?;
        let nranks = c.nranks.or_else(|| c.logical.map(|l| t.logical[l.ix()].nranks))?;
        let nnodes = c.n_nodes.unwrap_or_else(|| nranks.div_ceil(cluster.gpus_per_node.max(1)).min(cluster.nodes.max(1)));
        Some(Predictor::new(cluster, nranks, nnodes.max(1), version, env))
    }

    fn ppn(&self) -> u32 {
        (self.nranks / self.nnodes).max(1)
    }

    /// Achieved per-GPU intra-node bandwidth, GB/s.
    fn intra_eff(&self) -> f64 {
        self.intra_bw * self.cluster.eff(self.intra_class)
    }

    /// Achieved network bandwidth of one node, GB/s.
    fn node_net_eff(&self) -> f64 {
        self.cluster.node_net_gb_s(self.nnodes) * self.cluster.efficiency.net
    }

    /// Achieved bandwidth of the NIC serving one GPU, GB/s.
    fn gpu_nic_eff(&self) -> f64 {
        // A GPU drives one NIC, or several when the node has more NICs than ranks.
        let nics = self.cluster.nics.per_node.max(1) as f64;
        self.node_net_eff() / nics.min(self.ppn() as f64).max(1.0)
    }

    /// The highest algorithm bandwidth the cluster's links allow for an
    /// algorithm, GB/s, and the link class that sets it. In-network reductions
    /// (NVLS, CollNet) move each buffer once per direction; everything else is
    /// bounded by nccl-tests' bus convention (busbw ≤ bottleneck link).
    pub fn ceiling_algbw(&self, kind: OpKind, algo: Option<Algorithm>) -> (f64, LinkClass) {
        let n = self.nranks;
        let bf = bus_factor(kind, n).max(1e-9);
        let in_network = matches!(algo, Some(Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::CollNetDirect | Algorithm::CollNetChain));
        let mut best = (f64::INFINITY, self.intra_class);
        if self.ppn() > 1 {
            let intra = self.intra_eff();
            let v = if in_network { intra } else { intra / bf };
            best = (v, self.intra_class);
        }
        if self.nnodes > 1 {
            let node = self.node_net_eff();
            let ppn = self.ppn() as f64;
            let v = match kind {
                OpKind::AllToAll => {
                    let off_node = (n as f64 - ppn) / n as f64;
                    node / (ppn * off_node).max(1e-9)
                }
                OpKind::Send | OpKind::Recv | OpKind::SendRecv => self.gpu_nic_eff(),
                OpKind::AllReduce if matches!(algo, Some(Algorithm::Tree | Algorithm::NvlsTree)) => node,
                _ if in_network => node,
                _ => node / bf,
            };
            if v < best.0 {
                best = (v, LinkClass::Net);
            }
        }
        best
    }

    /// Predicts one call of nccl-tests `size_bytes`.
    pub fn predict(&self, kind: OpKind, size_bytes: u64) -> Prediction {
        let n = self.nranks;
        if n <= 1 {
            return Prediction {
                kind,
                size_bytes,
                algo: None,
                proto: None,
                n_channels: 0,
                time_us: 0.0,
                algbw_gb_s: 0.0,
                busbw_gb_s: 0.0,
                nccl_time_us: None,
                bottleneck: self.intra_class,
            };
        }
        let (time_us, choice) = match kind {
            OpKind::AllReduce | OpKind::AllGather | OpKind::ReduceScatter | OpKind::Broadcast | OpKind::Reduce => {
                let tb = tuner_bytes(kind, self.per_rank_bytes(kind, size_bytes), n);
                match self.table.choose(kind, tb) {
                    Some(c) => (self.collective_time(kind, tb, &c), Some(c)),
                    None => (self.p2p_time(kind, size_bytes), None),
                }
            }
            _ => (self.p2p_time(kind, size_bytes), None),
        };
        let (_, bottleneck) = self.ceiling_algbw(kind, choice.map(|c| c.algo));
        let algbw = if time_us > 0.0 { size_bytes as f64 / (time_us * 1e3) } else { 0.0 };
        Prediction {
            kind,
            size_bytes,
            algo: choice.map(|c| c.algo),
            proto: choice.map(|c| c.proto),
            n_channels: choice.map_or(self.table.n_channels, |c| c.n_channels),
            time_us,
            algbw_gb_s: algbw,
            busbw_gb_s: algbw * bus_factor(kind, n),
            nccl_time_us: choice.map(|c| c.time_us),
            bottleneck,
        }
    }

    fn per_rank_bytes(&self, kind: OpKind, size: u64) -> u64 {
        match kind {
            OpKind::AllGather | OpKind::ReduceScatter => size / self.nranks.max(1) as u64,
            _ => size,
        }
    }

    /// Time of a tuned collective: NCCL's latency and bandwidth (with its tree
    /// correction) for the chosen algorithm and protocol, the bandwidth scaled
    /// to what the bottleneck link class achieves and bounded by the ceiling.
    fn collective_time(&self, kind: OpKind, tuner_bytes: u64, c: &Choice) -> f64 {
        let Some((lat, bw_model, _plateau)) = self.table.algo_lat_bw(kind, c.algo, c.proto, tuner_bytes) else {
            return c.time_us;
        };
        let lat = self.physical_latency(kind, c.algo, c.proto, lat);
        if tuner_bytes == 0 {
            return lat;
        }
        let class = if self.nnodes > 1 { LinkClass::Net } else { self.intra_class };
        // The ceiling is in nccl-tests' algbw (size / time); the tuner's bytes
        // are the whole buffer, which for AllGather/ReduceScatter is the size.
        let (ceiling, _) = self.ceiling_algbw(kind, Some(c.algo));
        let bw = (bw_model * self.cluster.eff(class)).min(ceiling);
        lat + tuner_bytes as f64 / (1000.0 * bw)
    }

    /// NCCL's latency as calls measure it: a launch cost, NCCL's figure (without
    /// its ring-plateau penalty, which only ranks algorithms) scaled per protocol
    /// family, plus what a slower network than the InfiniBand NCCL's constants
    /// assume adds on every inter-node step.
    fn physical_latency(&self, kind: OpKind, algo: Algorithm, proto: Protocol, tuner_lat: f64) -> f64 {
        let mut tuner_lat = tuner_lat;
        if matches!(kind, OpKind::Broadcast | OpKind::Reduce) && algo == Algorithm::Ring {
            tuner_lat += self.chain_hops_us(proto);
        }
        let e = &self.cluster.efficiency;
        let scale = if proto == Protocol::Simple { e.latency_scale_simple } else { e.latency_scale };
        let mut lat = e.launch_us + tuner_lat * scale;
        if self.nnodes > 1 {
            let extra = (self.cluster.net_latency_us(self.nnodes) - IB_LATENCY_US).max(0.0);
            let nn = self.nnodes as f64;
            let steps = match algo {
                Algorithm::Ring if kind == OpKind::AllReduce => 2.0 * (nn - 1.0),
                Algorithm::Ring => nn - 1.0,
                _ => 2.0 * nn.log2().ceil().max(1.0),
            };
            lat += extra * steps;
        }
        lat
    }

    /// What a chained Broadcast/Reduce's latency lacks in NCCL's tuner, µs (NCCL's
    /// units, before scaling): when its rings share channels NCCL charges one hop,
    /// but the data still crosses all n − 1 hops of the chain before the last rank
    /// has it, each at NCCL's per-step latency for that hop's hardware and the
    /// chosen protocol (Simple waits for a whole step at every hop, so its hops cost
    /// several times LL's). When the rings do not share channels NCCL already
    /// charges every step.
    fn chain_hops_us(&self, proto: Protocol) -> f64 {
        if !self.ring_same_channels || self.nranks < 2 {
            return 0.0;
        }
        let hw = hw_lat(Epoch::of(self.table.version));
        let (ring, p) = (algo_index(Algorithm::Ring), proto_index(proto));
        let intra_hw = if self.intra_class == LinkClass::NvLink { HW_NVLINK } else { HW_PCI };
        let hops = (self.nranks - 1) as f64;
        let inter_hops = (self.nnodes.saturating_sub(1) as f64).min(hops);
        let charged = hw[if self.nnodes > 1 { HW_NET } else { intra_hw }][ring][p];
        let crossed = (hops - inter_hops) * hw[intra_hw][ring][p] + inter_hops * hw[HW_NET][ring][p];
        (crossed - charged).max(0.0)
    }

    /// AllToAll and Send/Recv: grouped point-to-point transfers on all channels.
    ///
    /// Within a node the call's fixed cost is host time (see [`Predictor::p2p_host_us`]) plus
    /// one device step: NCCL's NVLink ring step with Simple (3.4 µs in NCCL's units, the
    /// figure this formula always used within a node, PCIe included), scaled like every
    /// latency; the peers proceed in parallel on their channels.
    /// superbench's alltoall_perf (one thread, 8 GPUs) fits it: flat at the 87 µs of host
    /// time up to 2 MiB, then host time + bytes at 8-16 MiB leave 0-8 µs for the device.
    /// Across nodes it keeps the per-peer handshake form (no small-size inter-node table
    /// to split it).
    fn p2p_time(&self, kind: OpKind, size: u64) -> f64 {
        let n = self.nranks as f64;
        let net = self.nnodes > 1;
        let peers = match kind {
            OpKind::AllToAll | OpKind::Gather | OpKind::Scatter => n - 1.0,
            _ => 1.0,
        };
        let e = &self.cluster.efficiency;
        let lat = if net {
            // Group setup as a tuned collective's base, one handshake per peer.
            let base = 8.4 + self.cluster.net_latency_us(self.nnodes) * 2.0;
            e.launch_us + (base + peers * 6.0) * e.latency_scale
        } else {
            self.p2p_host_us(kind) + 3.4 * e.latency_scale
        };
        let (ceiling, _) = self.ceiling_algbw(kind, None);
        let wire = match kind {
            OpKind::AllToAll | OpKind::Gather | OpKind::Scatter => size as f64,
            _ => size as f64,
        };
        lat + wire / (1000.0 * ceiling)
    }

    /// Host time of a grouped point-to-point call within a node, µs: per GPU the thread
    /// drives, a call ([`HOST_CALL_US`]) and each of its Sends and Recvs ([`HOST_P2P_OP_US`];
    /// an AllToAll posts one of each per peer).
    pub fn p2p_host_us(&self, kind: OpKind) -> f64 {
        let ops = match kind {
            OpKind::AllToAll | OpKind::Gather | OpKind::Scatter => 2.0 * (self.nranks as f64 - 1.0),
            _ => 1.0,
        };
        self.gpus_per_thread as f64 * (HOST_CALL_US + HOST_P2P_OP_US * ops)
    }

    /// An nccl-tests sweep: `min` to `max` bytes, multiplied by `factor`.
    pub fn sweep(&self, kind: OpKind, min: u64, max: u64, factor: u64) -> Vec<Prediction> {
        let mut out = Vec::new();
        let mut s = min.max(1);
        while s <= max {
            out.push(self.predict(kind, s));
            let next = s.saturating_mul(factor.max(2));
            if next == s {
                break;
            }
            s = next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::{preset, PRESETS};

    /// Predicted busbw never exceeds what the cluster's links carry for the
    /// chosen algorithm (nccl-tests' bus convention; in-network reductions
    /// may move each buffer once per direction).
    #[test]
    fn never_above_the_bottleneck() {
        for (name, _) in PRESETS {
            let c = preset(name).unwrap();
            for nodes in [1u32, 2, 3, 16] {
                let ranks = nodes * c.gpus_per_node;
                let p = Predictor::new(&c, ranks, nodes, DEFAULT_VERSION, NcclEnv::default());
                for kind in [OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::Broadcast, OpKind::Reduce, OpKind::AllToAll, OpKind::SendRecv] {
                    for s in (3..34).map(|e| 1u64 << e) {
                        let r = p.predict(kind, s);
                        let (ceil, _) = p.ceiling_algbw(kind, r.algo);
                        assert!(r.algbw_gb_s <= ceil * 1.000001, "{name} {nodes} nodes {kind:?} {s}: {} > {ceil}", r.algbw_gb_s);
                        assert!(r.time_us > 0.0 && r.busbw_gb_s.is_finite(), "{name} {nodes} {kind:?} {s}: {r:?}");
                    }
                }
            }
        }
    }

    /// A chained Reduce/Broadcast pays NCCL's per-hop latency of its protocol at
    /// every hop of the chain: four more NVLink hops cost 4 × 3.4 µs (Simple) or
    /// 4 × 0.6 µs (LL) in NCCL's units, scaled like the rest of the latency.
    #[test]
    fn chained_reduce_pays_every_hop_at_its_protocols_rate() {
        let c = preset("dgx-a100").unwrap();
        let lat = |ranks: u32, proto: &str, kind: OpKind| {
            let env = NcclEnv { proto: Some(proto.into()), algo: Some("Ring".into()), ..NcclEnv::default() };
            let p = Predictor::new(&c, ranks, 1, DEFAULT_VERSION, env);
            let r = p.predict(kind, 8);
            assert_eq!(r.proto.map(|p| p.name()), Some(proto.to_ascii_uppercase()).as_deref(), "{proto}");
            r.time_us
        };
        let e = &c.efficiency;
        for kind in [OpKind::Reduce, OpKind::Broadcast] {
            let simple = lat(8, "Simple", kind) - lat(4, "Simple", kind);
            let ll = lat(8, "LL", kind) - lat(4, "LL", kind);
            assert!((simple - 4.0 * 3.4 * e.latency_scale_simple).abs() < 1e-3, "{kind:?} Simple: {simple}");
            assert!((ll - 4.0 * 0.6 * e.latency_scale).abs() < 1e-3, "{kind:?} LL: {ll}");
        }
    }

    /// An 8-rank AllToAll within a node: its fixed cost is host time for each GPU the thread
    /// drives (a call and 14 Sends/Recvs) plus one device step, so nccl-tests with `nGpus 8`
    /// (superbench: 87 us per call) and a process per GPU differ by the host part only.
    #[test]
    fn p2p_host_time_scales_with_gpus_per_thread() {
        let c = preset("dgx-a100").unwrap();
        let one = Predictor::new(&c, 8, 1, DEFAULT_VERSION, NcclEnv::default());
        let eight = one.clone().with_gpus_per_thread(8);
        let host1 = HOST_CALL_US + 14.0 * HOST_P2P_OP_US;
        assert!((one.p2p_host_us(OpKind::AllToAll) - host1).abs() < 1e-9);
        let (t1, t8) = (one.predict(OpKind::AllToAll, 1024).time_us, eight.predict(OpKind::AllToAll, 1024).time_us);
        assert!((t8 - t1 - 7.0 * host1).abs() < 1e-6, "{t1} {t8}");
        assert!((80.0..100.0).contains(&t8), "superbench measured 87 us: {t8}");
        assert!(t1 < 20.0, "one GPU per thread: {t1}");
    }

    #[test]
    fn single_rank_moves_nothing() {
        let c = preset("dgx-a100").unwrap();
        let p = Predictor::new(&c, 1, 1, DEFAULT_VERSION, NcclEnv::default());
        assert_eq!(p.predict(OpKind::AllReduce, 1 << 20).busbw_gb_s, 0.0);
    }
}

