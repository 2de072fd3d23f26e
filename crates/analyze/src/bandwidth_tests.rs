//! Hand-computed bandwidths: the thesis's worked example (Fig. 4.2), every
//! kind's factor under both conventions, one-rank communicators, zero
//! durations, and a table with topology (NVLink inside a host, 12.5 GB/s
//! network between hosts).

use super::*;
use crate::clock::tests::Builder;
use commlens_core::{DataType, NodeKind, Topology};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn thesis_worked_example() {
    // TP AllReduce, N = 4, float16 × 2,097,152, ring; 4,194,304 B in 619,492 ns; NET 12.5 GB/s.
    let m = metrics(OpKind::AllReduce, 4_194_304, 4, Some(Algorithm::Ring), 619_492, Some(12.5), BusConvention::Thesis);
    assert_eq!(m.algo_bytes, 4_194_304);
    assert!(close(m.algbw_gb_s.unwrap(), 6.77055393774254));
    assert!(close(m.bus_factor, 1.5));
    assert!(close(m.busbw_gb_s.unwrap(), 10.1558309066138));
    assert!(close(m.theo_algbw_gb_s.unwrap(), 9.375));
    assert!(close(m.theo_busbw_gb_s.unwrap(), 18.75));
    assert!(close(m.algo_efficiency.unwrap(), 0.722192420025871));
    assert!(close(m.efficiency.unwrap(), 0.541644315019403));
    // nccl-tests: the same busbw against busbw ≤ B; both efficiencies agree.
    let n =
        metrics(OpKind::AllReduce, 4_194_304, 4, Some(Algorithm::Ring), 619_492, Some(12.5), BusConvention::NcclTests);
    assert!(close(n.busbw_gb_s.unwrap(), 10.1558309066138));
    assert!(close(n.theo_busbw_gb_s.unwrap(), 12.5));
    assert!(close(n.theo_algbw_gb_s.unwrap(), 12.5 / 1.5));
    assert!(close(n.efficiency.unwrap(), 10.1558309066138 / 12.5));
    assert!(close(n.algo_efficiency.unwrap(), n.efficiency.unwrap()));
}

#[test]
fn factors_and_sizes_of_every_kind() {
    use BusConvention::{NcclTests as N, Thesis as T};
    // 1 MiB logged on 8 ranks in 1 ms.
    let mib = 1_048_576u64;
    let run = |k, c, algo| metrics(k, mib, 8, algo, 1_000_000, Some(100.0), c);
    for k in [OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllToAll, OpKind::Gather, OpKind::Scatter] {
        let m = run(k, N, None);
        assert_eq!(m.algo_bytes, 8 * mib, "{k}");
        assert!(close(m.algbw_gb_s.unwrap(), 8.388608));
        assert!(close(m.busbw_gb_s.unwrap(), 8.388608 * 7.0 / 8.0));
        let t = run(k, T, None);
        assert_eq!(t.algo_bytes, mib, "{k}");
        assert!(close(t.busbw_gb_s.unwrap(), 1.048576 * 7.0 / 8.0));
        assert!(close(t.theo_busbw_gb_s.unwrap(), 87.5) && close(t.theo_algbw_gb_s.unwrap(), 87.5));
    }
    for k in [OpKind::Broadcast, OpKind::Reduce, OpKind::Send, OpKind::Recv, OpKind::SendRecv] {
        for c in [N, T] {
            let m = run(k, c, None);
            assert_eq!((m.algo_bytes, m.bus_factor), (mib, 1.0), "{k}");
            assert!(close(m.busbw_gb_s.unwrap(), 1.048576));
            assert_eq!((m.theo_algbw_gb_s, m.theo_busbw_gb_s), (Some(100.0), Some(100.0)));
        }
    }
    // AllReduce: tree is 2 for the thesis (α = 1, β = 2), 2(n−1)/n for nccl-tests.
    assert!(close(run(OpKind::AllReduce, T, Some(Algorithm::Tree)).bus_factor, 2.0));
    let tree = run(OpKind::AllReduce, T, Some(Algorithm::Tree));
    assert_eq!((tree.theo_algbw_gb_s, tree.theo_busbw_gb_s), (Some(100.0), Some(200.0)));
    for algo in [Some(Algorithm::Tree), Some(Algorithm::Nvls), None] {
        assert!(close(run(OpKind::AllReduce, N, algo).bus_factor, 1.75));
    }
    assert!(close(run(OpKind::AllReduce, T, Some(Algorithm::Nvls)).bus_factor, 1.75));
}

#[test]
fn one_rank_and_zero_durations() {
    for c in [BusConvention::NcclTests, BusConvention::Thesis] {
        // A collective on one rank moves nothing over links: busbw 0, no limit.
        let m = metrics(OpKind::AllReduce, 1000, 1, Some(Algorithm::Ring), 1000, Some(10.0), c);
        assert_eq!((m.algbw_gb_s, m.busbw_gb_s, m.bus_factor), (Some(1.0), Some(0.0), 0.0));
        assert_eq!((m.theo_busbw_gb_s, m.efficiency, m.algo_efficiency), (None, None, None));
        let ag = metrics(OpKind::AllGather, 1000, 1, None, 1000, Some(10.0), c);
        assert_eq!((ag.algo_bytes, ag.busbw_gb_s, ag.efficiency), (1000, Some(0.0), None));
        // Broadcast to oneself keeps factor 1 (nccl-tests prints it so).
        let b = metrics(OpKind::Broadcast, 1000, 1, None, 1000, Some(10.0), c);
        assert_eq!((b.busbw_gb_s, b.efficiency), (Some(1.0), Some(0.1)));
        // nranks 0 (unknown) is treated as 1.
        assert_eq!(metrics(OpKind::AllGather, 8, 0, None, 8, None, c).algo_bytes, 8);
        for d in [0, -5] {
            let z = metrics(OpKind::AllReduce, 1000, 4, None, d, Some(10.0), c);
            assert_eq!((z.algbw_gb_s, z.busbw_gb_s, z.efficiency), (None, None, None));
            assert!(z.theo_busbw_gb_s.is_some());
        }
        // No bottleneck, or a nonsensical one: no limits.
        assert_eq!(metrics(OpKind::Send, 1000, 2, None, 10, None, c).theo_busbw_gb_s, None);
        assert_eq!(metrics(OpKind::Send, 1000, 2, None, 10, Some(0.0), c).efficiency, None);
    }
}

#[test]
fn quantiles() {
    let mut v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
    let s = Spread::of(&mut v).unwrap();
    assert!(close(s.p10, 1.9) && close(s.median, 5.5) && close(s.p90, 9.1));
    assert_eq!(Spread::of(&mut [4.0]), Some(Spread { p10: 4.0, median: 4.0, p90: 4.0 }));
    assert_eq!(Spread::of(&mut []), None);
}

/// Hosts a and b, each with GPUs 0x1000 and 0x2000 on NVLink 80, a NIC at 12.5.
fn table() -> (Builder, Vec<DevIdx>) {
    let mut b = Builder::new();
    for host in ["a", "b"] {
        let mut t = Topology::new(host);
        let cpu = t.node(NodeKind::Cpu, "0-0");
        let g0 = t.node(NodeKind::Gpu, "0-1000");
        let g1 = t.node(NodeKind::Gpu, "0-2000");
        let nic = t.node(NodeKind::Nic, "0-3000");
        let net = t.node(NodeKind::Net, "0-0");
        t.add_link(cpu, g0, LinkKind::Pci, 24.0);
        t.add_link(cpu, g1, LinkKind::Pci, 24.0);
        t.add_link(g0, g1, LinkKind::Nvl, 80.0);
        t.add_link(g1, g0, LinkKind::Nvl, 80.0);
        t.add_link(cpu, nic, LinkKind::Pci, 24.0);
        t.add_link(nic, net, LinkKind::Net, 12.5);
        b.t.topologies.push(t);
    }
    let devs =
        vec![b.device("a", 0x1000, 0), b.device("a", 0x2000, 1), b.device("b", 0x1000, 2), b.device("b", 0x2000, 3)];
    (b, devs)
}

#[test]
fn table_records_and_aggregates() {
    let (mut b, devs) = table();
    let (world, w) = b.comm(&devs, 1);
    let (tp, h) = b.comm(&devs[0..2], 2);
    let (_, single) = b.comm(&devs[3..4], 3);
    // The worked example on every world member (durations 619,492 ns × 1, 2, 3, 4).
    for (k, &c) in w.iter().enumerate() {
        let d = 619_492 * (k as i64 + 1);
        let i = b.op(c, OpKind::AllReduce, DataType::Float16, 2_097_152, Some((0, d)));
        b.t.per_rank[devs[k].ix()].update(i, |o| o.algo = Some(Algorithm::Ring));
    }
    // TP AllGathers of 1 MiB per rank in 0.1 ms, one with zero duration, one without span.
    b.op(h[0], OpKind::AllGather, DataType::Uint8, 1 << 20, Some((10, 100_010)));
    b.op(h[1], OpKind::AllGather, DataType::Uint8, 1 << 20, Some((10, 10)));
    b.op(h[1], OpKind::AllGather, DataType::Uint8, 1 << 20, None);
    b.op(single[0], OpKind::Broadcast, DataType::Uint8, 1000, Some((0, 100)));
    let r = analyze(&b.t, &BandwidthOptions::default());
    assert_eq!((r.ops.len(), r.ops_without_span, r.zero_duration), (7, 1, 1));
    assert_eq!(r.negative_duration, 0);
    let first = r.get(OpRef { dev: devs[0], index: 0 }).unwrap();
    assert_eq!((first.comm, first.nranks, first.duration_ns), (Some(world), 4, 619_492));
    assert!(close(first.m.busbw_gb_s.unwrap(), 10.1558309066138));
    assert!(close(first.m.efficiency.unwrap(), 10.1558309066138 / 12.5));
    assert!(r.get(OpRef { dev: devs[1], index: 9 }).is_none());
    let row = r.comms.iter().find(|c| c.comm == Some(world)).unwrap();
    assert_eq!((row.ops, row.bottleneck_gb_s, row.link, row.estimated), (4, Some(12.5), Some(LinkKind::Net), false));
    // busbw 10.156 / k for k = 1..4: median = (10.156/2 + 10.156/3) / 2.
    let bus = row.busbw.unwrap();
    assert!(close(bus.median, 10.1558309066138 * (0.5 + 1.0 / 3.0) / 2.0));
    assert!(close(bus.p90, 10.1558309066138 * (0.5 + 0.7 * 0.5)));
    let tp_row = r.comms.iter().find(|c| c.comm == Some(tp)).unwrap();
    assert_eq!((tp_row.kind, tp_row.ops, tp_row.zero_duration), (OpKind::AllGather, 1, 1));
    assert_eq!((tp_row.bottleneck_gb_s, tp_row.link), (Some(80.0), Some(LinkKind::Nvl)));
    // S = 2 MiB, 0.1 ms: algbw 20.97152, busbw × 1/2, efficiency against 80.
    assert!(close(tp_row.algbw.unwrap().median, 20.97152));
    assert!(close(tp_row.efficiency.unwrap().median, 20.97152 / 2.0 / 80.0));
    let single_row = r.comms.iter().find(|c| c.kind == OpKind::Broadcast).unwrap();
    assert_eq!((single_row.bottleneck_gb_s, single_row.efficiency), (None, None));
    // Size buckets: the 4 MiB AllReduces and the 1 MiB AllGathers.
    let ar = r.sizes.iter().find(|s| s.kind == OpKind::AllReduce).unwrap();
    assert_eq!((ar.lo_bytes, ar.ops), (4_194_304, 4));
    let ag = r.sizes.iter().find(|s| s.kind == OpKind::AllGather).unwrap();
    assert_eq!((ag.lo_bytes, ag.ops), (1 << 20, 1));

    // The thesis's estimate for a communicator without a known bottleneck.
    let est = analyze(&b.t, &BandwidthOptions { estimate_unknown: true, ..Default::default() });
    let single_row = est.comms.iter().find(|c| c.kind == OpKind::Broadcast).unwrap();
    assert_eq!(
        (single_row.bottleneck_gb_s, single_row.link, single_row.estimated),
        (Some(12.5), Some(LinkKind::Net), true)
    );
    assert!(close(single_row.efficiency.unwrap().median, 10.0 / 12.5));
    assert_eq!(estimated_bottleneck(&OpTable::default()), None);

    // Thesis convention on the same table.
    let th = analyze(&b.t, &BandwidthOptions { convention: BusConvention::Thesis, ..Default::default() });
    let first = th.get(OpRef { dev: devs[0], index: 0 }).unwrap();
    assert!(close(first.m.efficiency.unwrap(), 0.541644315019403));
    let tp_row = th.comms.iter().find(|c| c.comm == Some(tp)).unwrap();
    assert!(close(tp_row.algbw.unwrap().median, 10.48576));
    // A span that ends before it starts: flagged, no bandwidth, nothing infinite.
    b.op(h[1], OpKind::AllGather, DataType::Uint8, 1 << 20, Some((100, 10)));
    let rn = analyze(&b.t, &BandwidthOptions::default());
    assert_eq!((rn.zero_duration, rn.negative_duration), (2, 1));
    for row in &rn.comms {
        for s in [&row.busbw, &row.algbw].into_iter().flatten() {
            assert!(s.p10.is_finite() && s.median.is_finite() && s.p90.is_finite(), "{row:?}");
        }
    }
}
