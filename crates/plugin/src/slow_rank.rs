//! Online slow-rank detection: NCCLX's SlowRankDetector rule ("avg bw = Σ bytes
//! sent / Σ completion times" per rank over a rolling window; a rank below a
//! threshold for several windows is slow), adapted to what one profiler plugin
//! sees.
//!
//! NCCLX reads network completions of every rank; a profiler plugin sees the
//! collectives of the ranks *its own process* drives (a process may drive
//! several GPUs). So the rule compares, per communicator, the ranks this
//! process hosts, and publishes each rank's window busbw so that a query across
//! processes can compare all ranks (see the README's PromQL).
//!
//! Per communicator (the handles of this process sharing one `comm_hash`), an
//! operation of sequence number `seq` that every local member completed is one
//! *instance*. A member's sample is the instance's bus bytes (nccl-tests
//! convention) over its **effective** duration: its own duration minus the
//! time it waited for the last local member to start (starts as the proxy saw
//! them, one CPU clock for the whole process), so an early arriver is not taken
//! for slow (as `commlens_analyze::straggler` does after the fact). With one
//! local member the effective duration is the whole duration: its window busbw
//! is published, but it is never judged here (no peer to compare with).
//!
//! Every `window` instances of at least `min_bytes` bytes, each member's window
//! busbw is `Σ bus bytes / Σ effective durations`, and its ratio is that over
//! the median of the *other* local members' window busbw. A ratio under
//! `fraction` is a low window; `min_windows` consecutive low windows start a
//! slow episode, the first window that is not low ends it. Each start and end
//! is reported once ([`SlowEvent`]) for the log.
//!
//! Limits: kernel time includes waiting inside the collective, so in a ring
//! every member waits for the slowest link and a slow link shows as a slow
//! communicator (low busbw on all ranks), not as one slow rank; instances are
//! matched by the handle's operation counter, which agrees across members for
//! collectives (point-to-point operations never enter the windows).

use std::collections::{BTreeMap, HashMap};

/// The rule's knobs (from `COMMLENS_PLUGIN_METRICS_WINDOW`, `…_SLOW_FRACTION`,
/// `…_SLOW_WINDOWS`, `…_SLOW_MIN_BYTES`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowConfig {
    pub window: usize,
    pub fraction: f64,
    pub min_windows: u32,
    pub min_bytes: u64,
}

/// One completed collective of one handle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Obs {
    pub seq: u64,
    pub func: u32,
    /// CPU time the operation started (proxy's view; 0: unknown).
    pub start: u64,
    pub dur_ns: u64,
    pub bus_bytes: f64,
    /// Payload bytes (`count × datatype size`), compared with `min_bytes`.
    pub bytes: u64,
}

/// A slow episode started (`slow`) or ended for handle `idx`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowEvent {
    pub idx: u32,
    pub slow: bool,
    pub busbw: f64,
    pub median: f64,
    pub ratio: f64,
    pub others: usize,
    pub window: usize,
}

/// What the rule knows about one handle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberState {
    win_bytes: f64,
    win_ns: f64,
    /// Busbw (bytes/s) of the last closed window.
    pub busbw: Option<f64>,
    /// `busbw` over the median of the other local members' (None: no other member).
    pub ratio: Option<f64>,
    /// Consecutive low windows so far.
    pub low_run: u32,
    pub slow: bool,
    pub episodes: u64,
    pub windows: u64,
}

#[derive(Debug, Default)]
struct Group {
    /// Handle numbers, ascending.
    members: Vec<u32>,
    /// Instances waiting for some member: seq → (func, one slot per member).
    pending: BTreeMap<u64, (u32, Vec<Option<Obs>>)>,
    fill: usize,
    /// Instances dropped: members disagreed on the function, or one never reported it.
    unmatched: u64,
}

/// The rule's state over every communicator of the process.
#[derive(Debug)]
pub struct Detector {
    cfg: SlowConfig,
    groups: BTreeMap<u64, Group>,
    members: HashMap<u32, MemberState>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Detector {
    pub fn new(cfg: SlowConfig) -> Detector {
        Detector { cfg, groups: BTreeMap::new(), members: HashMap::new() }
    }

    pub fn config(&self) -> SlowConfig {
        self.cfg
    }

    /// The rule's state of handle `idx`.
    pub fn member(&self, idx: u32) -> Option<&MemberState> {
        self.members.get(&idx)
    }

    /// Handles of this process in communicator `comm_hash`.
    pub fn local_ranks(&self, comm_hash: u64) -> usize {
        self.groups.get(&comm_hash).map_or(0, |g| g.members.len())
    }

    /// Instances of `comm_hash` dropped unmatched so far.
    pub fn unmatched(&self, comm_hash: u64) -> u64 {
        self.groups.get(&comm_hash).map_or(0, |g| g.unmatched)
    }

    /// Takes the live handles `(idx, comm_hash)` and new observations; returns
    /// the episodes that started or ended.
    pub fn update(&mut self, live: &[(u32, u64)], obs: &[(u32, Obs)]) -> Vec<SlowEvent> {
        self.regroup(live);
        let mut events = Vec::new();
        let cfg = self.cfg;
        for (idx, o) in obs {
            if o.bytes < cfg.min_bytes || o.dur_ns == 0 {
                continue;
            }
            let Some(&(_, hash)) = live.iter().find(|(i, _)| i == idx) else {
                continue;
            };
            let g = self.groups.get_mut(&hash).expect("regrouped above");
            let Some(m) = g.members.iter().position(|x| x == idx) else {
                continue;
            };
            let n = g.members.len();
            let entry = g.pending.entry(o.seq).or_insert_with(|| (o.func, vec![None; n]));
            if entry.0 != o.func {
                g.pending.remove(&o.seq);
                g.unmatched += 1;
                continue;
            }
            entry.1[m] = Some(*o);
        }
        for g in self.groups.values_mut() {
            let complete: Vec<u64> =
                g.pending.iter().filter(|(_, (_, v))| v.iter().all(Option::is_some)).map(|(s, _)| *s).collect();
            for seq in complete {
                let (_, slots) = g.pending.remove(&seq).expect("listed above");
                let obs: Vec<Obs> = slots.into_iter().map(|o| o.expect("complete")).collect();
                let latest = obs.iter().map(|o| o.start).max().unwrap_or(0);
                for (m, o) in g.members.iter().zip(&obs) {
                    let waited = if o.start == 0 { 0 } else { latest - o.start };
                    let Some(effective) = o.dur_ns.checked_sub(waited).filter(|&e| e > 0) else {
                        continue;
                    };
                    let st = self.members.entry(*m).or_default();
                    st.win_bytes += o.bus_bytes;
                    st.win_ns += effective as f64;
                }
                g.fill += 1;
                if g.fill >= cfg.window {
                    g.fill = 0;
                    close_window(&g.members, &mut self.members, &cfg, &mut events);
                }
            }
            // Instances a member will never report (it skipped them) must not pile up.
            while g.pending.len() > 4 * cfg.window.max(1) {
                g.pending.pop_first();
                g.unmatched += 1;
            }
        }
        events
    }

    /// Follows membership: a communicator whose local handles changed starts its windows afresh.
    fn regroup(&mut self, live: &[(u32, u64)]) {
        let mut now: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for &(idx, hash) in live {
            now.entry(hash).or_default().push(idx);
        }
        self.groups.retain(|h, _| now.contains_key(h));
        for (hash, mut members) in now {
            members.sort_unstable();
            let g = self.groups.entry(hash).or_default();
            if g.members != members {
                *g = Group { members, ..Group::default() };
                for m in &g.members {
                    let st = self.members.entry(*m).or_default();
                    (st.win_bytes, st.win_ns) = (0.0, 0.0);
                }
            }
        }
        self.members.retain(|idx, _| live.iter().any(|(i, _)| i == idx));
    }
}

/// Judges one full window of a communicator's local members.
fn close_window(members: &[u32], states: &mut HashMap<u32, MemberState>, cfg: &SlowConfig, out: &mut Vec<SlowEvent>) {
    let bw: Vec<Option<f64>> = members
        .iter()
        .map(|m| {
            let st = states.entry(*m).or_default();
            let b = (st.win_ns > 0.0).then(|| st.win_bytes / (st.win_ns * 1e-9));
            (st.win_bytes, st.win_ns) = (0.0, 0.0);
            b
        })
        .collect();
    for (i, m) in members.iter().enumerate() {
        let st = states.get_mut(m).expect("inserted above");
        st.windows += 1;
        st.busbw = bw[i];
        let mut others: Vec<f64> = bw.iter().enumerate().filter(|(j, _)| *j != i).filter_map(|(_, b)| *b).collect();
        let Some(mine) = bw[i].filter(|_| !others.is_empty()) else {
            st.ratio = None;
            continue;
        };
        let med = median(&mut others);
        let ratio = mine / med;
        st.ratio = Some(ratio);
        let low = ratio < cfg.fraction;
        st.low_run = if low { st.low_run + 1 } else { 0 };
        let event = |slow| SlowEvent {
            idx: *m,
            slow,
            busbw: mine,
            median: med,
            ratio,
            others: others.len(),
            window: cfg.window,
        };
        if !st.slow && st.low_run >= cfg.min_windows {
            st.slow = true;
            st.episodes += 1;
            out.push(event(true));
        } else if st.slow && !low {
            st.slow = false;
            out.push(event(false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: SlowConfig = SlowConfig { window: 4, fraction: 0.7, min_windows: 2, min_bytes: 1000 };

    /// One instance on members `idx` (all of comm 7): start times and durations.
    fn instance(seq: u64, members: &[(u32, u64, u64)]) -> Vec<(u32, Obs)> {
        members
            .iter()
            .map(|&(idx, start, dur)| (idx, Obs { seq, func: 1, start, dur_ns: dur, bus_bytes: 1e6, bytes: 1 << 20 }))
            .collect()
    }

    #[test]
    fn flags_after_min_windows_and_recovers_once() {
        let live = [(1, 7), (2, 7), (3, 7)];
        let mut d = Detector::new(CFG);
        let mut events = Vec::new();
        let mut seq = 0;
        // Rank 3 takes 4x as long for 2 windows, then is normal again for 2.
        for w in 0..4 {
            for _ in 0..CFG.window {
                let slow = if w < 2 { 4_000 } else { 1_000 };
                events.extend(d.update(&live, &instance(seq, &[(1, 100, 1_000), (2, 100, 1_000), (3, 100, slow)])));
                seq += 1;
            }
            let st = d.member(3).unwrap();
            match w {
                0 => assert_eq!((st.low_run, st.slow, st.ratio), (1, false, Some(0.25))),
                1 => assert_eq!((st.low_run, st.slow, st.episodes), (2, true, 1)),
                _ => assert_eq!((st.low_run, st.slow, st.ratio), (0, false, Some(1.0))),
            }
            let bw = d.member(1).unwrap().busbw.unwrap();
            assert!((bw - 1e12).abs() < 1.0, "1 MB per microsecond: {bw}");
        }
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!((events[0].idx, events[0].slow, events[0].ratio, events[0].others), (3, true, 0.25, 2));
        assert_eq!((events[1].idx, events[1].slow), (3, false));
        assert_eq!(d.member(1).unwrap().episodes, 0);
    }

    #[test]
    fn waiting_for_a_late_peer_is_not_slowness() {
        // Member 1 starts 3 us early and waits: its kernel is 4x longer, its effective time is not.
        let live = [(1, 7), (2, 7)];
        let mut d = Detector::new(CFG);
        for seq in 0..(2 * CFG.window as u64) {
            assert!(d.update(&live, &instance(seq, &[(1, 1_000, 4_000), (2, 4_000, 1_000)])).is_empty());
        }
        assert_eq!(d.member(1).unwrap().ratio, Some(1.0));
        assert_eq!(d.local_ranks(7), 2);
    }

    #[test]
    fn lone_members_small_ops_and_stragglers_are_not_judged() {
        let mut d = Detector::new(CFG);
        for seq in 0..8 {
            d.update(&[(1, 9)], &instance(seq, &[(1, 0, 5_000)]));
        }
        let st = d.member(1).unwrap();
        assert_eq!((st.windows, st.ratio, st.slow), (2, None, false));
        assert!(st.busbw.is_some(), "a lone rank's busbw is still published");
        // Below min_bytes: nothing enters the window.
        let small = Obs { seq: 100, func: 1, start: 0, dur_ns: 10, bus_bytes: 1.0, bytes: 10 };
        d.update(&[(1, 9)], &[(1, small)]);
        assert_eq!(d.member(1).unwrap().windows, 2);
        // A member that never reports an instance: pending instances are bounded.
        let live = [(4, 7), (5, 7)];
        for seq in 0..100 {
            d.update(&live, &instance(seq, &[(4, 0, 1_000)]));
        }
        assert_eq!(d.unmatched(7), 100 - 4 * CFG.window as u64);
        assert_eq!(d.member(4).unwrap().windows, 0, "no instance was complete");
        assert!(d.member(1).is_none(), "a handle that is gone is forgotten");
    }
}
