//! Stragglers and slow ranks: who arrives late at collectives, how much time
//! the others spend waiting, and which ranks move data slower than their peers.
//!
//! **Instances.** Inside one logical communicator the k-th operation of every
//! member handle (`CollOp::comm_seq`) is one collective instance, as in
//! [`crate::clock`]; on a communicator that carries Send/Recv, collectives are
//! matched by their ordinal among the handle's collectives instead
//! ([`MatchKey`]), and point-to-point operations are never instances. Members
//! that disagree with the majority on kind and bytes are dropped and counted.
//!
//! **Times.** GPU spans when at least two members of an instance have one
//! (only those take part), otherwise CPU enqueue timestamps, flagged with
//! [`TimeSource::Cpu`]: they show arrival at the API, not at the GPU, and give
//! no durations. Per-device clock offsets (eq. 4.8) can be added first
//! ([`StragglerConfig::with_clock`]); without them a rank's clock offset looks
//! like lateness. Offsets estimated on kernel ends ([`crate::clock::SyncPoint::End`])
//! keep arrival skew visible; midpoint or start offsets absorb part of it.
//!
//! **Per instance** (TraceLens's collective semantics): start skew = latest
//! start − earliest start, end skew likewise, latency = the minimum duration
//! over members (the time the transfer needed once everyone was there), and
//! the member that started last. **Per rank**: instances it was last in, mean
//! and max lateness (own start − earliest start) and mean wait (own duration −
//! minimum duration: time spent waiting for the others).
//!
//! **Slow ranks** (NCCLX's SlowRankDetector: bytes moved over time in a
//! window, a rank flagged when it stays below a threshold for several
//! windows). Per member and GPU instance, a busbw sample is the instance's
//! bus bytes (`S × factor` from [`crate::bandwidth`]) over the member's
//! *effective* duration, from the latest member start to its own end: waiting
//! for a late peer is excluded, so an early arriver of a two-rank group is not
//! taken for slow. Every `window` instances of a communicator, each member's
//! window busbw is `Σ bytes / Σ effective durations`, compared with the
//! median of the other members' over the same window; a ratio under
//! `slow_fraction` is a low window, and `min_windows` consecutive low windows
//! flag the rank. Only instances of at least `min_window_bytes` (1 MiB)
//! count: below that a duration is latency and clock noise. A partial last window is not judged (as NCCLX waits for a
//! full window). Limit: in a ring every member waits for the slowest link, so
//! a slow link delays all ends alike and shows as a slow communicator
//! (`CommStragglers::busbw_gb_s`), not as one slow rank.
//!
//! Work is per communicator (rayon); memory is one index of operations per
//! handle plus per-member accumulators; instance records are kept only for
//! the `worst` skews unless `keep_instances` is set.

use crate::bandwidth::{algo_bytes, bus_factor, BusConvention};
use crate::clock::{ClockSync, MatchKey};
use commlens_core::model::{CommIdx, DevIdx, LogicalCommIdx};
use commlens_core::{CollOp, OpKind, OpTable};
use rayon::prelude::*;
use serde::Serialize;

/// Options of [`analyze_stragglers`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StragglerConfig {
    /// Nanoseconds to add to each device's timestamps, by `DevIdx`.
    pub offsets_ns: Option<Vec<i64>>,
    /// GPU instances per slow-rank window.
    pub window: usize,
    /// A window is low when the rank's busbw is below this fraction of its peers' median.
    pub slow_fraction: f64,
    /// Consecutive low windows that flag a rank.
    pub min_windows: usize,
    /// Instances smaller than this (logged bytes) do not enter the slow-rank
    /// windows: their durations are latency and clock noise, not bandwidth.
    pub min_window_bytes: u64,
    pub convention: BusConvention,
    /// Keep every instance record (else the `worst` start skews).
    pub keep_instances: bool,
    pub worst: usize,
}

impl Default for StragglerConfig {
    fn default() -> Self {
        StragglerConfig {
            offsets_ns: None,
            window: 16,
            slow_fraction: 0.7,
            min_windows: 2,
            min_window_bytes: 1 << 20,
            convention: BusConvention::NcclTests,
            keep_instances: false,
            worst: 10,
        }
    }
}

impl StragglerConfig {
    /// Default options with the offsets of a clock synchronization.
    pub fn with_clock(sync: &ClockSync, n_devices: usize) -> Self {
        let offsets = (0..n_devices).map(|d| sync.offset_ns(DevIdx(d as u32)).unwrap_or(0)).collect();
        StragglerConfig { offsets_ns: Some(offsets), ..Default::default() }
    }
}

/// Which clock an instance was measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TimeSource {
    Gpu,
    /// CPU enqueue timestamps: arrival at the API, no durations.
    Cpu,
}

/// One collective instance across its members.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    pub comm: LogicalCommIdx,
    /// `comm_seq`, or the collective ordinal (see [`MatchKey`]).
    pub key: u64,
    pub kind: OpKind,
    pub bytes: u64,
    pub source: TimeSource,
    /// Members with a time.
    pub members: u32,
    pub first_start_ns: i64,
    pub start_skew_ns: i64,
    pub end_skew_ns: Option<i64>,
    /// Minimum duration over the members (GPU only).
    pub latency_ns: Option<i64>,
    pub max_duration_ns: Option<i64>,
    /// The member that started last; `None` when all started together.
    pub last: Option<DevIdx>,
    pub last_global_rank: Option<u32>,
}

/// One logical communicator's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommStragglers {
    pub comm: LogicalCommIdx,
    pub name: String,
    pub nranks: u32,
    pub key: MatchKey,
    pub gpu_instances: u64,
    pub cpu_instances: u64,
    /// Instances with fewer than two timed members.
    pub untimed: u64,
    /// Member entries dropped for disagreeing with the majority's kind and bytes.
    pub mismatched: u64,
    pub mean_start_skew_ns: f64,
    pub max_start_skew_ns: i64,
    pub mean_end_skew_ns: Option<f64>,
    /// Σ latency (minimum durations) over GPU instances.
    pub latency_ns: i64,
    /// Σ over members and GPU instances of (own duration − latency).
    pub wait_ns: i64,
    /// Σ bus bytes / Σ latency over GPU instances.
    pub busbw_gb_s: Option<f64>,
}

/// One rank's figures over all its communicators.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankStragglers {
    pub dev: DevIdx,
    pub global_rank: Option<u32>,
    /// Timed instances it took part in.
    pub instances: u64,
    /// Instances it started last in.
    pub last: u64,
    pub last_share: f64,
    /// Mean of own start − earliest start.
    pub mean_lateness_ns: f64,
    pub max_lateness_ns: i64,
    /// Mean of own duration − minimum duration over GPU instances.
    pub mean_wait_ns: Option<f64>,
}

/// Slow-rank windows of one rank in one communicator (only ranks with a low window).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowRank {
    pub dev: DevIdx,
    pub global_rank: Option<u32>,
    pub comm: LogicalCommIdx,
    /// Full windows judged.
    pub windows: u32,
    /// Windows below `slow_fraction` of the peers' median.
    pub low: u32,
    pub longest_low_run: u32,
    /// At least `min_windows` consecutive low windows.
    pub flagged: bool,
    /// Lowest window busbw / peers' median.
    pub min_ratio: f64,
    /// Busbw of that window and the peers' median then.
    pub busbw_gb_s: f64,
    pub peers_median_gb_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StragglerReport {
    /// Some instances were timed with CPU enqueue timestamps.
    pub cpu_timestamps: bool,
    pub gpu_instances: u64,
    pub cpu_instances: u64,
    pub untimed_instances: u64,
    pub comms: Vec<CommStragglers>,
    /// Ranks that took part in a timed instance, by device.
    pub ranks: Vec<RankStragglers>,
    pub slow: Vec<SlowRank>,
    /// All instances (`keep_instances`) or the `worst` start skews, largest first.
    pub instances: Vec<Instance>,
}

impl StragglerReport {
    /// Devices flagged slow in at least one communicator.
    pub fn slow_ranks(&self) -> Vec<DevIdx> {
        let mut v: Vec<DevIdx> = self.slow.iter().filter(|s| s.flagged).map(|s| s.dev).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Per-member accumulators of one communicator.
#[derive(Default, Clone)]
struct MemberAcc {
    instances: u64,
    last: u64,
    lateness_sum: i128,
    lateness_max: i64,
    wait_sum: i128,
    gpu: u64,
    // Current window.
    win_bytes: f64,
    win_ns: i64,
    // Judged windows.
    windows: u32,
    low: u32,
    run: u32,
    longest: u32,
    min_ratio: Option<(f64, f64, f64)>,
}

struct CommOut {
    comm: CommStragglers,
    members: Vec<(DevIdx, MemberAcc)>,
    instances: Vec<Instance>,
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Keeps the `n` largest start skews (all when `n == usize::MAX`).
fn keep_worst(v: &mut Vec<Instance>, n: usize) {
    if v.len() > n.saturating_mul(2).max(64) || n == 0 {
        v.sort_by_key(|i| std::cmp::Reverse(i.start_skew_ns));
        v.truncate(n);
    }
}

/// Judges one full window: each member against the median of the others.
fn close_window(acc: &mut [MemberAcc], fraction: f64) {
    let bw: Vec<Option<f64>> =
        acc.iter().map(|a| (a.win_ns > 0).then(|| a.win_bytes / a.win_ns as f64)).collect();
    let mut peers = Vec::with_capacity(bw.len());
    for (i, a) in acc.iter_mut().enumerate() {
        if let Some(own) = bw[i] {
            peers.clear();
            peers.extend(bw.iter().enumerate().filter(|(j, _)| *j != i).filter_map(|(_, b)| *b));
            if let Some(med) = median(&mut peers).filter(|m| *m > 0.0) {
                let ratio = own / med;
                a.windows += 1;
                if ratio < fraction {
                    a.low += 1;
                    a.run += 1;
                    a.longest = a.longest.max(a.run);
                } else {
                    a.run = 0;
                }
                if a.min_ratio.is_none_or(|m| ratio < m.0) {
                    a.min_ratio = Some((ratio, own, med));
                }
            }
        }
        a.win_bytes = 0.0;
        a.win_ns = 0;
    }
}

fn analyze_comm(t: &OpTable, l: LogicalCommIdx, by_handle: &[Vec<u32>], cfg: &StragglerConfig) -> CommOut {
    let lc = &t.logical[l.ix()];
    let members: Vec<(CommIdx, DevIdx)> =
        lc.members.iter().filter_map(|&m| t.comms[m.ix()].device.map(|d| (m, d))).collect();
    let op = |_: CommIdx, d: DevIdx, i: u32| t.per_rank[d.ix()].op(i as usize);
    let has_p2p = members.iter().any(|&(c, d)| by_handle[c.ix()].iter().any(|&i| op(c, d, i).kind.is_p2p()));
    let key = if has_p2p { MatchKey::CollectiveOrdinal } else { MatchKey::CommSeq };
    // Per member: (key, op index) of its collectives, in key order.
    let lists: Vec<Vec<(u64, u32)>> = members
        .iter()
        .map(|&(c, d)| {
            let mut v: Vec<(u64, u32)> = by_handle[c.ix()]
                .iter()
                .filter(|&&i| !op(c, d, i).kind.is_p2p())
                .map(|&i| (op(c, d, i).comm_seq, i))
                .collect();
            if !v.windows(2).all(|w| w[0].0 <= w[1].0) {
                v.sort_unstable();
            }
            if has_p2p {
                for (n, e) in v.iter_mut().enumerate() {
                    e.0 = n as u64;
                }
            }
            v
        })
        .collect();
    let offset = |d: DevIdx| cfg.offsets_ns.as_ref().and_then(|o| o.get(d.ix()).copied()).unwrap_or(0);
    let n = lc.nranks.max(members.len() as u32);
    let mut acc = vec![MemberAcc::default(); members.len()];
    let mut cursor = vec![0usize; members.len()];
    let mut out = CommStragglers {
        comm: l,
        name: lc.name.clone(),
        nranks: lc.nranks,
        key,
        gpu_instances: 0,
        cpu_instances: 0,
        untimed: 0,
        mismatched: 0,
        mean_start_skew_ns: 0.0,
        max_start_skew_ns: 0,
        mean_end_skew_ns: None,
        latency_ns: 0,
        wait_ns: 0,
        busbw_gb_s: None,
    };
    let (mut skew_sum, mut end_skew_sum, mut bus_bytes) = (0i128, 0i128, 0f64);
    let mut instances = Vec::new();
    let mut window_fill = 0usize;
    // Reused per instance: (member position, op).
    let mut entries: Vec<(usize, CollOp)> = Vec::with_capacity(members.len());
    // (member position, start, end) of the timed entries.
    let mut timed: Vec<(usize, i64, Option<i64>)> = Vec::with_capacity(members.len());
    // K-way merge of the members' key-ordered lists: each step takes the
    // smallest pending key, one instance.
    while let Some(k) = (0..members.len()).filter_map(|m| lists[m].get(cursor[m]).map(|e| e.0)).min() {
        entries.clear();
        for m in 0..members.len() {
            let mut own = 0;
            while let Some(&(_, i)) = lists[m].get(cursor[m]).filter(|e| e.0 == k) {
                // A repeated key on one handle (a source that reset its
                // sequence) keeps the first operation.
                if own == 0 {
                    entries.push((m, op(members[m].0, members[m].1, i)));
                } else {
                    out.mismatched += 1;
                }
                own += 1;
                cursor[m] += 1;
            }
        }
        // Majority kind and bytes.
        let mut votes: Vec<((OpKind, u64), usize)> = Vec::new();
        for (_, o) in &entries {
            match votes.iter_mut().find(|v| v.0 == (o.kind, o.bytes)) {
                Some(v) => v.1 += 1,
                None => votes.push(((o.kind, o.bytes), 1)),
            }
        }
        let Some(&((kind, bytes), _)) = votes.iter().max_by_key(|v| v.1) else { continue };
        let before = entries.len();
        entries.retain(|(_, o)| (o.kind, o.bytes) == (kind, bytes));
        out.mismatched += (before - entries.len()) as u64;
        let gpu = entries.iter().filter(|(_, o)| o.gpu.is_some()).count() >= 2;
        timed.clear();
        for (m, o) in &entries {
            let off = offset(members[*m].1);
            match (gpu, o.gpu, o.cpu_ts_ns) {
                (true, Some(s), _) => timed.push((*m, s.start_ns + off, Some(s.end_ns + off))),
                (false, _, Some(c)) => timed.push((*m, c + off, None)),
                _ => {}
            }
        }
        if timed.len() < 2 {
            out.untimed += 1;
            continue;
        }
        let source = if gpu { TimeSource::Gpu } else { TimeSource::Cpu };
        let first = timed.iter().map(|e| e.1).min().expect("two entries");
        let last_start = timed.iter().map(|e| e.1).max().expect("two entries");
        let skew = last_start - first;
        // The first member in position order among those that started last.
        let last = (skew > 0).then(|| timed.iter().find(|e| e.1 == last_start).expect("max").0);
        let durations = || timed.iter().filter_map(|e| e.2.map(|end| end - e.1));
        let latency = durations().min();
        let ends = || timed.iter().filter_map(|e| e.2);
        let end_skew = ends().max().zip(ends().min()).map(|(a, b)| a - b);
        skew_sum += skew as i128;
        out.max_start_skew_ns = out.max_start_skew_ns.max(skew);
        let bus = algo_bytes(kind, bytes, n, cfg.convention) as f64 * bus_factor(kind, n, None, cfg.convention);
        for &(m, start, end) in &timed {
            let a = &mut acc[m];
            a.instances += 1;
            a.last += (last == Some(m)) as u64;
            a.lateness_sum += (start - first) as i128;
            a.lateness_max = a.lateness_max.max(start - first);
            if let (Some(end), Some(lat)) = (end, latency) {
                a.gpu += 1;
                a.wait_sum += (end - start - lat) as i128;
                out.wait_ns += end - start - lat;
                let effective = end - last_start;
                if effective > 0 && bytes >= cfg.min_window_bytes {
                    a.win_bytes += bus;
                    a.win_ns += effective;
                }
            }
        }
        match source {
            TimeSource::Gpu => {
                out.gpu_instances += 1;
                end_skew_sum += end_skew.unwrap_or(0) as i128;
                if let Some(lat) = latency.filter(|l| *l > 0) {
                    out.latency_ns += lat;
                    bus_bytes += bus;
                }
                window_fill += usize::from(bytes >= cfg.min_window_bytes);
                if window_fill == cfg.window.max(1) {
                    close_window(&mut acc, cfg.slow_fraction);
                    window_fill = 0;
                }
            }
            TimeSource::Cpu => out.cpu_instances += 1,
        }
        let last_dev = last.map(|m| members[m].1);
        instances.push(Instance {
            comm: l,
            key: k,
            kind,
            bytes,
            source,
            members: timed.len() as u32,
            first_start_ns: first,
            start_skew_ns: skew,
            end_skew_ns: end_skew,
            latency_ns: latency,
            max_duration_ns: durations().max(),
            last: last_dev,
            last_global_rank: last_dev.and_then(|d| t.devices[d.ix()].global_rank),
        });
        if !cfg.keep_instances {
            keep_worst(&mut instances, cfg.worst);
        }
    }
    let timed_n = out.gpu_instances + out.cpu_instances;
    if timed_n > 0 {
        out.mean_start_skew_ns = skew_sum as f64 / timed_n as f64;
    }
    if out.gpu_instances > 0 {
        out.mean_end_skew_ns = Some(end_skew_sum as f64 / out.gpu_instances as f64);
    }
    out.busbw_gb_s = (out.latency_ns > 0).then(|| bus_bytes / out.latency_ns as f64);
    CommOut { comm: out, members: members.iter().map(|m| m.1).zip(acc).collect(), instances }
}

/// Matches every communicator's collective instances and derives the
/// straggler and slow-rank figures (see the module docs).
pub fn analyze_stragglers(table: &OpTable, cfg: &StragglerConfig) -> StragglerReport {
    let t = table;
    let mut by_handle: Vec<Vec<u32>> = vec![Vec::new(); t.comms.len()];
    for ops in &t.per_rank {
        for (i, o) in ops.iter().enumerate() {
            if let Some(v) = by_handle.get_mut(o.comm.ix()) {
                v.push(i as u32);
            }
        }
    }
    let outs: Vec<CommOut> = (0..t.logical.len() as u32)
        .into_par_iter()
        .map(|l| {
            let mut o = analyze_comm(t, LogicalCommIdx(l), &by_handle, cfg);
            if !cfg.keep_instances {
                // Each communicator's own `worst` in the final order (one
                // communicator: skew only, stable) hold every instance of the
                // overall `worst`, so no more is kept while the others run.
                o.instances.sort_by_key(|i| std::cmp::Reverse(i.start_skew_ns));
                o.instances.truncate(cfg.worst);
                o.instances.shrink_to_fit();
            }
            o
        })
        .collect();
    let mut ranks: Vec<Option<MemberAcc>> = vec![None; t.devices.len()];
    let mut report = StragglerReport {
        cpu_timestamps: false,
        gpu_instances: 0,
        cpu_instances: 0,
        untimed_instances: 0,
        comms: Vec::with_capacity(outs.len()),
        ranks: Vec::new(),
        slow: Vec::new(),
        instances: Vec::new(),
    };
    for o in outs {
        for (d, a) in &o.members {
            if a.low > 0 {
                let (ratio, own, med) = a.min_ratio.unwrap_or((1.0, 0.0, 0.0));
                report.slow.push(SlowRank {
                    dev: *d,
                    global_rank: t.devices[d.ix()].global_rank,
                    comm: o.comm.comm,
                    windows: a.windows,
                    low: a.low,
                    longest_low_run: a.longest,
                    flagged: a.longest as usize >= cfg.min_windows.max(1),
                    min_ratio: ratio,
                    busbw_gb_s: own,
                    peers_median_gb_s: med,
                });
            }
            let r = ranks[d.ix()].get_or_insert_with(MemberAcc::default);
            r.instances += a.instances;
            r.last += a.last;
            r.lateness_sum += a.lateness_sum;
            r.lateness_max = r.lateness_max.max(a.lateness_max);
            r.wait_sum += a.wait_sum;
            r.gpu += a.gpu;
        }
        report.gpu_instances += o.comm.gpu_instances;
        report.cpu_instances += o.comm.cpu_instances;
        report.untimed_instances += o.comm.untimed;
        report.instances.extend(o.instances);
        report.comms.push(o.comm);
    }
    report.cpu_timestamps = report.cpu_instances > 0;
    if !cfg.keep_instances {
        report.instances.sort_by(|a, b| b.start_skew_ns.cmp(&a.start_skew_ns).then(a.comm.cmp(&b.comm)));
        report.instances.truncate(cfg.worst);
    }
    report.ranks = ranks
        .into_iter()
        .enumerate()
        .filter_map(|(d, a)| a.filter(|a| a.instances > 0).map(|a| (DevIdx(d as u32), a)))
        .map(|(dev, a)| RankStragglers {
            dev,
            global_rank: t.devices[dev.ix()].global_rank,
            instances: a.instances,
            last: a.last,
            last_share: a.last as f64 / a.instances as f64,
            mean_lateness_ns: a.lateness_sum as f64 / a.instances as f64,
            max_lateness_ns: a.lateness_max,
            mean_wait_ns: (a.gpu > 0).then(|| a.wait_sum as f64 / a.gpu as f64),
        })
        .collect();
    report
}

#[cfg(test)]
#[path = "straggler_tests.rs"]
mod tests;
