//! Mapping the GPU's `globaltimer` onto the CPU's `CLOCK_MONOTONIC` for the
//! plugin readers (`plugin_out_table` for whole files, `plugin_follow` live).
//!
//! The plugin sees a GPU timer value only after the GPU wrote it, so every
//! observation `cpu_seen − gpu_timer` is at or above the true offset between
//! the two clocks at that moment. One constant offset (the smallest
//! observation) is not enough: the two clocks drift apart. On the H100 of our
//! captures (`crates/testdata/captures`) the smallest observation per second
//! climbs by 19–20 µs every second on every rank (≈ 20 ppm), so a constant
//! offset put the kernels of the last second of a 17 s run ~300 µs early —
//! before their own enqueue. Over an hour that would be 70 ms.
//!
//! The estimate here assumes only that the drift rate stays below
//! [`MAX_DRIFT_PPM`]: then the true offset at time `t` is at most
//! `min_i(o_i + D·|t − t_i|)` over the observations `(t_i, o_i)`, and that
//! bound is what we use. It keeps the old guarantee (a mapped GPU time is
//! never earlier than the true one, drift below `D` given) and follows the
//! drift with an error of at most `D` times the distance to the nearest tight
//! observation. A window in which the proxy saw every timer late (a busy CPU)
//! does not drag the estimate up, as a per-window minimum would.

/// Bound on the drift between `globaltimer` and `CLOCK_MONOTONIC`, in parts
/// per million (we measured 20; crystal oscillators are specified to ±50).
pub const MAX_DRIFT_PPM: i64 = 100;

/// `D·dt` in nanoseconds for `dt` nanoseconds.
#[inline]
fn allowance(dt: u64) -> i64 {
    (dt / 1_000_000).saturating_mul(MAX_DRIFT_PPM as u64).min(i64::MAX as u64) as i64
        + ((dt % 1_000_000) * MAX_DRIFT_PPM as u64 / 1_000_000) as i64
}

/// The offset of one device over a whole file: observations sorted by CPU
/// time, each replaced by the bound from every other one.
#[derive(Debug, Clone, Default)]
pub struct ClockMap {
    /// `(cpu_ns, offset_ns)`, sorted by CPU time; offsets already tightened.
    points: Vec<(u64, i64)>,
}

impl ClockMap {
    /// From `(cpu_seen_ns, gpu_timer_ns)` observations (zero timers are skipped).
    pub fn from_observations(obs: impl IntoIterator<Item = (u64, u64)>) -> ClockMap {
        let mut points: Vec<(u64, i64)> = obs
            .into_iter()
            .filter(|&(_, gpu)| gpu != 0)
            .map(|(cpu, gpu)| (cpu, (cpu as i64).wrapping_sub(gpu as i64)))
            .collect();
        points.sort_unstable();
        points.dedup_by_key(|p| p.0);
        // Forward then backward: each point becomes min over all of o_j + D·|t_i − t_j|.
        for i in 1..points.len() {
            let (t0, o0) = points[i - 1];
            let bound = o0.saturating_add(allowance(points[i].0 - t0));
            points[i].1 = points[i].1.min(bound);
        }
        for i in (0..points.len().saturating_sub(1)).rev() {
            let (t1, o1) = points[i + 1];
            let bound = o1.saturating_add(allowance(t1 - points[i].0));
            points[i].1 = points[i].1.min(bound);
        }
        ClockMap { points }
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The offset at CPU time `cpu`: the bound from the observations either side.
    pub fn offset_at(&self, cpu: u64) -> Option<i64> {
        let p = &self.points;
        let i = p.partition_point(|&(t, _)| t <= cpu);
        let before = i.checked_sub(1).map(|j| p[j].1.saturating_add(allowance(cpu - p[j].0)));
        let after = p.get(i).map(|&(t, o)| o.saturating_add(allowance(t - cpu)));
        match (before, after) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The offset for a GPU timer: looked up at the CPU time the timer maps to
    /// (drift moves it by ns per ms: one step is enough). Map both ends of a
    /// span with the offset of its start, so its duration is the GPU's own.
    pub fn offset_for(&self, gpu: u64) -> Option<i64> {
        let first = self.points.first()?.1;
        self.offset_at((gpu as i64).wrapping_add(first) as u64)
    }

    /// A GPU timer as CPU `CLOCK_MONOTONIC` ns.
    pub fn to_cpu(&self, gpu: u64) -> Option<u64> {
        Some((gpu as i64).wrapping_add(self.offset_for(gpu)?) as u64)
    }
}

/// The live form for a follower that sees observations in (roughly) time
/// order: the bound from the observations so far (`min(o, last + D·dt)`).
#[derive(Debug, Clone, Copy)]
pub struct ClockTrack {
    at: u64,
    offset: i64,
}

impl ClockTrack {
    pub fn new(cpu: u64, gpu: u64) -> ClockTrack {
        ClockTrack { at: cpu, offset: (cpu as i64).wrapping_sub(gpu as i64) }
    }

    pub fn see(&mut self, cpu: u64, gpu: u64) {
        let o = (cpu as i64).wrapping_sub(gpu as i64);
        if cpu >= self.at {
            self.offset = o.min(self.offset.saturating_add(allowance(cpu - self.at)));
            self.at = cpu;
        } else {
            // A record from a slower thread: it bounds the offset at its own time.
            self.offset = self.offset.min(o.saturating_add(allowance(self.at - cpu)));
        }
    }

    /// A GPU timer as CPU `CLOCK_MONOTONIC` ns, with the offset as of the last observation.
    pub fn to_cpu(&self, gpu: u64) -> u64 {
        (gpu as i64).wrapping_add(self.offset) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Observations of a GPU clock drifting by `ppm` against the CPU, each seen `late` ns after.
    fn drifting(ppm: i64, lates: &[u64]) -> Vec<(u64, u64, u64)> {
        // (cpu_seen, gpu_timer, true cpu time of the timer)
        lates
            .iter()
            .enumerate()
            .map(|(i, &late)| {
                let cpu_true = 1_000_000_000 + i as u64 * 100_000_000; // every 100 ms
                let gpu = (cpu_true as i64 + 5_000_000_000 - (cpu_true as i64 - 1_000_000_000) * ppm / 1_000_000) as u64;
                (cpu_true + late, gpu, cpu_true)
            })
            .collect()
    }

    #[test]
    fn a_drifting_clock_is_followed_and_never_mapped_early() {
        // 20 ppm over 10 s, the proxy sometimes 5 ms late (never all late for long).
        let lates: Vec<u64> = (0..100).map(|i| if i % 7 == 3 { 5_000_000 } else { 1_000 }).collect();
        let obs = drifting(20, &lates);
        let map = ClockMap::from_observations(obs.iter().map(|&(c, g, _)| (c, g)));
        let constant = obs.iter().map(|&(c, g, _)| c as i64 - g as i64).min().unwrap();
        let (mut worst, mut worst_constant) = (0i64, 0i64);
        for &(_, g, truth) in &obs {
            let err = map.to_cpu(g).unwrap() as i64 - truth as i64;
            assert!(err >= 0, "mapped {err} ns early");
            worst = worst.max(err);
            worst_constant = worst_constant.max((truth as i64 - (g as i64 + constant)).abs());
        }
        // The constant offset is 198 µs off at the end; the bound stays within the 1 µs lateness plus D·100 ms.
        assert!(worst_constant > 190_000, "{worst_constant}");
        assert!(worst <= 1_000 + 10_000, "{worst}");
    }

    #[test]
    fn a_window_of_late_observations_does_not_drag_the_estimate() {
        let mut lates = vec![1_000u64; 60];
        for l in &mut lates[20..40] {
            *l = 6_000_000; // two seconds in which the proxy saw every timer 6 ms late
        }
        let obs = drifting(0, &lates);
        let map = ClockMap::from_observations(obs.iter().map(|&(c, g, _)| (c, g)));
        for &(_, g, truth) in &obs {
            let err = map.to_cpu(g).unwrap() as i64 - truth as i64;
            assert!((0..=1_000 + 100_000).contains(&err), "{err}");
        }
    }

    #[test]
    fn the_live_track_agrees_with_the_whole_file_bound_going_forward() {
        let lates: Vec<u64> = (0..50).map(|i| 1_000 + (i % 5) * 300_000).collect();
        let obs = drifting(-30, &lates);
        let mut track = ClockTrack::new(obs[0].0, obs[0].1);
        for &(c, g, truth) in &obs[1..] {
            track.see(c, g);
            let err = track.to_cpu(g) as i64 - truth as i64;
            assert!((0..=1_200_000 + 1_000).contains(&err), "{err}");
        }
        assert_eq!(ClockMap::from_observations([]).to_cpu(5), None);
        assert_eq!(allowance(1_000_000_000), 100_000);
        assert_eq!(allowance(1_500), 0);
    }
}
