//! Communication volume of a Megatron job, summed from its programs.
//!
//! Owns [`volumes`]: for every distinct program of [`super::workload`] (a rank class), the
//! operations, logged bytes (`count × sizeof(dtype)`, what NCCL prints) and moved bytes (the
//! ring traffic a rank carries: nccl-tests' algorithm bytes × bus factor, a Send or Recv its
//! message) per [`GroupKind`] over all iterations, with the ranks that run it and their
//! pipeline role. Because the numbers are the program's own, the generator that renders the
//! program and the volume model cannot disagree; `commlens-analyze` checks its closed-form
//! formulas (thesis eqs. 5.3–5.6) against these sums.

use super::{workload, Config, ConfigError};
use crate::{GroupKind, Work};
use commlens_core::OpKind;
use std::collections::BTreeMap;

/// Where the ranks of a program sit in the pipeline (the volume model's rank roles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StageRole {
    /// No pipeline (pp = 1).
    All,
    /// First or last stage: one pipeline boundary.
    Edge,
    /// Interior stage: two boundaries.
    Middle,
}

/// One program's traffic on groups of one kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupVolume {
    /// Collectives, plus each Send and Recv of the p2p groups.
    pub ops: u64,
    pub logged_bytes: u64,
    pub moved_bytes: f64,
    /// Per operation kind: (ops, logged bytes).
    pub by_kind: BTreeMap<OpKind, (u64, u64)>,
}

/// The traffic of one rank class over all iterations (each rank of `ranks` moves this much).
#[derive(Debug, Clone, PartialEq)]
pub struct Volumes {
    /// Ranks running the program, ascending.
    pub ranks: Vec<u32>,
    pub stage: usize,
    pub role: StageRole,
    pub by_group: BTreeMap<GroupKind, GroupVolume>,
}

/// Bytes a rank moves for one operation on a group of `n` ranks: nccl-tests' algorithm bytes
/// (`bytes × n` for AllGather/ReduceScatter/AllToAll, whose logged count is per rank) times the
/// bus factor (`2(n−1)/n` AllReduce, `(n−1)/n` AllGather/ReduceScatter/AllToAll, 1 otherwise).
pub fn moved_bytes(kind: OpKind, bytes: u64, n: u32) -> f64 {
    let nf = n.max(1) as f64;
    match kind {
        OpKind::AllReduce => bytes as f64 * (2.0 * (nf - 1.0) / nf),
        OpKind::AllGather | OpKind::ReduceScatter | OpKind::AllToAll | OpKind::Gather | OpKind::Scatter => {
            bytes.saturating_mul(n.max(1) as u64) as f64 * ((nf - 1.0) / nf)
        }
        _ => bytes as f64,
    }
}

/// The traffic of every rank class of `cfg` (see the module docs).
pub fn volumes(cfg: &Config) -> Result<Vec<Volumes>, ConfigError> {
    let w = workload(cfg)?;
    let mut out: Vec<Volumes> = Vec::with_capacity(w.programs.len());
    for (pi, p) in w.programs.iter().enumerate() {
        let ranks: Vec<u32> = (0..w.world).filter(|&r| w.rank_program[r as usize] == pi as u32).collect();
        let rep = ranks[0];
        let stage = cfg.stage_of(rep as usize);
        let role = match (cfg.pp, stage) {
            (1, _) => StageRole::All,
            (pp, s) if s == 0 || s + 1 == pp => StageRole::Edge,
            _ => StageRole::Middle,
        };
        let mut by_group: BTreeMap<GroupKind, GroupVolume> = BTreeMap::new();
        let size = |sel| w.group_of(rep, sel).map_or(1, |g| w.group(g).ranks.len() as u32);
        for t in &p.tasks {
            match &t.work {
                Work::Coll(c) => {
                    let v = by_group.entry(c.group.kind).or_default();
                    let b = c.bytes();
                    v.ops += 1;
                    v.logged_bytes += b;
                    v.moved_bytes += moved_bytes(c.kind, b, size(c.group));
                    let k = v.by_kind.entry(c.kind).or_default();
                    k.0 += 1;
                    k.1 += b;
                }
                Work::P2p { group, calls } => {
                    let v = by_group.entry(group.kind).or_default();
                    for call in calls {
                        let b = call.bytes();
                        v.ops += 1;
                        v.logged_bytes += b;
                        v.moved_bytes += b as f64;
                        let k = v.by_kind.entry(if call.send { OpKind::Send } else { OpKind::Recv }).or_default();
                        k.0 += 1;
                        k.1 += b;
                    }
                }
                Work::Compute(_) | Work::IterationEnd { .. } => {}
            }
        }
        out.push(Volumes { ranks, stage, role, by_group });
    }
    Ok(out)
}
