//! Measured times for a loaded trace from the same job's Kineto (PyTorch profiler) traces,
//! and what a measured step was.
//!
//! Each Kineto file (`.json`, `.json.gz`, folders, `.tar.gz`) is read once with serde into a
//! compact per-rank form (CPU ops, launches, GPU activities by correlation id) and its raw
//! JSON dropped before the next. A compute task is linked to the Kineto CPU op that ran it by
//! aligning op names in start order (a windowed greedy walk: the ET's `rf_id` and Kineto's
//! `External id` drift apart per thread, and older traces carry no `Record function id`, so
//! ids are not used) and takes the summed duration
//! of the GPU activities launched inside that op (launch ↔ activity by `correlation`).
//! Unlinked tasks share the GPU compute time left over between the same two communication
//! calls. [`MeasuredRank`] holds the profiler steps and every NCCL kernel in order, with the
//! collective and bytes of the `nccl:*` record that launched it.
//!
//! Host time ([`AttachOptions::host_time`]): GPU time alone is right when the GPU is the
//! bottleneck, but a launch-bound step (small kernels, Python between ops) spends most of its
//! time on the CPU, which no task would carry. With the option, a linked task takes the CPU
//! time from its op's start to the next linked op's start (any thread of the rank: the threads
//! of one step take turns, the main thread waits inside `backward` while the autograd thread
//! works), less the time spent blocked in synchronising CUDA calls (stream/device/event
//! synchronize, memcpy: the wait for the GPU or a peer, which the simulator models through the
//! task's dependencies), and at least its GPU time. A communication call between two ops cuts
//! the span, and compute tasks wait for collectives only where the CPU did (`host_deps`).

use super::archive::for_each_member;
use super::raw::{coll_kind_from_name, dtype_from_torch};
use super::ChakraError;
use crate::{Work, Workload};
use commlens_core::OpKind;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// One NCCL kernel as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredColl {
    /// The collective of the `nccl:*` record that launched it, else guessed from the kernel.
    pub kind: Option<OpKind>,
    /// Input bytes of that record (`Input Dims` × element size), when stated.
    pub bytes: Option<u64>,
    pub kernel: String,
    pub start_us: f64,
    pub dur_us: f64,
}

/// A profiler step (`ProfilerStep#N`).
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredStep {
    pub name: String,
    pub start_us: f64,
    pub dur_us: f64,
}

/// What one rank's Kineto trace measured.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredRank {
    pub rank: u32,
    pub source: String,
    pub steps: Vec<MeasuredStep>,
    /// NCCL kernels in start order.
    pub colls: Vec<MeasuredColl>,
    /// Non-NCCL GPU activities (kernels, copies, sets) and their summed duration.
    pub compute_activities: usize,
    pub compute_us: f64,
}

impl MeasuredRank {
    /// Duration of the first profiler step, microseconds.
    pub fn step_us(&self) -> Option<f64> {
        self.steps.first().map(|s| s.dur_us)
    }
}

/// How one rank's compute tasks got their times.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankLink {
    pub rank: u32,
    pub compute_tasks: usize,
    /// Linked to a Kineto op (by op-name order).
    pub linked: usize,
    /// Given a share of the unlinked GPU time between communication calls.
    pub fallback: usize,
    pub unmeasured: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkReport {
    pub ranks: Vec<RankLink>,
    pub measured: Vec<MeasuredRank>,
    pub notes: Vec<String>,
}

impl LinkReport {
    /// Compute tasks that got a measured time (linked or by fallback), all ranks.
    pub fn measured_tasks(&self) -> usize {
        self.ranks.iter().map(|r| r.linked + r.fallback).sum()
    }
}

#[derive(Deserialize)]
struct Ev {
    #[serde(default)]
    ph: Option<Value>,
    #[serde(default)]
    cat: Option<Value>,
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    tid: Option<Value>,
    #[serde(default)]
    ts: Option<Value>,
    #[serde(default)]
    dur: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
struct Doc {
    #[serde(rename = "traceEvents", default)]
    events: Option<Vec<Ev>>,
    #[serde(rename = "distributedInfo", default)]
    dist: Option<Value>,
}

fn num(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn text(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

struct CpuOp {
    name: String,
    tid: String,
    ts: f64,
    end: f64,
    dims: Option<Value>,
    types: Option<Value>,
}

struct Gpu {
    name: String,
    ts: f64,
    dur: f64,
}

/// One rank's trace, compacted.
struct KTrace {
    rank: u32,
    source: String,
    ops: Vec<CpuOp>,
    /// Launches per CPU thread, sorted by time: (ts, correlation).
    launches: HashMap<String, Vec<(f64, u64)>>,
    gpu: HashMap<u64, Gpu>,
    /// Activities with no correlation id (counted in the totals only).
    orphan_gpu: Vec<Gpu>,
    /// Synchronising CUDA runtime calls (all threads), sorted: (start, end).
    waits: Vec<(f64, f64)>,
    /// Starts of the calls among them that wait for the GPU's queued work (stream, device or
    /// event synchronize; a copy to the host), sorted: where the CPU waited for collectives.
    syncs: Vec<f64>,
}

/// A runtime call that blocks the CPU until the GPU (or a peer, through it) is done.
fn is_blocking_call(name: &str) -> bool {
    name.ends_with("Synchronize") || name.starts_with("cudaMemcpy") || name.starts_with("cuMemcpy")
}

fn rank_from_name(name: &str) -> Option<u32> {
    let l = name.to_ascii_lowercase();
    for key in ["worker", "rank"] {
        if let Some(i) = l.rfind(key) {
            let d: String = l[i + key.len()..]
                .chars()
                .skip_while(|c| *c == '_' || *c == '-')
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(r) = d.parse() {
                return Some(r);
            }
        }
    }
    None
}

fn is_nccl(name: &str) -> bool {
    name.starts_with("nccl") || name.contains("ncclKernel") || name.contains("ncclDevKernel")
}

fn read_trace(source: &str, bytes: &[u8]) -> Result<Option<KTrace>, ChakraError> {
    let doc: Doc = serde_json::from_slice(bytes).map_err(|e| {
        ChakraError::format(
            source,
            format!("line {} column {}", e.line(), e.column()),
            format!("a Kineto (Chrome trace) JSON document ({e})"),
        )
    })?;
    let Some(events) = doc.events else {
        return Ok(None);
    };
    let rank = doc
        .dist
        .as_ref()
        .and_then(|d| d.get("rank"))
        .and_then(Value::as_u64)
        .and_then(|r| u32::try_from(r).ok())
        .or_else(|| rank_from_name(source.rsplit(['/', '!']).next().unwrap_or(source)))
        .ok_or_else(|| {
            ChakraError::format(
                source,
                "distributedInfo",
                "a rank (distributedInfo.rank, or workerN/rankN in the name)",
            )
        })?;
    let mut t = KTrace {
        rank,
        source: source.to_string(),
        ops: Vec::new(),
        launches: HashMap::new(),
        gpu: HashMap::new(),
        orphan_gpu: Vec::new(),
        waits: Vec::new(),
        syncs: Vec::new(),
    };
    // Copies, resolved to device-to-host ones once every GPU activity is read.
    let mut copies: Vec<(f64, u64)> = Vec::new();
    for e in events {
        if text(e.ph.as_ref()) != Some("X") {
            continue;
        }
        let (Some(ts), Some(cat)) = (num(e.ts.as_ref()), text(e.cat.as_ref())) else {
            continue;
        };
        let dur = num(e.dur.as_ref()).unwrap_or(0.0).max(0.0);
        let name = text(e.name.as_ref()).unwrap_or("").to_string();
        let tid = match &e.tid {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        let args = e.args.as_ref();
        let arg = |k: &str| args.and_then(|a| a.get(k));
        let corr = num(arg("correlation")).map(|c| c as u64);
        match cat.to_ascii_lowercase().as_str() {
            "cpu_op" | "user_annotation" | "operator" => t.ops.push(CpuOp {
                name,
                tid,
                ts,
                end: ts + dur,
                dims: arg("Input Dims").cloned(),
                types: arg("Input type").cloned(),
            }),
            "cuda_runtime" | "cuda_driver" | "runtime" => {
                if is_blocking_call(&name) && dur > 0.0 {
                    t.waits.push((ts, ts + dur));
                }
                if name.ends_with("Synchronize") {
                    t.syncs.push(ts);
                } else if let (true, Some(c)) = (is_blocking_call(&name), corr) {
                    copies.push((ts, c));
                }
                if let Some(c) = corr {
                    t.launches.entry(tid).or_default().push((ts, c));
                }
            }
            "kernel" | "gpu_memcpy" | "gpu_memset" => {
                let g = Gpu { name, ts, dur };
                match corr {
                    Some(c) => {
                        t.gpu.insert(c, g);
                    }
                    None => t.orphan_gpu.push(g),
                }
            }
            _ => {}
        }
    }
    t.ops
        .sort_by(|a, b| a.ts.total_cmp(&b.ts).then(b.end.total_cmp(&a.end)));
    for l in t.launches.values_mut() {
        l.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    t.waits.sort_by(|a, b| a.0.total_cmp(&b.0));
    // A copy to the host waits for the work queued before it on its stream; one from the
    // host (staged) or on the device does not hold the CPU.
    t.syncs.extend(copies.iter().filter(|(_, c)| t.gpu.get(c).is_some_and(|g| g.name.contains("DtoH"))).map(|x| x.0));
    t.syncs.sort_by(f64::total_cmp);
    Ok(Some(t))
}

/// Reads every Kineto trace under `paths`, one member at a time.
fn read_all(paths: &[&Path]) -> Result<Vec<KTrace>, ChakraError> {
    let mut out: Vec<KTrace> = Vec::new();
    for p in paths {
        for_each_member(p, &mut |m| {
            let first = m.bytes.iter().find(|b| !b.is_ascii_whitespace());
            if first != Some(&b'{') {
                return Ok(());
            }
            if let Some(t) = read_trace(&m.name, &m.bytes)? {
                if let Some(prev) = out.iter().find(|o| o.rank == t.rank) {
                    return Err(ChakraError::Input {
                        path: t.source.clone(),
                        message: format!("rank {} already read from {}", t.rank, prev.source),
                    });
                }
                out.push(t);
            }
            Ok(())
        })?;
    }
    if out.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(ChakraError::Input {
            path: shown.join(", "),
            message: "holds no Kineto trace (JSON with traceEvents)".into(),
        });
    }
    out.sort_by_key(|t| t.rank);
    Ok(out)
}

/// Input bytes of an `nccl:*` record: first input's dims × its element size.
fn record_bytes(op: &CpuOp) -> Option<u64> {
    let dims = op.dims.as_ref()?.as_array()?.first()?.as_array()?;
    let elems = dims
        .iter()
        .try_fold(1u64, |a, d| d.as_u64().map(|d| a.saturating_mul(d)))?;
    let ty = op.types.as_ref()?.as_array()?.first()?.as_str()?;
    Some(elems.saturating_mul(dtype_from_torch(ty)?.size_bytes()?))
}

/// The innermost CPU op on `tid` around `ts` whose name passes `keep` (ops sorted by start).
fn enclosing<'a>(
    ops: &'a [CpuOp],
    tid: &str,
    ts: f64,
    keep: impl Fn(&str) -> bool,
) -> Option<&'a CpuOp> {
    let hi = ops.partition_point(|o| o.ts <= ts);
    ops[..hi]
        .iter()
        .rev()
        .take(4096)
        .find(|o| o.tid == tid && o.end >= ts && keep(&o.name))
}

fn measured(t: &KTrace) -> MeasuredRank {
    let steps = t
        .ops
        .iter()
        .filter(|o| o.name.starts_with("ProfilerStep#"))
        .map(|o| MeasuredStep {
            name: o.name.clone(),
            start_us: o.ts,
            dur_us: o.end - o.ts,
        })
        .collect();
    let launch_of: HashMap<u64, (&str, f64)> = t
        .launches
        .iter()
        .flat_map(|(tid, l)| l.iter().map(move |&(ts, c)| (c, (tid.as_str(), ts))))
        .collect();
    let mut colls = Vec::new();
    let (mut n, mut us) = (0usize, 0.0);
    for (c, g) in &t.gpu {
        if !is_nccl(&g.name) {
            n += 1;
            us += g.dur;
            continue;
        }
        let rec = launch_of
            .get(c)
            .and_then(|&(tid, ts)| enclosing(&t.ops, tid, ts, |n| n.starts_with("nccl:")));
        let kind = rec.and_then(|r| coll_kind_from_name(&r.name)).or_else(|| {
            let k = coll_kind_from_name(&g.name);
            if g.name.contains("SendRecv") {
                Some(OpKind::SendRecv)
            } else {
                k
            }
        });
        colls.push(MeasuredColl {
            kind,
            bytes: rec.and_then(record_bytes),
            kernel: g.name.clone(),
            start_us: g.ts,
            dur_us: g.dur,
        });
    }
    for g in &t.orphan_gpu {
        if !is_nccl(&g.name) {
            n += 1;
            us += g.dur;
        }
    }
    colls.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    MeasuredRank {
        rank: t.rank,
        source: t.source.clone(),
        steps,
        colls,
        compute_activities: n,
        compute_us: us,
    }
}

/// What each rank's Kineto trace measured (steps, NCCL kernels), without a workload.
pub fn read_measured(paths: &[&Path]) -> Result<Vec<MeasuredRank>, ChakraError> {
    Ok(read_all(paths)?.iter().map(measured).collect())
}

/// GPU time (non-NCCL) launched from `tid` within `[ts, end]`.
fn gpu_time_in(t: &KTrace, tid: &str, ts: f64, end: f64) -> f64 {
    let Some(l) = t.launches.get(tid) else {
        return 0.0;
    };
    let lo = l.partition_point(|x| x.0 < ts);
    let hi = l.partition_point(|x| x.0 <= end);
    l[lo..hi]
        .iter()
        .filter_map(|(_, c)| t.gpu.get(c))
        .filter(|g| !is_nccl(&g.name))
        .map(|g| g.dur)
        .sum()
}

/// Choices for [`attach_kineto_times_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttachOptions {
    /// A linked task takes its share of the CPU timeline (op start to the next linked op's
    /// start, less blocking CUDA calls), at least its GPU time; see the module documentation.
    /// Off: GPU time only.
    pub host_time: bool,
}

/// Sets `time_us` of rank programs' compute tasks from the Kineto traces under `paths`
/// (GPU time; [`attach_kineto_times_with`] for host time).
/// Ranks are matched by `distributedInfo.rank` (or `workerN`/`rankN` in the file name); a
/// program shared by several ranks takes the times of its lowest rank with a trace.
pub fn attach_kineto_times(w: &mut Workload, paths: &[&Path]) -> Result<LinkReport, ChakraError> {
    attach_kineto_times_with(w, paths, AttachOptions::default())
}

/// [`attach_kineto_times`] with options.
pub fn attach_kineto_times_with(
    w: &mut Workload,
    paths: &[&Path],
    opts: AttachOptions,
) -> Result<LinkReport, ChakraError> {
    let traces = read_all(paths)?;
    let mut report = LinkReport::default();
    let mut done = vec![false; w.programs.len()];
    for t in &traces {
        report.measured.push(measured(t));
        if t.rank >= w.world {
            report.notes.push(format!(
                "{}: rank {} is outside the {}-rank workload",
                t.source, t.rank, w.world
            ));
            continue;
        }
        let pi = w.rank_program[t.rank as usize] as usize;
        if std::mem::replace(&mut done[pi], true) {
            continue;
        }
        let (link, note) = link_rank(t, &mut w.programs[pi], opts);
        report.ranks.push(link);
        report.notes.extend(note);
    }
    Ok(report)
}

fn link_rank(t: &KTrace, p: &mut crate::Program, opts: AttachOptions) -> (RankLink, Option<String>) {
    const BACK: usize = 256;
    const AHEAD: usize = 2048;
    let mut link = RankLink {
        rank: t.rank,
        ..Default::default()
    };
    let mut used = vec![false; t.ops.len()];
    let mut last = 0usize;
    // Segment (number of communication calls before) of each task and of each linked op.
    let mut seg_of_task = Vec::with_capacity(p.tasks.len());
    let mut matched: Vec<Option<usize>> = vec![None; p.tasks.len()];
    let mut gpu_of: Vec<f64> = vec![0.0; p.tasks.len()];
    let mut seg = 0usize;
    for (ti, task) in p.tasks.iter_mut().enumerate() {
        seg_of_task.push(seg);
        let c = match &mut task.work {
            Work::Coll(_) | Work::P2p { .. } => {
                seg += 1;
                continue;
            }
            Work::Compute(c) => c,
            Work::IterationEnd { .. } => continue,
        };
        link.compute_tasks += 1;
        let lo = last.saturating_sub(BACK);
        let hi = (last + AHEAD).min(t.ops.len());
        let Some(k) = (lo..hi).find(|&k| !used[k] && t.ops[k].name == c.name) else {
            continue;
        };
        used[k] = true;
        let op = &t.ops[k];
        // Ops nested in the match are its children, never another task.
        for (j, o) in t.ops.iter().enumerate().skip(k + 1) {
            if o.ts > op.end {
                break;
            }
            if o.tid == op.tid {
                used[j] = true;
            }
        }
        last = k;
        gpu_of[ti] = gpu_time_in(t, &op.tid, op.ts, op.end);
        c.time_us = Some(gpu_of[ti]);
        matched[ti] = Some(k);
        link.linked += 1;
    }
    // Fallback: GPU compute time between communication calls, minus what linked tasks took.
    let calls: Vec<f64> = t
        .ops
        .iter()
        .filter(|o| o.name.starts_with("nccl:"))
        .map(|o| o.ts)
        .collect();
    let segments = seg + 1;
    let mut note = None;
    let same = calls.len() + 1 == segments;
    if !same {
        note = Some(format!(
            "{}: {} nccl:* calls but {} communication tasks; unlinked tasks share the whole step's leftover GPU time",
            t.source,
            calls.len(),
            segments - 1
        ));
    }
    let seg_at = |ts: f64| {
        if same {
            calls.partition_point(|&c| c <= ts)
        } else {
            0
        }
    };
    let nseg = if same { segments } else { 1 };
    let mut total = vec![0.0f64; nseg];
    for l in t.launches.values() {
        for (ts, c) in l {
            if let Some(g) = t.gpu.get(c).filter(|g| !is_nccl(&g.name)) {
                total[seg_at(*ts).min(nseg - 1)] += g.dur;
            }
        }
    }
    let mut want = vec![0usize; nseg];
    for (ti, task) in p.tasks.iter().enumerate() {
        let s = if same { seg_of_task[ti] } else { 0 };
        match (&task.work, matched[ti]) {
            (Work::Compute(_), Some(_)) => total[s] -= gpu_of[ti],
            (Work::Compute(_), None) => want[s] += 1,
            _ => {}
        }
    }
    for (ti, task) in p.tasks.iter_mut().enumerate() {
        let s = if same { seg_of_task[ti] } else { 0 };
        if let (Work::Compute(c), None) = (&mut task.work, matched[ti]) {
            if want[s] > 0 && total[s] > 0.0 {
                c.time_us = Some(total[s] / want[s] as f64);
                link.fallback += 1;
            } else {
                link.unmeasured += 1;
            }
        }
    }
    if opts.host_time {
        host_times(t, p, &matched, &gpu_of);
    }
    (link, note)
}

/// Linked tasks' host time (see [`AttachOptions::host_time`]), spans as
/// [`super::host_deps::task_spans`] cuts them; then their dependencies on collectives.
fn host_times(t: &KTrace, p: &mut crate::Program, matched: &[Option<usize>], gpu_of: &[f64]) {
    use super::host_deps::{covered, cpu_runs_ahead, task_spans};
    let mut by_start: Vec<(f64, usize)> = matched
        .iter()
        .enumerate()
        .filter_map(|(ti, k)| k.map(|k| (t.ops[k].ts, ti)))
        .collect();
    by_start.sort_by(|a, b| a.0.total_cmp(&b.0));
    let calls: Vec<f64> = t.ops.iter().filter(|o| o.name.starts_with("nccl:")).map(|o| o.ts).collect();
    let last_end = by_start.last().map_or(0.0, |&(_, ti)| t.ops[matched[ti].expect("matched")].end);
    let spans = task_spans(&by_start, &calls, last_end);
    for &(ti, ts, end) in &spans {
        let cpu = (end - ts) - covered(&t.waits, ts, end);
        if let Work::Compute(c) = &mut p.tasks[ti].work {
            c.time_us = Some(cpu.max(gpu_of[ti]).max(0.0));
        }
    }
    cpu_runs_ahead(p, &spans, &t.syncs);
}
