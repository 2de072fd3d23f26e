//! Kernel traces (Kineto or nsys) → the canonical [`OpTable`], assembled.
//!
//! * One process and one device per [`RankTrace`] (host `?` when the source
//!   has no host name; processes of different traces are never merged here).
//! * One [`CollOp`] per CPU-side collective that has a kind (`wait` calls
//!   are skipped), with its first linked kernel attached (GPU span, kernel
//!   info, algorithm/protocol/reduction from the kernel name); further
//!   kernels of the same call and kernels without a CPU call become their own
//!   rows of *unknown* size (`DataType::Unknown`, so `CollOp::size` is
//!   `None` and bytes are never counted twice nor shown as 0 B). A kernel
//!   with neither a CPU call nor a launch record in a trace that records CPU
//!   calls was launched before the capture and is not an operation of it.
//! * Sizes: from the CPU call's (or kernel's) metadata (an AllToAll's
//!   count is per peer, as NCCL's: PyTorch's whole buffer divided by the
//!   group size); for ring AllReduce
//!   kernels of a job whose network annotations agree, derived from them
//!   ([`super::jobs::ring_sizes`]); unknown otherwise.
//! * Jobs ([`super::jobs::group_jobs`]): traces whose capture spans do not
//!   overlap are separate jobs, named in [`ConvertNotes::warnings`], each with
//!   its own world handle and implied world size.
//! * Communicator handles: one per process group (`Process Group Name` +
//!   ranks, `comm_id` = a hash of both, shared by all members, `nranks` and
//!   the member's rank from the ranks list); without group metadata, one per
//!   CUDA stream (PyTorch gives every group its own NCCL stream), which
//!   `assemble` then groups by operation sequence; a rank without any group
//!   metadata whose collectives all ran on one stream, in a trace naming at
//!   most one group, puts them on the world group (PyTorch's default group),
//!   so they get the world's size and bus bandwidth can be computed.
//! * A rank that knows its global rank and the world size (`distributedInfo`;
//!   for nsys, implied when every rank has a distinct `MPI_RANKS` rank) also
//!   gets an operation-less `world` handle with that rank, so that `assemble`
//!   takes global ranks from the profiler instead of host order, unless one
//!   of its groups already is the world (ranks `0..n`): that group says the
//!   same, and a second, empty world communicator would be a phantom.
//! * A call of a coalesced group (`batch_isend_irecv`) is timed by the
//!   group's kernel (see [`super::link`]); Send/Recv get their peer from
//!   `Dst Rank`/`Src Rank`.
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
    /// NCCL kernels with neither a CPU call nor a launch record, in traces
    /// that record CPU calls (launched before the capture started): not
    /// operations of the capture, so not counted as such.
    pub kernels_unlaunched: u64,
    /// Operations whose size the trace does not give (shown as unknown).
    pub ops_size_unknown: u64,
    /// Operations whose size was derived from network annotations.
    pub ops_size_from_net: u64,
    /// Things a user should see: several jobs in the inputs, kernels left out,
    /// derived sizes.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CommKey {
    Pg(String, Option<Vec<u32>>),
    Stream(u64),
    Unknown,
    /// The job's world group (index of the job among the inputs).
    World(usize),
}

/// Builds one assembled table from all traces (one per rank file, or nsys
/// files holding several processes).
pub fn to_op_table(traces: &[KernelTrace]) -> (OpTable, ConvertNotes) {
    let mut t = OpTable::default();
    let mut notes = ConvertNotes::default();
    let jobs = super::jobs::group_jobs(traces);
    notes.warnings.extend(super::jobs::jobs_warning(traces, &jobs));
    let mut job_of = vec![0usize; traces.len()];
    for (j, job) in jobs.iter().enumerate() {
        for &i in &job.traces {
            job_of[i] = j;
        }
    }
    let mut ctx: Vec<JobCtx> = Vec::new();
    for job in &jobs {
        let members: Vec<&KernelTrace> = job.traces.iter().map(|&i| &traces[i]).collect();
        // Without a stated world size, distinct global ranks on every rank
        // (nsys MPI_RANKS, NCCL's annotations) imply one: the highest rank + 1.
        let mut distinct: Vec<u32> = members.iter().flat_map(|t| &t.ranks).filter_map(|r| r.rank).collect();
        let n_ranks: usize = members.iter().map(|t| t.ranks.len()).sum();
        distinct.sort_unstable();
        distinct.dedup();
        let implied = (n_ranks > 0 && distinct.len() == n_ranks && distinct.last() == Some(&(n_ranks as u32 - 1)))
            .then_some(n_ranks as u32);
        let ring = implied.map(|n| super::jobs::ring_sizes(&members, n)).unwrap_or_default();
        ctx.push(JobCtx { implied, ring });
    }
    for (i, tr) in traces.iter().enumerate() {
        t.sources.push(tr.path.clone());
        let job = job_of[i];
        for r in &tr.ranks {
            let world = tr.world_size.or(ctx[job].implied);
            add_rank(&mut t, &mut notes, tr, r, (job, world), &ctx[job].ring);
        }
    }
    if notes.kernels_unlaunched > 0 {
        notes.warnings.push(format!(
            "{} NCCL kernels have no launch record and no CPU call (launched before the capture started): \
             not counted as operations",
            notes.kernels_unlaunched
        ));
    }
    if notes.ops_size_from_net > 0 {
        notes.warnings.push(format!(
            "message sizes of {} ring AllReduce operations are derived from NCCL's network annotations \
             (size = network bytes × n / (2(n−1)), every rank with network traffic agreeing)",
            notes.ops_size_from_net
        ));
    }
    assemble::assemble(&mut t);
    (t, notes)
}

/// What a job's traces say together.
struct JobCtx {
    implied: Option<u32>,
    /// Sizes of the job's ring AllReduce kernels by position ([`super::jobs::ring_sizes`]).
    ring: Vec<Option<u64>>,
}

struct Row {
    time: i64,
    key: CommKey,
    op: CollOp,
}

fn add_rank(
    t: &mut OpTable,
    notes: &mut ConvertNotes,
    tr: &KernelTrace,
    r: &RankTrace,
    (job, world): (usize, Option<u32>),
    ring: &[Option<u64>],
) {
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
    t.per_rank.push(commlens_core::RankOps::new());
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
    let mut ring_i = 0usize;
    for (i, k) in r.kernels.iter().enumerate() {
        if absorbed[i] {
            continue;
        }
        let cpu: Option<&CpuCollective> = k.cpu_op.map(|c| &r.cpu_ops[c as usize]);
        // A kernel launched before a capture that records CPU calls: its
        // call is not in the trace, and it is no operation of the capture.
        if cpu.is_none() && k.launch.is_none() && k.meta.is_none() && !r.cpu_ops.is_empty() {
            notes.kernels_unlaunched += 1;
            continue;
        }
        let Some(kind) = cpu.and_then(|c| c.kind).or(k.parsed.kind) else {
            notes.kernels_without_kind += 1;
            continue;
        };
        let meta = cpu.map(|c| &c.meta).or(k.meta.as_deref());
        let key = comm_key(meta, Some(k));
        let mut row = make_op(proc, dev, kind, meta, Some(k), base);
        // A second kernel of one call carries no count of its own.
        if cpu.is_some() {
            (row.count, row.bytes, row.dtype) = (0, 0, DataType::Unknown(-1));
        }
        if cpu.is_none() && kind == OpKind::AllReduce && k.parsed.algo == Some(commlens_core::Algorithm::Ring) {
            // The job's network annotations may give the size (see `jobs`).
            if let (Some(Some(size)), None) = (ring.get(ring_i), meta) {
                let dtype = k.parsed.dtype.filter(|d| d.size_bytes().is_some()).unwrap_or(DataType::Uint8);
                let elem = dtype.size_bytes().unwrap_or(1);
                (row.count, row.dtype, row.bytes) = (size / elem, dtype, *size);
                notes.ops_size_from_net += 1;
            }
            ring_i += 1;
        }
        row.tid = k.launch.map_or(0, |l| l.tid as u32);
        row.cpu_ts_ns = k.launch.map(|l| base + l.ts_ns);
        rows.push(Row { time: k.start_ns, key, op: row });
    }
    rows.sort_by_key(|r| (r.time, r.op.line));
    // No group metadata at all, one NCCL stream, and a known world: the
    // rank's collectives ran on one communicator, and the only group the
    // trace names is the world (PyTorch's default group).
    let mut streams: Vec<u64> =
        rows.iter().filter_map(|x| if let CommKey::Stream(s) = x.key { Some(s) } else { None }).collect();
    streams.sort_unstable();
    streams.dedup();
    let no_groups = rows.iter().all(|x| matches!(x.key, CommKey::Stream(_)));
    let world_key = CommKey::World(job);
    if no_groups && streams.len() == 1 && world.is_some() && r.rank.is_some() && tr.process_groups.len() <= 1 {
        for x in &mut rows {
            x.key = world_key.clone();
        }
    }
    notes.ops_size_unknown += rows.iter().filter(|x| x.op.size().is_none()).count() as u64;

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
    // The operation-less world handle only adds what no handle says yet: a
    // group of the whole world (PyTorch's default group, named by its ops'
    // metadata) already gives the rank its global rank, and a second world
    // handle would be an empty communicator of its own.
    let world_named = |k: &CommKey| match (k, world) {
        (CommKey::Pg(_, Some(ranks)), Some(n)) => ranks.iter().copied().eq(0..n),
        _ => false,
    };
    if r.rank.is_some() && world.is_some() && !handles.contains_key(&world_key) && !handles.keys().any(world_named) {
        new_handle(t, tr, r, (proc, dev, world), &world_key);
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
        CommKey::World(job) => {
            let label = format!("world:{job}:{}", world.unwrap_or(0));
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
    let count = meta.and_then(|m| match kind {
        OpKind::AllGather => m.in_nelems.or(m.out_nelems),
        OpKind::ReduceScatter => m.out_nelems.or(m.in_nelems),
        // PyTorch records the whole send buffer; NCCL's count (and the
        // table's) is what goes to each peer. Uneven splits give the mean.
        OpKind::AllToAll => {
            let n = m.pg_ranks.as_ref().map(|r| r.len() as u32).filter(|&n| n > 0).or(m.group_size).filter(|&n| n > 0);
            m.in_nelems.or(m.out_nelems).map(|c| n.map_or(c, |n| c / n as u64))
        }
        _ => m.in_nelems.or(m.out_nelems),
    });
    let reduces = matches!(kind, OpKind::AllReduce | OpKind::Reduce | OpKind::ReduceScatter);
    let dtype = meta
        .and_then(|m| m.dtype)
        .or_else(|| k.filter(|_| reduces).and_then(|k| k.parsed.dtype))
        .unwrap_or(DataType::Unknown(-1));
    // Without a count the size is unknown, whatever the type (`CollOp::size`).
    let dtype = if count.is_some() { dtype } else { DataType::Unknown(-1) };
    let count = count.unwrap_or(0);
    let bytes = dtype.size_bytes().map_or(0, |s| s.saturating_mul(count));
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
        peer: meta.and_then(|m| m.peer).filter(|_| kind.is_p2p()),
        algo: k.and_then(|k| k.parsed.algo),
        proto: k.and_then(|k| k.parsed.proto),
        channels: None,
        sendbuff: 0,
        recvbuff: 0,
        stream: k.map(|k| k.stream),
        cpu_ts_ns: None,
        gpu: k.map(|k| GpuSpan { start_ns: base + k.start_ns, end_ns: base + k.end_ns }),
        kernel: k.map(|k| std::sync::Arc::new(k.info())),
        line: k.map_or(0, |k| k.event),
        recovered: false,
    }
}
