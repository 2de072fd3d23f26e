//! Anomalies after the fact: operations whose duration (and bus bandwidth, where the size is
//! known) departs from their own history, and lasting step changes over iterations.
//!
//! **What is judged.** Only operations with a GPU span; the others are counted. A collective
//! ends together on every member, and members that arrived early wait inside their kernel, so
//! one rank's kernel time mixes transfer and waiting. Collectives are therefore judged per
//! *instance* (the k-th collective of every member handle of a logical communicator, matched
//! as in [`crate::straggler`]): its value is the minimum member duration, the time the
//! transfer took once everyone was there. An instance whose minimum is normal but whose
//! longest kernel is far off is a *late arrival* (one rank came late, the others waited): it
//! is counted here with the late rank, not listed — [`crate::straggler`] owns lateness. An
//! instance slow on every member is a *slow instance*, reported once with its ranks.
//! Send/Recv pairs (the k-th Send from a to b with the k-th Recv on b from a; on a
//! two-member communicator the peer is the other member when the source does not name it)
//! would be judged on the shorter of the two kernels the same way, named by the Send. But
//! point-to-point operations run in groups (a pipeline stage's send and receive in one
//! kernel), so even the shorter kernel of a pair includes waiting for the other direction;
//! they are *lone* operations by default, with those that cannot be paired (fused SendRecv
//! kernels, no peer) and collectives with one timed member (one rank's trace). Lone
//! operations are counted, not judged: their kernel time is mostly waiting for peers or
//! transfers the inputs do not separate (pipeline bubbles, other ranks' compute), so a long
//! one says nothing about the transfer. With [`AnomalyConfig::judge_lone`] pairs are judged
//! as instances and the others on their own duration, as *slow operations*.
//!
//! **History** is the logical communicator × kind × power-of-two size bucket
//! ([`crate::stats::size_bucket`]; unknown sizes form their own bucket). Per history, with at
//! least `min_history` samples: median `m` and MAD by selection, scale
//! `s = max(1.4826·MAD, 1 % of m, 1 ns)` (a MAD of 0, as in simulated tables, does not make
//! every wiggle infinite), robust score `z = (x − m) / s`. A sample is anomalous when
//! `z ≥ z_threshold` (6), `x ≥ min_ratio · m` (2×) and `x − m ≥ min_excess_ns` (20 µs:
//! launch jitter and timer granularity — the Inspector reports whole µs — make departures
//! of a few µs meaningless, so noise and tiny kernels stay quiet) and, when its size is known, its bus bandwidth departs the same way
//! below the history's (so a larger message inside the bucket is not taken for a slow one).
//!
//! **Step changes.** With iterations ([`crate::iteration`]: ranges or the repeated pattern),
//! each history's per-iteration medians are split in two where the mean of their logarithms
//! jumps most (a two-segment CUSUM), with at least `change_min_iterations` on each side. The
//! split is a slowdown when the median of the right segment's medians is at least
//! `change_min_effect` × the left's (1.5×) and `change_min_excess_ns` (10 µs) above it, and
//! that jump is `change_z` robust deviations of the per-iteration medians around their
//! segment's median. Points are then judged against
//! their own segment, so a lasting drop is one step change, not one anomaly per operation.
//!
//! Cost: one index of operations per handle, one sample per instance, a sort per
//! communicator (O(n log n)), medians by `select_nth_unstable` in reused buffers; work is
//! per logical communicator in parallel.

use crate::bandwidth::{algo_bytes, bus_factor, BusConvention};
use crate::iteration::{IterationMethod, IterationReport};
use crate::stats::{bucket_floor, size_bucket, UNKNOWN_BUCKET};
use commlens_core::model::{DevIdx, LogicalCommIdx};
use commlens_core::{CollOp, OpKind, OpTable};
use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

#[path = "anomaly_judge.rs"]
mod judge;

/// Thresholds of the rules (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnomalyConfig {
    pub z_threshold: f64,
    pub min_ratio: f64,
    pub min_excess_ns: i64,
    pub min_history: usize,
    pub change_min_effect: f64,
    pub change_min_iterations: usize,
    pub change_z: f64,
    /// Smallest rise of a step change (medians of many values: finer than one value's floor).
    pub change_min_excess_ns: i64,
    pub convention: BusConvention,
    /// Also judge lone operations: point-to-point ones and collectives with one timed
    /// member (see the module docs); off by default, since their kernel time is mostly
    /// waiting that the inputs do not separate from the transfer.
    pub judge_lone: bool,
}

impl Default for AnomalyConfig {
    fn default() -> Self {
        AnomalyConfig {
            z_threshold: 6.0,
            min_ratio: 2.0,
            min_excess_ns: 20_000,
            min_history: 8,
            change_min_effect: 1.5,
            change_min_iterations: 3,
            change_z: 6.0,
            change_min_excess_ns: 10_000,
            convention: BusConvention::NcclTests,
            judge_lone: false,
        }
    }
}

/// Which rule found an anomaly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Rule {
    /// A collective instance (or Send/Recv pair) slow on every member.
    SlowInstance,
    /// One rank's operation, judged alone (waiting for peers included).
    SlowOp,
    /// A lasting step up of the per-iteration median duration.
    StepChange,
}

impl Rule {
    pub fn label(self) -> &'static str {
        match self {
            Rule::SlowInstance => "slow instance",
            Rule::SlowOp => "slow operation",
            Rule::StepChange => "step change",
        }
    }
}

/// One anomaly.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Anomaly {
    pub rule: Rule,
    pub comm: LogicalCommIdx,
    pub comm_name: String,
    pub kind: OpKind,
    /// Logged bytes of the operation (`None`: unknown, or a step change of a whole bucket).
    pub bytes: Option<u64>,
    /// Lower edge of the history's size bucket (`None`: unknown sizes).
    pub bucket_lo_bytes: Option<u64>,
    /// Earliest GPU start of the instance (trace clock; epoch ns when the trace gives its
    /// base time); for a step change, of the first slow iteration.
    pub time_ns: i64,
    /// Devices involved (the timed members; for a step change, the communicator's).
    pub devs: Vec<DevIdx>,
    pub ranks: Vec<Option<u32>>,
    /// `comm_seq` (or collective ordinal) of the instance, else the operation's line.
    pub instance: Option<u64>,
    pub iteration: Option<u32>,
    pub observed_ns: f64,
    /// The history's median (for a step change, the median before it).
    pub expected_ns: f64,
    pub observed_busbw_gb_s: Option<f64>,
    pub expected_busbw_gb_s: Option<f64>,
    /// observed / expected duration.
    pub ratio: f64,
    /// Robust z of the duration (of the log step for a step change).
    pub score: f64,
}

/// Per-iteration medians of one history that holds an anomaly (for charts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistorySeries {
    pub comm_name: String,
    pub kind: OpKind,
    pub bucket_lo_bytes: Option<u64>,
    /// (iteration, median judged duration in ns).
    pub medians_ns: Vec<(u32, f64)>,
    /// First iteration of a step change.
    pub change_at: Option<u32>,
}

/// What [`detect_anomalies`] found and what it looked at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnomalyReport {
    pub config: AnomalyConfig,
    pub ops: u64,
    /// Operations with a GPU span of positive length.
    pub timed_ops: u64,
    /// Instances and Send/Recv pairs (and lone operations with `judge_lone`): one value each.
    pub samples: u64,
    /// Samples in histories of at least `min_history`.
    pub judged: u64,
    /// Lone operations not judged (see [`AnomalyConfig::judge_lone`]).
    pub lone: u64,
    pub histories: u64,
    pub histories_judged: u64,
    pub iterations: IterationMethod,
    /// Largest duration score among judged samples, and where.
    pub largest_score: Option<f64>,
    pub largest_where: Option<String>,
    /// Instances whose longest kernel departs but whose minimum does not: a late rank.
    pub late_arrivals: u64,
    /// Late ranks of those instances, most often late first: (global rank, instances).
    pub late_ranks: Vec<(Option<u32>, u64)>,
    /// Sorted by time, communicator, kind, instance.
    pub anomalies: Vec<Anomaly>,
    pub series: Vec<HistorySeries>,
}

impl AnomalyReport {
    pub fn count(&self, rule: Rule) -> usize {
        self.anomalies.iter().filter(|a| a.rule == rule).count()
    }
}

/// No iteration.
const NO_ITER: u32 = u32::MAX;

/// One judged value: a collective instance, a Send/Recv pair or one operation.
#[derive(Debug, Clone, Copy)]
struct Sample {
    key: u32,
    iter: u32,
    /// Judged duration (ns): the minimum over members.
    value: i64,
    /// Longest member duration.
    longest: i64,
    time: i64,
    /// Bus bytes; 0 when the size is unknown or moves nothing.
    bus: f64,
    bytes: Option<u64>,
    instance: u64,
    /// Range of the members in the communicator's member list.
    members: (u32, u32),
    /// The member that started last (for late arrivals).
    late: DevIdx,
    rule: Rule,
    kind: OpKind,
}

/// Iteration of each operation, from an iteration report.
struct IterOf<'a> {
    rep: Option<&'a IterationReport>,
    ranges: Vec<(i64, i64)>,
}

impl IterOf<'_> {
    fn of(&self, d: usize, i: usize, op: &CollOp) -> u32 {
        let Some(rep) = self.rep else { return NO_ITER };
        match rep.method {
            IterationMethod::Pattern => {
                let Some(r) = rep.ranks.get(d) else {
                    return NO_ITER;
                };
                match (r.first_op, r.period_ops) {
                    (Some(f), Some(p)) if i >= f && i < f + r.iterations * p => {
                        ((i - f) / p) as u32
                    }
                    _ => NO_ITER,
                }
            }
            IterationMethod::Ranges => {
                let Some(time) = op.cpu_ts_ns.or(op.gpu.map(|g| g.start_ns)) else {
                    return NO_ITER;
                };
                let upto = self.ranges.partition_point(|r| r.0 <= time);
                upto.checked_sub(1)
                    .filter(|&k| time < self.ranges[k].1)
                    .map_or(NO_ITER, |k| k as u32)
            }
            IterationMethod::None => NO_ITER,
        }
    }
}

/// What one communicator gave.
#[derive(Default)]
struct CommOut {
    timed: u64,
    samples: u64,
    judged: u64,
    lone: u64,
    histories: u64,
    histories_judged: u64,
    largest: Option<(f64, String)>,
    late: Vec<DevIdx>,
    anomalies: Vec<Anomaly>,
    series: Vec<HistorySeries>,
}

/// Finds the anomalies of a table (see the module docs); `iterations` (from
/// [`crate::iteration::detect_iterations`]) enables step changes.
pub fn detect_anomalies(
    t: &OpTable,
    iterations: Option<&IterationReport>,
    cfg: &AnomalyConfig,
) -> AnomalyReport {
    let mut by_handle: Vec<Vec<u32>> = vec![Vec::new(); t.comms.len()];
    for ops in &t.per_rank {
        for (i, o) in ops.iter().enumerate() {
            if let Some(v) = by_handle.get_mut(o.comm.ix()) {
                v.push(i as u32);
            }
        }
    }
    let iter_of = IterOf {
        rep: iterations.filter(|r| r.method != IterationMethod::None),
        ranges: iterations.map_or_else(Vec::new, |r| {
            r.iterations
                .iter()
                .map(|s| (s.start_ns.unwrap_or(i64::MAX), s.end_ns.unwrap_or(i64::MIN)))
                .collect()
        }),
    };
    let outs: Vec<CommOut> = (0..t.logical.len() as u32)
        .into_par_iter()
        .map(|l| {
            let (mut samples, members, timed) =
                comm_samples(t, LogicalCommIdx(l), &by_handle, &iter_of, cfg);
            let before = samples.len();
            if !cfg.judge_lone {
                samples.retain(|s| s.rule != Rule::SlowOp && !s.kind.is_p2p());
            }
            let mut out = judge::judge(t, LogicalCommIdx(l), samples, &members, cfg);
            (out.timed, out.lone) = (timed, (before as u64) - out.samples);
            out
        })
        .collect();
    let mut rep = AnomalyReport {
        config: cfg.clone(),
        ops: t.n_ops() as u64,
        timed_ops: 0,
        samples: 0,
        judged: 0,
        lone: 0,
        histories: 0,
        histories_judged: 0,
        iterations: iter_of.rep.map_or(IterationMethod::None, |r| r.method),
        largest_score: None,
        largest_where: None,
        late_arrivals: 0,
        late_ranks: Vec::new(),
        anomalies: Vec::new(),
        series: Vec::new(),
    };
    let mut late: HashMap<DevIdx, u64> = HashMap::default();
    for o in outs {
        rep.timed_ops += o.timed;
        rep.samples += o.samples;
        rep.judged += o.judged;
        rep.lone += o.lone;
        rep.histories += o.histories;
        rep.histories_judged += o.histories_judged;
        if let Some((s, w)) = o.largest {
            if rep.largest_score.is_none_or(|x| s > x) {
                (rep.largest_score, rep.largest_where) = (Some(s), Some(w));
            }
        }
        rep.late_arrivals += o.late.len() as u64;
        for d in o.late {
            *late.entry(d).or_default() += 1;
        }
        rep.anomalies.extend(o.anomalies);
        rep.series.extend(o.series);
    }
    let mut late: Vec<(DevIdx, u64)> = late.into_iter().collect();
    late.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    rep.late_ranks = late
        .into_iter()
        .map(|(d, n)| (t.devices.get(d.ix()).and_then(|x| x.global_rank), n))
        .collect();
    rep.anomalies.sort_by(|a, b| {
        (a.time_ns, a.comm, a.kind, a.instance, a.rule)
            .cmp(&(b.time_ns, b.comm, b.kind, b.instance, b.rule))
    });
    rep
}

/// The samples of one logical communicator, its member list and its timed operations.
fn comm_samples(
    t: &OpTable,
    l: LogicalCommIdx,
    by_handle: &[Vec<u32>],
    iter_of: &IterOf<'_>,
    cfg: &AnomalyConfig,
) -> (Vec<Sample>, Vec<DevIdx>, u64) {
    let lc = &t.logical[l.ix()];
    let n = lc.nranks.max(lc.members.len() as u32);
    // (handle's comm rank, device, op indices) per member with a device.
    let handles: Vec<(Option<u32>, DevIdx, &[u32])> = lc
        .members
        .iter()
        .filter_map(|&m| {
            t.comms[m.ix()]
                .device
                .map(|d| (t.comms[m.ix()].rank, d, &by_handle[m.ix()][..]))
        })
        .collect();
    let op = |d: DevIdx, i: u32| t.per_rank[d.ix()].op(i as usize);
    let dur = |o: &CollOp| o.gpu.map(|g| g.end_ns - g.start_ns).filter(|&x| x > 0);
    let has_p2p = handles
        .iter()
        .any(|h| h.2.iter().any(|&i| op(h.1, i).kind.is_p2p()));
    let mut keys: HashMap<(OpKind, u8), u32> = HashMap::default();
    let mut key_of = |o: &CollOp| {
        let next = keys.len() as u32;
        *keys
            .entry((o.kind, o.size().map_or(UNKNOWN_BUCKET, size_bucket)))
            .or_insert(next)
    };
    let bus_of = |o: &CollOp, n: u32| {
        o.size().map_or(0.0, |b| {
            algo_bytes(o.kind, b, n, cfg.convention) as f64
                * bus_factor(o.kind, n, o.algo, cfg.convention)
        })
    };
    // Collectives: (match key, kind, bytes, member, op index), the sort key carried along so
    // sorting reads no operation; Send/Recv: ((src, dst, k), member, op index).
    let mut colls: Vec<(u64, u8, u64, u32, u32)> = Vec::new();
    let mut p2p: Vec<((u32, u32, u64), u32, u32)> = Vec::new();
    let mut lone: Vec<(u32, u32)> = Vec::new();
    let mut timed = 0u64;
    for (m, &(crank, d, idx)) in handles.iter().enumerate() {
        let mut ordinal = 0u64;
        let mut pair_seq: HashMap<(u32, u32), u64> = HashMap::default();
        for &i in idx {
            let o = op(d, i);
            let timed_op = dur(&o).is_some();
            timed += timed_op as u64;
            if !o.kind.is_p2p() {
                let k = if has_p2p { ordinal } else { o.comm_seq };
                ordinal += 1;
                if timed_op {
                    colls.push((k, o.kind as u8, o.bytes, m as u32, i));
                }
                continue;
            }
            // A two-member communicator's peer is the other member.
            let peer = o
                .peer
                .or_else(|| crank.filter(|_| n == 2).map(|me| 1 - me.min(1)));
            let pair = match (o.kind, crank, peer) {
                (OpKind::Send, Some(me), Some(p)) => Some((me, p)),
                (OpKind::Recv, Some(me), Some(p)) => Some((p, me)),
                _ => None,
            };
            match pair {
                Some(pr) => {
                    let k = pair_seq.entry(pr).or_default();
                    if timed_op {
                        p2p.push(((pr.0, pr.1, *k), m as u32, i));
                    }
                    *k += 1;
                }
                None if timed_op => lone.push((m as u32, i)),
                None => {}
            }
        }
    }
    let mut samples =
        Vec::with_capacity(colls.len() / handles.len().max(1) + p2p.len() / 2 + lone.len());
    let mut members: Vec<DevIdx> = Vec::with_capacity(colls.len() + p2p.len() + lone.len());
    colls.sort_unstable();
    let mut group_start = 0;
    // One group: entries[a..b] with equal (key, kind, bytes).
    let mut push_group = |entries: &[(u32, u32)],
                          instance: u64,
                          samples: &mut Vec<Sample>,
                          members: &mut Vec<DevIdx>| {
        let first = members.len() as u32;
        let (mut value, mut longest, mut time, mut late_start) = (i64::MAX, 0, i64::MAX, i64::MIN);
        let mut late = DevIdx(0);
        for &(m, i) in entries {
            let d = handles[m as usize].1;
            let o = op(d, i);
            let g = o.gpu.expect("timed");
            let x = g.end_ns - g.start_ns;
            (value, longest, time) = (value.min(x), longest.max(x), time.min(g.start_ns));
            if g.start_ns > late_start {
                (late_start, late) = (g.start_ns, d);
            }
            members.push(d);
        }
        let (m0, i0) = entries[0];
        let o = op(handles[m0 as usize].1, i0);
        let paired = entries.len() >= 2;
        samples.push(Sample {
            key: key_of(&o),
            iter: iter_of.of(handles[m0 as usize].1.ix(), i0 as usize, &o),
            value,
            longest,
            time,
            bus: bus_of(&o, if o.kind.is_p2p() { 2 } else { n }),
            bytes: o.size(),
            instance: if o.kind.is_p2p() && !paired {
                o.line
            } else {
                instance
            },
            members: (first, members.len() as u32),
            late,
            rule: if paired {
                Rule::SlowInstance
            } else {
                Rule::SlowOp
            },
            kind: o.kind,
        });
    };
    let mut group: Vec<(u32, u32)> = Vec::with_capacity(handles.len());
    let same = |a: &(u64, u8, u64, u32, u32), b: &(u64, u8, u64, u32, u32)| {
        (a.0, a.1, a.2) == (b.0, b.1, b.2)
    };
    for j in 1..=colls.len() {
        if j == colls.len() || !same(&colls[j], &colls[group_start]) {
            group.clear();
            group.extend(colls[group_start..j].iter().map(|e| (e.3, e.4)));
            push_group(&group, colls[group_start].0, &mut samples, &mut members);
            group_start = j;
        }
    }
    // Send/Recv: a pair is one Send and one Recv of the same (src, dst, k) and size.
    p2p.sort_unstable_by_key(|e| (e.0, op(handles[e.1 as usize].1, e.2).kind as u8, e.1));
    let mut j = 0;
    while j < p2p.len() {
        let mut e = j + 1;
        while e < p2p.len() && p2p[e].0 == p2p[j].0 {
            e += 1;
        }
        let ops_of = |x: &((u32, u32, u64), u32, u32)| op(handles[x.1 as usize].1, x.2);
        let is_pair = e - j == 2
            && ops_of(&p2p[j]).kind != ops_of(&p2p[j + 1]).kind
            && ops_of(&p2p[j]).bytes == ops_of(&p2p[j + 1]).bytes;
        if is_pair {
            group.clear();
            group.extend(p2p[j..e].iter().map(|x| (x.1, x.2)));
            push_group(&group, p2p[j].0 .2, &mut samples, &mut members);
        } else {
            lone.extend(p2p[j..e].iter().map(|x| (x.1, x.2)));
        }
        j = e;
    }
    for &(m, i) in &lone {
        push_group(
            &[(m, i)],
            op(handles[m as usize].1, i).line,
            &mut samples,
            &mut members,
        );
    }
    (samples, members, timed)
}

/// Lower edge of a history's bucket (`None` for unknown sizes).
fn bucket_lo(bytes: Option<u64>) -> Option<u64> {
    bytes.map(|b| bucket_floor(size_bucket(b)))
}

#[cfg(test)]
#[path = "anomaly_tests.rs"]
mod tests;
