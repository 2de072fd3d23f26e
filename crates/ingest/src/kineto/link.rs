//! Turns what the streaming pass kept ([`Collector`]) into a [`KernelTrace`]:
//! NCCL kernels in start order with parsed names, CPU-side collectives
//! (each `nccl:*` annotation folded into the `record_param_comms` op that
//! encloses it on its thread), the CPU op ↔ kernel links, the rank and its
//! process groups.
//!
//! Links use only ids the profiler recorded:
//! 1. **External id**: newer Kineto gives a kernel the `External id` of the
//!    CPU op that launched it. Older Kineto writes the correlation id there
//!    instead (`External id == correlation`), which names no CPU op, so such
//!    ids are not used.
//! 2. **Launch nesting**: the kernel's correlation id names its launch call
//!    (`cudaLaunchKernel`, …); the CPU collective whose interval contains that
//!    call on the same thread launched the kernel.
//!
//! A coalesced group (`batch_isend_irecv`, `_coalescing_manager`) is one
//! exception the ids cannot express: its calls (`send`, `recv`, …) are
//! recorded but launch nothing, and the closing `nccl:coalesced` annotation,
//! which names no collective, launches the one kernel of the group (its
//! `External id`, if any, is the annotation's). The profiler's link stays in
//! [`RankTrace::links`]; [`spread_coalesced`] gives the kernel to the calls
//! of the group, so that each becomes one operation timed by that kernel.
//!
//! It also orders the non-NCCL GPU activities ([`RankTrace::compute`]) and
//! gives each the lag from its launch call, found by correlation id.

use super::stream::{Args, Collector, RawCompute, RawEvent, RawLaunch};
use super::trace::*;
use super::values::{dtype_from_kineto, op_kind_from_collective};
use crate::kernel_name;
use commlens_core::{NcclVersion, SourceKind};
use std::collections::{HashMap, HashSet};

/// Containment slack for rounding of fractional µs timestamps.
const SLACK_NS: i64 = 1_000;

pub(crate) fn finish(mut c: Collector, path: &str, opts: &TraceOptions) -> Result<KernelTrace, TraceError> {
    let mut warnings = Vec::new();
    let dist = c.dist.unwrap_or_default();
    let mut kernels = build_kernels(&c.kernels);
    let mut cpu_ops = build_cpu_ops(&c.cpu);
    let launch_of: HashMap<u64, Launch> = {
        let wanted: HashSet<u64> = kernels.iter().filter_map(|k| k.correlation).collect();
        let mut m = HashMap::new();
        for l in c.launches.iter().filter(|l| wanted.contains(&l.correlation)) {
            m.entry(l.correlation).or_insert(Launch { tid: l.tid, ts_ns: l.ts_ns });
        }
        m
    };
    for k in &mut kernels {
        k.launch = k.correlation.and_then(|corr| launch_of.get(&corr).copied());
    }
    let links = link(&mut kernels, &mut cpu_ops);
    spread_coalesced(&mut kernels, &mut cpu_ops);

    let mut devices: Vec<(u32, usize)> = Vec::new();
    for d in kernels.iter().filter_map(|k| k.device) {
        match devices.iter_mut().find(|(x, _)| *x == d) {
            Some(e) => e.1 += 1,
            None => devices.push((d, 1)),
        }
    }
    devices.sort_by_key(|&(d, n)| (std::cmp::Reverse(n), d));
    if devices.len() > 1 {
        warnings.push(format!(
            "NCCL kernels ran on {} devices ({}): treated as one rank on device {}",
            devices.len(),
            devices.iter().map(|(d, n)| format!("{n} on {d}")).collect::<Vec<_>>().join(", "),
            devices[0].0
        ));
    }
    let device = devices.first().map(|d| d.0);
    let gpu_name = device.and_then(|d| c.devices.iter().find(|p| p.id.u32() == Some(d)).and_then(|p| p.name.0.clone()));
    // Kernels are started by launch calls, copies and fills by other runtime calls.
    let mut calls = std::mem::take(&mut c.other_calls);
    calls.extend_from_slice(&c.launches);
    let (compute, off_device) = build_compute(&mut c.compute, &mut calls, device);
    drop(calls);
    if off_device > 0 {
        warnings.push(format!(
            "{off_device} GPU activities ran on another device than the NCCL kernels and are left out of compute"
        ));
    }
    let pid = most_common(c.cpu.iter().map(|e| e.pid)).or_else(|| most_common(c.steps.iter().map(|e| e.pid)));

    let mut process_groups: Vec<ProcessGroup> = dist
        .pg_config
        .0
        .iter()
        .map(|pg| ProcessGroup {
            name: pg.pg_name.0.clone().unwrap_or_default(),
            desc: pg.pg_desc.0.clone(),
            ranks: pg.ranks.0.clone().unwrap_or_default(),
            size: pg.pg_size.u32(),
            backend: pg.backend_config.0.clone(),
        })
        .collect();
    let metas = cpu_ops.iter().map(|o| &o.meta).chain(kernels.iter().filter_map(|k| k.meta.as_deref()));
    for m in metas {
        let Some(name) = &m.pg_name else { continue };
        if !process_groups.iter().any(|g| &g.name == name) {
            process_groups.push(ProcessGroup {
                name: name.clone(),
                desc: m.pg_desc.clone(),
                ranks: m.pg_ranks.clone().unwrap_or_default(),
                size: m.group_size,
                backend: None,
            });
        }
    }

    let mut names = Names::default();
    let mut ranges: Vec<Range> = c
        .steps
        .iter()
        .map(|e| Range {
            pid: e.pid as u32,
            tid: e.tid,
            start_ns: e.ts_ns,
            end_ns: e.ts_ns + e.dur_ns,
            kind: RangeKind::ProfilerStep,
            name: names.intern(&e.name),
            domain: None,
        })
        .collect();
    ranges.sort_by_key(|r| (r.start_ns, r.tid));

    let mut stats = c.other_comm;
    stats.events = c.events;
    stats.gpu_kernels = c.gpu_kernels;
    stats.nccl_kernels = kernels.len() as u64;
    stats.kernels_without_kind = kernels.iter().filter(|k| k.parsed.kind.is_none()).count() as u64;
    stats.cpu_collectives = cpu_ops.len() as u64;
    stats.launches = c.launches.len() as u64;
    stats.linked_kernels = links.len() as u64;
    stats.skipped = std::mem::take(&mut c.skipped);
    if let Some(w) = stats.skipped.warning("events") {
        // First, so that a summary showing only a few warnings shows it.
        warnings.insert(0, w);
    }
    warn_other_comm(&stats, &mut warnings);
    if dist.rank.0.is_none() {
        warnings.push("no distributedInfo.rank: the global rank is unknown".to_string());
    }

    if kernels.is_empty() {
        let summary = format!(
            "{} events, {} GPU kernels, {} CPU-side NCCL calls, {} non-NCCL communication kernels; \
             was the trace recorded with CUDA activities (ProfilerActivity.CUDA)?",
            stats.events,
            stats.gpu_kernels,
            stats.cpu_collectives,
            stats.other_comm_kernels.iter().map(|(_, n)| n).sum::<u64>()
        );
        if !opts.allow_no_kernels {
            return Err(TraceError::NoNcclKernels { path: path.into(), summary });
        }
        warnings.push(format!("no NCCL kernels found: {summary}"));
    }

    let rank = RankTrace {
        rank: dist.rank.u32(),
        pid: pid.unwrap_or(0) as u32,
        host: None,
        device,
        gpu_name,
        bus_id: None,
        kernels,
        cpu_ops,
        links,
        compute,
        compute_names: std::mem::take(&mut c.compute_names.names),
    };
    Ok(KernelTrace {
        source: SourceKind::Kineto,
        path: path.to_string(),
        source_version: c.schema_version,
        base_time_ns: c.base_time_ns.unwrap_or(0),
        world_size: dist.world_size.u32(),
        nccl_version: dist.nccl_version.0.as_deref().and_then(|v| NcclVersion::parse(v.as_bytes())),
        backend: dist.backend.0,
        process_groups,
        ranks: vec![rank],
        ranges,
        names: names.names,
        stats,
        warnings,
    })
}

/// The rank's non-NCCL GPU activities in start order, each with the lag from
/// its launch call (found by correlation id in the launches, sorted here for
/// binary search instead of hashed: no per-launch allocation). Activities
/// that name another device than `device` are counted and dropped.
fn build_compute(raw: &mut [RawCompute], launches: &mut [RawLaunch], device: Option<u32>) -> (Vec<ComputeKernel>, u64) {
    launches.sort_unstable_by_key(|l| (l.correlation, l.ts_ns));
    raw.sort_unstable_by_key(|r| (r.ts_ns, r.stream, r.name));
    let mut off = 0u64;
    let mut out = Vec::with_capacity(raw.len());
    for r in raw.iter() {
        if let Some(d) = device {
            if r.device != u32::MAX && r.device != d {
                off += 1;
                continue;
            }
        }
        let launch = (r.correlation != u64::MAX)
            .then(|| {
                let i = launches.partition_point(|l| l.correlation < r.correlation);
                launches.get(i).filter(|l| l.correlation == r.correlation)
            })
            .flatten();
        out.push(ComputeKernel {
            start_ns: r.ts_ns,
            dur_ns: r.dur_ns,
            launch_lag_ns: launch.map_or(ComputeKernel::NO_LAUNCH, |l| sat_u32(r.ts_ns - l.ts_ns)),
            stream: r.stream,
            name: r.name,
        });
    }
    (out, off)
}

fn most_common(it: impl Iterator<Item = u64>) -> Option<u64> {
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for v in it {
        *counts.entry(v).or_default() += 1;
    }
    counts.into_iter().max_by_key(|&(v, n)| (n, std::cmp::Reverse(v))).map(|(v, _)| v)
}

fn meta_of(a: &Args) -> CollMeta {
    CollMeta {
        collective: a.collective.0.clone(),
        in_nelems: a.in_nelems.0,
        out_nelems: a.out_nelems.0,
        dtype: a.dtype.0.as_deref().and_then(dtype_from_kineto),
        dtype_name: a.dtype.0.clone(),
        group_size: a.group_size.u32(),
        pg_name: a.pg_name.0.clone(),
        pg_desc: a.pg_desc.0.clone(),
        pg_ranks: a.pg_ranks.0.clone(),
        rank: a.rank.u32(),
        seq: a.seq.0,
        peer: a.dst_rank.u32().or_else(|| a.src_rank.u32()),
    }
}

fn build_kernels(raw: &[RawEvent]) -> Vec<NcclKernel> {
    let mut order: Vec<&RawEvent> = raw.iter().collect();
    order.sort_by_key(|e| (e.ts_ns, e.index));
    order
        .into_iter()
        .filter_map(|e| {
            let a = &e.args;
            let parsed = kernel_name::parse(e.name.as_bytes())?;
            let has_meta = a.collective.0.is_some() || a.pg_name.0.is_some() || a.in_nelems.0.is_some();
            Some(NcclKernel {
                start_ns: e.ts_ns,
                end_ns: e.ts_ns + e.dur_ns,
                stream: a.stream.0.unwrap_or(e.tid),
                correlation: a.correlation.0,
                external_id: a.ext.0,
                device: a.device.u32().or_else(|| u32::try_from(e.pid).ok()),
                grid: a.grid.and_then(|d| d.0).unwrap_or([0; 3]),
                block: a.block.and_then(|d| d.0).unwrap_or([0; 3]),
                static_smem_bytes: None,
                dynamic_smem_bytes: None,
                shared_mem_bytes: a.smem.u32().unwrap_or(0),
                registers: a.registers.u32().unwrap_or(0),
                name: e.name.clone(),
                parsed,
                meta: has_meta.then(|| Box::new(meta_of(a))),
                launch: None,
                cpu_op: None,
                event: e.index,
                net: None,
            })
        })
        .collect()
}

fn contains(outer: &RawEvent, inner: &RawEvent) -> bool {
    outer.ts_ns <= inner.ts_ns + SLACK_NS && inner.ts_ns + inner.dur_ns <= outer.ts_ns + outer.dur_ns + SLACK_NS
}

/// Folds each `nccl:*` op into the `record_param_comms` op enclosing it on
/// the same thread; the rest stand alone. Returns the ops in start order.
fn build_cpu_ops(raw: &[RawEvent]) -> Vec<CpuCollective> {
    let is_rpc = |e: &RawEvent| e.name == "record_param_comms";
    let mut rpc_by_tid: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    for (i, e) in raw.iter().enumerate().filter(|(_, e)| is_rpc(e)) {
        rpc_by_tid.entry((e.pid, e.tid)).or_default().push(i);
    }
    for v in rpc_by_tid.values_mut() {
        v.sort_by_key(|&i| (raw[i].ts_ns, raw[i].index));
    }
    let mut ann_of: HashMap<usize, usize> = HashMap::new();
    let mut standalone = vec![false; raw.len()];
    for (i, e) in raw.iter().enumerate().filter(|(_, e)| !is_rpc(e)) {
        let parent = rpc_by_tid.get(&(e.pid, e.tid)).and_then(|v| {
            let after = v.partition_point(|&r| raw[r].ts_ns <= e.ts_ns + SLACK_NS);
            v[..after].iter().rev().take(4).copied().find(|&r| contains(&raw[r], e) && !ann_of.contains_key(&r))
        });
        match parent {
            Some(r) => {
                ann_of.insert(r, i);
            }
            None => standalone[i] = true,
        }
    }
    let mut out: Vec<(i64, u64, CpuCollective)> = Vec::with_capacity(raw.len());
    for (i, e) in raw.iter().enumerate() {
        let ann = if is_rpc(e) {
            ann_of.get(&i).map(|&a| &raw[a])
        } else if standalone[i] {
            None
        } else {
            continue;
        };
        out.push((e.ts_ns, e.index, cpu_op(e, ann, is_rpc(e))));
    }
    out.sort_by_key(|o| (o.0, o.1));
    out.into_iter().map(|o| o.2).collect()
}

fn cpu_op(e: &RawEvent, ann: Option<&RawEvent>, rpc: bool) -> CpuCollective {
    let mut meta = meta_of(&e.args);
    let a = ann.map(|a| &*a.args);
    if meta.in_nelems.is_none() {
        meta.in_nelems = a.and_then(|a| a.input_dims.0).or(e.args.input_dims.0);
    }
    // The first spelling that names a datatype: dtype, then the annotation's input type.
    let candidates = [
        e.args.dtype.0.as_deref(),
        a.and_then(|a| a.dtype.0.as_deref()),
        a.and_then(|a| a.input_type.0.as_deref()),
        e.args.input_type.0.as_deref(),
    ];
    if let Some(name) = candidates.iter().flatten().find(|n| dtype_from_kineto(n).is_some()) {
        meta.dtype = dtype_from_kineto(name);
        meta.dtype_name = Some(name.to_string());
    }
    let ann_name = if rpc { ann.map(|a| a.name.clone()) } else { None };
    let kind = meta
        .collective
        .as_deref()
        .and_then(op_kind_from_collective)
        .or_else(|| ann_name.as_deref().and_then(op_kind_from_collective))
        .or_else(|| (!rpc).then(|| op_kind_from_collective(&e.name)).flatten());
    CpuCollective {
        ts_ns: e.ts_ns,
        dur_ns: e.dur_ns,
        tid: e.tid,
        name: e.name.clone(),
        annotation: ann_name,
        external_id: e.args.ext.0,
        annotation_external_id: if rpc { a.and_then(|a| a.ext.0) } else { None },
        kind,
        meta,
        kernels: Vec::new(),
        event: e.index,
    }
}

/// Links kernels to CPU ops (see the module doc); fills `NcclKernel::cpu_op`
/// and `CpuCollective::kernels` and returns the links in kernel order.
fn link(kernels: &mut [NcclKernel], cpu: &mut [CpuCollective]) -> Vec<Link> {
    let mut by_ext: HashMap<u64, u32> = HashMap::new();
    let mut by_tid: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, op) in cpu.iter().enumerate() {
        for ext in [op.external_id, op.annotation_external_id].into_iter().flatten() {
            by_ext.entry(ext).or_insert(i as u32);
        }
        by_tid.entry(op.tid).or_default().push(i as u32);
    }
    let mut links = Vec::new();
    for (ki, k) in kernels.iter_mut().enumerate() {
        let by_id = k
            .external_id
            .filter(|&ext| Some(ext) != k.correlation)
            .and_then(|ext| by_ext.get(&ext).copied())
            .map(|c| (c, LinkVia::ExternalId));
        let nested = || {
            let l = k.launch?;
            let ops = by_tid.get(&l.tid)?;
            let after = ops.partition_point(|&c| cpu[c as usize].ts_ns <= l.ts_ns);
            let c = *ops[..after].last()?;
            let op = &cpu[c as usize];
            (l.ts_ns <= op.ts_ns + op.dur_ns).then_some((c, LinkVia::LaunchNesting))
        };
        if let Some((c, via)) = by_id.or_else(nested) {
            k.cpu_op = Some(c);
            cpu[c as usize].kernels.push(ki as u32);
            links.push(Link { cpu: c, kernel: ki as u32, via });
        }
    }
    links
}

/// Hands the kernels of each closing `nccl:coalesced` call to the calls of
/// its group: the calls before it on its thread, back to the previous call
/// that launched a kernel or closed a group, that have a kind and launched
/// nothing themselves (`wait` calls, which have no kind, are passed over).
/// Each kernel then points to the group's first call; the closing call keeps
/// no kernel, so it yields no operation of its own. A closing call with no
/// such calls before it (a trace that starts inside the group) keeps its kernels.
fn spread_coalesced(kernels: &mut [NcclKernel], cpu: &mut [CpuCollective]) {
    let closes = |op: &CpuCollective| op.kind.is_none() && op.name.contains("coalesced") && !op.kernels.is_empty();
    for c in 0..cpu.len() {
        if !closes(&cpu[c]) {
            continue;
        }
        let tid = cpu[c].tid;
        let mut members = Vec::new();
        for m in (0..c).rev().filter(|&m| cpu[m].tid == tid) {
            let op = &cpu[m];
            if !op.kernels.is_empty() || op.name.contains("coalesced") {
                break;
            }
            if op.kind.is_some() {
                members.push(m);
            }
        }
        let Some(&first) = members.last() else { continue };
        let ks = std::mem::take(&mut cpu[c].kernels);
        for &k in &ks {
            kernels[k as usize].cpu_op = Some(first as u32);
        }
        for &m in &members {
            cpu[m].kernels = ks.clone();
        }
    }
}
