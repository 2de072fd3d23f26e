//! The simulated run as the canonical table, compute spans for traces, and a text summary.
//!
//! Owns [`to_table`]/[`to_table_with`]: one process and one device per rank (host `node{N}` by
//! `rank / gpus_per_node`, pid = rank, CUDA device `rank % gpus_per_node`), one communicator
//! handle per (rank, group it belongs to) with `commId` derived from the group, and one
//! [`CollOp`] per simulated call with NCCL's algorithm, protocol and channels from the same
//! collective model the analytical backend times with. The table then goes through
//! [`commlens_core::assemble::assemble`] exactly like a measured one, so every analysis reads
//! it unchanged. The table does not carry its source kind: writers record
//! [`SOURCE_KIND`] (`SourceKind::Simulated`), e.g. `commlens_parquet::WriteOptions::source_kind`.
//!
//! Global ranks: assemble takes them from the largest communicator whose members logged
//! their ranks. Unless the workload has a group holding every rank in rank order, each rank
//! also gets a handle of a `world` communicator (as NCCL's and PyTorch's default group would
//! log), with no operations; so the table's logical communicators are the workload's groups
//! (those with a member in the table) plus that one.
//!
//! Size: by default only simulated ranks (representatives) are rows, so a 100,000-rank job
//! with 8 representatives gives an 8-rank table. [`TableOptions::expand`] copies each
//! representative's rows to every rank it stands for — only sensible for small jobs.
//!
//! Spans: a collective's GPU span runs from the rank's arrival to the network's completion
//! (an early NCCL kernel waits inside for its peers, as measured spans show), in epoch ns from
//! [`EPOCH_BASE_NS`]; `cpu_ts_ns` is the arrival; `line` is the task index + 1.

use commlens_core::assemble::assemble;
use commlens_core::{CollOp, CommIdx, CommMember, DevIdx, Device, GpuSpan, NcclVersion, OpKind, OpTable, ProcIdx, Process, SourceKind};
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::tuner::NcclEnv;
use commlens_model::Cluster;
use commlens_workload::{GroupId, GroupSel, Stream, Work, Workload};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::analytical::ModelCache;
use crate::engine::Run;

/// What writers record as the table's source.
pub const SOURCE_KIND: SourceKind = SourceKind::Simulated;

/// Simulated time 0 in epoch ns (2023-11-14T22:13:20Z): a fixed base keeps outputs identical
/// run to run and looks like a capture to tools that expect wall-clock times.
pub const EPOCH_BASE_NS: i64 = 1_700_000_000_000_000_000;

/// `commId` of the world handle added when the workload has no whole-job group.
const WORLD_TAG: u64 = u64::MAX;

#[derive(Debug, Clone, PartialEq)]
pub struct TableOptions {
    /// Give every rank its representative's rows (all `world` ranks in the table).
    pub expand: bool,
    /// NCCL release and environment whose choices the rows show (use the network's).
    pub version: NcclVersion,
    pub env: NcclEnv,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions { expand: false, version: DEFAULT_VERSION, env: NcclEnv::default() }
    }
}

/// One compute step on a rank's timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub start_ns: i64,
    pub end_ns: i64,
    /// Index into [`ComputeSpans::names`].
    pub name: u32,
    pub task: u32,
}

/// Compute steps of one table rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankSpans {
    pub rank: u32,
    pub dev: DevIdx,
    pub spans: Vec<Span>,
}

/// Compute spans of every table rank, names interned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ComputeSpans {
    pub names: Vec<String>,
    pub per_rank: Vec<RankSpans>,
}

/// µs on the simulation clock → epoch ns.
pub fn epoch_ns(us: f64) -> i64 {
    EPOCH_BASE_NS + (us * 1000.0).round() as i64
}

/// A `commId` for a group: mixed so that ids look like NCCL's hashes and never collide with
/// small numbers a test might use.
fn comm_id(tag: u64) -> u64 {
    let mut z = tag.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The table of simulated ranks (see the module documentation).
pub fn to_table(w: &Workload, run: &Run, cluster: &Cluster) -> (OpTable, ComputeSpans) {
    to_table_with(w, run, cluster, &TableOptions::default())
}

pub fn to_table_with(w: &Workload, run: &Run, cluster: &Cluster, opts: &TableOptions) -> (OpTable, ComputeSpans) {
    let gpn = cluster.gpus_per_node.max(1);
    let rows: Vec<u32> = if opts.expand {
        (0..w.world).filter(|&r| run.rank(w.representative_of(r)).is_some()).collect()
    } else {
        run.ranks.iter().map(|r| r.rank).collect()
    };
    let whole = w.groups.iter().any(|g| g.ranks.len() == w.world as usize && g.ranks.iter().enumerate().all(|(i, &r)| r == i as u32));
    // Per group the table's ranks are in: members per node (its node count is the map's size).
    let mut needed: Vec<GroupId> = rows.iter().flat_map(|&r| w.membership[r as usize].iter().copied()).collect();
    needed.sort_unstable();
    needed.dedup();
    let built: Vec<FxHashMap<u32, u32>> = needed
        .par_iter()
        .map(|&g| {
            let mut m = FxHashMap::default();
            for &x in &w.group(g).ranks {
                *m.entry(x / gpn).or_insert(0u32) += 1;
            }
            m
        })
        .collect();
    let mut group_nodes: Vec<Option<FxHashMap<u32, u32>>> = vec![None; w.groups.len()];
    for (g, m) in needed.iter().zip(built) {
        group_nodes[g.0 as usize] = Some(m);
    }
    // Handles are numbered over the whole table: each row's first one follows the rows before.
    let mut comm_base = Vec::with_capacity(rows.len());
    let mut n_comms = 0usize;
    for &r in &rows {
        comm_base.push(n_comms);
        n_comms += w.membership[r as usize].len() + usize::from(!whole);
    }
    // Rows are built on every core (each reads only the run and the workload; the model cache
    // only memoises, so a cache per task gives the same timings), then appended in rank order,
    // compute names interned in that order: the table is the same for any thread count.
    let built: Vec<RowOut<'_>> = rows
        .par_iter()
        .enumerate()
        .map_init(
            || ModelCache::new(cluster, opts.version, opts.env.clone()),
            |model, (i, &r)| table_row(w, run, gpn, whole, &group_nodes, opts.version, model, i, r, comm_base[i]),
        )
        .collect();
    let mut t = OpTable { sources: vec![format!("simulated:{}", w.name)], ..OpTable::default() };
    let mut spans = ComputeSpans::default();
    let mut name_ix: FxHashMap<&str, u32> = FxHashMap::default();
    t.comms.reserve(n_comms);
    for row in built {
        t.processes.push(row.process);
        t.devices.push(row.device);
        t.comms.extend(row.comms);
        t.per_rank.push(row.ops);
        let Some(compute) = row.compute else { continue };
        let mut rs = RankSpans { rank: row.rank, dev: row.dev, spans: Vec::with_capacity(compute.len()) };
        for (name, mut sp) in compute {
            sp.name = *name_ix.entry(name).or_insert_with(|| {
                spans.names.push(name.to_string());
                spans.names.len() as u32 - 1
            });
            rs.spans.push(sp);
        }
        spans.per_rank.push(rs);
    }
    assemble(&mut t);
    (t, spans)
}

/// One table rank, built apart from the others.
struct RowOut<'w> {
    rank: u32,
    dev: DevIdx,
    process: Process,
    device: Device,
    comms: Vec<CommMember>,
    ops: commlens_core::RankOps,
    /// Compute spans with their names (interned when rows are appended); None for a rank
    /// whose representative was not simulated.
    compute: Option<Vec<(&'w str, Span)>>,
}

/// Row `i` of the table: rank `r`, its handles numbered from `comm_base`.
#[allow(clippy::too_many_arguments)]
fn table_row<'w>(
    w: &'w Workload,
    run: &Run,
    gpn: u32,
    whole: bool,
    group_nodes: &[Option<FxHashMap<u32, u32>>],
    version: NcclVersion,
    model: &mut ModelCache,
    i: usize,
    r: u32,
    comm_base: usize,
) -> RowOut<'w> {
    let (proc, dev) = (ProcIdx(i as u32), DevIdx(i as u32));
    let process = Process { host: format!("node{}", r / gpn), pid: r, nccl_version: Some(version) };
    let device = Device { proc, cuda_dev: Some(r % gpn), nvml_dev: Some(r % gpn), bus_id: None, global_rank: None, local_rank: None };
    let mut ops = commlens_core::RankOps::new();
    // Handles: the rank's groups in membership order, then the world handle.
    let mut comms: Vec<CommMember> = Vec::with_capacity(w.membership[r as usize].len() + 1);
    let mut handles: Vec<(GroupId, CommIdx)> = Vec::with_capacity(w.membership[r as usize].len());
    for &g in &w.membership[r as usize] {
        let grp = w.group(g);
        let nodes = group_nodes[g.0 as usize].as_ref().expect("built for every group of a table rank");
        let my_node = r / gpn;
        let mut c = CommMember::new(proc, 0x7f00_0000_0000 + ((g.0 as u64) << 8));
        c.comm_id = Some(comm_id(g.0 as u64));
        c.nranks = Some(grp.ranks.len() as u32);
        c.rank = w.comm_rank(g, r);
        c.device = Some(dev);
        c.n_nodes = Some(nodes.len() as u32);
        c.local_ranks = nodes.get(&my_node).copied();
        c.local_rank = Some(grp.ranks.iter().take_while(|&&x| x != r).filter(|&&x| x / gpn == my_node).count() as u32);
        c.init_complete = true;
        handles.push((g, CommIdx((comm_base + comms.len()) as u32)));
        comms.push(c);
    }
    if !whole {
        let mut c = CommMember::new(proc, 0x7e00_0000_0000);
        c.comm_id = Some(comm_id(WORLD_TAG));
        c.nranks = Some(w.world);
        c.rank = Some(r);
        c.device = Some(dev);
        c.n_nodes = Some(w.world.div_ceil(gpn));
        c.local_ranks = Some(gpn.min(w.world - (r / gpn) * gpn));
        c.local_rank = Some(r % gpn);
        c.init_complete = true;
        comms.push(c);
    }
    let rep = w.representative_of(r);
    let Some(rr) = run.rank(rep) else { return RowOut { rank: r, dev, process, device, comms, ops, compute: None } };
    let prog = w.program_of(r);
    // Per handle: operations so far, NCCL's opCount, and the task that last bumped it
    // (the Send/Recv of one grouped call share an opCount).
    let mut counters: FxHashMap<CommIdx, (u64, u64, u32)> = FxHashMap::default();
    for o in &rr.ops {
        let g = if r == rep {
            o.group
        } else {
            let grp = w.group(o.group);
            match w.group_of(r, GroupSel { kind: grp.kind, tag: grp.tag }) {
                Some(g) => g,
                None => continue,
            }
        };
        let Some(&(_, comm)) = handles.iter().find(|h| h.0 == g) else { continue };
        let grp = w.group(g);
        let cnt = counters.entry(comm).or_insert((0, 0, u32::MAX));
        let comm_seq = cnt.0;
        cnt.0 += 1;
        if cnt.2 != o.task {
            if cnt.2 != u32::MAX {
                cnt.1 += 1;
            }
            cnt.2 = o.task;
        }
        let seq = cnt.1;
        let timing = match o.kind {
            OpKind::Send | OpKind::Recv => {
                let peer = o.peer.and_then(|p| grp.ranks.get(p as usize)).copied().unwrap_or(r);
                let nn = if peer / gpn == r / gpn { 1 } else { 2 };
                model.timing(OpKind::Send, o.bytes, 2, nn)
            }
            kind => {
                let nn = group_nodes[g.0 as usize].as_ref().map_or(1, |m| m.len() as u32);
                model.timing(kind, o.bytes, grp.ranks.len() as u32, nn)
            }
        };
        let rooted = matches!(o.kind, OpKind::Broadcast | OpKind::Reduce | OpKind::Gather | OpKind::Scatter);
        let mut op = CollOp::new(proc, dev, comm, o.kind, o.count, o.dtype);
        op.bytes = o.bytes;
        op.comm_seq = comm_seq;
        op.seq = seq;
        op.redop = o.redop;
        op.root = rooted.then_some(o.root);
        op.peer = o.peer;
        op.algo = timing.algo;
        op.proto = timing.proto;
        op.channels = (timing.n_channels > 0).then(|| (0, (timing.n_channels - 1).min(u16::MAX as u32) as u16));
        op.stream = Some(match o.stream {
            Stream::Compute => 0,
            Stream::Comm(k) => k as u64 + 1,
        });
        op.cpu_ts_ns = Some(epoch_ns(o.arrive_us));
        op.gpu = Some(GpuSpan { start_ns: epoch_ns(o.arrive_us), end_ns: epoch_ns(o.end_us) });
        op.line = o.task as u64 + 1;
        comms[comm.ix() - comm_base].note_op(o.kind);
        ops.push(op);
    }
    let compute = rr
        .compute
        .iter()
        .map(|c| {
            let name = match prog.tasks.get(c.task as usize).map(|t| &t.work) {
                Some(Work::Compute(x)) => x.name.as_str(),
                _ => "compute",
            };
            (name, Span { start_ns: epoch_ns(c.start_us), end_ns: epoch_ns(c.end_us), name: 0, task: c.task })
        })
        .collect();
    RowOut { rank: r, dev, process, device, comms, ops, compute: Some(compute) }
}

/// The summary as a few lines for the terminal (SimAI's terms first).
pub fn summary_text(run: &Run) -> String {
    use std::fmt::Write;
    let s = &run.summary;
    let mut out = String::new();
    let _ = writeln!(out, "simulated {} of {} ranks; {} iteration(s), {:.1} µs each on average, {:.1} µs in all", s.ranks_simulated, s.world, s.iterations, s.mean_iteration_us, s.total_us);
    let _ = writeln!(out, "slowest rank {}: compute {:.1} µs, exposed communication {:.1} µs, bubble {:.1} µs", s.slowest_rank, s.compute_us, s.exposed_comm_us, s.bubble_us);
    let terms: Vec<String> = s.exposed_us.iter().map(|k| format!("{} {:.1}", k.label, k.us)).collect();
    let _ = writeln!(out, "exposed per parallelism (µs): {}", terms.join(", "));
    let _ = writeln!(out, "{} tasks, {} network operations, {} events", run.stats.tasks, run.stats.net_ops, run.stats.events);
    out
}
