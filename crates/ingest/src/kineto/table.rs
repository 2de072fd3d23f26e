//! Kernel traces (Kineto or nsys) → the canonical [`OpTable`], assembled.
//!
//! * One process and one device per [`RankTrace`] (host `?` when the source
//!   has no host name; processes of different traces are never merged here).
//! * One [`CollOp`] per CPU-side collective that has a kind (`wait` calls
//!   are skipped), with its first linked kernel attached (GPU span, kernel
//!   info, algorithm/protocol/reduction from the kernel name); further
//!   kernels of the same call and kernels without a CPU call become their own
//!   rows, with count 0 (so bytes are never counted twice).
//! * Communicator handles: one per process group (`Process Group Name` +
//!   ranks, `comm_id` = a hash of both, shared by all members, `nranks` and
//!   the member's rank from the ranks list); without group metadata, one per
//!   CUDA stream (PyTorch gives every group its own NCCL stream), which
//!   `assemble` then groups by operation sequence.
//! * A rank that knows its global rank and the world size (`distributedInfo`;
//!   for nsys, implied when every rank has a distinct `MPI_RANKS` rank) also
//!   gets an operation-less `world` handle with that rank, so that `assemble`
//!   takes global ranks from the profiler instead of host order.
//! * Rows are in time order (CPU call, else kernel start); `line` is the
//!   1-based position in that order; times are epoch ns when the trace gives
//!   a base time.

use super::trace::{CollMeta, CpuCollective, KernelTrace, NcclKernel, RankTrace};
use super::values::fnv;
use commlens_core::model::{CommIdx, DevIdx, ProcIdx};
use commlens_core::{assemble, CollOp, CommMember, DataType, Device, GpuSpan, OpKind, OpTable, Process};
use std::collections::HashMap;

/// What the conversion left out, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertNotes {
    pub ops: u64,
    /// Kernels with no known collective (`Generic`) and no CPU call naming one.
    pub kernels_without_kind: u64,
    /// CPU calls with no collective kind and no kernel (`wait`, unnamed calls).
    pub cpu_calls_skipped: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CommKey {
    Pg(String, Option<Vec<u32>>),
    Stream(u64),
    Unknown,
    World,
}

/// Builds one assembled table from all traces (one per rank file, or nsys
/// files holding several processes).
pub fn to_op_table(traces: &[KernelTrace]) -> (OpTable, ConvertNotes) {
    let mut t = OpTable::default();
    let mut notes = ConvertNotes::default();
    // Without a stated world size, distinct global ranks on every rank (nsys
    // MPI_RANKS) imply one: the highest rank + 1.
    let known: Vec<u32> = traces.iter().flat_map(|t| &t.ranks).filter_map(|r| r.rank).collect();
    let n_ranks: usize = traces.iter().map(|t| t.ranks.len()).sum();
    let mut distinct = known.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let implied = (n_ranks > 0 && distinct.len() == n_ranks).then(|| distinct.last().map(|m| m + 1)).flatten();
    for tr in traces {
        t.sources.push(tr.path.clone());
        for r in &tr.ranks {
            add_rank(&mut t, &mut notes, tr, r, tr.world_size.or(implied));
        }
    }
    assemble::assemble(&mut t);
    (t, notes)
}

struct Row {
    time: i64,
    key: CommKey,
    op: CollOp,
}

fn add_rank(t: &mut OpTable, notes: &mut ConvertNotes, tr: &KernelTrace, r: &RankTrace, world: Option<u32>) {
    let proc = ProcIdx(t.processes.len() as u32);
    t.processes.push(Process {
        host: r.host.clone().unwrap_or_else(|| "?".into()),
        pid: r.pid,
        nccl_version: tr.nccl_version,
    });
    let dev = DevIdx(t.devices.len() as u32);
    t.devices.push(Device {
        proc,
        cuda_dev: r.device,
        nvml_dev: None,
        bus_id: r.bus_id,
        global_rank: None,
        local_rank: None,
    });
    t.per_rank.push(Vec::new());
    let base = tr.base_time_ns;
    let mut rows: Vec<Row> = Vec::new();
    let mut absorbed = vec![false; r.kernels.len()];
    for op in &r.cpu_ops {
        let first = op.kernels.first().map(|&k| k as usize);
        let k0 = first.map(|k| &r.kernels[k]);
        let Some(kind) = op.kind.or(k0.and_then(|k| k.parsed.kind)) else {
            if op.kernels.is_empty() {
                notes.cpu_calls_skipped += 1;
            }
            continue;
        };
        if let Some(k) = first {
            absorbed[k] = true;
        }
        let meta = if op.meta.pg_name.is_some() || op.meta.pg_ranks.is_some() {
            Some(&op.meta)
        } else {
            k0.and_then(|k| k.meta.as_deref()).or(Some(&op.meta))
        };
        let key = comm_key(meta, k0);
        let mut row = make_op(proc, dev, kind, meta, k0, base);
        row.tid = op.tid as u32;
        row.cpu_ts_ns = Some(base + op.ts_ns);
        row.line = op.event;
        rows.push(Row { time: op.ts_ns, key, op: row });
    }
    for (i, k) in r.kernels.iter().enumerate() {
        if absorbed[i] {
            continue;
        }
        let cpu: Option<&CpuCollective> = k.cpu_op.map(|c| &r.cpu_ops[c as usize]);
        let Some(kind) = cpu.and_then(|c| c.kind).or(k.parsed.kind) else {
            notes.kernels_without_kind += 1;
            continue;
        };
        let meta = cpu.map(|c| &c.meta).or(k.meta.as_deref());
        let key = comm_key(meta, Some(k));
        let mut row = make_op(proc, dev, kind, meta, Some(k), base);
        // A second kernel of one call carries no count of its own.
        if cpu.is_some() {
            (row.count, row.bytes) = (0, 0);
        }
        row.tid = k.launch.map_or(0, |l| l.tid as u32);
        row.cpu_ts_ns = k.launch.map(|l| base + l.ts_ns);
        rows.push(Row { time: k.start_ns, key, op: row });
    }
    rows.sort_by_key(|r| (r.time, r.op.line));

    let mut handles: HashMap<CommKey, CommIdx> = HashMap::new();
    let mut next_seq: HashMap<CommIdx, u64> = HashMap::new();
    for (i, row) in rows.into_iter().enumerate() {
        let comm =
            *handles.entry(row.key.clone()).or_insert_with(|| new_handle(t, tr, r, (proc, dev, world), &row.key));
        let mut op = row.op;
        let n = next_seq.entry(comm).or_insert(0);
        op.comm = comm;
        op.comm_seq = *n;
        if op.seq == u64::MAX {
            op.seq = *n;
        }
        *n += 1;
        op.line = i as u64 + 1;
        t.comms[comm.ix()].note_op(op.kind);
        t.per_rank[dev.ix()].push(op);
        notes.ops += 1;
    }
    if r.rank.is_some() && world.is_some() {
        new_handle(t, tr, r, (proc, dev, world), &CommKey::World);
    }
}

fn comm_key(meta: Option<&CollMeta>, k: Option<&NcclKernel>) -> CommKey {
    match meta {
        Some(m) if m.pg_name.is_some() || m.pg_ranks.is_some() => {
            CommKey::Pg(m.pg_name.clone().unwrap_or_default(), m.pg_ranks.clone())
        }
        _ => k.map_or(CommKey::Unknown, |k| CommKey::Stream(k.stream)),
    }
}

fn new_handle(
    t: &mut OpTable,
    tr: &KernelTrace,
    r: &RankTrace,
    (proc, dev, world): (ProcIdx, DevIdx, Option<u32>),
    key: &CommKey,
) -> CommIdx {
    let (label, comm_id, nranks, rank) = match key {
        CommKey::Pg(name, ranks) => {
            let known = tr.process_groups.iter().find(|g| &g.name == name);
            let ranks = ranks.clone().or_else(|| known.map(|g| g.ranks.clone()).filter(|r| !r.is_empty()));
            let label = format!("pg:{name}:{ranks:?}");
            let size = ranks.as_ref().map(|v| v.len() as u32).or_else(|| known.and_then(|g| g.size));
            let rank = ranks.as_ref().and_then(|v| v.iter().position(|&x| Some(x) == r.rank)).map(|p| p as u32);
            (label.clone(), Some(fnv(label.as_bytes())), size, rank)
        }
        CommKey::Stream(s) => (format!("stream:{s}"), None, None, None),
        CommKey::Unknown => ("unknown".to_string(), None, None, None),
        CommKey::World => {
            let label = format!("world:{}", world.unwrap_or(0));
            (label.clone(), Some(fnv(label.as_bytes())), world, r.rank)
        }
    };
    let mut c = CommMember::new(proc, fnv(label.as_bytes()));
    c.comm_id = comm_id;
    c.nranks = nranks;
    c.rank = rank;
    c.device = Some(dev);
    c.init_complete = true;
    t.comms.push(c);
    CommIdx(t.comms.len() as u32 - 1)
}

/// A row without its communicator and positions (filled in time order).
fn make_op(
    proc: ProcIdx,
    dev: DevIdx,
    kind: OpKind,
    meta: Option<&CollMeta>,
    k: Option<&NcclKernel>,
    base: i64,
) -> CollOp {
    let count = meta
        .and_then(|m| match kind {
            OpKind::AllGather => m.in_nelems.or(m.out_nelems),
            OpKind::ReduceScatter => m.out_nelems.or(m.in_nelems),
            _ => m.in_nelems.or(m.out_nelems),
        })
        .unwrap_or(0);
    let reduces = matches!(kind, OpKind::AllReduce | OpKind::Reduce | OpKind::ReduceScatter);
    let dtype = meta
        .and_then(|m| m.dtype)
        .or_else(|| k.filter(|_| reduces).and_then(|k| k.parsed.dtype))
        .unwrap_or(DataType::Unknown(-1));
    let bytes = dtype.size_bytes().map_or(0, |s| s * count);
    CollOp {
        proc,
        dev,
        comm: CommIdx(0),
        comm_seq: 0,
        tid: 0,
        seq: meta.and_then(|m| m.seq).unwrap_or(u64::MAX),
        kind,
        count,
        dtype,
        bytes,
        redop: k.filter(|_| reduces).and_then(|k| k.parsed.redop),
        root: None,
        peer: None,
        algo: k.and_then(|k| k.parsed.algo),
        proto: k.and_then(|k| k.parsed.proto),
        channels: None,
        sendbuff: 0,
        recvbuff: 0,
        stream: k.map(|k| k.stream),
        cpu_ts_ns: None,
        gpu: k.map(|k| GpuSpan { start_ns: base + k.start_ns, end_ns: base + k.end_ns }),
        kernel: k.map(|k| Box::new(k.info())),
        line: k.map_or(0, |k| k.event),
        recovered: false,
    }
}
