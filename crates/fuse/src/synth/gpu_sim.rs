//! The simulation behind [`super::megatron`]: a CPU clock, a GPU
//! compute stream and one stream per communicator, emitting log records and
//! kernels with their true mapping, then applying drops and clock domains.
//!
//! Each collective: CPU overhead, one record (two on a 2:1 rank, 1–4 µs apart),
//! a launch call 1–3 µs later, a kernel that starts when its stream is free,
//! its input is computed and the launch latency has passed, and that ends when
//! every member of its communicator has started it plus this rank's transfer
//! time ([`super::world::run_world`] steps all ranks' programs together for that); blocking
//! ones hold the compute stream until they end. Each point-to-point group: one record per
//! Send/Recv sharing an `opCount`, one SendRecv kernel after the last record
//! (plus, sometimes, an unlogged one). AllReduce records sometimes have no
//! kernel. Kernel names sometimes say Generic or another protocol; records
//! sometimes lack the tuning line.

use super::megatron::{MegatronConfig, RankTrace};
use super::rng::Rng;
use super::world::group_of;
use crate::entry::{KernelEntry, KernelKind, LogEntry};
use commlens_core::{Algorithm, DataType, OpKind, Protocol, RedOp};

pub(super) const HOST_EPOCH_NS: i64 = 1_766_081_276_000_000_000;
pub(super) const TP: usize = 0;
pub(super) const PP: usize = 1;
pub(super) const DP: usize = 2;
pub(super) const MP: usize = 3;

pub(super) struct Comm {
    pub(super) ptr: u64,
    pub(super) stream_ptr: u64,
    pub(super) kernel_stream: u64,
    pub(super) op_count: u64,
    pub(super) free_at: i64,
    pub(super) bytes_per_ns: f64,
}

pub(super) struct Sim<'a> {
    pub(super) cfg: &'a MegatronConfig,
    pub(super) rng: Rng,
    pub(super) rank: usize,
    pub(super) batching: bool,
    pub(super) cpu: i64,
    pub(super) gpu: i64,
    pub(super) comms: Vec<Comm>,
    pub(super) logs: Vec<LogEntry>,
    pub(super) log_kernel: Vec<Option<usize>>,
    pub(super) kernels: Vec<KernelEntry>,
}

impl<'a> Sim<'a> {
    pub(super) fn new(cfg: &'a MegatronConfig, rank: usize) -> Sim<'a> {
        let rng = Rng::new(cfg.seed).fork(rank as u64 + 1);
        let comms = (0..4u64)
            .map(|c| Comm {
                ptr: 0x4470_0000 + 0x1_0000 * c + 0x100 * rank as u64,
                stream_ptr: 0x32dc_0000 + 0x1000 * c + 0x10 * rank as u64,
                kernel_stream: 7 + 8 * c,
                op_count: 0,
                free_at: 0,
                bytes_per_ns: if c == TP as u64 { 80.0 } else { 40.0 },
            })
            .collect();
        Sim {
            cfg,
            rng,
            rank,
            batching: cfg.batching && cfg.tp > 1 && rank % cfg.tp == 0,
            cpu: 0,
            gpu: 0,
            comms,
            logs: Vec::new(),
            log_kernel: Vec::new(),
            kernels: Vec::new(),
        }
    }

    pub(super) fn done(&self) -> bool {
        self.kernels.len() >= self.cfg.ops_per_rank
    }

    pub(super) fn us(&mut self, lo: i64, hi: i64) -> i64 {
        self.rng.between(lo * 1000, hi * 1000)
    }

    /// A stretch of compute: CPU launch cost, GPU run time.
    pub(super) fn compute(&mut self) {
        self.cpu += self.us(20, 90);
        let launch = self.us(4, 12);
        self.gpu = self.gpu.max(self.cpu + launch) + self.us(80, 400);
    }

    fn tune(&self, kind: OpKind, bytes: u64) -> (Option<Algorithm>, Option<Protocol>) {
        if kind.is_p2p() {
            return (None, None);
        }
        let proto = if bytes < 64 << 10 {
            Protocol::Ll
        } else if bytes < 2 << 20 {
            Protocol::Ll128
        } else {
            Protocol::Simple
        };
        let algo = if kind == OpKind::AllReduce && bytes < 256 << 10 {
            Algorithm::Tree
        } else {
            Algorithm::Ring
        };
        (Some(algo), Some(proto))
    }

    /// A collective's CPU side and its kernel up to its start: `None` when the
    /// rank is done or the record has no kernel; else the kernel waiting for
    /// its end ([`Self::complete`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn coll(
        &mut self,
        c: usize,
        kind: OpKind,
        dtype: DataType,
        redop: Option<RedOp>,
        count: u64,
        blocking: bool,
    ) -> Option<Pending> {
        self.cpu += self.us(5, 40);
        let bytes = count * dtype.size_bytes().unwrap_or(1);
        let (algo, proto) = self.tune(kind, bytes);
        let orphan = kind == OpKind::AllReduce && self.rng.chance(self.cfg.orphan_log_rate);
        let kernel = (!orphan).then_some(self.kernels.len());
        let copies = if self.batching { 2 } else { 1 };
        for copy in 0..copies {
            if copy == 1 {
                self.cpu += self.us(1, 4);
            }
            let missing_tune = self.rng.chance(self.cfg.missing_tune_rate);
            let comm = &mut self.comms[c];
            let entry = LogEntry {
                kind,
                dtype: Some(dtype),
                redop,
                bytes: Some(bytes),
                algo: algo.filter(|_| !missing_tune),
                proto: proto.filter(|_| !missing_tune),
                comm: comm.ptr,
                stream: Some(comm.stream_ptr),
                op_count: Some(comm.op_count),
                cpu_ts_ns: Some(self.cpu),
            };
            comm.op_count += 1;
            self.logs.push(entry);
            self.log_kernel.push(kernel);
        }
        if orphan {
            return None;
        }
        let launch_at = self.cpu + self.us(1, 3);
        self.cpu = launch_at + self.us(2, 6);
        let latency = self.us(3, 8);
        let ready = (launch_at + latency)
            .max(self.comms[c].free_at)
            .max(self.gpu);
        let start = ready + self.us(0, 3);
        let dur = self.us(6, 10) + (bytes as f64 / self.comms[c].bytes_per_ns) as i64;
        let reduce = matches!(kind, OpKind::AllReduce | OpKind::ReduceScatter);
        Some(Pending {
            c,
            kind,
            dtype: reduce.then_some(dtype),
            redop: redop.filter(|_| reduce),
            algo,
            proto,
            bytes,
            launch: launch_at,
            start,
            dur,
            blocking,
        })
    }

    /// Ends a collective's kernel at `end` (when the last member has
    /// arrived, plus its own transfer time).
    pub(super) fn complete(&mut self, p: Pending, end: i64) {
        self.comms[p.c].free_at = end;
        if p.blocking {
            self.gpu = self.gpu.max(end);
        }
        self.push_kernel(
            p.c,
            KernelKind::Op(p.kind),
            p.dtype,
            p.redop,
            p.algo,
            p.proto,
            p.bytes,
            p.launch,
            p.start,
            end,
        );
    }

    /// loss.item(): the CPU waits for all GPU work.
    pub(super) fn sync(&mut self) {
        let busy = self
            .comms
            .iter()
            .map(|c| c.free_at)
            .max()
            .unwrap_or(0)
            .max(self.gpu);
        self.cpu = self.cpu.max(busy) + self.us(50, 200);
    }

    /// One point-to-point group (skipped when `active` is false, e.g. no next stage).
    pub(super) fn p2p(&mut self, parts: &[(OpKind, u64)]) {
        self.cpu += self.us(5, 30);
        let kernel = Some(self.kernels.len());
        let comm_oc = self.comms[PP].op_count;
        self.comms[PP].op_count += 1;
        let mut bytes = 0;
        for &(kind, count) in parts {
            self.cpu += self.us(2, 6);
            let comm = &self.comms[PP];
            bytes += 2 * count;
            self.logs.push(LogEntry {
                kind,
                dtype: Some(DataType::Bfloat16),
                redop: None,
                bytes: Some(2 * count),
                algo: None,
                proto: None,
                comm: comm.ptr,
                stream: Some(comm.stream_ptr),
                op_count: Some(comm_oc),
                cpu_ts_ns: Some(self.cpu),
            });
            self.log_kernel.push(kernel);
        }
        let launch_at = self.cpu + self.us(2, 8);
        self.cpu = launch_at + self.us(2, 6);
        let latency = self.us(3, 8);
        let ready = (launch_at + latency)
            .max(self.comms[PP].free_at)
            .max(self.gpu);
        let start = ready + self.us(0, 150);
        let end = start + self.us(6, 10) + (bytes as f64 / self.comms[PP].bytes_per_ns) as i64;
        self.comms[PP].free_at = end;
        if parts.iter().any(|p| p.0 == OpKind::Recv) {
            self.gpu = self.gpu.max(end);
        }
        let kind = KernelKind::Op(OpKind::SendRecv);
        self.push_kernel(
            PP, kind, None, None, None, None, bytes, launch_at, start, end,
        );
        if self.rng.chance(self.cfg.orphan_kernel_rate) {
            let l2 = self.cpu + self.us(3, 10);
            self.cpu = l2 + self.us(2, 6);
            let s2 = end.max(l2 + latency) + self.us(2, 20);
            let e2 = s2 + self.us(6, 30);
            self.comms[PP].free_at = e2;
            self.push_kernel(PP, kind, None, None, None, None, 0, l2, s2, e2);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push_kernel(
        &mut self,
        c: usize,
        kind: KernelKind,
        dtype: Option<DataType>,
        redop: Option<RedOp>,
        algo: Option<Algorithm>,
        proto: Option<Protocol>,
        bytes: u64,
        launch: i64,
        start: i64,
        end: i64,
    ) {
        let mut k = KernelEntry {
            kind,
            dtype,
            redop,
            algo,
            proto,
            bytes: (self.cfg.kernel_bytes && bytes > 0).then_some(bytes),
            stream: self.comms[c].kernel_stream,
            start_ns: start,
            end_ns: end,
            launch_ns: self.cfg.kernel_launch_times.then_some(launch),
        };
        if self.rng.chance(self.cfg.generic_kernel_rate) {
            k = KernelEntry {
                kind: KernelKind::Generic,
                dtype: None,
                redop: None,
                algo: None,
                proto: None,
                ..k
            };
        } else if k.proto.is_some() && self.rng.chance(self.cfg.proto_mismatch_rate) {
            k.proto = Some(match k.proto {
                Some(Protocol::Ll) => Protocol::Ll128,
                Some(Protocol::Ll128) => Protocol::Simple,
                _ => Protocol::Ll,
            });
        }
        self.kernels.push(k);
    }

    /// Applies drops, sorts kernels by start, moves clocks to their domains.
    pub(super) fn finish(mut self) -> RankTrace {
        let cfg = self.cfg;
        let gpu_offset = 3_200_000_000 + 1_000_003 * self.rank as i64;
        let keep_k: Vec<bool> = (0..self.kernels.len())
            .map(|_| !self.rng.chance(cfg.kernel_drop))
            .collect();
        let keep_l: Vec<bool> = (0..self.logs.len())
            .map(|_| !self.rng.chance(cfg.log_drop))
            .collect();
        let mut order: Vec<usize> = (0..self.kernels.len()).filter(|&k| keep_k[k]).collect();
        order.sort_by_key(|&k| (self.kernels[k].start_ns, k));
        let mut new_index = vec![None; self.kernels.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = Some(new as u32);
        }
        let kernels = order
            .iter()
            .map(|&k| {
                let mut e = self.kernels[k];
                e.start_ns += gpu_offset;
                e.end_ns += gpu_offset;
                e.launch_ns = e.launch_ns.map(|t| t + gpu_offset);
                e
            })
            .collect();
        let res = cfg.timestamp_resolution_ns.max(1);
        let mut logs = Vec::new();
        let mut truth = Vec::new();
        for (i, mut l) in self.logs.into_iter().enumerate() {
            if !keep_l[i] {
                continue;
            }
            l.cpu_ts_ns = l
                .cpu_ts_ns
                .filter(|_| cfg.timestamps)
                .map(|t| (HOST_EPOCH_NS + t) / res * res);
            logs.push(l);
            truth.push(self.log_kernel[i].and_then(|k| new_index[k]));
        }
        let comm_groups = (0..self.comms.len())
            .map(|c| (self.comms[c].ptr, group_of(cfg, self.rank, c).0))
            .collect();
        RankTrace {
            rank: self.rank,
            logs,
            kernels,
            truth,
            batching: self.batching,
            comm_groups,
        }
    }
}

/// One step of a stage's iteration program ([`super::megatron`] builds it).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Step {
    Coll {
        c: usize,
        kind: OpKind,
        dtype: DataType,
        redop: Option<RedOp>,
        count: u64,
        blocking: bool,
    },
    /// One point-to-point group (its parts share an `opCount` and a kernel).
    P2p(Vec<(OpKind, u64)>),
    Compute,
    Sync,
}

/// A collective kernel whose start is known and whose end waits for its peers.
pub(super) struct Pending {
    pub(super) c: usize,
    kind: OpKind,
    dtype: Option<DataType>,
    redop: Option<RedOp>,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
    bytes: u64,
    launch: i64,
    pub(super) start: i64,
    pub(super) dur: i64,
    blocking: bool,
}
