//! The NCCL logs of the traced run, derived from the simulation's lines and op records.
//!
//! Owns two changes to the logs of [`crate::generate`] that a traced run shows:
//! - `overlap_grad_reduce`: Megatron's DDP issues each data-parallel gradient bucket from a
//!   backward hook as soon as its gradients exist, so its record (op, call and tuning lines)
//!   appears during the last backward pass, not after it. The simulation issues the buckets
//!   after backward; here bucket `j` of `n` moves to the end of the `(m - n + j)`-th of the
//!   `m` compute steps before them (the last bucket after the last step). Only records whose
//!   lines are contiguous move (the first op of a communicator carries connection lines).
//! - `batching`: on the batching ranks every collective record (op, call and tuning lines) is
//!   written twice, and `opCount`s are renumbered per communicator so the pair carries
//!   consecutive values, as in thesis Tables 4.1/4.2. Send/Recv groups keep one shared value.
//!
//! Everything else (times, text, order) is the simulation's. Each op record keeps the index of
//! its simulation event so the timeline and the truth know what it is.

use crate::config::RunConfig;
use crate::layout::Layout;
use crate::sim::{Line, LineKind, OpRec, SimEvent, SimOutput};
use super::TraceConfig;
use std::collections::HashMap;

/// One op record of the traced log.
#[derive(Clone, Debug)]
pub(super) struct LogRec {
    /// Index of the `SimEvent::Op` in the rank's events.
    pub ev: usize,
    /// Time of the op line, µs since the epoch.
    pub t_us: u64,
    /// `opCount` as written.
    pub op_count: u64,
    /// Second record of a batched pair.
    pub dup: bool,
}

/// The traced log of one rank.
#[derive(Clone, Debug)]
pub(super) struct RankLog {
    pub lines: Vec<Line>,
    /// Op records in line order.
    pub recs: Vec<LogRec>,
    pub batching: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Op,
    Call,
    Tuning,
}

#[derive(Clone, Debug)]
struct Item {
    line: Line,
    tag: Option<(usize, Role)>,
    dup: bool,
}

/// Whether a rank shows 2:1 batching: TP rank 0 of each TP group (thesis: as many batching
/// ranks as TP groups).
pub(super) fn is_batching_rank(cfg: &RunConfig, layout: &Layout, rank: usize) -> bool {
    cfg.tp > 1 && layout.procs[rank].tp_rank == 0
}

/// Whether a communicator carries gradient reductions that compute does not wait for.
pub(super) fn is_grad_comm(layout: &Layout, comm: usize) -> bool {
    let label = layout.comms[comm].kind.label();
    label.contains("DP") || label == "EMB"
}

pub(super) fn op_rec(events: &[SimEvent], ev: usize) -> &OpRec {
    match &events[ev] {
        SimEvent::Op { rec, .. } => rec,
        other => panic!("event {ev} is not an op: {other:?}"),
    }
}

pub(super) fn build(cfg: &RunConfig, tcfg: &TraceConfig, layout: &Layout, out: &SimOutput) -> Vec<RankLog> {
    (0..layout.procs.len())
        .map(|r| {
            let batching = tcfg.batching && is_batching_rank(cfg, layout, r);
            build_rank(&out.lines[r], &out.events[r], layout, tcfg.overlap_grad_reduce, batching)
        })
        .collect()
}

fn build_rank(lines: &[Line], events: &[SimEvent], layout: &Layout, overlap: bool, batching: bool) -> RankLog {
    let mut tags: Vec<Option<(usize, Role)>> = vec![None; lines.len()];
    for (e, ev) in events.iter().enumerate() {
        let SimEvent::Op { rec, t_us } = ev else { continue };
        debug_assert_eq!(lines[rec.line].t, t_us.round() as u64, "op record points at its line");
        tags[rec.line] = Some((e, Role::Op));
        let mut i = rec.line + 1;
        let call = format!("nccl{}(", rec.name);
        if i < lines.len() && lines[i].kind == LineKind::Call && lines[i].text.starts_with(&call) {
            tags[i] = Some((e, Role::Call));
            i += 1;
        }
        if !rec.p2p {
            // Connection lines may sit between the op and its tuning line; another op may not.
            while i < lines.len() && !matches!(lines[i].kind, LineKind::Tuning | LineKind::Op) {
                i += 1;
            }
            if i < lines.len() && lines[i].kind == LineKind::Tuning {
                tags[i] = Some((e, Role::Tuning));
            }
        }
    }
    let mut items: Vec<Item> =
        lines.iter().cloned().zip(tags).map(|(line, tag)| Item { line, tag, dup: false }).collect();
    if overlap {
        move_grad_buckets(layout, events, &mut items);
    }
    if batching {
        items = duplicate_collectives(events, items);
    }
    // opCounts as written: renumbered per communicator on batching ranks.
    let mut next: HashMap<usize, u64> = HashMap::new();
    let mut group: HashMap<(usize, u64), u64> = HashMap::new();
    let mut recs = Vec::new();
    for it in items.iter_mut() {
        let Some((e, Role::Op)) = it.tag else { continue };
        let rec = op_rec(events, e);
        let op_count = if batching {
            let mut take = || {
                let c = next.entry(rec.comm).or_insert(0);
                *c += 1;
                *c - 1
            };
            let v = if rec.p2p { *group.entry((rec.comm, rec.opcount)).or_insert_with(take) } else { take() };
            let old = format!(": opCount {:x} ", rec.opcount);
            let new = format!(": opCount {v:x} ");
            it.line.text = it.line.text.replacen(&old, &new, 1);
            v
        } else {
            rec.opcount
        };
        recs.push(LogRec { ev: e, t_us: it.line.t, op_count, dup: it.dup });
    }
    RankLog { lines: items.into_iter().map(|i| i.line).collect(), recs, batching }
}

/// Positions of the items tagged with event `e`, when they are contiguous.
fn contiguous_group(items: &[Item], e: usize) -> Option<(usize, usize)> {
    let pos: Vec<usize> =
        items.iter().enumerate().filter(|(_, it)| it.tag.is_some_and(|t| t.0 == e)).map(|(i, _)| i).collect();
    let (&a, &b) = (pos.first()?, pos.last()?);
    (b - a + 1 == pos.len()).then_some((a, b))
}

fn move_grad_buckets(layout: &Layout, events: &[SimEvent], items: &mut Vec<Item>) {
    let is_bucket = |e: usize| match &events[e] {
        SimEvent::Op { rec, .. } => {
            !rec.p2p && !rec.sync && is_grad_comm(layout, rec.comm) && matches!(rec.name, "AllReduce" | "ReduceScatter")
        }
        _ => false,
    };
    let is_dp = |e: usize| is_bucket(e) && layout.comms[op_rec(events, e).comm].kind.label().contains("DP");
    let mut e = 0;
    while e < events.len() {
        if !is_dp(e) {
            e += 1;
            continue;
        }
        let start = e;
        while e < events.len() && is_dp(e) {
            e += 1;
        }
        let run: Vec<usize> = (start..e).collect();
        // Compute steps of the last pass before the run: back to the optimizer step, a barrier
        // or a group that received (its data starts the pass). Send-only groups (the last
        // `send_backward`) come after the hooks fired, so they are passed over.
        let mut computes = Vec::new();
        for k in (0..start).rev() {
            match &events[k] {
                SimEvent::Compute { t_us, dur_us } => computes.push(t_us + dur_us),
                SimEvent::Op { .. } => {}
                SimEvent::Done { .. } if send_only_group_before(events, k) => {}
                SimEvent::Done { .. } | SimEvent::IterEnd { .. } => break,
            }
        }
        computes.reverse();
        let (m, n) = (computes.len(), run.len());
        if m == 0 {
            continue;
        }
        for (j, &ev) in run.iter().enumerate() {
            let Some((a, b)) = contiguous_group(items, ev) else { continue };
            let ci = (m as isize - n as isize + j as isize).max(0) as usize;
            // Issued by the hook just before the step that produced the bucket's last gradient
            // finishes: the CPU is ahead of the GPU at that point.
            let t_new = (computes[ci].floor() as u64).saturating_sub(1);
            if t_new >= items[a].line.t {
                continue;
            }
            let mut group: Vec<Item> = items.drain(a..=b).collect();
            for it in &mut group {
                it.line.t = t_new;
            }
            let pos = items.partition_point(|it| it.line.t <= t_new);
            items.splice(pos..pos, group);
        }
    }
}

/// Whether the blocking step completed at event `done` is a Send/Recv group without a Recv.
fn send_only_group_before(events: &[SimEvent], done: usize) -> bool {
    let ops: Vec<&OpRec> = events[..done]
        .iter()
        .rev()
        .map_while(|e| match e {
            SimEvent::Op { rec, .. } if rec.p2p => Some(rec),
            _ => None,
        })
        .collect();
    !ops.is_empty() && ops.iter().all(|o| o.name == "Send")
}

fn duplicate_collectives(events: &[SimEvent], items: Vec<Item>) -> Vec<Item> {
    let mut pending: HashMap<usize, Vec<Item>> = HashMap::new();
    let mut out = Vec::with_capacity(items.len() * 2);
    for it in items {
        let tag = it.tag;
        out.push(it.clone());
        let Some((e, role)) = tag else { continue };
        if op_rec(events, e).p2p {
            continue;
        }
        pending.entry(e).or_default().push(Item { dup: true, ..it });
        // The copy follows the tuning line (the last line of the record).
        if role == Role::Tuning {
            let t = out.last().map_or(0, |l| l.line.t);
            for mut c in pending.remove(&e).unwrap_or_default() {
                c.line.t = t;
                out.push(c);
            }
        }
    }
    out
}
