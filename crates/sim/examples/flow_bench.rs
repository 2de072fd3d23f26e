//! Throughput of the flow-level network: 1024 GPUs (128 DGX H100 nodes, rail-optimised
//! fat-tree) and a few thousand overlapping coflows of a TP 8 × DP 128 job with MoE-style
//! all-to-alls and pipeline sends, driven as an engine would (start at arrival, advance to the
//! next completion). Prints events/s, rate recomputations and concurrency.
//!
//! `cargo run --release -p commlens-sim --no-default-features --example flow_bench [COFLOWS]`

use std::time::Instant;

use commlens_core::OpKind;
use commlens_model::presets::preset;
use commlens_sim::flow::{FlowConfig, FlowNetwork};
use commlens_sim::network::{NetOp, Network};
use commlens_workload::GroupKind;

/// A tiny deterministic generator (xorshift64*), so every run is the same workload.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn main() {
    let total: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(4000);
    let cluster = preset("dgx-h100").unwrap().with_nodes(128);
    let gpn = 8u32;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut arrivals: Vec<(f64, NetOp)> = Vec::with_capacity(total);
    let mut t = 0.0;
    for id in 0..total as u64 {
        t += rng.below(4) as f64; // 0–3 µs between arrivals
        let roll = rng.below(100);
        let (kind, bytes, ranks, group_kind) = if roll < 70 {
            // TP AllReduce of one node, 8–64 MiB.
            let node = rng.below(128) as u32;
            (OpKind::AllReduce, (8 + rng.below(57)) << 20, (0..gpn).map(|g| node * gpn + g).collect(), GroupKind::Tp)
        } else if roll < 80 {
            // DP AllReduce over 128 nodes (one GPU per node), 64–256 MiB buckets.
            let g = rng.below(8) as u32;
            (OpKind::AllReduce, (64 + rng.below(193)) << 20, (0..128).map(|n| n * gpn + g).collect(), GroupKind::Dp)
        } else if roll < 90 {
            // EP all-to-all over two nodes.
            let node = rng.below(64) as u32 * 2;
            (OpKind::AllToAll, (16 + rng.below(49)) << 20, (0..16).map(|i| node * gpn + i).collect(), GroupKind::Ep)
        } else {
            // PP send to the next stage's node.
            let r = rng.below(1024) as u32;
            (OpKind::Send, (8 + rng.below(25)) << 20, vec![r, (r + gpn) % 1024], GroupKind::Pp)
        };
        arrivals.push((t, NetOp { id, kind, bytes, ranks, group_kind, root: 0 }));
    }
    let mut net = FlowNetwork::new(&cluster, FlowConfig::default());
    let wall = Instant::now();
    let mut next = 0usize;
    let mut completed = 0usize;
    let (mut in_flight_sum, mut samples, mut max_in_flight) = (0usize, 0usize, 0usize);
    loop {
        let ta = arrivals.get(next).map(|a| a.0);
        let tn = net.next_completion();
        let t = match (ta, tn) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(n)) => n,
            (Some(a), Some(n)) => a.min(n),
        };
        completed += net.advance(t).len();
        while next < arrivals.len() && arrivals[next].0 <= t {
            let op = arrivals[next].1.clone();
            net.start(t, op);
            next += 1;
        }
        in_flight_sum += net.in_flight();
        samples += 1;
        max_in_flight = max_in_flight.max(net.in_flight());
    }
    let secs = wall.elapsed().as_secs_f64();
    let s = &net.stats;
    assert_eq!(completed, total);
    println!("1024 GPUs (128 × DGX H100, rail-optimised fat-tree, {} links)", net.topo.links.len());
    println!("{total} coflows (70 % TP AllReduce, 10 % DP AllReduce over 128 nodes, 10 % EP AllToAll, 10 % PP Send)");
    println!("simulated {:.1} ms; in flight: mean {:.0}, max {max_in_flight}", net.now() / 1e3, in_flight_sum as f64 / samples.max(1) as f64);
    println!("events {} (starts, data-phase ends, completions), rate recomputations {}, link entries {}", s.events, s.rate_recomputations, s.link_entries);
    println!("wall {secs:.2} s: {:.0} events/s, {:.0} recomputations/s", s.events as f64 / secs, s.rate_recomputations as f64 / secs);
}
