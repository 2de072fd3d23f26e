//! A hand-filled, deterministic example [`Report`]: a 16-GPU run on two
//! nodes (TP 4 × PP 2 × DP 2) with every section present and plausible
//! numbers. It owns no analysis; it exists so tests, the README screenshot
//! and demos exercise the renderer with realistic shapes (two bandwidth
//! regimes, a slow rank, a warm-up iteration, a missing heatmap cell).

use super::model::*;

/// Small deterministic generator (xorshift) so the sample never changes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

const KINDS: [&str; 5] = ["AllReduce", "ReduceScatter", "AllGather", "Send", "Recv"];
const RANKS: usize = 16;
const GIB: u64 = 1 << 30;

/// The example report.
pub fn sample_report() -> Report {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut r = Report {
        title: "GPT-3 1.3B · 2 nodes × 8 H100 · TP 4 / PP 2 / DP 2".into(),
        generated_by: format!("commlens {}", env!("CARGO_PKG_VERSION")),
        inputs: vec![
            "logs/nccl-node0.log".into(),
            "logs/nccl-node1.log".into(),
            "traces/rank*.pt.trace.json.gz (16 files)".into(),
        ],
        summary: vec![
            Figure::new("Ranks", "16"),
            Figure { detail: Some("TP 4 · PP 2 · DP 2".into()), ..Figure::new("Communicators", "9") },
            Figure::new("Operations", "1.21 M"),
            Figure::new("Bytes moved", "6.8 TiB"),
            Figure { detail: Some("of 52.1 s step time".into()), ..Figure::new("Exposed comm.", "7.9 s") },
            Figure { detail: Some("AllReduce, 64 MiB+".into()), ..Figure::new("Median busbw", "312 GB/s") },
        ],
        notes: vec!["3 lines of node1 were cut by interleaved writers and recovered.".into()],
        ..Report::default()
    };
    let mix = [
        (480_112u64, 3_210 * GIB),
        (96_020, 1_480 * GIB),
        (96_020, 1_480 * GIB),
        (270_400, 330 * GIB),
        (270_400, 330 * GIB),
    ];
    r.op_mix = Some(OpMix {
        rows: KINDS.iter().zip(mix).map(|(k, (count, bytes))| OpMixRow { kind: k.to_string(), count, bytes }).collect(),
        notes: vec![],
    });
    r.rank_volume = Some(RankVolume {
        kinds: KINDS.iter().map(|k| k.to_string()).collect(),
        ranks: (0..RANKS)
            .map(|i| {
                // Pipeline stage 0 sends activations, stage 1 receives them;
                // rank 11 carries the embedding all-reduce as well.
                let stage = i / 8;
                let j = |rng: &mut Rng| 1.0 + 0.04 * (rng.next() - 0.5);
                let ar = 200.0 * j(&mut rng) + if i == 11 || i == 3 { 24.0 } else { 0.0 };
                let rs = 92.5 * j(&mut rng);
                let (send, recv) = if stage == 0 { (34.0, 7.0) } else { (7.0, 34.0) };
                RankBytes {
                    rank: i.to_string(),
                    bytes: [ar, rs, rs, send, recv].iter().map(|g| (g * GIB as f64) as u64).collect(),
                }
            })
            .collect(),
        notes: vec![],
    });
    let buckets = [
        "≤1 KiB",
        "1–4 KiB",
        "4–16 KiB",
        "16–64 KiB",
        "64–256 KiB",
        "256 KiB–1 MiB",
        "1–4 MiB",
        "4–16 MiB",
        "16–64 MiB",
        "64–256 MiB",
        ">256 MiB",
    ];
    let shape: [[u64; 11]; 5] = [
        [9_800, 2_100, 600, 1_200, 2_400, 8_100, 61_000, 210_000, 140_000, 38_000, 6_900],
        [0, 0, 0, 0, 120, 900, 4_100, 9_800, 31_000, 42_000, 8_100],
        [0, 0, 0, 0, 120, 900, 4_100, 9_800, 31_000, 42_000, 8_100],
        [0, 0, 0, 2_600, 8_800, 42_000, 190_000, 27_000, 0, 0, 0],
        [0, 0, 0, 2_600, 8_800, 42_000, 190_000, 27_000, 0, 0, 0],
    ];
    r.size_histogram = Some(SizeHistogram {
        buckets: buckets.iter().map(|b| b.to_string()).collect(),
        series: KINDS.iter().zip(shape).map(|(k, c)| KindCounts { kind: k.to_string(), counts: c.to_vec() }).collect(),
        notes: vec!["Bucket edges are powers of 4; sizes are per rank's call (count × datatype size).".into()],
    });
    r.bandwidth = Some(bandwidth(&mut rng));
    r.iterations = Some(iterations(&mut rng));
    r.stragglers = Some(Stragglers {
        instances: 12_480,
        rows: (0..RANKS)
            .map(|i| {
                let (last, late) = if i == 11 {
                    (6_930, 412_000.0)
                } else {
                    (300 + (rng.next() * 260.0) as u64, 18_000.0 + rng.next() * 30_000.0)
                };
                StragglerRow { rank: i.to_string(), times_last: last, mean_lateness_ns: late }
            })
            .collect(),
        notes: vec!["Arrival = kernel start after clock-offset correction (max residual 0.4 µs).".into()],
    });
    r.overlap = Some(Overlap {
        rows: (0..RANKS)
            .map(|i| {
                let comm = 9.2e9 * (1.0 + 0.05 * rng.next()) + if i == 11 { 1.4e9 } else { 0.0 };
                let share = 0.48 + 0.15 * rng.next() - if i == 11 { 0.12 } else { 0.0 };
                OverlapRow { rank: i.to_string(), comm_ns: comm as u64, overlapped_ns: (comm * share) as u64 }
            })
            .collect(),
        notes: vec![],
    });
    r.model = Some(ModelTable {
        rows: vec![
            model_row("TP (size 4)", "AllReduce", 3_072, 3_072 + 12),
            model_row("DP (size 2)", "ReduceScatter", 1_480, 1_480),
            model_row("DP (size 2)", "AllGather", 1_480, 1_480),
            model_row("PP (size 2)", "Send", 240, 330),
            model_row("embedding (size 2)", "AllReduce", 24, 126),
        ],
        notes: vec![
            "Expected bytes from hidden 2048, 24 layers, sequence 2048, micro-batch 4, bf16, 100 steps.".into(),
            "PP traffic is above the model: activation recomputation sends twice.".into(),
        ],
    });
    r.expected = Some(expected());
    r.anomalies = Some(AnomalySection {
        intro: "1,204,113 of 1,210,344 operations have a GPU span; 75,182 collective instances in 61 histories were judged.".into(),
        rows: vec![AnomalyRow {
            time: "2025-12-18 18:09:12.481226 UTC".into(),
            time_ns: 1_766_081_352_481_226_000,
            rule: "slow instance".into(),
            comm: "tp-3".into(),
            kind: "AllReduce".into(),
            bytes: Some(32 << 20),
            ranks: "12-15".into(),
            iteration: Some(41),
            observed_ns: 1_412_000.0,
            expected_ns: 388_000.0,
            score: 61.4,
        }],
        more: 0,
        series: vec![AnomalySeries {
            label: "tp-3 AllReduce ≥32 MiB".into(),
            points: (0..60u32).map(|i| (i, if i == 41 { 1_412_000.0 } else { 388_000.0 + 4_000.0 * ((i * 7) % 5) as f64 })).collect(),
            change_at: None,
            marked: vec![41],
        }],
        notes: Vec::new(),
    });
    r.tuning = Some(TuningSection {
        compared: 12_480,
        agree: 12_311,
        channels_compared: 12_480,
        channels_agree: 12_402,
        rows: vec![
            TuningRow {
                comm: "dp-0".into(),
                kind: "ReduceScatter".into(),
                bytes: 6 << 20,
                logged: "RING/LL128, 16 channels".into(),
                model: "RING/SIMPLE, 16 channels".into(),
                differs: "protocol".into(),
                count: 169,
            },
            TuningRow {
                comm: "tp-0".into(),
                kind: "AllReduce".into(),
                bytes: 96 << 10,
                logged: "NVLS/SIMPLE, 16 channels".into(),
                model: "NVLS/SIMPLE, 24 channels".into(),
                differs: "channels".into(),
                count: 78,
            },
        ],
        notes: vec!["Send/Recv and AllToAll run outside NCCL's tuner and are not compared.".into()],
    });
    let mut t = crate::Table::new(
        "Communicator bottlenecks",
        &["communicator", "ranks>", "kind", "slowest link", "limit GB/s>"],
    );
    t.row(vec!["tp-0 (0x7f3a…10)".into(), "4".into(), "TP".into(), "NVLink".into(), "370".into()]);
    t.row(vec!["dp-0 (0x7f3a…80)".into(), "2".into(), "DP".into(), "NET/IB (mlx5_0)".into(), "48".into()]);
    t.row(vec!["pp-0 (0x7f3b…20)".into(), "2".into(), "PP".into(), "NET/IB (mlx5_2)".into(), "48".into()]);
    t.note("Limits per thesis eq. 4.12: the slowest link of the ring, per GPU.");
    r.tables.push(crate::report::ReportTable::from(&t));
    r
}

/// Expected figures of the sample's communicators: TP AllReduce over NVLink
/// near the model, DP collectives across nodes below it.
fn expected() -> ExpectedSection {
    let mut rows = Vec::new();
    for (comm, kind, peak, half, eff) in [
        ("tp-0", "AllReduce", 360.0, 3.0e6, 0.93),
        ("dp-0", "ReduceScatter", 46.0, 1.5e6, 0.78),
        ("dp-0", "AllGather", 46.0, 1.5e6, 0.81),
        ("pp-0", "Send", 24.0, 0.4e6, 0.9),
    ] {
        for e in (14..=28).step_by(2) {
            let bytes = 1u64 << e;
            let expected = peak * bytes as f64 / (bytes as f64 + half);
            let factor = if kind == "AllReduce" { 1.5 } else { 1.0 };
            let model = if kind == "Send" { "–" } else if e < 20 { "RING/LL 100%" } else { "RING/SIMPLE 100%" };
            rows.push(ExpectedRow {
                comm: comm.into(),
                kind: kind.into(),
                lo_bytes: bytes,
                median_bytes: bytes + bytes / 3,
                ops: 4_000 >> (e / 4),
                timed: 4_000 >> (e / 4),
                expected_time_us: Some(bytes as f64 * factor / (expected * 1e3)),
                expected_busbw_gb_s: Some(expected),
                measured_busbw_gb_s: Some(expected * eff),
                efficiency: Some(eff),
                logged_choice: if kind == "Send" { String::new() } else { model.into() },
                model_choice: model.into(),
                tuner_input: "logged graphs".into(),
            });
        }
    }
    ExpectedSection {
        cluster: "from logs/nccl-node0.log".into(),
        provenance: vec![
            "preset dgx-h100 for what the run does not tell (its GPU)".into(),
            "GPU H100-SXM from the name `NVIDIA H100 80GB HBM3`".into(),
            "2 nodes from the hosts of the run".into(),
        ],
        tuner_input: "NCCL's logged search graphs for 9 of 9 communicator handles".into(),
        rows,
        notes: vec!["Send/Recv are modelled as grouped point-to-point transfers (SendRecv).".into()],
    }
}

fn model_row(p: &str, kind: &str, theory_gib: u64, observed_gib: u64) -> ModelRow {
    ModelRow {
        parallelism: p.into(),
        kind: kind.into(),
        theory_bytes: Some(theory_gib * GIB),
        observed_bytes: Some(observed_gib * GIB),
    }
}

/// Busbw follows `peak · s / (s + s½)` with noise: TP collectives inside a
/// node (NVLink), DP collectives and PP p2p across nodes (InfiniBand).
fn bandwidth(rng: &mut Rng) -> Bandwidth {
    let mut series = Vec::new();
    for (kind, n, peak, half) in [
        ("AllReduce", 9_000usize, 330.0, 4.0e6),
        ("ReduceScatter", 1_800, 44.0, 2.0e6),
        ("AllGather", 1_800, 43.0, 2.0e6),
        ("Send", 2_400, 22.0, 0.5e6),
    ] {
        let points = (0..n)
            .map(|_| {
                let inter = kind == "AllReduce" && rng.next() < 0.15; // embedding group crosses nodes
                let (peak, half) = if inter { (41.0, 2.5e6) } else { (peak, half) };
                let bytes = 2f64.powf(10.0 + rng.next() * 19.0);
                let bw = peak * bytes / (bytes + half) * (0.8 + 0.25 * rng.next());
                // Own limit: the inter-node link for the embedding group, NVLink otherwise.
                let limit = if inter || kind == "Send" { 48.0 } else { 370.0 };
                let vs_baseline = (kind == "AllReduce" && !inter).then(|| bw / nccl_tests_allreduce(bytes));
                BwPoint { bytes: bytes as u64, busbw_gb_s: bw, efficiency: Some(bw / limit), vs_baseline }
            })
            .collect();
        series.push(BandwidthSeries { kind: kind.into(), points });
    }
    let baseline = (10..=30)
        .map(|e| {
            let b = 2f64.powi(e);
            BwPoint { bytes: b as u64, busbw_gb_s: nccl_tests_allreduce(b), efficiency: None, vs_baseline: None }
        })
        .collect();
    Bandwidth {
        baselines: vec![BaselineCurve { label: "nccl-tests AllReduce, 8 ranks".into(), kind: "AllReduce".into(), points: baseline }],
        series,
        limits: vec![
            Limit { label: "NVLink 4 (intra-node)".into(), gb_s: 370.0 },
            Limit { label: "IB 4×NDR (inter-node)".into(), gb_s: 48.0 },
        ],
        convention: "nccl-tests bus bandwidth".into(),
        notes: vec![],
    }
}

/// The sample machine's nccl-tests AllReduce curve (GB/s at `bytes`).
fn nccl_tests_allreduce(bytes: f64) -> f64 {
    360.0 * bytes / (bytes + 3.0e6)
}

fn iterations(rng: &mut Rng) -> IterationHeat {
    let cols = 40;
    let values = (0..RANKS)
        .map(|r| {
            (0..cols)
                .map(|c| {
                    if r == 5 && c == 17 {
                        return None; // a dropped trace window
                    }
                    let base = if c == 0 { 410.0 } else { 160.0 + 20.0 * rng.next() };
                    let slow = if r == 11 && (20..26).contains(&c) { 140.0 } else { 0.0 };
                    let stage = if r >= 8 { 12.0 } else { 0.0 };
                    Some(base + slow + stage)
                })
                .collect()
        })
        .collect();
    IterationHeat {
        rows: (0..RANKS).map(|r| r.to_string()).collect(),
        cols: (0..cols).map(|c| c.to_string()).collect(),
        values,
        value_label: "communication time per iteration (ms)".into(),
        notes: vec!["Iteration 0 includes communicator setup (warm-up).".into()],
    }
}
