//! Planning `commlens demo`'s configuration (`examples/demo-model.conf`: 4 layers, hidden 1024,
//! TP 2 × PP 2 × DP 1 on 4 GPUs, 4 micro-batches of 1) ranks the demo's own layout where its
//! simulated iteration time puts it, and that time is the one `commlens simulate` gives the
//! file.

use commlens_model::gpu::Precision;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_plan::conf::from_model_conf;
use commlens_plan::rank::{plan, PlanRequest};
use commlens_plan::{Constraints, Layout, Recompute};
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::Roofline;
use commlens_sim::engine::{self, EngineOptions};
use commlens_workload::megatron;

const DEMO_CONF: &str = include_str!("../../../examples/demo-model.conf");

#[test]
fn demo_layout_ranks_by_its_simulated_time() {
    let conf = from_model_conf(DEMO_CONF).expect("the demo's model file parses");
    let gbs = conf.global_batch.expect("the demo file fixes the batch");
    assert_eq!((conf.layout.tp, conf.layout.pp, conf.layout.dp, gbs), (2, 2, 1, 4));
    let cluster = preset("dgx-h100").unwrap();
    let mut req = PlanRequest::new(conf.model, cluster.clone(), 4, gbs);
    // The demo's family and micro-batch; everything else free; simulate them all.
    req.constraints = Constraints::parse("family=megatron,mbs=1").unwrap();
    req.simulate_top = usize::MAX;
    let p = plan(&req);
    println!("demo model on 4 GPUs of dgx-h100: {} layouts, {} fit", p.enumerated, p.fitting);
    for r in &p.rows {
        let s = r.simulated.expect("every layout of the demo simulates");
        println!("  #{:<2} (model #{:<2}) {:<40} simulated {:8.3} ms  estimated {:8.3} ms  bottleneck {}", r.rank, r.model_rank, r.layout.label(), s.iteration_s * 1e3, r.estimate.step_s * 1e3, r.bottleneck);
    }
    // The ranking is the simulated order.
    for w in p.rows.windows(2) {
        assert!(w[0].iteration_s <= w[1].iteration_s, "{} before {}", w[0].layout.label(), w[1].layout.label());
    }
    let own = Layout { recompute: Recompute::None, ..conf.layout };
    let row = p
        .rows
        .iter()
        .find(|r| Layout { recompute: Recompute::None, ..r.layout } == own)
        .unwrap_or_else(|| panic!("the demo's own layout {} is not among the fitting layouts", own.label()));
    let faster = p.rows.iter().filter(|r| r.iteration_s < row.iteration_s).count();
    // Layouts that simulate to the same time (the distributed optimizer on one replica).
    let tied = p.rows.iter().filter(|r| r.iteration_s == row.iteration_s).count();
    // The demo's configuration simulated as `commlens simulate examples/demo-model.conf` does.
    let cfg = megatron::Config::from_model_conf(DEMO_CONF).unwrap();
    let w = megatron::workload(&cfg).unwrap();
    let mut net = AnalyticalNetwork::new(&cluster, DEFAULT_VERSION, NcclEnv::default());
    let roof = Roofline::new(&cluster.gpu, Precision::Bf16);
    let run = engine::run(&w, &roof, &mut net, &EngineOptions { record: false, progress: None }).unwrap();
    let simulate_s = run.summary.mean_iteration_us * 1e-6;
    let planned_s = row.simulated.unwrap().iteration_s;
    println!(
        "demo's own layout {}: rank {} of {} ({faster} faster, {tied} with its time), planned {:.3} ms, `commlens simulate` {:.3} ms (mean of {} iterations)",
        row.layout.label(),
        row.rank,
        p.rows.len(),
        planned_s * 1e3,
        simulate_s * 1e3,
        cfg.iterations
    );
    assert!(row.rank > faster && row.rank <= faster + tied, "rank {} with {faster} faster and {tied} tied", row.rank);
    assert!((planned_s / simulate_s - 1.0).abs() < 0.02, "planned {planned_s} s, simulate {simulate_s} s");
}
