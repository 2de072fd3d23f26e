//! Synthetic tables where every rank's GPU spans are one true timeline plus a
//! known per-rank clock offset, ±50 ns jitter and per-instance arrival skew;
//! the offsets must come back within 200 ns. Also holds [`Builder`], the
//! hand-made table used by the bandwidth tests.

use super::*;
use commlens_core::model::{CommMember, Device, Grouping, LogicalComm, ProcIdx, Process};
use commlens_core::{CollOp, DataType};
use commlens_synth::SplitMix64;

/// A table built by hand: one process per device, logical communicators set
/// directly (no `assemble`, so global ranks stay as given).
pub(crate) struct Builder {
    pub t: OpTable,
    next_seq: Vec<u64>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder { t: OpTable::default(), next_seq: Vec::new() }
    }

    pub fn device(&mut self, host: &str, bus: u64, global_rank: u32) -> DevIdx {
        let p = ProcIdx(self.t.processes.len() as u32);
        self.t.processes.push(Process { host: host.into(), pid: 1000 + p.0, nccl_version: None });
        self.t.devices.push(Device {
            proc: p,
            cuda_dev: Some(0),
            nvml_dev: None,
            bus_id: Some(bus),
            global_rank: Some(global_rank),
            local_rank: None,
        });
        self.t.per_rank.push(commlens_core::RankOps::new());
        DevIdx(p.0)
    }

    /// A communicator over `devs` (rank in communicator = position).
    pub fn comm(&mut self, devs: &[DevIdx], id: u64) -> (LogicalCommIdx, Vec<CommIdx>) {
        let l = LogicalCommIdx(self.t.logical.len() as u32);
        let mut handles = Vec::new();
        for (r, &d) in devs.iter().enumerate() {
            let proc = self.t.devices[d.ix()].proc;
            let mut c = CommMember::new(proc, 0x1000 * id + r as u64);
            c.comm_id = Some(id);
            c.nranks = Some(devs.len() as u32);
            c.rank = Some(r as u32);
            c.device = Some(d);
            c.logical = Some(l);
            handles.push(CommIdx(self.t.comms.len() as u32));
            self.t.comms.push(c);
            self.next_seq.push(0);
        }
        self.t.logical.push(LogicalComm {
            name: format!("c{id}"),
            comm_id: Some(id),
            nranks: devs.len() as u32,
            members: handles.clone(),
            grouping: Grouping::CommId,
        });
        (l, handles)
    }

    /// Appends an operation on handle `c` with the next `comm_seq`.
    pub fn op(&mut self, c: CommIdx, kind: OpKind, dtype: DataType, count: u64, gpu: Option<(i64, i64)>) -> usize {
        let cm = &self.t.comms[c.ix()];
        let dev = cm.device.expect("device");
        let seq = self.next_seq[c.ix()];
        self.next_seq[c.ix()] += 1;
        let op = CollOp {
            tid: 1,
            seq,
            comm_seq: seq,
            gpu: gpu.map(|(s, e)| GpuSpan { start_ns: s, end_ns: e }),
            ..CollOp::new(cm.proc, dev, c, kind, count, dtype)
        };
        self.t.per_rank[dev.ix()].push(op);
        self.t.per_rank[dev.ix()].len() - 1
    }

    /// Puts every rank's operations in time order (source order of a trace).
    pub fn sort_by_time(&mut self) {
        for ops in &mut self.t.per_rank {
            ops.sort_by_key(|o| o.gpu.map_or(i64::MIN, |g| g.start_ns));
        }
    }
}

const EPOCH: i64 = 1_766_081_200_000_000_000;
/// True clock offsets per global rank (observed = true + offset).
const OFFSETS: [i64; 8] = [0, -3_000, 7_500, 120_000_000, 45_000, -2_500_000, 250, 9_999_999];

/// `n` instances of an AllReduce on `handles` (devices `devs`), true
/// timeline `phase + i·period`: each member arrives up to `skew_ns` before
/// the last one and starts then; all end together after 20 µs; every edge
/// gets ±50 ns of jitter; each rank's clock adds its offset.
fn collectives(
    b: &mut Builder,
    rng: &mut SplitMix64,
    handles: &[CommIdx],
    phase: i64,
    period: i64,
    n: usize,
    skew_ns: f64,
) {
    let ranks: Vec<usize> = handles
        .iter()
        .map(|c| b.t.devices[b.t.comms[c.ix()].device.unwrap().ix()].global_rank.unwrap() as usize)
        .collect();
    for i in 0..n {
        let last = EPOCH + phase + i as i64 * period;
        let end = last + 20_000;
        for (k, &c) in handles.iter().enumerate() {
            let arrival = (rng.unit() * skew_ns) as i64;
            let jit = |r: &mut SplitMix64| (r.unit() * 100.0 - 50.0) as i64;
            let start = last - arrival + jit(rng);
            let stop = end + jit(rng);
            let off = OFFSETS[ranks[k]];
            b.op(c, OpKind::AllReduce, DataType::Bfloat16, 1 << 20, Some((start + off, stop + off)));
        }
    }
}

fn devices(b: &mut Builder, n: u32) -> Vec<DevIdx> {
    (0..n).map(|r| b.device(&format!("h{}", r / 4), 0x1000 * (r as u64 % 4 + 1), r)).collect()
}

/// Largest |recovered − truth| over the ranks that have an offset; prints both.
fn max_error(label: &str, s: &ClockSync, t: &OpTable) -> f64 {
    let mut worst: f64 = 0.0;
    for r in &s.ranks {
        let g = t.devices[r.dev.ix()].global_rank.unwrap() as usize;
        let truth = -(OFFSETS[g] - OFFSETS[0]) as f64;
        let err = r.offset_ns - truth;
        println!(
            "{label}: rank {g} truth {truth:>12.1} ns recovered {:>14.1} ns error {err:>7.1} ns (instances {}, residual {:.0} ns)",
            r.offset_ns, r.instances, r.residual_ns
        );
        worst = worst.max(err.abs());
    }
    worst
}

#[test]
fn one_communicator_recovers_offsets() {
    let mut b = Builder::new();
    let devs = devices(&mut b, 4);
    let (_, h) = b.comm(&devs, 1);
    let mut rng = SplitMix64::new(7);
    collectives(&mut b, &mut rng, &h, 0, 1_000_000, 1000, 6_000.0);
    b.sort_by_time();
    let s = synchronize(&b.t, &ClockOptions::default());
    assert_eq!(s.ranks.len(), 4);
    assert_eq!(s.reference, vec![devs[0]]);
    assert_eq!(s.comms[0].instances, 1000);
    assert_eq!(s.comms[0].key, MatchKey::CommSeq);
    assert!(max_error("1 comm, midpoint", &s, &b.t) < 200.0);
    let end = synchronize(&b.t, &ClockOptions { point: SyncPoint::End, ..Default::default() });
    assert!(max_error("1 comm, end", &end, &b.t) < 100.0);
    // Start times carry the whole arrival skew: still unbiased here (the skew
    // is the same distribution on every rank), only noisier.
    let start = synchronize(&b.t, &ClockOptions { point: SyncPoint::Start, ..Default::default() });
    assert!(max_error("1 comm, start", &start, &b.t) < 400.0);
}

#[test]
fn one_rank_missing_a_fifth_of_the_instances() {
    for drop_span_only in [false, true] {
        let mut b = Builder::new();
        let devs = devices(&mut b, 4);
        let (_, h) = b.comm(&devs, 1);
        let mut rng = SplitMix64::new(11);
        collectives(&mut b, &mut rng, &h, 0, 1_000_000, 1000, 6_000.0);
        // Rank 3 (+120 ms, the median-shifting one) loses 20 % of its instances.
        let ops = &mut b.t.per_rank[devs[3].ix()];
        let mut k = 0;
        let mut kept = ops.to_vec();
        kept.retain_mut(|o| {
            k += 1;
            let lose = rng.unit() < 0.2;
            if lose && drop_span_only {
                o.gpu = None;
            }
            !lose || drop_span_only
        });
        *ops = kept.into();
        assert!(k == 1000);
        let s = synchronize(&b.t, &ClockOptions::default());
        let r3 = s.ranks.iter().find(|r| r.dev == devs[3]).unwrap();
        assert!((750..850).contains(&r3.instances), "{}", r3.instances);
        let label = if drop_span_only { "20% spans missing" } else { "20% ops missing" };
        let err = max_error(label, &s, &b.t);
        assert!(err < 200.0);
        // The thesis's single pass: the reference moves on the instances rank 3 missed.
        let single = synchronize(&b.t, &ClockOptions { max_passes: 1, ..Default::default() });
        let single_err = max_error("  single pass", &single, &b.t);
        assert!(single_err > err, "{single_err} vs {err}");
    }
}

/// TP=2 × DP=4 on 8 ranks: TP pairs (many instances, tight skew), DP groups
/// of four (fewer, wider skew), optionally a world communicator (few).
fn tp_dp(with_world: bool, seed: u64) -> (Builder, Vec<DevIdx>) {
    let mut b = Builder::new();
    let devs = devices(&mut b, 8);
    let mut rng = SplitMix64::new(seed);
    for k in 0..4u64 {
        let (_, h) = b.comm(&[devs[2 * k as usize], devs[2 * k as usize + 1]], 10 + k);
        collectives(&mut b, &mut rng, &h, 100_000 * k as i64, 2_000_000, 1500, 2_000.0);
    }
    for t in 0..2u64 {
        let members: Vec<DevIdx> = (0..4).map(|d| devs[2 * d + t as usize]).collect();
        let (_, h) = b.comm(&members, 20 + t);
        collectives(&mut b, &mut rng, &h, 700_000 + 50_000 * t as i64, 5_000_000, 600, 6_000.0);
    }
    if with_world {
        let (_, h) = b.comm(&devs, 1);
        collectives(&mut b, &mut rng, &h, 1_500_000, 100_000_000, 30, 6_000.0);
    }
    b.sort_by_time();
    (b, devs)
}

#[test]
fn several_communicators_via_the_world() {
    let (b, _) = tp_dp(true, 3);
    let s = synchronize(&b.t, &ClockOptions::default());
    assert_eq!(s.ranks.len(), 8);
    assert!(s.ranks.iter().all(|r| r.component == 0));
    assert!(s.comms.iter().all(|c| c.used && c.mismatched == 0));
    assert!(max_error("TP+DP+world", &s, &b.t) < 200.0);
}

#[test]
fn several_communicators_by_chaining_through_shared_ranks() {
    let (mut b, devs) = tp_dp(false, 5);
    // A pipeline communicator of Send/Recv only: never a sync point.
    let (_, pp) = b.comm(&[devs[0], devs[4]], 30);
    b.op(pp[0], OpKind::Send, DataType::Bfloat16, 4096, Some((EPOCH, EPOCH + 5_000)));
    b.op(pp[1], OpKind::Recv, DataType::Bfloat16, 4096, Some((EPOCH + 9_000_000, EPOCH + 9_005_000)));
    let s = synchronize(&b.t, &ClockOptions::default());
    assert_eq!(s.ranks.len(), 8);
    assert_eq!(s.reference.len(), 1);
    let pp_sync = s.comms.iter().find(|c| c.name == "c30").unwrap();
    assert_eq!((pp_sync.instances, pp_sync.used, pp_sync.key), (0, false, MatchKey::CollectiveOrdinal));
    assert!(max_error("TP+DP chained", &s, &b.t) < 200.0);
}

#[test]
fn mixed_communicator_matches_collectives_by_their_own_ordinal() {
    let mut b = Builder::new();
    let devs = devices(&mut b, 2);
    let (_, h) = b.comm(&devs, 1);
    let mut rng = SplitMix64::new(9);
    collectives(&mut b, &mut rng, &h, 0, 1_000_000, 300, 3_000.0);
    // Rank 1 ran extra Send/Recv on the same handle: its comm_seq runs ahead.
    for i in 0..5 {
        b.op(h[1], OpKind::Send, DataType::Bfloat16, 64, Some((EPOCH + i, EPOCH + i + 10)));
    }
    collectives(&mut b, &mut rng, &h, 400_000_000, 1_000_000, 300, 3_000.0);
    let s = synchronize(&b.t, &ClockOptions::default());
    assert_eq!((s.comms[0].key, s.comms[0].instances, s.comms[0].mismatched), (MatchKey::CollectiveOrdinal, 600, 0));
    assert!(max_error("mixed p2p/collective", &s, &b.t) < 200.0);
}

#[test]
fn disagreeing_members_are_dropped_and_counted() {
    let mut b = Builder::new();
    let devs = devices(&mut b, 4);
    let (_, h) = b.comm(&devs, 1);
    let mut rng = SplitMix64::new(13);
    collectives(&mut b, &mut rng, &h, 0, 1_000_000, 500, 4_000.0);
    b.t.per_rank[devs[1].ix()].update_all(|i, o| {
        if i % 10 == 0 {
            o.bytes += 2;
        }
    });
    let s = synchronize(&b.t, &ClockOptions::default());
    assert_eq!((s.comms[0].mismatched, s.comms[0].instances), (50, 500));
    assert!(max_error("mismatches dropped", &s, &b.t) < 200.0);
}

#[test]
fn apply_shifts_spans_and_keeps_originals() {
    let (mut b, _) = tp_dp(true, 17);
    let s = synchronize(&b.t, &ClockOptions::default());
    let synced = s.apply(&b.t);
    let before = b.t.clone();
    let mut worst = 0i64;
    for (d, ops) in b.t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        let g = b.t.devices[d].global_rank.unwrap() as usize;
        for (i, op) in ops.iter().enumerate() {
            let sp = synced.per_rank[d][i].unwrap();
            // True end = original end − true offset (rank 0's clock is the reference).
            let truth_end = op.gpu.unwrap().end_ns - (OFFSETS[g] - OFFSETS[0]);
            worst = worst.max((sp.end_ns - truth_end).abs());
            assert_eq!(sp.end_ns - sp.start_ns, op.gpu.unwrap().end_ns - op.gpu.unwrap().start_ns);
        }
    }
    assert!(worst < 300, "{worst}"); // 200 ns offset error + 50 ns edge jitter
    let originals = s.apply_in_place(&mut b.t);
    for (d, ops) in b.t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        for (i, op) in ops.iter().enumerate() {
            assert_eq!(op.gpu, synced.per_rank[d][i]);
            assert_eq!(originals[d][i], before.per_rank[d].op(i).gpu);
        }
    }
}

#[test]
fn disconnected_groups_and_edge_cases() {
    let mut b = Builder::new();
    let devs = devices(&mut b, 5);
    let mut rng = SplitMix64::new(21);
    let (_, a) = b.comm(&devs[0..2], 1);
    let (_, c) = b.comm(&devs[2..4], 2);
    collectives(&mut b, &mut rng, &a, 0, 1_000_000, 200, 2_000.0);
    collectives(&mut b, &mut rng, &c, 0, 1_000_000, 200, 2_000.0);
    // Rank 4 alone: a one-member communicator gives no instance.
    let (_, single) = b.comm(&devs[4..5], 3);
    b.op(single[0], OpKind::AllReduce, DataType::Float32, 1, Some((EPOCH, EPOCH + 1)));
    let s = synchronize(&b.t, &ClockOptions::default());
    assert_eq!(s.reference, vec![devs[0], devs[2]]);
    assert_eq!(s.ranks.len(), 4);
    assert_eq!(s.offset_ns(devs[4]), None);
    assert_eq!(s.offset_ns(devs[0]), Some(0));
    assert_eq!(s.offset_ns(devs[2]), Some(0));
    let r3 = s.ranks.iter().find(|r| r.dev == devs[3]).unwrap();
    assert_eq!(r3.component, 1);
    assert!((r3.offset_ns + (OFFSETS[3] - OFFSETS[2]) as f64).abs() < 200.0);
    // The lone rank's spans stay unsynchronized.
    assert_eq!(s.apply(&b.t).per_rank[4][0], None);
    // Too few instances: nothing is used.
    let strict = synchronize(&b.t, &ClockOptions { min_instances: 1000, ..Default::default() });
    assert!(strict.ranks.is_empty() && strict.comms.iter().all(|c| !c.used));
    // Empty table.
    let empty = synchronize(&OpTable::default(), &ClockOptions::default());
    assert!(empty.ranks.is_empty() && empty.reference.is_empty());
}

/// A sync with hand-set per-rank offsets (one component, reference dev 0).
fn sync_with(offsets: &[f64]) -> ClockSync {
    ClockSync {
        point: SyncPoint::Midpoint,
        reference: vec![DevIdx(0)],
        ranks: offsets
            .iter()
            .enumerate()
            .map(|(d, &o)| RankOffset {
                dev: DevIdx(d as u32),
                global_rank: Some(d as u32),
                offset_ns: o,
                instances: 10,
                residual_ns: 0.0,
                component: 0,
            })
            .collect(),
        comms: Vec::new(),
    }
}

#[test]
fn per_domain_gives_each_host_the_median_of_its_ranks() {
    // Host a: ranks 0..3 (arrival skew only), host b: ranks 3..6, ~5 µs ahead;
    // rank 6 has no domain.
    let s = sync_with(&[0.0, 120.0, -40.0, 5000.0, 5300.0, 4900.0, 777.0]);
    let host = |d: DevIdx| match d.0 {
        0..=2 => Some("a"),
        3..=5 => Some("b"),
        _ => None,
    };
    let p = s.per_domain(host);
    let off: Vec<f64> = p.ranks.iter().map(|r| r.offset_ns).collect();
    // Medians: a = 0, b = 5000; the reference's domain stays at 0.
    assert_eq!(off, vec![0.0, 0.0, 0.0, 5000.0, 5000.0, 5000.0, 777.0]);
    // When the reference rank's domain median is not 0 the whole frame moves
    // with it, the domain-less rank included: differences are kept.
    let s = sync_with(&[0.0, 200.0, 300.0, 5000.0, 5000.0, 5000.0, 777.0]);
    let off: Vec<f64> = s.per_domain(host).ranks.iter().map(|r| r.offset_ns).collect();
    assert_eq!(off, vec![0.0, 0.0, 0.0, 4800.0, 4800.0, 4800.0, 577.0]);
    // One domain for everyone: no correction at all.
    let off: Vec<f64> = s.per_domain(|_| Some(0)).ranks.iter().map(|r| r.offset_ns).collect();
    assert!(off.iter().all(|&o| o == 0.0), "{off:?}");
    // Applied: same shift for every rank of a host.
    assert_eq!(p.offset_ns(DevIdx(4)), Some(5000));
}
