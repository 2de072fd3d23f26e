//! Generator of one Megatron-like run as the aligner sees it: per rank, the log
//! records, the kernels and the true record→kernel mapping.
//!
//! Ranks are laid out TP-fastest (`rank = dp·(tp·pp) + stage·tp + tp_rank`). Each
//! iteration issues, in CPU order: TP Broadcasts of the batch (first and last
//! stage); a 1F1B pipeline schedule whose forward and backward passes issue TP
//! AllGather/ReduceScatter per layer (sequence parallel; AllReduce without it)
//! and the vocab-parallel cross-entropy AllReduces (Max, Sum, fp32) on the last
//! stage; PP Send/Recv, single or grouped (`send_forward_recv_backward`), each
//! group one `SendRecv` kernel; at the end, the layer-norm gradient AllReduce
//! (TP), DP gradient ReduceScatter and parameter AllGather (if DP > 1), the
//! embedding and grad-norm AllReduces (model-parallel group), and a CPU sync.
//!
//! The count mismatches of thesis §4.1.1 are reproduced: one rank per TP group
//! logs every collective twice (2:1 batching; the two records carry consecutive
//! `opCount`s and are 1–4 µs apart); a fraction of AllReduce records have no
//! kernel (the "+20"); a fraction of SendRecv kernels have no record (the "+10").
//! Realistic noise: some kernels are `Generic`, some kernel names carry another
//! protocol than the tuning line, some records lack the tuning line.
//!
//! Timing: the CPU advances by launch overheads; the GPU compute stream and one
//! stream per communicator serialise their work, collectives wait for the
//! compute that produces their input and blocking ones hold the compute after
//! them, so the GPU drifts behind the CPU and catches up at the iteration sync.
//! Ranks run together: a collective's kernel starts on each member when that
//! member is ready and ends on all of them when the last one has started, plus
//! each member's own transfer time (TP, DP, and the model-parallel group when
//! PP ≤ 2; point-to-point kernels are timed per rank). Records carry host epoch time rounded to µs; kernels a trace clock with an
//! unknown per-rank offset, for their GPU start/end and for the CPU launch call
//! (1–3 µs after the record; after the last record of a p2p group). Kernels on
//! different streams overlap and reorder relative to the log. Drops are applied
//! last, independently per entry. The timing simulation lives in
//! [`super::gpu_sim`]; this module owns the configuration and the schedule
//! (one iteration's program of steps per pipeline stage).

use super::gpu_sim::{Step, DP, MP, TP};
use super::world::run_world;
use crate::entry::{KernelEntry, LogEntry};
use commlens_core::{DataType, OpKind, RedOp};

/// Shape and noise of a generated run.
#[derive(Debug, Clone, PartialEq)]
pub struct MegatronConfig {
    pub seed: u64,
    pub tp: usize,
    pub pp: usize,
    pub dp: usize,
    /// GPU operations (kernels, before drops) per rank.
    pub ops_per_rank: usize,
    pub layers_per_stage: usize,
    pub micro_batches: usize,
    pub hidden: u64,
    pub seq_len: u64,
    pub sequence_parallel: bool,
    /// One rank per TP group logs each collective twice (thesis Tables 4.1/4.2).
    pub batching: bool,
    pub kernel_drop: f64,
    pub log_drop: f64,
    /// AllReduce records with no kernel.
    pub orphan_log_rate: f64,
    /// Extra SendRecv kernels with no record, per point-to-point group.
    pub orphan_kernel_rate: f64,
    pub generic_kernel_rate: f64,
    pub proto_mismatch_rate: f64,
    pub missing_tune_rate: f64,
    /// Records carry CPU timestamps.
    pub timestamps: bool,
    pub timestamp_resolution_ns: i64,
    /// Kernels carry the message size (Kineto-like); nsys kernels do not.
    pub kernel_bytes: bool,
    /// Kernels carry the CPU time of their launch call (nsys/Kineto runtime API
    /// events joined by correlation id).
    pub kernel_launch_times: bool,
}

impl Default for MegatronConfig {
    fn default() -> Self {
        MegatronConfig {
            seed: 1,
            tp: 2,
            pp: 2,
            dp: 1,
            ops_per_rank: 200,
            layers_per_stage: 2,
            micro_batches: 4,
            hidden: 1024,
            seq_len: 512,
            sequence_parallel: true,
            batching: true,
            kernel_drop: 0.0,
            log_drop: 0.0,
            orphan_log_rate: 0.01,
            orphan_kernel_rate: 0.03,
            generic_kernel_rate: 0.03,
            proto_mismatch_rate: 0.03,
            missing_tune_rate: 0.05,
            timestamps: true,
            timestamp_resolution_ns: 1_000,
            kernel_bytes: false,
            kernel_launch_times: true,
        }
    }
}

/// One rank's inputs and truth.
#[derive(Debug, Clone, PartialEq)]
pub struct RankTrace {
    pub rank: usize,
    /// Records in log (CPU) order.
    pub logs: Vec<LogEntry>,
    /// Kernels in trace order (start time).
    pub kernels: Vec<KernelEntry>,
    /// `truth[i]`: the kernel record `i` ran as; `None` when it has none (anymore).
    pub truth: Vec<Option<u32>>,
    /// Whether this rank logs collectives twice.
    pub batching: bool,
    /// `(comm key of this rank's records, logical communicator)`: the same
    /// logical id on every member rank (as a `commId` would give).
    pub comm_groups: Vec<(u64, u64)>,
}

impl RankTrace {
    /// This rank as an input of [`crate::align::align_run`].
    pub fn input(&self) -> crate::align::RankInput<'_> {
        crate::align::RankInput { logs: &self.logs, kernels: &self.kernels, comm_groups: &self.comm_groups }
    }
}

/// Generates every rank of the run. Ranks are simulated together: a
/// collective's kernels end together on all members of its communicator.
pub fn generate(cfg: &MegatronConfig) -> Vec<RankTrace> {
    let world = cfg.tp * cfg.pp * cfg.dp;
    let programs: Vec<Vec<Step>> = (0..cfg.pp)
        .map(|stage| {
            let mut p = Plan {
                cfg,
                stage,
                steps: Vec::new(),
            };
            p.iteration();
            p.steps
        })
        .collect();
    run_world(cfg, world, &|rank| &programs[(rank / cfg.tp) % cfg.pp])
}

/// Generates one rank (deterministic in `cfg.seed` and `rank`; the whole run
/// is simulated, since its collectives wait for their peers).
pub fn generate_rank(cfg: &MegatronConfig, rank: usize) -> RankTrace {
    generate(cfg).swap_remove(rank)
}

/// One iteration's schedule of one pipeline stage, in CPU order.
struct Plan<'a> {
    cfg: &'a MegatronConfig,
    stage: usize,
    steps: Vec<Step>,
}

impl Plan<'_> {
    fn coll(
        &mut self,
        c: usize,
        kind: OpKind,
        dtype: DataType,
        redop: Option<RedOp>,
        count: u64,
        blocking: bool,
    ) {
        self.steps.push(Step::Coll {
            c,
            kind,
            dtype,
            redop,
            count,
            blocking,
        });
    }

    /// One point-to-point group (skipped when `active` is false, e.g. no next stage).
    fn p2p(&mut self, parts: &[(OpKind, u64)], active: bool) {
        if active && self.cfg.pp >= 2 {
            self.steps.push(Step::P2p(parts.to_vec()));
        }
    }

    fn compute(&mut self) {
        self.steps.push(Step::Compute);
    }

    fn iteration(&mut self) {
        let c = self.cfg;
        let (first, last) = (self.stage == 0, self.stage + 1 == c.pp);
        let act = c.seq_len * c.hidden;
        if c.tp > 1 && (first || last) {
            self.coll(TP, OpKind::Broadcast, DataType::Int64, None, 8, false);
            self.coll(
                TP,
                OpKind::Broadcast,
                DataType::Int64,
                None,
                c.seq_len,
                false,
            );
            self.coll(
                TP,
                OpKind::Broadcast,
                DataType::Int64,
                None,
                c.seq_len,
                false,
            );
            self.coll(
                TP,
                OpKind::Broadcast,
                DataType::Float32,
                None,
                c.seq_len,
                false,
            );
        }
        let warmup = (c.pp - self.stage - 1).min(c.micro_batches);
        let steady = c.micro_batches - warmup;
        for _ in 0..warmup {
            self.p2p(&[(OpKind::Recv, act)], !first);
            self.pass();
            self.p2p(&[(OpKind::Send, act)], !last);
        }
        if steady > 0 {
            self.p2p(&[(OpKind::Recv, act)], !first);
        }
        for i in 0..steady {
            self.pass();
            self.p2p(&[(OpKind::Send, act), (OpKind::Recv, act)], !last);
            self.pass();
            if i + 1 == steady {
                self.p2p(&[(OpKind::Send, act)], !first);
            } else {
                self.p2p(&[(OpKind::Send, act), (OpKind::Recv, act)], !first);
            }
        }
        for _ in 0..warmup {
            self.p2p(&[(OpKind::Recv, act)], !last);
            self.pass();
            self.p2p(&[(OpKind::Send, act)], !first);
        }
        let layer_params = 12 * c.hidden * c.hidden / c.tp as u64;
        if c.tp > 1 && c.sequence_parallel {
            self.coll(
                TP,
                OpKind::AllReduce,
                DataType::Bfloat16,
                Some(RedOp::Sum),
                4 * c.hidden,
                false,
            );
        }
        if c.dp > 1 {
            for _ in 0..2 {
                self.coll(
                    DP,
                    OpKind::ReduceScatter,
                    DataType::Float32,
                    Some(RedOp::Sum),
                    layer_params,
                    false,
                );
            }
        }
        if c.pp > 1 && (first || last) {
            self.coll(
                MP,
                OpKind::AllReduce,
                DataType::Float32,
                Some(RedOp::Sum),
                50_304 * c.hidden / c.tp as u64,
                true,
            );
        }
        self.coll(
            MP,
            OpKind::AllReduce,
            DataType::Float32,
            Some(RedOp::Sum),
            1,
            true,
        );
        if c.dp > 1 {
            self.coll(
                DP,
                OpKind::AllGather,
                DataType::Bfloat16,
                None,
                layer_params / c.dp as u64,
                true,
            );
            self.coll(
                DP,
                OpKind::AllReduce,
                DataType::Float32,
                Some(RedOp::Sum),
                1,
                true,
            );
        }
        // loss.item(): the CPU waits for all GPU work.
        self.steps.push(Step::Sync);
    }

    /// One forward or backward pass of this stage's layers.
    fn pass(&mut self) {
        let c = self.cfg;
        let act = c.seq_len * c.hidden;
        for _ in 0..c.layers_per_stage {
            for _ in 0..2 {
                if c.tp > 1 && c.sequence_parallel {
                    self.coll(
                        TP,
                        OpKind::AllGather,
                        DataType::Bfloat16,
                        None,
                        act / c.tp as u64,
                        true,
                    );
                    self.compute();
                    self.coll(
                        TP,
                        OpKind::ReduceScatter,
                        DataType::Bfloat16,
                        Some(RedOp::Sum),
                        act,
                        true,
                    );
                } else {
                    self.compute();
                    if c.tp > 1 {
                        self.coll(
                            TP,
                            OpKind::AllReduce,
                            DataType::Bfloat16,
                            Some(RedOp::Sum),
                            act,
                            true,
                        );
                    }
                }
            }
        }
        if c.tp > 1 && self.stage + 1 == c.pp {
            self.compute();
            self.coll(
                TP,
                OpKind::AllReduce,
                DataType::Float32,
                Some(RedOp::Max),
                c.seq_len,
                true,
            );
            self.coll(
                TP,
                OpKind::AllReduce,
                DataType::Float32,
                Some(RedOp::Sum),
                c.seq_len,
                true,
            );
            self.coll(
                TP,
                OpKind::AllReduce,
                DataType::Float32,
                Some(RedOp::Sum),
                c.seq_len,
                true,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::KernelKind;

    #[test]
    fn shape_of_a_run() {
        let cfg = MegatronConfig::default();
        let ranks = generate(&cfg);
        assert_eq!(ranks.len(), 4);
        assert_eq!(
            ranks
                .iter()
                .filter(|r| r.batching)
                .map(|r| r.rank)
                .collect::<Vec<_>>(),
            vec![0, 2]
        );
        for r in &ranks {
            assert_eq!(r.kernels.len(), cfg.ops_per_rank);
            assert_eq!(r.logs.len(), r.truth.len());
            assert!(r.kernels.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
            assert!(r.logs.windows(2).all(|w| w[0].cpu_ts_ns <= w[1].cpu_ts_ns));
            let fused = r.logs.iter().filter(|l| l.kind.is_p2p()).count();
            let sr = r
                .kernels
                .iter()
                .filter(|k| k.kind == KernelKind::Op(OpKind::SendRecv))
                .count();
            assert!(fused > 0 && sr > 0);
            if r.batching {
                assert!(
                    r.logs.len() > 3 * r.kernels.len() / 2,
                    "{} logs",
                    r.logs.len()
                );
            }
        }
        assert_eq!(generate(&cfg), ranks, "deterministic");
    }

    #[test]
    fn drops_remove_truth() {
        let cfg = MegatronConfig {
            kernel_drop: 0.2,
            log_drop: 0.2,
            ..MegatronConfig::default()
        };
        for r in generate(&cfg) {
            assert!(r.kernels.len() < cfg.ops_per_rank);
            let n = r.kernels.len() as u32;
            assert!(r.truth.iter().flatten().all(|&k| k < n));
        }
    }
}
