//! NCCL's tuner, re-implemented: from a communicator's shape and its topology
//! search results ([`Graph`], one per algorithm) to the latency/bandwidth
//! table of every collective × algorithm × protocol (`ncclTopoTuneModel`),
//! then per call the algorithm, protocol, channel and thread count NCCL picks
//! and the time its model predicts (`ncclTopoGetAlgoTime`, `topoGetAlgoInfo`).
//!
//! The graphs come from a log (`Pattern … nChannels … bw …` lines, exact) or
//! from [`crate::graph::graphs_for`] (an emulation of the search on a
//! [`crate::cluster::Cluster`]). Environment overrides are in [`NcclEnv`].

mod enable;
pub mod logged;
pub mod tables;

use commlens_core::tuning::SearchGraph;
use commlens_core::{Algorithm, LinkKind, NcclVersion, OpKind, Protocol};
use serde::Serialize;

use crate::cluster::CpuVendor;
use enable::apply_enables;
use tables::*;

/// NCCL's function order in its tables.
pub const FUNCS: [OpKind; 5] =
    [OpKind::Broadcast, OpKind::Reduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce];
pub const ALGOS: [Algorithm; N_ALGOS] = Algorithm::ALL;
pub const PROTOS: [Protocol; N_PROTOS] = Protocol::ALL;

pub fn func_index(k: OpKind) -> Option<usize> {
    FUNCS.iter().position(|&f| f == k)
}
pub fn algo_index(a: Algorithm) -> usize {
    ALGOS.iter().position(|&x| x == a).unwrap_or(1)
}
pub fn proto_index(p: Protocol) -> usize {
    PROTOS.iter().position(|&x| x == p).unwrap_or(2)
}

/// One topology-search result, as the tuner reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Graph {
    pub pattern: u8,
    pub n_channels: u32,
    pub bw_intra: f64,
    pub bw_inter: f64,
    pub type_intra: LinkKind,
    pub type_inter: LinkKind,
    pub same_channels: bool,
    /// Network latency the net plugin reports (`graph->latencyInter`), µs.
    pub latency_inter: f64,
}

impl From<&SearchGraph> for Graph {
    fn from(g: &SearchGraph) -> Graph {
        Graph {
            pattern: g.pattern,
            n_channels: g.n_channels,
            bw_intra: g.bw_intra,
            bw_inter: g.bw_inter,
            type_intra: g.type_intra,
            type_inter: g.type_inter,
            same_channels: g.same_channels,
            latency_inter: 0.0,
        }
    }
}

/// NCCL environment variables the tuner honours.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NcclEnv {
    /// `NCCL_ALGO` (`Ring,Tree`, `^NVLS`, `allreduce:tree;allgather:ring`).
    pub algo: Option<String>,
    /// `NCCL_PROTO` (`Simple`, `^LL128`).
    pub proto: Option<String>,
    pub min_nchannels: Option<u32>,
    pub max_nchannels: Option<u32>,
    /// `NCCL_NVLS_ENABLE=0` disables NVLS and NVLS-tree.
    pub nvls_enable: Option<bool>,
    /// `NCCL_P2P_NET_CHUNKSIZE`, bytes (P2P over the network; default 128 KiB).
    pub p2p_net_chunksize: Option<u64>,
    /// `NCCL_BUFFSIZE`, bytes (Simple protocol buffer per channel; default 4 MiB).
    pub buffsize: Option<u64>,
}

impl NcclEnv {
    /// Reads the variables from a `NAME=VALUE` lookup (the process environment or a log's env lines).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> NcclEnv {
        let num = |k: &str| get(k).and_then(|v| v.trim().parse::<u64>().ok());
        NcclEnv {
            algo: get("NCCL_ALGO"),
            proto: get("NCCL_PROTO"),
            min_nchannels: num("NCCL_MIN_NCHANNELS").map(|v| v as u32),
            max_nchannels: num("NCCL_MAX_NCHANNELS").map(|v| v as u32),
            nvls_enable: num("NCCL_NVLS_ENABLE").map(|v| v != 0),
            p2p_net_chunksize: num("NCCL_P2P_NET_CHUNKSIZE"),
            buffsize: num("NCCL_BUFFSIZE"),
        }
    }
}

/// What the tuner knows about a communicator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommShape {
    pub nranks: u32,
    pub nnodes: u32,
    /// Lowest and highest compute capability × 10 among the ranks.
    pub min_sm: u32,
    pub max_sm: u32,
    pub cpu: CpuVendor,
    /// NVLS usable (NVSwitch gen3+, sm90+, CUDA 12.1+).
    pub nvls_support: bool,
    /// CollNet (SHARP) plugin present.
    pub collnet_support: bool,
    /// NVSwitches in the node (CollNet-direct needs them).
    pub nvs_count: u32,
    /// `comm->nChannels` (ring/tree channels after duplication).
    pub n_channels: u32,
    /// `comm->nvlsChannels`.
    pub nvls_channels: u32,
}

/// Inputs of [`tune`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuneInput {
    pub version: NcclVersion,
    pub shape: CommShape,
    /// One graph per algorithm (index as [`ALGOS`]); `None` when not searched.
    pub graphs: [Option<Graph>; N_ALGOS],
    pub env: NcclEnv,
}

/// The tuner's tables for one communicator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuneTable {
    pub version: NcclVersion,
    pub nranks: u32,
    pub nnodes: u32,
    pub min_sm: u32,
    /// Latency (µs) and algorithm bandwidth (GB/s, 0 = disabled) per function × algorithm × protocol.
    pub lat: [[[f64; N_PROTOS]; N_ALGOS]; 5],
    pub bw: [[[f64; N_PROTOS]; N_ALGOS]; 5],
    pub max_threads: [[u32; N_PROTOS]; N_ALGOS],
    pub thread_thresholds: [[u64; N_PROTOS]; N_ALGOS],
    pub n_channels: u32,
    pub nvls_channels: u32,
    pub env: NcclEnv,
}

/// NCCL's choice for one call, and what its model says it costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Choice {
    pub algo: Algorithm,
    pub proto: Protocol,
    pub n_channels: u32,
    pub n_threads: u32,
    /// NCCL's own time estimate, µs.
    pub time_us: f64,
}

fn compcap_index(sm: u32, epoch: Epoch) -> usize {
    if sm >= 100 && epoch == Epoch::Modern {
        3
    } else if sm >= 90 {
        2
    } else if sm >= 80 {
        1
    } else {
        0
    }
}

fn log2i(v: u64) -> i32 {
    if v == 0 {
        -1
    } else {
        63 - v.leading_zeros() as i32
    }
}

/// `ncclTopoTuneModel`: the latency/bandwidth table of a communicator.
pub fn tune(input: &TuneInput) -> TuneTable {
    let epoch = Epoch::of(input.version);
    let s = &input.shape;
    let nranks = s.nranks.max(1);
    let nnodes = s.nnodes.clamp(1, nranks);
    let mut t = TuneTable {
        version: input.version,
        nranks,
        nnodes,
        min_sm: s.min_sm,
        lat: [[[0.0; N_PROTOS]; N_ALGOS]; 5],
        bw: [[[0.0; N_PROTOS]; N_ALGOS]; 5],
        max_threads: [[0; N_PROTOS]; N_ALGOS],
        thread_thresholds: [[0; N_PROTOS]; N_ALGOS],
        n_channels: s.n_channels.max(1),
        nvls_channels: s.nvls_channels,
        env: input.env.clone(),
    };
    let ring = input.graphs[1].clone().unwrap_or(Graph {
        pattern: 4,
        n_channels: 1,
        bw_intra: 1.0,
        bw_inter: 1.0,
        type_intra: LinkKind::Sys,
        type_inter: LinkKind::Sys,
        same_channels: true,
        latency_inter: 0.0,
    });
    let simple_ring_threads = if ring.bw_intra * ring.n_channels as f64 <= PCI_BW { 256 } else { SIMPLE_MAX_NTHREADS };
    for a in 0..N_ALGOS {
        t.max_threads[a] = [LL_MAX_NTHREADS, LL128_MAX_NTHREADS, MAX_NTHREADS];
        t.thread_thresholds[a] = THREAD_THRESHOLDS;
    }
    t.max_threads[1][2] = simple_ring_threads;
    t.max_threads[0][2] = SIMPLE_MAX_NTHREADS;
    t.thread_thresholds[1][0] *= nranks as u64;
    t.thread_thresholds[2][2] = 512;
    t.thread_thresholds[3][2] = 512;
    if nranks <= 1 {
        return t;
    }

    let cc = compcap_index(s.min_sm, epoch);
    let idx2 = if nnodes <= 2 { nnodes as usize - 1 } else { 2 };
    let idx1 = if nnodes == 1 { cc } else if s.cpu == CpuVendor::Amd { 1 } else { 0 };
    let ll_max = ll_max_bws(epoch)[idx1][idx2];
    let tree_max = PER_CH_MAX_TREE_BWS[cc][idx2];
    let ring_ll128_max = PER_CH_MAX_RING_LL128_BWS[cc][idx2];
    let tree_ll128_max = PER_CH_MAX_TREE_LL128_BWS[cc][idx2];
    let base = base_lat(epoch);
    let mut hw = hw_lat(epoch);
    if s.cpu == CpuVendor::Power {
        hw[HW_PCI][0][2] = hw[HW_PCI][1][2];
    }
    let ppn = nranks as f64 / nnodes as f64;
    let ppn_i = (nranks / nnodes) as f64;
    let net_overhead = if s.cpu == CpuVendor::Amd { 2.0 } else { 1.0 };

    for (f, &func) in FUNCS.iter().enumerate() {
        let nsteps = match func {
            OpKind::AllReduce => 2 * (nranks - 1),
            OpKind::AllGather | OpKind::ReduceScatter => nranks - 1,
            _ => nranks,
        } as f64;
        for a in 0..N_ALGOS {
            let algo = ALGOS[a];
            let Some(g) = input.graphs[a].as_ref().or(if algo == Algorithm::Pat { input.graphs[1].as_ref() } else { None })
            else {
                continue;
            };
            if !algo_serves(epoch, func, algo) {
                continue;
            }
            let intra_hw = if g.type_intra == LinkKind::Nvl { HW_NVLINK } else { HW_PCI };
            let hw_a = if nnodes == 1 { intra_hw } else { HW_NET };
            for p in 0..N_PROTOS {
                if matches!(algo, Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::Pat) && p != 2 {
                    continue;
                }
                let collnet = matches!(algo, Algorithm::CollNetDirect | Algorithm::CollNetChain);
                let mut bw = if nnodes <= 2 || collnet { g.bw_intra } else { g.bw_inter };
                if algo == Algorithm::Nvls {
                    bw = if func == OpKind::AllReduce {
                        g.bw_intra.min(g.bw_inter)
                    } else {
                        (g.bw_intra * (ppn - 1.0) / ppn).min(g.bw_inter * 0.9)
                    };
                }
                if algo == Algorithm::NvlsTree {
                    bw = g.bw_intra.min(if nnodes <= 2 { g.bw_inter } else { g.bw_inter / 2.0 });
                }
                let nch = g.n_channels as f64;
                let mut bus = nch * bw;
                if epoch == Epoch::Legacy {
                    bus = legacy_refine(bus, func, f, algo, p, s, nnodes, ppn, nch);
                } else {
                    if algo == Algorithm::Ring && p == 0 {
                        let factor = if epoch == Epoch::Modern {
                            0.5
                        } else if nnodes > 1 || matches!(func, OpKind::AllReduce | OpKind::Reduce) {
                            0.25
                        } else {
                            1.0 / 3.0
                        };
                        bus = ll_max.min(bus * factor);
                    }
                    if algo == Algorithm::Ring && p == 1 {
                        bus = (bus * 0.92).min(nch * ring_ll128_max);
                    }
                    if algo == Algorithm::Tree && func == OpKind::AllReduce {
                        bus = (bus * 0.92).min(nch * tree_max);
                    }
                    if algo == Algorithm::Tree && p == 0 {
                        bus = (bus / 3.8).min(ll_max);
                    }
                    if algo == Algorithm::Tree && p == 1 {
                        let k = if nnodes == 1 { 7.0 / 9.0 } else { 120.0 / 128.0 };
                        bus = (bus * k).min(nch * tree_ll128_max);
                    }
                    if algo == Algorithm::Tree && g.pattern == 3 {
                        bus *= 0.85;
                    }
                    if algo == Algorithm::Pat {
                        bus *= 0.75;
                    }
                    if collnet && p != 2 {
                        bus = 0.0;
                    }
                    if algo == Algorithm::CollNetDirect && p == 2 {
                        if matches!(func, OpKind::AllGather | OpKind::ReduceScatter) {
                            bus = ppn * bw;
                        } else {
                            let mut factor = ppn / nch;
                            factor -= (factor - 1.0) / 2.0;
                            bus /= factor;
                            if s.min_sm >= 90 {
                                bus *= 0.85;
                            }
                        }
                    }
                }
                // Bus bandwidth to algorithm bandwidth.
                if !(algo != Algorithm::Ring && matches!(func, OpKind::AllGather | OpKind::ReduceScatter)) {
                    let ratio = match algo {
                        Algorithm::Ring => nranks as f64 / nsteps,
                        Algorithm::Nvls | Algorithm::NvlsTree => {
                            if input.version >= NcclVersion::new(2, 27, 0) {
                                nranks as f64 / nsteps
                            } else {
                                5.0 / 6.0
                            }
                        }
                        _ => 0.5,
                    };
                    bus *= ratio;
                }
                t.bw[f][a][p] = bus;

                // Latencies.
                let mut lat = base[a][p];
                let mut intra_lat = hw[intra_hw][a][p];
                let mut inter_lat = if ppn == 1.0 && epoch != Epoch::Legacy { hw[HW_NET][0][p] } else { hw[HW_NET][a][p] };
                if epoch != Epoch::Legacy {
                    inter_lat += g.latency_inter;
                    if p == 2 {
                        inter_lat += g.latency_inter;
                    }
                } else if nnodes > 1 && p == 0 {
                    intra_lat *= 1.8;
                }
                let log_nodes = log2i(nnodes as u64).max(0) as f64;
                match algo {
                    Algorithm::Ring => {
                        let mut l = hw[hw_a][a][p];
                        if matches!(func, OpKind::Reduce | OpKind::Broadcast) {
                            if g.same_channels {
                                lat += l;
                            } else {
                                if p == 2 {
                                    l = hw[hw_a][0][p];
                                }
                                lat += nsteps * l;
                            }
                        } else {
                            if epoch != Epoch::Legacy && nnodes > 1 {
                                let ovh = if p == 2 { 3.0 * net_overhead } else { net_overhead };
                                intra_lat = intra_lat.max(ovh);
                            }
                            let inter_steps = if nnodes == 1 {
                                0.0
                            } else if func == OpKind::AllReduce {
                                2.0 * (nnodes - 1) as f64
                            } else {
                                (nnodes - 1) as f64
                            };
                            lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
                        }
                    }
                    Algorithm::Tree => {
                        if func == OpKind::AllReduce || epoch == Epoch::Legacy {
                            lat += 2.0 * ((ppn_i - 1.0) * intra_lat + log_nodes * inter_lat);
                        }
                    }
                    Algorithm::CollNetDirect => {
                        lat += 2.0 * ((ppn_i - 1.0).min(1.0) * intra_lat + (ppn_i - 1.0) * 0.4) + inter_lat;
                    }
                    Algorithm::CollNetChain => lat += 2.0 * (ppn_i - 1.0) * intra_lat + inter_lat,
                    Algorithm::Nvls => {
                        lat = intra_lat;
                        if nnodes > 1 {
                            lat += inter_lat;
                        }
                    }
                    Algorithm::NvlsTree => lat += intra_lat + 2.0 * log_nodes * inter_lat,
                    Algorithm::Pat => {
                        lat = 8.0 + log_nodes * (inter_lat / 3.5) + nranks as f64 * 2.8;
                    }
                }
                t.lat[f][a][p] = lat;
            }
        }
    }
    apply_enables(&mut t, input, epoch);
    t
}

/// Which algorithms a function may use in an epoch.
fn algo_serves(epoch: Epoch, func: OpKind, algo: Algorithm) -> bool {
    if epoch == Epoch::Legacy {
        return matches!(algo, Algorithm::Tree | Algorithm::Ring | Algorithm::CollNetDirect)
            && (func == OpKind::AllReduce || algo == Algorithm::Ring);
    }
    match func {
        OpKind::Broadcast | OpKind::Reduce => algo == Algorithm::Ring,
        OpKind::AllGather | OpKind::ReduceScatter => {
            matches!(algo, Algorithm::Ring | Algorithm::Nvls | Algorithm::CollNetDirect | Algorithm::Pat)
        }
        _ => algo != Algorithm::Pat,
    }
}

#[allow(clippy::too_many_arguments)]
fn legacy_refine(
    mut bus: f64,
    func: OpKind,
    f: usize,
    algo: Algorithm,
    p: usize,
    s: &CommShape,
    nnodes: u32,
    ppn: f64,
    nch: f64,
) -> f64 {
    let cc80 = s.min_sm == 80 && s.max_sm == 80;
    if cc80 {
        bus = bus.min(235.0);
    }
    if algo == Algorithm::Ring && p == 0 {
        bus *= if nnodes > 1 || matches!(func, OpKind::AllReduce | OpKind::Reduce) { 0.25 } else { 1.0 / 3.0 };
    }
    if algo == Algorithm::Ring && p == 1 {
        bus = (bus * if ppn < 2.0 { 0.7 } else { 0.92 }).min(LEGACY_LL128_MAX_BW_PER_CH[f] * nch);
    }
    let max_tree = if nnodes > 2 {
        if cc80 && p == 1 { 105.0 } else { 80.0 }
    } else if cc80 && p == 1 {
        130.0
    } else {
        110.0
    };
    if algo == Algorithm::Tree {
        bus = (bus * 0.9).min(max_tree);
        if p == 0 {
            bus /= 3.8;
        }
        if p == 1 {
            let k = if nnodes == 1 { 7.0 / 9.0 } else { 0.915 };
            bus = (bus * k).min(LEGACY_LL128_MAX_BW_PER_CH[f] * nch * 7.0 / 9.0);
        }
    }
    if algo == Algorithm::CollNetDirect {
        bus *= 0.9;
        if p == 0 {
            bus /= 6.0;
        }
        if p == 1 {
            bus = 0.0;
        }
    }
    bus
}

/// Bytes NCCL's tuner sees for a call: the whole buffer (`count × size × nranks`
/// for AllGather/ReduceScatter, whose count is per rank).
pub fn tuner_bytes(kind: OpKind, bytes_per_rank: u64, nranks: u32) -> u64 {
    match kind {
        OpKind::AllGather | OpKind::ReduceScatter => bytes_per_rank.saturating_mul(nranks as u64),
        _ => bytes_per_rank,
    }
}

impl TuneTable {
    /// `ncclTopoGetAlgoTime` for one pipelined call; `None` when disabled.
    pub fn algo_time_us(&self, kind: OpKind, algo: Algorithm, proto: Protocol, nbytes: u64) -> Option<f64> {
        let (lat, bw, plateau) = self.algo_lat_bw(kind, algo, proto, nbytes)?;
        Some(lat * plateau + nbytes as f64 / (1000.0 * bw))
    }

    /// The parts of NCCL's time for a call: latency (µs, before the ring
    /// plateau), bandwidth (GB/s, after the tree correction) and the ring
    /// plateau factor (1 when it does not apply); `None` when disabled.
    pub fn algo_lat_bw(&self, kind: OpKind, algo: Algorithm, proto: Protocol, nbytes: u64) -> Option<(f64, f64, f64)> {
        let f = func_index(kind)?;
        let (a, p) = (algo_index(algo), proto_index(proto));
        let mut bw = self.bw[f][a][p];
        let lat = self.lat[f][a][p];
        if bw <= 0.0 {
            return None;
        }
        let epoch = Epoch::of(self.version);
        let log_size = log2i(nbytes >> 6);
        if algo == Algorithm::Tree && (kind == OpKind::AllReduce || epoch == Epoch::Legacy) && log_size >= 0 {
            let i = log_size as usize;
            if epoch == Epoch::Legacy {
                if i < 22 {
                    bw *= LEGACY_TREE_CORRECTION[p][i];
                }
            } else if i < 23 {
                bw *= TREE_CORRECTION[p][i];
            }
        }
        let mut plateau = 1.0;
        if algo == Algorithm::Ring && proto == Protocol::Simple && self.nnodes > 1 && kind == OpKind::AllReduce {
            let on = if epoch == Epoch::Legacy {
                nbytes as f64 >= self.nranks as f64 / 16.0 * 65536.0
            } else {
                nbytes / (self.n_channels as u64 * self.nranks as u64).max(1) >= 64
            };
            if on {
                plateau = if self.min_sm < 80 || epoch == Epoch::Legacy { 1.9 } else { 1.4 };
            }
        }
        Some((lat, bw, plateau))
    }

    /// The algorithm and protocol NCCL picks for `nbytes` (tuner bytes, see
    /// [`tuner_bytes`]), the channels and threads it runs them on, and its time.
    pub fn choose(&self, kind: OpKind, nbytes: u64) -> Option<Choice> {
        let mut best: Option<(f64, usize, usize)> = None;
        for a in 0..N_ALGOS {
            for p in 0..N_PROTOS {
                if let Some(t) = self.algo_time_us(kind, ALGOS[a], PROTOS[p], nbytes) {
                    if best.is_none_or(|b| t < b.0) {
                        best = Some((t, a, p));
                    }
                }
            }
        }
        let (time_us, a, p) = best?;
        let (n_channels, n_threads) = self.channels_threads(ALGOS[a], PROTOS[p], nbytes);
        Some(Choice { algo: ALGOS[a], proto: PROTOS[p], n_channels, n_threads, time_us })
    }

    /// `topoGetAlgoInfo`'s channel and thread tuning.
    pub fn channels_threads(&self, algo: Algorithm, proto: Protocol, nbytes: u64) -> (u32, u32) {
        let (a, p) = (algo_index(algo), proto_index(proto));
        let mut nc = self.n_channels.max(1);
        if let Some(max) = self.env.max_nchannels {
            nc = nc.min(max.max(1));
        }
        let mut nt = self.max_threads[a][p].max(32);
        let thr = self.thread_thresholds[a][p].max(1);
        if matches!(algo, Algorithm::Nvls | Algorithm::NvlsTree) {
            nc = self.nvls_channels.max(1);
        } else {
            while nbytes < nc as u64 * nt as u64 * thr {
                if nc >= 2 {
                    nc -= 1;
                } else if nt % 128 == 0 {
                    nt /= 2;
                } else {
                    break;
                }
            }
        }
        if let Some(min) = self.env.min_nchannels {
            nc = nc.max(min.min(self.n_channels.max(min)));
        }
        if proto == Protocol::Simple {
            match algo {
                Algorithm::Ring => nt += 32,
                Algorithm::Tree => nt += 4 * 32,
                _ => {}
            }
        }
        if nt / 32 < 3 {
            nt = 96;
        }
        (nc, nt)
    }
}
