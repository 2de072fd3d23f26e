//! The demo model's layouts on 4 GPUs, ranked by the planner (simulated) and by the
//! generator's own runs (`commlens-synth` renders the same Megatron program with its own
//! timing: a flat FLOP rate and its own link model, the iteration ranges it writes into
//! the traces). The two timing models differ, so this prints the *order* they give the
//! layouts side by side, their rank correlation, and where the demo's own layout (TP 2 ×
//! PP 2) falls. It does not assert agreement: they disagree (see the test's notes).

use commlens_model::presets::preset;
use commlens_plan::conf::from_model_conf;
use commlens_plan::rank::{plan, PlanRequest};
use commlens_plan::{Constraints, Recompute};
use commlens_synth::{generate_traces, RunConfig, TraceConfig};

const DEMO_CONF: &str = include_str!("../../../examples/demo-model.conf");

/// Mean iteration of the generated run (ms): the iteration ranges of every rank.
fn generated_ms(tp: usize, pp: usize, dp: usize) -> f64 {
    let cfg = RunConfig { tp, pp, dp, ..RunConfig::default() };
    let g = generate_traces(&cfg, &TraceConfig::default()).unwrap_or_else(|e| panic!("tp {tp} pp {pp} dp {dp}: {e}"));
    let spans: Vec<f64> = g.truth.iterations.iter().flatten().map(|&(a, b)| (b - a) as f64 / 1e6).collect();
    assert!(!spans.is_empty());
    // The slowest rank's iterations set the job's pace: the mean over iterations of the max over ranks.
    let n_iter = g.truth.iterations.iter().map(Vec::len).min().unwrap_or(0);
    (0..n_iter)
        .map(|i| g.truth.iterations.iter().map(|r| (r[i].1 - r[i].0) as f64 / 1e6).fold(0.0, f64::max))
        .sum::<f64>()
        / n_iter as f64
}

/// Spearman's rank correlation of two equally long lists (no ties expected).
fn spearman(a: &[f64], b: &[f64]) -> f64 {
    let rank = |v: &[f64]| {
        let mut ix: Vec<usize> = (0..v.len()).collect();
        ix.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
        let mut r = vec![0.0; v.len()];
        for (k, &i) in ix.iter().enumerate() {
            r[i] = k as f64;
        }
        r
    };
    let (ra, rb) = (rank(a), rank(b));
    let n = a.len() as f64;
    let d2: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - y) * (x - y)).sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

#[test]
fn planned_and_generated_orders_of_the_demo_layouts() {
    let conf = from_model_conf(DEMO_CONF).unwrap();
    let gbs = conf.global_batch.unwrap();
    let mut req = PlanRequest::new(conf.model, preset("dgx-h100").unwrap(), 4, gbs);
    req.constraints = Constraints::parse("family=megatron,mbs=1").unwrap();
    req.simulate_top = usize::MAX;
    let p = plan(&req);
    // One row per (tp, pp, dp): the plain Megatron variant (no SP, no distributed optimizer, no interleaving).
    let mut rows: Vec<(u32, u32, u32, f64, f64)> = Vec::new();
    for r in &p.rows {
        let l = &r.layout;
        if l.sp || l.zero > 0 || l.vpp > 1 || l.recompute != Recompute::None || rows.iter().any(|x| (x.0, x.1, x.2) == (l.tp, l.pp, l.dp)) {
            continue;
        }
        let gen = generated_ms(l.tp as usize, l.pp as usize, l.dp as usize);
        rows.push((l.tp, l.pp, l.dp, r.iteration_s * 1e3, gen));
    }
    println!("layout        planned ms   generated ms");
    for r in &rows {
        println!("tp{} pp{} dp{}   {:10.3}   {:12.3}", r.0, r.1, r.2, r.3, r.4);
    }
    assert!(rows.len() >= 4, "{rows:?}");
    let planned: Vec<f64> = rows.iter().map(|r| r.3).collect();
    let generated: Vec<f64> = rows.iter().map(|r| r.4).collect();
    let rho = spearman(&planned, &generated);
    let pos = |v: &[f64]| {
        let own = rows.iter().position(|r| (r.0, r.1, r.2) == (2, 2, 1)).expect("the demo's own layout");
        v.iter().filter(|&&x| x < v[own]).count() + 1
    };
    println!(
        "Spearman rho {rho:.2}; the demo's own layout tp2 pp2 dp1 ranks {} of {} planned, {} generated",
        pos(&planned),
        rows.len(),
        pos(&generated)
    );
    // Measured, not asserted: on the 6 layouts the generator's order is not the planner's
    // (rho -0.49 when written: the generator puts TP 4 first and DP 4 fourth, the planner the
    // reverse). Its flat FLOP rate and link model are not a hardware model; which is right
    // needs a real capture. What must hold: every layout has both times, and the
    // generator's own layout is among them.
    assert!(planned.iter().chain(&generated).all(|&t| t.is_finite() && t > 0.0), "{rows:?}");
    assert!((-1.0..=1.0).contains(&rho));
}
