//! Megatron's interleaved pipeline (virtual stages) simulates: its last stage sends
//! activations on to the first stage's next model chunk, so `Peer::Next` wraps around the
//! pipeline group (this failed with "no such peer" before the ring semantics). Checks that
//! every pipeline send is matched and that interleaving shrinks the bubble, as it does in
//! Megatron (bubble ∝ (pp − 1) / (m · v)).

use commlens_model::gpu::Precision;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::Roofline;
use commlens_sim::engine::{run, EngineOptions};
use commlens_workload::megatron::{workload, Config};

fn bubble_us(virtual_stages: usize) -> (f64, f64) {
    let cfg = Config { tp: 2, pp: 4, dp: 1, layers: 16, num_microbatches: 8, virtual_stages, iterations: 1, ..Config::default() };
    let w = workload(&cfg).unwrap_or_else(|e| panic!("vpp {virtual_stages}: {e}"));
    w.validate().unwrap();
    let c = preset("dgx-h100").unwrap();
    let mut net = AnalyticalNetwork::new(&c, DEFAULT_VERSION, NcclEnv::default());
    let r = run(&w, &Roofline::new(&c.gpu, Precision::Bf16), &mut net, &EngineOptions { record: false, progress: None })
        .unwrap_or_else(|e| panic!("vpp {virtual_stages}: {e}"));
    println!(
        "vpp {virtual_stages}: iteration {:.1} us, bubble {:.1} us",
        r.summary.mean_iteration_us, r.summary.bubble_us
    );
    (r.summary.mean_iteration_us, r.summary.bubble_us)
}

#[test]
fn interleaved_schedule_runs_and_shrinks_the_bubble() {
    let (t1, b1) = bubble_us(1);
    let (t2, b2) = bubble_us(2);
    assert!(b1 > 0.0, "1F1B on 4 stages has a bubble");
    assert!(b2 < b1, "interleaving shrinks the bubble: {b2} vs {b1}");
    assert!(t2 < t1 * 1.05, "and the iteration does not grow much: {t2} vs {t1}");
}
