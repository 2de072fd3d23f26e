//! Theoretical communication volume per rank and parallelism type, and its
//! comparison with what a run logged (thesis §2.4 and §5.3.5, Table 5.1).
//!
//! **Theory** ([`theoretical_volumes`]), per rank, from a [`ModelConfig`]:
//!
//! | type | per rank | source |
//! |---|---|---|
//! | parameters | `P = 12·L·h²·(1 + 1/(12h) + (V+s)/(12·L·h²))` | thesis eq. 5.2 (= 2.4), as printed |
//! | parameters, Megatron | `P = 12·L·h² + 13·L·h + (V+s)·h` | [`ParamFormula::Megatron`] |
//! | DP | `2·(n_DP−1)/n_DP · P/(n_TP·n_PP) · β_grad` per iteration | eq. 5.3 (= 2.6) |
//! | DP, distributed optimizer | `(n_DP−1)/n_DP · P/(n_TP·n_PP) · (β_grad + β_param)` | AICB's ReduceScatter + AllGather split |
//! | TP | `L_stage · 8·b·s·h·(n_TP−1)/n_TP · β` per micro-batch | eq. 5.5 (= 2.7) |
//! | PP | `b·s·h·β` per boundary, direction and micro-batch (`/n_TP` with scatter-gather or SP) | eq. 5.4 (= 2.8, 2.9) |
//! | EP | `4·(m·b·s)·k·h·(1−1/n_EP)·β/n_TP` per MoE layer of the stage | eq. 5.6 per rank, AICB's `/tp` |
//!
//! Eq. 5.2 as printed counts the embeddings as `V + s` parameters, not
//! `(V + s)·h` (its last term has `h²` where Megatron's formula has `h`);
//! Table 5.1's figures (P ≈ 50.4 M for L = 16, h = 512) follow the printed
//! form, which is therefore the default; the Megatron count is an option.
//!
//! `m` = micro-batches per iteration, given or `global_batch / (b·n_DP)` (AICB's
//! `ga`). A PP rank moves both directions over each of its boundaries, so edge
//! stages have one boundary and middle stages two (the thesis's accounting).
//! With MoE layers, DP synchronizes only the non-expert part, taken as the
//! `(L − moe_layers)/L` share of `P` (the thesis's approximation for Table
//! 5.1's EP row). With SP, TP's AllReduces become AllGather + ReduceScatter of
//! the same total volume, so only the expected operation kinds change.
//!
//! **Cross-check with the program**: the formulas are closed forms of what the shared Megatron
//! program (`commlens_workload::megatron`, the one `commlens-synth` renders and the simulator
//! runs) moves; `volume_program_tests.rs` sums that program's bytes
//! (`commlens_workload::megatron::volumes`) over many configurations and asserts the formulas
//! against it term by term (PP exact, TP's layer term exact with the program's embedding, loss
//! and batch terms named, DP exact on the program's parameter count, EP's off-rank share of the
//! program's token copies).
//!
//! **Observed** ([`compare`]): every operation on a logical communicator of
//! class X (from [`crate::classify`]) counts for its rank under X. Two
//! measures per rank: *moved* bytes, what the formulas above count (for
//! collectives the ring traffic a rank sends, nccl-tests' `S × busfactor`
//! from [`crate::bandwidth`]; for Send and Recv the message, so a PP rank's
//! two directions both count, as in eq. 5.4's accounting), and *logged*
//! bytes (`Σ count × sizeof(dtype)`, the thesis's "observed" column). The
//! ratio observed/theory is given for both; Table 5.1's ratios are the
//! logged ones. Pipeline ranks are split into edge stages (first or last
//! member of their PP communicator) and middle stages.

use crate::bandwidth::{algo_bytes, bus_factor, BusConvention};
use crate::classify::{Classification, Parallelism};
use commlens_core::model::DevIdx;
use commlens_core::{OpKind, OpTable};
use serde::Serialize;
use std::collections::BTreeMap;

/// The model file and its parser are the shared workload model's (`commlens_workload::megatron`),
/// which also turns it into the Megatron configuration the simulator and the generator run;
/// re-exported here so this module's API is unchanged.
pub use commlens_workload::megatron::{ConfigError, ModelConfig, ParamFormula};

/// Which ranks of a parallelism type a row speaks of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum RankRole {
    All,
    /// First or last stage of a pipeline (one boundary).
    PipelineEdge,
    /// Interior stage (two boundaries).
    PipelineMiddle,
}

/// The theoretical volume of one rank of one parallelism type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VolumeRow {
    pub parallelism: Parallelism,
    pub role: RankRole,
    /// For types that communicate per micro-batch (TP, PP, EP).
    pub per_microbatch_bytes: Option<f64>,
    pub per_iteration_bytes: f64,
    /// `per_iteration_bytes × iterations`.
    pub total_bytes: f64,
    /// Operations the model expects per rank per micro-batch and per
    /// iteration (`None` where the implementation decides, e.g. DP buckets).
    pub ops_per_microbatch: Option<u64>,
    pub ops_per_iteration: Option<u64>,
    /// Operation kinds the model expects.
    pub kinds: Vec<OpKind>,
    /// The formula, in words.
    pub formula: String,
}

/// Every theoretical row of a configuration (types of size 1 have none).
pub fn theoretical_volumes(c: &ModelConfig) -> Vec<VolumeRow> {
    let beta = c.beta();
    let m = c.microbatches().unwrap_or(1);
    let mf = m as f64;
    let iters = c.iterations as f64;
    let (b, s, h) = (c.micro_batch as f64, c.seq_len as f64, c.hidden as f64);
    let (tp, pp) = (c.tp as f64, c.pp as f64);
    let l_stage = c.layers as f64 / pp;
    let moe = c.ep > 1 && c.moe_layers > 0;
    let row = |parallelism, role, per_mb: Option<f64>, per_it: f64, ops_mb: Option<u64>, kinds, formula: String| VolumeRow {
        parallelism,
        role,
        per_microbatch_bytes: per_mb,
        per_iteration_bytes: per_it,
        total_bytes: per_it * iters,
        ops_per_microbatch: ops_mb,
        ops_per_iteration: ops_mb.map(|o| o * m),
        kinds,
        formula,
    };
    let mut rows = Vec::new();
    if c.dp > 1 {
        let n = c.dp as f64;
        let dense = if moe { (c.layers - c.moe_layers) as f64 / c.layers as f64 } else { 1.0 };
        let shard = c.param_count() * dense / (tp * pp);
        let g = c.grad_bytes.unwrap_or(c.bytes_per_element) as f64;
        let share = if moe { format!(" · (L−{})/L non-expert share", c.moe_layers) } else { String::new() };
        let (v, kinds, formula) = if c.distributed_optimizer {
            let p = c.param_bytes.unwrap_or(c.bytes_per_element) as f64;
            let v = (n - 1.0) / n * shard * (g + p);
            (v, vec![OpKind::ReduceScatter, OpKind::AllGather], format!("(n−1)/n · P/(tp·pp) · (β_grad + β_param){share}"))
        } else {
            (2.0 * (n - 1.0) / n * shard * g, vec![OpKind::AllReduce], format!("eq. 5.3: 2(n−1)/n · P/(tp·pp) · β_grad{share}"))
        };
        rows.push(row(Parallelism::Data, RankRole::All, None, v, None, kinds, formula));
    }
    if c.tp > 1 {
        let per_mb = l_stage * 8.0 * b * s * h * (tp - 1.0) / tp * beta;
        let layers = (c.layers / c.pp).max(1);
        let (ops, kinds) = if c.sequence_parallel {
            (8 * layers, vec![OpKind::AllGather, OpKind::ReduceScatter])
        } else {
            (4 * layers, vec![OpKind::AllReduce])
        };
        let f = "eq. 5.5: L_stage · 8·b·s·h·(n−1)/n · β per micro-batch".to_string();
        rows.push(row(Parallelism::Tensor, RankRole::All, Some(per_mb), per_mb * mf, Some(ops), kinds, f));
    }
    if c.pp > 1 {
        let split = c.pp_scatter_gather || c.sequence_parallel;
        let v = b * s * h * beta / if split { tp } else { 1.0 };
        let f = |k: u64| {
            format!("eq. 5.4: {k} boundary × 2 directions × b·s·h{}·β per micro-batch", if split { "/tp" } else { "" })
        };
        let kinds = vec![OpKind::Send, OpKind::Recv];
        rows.push(row(Parallelism::Pipeline, RankRole::PipelineEdge, Some(2.0 * v), 2.0 * v * mf, Some(2), kinds.clone(), f(1)));
        if c.pp > 2 {
            rows.push(row(Parallelism::Pipeline, RankRole::PipelineMiddle, Some(4.0 * v), 4.0 * v * mf, Some(4), kinds, f(2)));
        }
    }
    if moe {
        let n = c.ep as f64;
        let moe_stage = c.moe_layers as f64 / pp;
        let per_mb = 4.0 * b * s * c.top_k as f64 * h * (1.0 - 1.0 / n) * beta / tp * moe_stage;
        let ops = (4 * c.moe_layers / c.pp).max(1);
        let f = "eq. 5.6 per rank: 4·(m·b·s)·k·h·(1−1/n)·β/tp per MoE layer of the stage".to_string();
        rows.push(row(Parallelism::Expert, RankRole::All, Some(per_mb), per_mb * mf, Some(ops), vec![OpKind::AllToAll], f));
    }
    rows
}

/// Bytes a rank moves for one operation on `n` ranks (see the module docs).
pub fn moved_bytes(kind: OpKind, bytes: u64, n: u32) -> f64 {
    let conv = BusConvention::NcclTests;
    algo_bytes(kind, bytes, n, conv) as f64 * bus_factor(kind, n, None, conv)
}

/// One rank's observed traffic of one parallelism type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankVolume {
    pub dev: DevIdx,
    pub global_rank: Option<u32>,
    pub ops: u64,
    pub logged_bytes: u64,
    pub moved_bytes: f64,
}

/// Observed operations of one kind, summed over a row's ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindVolume {
    pub kind: OpKind,
    pub ops: u64,
    pub logged_bytes: u64,
    pub moved_bytes: f64,
}

/// Theory against observation for one (parallelism, role): a row of Table 5.1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VolumeComparison {
    pub parallelism: Parallelism,
    pub role: RankRole,
    /// `VolumeRow::total_bytes`; `None` for types without a model (world, embedding, …).
    pub theory_bytes: Option<f64>,
    /// Ranks holding a communicator of this type (and role), by device.
    pub ranks: Vec<RankVolume>,
    pub observed_moved_mean: f64,
    pub observed_logged_mean: f64,
    /// `observed_moved_mean / theory`.
    pub ratio: Option<f64>,
    /// `observed_logged_mean / theory` (the thesis's ratio).
    pub logged_ratio: Option<f64>,
    pub by_kind: Vec<KindVolume>,
}

/// Observed volumes per (parallelism, role) beside the theory rows; rows of
/// theory without observed ranks keep empty `ranks` and no ratios.
pub fn compare(theory: &[VolumeRow], observed: &OpTable, classification: &Classification) -> Vec<VolumeComparison> {
    let t = observed;
    let class_of: Vec<Parallelism> = (0..t.logical.len())
        .map(|i| classification.class_of(commlens_core::model::LogicalCommIdx(i as u32)).unwrap_or(Parallelism::Other))
        .collect();
    // Role of every device: from its position in its pipeline communicator.
    let mut pp_role: BTreeMap<DevIdx, RankRole> = BTreeMap::new();
    // (class, device) pairs of membership, so members without operations count as zero.
    let mut members: BTreeMap<(Parallelism, DevIdx), RankVolume> = BTreeMap::new();
    for (i, lc) in t.logical.iter().enumerate() {
        for (pos, &m) in lc.members.iter().enumerate() {
            let Some(d) = t.comms[m.ix()].device else { continue };
            let rank = t.comms[m.ix()].rank.map_or(pos as u32, |r| r);
            if class_of[i] == Parallelism::Pipeline {
                let edge = rank == 0 || rank + 1 >= lc.nranks;
                let role = if edge { RankRole::PipelineEdge } else { RankRole::PipelineMiddle };
                // A rank in two PP groups (interleaved schedules) is middle if it is in either.
                let e = pp_role.entry(d).or_insert(role);
                *e = (*e).max(role);
            }
            let global_rank = t.devices[d.ix()].global_rank;
            members.entry((class_of[i], d)).or_insert(RankVolume { dev: d, global_rank, ops: 0, logged_bytes: 0, moved_bytes: 0.0 });
        }
    }
    let mut kinds: BTreeMap<(Parallelism, RankRole, OpKind), KindVolume> = BTreeMap::new();
    let role_of = |class: Parallelism, d: DevIdx| match class {
        Parallelism::Pipeline => pp_role.get(&d).copied().unwrap_or(RankRole::PipelineEdge),
        _ => RankRole::All,
    };
    for op in t.ops() {
        let Some(l) = t.comms.get(op.comm.ix()).and_then(|c| c.logical) else { continue };
        let class = class_of[l.ix()];
        let moved = moved_bytes(op.kind, op.bytes, t.logical[l.ix()].nranks);
        let global_rank = t.devices[op.dev.ix()].global_rank;
        let r = members.entry((class, op.dev)).or_insert(RankVolume { dev: op.dev, global_rank, ops: 0, logged_bytes: 0, moved_bytes: 0.0 });
        r.ops += 1;
        r.logged_bytes = r.logged_bytes.saturating_add(op.bytes);
        r.moved_bytes += moved;
        let k = kinds.entry((class, role_of(class, op.dev), op.kind)).or_insert(KindVolume { kind: op.kind, ops: 0, logged_bytes: 0, moved_bytes: 0.0 });
        k.ops += 1;
        k.logged_bytes = k.logged_bytes.saturating_add(op.bytes);
        k.moved_bytes += moved;
    }
    let mut groups: BTreeMap<(Parallelism, RankRole), Vec<RankVolume>> = BTreeMap::new();
    for ((class, d), v) in members {
        groups.entry((class, role_of(class, d))).or_default().push(v);
    }
    for row in theory {
        groups.entry((row.parallelism, row.role)).or_default();
    }
    groups
        .into_iter()
        .map(|((parallelism, role), ranks)| {
            let theory_bytes = theory.iter().find(|r| r.parallelism == parallelism && r.role == role).map(|r| r.total_bytes);
            let n = ranks.len() as f64;
            let (moved, logged) = if ranks.is_empty() {
                (0.0, 0.0)
            } else {
                (ranks.iter().map(|r| r.moved_bytes).sum::<f64>() / n, ranks.iter().map(|r| r.logged_bytes as f64).sum::<f64>() / n)
            };
            let ratio = |x: f64| theory_bytes.filter(|t| *t > 0.0 && !ranks.is_empty()).map(|t| x / t);
            VolumeComparison {
                parallelism,
                role,
                theory_bytes,
                observed_moved_mean: moved,
                observed_logged_mean: logged,
                ratio: ratio(moved),
                logged_ratio: ratio(logged),
                by_kind: kinds.iter().filter(|(k, _)| (k.0, k.1) == (parallelism, role)).map(|(_, v)| v.clone()).collect(),
                ranks,
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "volume_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "volume_program_tests.rs"]
mod program_tests;
