//! The delay model between a record's CPU time and its kernel on one stream:
//! `lag = kernel time − record time`.
//!
//! Two kernel times are used, whichever the trace has:
//!
//! * **launch** ([`KernelEntry::launch_ns`](crate::KernelEntry::launch_ns), the CPU
//!   time of the launching runtime call): `lag` = clock offset + a few µs, nearly
//!   constant. The offset is found by voting: every first-pass match proposes the
//!   lags to the kernels around its partner, and the densest 4 µs bin wins, so a
//!   first pass that is shifted over whole stretches does not mislead it. Pairs
//!   near the mode are inliers; a running median over the `2h+1` nearest inliers
//!   (edge-preserving, exact on linear drift) follows slow clock drift, and the
//!   spread `σ` is the scaled median absolute residual, floored. Scoring is
//!   two-sided.
//! * **start** only: kernels wait behind earlier GPU work, so the lag drifts by
//!   milliseconds and says little beyond causality. The model is the lower
//!   envelope (2nd percentile of first-pass lags) and scoring is one-sided: only
//!   kernels that would start before their record (beyond `σ`) are penalised.

/// Predicted lag per stream record, and how to score residuals.
#[derive(Debug, Clone, PartialEq)]
pub struct LagModel {
    /// `pred_ns[i]`: expected lag for record `i`; NaN when unknown.
    pub pred_ns: Vec<f64>,
    pub sigma_ns: f64,
    /// `1 / sigma_ns`.
    pub inv_sigma: f64,
    /// Kernel times are launch times (else GPU start times).
    pub from_launch: bool,
    /// Only negative residuals (kernel before record) are evidence.
    pub one_sided: bool,
}

const VOTE_BIN_NS: f64 = 4_000.0;

/// The rank's launch-clock offset: centre of the densest bin of candidate lags,
/// and the robust spread of the votes in it. `None` without votes.
pub fn launch_offset(votes: &[f64], min_sigma_ns: f64) -> Option<(f64, f64)> {
    let (mode, mut spread) = vote_mode(votes)?;
    Some((mode, (1.4826 * median(&mut spread)).max(min_sigma_ns)))
}

/// Launch-clock model of one stream around the rank's `(offset, spread)`: the
/// first-pass `(record position, lag)` points (sorted by position) within
/// `max(10·spread, 20 µs)` of the offset are inliers; with at least
/// `min_points` of them, and at least half the points, a running median
/// follows drift, otherwise the offset is used as is.
pub fn fit_launch(
    points: &[(u32, f64)],
    offset: (f64, f64),
    n_logs: usize,
    half_window: usize,
    min_sigma_ns: f64,
    min_points: usize,
) -> LagModel {
    let (mode, sigma0) = offset;
    let keep = (10.0 * sigma0).max(20_000.0);
    let inliers: Vec<(u32, f64)> = points
        .iter()
        .copied()
        .filter(|p| (p.1 - mode).abs() <= keep)
        .collect();
    // A first pass whose pairs are mostly off the offset is mostly wrong, and
    // its few inliers are near the offset by chance: their running median
    // would bend the model away from it.
    let fitted = if inliers.len() * 2 >= points.len() {
        running_median(&inliers, n_logs, half_window, min_sigma_ns, min_points)
    } else {
        None
    };
    let (pred_ns, sigma_ns) =
        fitted.unwrap_or_else(|| (vec![mode; n_logs], sigma0.max(min_sigma_ns)));
    LagModel {
        pred_ns,
        sigma_ns,
        inv_sigma: 1.0 / sigma_ns,
        from_launch: true,
        one_sided: false,
    }
}

/// Start-clock lower envelope from first-pass lags (2nd percentile); `None` without lags.
pub fn envelope(lags: &mut [f64]) -> Option<f64> {
    if lags.is_empty() {
        return None;
    }
    let k = lags.len() / 50;
    let (_, env, _) = lags.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
    Some(*env)
}

/// Start-clock model: one-sided around the envelope.
pub fn fit_envelope(env: f64, n_logs: usize, min_sigma_ns: f64) -> LagModel {
    let sigma_ns = min_sigma_ns.max(5_000.0);
    LagModel {
        pred_ns: vec![env; n_logs],
        sigma_ns,
        inv_sigma: 1.0 / sigma_ns,
        from_launch: false,
        one_sided: true,
    }
}

/// Centre of the densest `VOTE_BIN_NS` bin (median of the votes in it and its
/// neighbours), and the absolute deviations of those votes from it.
fn vote_mode(votes: &[f64]) -> Option<(f64, Vec<f64>)> {
    if votes.is_empty() {
        return None;
    }
    let mut bins: Vec<i64> = votes
        .iter()
        .map(|v| (v / VOTE_BIN_NS).floor() as i64)
        .collect();
    bins.sort_unstable();
    let (mut best, mut best_n, mut x) = (bins[0], 0usize, 0usize);
    while x < bins.len() {
        let mut y = x;
        while y < bins.len() && bins[y] == bins[x] {
            y += 1;
        }
        // Count this bin and the next one, so a peak split by a bin edge still wins.
        let mut z = y;
        while z < bins.len() && bins[z] == bins[x] + 1 {
            z += 1;
        }
        if z - x > best_n {
            best_n = z - x;
            best = bins[x];
        }
        x = y;
    }
    let lo = best as f64 * VOTE_BIN_NS;
    let mut inside: Vec<f64> = votes
        .iter()
        .copied()
        .filter(|v| *v >= lo - VOTE_BIN_NS && *v < lo + 3.0 * VOTE_BIN_NS)
        .collect();
    let mode = median(&mut inside);
    Some((mode, inside.iter().map(|v| (v - mode).abs()).collect()))
}

/// Running median over the `2h+1` nearest points, interpolated per record, and
/// the robust residual spread. `None` with fewer than `min_points` points.
pub fn running_median(
    points: &[(u32, f64)],
    n_logs: usize,
    half_window: usize,
    min_sigma_ns: f64,
    min_points: usize,
) -> Option<(Vec<f64>, f64)> {
    if points.len() < min_points.max(1) {
        return None;
    }
    let g = points.len();
    let mut buf: Vec<f64> = Vec::with_capacity(2 * half_window + 1);
    let mut med = Vec::with_capacity(g);
    for c in 0..g {
        // Centred (shrinking at the ends), so that linear drift is followed exactly.
        let h = half_window.min(c).min(g - 1 - c);
        buf.clear();
        buf.extend(points[c - h..=c + h].iter().map(|p| p.1));
        med.push(median(&mut buf));
    }
    let mut dev: Vec<f64> = points
        .iter()
        .zip(&med)
        .map(|(p, m)| (p.1 - m).abs())
        .collect();
    let sigma = (1.4826 * median(&mut dev)).max(min_sigma_ns);
    let mut pred = vec![f64::NAN; n_logs];
    let mut k = 0usize; // first point with position >= i
    for (i, out) in pred.iter_mut().enumerate() {
        while k < g && (points[k].0 as usize) < i {
            k += 1;
        }
        *out = if k == g {
            med[g - 1]
        } else if k == 0 || points[k].0 as usize == i {
            med[k]
        } else {
            let (p0, p1) = (f64::from(points[k - 1].0), f64::from(points[k].0));
            let t = (i as f64 - p0) / (p1 - p0);
            med[k - 1] + t * (med[k] - med[k - 1])
        };
    }
    Some((pred, sigma))
}

/// Median (reorders `v`); `v` must not be empty.
pub fn median(v: &mut [f64]) -> f64 {
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, |a, b| a.total_cmp(b));
    *m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_median_follows_drift_and_ignores_outliers() {
        let mut pts: Vec<(u32, f64)> = (0..50)
            .map(|i| (2 * i, 1000.0 + 10.0 * f64::from(i)))
            .collect();
        pts[20].1 += 5e6; // a wrong pair
        let (pred, sigma) = running_median(&pts, 100, 7, 1.0, 8).unwrap();
        // The outlier shifts the local median by at most one neighbour (10 ns).
        assert!((pred[40] - 1200.0).abs() <= 10.0, "{}", pred[40]);
        assert!((pred[41] - 1205.0).abs() <= 10.0);
        assert!((pred[11] - 1055.0).abs() < 1e-9);
        assert!((pred[99] - 1490.0).abs() < 1e-9);
        assert!(sigma < 20.0);
        assert!(running_median(&pts[..3], 100, 7, 1.0, 8).is_none());
    }

    #[test]
    fn launch_offset_is_voted_even_when_most_pairs_are_shifted() {
        // True lag 7 µs; 60% of first-pass pairs are shifted by one or two kernels,
        // but the votes around each pair always include the true partner.
        let pts: Vec<(u32, f64)> = (0..100u32)
            .map(|i| {
                (
                    i,
                    if i % 5 < 3 {
                        7_000.0 + 50_000.0 * f64::from(1 + i % 2)
                    } else {
                        7_000.0
                    },
                )
            })
            .collect();
        // Votes to the true partner agree within µs; votes to other kernels scatter
        // with the irregular spacing of kernels.
        let votes: Vec<f64> = (0..100u32)
            .flat_map(|i| {
                (-3..=3i32).map(move |d| {
                    let scatter =
                        (i64::from(i) * 7_919 + i64::from(d) * 104_729).rem_euclid(40_000) as f64;
                    let spacing = if d == 0 {
                        0.0
                    } else {
                        f64::from(d) * 50_000.0 + scatter
                    };
                    7_000.0 + spacing + f64::from(i % 3) * 300.0
                })
            })
            .collect();
        let off = launch_offset(&votes, 2_000.0).unwrap();
        assert!((off.0 - 7_000.0).abs() < 1_000.0, "{off:?}");
        let m = fit_launch(&pts, off, 100, 7, 2_000.0, 8);
        assert!(
            m.pred_ns.iter().all(|p| (p - 7_000.0).abs() < 1_000.0),
            "{:?}",
            &m.pred_ns[..5]
        );
        assert!(m.from_launch && !m.one_sided);
        let few = fit_launch(&pts[..3], off, 10, 7, 2_000.0, 8);
        assert_eq!(few.pred_ns, vec![off.0; 10]);
    }

    #[test]
    fn a_mostly_wrong_first_pass_does_not_bend_the_launch_model() {
        // 70% of the pairs are far off; the rest are within the inlier band
        // only by chance, 9 µs from the voted offset.
        let pts: Vec<(u32, f64)> = (0..100u32)
            .map(|i| (i, if i % 10 < 7 { 300_000.0 } else { 16_000.0 }))
            .collect();
        let m = fit_launch(&pts, (7_000.0, 2_000.0), 100, 7, 2_000.0, 8);
        assert!(
            m.pred_ns.iter().all(|&p| p == 7_000.0),
            "{:?}",
            &m.pred_ns[..5]
        );
        // Mostly right: the running median follows them.
        let good: Vec<(u32, f64)> = (0..100u32).map(|i| (i, 9_000.0)).collect();
        let m = fit_launch(&good, (7_000.0, 2_000.0), 100, 7, 2_000.0, 8);
        assert!(m.pred_ns.iter().all(|&p| p == 9_000.0));
    }

    #[test]
    fn envelope_is_a_low_quantile() {
        let mut lags: Vec<f64> = (0..100).map(|i| 5_000.0 + 1_000.0 * f64::from(i)).collect();
        assert_eq!(envelope(&mut lags), Some(7_000.0));
        assert!(envelope(&mut []).is_none());
        assert!(fit_envelope(7_000.0, 3, 2_000.0).one_sided);
    }
}
