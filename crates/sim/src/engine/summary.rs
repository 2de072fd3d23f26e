//! Where each rank's time went: compute, communication hidden under it, communication
//! exposed per parallelism, and bubble (neither), over `[0, job end]`; and the job's summary
//! in SimAI's terms, taken on the rank that finishes last.
//!
//! One sweep over the rank's interval boundaries. Communication counts from the network's
//! start of an operation to its end; the wait between a rank's arrival and that start (peers
//! not there yet) is bubble, which is what a pipeline's idle stages look like. When operations
//! of several parallelisms are exposed at once, the time is split evenly between them, so the
//! per-kind figures add up to the exposed total.

use commlens_workload::{GroupKind, Workload};
use serde::Serialize;

use super::{ComputeRecord, OpRecord, RankRun, Summary};

/// Time of one parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KindTime {
    pub kind: GroupKind,
    /// SimAI's label (`DP`, `DP_EP`, `TP`, `EP`, `PP`, …).
    pub label: &'static str,
    pub us: f64,
}

/// One rank's time over `[0, job end]`: `compute_us + exposed_comm_us + bubble_us` is the job
/// time.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Breakdown {
    pub compute_us: f64,
    /// Union of communication, hidden or not.
    pub comm_us: f64,
    pub exposed_us: Vec<KindTime>,
    pub exposed_comm_us: f64,
    pub bubble_us: f64,
}

impl Breakdown {
    pub fn exposed(&self, kind: GroupKind) -> f64 {
        self.exposed_us.iter().find(|k| k.kind == kind).map_or(0.0, |k| k.us)
    }
}

/// SimAI's five exposed-communication terms, always listed, in its order.
const SIMAI: [GroupKind; 5] = [GroupKind::Dp, GroupKind::DpEp, GroupKind::Tp, GroupKind::Ep, GroupKind::Pp];

fn kind_index(k: GroupKind) -> usize {
    GroupKind::ALL.iter().position(|&x| x == k).expect("listed")
}

/// The breakdown of one rank from its compute spans and communication records.
pub fn breakdown(compute: &[ComputeRecord], ops: &[OpRecord], total_us: f64) -> Breakdown {
    const NK: usize = GroupKind::ALL.len();
    // (time, +1/−1, class): class 0 is compute, 1 + kind index a parallelism.
    let mut ev: Vec<(f64, i32, usize)> = Vec::with_capacity(2 * (compute.len() + ops.len()));
    for c in compute.iter().filter(|c| c.end_us > c.start_us) {
        ev.push((c.start_us, 1, 0));
        ev.push((c.end_us, -1, 0));
    }
    for o in ops.iter().filter(|o| o.end_us > o.start_us) {
        let k = 1 + kind_index(o.group_kind);
        ev.push((o.start_us, 1, k));
        ev.push((o.end_us, -1, k));
    }
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut count = [0i32; NK + 1];
    let mut exposed = [0f64; NK];
    let mut b = Breakdown::default();
    let mut account = |dt: f64, count: &[i32; NK + 1]| {
        let active = count[1..].iter().filter(|&&c| c > 0).count();
        if count[0] > 0 {
            b.compute_us += dt;
            if active > 0 {
                b.comm_us += dt;
            }
        } else if active > 0 {
            b.comm_us += dt;
            b.exposed_comm_us += dt;
            for (k, _) in count[1..].iter().enumerate().filter(|(_, &c)| c > 0) {
                exposed[k] += dt / active as f64;
            }
        } else {
            b.bubble_us += dt;
        }
    };
    let mut last = 0.0;
    for (t, d, class) in ev {
        if t > last {
            account(t - last, &count);
            last = t;
        }
        count[class] += d;
    }
    if total_us > last {
        account(total_us - last, &count);
    }
    b.exposed_us = GroupKind::ALL
        .iter()
        .enumerate()
        .filter(|(i, k)| SIMAI.contains(k) || exposed[*i] > 0.0)
        .map(|(i, &kind)| KindTime { kind, label: kind.label(), us: exposed[i] })
        .collect();
    b.exposed_us.sort_by_key(|k| SIMAI.iter().position(|&s| s == k.kind).unwrap_or(SIMAI.len() + kind_index(k.kind)));
    b
}

/// The job's summary from the ranks' results (their breakdowns already filled).
pub(super) fn summarize(w: &Workload, ranks: &[RankRun], total_us: f64) -> Summary {
    let slowest = ranks.iter().fold(None::<&RankRun>, |best, r| match best {
        Some(b) if b.end_us >= r.end_us => Some(b),
        _ => Some(r),
    });
    let n_iter = ranks.iter().map(|r| r.iteration_end_us.len()).max().unwrap_or(0);
    let ends: Vec<f64> = if n_iter == 0 {
        vec![total_us]
    } else {
        (0..n_iter).map(|k| ranks.iter().filter_map(|r| r.iteration_end_us.get(k)).copied().fold(0.0, f64::max)).collect()
    };
    let iteration_us: Vec<f64> = ends.iter().scan(0.0, |prev, &e| {
        let d = e - *prev;
        *prev = e;
        Some(d)
    }).collect();
    let b = slowest.map(|r| r.breakdown.clone()).unwrap_or_default();
    Summary {
        world: w.world,
        ranks_simulated: ranks.len() as u32,
        total_us,
        iterations: ends.len() as u32,
        mean_iteration_us: ends.last().copied().unwrap_or(0.0) / ends.len() as f64,
        iteration_us,
        slowest_rank: slowest.map_or(0, |r| r.rank),
        compute_us: b.compute_us,
        comm_us: b.comm_us,
        exposed_us: b.exposed_us,
        exposed_comm_us: b.exposed_comm_us,
        bubble_us: b.bubble_us,
    }
}
