//! Hand-built tables with a known late rank, a known slow rank and known
//! clock offsets (exact figures), CPU-only timing, disagreeing members, and a
//! generated run read back through the NCCL-log reader.

use super::*;
use crate::clock::tests::Builder;
use crate::clock::{synchronize, ClockOptions, SyncPoint};
use commlens_core::DataType;
use commlens_synth::RunConfig;

const BASE: i64 = 1_766_081_200_000_000_000;
/// 2 MiB bf16 AllReduce on 4 ranks: S = 2,097,152 B, bus factor 1.5.
const COUNT: u64 = 1 << 20;
const BUS_BYTES: f64 = 3_145_728.0;

fn four(b: &mut Builder) -> (Vec<DevIdx>, Vec<CommIdx>) {
    let devs: Vec<DevIdx> = (0..4).map(|r| b.device("h0", 0x1000 * (r as u64 + 1), r)).collect();
    let (_, handles) = b.comm(&devs, 7);
    (devs, handles)
}

/// `n` instances; member `r` starts at `start(i, r)` and ends at `end(i, r)`
/// (true time), and its clock adds `offsets[r]`.
fn instances(
    b: &mut Builder,
    h: &[CommIdx],
    n: usize,
    offsets: [i64; 4],
    start: impl Fn(usize, usize) -> i64,
    end: impl Fn(usize, usize) -> i64,
) {
    for i in 0..n {
        for (r, &c) in h.iter().enumerate() {
            let (s, e) = (start(i, r) + offsets[r], end(i, r) + offsets[r]);
            b.op(c, OpKind::AllReduce, DataType::Bfloat16, COUNT, Some((s, e)));
        }
    }
}

fn at(i: usize) -> i64 {
    BASE + i as i64 * 100_000
}

/// Ranks 0, 1, 3 arrive at +0, +100, +300 ns, rank 2 at +5 µs; everyone ends
/// together 20 µs after rank 2 arrived.
fn late_rank_table(offsets: [i64; 4]) -> OpTable {
    let mut b = Builder::new();
    let (_, h) = four(&mut b);
    let arrive = [0, 100, 5_000, 300];
    instances(&mut b, &h, 20, offsets, |i, r| at(i) + arrive[r], |i, _| at(i) + 25_000);
    b.t
}

fn keep_all() -> StragglerConfig {
    StragglerConfig { keep_instances: true, ..Default::default() }
}

fn check_late_rank(rep: &StragglerReport) {
    assert!(!rep.cpu_timestamps);
    assert_eq!((rep.gpu_instances, rep.cpu_instances, rep.untimed_instances), (20, 0, 0));
    assert_eq!(rep.instances.len(), 20);
    for (k, i) in rep.instances.iter().enumerate() {
        assert_eq!(i.key, k as u64);
        assert_eq!((i.source, i.members, i.kind, i.bytes), (TimeSource::Gpu, 4, OpKind::AllReduce, 2 * COUNT));
        assert_eq!((i.first_start_ns, i.start_skew_ns, i.end_skew_ns), (at(k), 5_000, Some(0)));
        assert_eq!((i.latency_ns, i.max_duration_ns), (Some(20_000), Some(25_000)));
        assert_eq!((i.last, i.last_global_rank), (Some(DevIdx(2)), Some(2)));
    }
    let c = &rep.comms[0];
    assert_eq!((c.key, c.gpu_instances, c.mismatched), (MatchKey::CommSeq, 20, 0));
    assert_eq!((c.mean_start_skew_ns, c.max_start_skew_ns, c.mean_end_skew_ns), (5_000.0, 5_000, Some(0.0)));
    assert_eq!(c.latency_ns, 20 * 20_000);
    // Waits: 5000 + 4900 + 0 + 4700 per instance.
    assert_eq!(c.wait_ns, 20 * 14_600);
    assert_eq!(c.busbw_gb_s, Some(BUS_BYTES / 20_000.0));
    let lateness: Vec<(u64, f64, i64, Option<f64>)> =
        rep.ranks.iter().map(|r| (r.last, r.mean_lateness_ns, r.max_lateness_ns, r.mean_wait_ns)).collect();
    assert_eq!(
        lateness,
        [
            (0, 0.0, 0, Some(5_000.0)),
            (0, 100.0, 100, Some(4_900.0)),
            (20, 5_000.0, 5_000, Some(0.0)),
            (0, 300.0, 300, Some(4_700.0))
        ]
    );
    assert_eq!(rep.ranks[2].last_share, 1.0);
    // Waiting is not slowness: effective durations are all 20 µs.
    assert!(rep.slow.is_empty(), "{:?}", rep.slow);
}

#[test]
fn known_late_rank() {
    let t = late_rank_table([0; 4]);
    check_late_rank(&analyze_stragglers(&t, &keep_all()));
    // Default options keep only the worst instances; all skews tie at 5 µs.
    let rep = analyze_stragglers(&t, &StragglerConfig { worst: 3, ..Default::default() });
    assert_eq!(rep.instances.len(), 3);
    assert_eq!(rep.ranks[2].last, 20);
}

#[test]
fn clock_offsets_hide_and_reveal_the_late_rank() {
    // Rank 3's clock runs 7 ms ahead, rank 0's 3 µs behind.
    let offsets = [-3_000, 0, 0, 7_000_000];
    let t = late_rank_table(offsets);
    let raw = analyze_stragglers(&t, &keep_all());
    assert_eq!(raw.ranks[3].last, 20, "an offset clock looks like a late rank");
    assert_eq!(raw.ranks[3].mean_lateness_ns, 7_000_300.0 + 3_000.0);
    // Kernel ends are simultaneous here, so end-point synchronization
    // recovers the offsets exactly and keeps the arrival skew.
    let sync = synchronize(&t, &ClockOptions { point: SyncPoint::End, ..Default::default() });
    let cfg = StragglerConfig { keep_instances: true, ..StragglerConfig::with_clock(&sync, 4) };
    assert_eq!(cfg.offsets_ns, Some(vec![0, -3_000, -3_000, -7_003_000]));
    let rep = analyze_stragglers(&t, &cfg);
    // Same figures as without offsets, shifted onto rank 0's clock.
    assert_eq!(rep.instances[0].first_start_ns, at(0) - 3_000);
    let shifted = |mut r: StragglerReport| {
        for i in &mut r.instances {
            i.first_start_ns += 3_000;
        }
        r
    };
    check_late_rank(&shifted(rep));
}

#[test]
fn known_slow_rank() {
    let mut b = Builder::new();
    let (_, h) = four(&mut b);
    // 56 instances, windows of 8: rank 1 takes twice as long in instances
    // 0..40 (windows 0–4), rank 3 in window 6 only.
    instances(
        &mut b,
        &h,
        56,
        [0; 4],
        |i, _| at(i),
        |i, r| {
            let slow = (r == 1 && i < 40) || (r == 3 && (48..56).contains(&i));
            at(i) + if slow { 40_000 } else { 20_000 }
        },
    );
    let cfg = StragglerConfig { window: 8, ..keep_all() };
    let rep = analyze_stragglers(&b.t, &cfg);
    assert_eq!(rep.slow_ranks(), [DevIdx(1)]);
    let s1 = rep.slow.iter().find(|s| s.dev == DevIdx(1)).unwrap();
    assert_eq!((s1.windows, s1.low, s1.longest_low_run, s1.flagged), (7, 5, 5, true));
    assert_eq!((s1.min_ratio, s1.busbw_gb_s, s1.peers_median_gb_s), (0.5, BUS_BYTES / 40_000.0, BUS_BYTES / 20_000.0));
    let s3 = rep.slow.iter().find(|s| s.dev == DevIdx(3)).unwrap();
    assert_eq!((s3.windows, s3.low, s3.longest_low_run, s3.flagged, s3.min_ratio), (7, 1, 1, false, 0.5));
    assert_eq!(rep.slow.len(), 2);
    // Everyone started together: nobody is last; latency is the fast ranks' 20 µs.
    assert!(rep.ranks.iter().all(|r| r.last == 0 && r.mean_lateness_ns == 0.0));
    assert!(rep.instances.iter().all(|i| i.last.is_none() && i.latency_ns == Some(20_000)));
    assert_eq!(rep.instances[0].end_skew_ns, Some(20_000));
    // The slow rank's extra 20 µs are its own, not waiting for the others.
    assert_eq!(rep.ranks[1].mean_wait_ns, Some(20_000.0 * 40.0 / 56.0));
    // With a threshold below one half nothing is low.
    let lenient = analyze_stragglers(&b.t, &StragglerConfig { window: 8, slow_fraction: 0.5, ..Default::default() });
    assert!(lenient.slow.is_empty());
}

#[test]
fn cpu_timestamps_and_disagreeing_members() {
    let mut b = Builder::new();
    let (devs, h) = four(&mut b);
    for i in 0..3u64 {
        for (r, &c) in h.iter().enumerate() {
            // Rank 3 logs a different size for instance 1.
            let count = if r == 3 && i == 1 { 8 } else { 1024 };
            let k = b.op(c, OpKind::AllGather, DataType::Float32, count, None);
            b.t.per_rank[devs[r].ix()].update(k, |o| o.cpu_ts_ns = Some(1_000 * i as i64 + [0, 40, 10, 20][r]));
        }
    }
    // A rank without any time in one instance.
    b.t.per_rank[0].update(2, |o| o.cpu_ts_ns = None);
    let rep = analyze_stragglers(&b.t, &keep_all());
    assert!(rep.cpu_timestamps);
    assert_eq!((rep.gpu_instances, rep.cpu_instances), (0, 3));
    assert_eq!(rep.comms[0].mismatched, 1);
    let i1 = &rep.instances[1];
    assert_eq!((i1.members, i1.bytes, i1.start_skew_ns, i1.latency_ns, i1.end_skew_ns), (3, 4096, 40, None, None));
    assert_eq!(rep.instances[2].first_start_ns, 2_010);
    assert_eq!(rep.instances[2].start_skew_ns, 30);
    assert!(rep.instances.iter().all(|i| i.last == Some(DevIdx(1)) && i.source == TimeSource::Cpu));
    assert_eq!(rep.ranks[1].last, 3);
    assert!(rep.ranks.iter().all(|r| r.mean_wait_ns.is_none()));
    assert!(rep.slow.is_empty() && rep.comms[0].busbw_gb_s.is_none());
}

#[test]
fn generated_run_with_a_delayed_rank() {
    let cfg = RunConfig { tp: 2, pp: 2, dp: 2, gpus_per_node: 8, iterations: 2, ..RunConfig::default() };
    let (mut t, truth) = crate::volume::tests::load_run(&cfg, "strag");
    let rep = analyze_stragglers(&t, &StragglerConfig::default());
    // NCCL logs have CPU timestamps only.
    assert!(rep.cpu_timestamps && rep.gpu_instances == 0 && rep.untimed_instances == 0);
    // One instance per collective of each member, whatever the communicator.
    for tc in &truth.communicators {
        let l = t.logical.iter().position(|l| l.comm_id == Some(tc.comm_id)).unwrap();
        let m0 = tc.members[0];
        let collectives: usize = ["AllReduce", "Broadcast"].iter().filter_map(|op| truth.op(m0, &tc.name, op)).map(|o| o.lines).sum();
        let c = &rep.comms[l];
        assert_eq!(c.cpu_instances as usize, collectives, "{}", tc.name);
        assert_eq!(c.key, if tc.kind == "PP" { MatchKey::CollectiveOrdinal } else { MatchKey::CommSeq });
        assert_eq!(c.mismatched, 0);
    }
    // Delay every enqueue of global rank 5 by 3 s: it becomes the last
    // arriver of every instance it takes part in, 3 s late on average.
    let d5 = DevIdx(t.devices.iter().position(|d| d.global_rank == Some(5)).unwrap() as u32);
    t.per_rank[d5.ix()].update_all(|_, op| op.cpu_ts_ns = op.cpu_ts_ns.map(|x| x + 3_000_000_000));
    let rep = analyze_stragglers(&t, &StragglerConfig::default());
    let r5 = rep.ranks.iter().find(|r| r.dev == d5).unwrap();
    assert_eq!(r5.last, r5.instances);
    assert!(r5.mean_lateness_ns > 2.9e9 && r5.mean_lateness_ns < 3.1e9, "{}", r5.mean_lateness_ns);
    let others_max = rep.ranks.iter().filter(|r| r.dev != d5).map(|r| r.mean_lateness_ns).fold(0.0, f64::max);
    assert!(others_max < 1e8, "{others_max}");
    assert!(rep.instances.iter().all(|i| i.last_global_rank == Some(5)), "the worst skews are rank 5's");
}

#[test]
fn small_messages_do_not_judge_slowness() {
    // Rank 1 takes twice as long on 4 KiB AllReduces: latency and clock
    // noise at that size, so by default no window is judged at all.
    let mut b = Builder::new();
    let (_, h) = four(&mut b);
    for i in 0..32 {
        for (r, &c) in h.iter().enumerate() {
            let end = at(i) + if r == 1 { 40_000 } else { 20_000 };
            b.op(c, OpKind::AllReduce, DataType::Bfloat16, 2048, Some((at(i), end)));
        }
    }
    let by_default = analyze_stragglers(&b.t, &StragglerConfig { window: 8, ..Default::default() });
    assert!(by_default.slow.is_empty(), "{:?}", by_default.slow);
    assert_eq!(by_default.gpu_instances, 32, "the instances are still analysed for skew");
    let all = analyze_stragglers(&b.t, &StragglerConfig { window: 8, min_window_bytes: 0, ..Default::default() });
    assert_eq!(all.slow_ranks(), [DevIdx(1)]);
}
