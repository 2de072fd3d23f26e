//! The rules of [`super`] applied to one communicator's samples: histories, robust
//! scores, late arrivals, step changes over iterations.

use super::{bucket_lo, Anomaly, AnomalyConfig, CommOut, HistorySeries, Rule, Sample, NO_ITER};
use commlens_core::model::{DevIdx, LogicalCommIdx};
use commlens_core::OpTable;

/// Median of `v` by selection (reorders `v`); NaN when empty.
fn median(v: &mut [f64]) -> f64 {
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let mid = n / 2;
    let (lower, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *m;
    if n % 2 == 1 {
        upper
    } else {
        (lower.iter().copied().fold(f64::MIN, f64::max) + upper) / 2.0
    }
}

/// Median and robust scale (`max(1.4826·MAD, 1 % of the median, floor)`) of `v`
/// (reordered); `floor` is in the values' unit (1 ns for durations).
fn center_scale(v: &mut [f64], floor: f64) -> (f64, f64) {
    let m = median(v);
    for x in v.iter_mut() {
        *x = (*x - m).abs();
    }
    let mad = median(v);
    (m, (1.4826 * mad).max(0.01 * m.abs()).max(floor))
}

/// The best two-segment split of per-iteration medians, when it is a slowdown:
/// (index of the first right iteration, left median, right median, score).
fn step_change(
    medians: &[(u32, f64)],
    cfg: &AnomalyConfig,
    buf: &mut Vec<f64>,
) -> Option<(usize, f64, f64, f64)> {
    let k = medians.len();
    let mi = cfg.change_min_iterations.max(1);
    if k < 2 * mi || medians.iter().any(|m| m.1 <= 0.0) {
        return None;
    }
    let logs: Vec<f64> = medians.iter().map(|m| m.1.ln()).collect();
    let mut prefix = Vec::with_capacity(k + 1);
    prefix.push(0.0);
    for x in &logs {
        prefix.push(prefix.last().copied().unwrap_or(0.0) + x);
    }
    let total = prefix[k];
    let (split, _) = (mi..=k - mi)
        .map(|s| {
            let (l, r) = (prefix[s] / s as f64, (total - prefix[s]) / (k - s) as f64);
            (s, (r - l) * ((s * (k - s)) as f64 / k as f64).sqrt())
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    buf.clear();
    buf.extend(medians[..split].iter().map(|m| m.1));
    let left = median(buf);
    buf.clear();
    buf.extend(medians[split..].iter().map(|m| m.1));
    let right = median(buf);
    // Spread of the per-iteration medians around their own segment's median.
    buf.clear();
    buf.extend(
        logs.iter()
            .enumerate()
            .map(|(i, x)| (x - if i < split { left.ln() } else { right.ln() }).abs()),
    );
    let sigma = (1.4826 * median(buf)).max(0.01);
    let z = (right / left).ln() / sigma;
    let big =
        right >= cfg.change_min_effect * left && right - left >= cfg.change_min_excess_ns as f64;
    (big && z >= cfg.change_z).then_some((split, left, right, z))
}

/// Per-iteration medians of the judged values of one history.
fn iteration_medians(hist: &[Sample], buf: &mut Vec<f64>) -> Vec<(u32, f64)> {
    let mut by_iter: Vec<(u32, i64)> = hist
        .iter()
        .filter(|s| s.iter != NO_ITER)
        .map(|s| (s.iter, s.value))
        .collect();
    by_iter.sort_unstable();
    let mut out = Vec::new();
    let mut a = 0;
    while a < by_iter.len() {
        let mut b = a + 1;
        while b < by_iter.len() && by_iter[b].0 == by_iter[a].0 {
            b += 1;
        }
        buf.clear();
        buf.extend(by_iter[a..b].iter().map(|x| x.1 as f64));
        out.push((by_iter[a].0, median(buf)));
        a = b;
    }
    out
}

/// Where the largest score so far was: (score, kind, bytes, instance).
type Largest = Option<(f64, commlens_core::OpKind, Option<u64>, u64)>;

struct Ctx<'a> {
    t: &'a OpTable,
    l: LogicalCommIdx,
    members: &'a [DevIdx],
    cfg: &'a AnomalyConfig,
}

impl Ctx<'_> {
    fn anomaly(&self, s: &Sample, rule: Rule, observed: f64, expected: f64, score: f64) -> Anomaly {
        let devs: Vec<DevIdx> = self.members[s.members.0 as usize..s.members.1 as usize].to_vec();
        Anomaly {
            rule,
            comm: self.l,
            comm_name: self.t.logical[self.l.ix()].name.clone(),
            kind: s.kind,
            bytes: s.bytes,
            bucket_lo_bytes: bucket_lo(s.bytes),
            time_ns: s.time,
            ranks: devs
                .iter()
                .map(|d| self.t.devices.get(d.ix()).and_then(|x| x.global_rank))
                .collect(),
            devs,
            instance: Some(s.instance),
            iteration: (s.iter != NO_ITER).then_some(s.iter),
            observed_ns: observed,
            expected_ns: expected,
            observed_busbw_gb_s: None,
            expected_busbw_gb_s: None,
            ratio: observed / expected,
            score,
        }
    }

    /// Judges the samples of one segment of one history against its own median.
    fn points(
        &self,
        seg: &[Sample],
        out: &mut CommOut,
        largest: &mut Largest,
        buf: &mut Vec<f64>,
        bw: &mut Vec<f64>,
    ) {
        let cfg = self.cfg;
        if seg.len() < cfg.min_history {
            return;
        }
        buf.clear();
        buf.extend(seg.iter().map(|s| s.value as f64));
        let (m, sc) = center_scale(buf, 1.0);
        bw.clear();
        bw.extend(
            seg.iter()
                .filter(|s| s.bus > 0.0)
                .map(|s| s.bus / s.value as f64),
        );
        let bus_stats = (bw.len() >= cfg.min_history).then(|| center_scale(bw, f64::MIN_POSITIVE));
        for s in seg {
            let x = s.value as f64;
            let z = (x - m) / sc;
            if largest.is_none_or(|l| z > l.0) {
                *largest = Some((z, s.kind, s.bytes, s.instance));
            }
            let departs = |x: f64, z: f64| {
                z >= cfg.z_threshold && x >= cfg.min_ratio * m && x - m >= cfg.min_excess_ns as f64
            };
            let bus = (s.bus > 0.0)
                .then_some(bus_stats)
                .flatten()
                .map(|(mb, sb)| (s.bus / x, mb, sb));
            let bw_departs = bus.is_none_or(|(b, mb, sb)| {
                (mb - b) / sb >= cfg.z_threshold && b * cfg.min_ratio <= mb
            });
            if departs(x, z) && bw_departs {
                let mut a = self.anomaly(s, s.rule, x, m, z);
                if let Some((b, mb, _)) = bus {
                    (a.observed_busbw_gb_s, a.expected_busbw_gb_s) = (Some(b), Some(mb));
                }
                out.anomalies.push(a);
            } else if s.members.1 - s.members.0 >= 2 {
                let y = s.longest as f64;
                if departs(y, (y - m) / sc) {
                    out.late.push(s.late);
                }
            }
        }
    }
}

/// Judges every history of one communicator (see the module docs of [`super`]).
pub(super) fn judge(
    t: &OpTable,
    l: LogicalCommIdx,
    mut samples: Vec<Sample>,
    members: &[DevIdx],
    cfg: &AnomalyConfig,
) -> CommOut {
    let ctx = Ctx { t, l, members, cfg };
    let mut out = CommOut {
        samples: samples.len() as u64,
        ..CommOut::default()
    };
    samples.sort_unstable_by_key(|s| (s.key, s.time, s.instance));
    let (mut buf, mut bw) = (Vec::new(), Vec::new());
    let mut largest: Largest = None;
    let mut a = 0;
    while a < samples.len() {
        let mut b = a + 1;
        while b < samples.len() && samples[b].key == samples[a].key {
            b += 1;
        }
        let hist = &samples[a..b];
        a = b;
        out.histories += 1;
        if hist.len() < cfg.min_history {
            continue;
        }
        out.histories_judged += 1;
        out.judged += hist.len() as u64;
        let before = out.anomalies.len();
        let medians = iteration_medians(hist, &mut buf);
        let change = step_change(&medians, cfg, &mut buf);
        let split = change.map_or(hist.len(), |(i, ..)| {
            let first = medians[i].0;
            let at = hist
                .iter()
                .filter(|s| s.iter == first)
                .map(|s| s.time)
                .min()
                .unwrap_or(i64::MAX);
            hist.partition_point(|s| s.time < at)
        });
        ctx.points(&hist[..split], &mut out, &mut largest, &mut buf, &mut bw);
        ctx.points(&hist[split..], &mut out, &mut largest, &mut buf, &mut bw);
        if let (Some((i, left, right, z)), Some(first)) = (change, hist.get(split)) {
            let all: Vec<DevIdx> = {
                let mut v: Vec<DevIdx> = hist
                    .iter()
                    .flat_map(|s| {
                        members[s.members.0 as usize..s.members.1 as usize]
                            .iter()
                            .copied()
                    })
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let mut a = ctx.anomaly(first, Rule::StepChange, right, left, z);
            a.iteration = Some(medians[i].0);
            a.instance = None;
            a.bytes = None;
            a.ranks = all
                .iter()
                .map(|d| t.devices.get(d.ix()).and_then(|x| x.global_rank))
                .collect();
            a.devs = all;
            out.anomalies.push(a);
        }
        if out.anomalies.len() > before && !medians.is_empty() {
            let change_at = change.map(|(i, ..)| medians[i].0);
            out.series.push(HistorySeries {
                comm_name: t.logical[l.ix()].name.clone(),
                kind: hist[0].kind,
                bucket_lo_bytes: bucket_lo(hist[0].bytes),
                medians_ns: medians,
                change_at,
            });
        }
    }
    out.largest = largest.map(|(z, kind, bytes, inst)| {
        let size = bytes.map_or_else(|| "size unknown".to_string(), |b| format!("{b} B"));
        (
            z,
            format!(
                "{} {} {size}, instance {inst}",
                t.logical[l.ix()].name,
                kind.name()
            ),
        )
    });
    out
}
