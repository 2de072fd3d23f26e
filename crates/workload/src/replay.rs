//! A measured run as a workload: replay what each rank did, so a what-if (a faster network,
//! another cluster) can be simulated on the very program the job ran.
//!
//! Owns [`from_table`]: an assembled [`OpTable`] (any input commlens reads) → [`Workload`].
//! Each rank's operations become its program in their order; the time between one operation's
//! end and the next one's start becomes a compute step of that length (`time_us`), so the
//! replayed rank keeps its measured pace between calls. Where the table has GPU spans they
//! give the times; where it has only CPU enqueue times (a log alone), the gaps between
//! enqueues do, which charges communication that overlapped the CPU as compute: the replay
//! then over-states compute and the report says which clock it used.
//!
//! What cannot be replayed is named, not guessed: ranks without a global rank, operations of
//! communicators whose members are not all in the table, and Send/Recv without a peer are left
//! out and counted in [`Workload::notes`].

use crate::program::*;
use commlens_core::{OpKind, OpTable};
use std::collections::BTreeMap;

/// Which clock the replay took its gaps from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayClock {
    /// GPU kernel spans (traces, the plugin, a fused run).
    Gpu,
    /// CPU enqueue timestamps (NCCL logs alone).
    Cpu,
    /// Neither: operations in order with no compute between them.
    None,
}

/// The replayed workload and what the replay could not keep.
#[derive(Debug, Clone)]
pub struct Replay {
    pub workload: Workload,
    pub clock: ReplayClock,
    /// Operations left out (no global rank, incomplete communicator, peerless p2p).
    pub dropped_ops: u64,
}

/// Builds the replay of `t` (assembled: devices carry global ranks, handles logical
/// communicators). `kind_of[l]` names the parallelism of logical communicator `l` (from the
/// classifier); missing entries are [`GroupKind::Other`]. Each logical communicator becomes
/// one group tagged by its index, so a rank's several communicators of one kind stay apart.
pub fn from_table(t: &OpTable, name: &str, kind_of: &[GroupKind]) -> Result<Replay, String> {
    let ranks: Vec<Option<u32>> = t.devices.iter().map(|d| d.global_rank).collect();
    let world = ranks.iter().flatten().map(|&r| r + 1).max().ok_or("no device has a global rank: nothing to replay")?;
    let mut dev_of_rank: Vec<Option<usize>> = vec![None; world as usize];
    for (d, r) in ranks.iter().enumerate() {
        if let Some(r) = r {
            dev_of_rank[*r as usize].get_or_insert(d);
        }
    }
    // Groups: one per logical communicator whose members all have a global rank.
    let mut groups = Vec::new();
    let mut group_of_logical: Vec<Option<GroupId>> = vec![None; t.logical.len()];
    let mut membership: Vec<Vec<GroupId>> = vec![Vec::new(); world as usize];
    for (l, lc) in t.logical.iter().enumerate() {
        let members: Option<Vec<u32>> = lc.members.iter().map(|&c| t.global_rank_of(c)).collect();
        let Some(members) = members.filter(|m| !m.is_empty() && m.len() as u32 == lc.nranks.max(1)) else { continue };
        let id = GroupId(groups.len() as u32);
        for &r in &members {
            membership[r as usize].push(id);
        }
        groups.push(Group {
            kind: kind_of.get(l).copied().unwrap_or(GroupKind::Other),
            tag: l as u32,
            name: lc.name.clone(),
            ranks: members,
        });
        group_of_logical[l] = Some(id);
    }
    let has_gpu = t.ops().any(|o| o.gpu.is_some());
    let has_cpu = t.ops().any(|o| o.cpu_ts_ns.is_some());
    let clock = if has_gpu {
        ReplayClock::Gpu
    } else if has_cpu {
        ReplayClock::Cpu
    } else {
        ReplayClock::None
    };
    let mut dropped = 0u64;
    let mut programs = Vec::with_capacity(world as usize);
    for r in 0..world {
        let mut tasks: Vec<Task> = Vec::new();
        let Some(d) = dev_of_rank[r as usize] else {
            programs.push(Program::default());
            continue;
        };
        let ops = t.per_rank[d].to_vec();
        // The replay follows the clock it uses: by GPU start where spans exist.
        let mut order: Vec<usize> = (0..ops.len()).collect();
        if clock == ReplayClock::Gpu {
            order.sort_by_key(|&i| (ops[i].gpu.map_or(i64::MAX, |g| g.start_ns), i));
        }
        let mut last_end: Option<i64> = None;
        // Send/Recv of one NCCL group (same communicator, same opCount) form one grouped call.
        let mut i = 0;
        while i < order.len() {
            let op = &ops[order[i]];
            let Some(group) = t.comms[op.comm.ix()].logical.and_then(|l| group_of_logical[l.ix()]) else {
                dropped += 1;
                i += 1;
                continue;
            };
            let sel = GroupSel { kind: groups[group.0 as usize].kind, tag: groups[group.0 as usize].tag };
            let (start, end) = match clock {
                ReplayClock::Gpu => (op.gpu.map(|g| g.start_ns), op.gpu.map(|g| g.end_ns)),
                ReplayClock::Cpu => (op.cpu_ts_ns, op.cpu_ts_ns),
                ReplayClock::None => (None, None),
            };
            if let (Some(prev), Some(s)) = (last_end, start) {
                if s > prev {
                    tasks.push(Task {
                        stream: Stream::Compute,
                        deps: Vec::new(),
                        phase: Phase::Other,
                        work: Work::Compute(Compute {
                            name: "replayed gap".into(),
                            kind: ComputeKind::Other,
                            flops: 0.0,
                            mem_bytes: 0.0,
                            time_us: Some((s - prev) as f64 / 1e3),
                        }),
                    });
                }
            }
            if matches!(op.kind, OpKind::Send | OpKind::Recv) {
                let mut calls = Vec::new();
                let mut j = i;
                let mut group_end = end;
                while j < order.len() {
                    let o = &ops[order[j]];
                    if o.comm != op.comm || o.seq != op.seq || !matches!(o.kind, OpKind::Send | OpKind::Recv) {
                        break;
                    }
                    match o.peer {
                        Some(p) => calls.push(P2pCall {
                            send: o.kind == OpKind::Send,
                            peer: Peer::Rank(p),
                            count: o.count,
                            dtype: o.dtype,
                            tag: 0,
                        }),
                        None => dropped += 1,
                    }
                    if clock == ReplayClock::Gpu {
                        group_end = group_end.max(o.gpu.map(|g| g.end_ns));
                    }
                    j += 1;
                }
                if !calls.is_empty() {
                    tasks.push(Task { stream: Stream::Compute, deps: Vec::new(), phase: Phase::Other, work: Work::P2p { group: sel, calls } });
                }
                last_end = group_end.or(last_end);
                i = j;
                continue;
            }
            tasks.push(Task {
                stream: Stream::Compute,
                deps: Vec::new(),
                phase: Phase::Other,
                work: Work::Coll(CollCall {
                    group: sel,
                    kind: op.kind,
                    count: op.count,
                    dtype: op.dtype,
                    redop: op.redop,
                    root: op.root.unwrap_or(0),
                    sync: false,
                    tag: 0,
                }),
            });
            last_end = end.or(last_end);
            i += 1;
        }
        tasks.push(Task { stream: Stream::Compute, deps: Vec::new(), phase: Phase::Other, work: Work::IterationEnd { iter: 0 } });
        programs.push(Program { tasks });
    }
    let mut notes = Vec::new();
    if dropped > 0 {
        notes.push(format!(
            "{dropped} operations left out of the replay (rank without a global rank, communicator with members missing from the inputs, or Send/Recv without a peer)"
        ));
    }
    let missing = dev_of_rank.iter().filter(|d| d.is_none()).count();
    if missing > 0 {
        notes.push(format!("{missing} of {world} ranks are absent from the inputs and replay an empty program"));
    }
    notes.push(match clock {
        ReplayClock::Gpu => "compute between operations from GPU kernel spans".to_string(),
        ReplayClock::Cpu => "compute between operations from CPU enqueue times (no GPU spans): communication that overlapped the CPU is counted as compute".to_string(),
        ReplayClock::None => "no timestamps: operations replayed back to back with no compute between them".to_string(),
    });
    let gpus_per_node = gpus_per_host(t);
    let w = Workload {
        name: name.to_string(),
        origin: Origin::Measured,
        world,
        gpus_per_node,
        iterations: 1,
        groups,
        rank_program: (0..world).collect(),
        programs,
        membership,
        representative: Vec::new(),
        notes,
    };
    w.validate()?;
    Ok(Replay { workload: w, clock, dropped_ops: dropped })
}

/// GPUs per host when every host holds the same number.
fn gpus_per_host(t: &OpTable) -> Option<u32> {
    let mut per_host: BTreeMap<&str, u32> = BTreeMap::new();
    for d in &t.devices {
        if d.global_rank.is_some() {
            *per_host.entry(t.processes[d.proc.ix()].host.as_str()).or_default() += 1;
        }
    }
    let mut counts = per_host.values();
    let first = *counts.next()?;
    counts.all(|&c| c == first).then_some(first)
}
