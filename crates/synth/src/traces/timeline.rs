//! The GPU side of a generated run: a discrete-event replay of every rank's streams.
//!
//! Owns the translation of the simulation's recorded steps (CPU times of op records and
//! compute steps) into kernels with GPU start/end times. Per rank there is one compute stream
//! and one NCCL stream per communicator (PyTorch's one stream per group and device). Rules:
//! - a kernel starts after its launch (CPU time of the record + launch latency), after the
//!   previous kernel of its stream, and, for NCCL kernels, after the compute launched before
//!   it (PyTorch makes the NCCL stream wait for the current stream);
//! - a collective's kernel ends when the last member has arrived plus the transfer time, on
//!   every member (± 1 µs): early members wait inside the kernel, as on real GPUs;
//! - a Send/Recv group ends when the simulation says the CPU saw it complete, a collective the
//!   CPU waits for (barrier, grad norm) no later than that either;
//! - compute waits for the collectives it consumes (TP, PP, ...), not for gradient reductions
//!   (DP, EMB), which only the optimizer step waits for: with `overlap_grad_reduce` those run
//!   under backward compute, which is the overlap an analysis should find.
//!
//! Collectives are matched across members by (communicator, simulation `opCount`), so any
//! collective kind the simulation writes gets kernels. All times are µs relative to the run's
//! start epoch (f64 keeps sub-ns precision there).

use super::logside::{is_grad_comm, op_rec, RankLog};
use super::names::{self, ComputeKernel};
use super::TraceConfig;
use crate::config::RunConfig;
use crate::layout::Layout;
use crate::rng::SplitMix64;
use crate::sim::{SimEvent, SimOutput};
use std::collections::HashMap;

/// Delay of an NCCL kernel's start after its launching record's CPU time, µs:
/// `NCCL_LAUNCH_US + NCCL_LAUNCH_SPREAD_US × U(0, 1)` (`crate::sim` moves a rank's clock past
/// the end of a kernel started that late, so the GPU never falls behind the logs).
pub(crate) const NCCL_LAUNCH_US: f64 = 4.0;
pub(crate) const NCCL_LAUNCH_SPREAD_US: f64 = 3.0;

/// One NCCL launch: a collective (two records on a batching rank) or a Send/Recv group.
#[derive(Clone, Debug)]
pub(super) struct Unit {
    pub comm: usize,
    /// Log name, or `SendRecv` for Send/Recv kernels.
    pub kind: &'static str,
    /// Indices into the rank's `RankLog::recs`.
    pub recs: Vec<usize>,
    /// CPU time of the last record (the launch follows it).
    pub t_e: f64,
    key: Option<(usize, u64)>,
    sync: bool,
    grad: bool,
    done: Option<f64>,
    dur: f64,
    pub dtype: u8,
    pub redop: u8,
    pub bytes: u64,
    pub start: f64,
    pub end: f64,
}

/// What a kernel executes.
#[derive(Clone, Debug)]
pub(super) enum Src {
    Nccl(usize),
    Compute(ComputeKernel),
}

#[derive(Clone, Debug)]
pub(super) struct GpuKernel {
    pub start: f64,
    pub end: f64,
    /// Stream id (7 = compute; NCCL streams from 13 on).
    pub stream: u32,
    pub launch: f64,
    pub src: Src,
}

/// The GPU side of one rank.
#[derive(Clone, Debug, Default)]
pub(super) struct RankGpu {
    pub units: Vec<Unit>,
    pub kernels: Vec<GpuKernel>,
    /// Iteration ranges (CPU time).
    pub iterations: Vec<(f64, f64)>,
}

pub(super) const COMPUTE_STREAM: u32 = 7;

/// NCCL stream id of the `k`-th communicator of a process.
pub(super) fn nccl_stream(layout: &Layout, rank: usize, comm: usize) -> u32 {
    let k = layout.proc_comms[rank].iter().position(|&c| c == comm).unwrap_or(0) as u32;
    13 + 4 * k
}

enum Item {
    Compute { t: f64, dur: f64, optimizer: bool },
    Unit(usize),
}

struct State {
    items: Vec<Item>,
    pos: usize,
    compute_free: f64,
    dep: f64,
    grad_dep: f64,
    stream_free: HashMap<usize, f64>,
    /// Start of the unit whose collective instance is not resolved yet.
    waiting: Option<(usize, f64)>,
    rng: SplitMix64,
}

#[derive(Default)]
struct Inst {
    starts: Vec<f64>,
    end: Option<f64>,
}

pub(super) fn run(
    cfg: &RunConfig,
    tcfg: &TraceConfig,
    layout: &Layout,
    out: &SimOutput,
    logs: &[RankLog],
    rng: &mut SplitMix64,
) -> Vec<RankGpu> {
    let base = cfg.start_epoch_s as f64 * 1e6;
    let world = layout.procs.len();
    let mut gpus: Vec<RankGpu> = Vec::with_capacity(world);
    let mut states = Vec::with_capacity(world);
    #[allow(clippy::needless_range_loop)] // r indexes events, logs and the output alike
    for r in 0..world {
        let units = units_of(tcfg, layout, &out.events[r], &logs[r], base);
        let mut items: Vec<(f64, usize, Item)> = Vec::new();
        for (e, ev) in out.events[r].iter().enumerate() {
            match ev {
                SimEvent::Compute { t_us, dur_us } => {
                    items.push((t_us - base, e, Item::Compute { t: t_us - base, dur: *dur_us, optimizer: false }))
                }
                SimEvent::IterEnd { t_us, dur_us } => {
                    items.push((t_us - base, e, Item::Compute { t: t_us - base, dur: *dur_us, optimizer: true }))
                }
                _ => {}
            }
        }
        for (i, u) in units.iter().enumerate() {
            let last_ev = logs[r].recs[*u.recs.last().expect("unit has records")].ev;
            items.push((u.t_e, last_ev, Item::Unit(i)));
        }
        items.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        gpus.push(RankGpu { units, kernels: Vec::new(), iterations: iterations(&out.events[r], base) });
        states.push(State {
            items: items.into_iter().map(|x| x.2).collect(),
            pos: 0,
            compute_free: 0.0,
            dep: 0.0,
            grad_dep: 0.0,
            stream_free: HashMap::new(),
            waiting: None,
            rng: rng.fork(r as u64),
        });
    }
    let mut insts: HashMap<(usize, u64), Inst> = HashMap::new();
    loop {
        let mut progress = false;
        for r in 0..world {
            while step(r, tcfg, layout, &mut states[r], &mut gpus[r], &mut insts) {
                progress = true;
            }
        }
        if states.iter().all(|s| s.pos >= s.items.len()) {
            break;
        }
        if !progress {
            // Cannot happen with Megatron-ordered programs; resolve the earliest pending
            // instance with the members that arrived rather than hang.
            let (key, dur) = states
                .iter()
                .zip(&gpus)
                .filter_map(|(s, g)| {
                    let Some(&Item::Unit(i)) = s.items.get(s.pos) else { return None };
                    let u = &g.units[i];
                    u.key.map(|k| (k, u.dur, s.waiting.map_or(f64::MAX, |w| w.1)))
                })
                .min_by(|a, b| a.2.total_cmp(&b.2))
                .map(|(k, d, _)| (k, d))
                .expect("a rank waits on a collective");
            let inst = insts.entry(key).or_default();
            let last = inst.starts.iter().cloned().fold(0.0, f64::max);
            inst.end = Some(last + dur);
        }
    }
    gpus
}

/// Groups a rank's records into launches.
fn units_of(tcfg: &TraceConfig, layout: &Layout, events: &[SimEvent], log: &RankLog, base: f64) -> Vec<Unit> {
    let mut units: Vec<Unit> = Vec::new();
    for (i, rec) in log.recs.iter().enumerate() {
        let op = op_rec(events, rec.ev);
        let t = rec.t_us as f64 - base;
        if let Some(u) = units.last_mut() {
            let prev = op_rec(events, log.recs[*u.recs.last().unwrap()].ev);
            let same_collective = !op.p2p && rec.dup && log.recs[*u.recs.last().unwrap()].ev == rec.ev;
            let same_group = op.p2p && tcfg.fuse_sendrecv && prev.p2p && prev.comm == op.comm && prev.opcount == op.opcount;
            if same_collective || same_group {
                u.recs.push(i);
                u.t_e = t;
                u.dur = u.dur.max(op.dur_us);
                if same_group {
                    u.bytes += op.bytes;
                }
                continue;
            }
        }
        let done = (op.p2p || op.sync)
            .then(|| {
                events[rec.ev..].iter().find_map(|e| match e {
                    SimEvent::Done { t_us } => Some(t_us - base),
                    _ => None,
                })
            })
            .flatten();
        units.push(Unit {
            comm: op.comm,
            kind: if op.p2p { "SendRecv" } else { op.name },
            recs: vec![i],
            t_e: t,
            key: (!op.p2p).then_some((op.comm, op.opcount)),
            sync: op.sync && !op.p2p,
            // Only gradient reductions; a parameter all-gather feeds the next forward.
            grad: !op.p2p && is_grad_comm(layout, op.comm) && matches!(op.name, "AllReduce" | "ReduceScatter"),
            done,
            dur: op.dur_us,
            dtype: op.dtype,
            redop: op.redop,
            bytes: op.bytes,
            start: 0.0,
            end: 0.0,
        });
    }
    units
}

/// `ProfilerStep` ranges: iteration 0 starts when the first compute step after the start-up
/// barriers ends (data-loader construction), each later one when the previous optimizer step
/// ends.
fn iterations(events: &[SimEvent], base: f64) -> Vec<(f64, f64)> {
    let ends: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            SimEvent::IterEnd { t_us, dur_us } => Some(t_us + dur_us - base),
            _ => None,
        })
        .collect();
    let first_iter_op = events.iter().position(|e| matches!(e, SimEvent::Op { rec, .. } if rec.p2p || !rec.sync));
    let Some(f) = first_iter_op else { return Vec::new() };
    let d = events[..f].iter().rposition(|e| matches!(e, SimEvent::Done { .. })).unwrap_or(0);
    let start0 = events[d..f]
        .iter()
        .find_map(|e| match e {
            SimEvent::Compute { t_us, dur_us } => Some(t_us + dur_us - base),
            _ => None,
        })
        .or(match &events[d] {
            SimEvent::Done { t_us } => Some(t_us - base),
            _ => None,
        })
        .unwrap_or(0.0);
    let mut out = Vec::with_capacity(ends.len());
    let mut s = start0;
    for e in ends {
        out.push((s, e));
        s = e;
    }
    out
}

fn step(
    r: usize,
    tcfg: &TraceConfig,
    layout: &Layout,
    st: &mut State,
    gpu: &mut RankGpu,
    insts: &mut HashMap<(usize, u64), Inst>,
) -> bool {
    let Some(item) = st.items.get(st.pos) else { return false };
    match *item {
        Item::Compute { t, dur, optimizer } => {
            if optimizer {
                st.dep = st.dep.max(st.grad_dep);
            }
            let mut cursor = (t + 4.0).max(st.compute_free).max(st.dep);
            if tcfg.compute_kernels {
                let pick = st.rng.next_u64() % 16;
                for (i, (k, frac)) in names::compute_step(dur, optimizer, pick).into_iter().enumerate() {
                    let launch = t + 1.0 + 3.0 * i as f64;
                    let start = cursor.max(launch + 3.0) + st.rng.unit();
                    let end = start + (dur * frac).max(1.5);
                    gpu.kernels.push(GpuKernel { start, end, stream: COMPUTE_STREAM, launch, src: Src::Compute(k) });
                    cursor = end + 1.0 + st.rng.unit();
                }
                st.compute_free = cursor;
            } else {
                st.compute_free = cursor + dur * 0.9;
            }
            st.pos += 1;
            true
        }
        Item::Unit(i) => {
            let u = &gpu.units[i];
            let stream_free = st.stream_free.get(&u.comm).copied().unwrap_or(0.0);
            let start = match st.waiting {
                Some((w, s)) if w == i => s,
                _ => {
                    let lat = NCCL_LAUNCH_US + NCCL_LAUNCH_SPREAD_US * st.rng.unit();
                    (u.t_e + lat).max(stream_free).max(st.compute_free)
                }
            };
            let mut end = if let Some(key) = u.key {
                let n = layout.comms[u.comm].nranks();
                let inst = insts.entry(key).or_default();
                if st.waiting.is_none() {
                    inst.starts.push(start);
                    if inst.starts.len() >= n && inst.end.is_none() {
                        let last = inst.starts.iter().cloned().fold(f64::MIN, f64::max);
                        inst.end = Some(last + u.dur * (0.98 + 0.04 * st.rng.unit()));
                    }
                }
                match inst.end {
                    Some(e) => e.max(start + 0.05 * u.dur + 1.0) + st.rng.unit(),
                    None => {
                        st.waiting = Some((i, start));
                        return false;
                    }
                }
            } else {
                // A point-to-point transfer takes at least its wire time once
                // the kernel runs (a kernel that started late, behind compute,
                // still moves all its bytes), else it ends just before the CPU
                // saw the group complete.
                let done = u.done.unwrap_or(start + u.dur);
                (done - 2.0 - 6.0 * st.rng.unit()).max(start + u.dur * (0.98 + 0.04 * st.rng.unit()))
            };
            if u.sync {
                if let Some(done) = u.done {
                    end = end.min(done - 1.0);
                }
            }
            let end = end.max(start + 1.0);
            st.waiting = None;
            let (comm, grad) = (u.comm, u.grad);
            let u = &mut gpu.units[i];
            u.start = start;
            u.end = end;
            st.stream_free.insert(comm, end);
            if grad {
                st.grad_dep = st.grad_dep.max(end);
            } else {
                st.dep = st.dep.max(end);
            }
            let stream = nccl_stream(layout, r, comm);
            let launch = gpu.units[i].t_e + 1.0;
            gpu.kernels.push(GpuKernel { start, end, stream, launch, src: Src::Nccl(i) });
            st.pos += 1;
            true
        }
    }
}
