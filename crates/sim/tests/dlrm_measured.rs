//! The acceptance check against a measured run: the 8-rank PARAM DLRM PyTorch ETs and
//! the Kineto traces of the same job (8x V100-SXM2-32GB, one node), simulated on the
//! `dgx-v100` preset with the analytical network and compute times from the Kineto traces.
//! Prints per rank the measured and simulated step, and per collective the measured kernel
//! duration (this rank's, and the minimum over ranks of the instance: the part that is not
//! waiting for peers) against the simulated network time.

use commlens_core::OpKind;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::Roofline;
use commlens_sim::engine::{run, EngineOptions};
use commlens_workload::chakra::{attach_kineto_times, load_path};
use commlens_workload::Work;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
fn dlrm_8rank_simulated_against_measured() {
    let Some(wl) = commlens_testdata::real_dir("workloads") else { return };
    let Some(kin) = commlens_testdata::real_dir("kineto") else { return };
    let et = wl.join("param-dlrm_pytorch_et-8rank.tar.gz");
    let kt = kin.join("param-dlrm_kineto-8rank-V100-worker0-7.tar.gz");
    let mut w = load_path(&et).unwrap_or_else(|e| panic!("{e}"));
    let report = attach_kineto_times(&mut w, &[&kt]).unwrap_or_else(|e| panic!("{e}"));
    for n in w.notes.iter().chain(&report.notes) {
        println!("note: {n}");
    }
    assert_eq!(w.world, 8);
    assert_eq!(report.measured.len(), 8);

    let mut cluster = preset("dgx-v100").expect("preset");
    cluster.nodes = 1;
    let gpu = cluster.gpu.clone();
    let compute = Roofline::new(&gpu, commlens_model::gpu::Precision::Fp32);
    let mut net = AnalyticalNetwork::new(&cluster, DEFAULT_VERSION, NcclEnv::default());
    let r = run(&w, &compute, &mut net, &EngineOptions::default()).unwrap_or_else(|e| panic!("{e}"));

    // Per rank: measured step vs simulated step.
    println!("\n{:>4} {:>12} {:>12} {:>8} {:>10} {:>10}", "rank", "measured_us", "sim_us", "err_%", "comp_ms", "trace_cmp");
    let mut errs = Vec::new();
    let (mut sm, mut ss) = (0.0, 0.0);
    for m in &report.measured {
        let meas = m.step_us().expect("a profiler step");
        let rr = r.rank(m.rank).expect("simulated rank");
        let sim = rr.iteration_end_us.first().copied().unwrap_or(rr.end_us);
        let err = (sim - meas) / meas;
        errs.push(err.abs());
        sm += meas;
        ss += sim;
        println!("{:>4} {:>12.0} {:>12.0} {:>+8.1} {:>10.1} {:>10.1}", m.rank, meas, sim, 100.0 * err, rr.breakdown.compute_us / 1e3, m.compute_us / 1e3);
    }
    let mean_err = (ss - sm) / sm;
    println!("mean: measured {:.0} us, simulated {:.0} us, error {:+.1} %", sm / 8.0, ss / 8.0, 100.0 * mean_err);

    // Per collective instance: the i-th collective of each rank.
    let n = report.measured[0].colls.len();
    println!("\n{:>3} {:>14} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}", "i", "kind", "bytes", "r0_us", "min_us", "sim_us", "err_r0%", "err_min%");
    let mut e_r0 = Vec::new();
    let mut e_min = Vec::new();
    for i in 0..n {
        let c0 = &report.measured[0].colls[i];
        let min = report.measured.iter().filter_map(|m| m.colls.get(i)).map(|c| c.dur_us).fold(f64::INFINITY, f64::min);
        let o = r.rank(0).unwrap().ops.iter().filter(|o| o.call == 0).nth(i);
        let Some(o) = o else { continue };
        let sim = o.end_us - o.start_us;
        let a = (sim - c0.dur_us) / c0.dur_us;
        let b = (sim - min) / min;
        e_r0.push(a.abs());
        e_min.push(b.abs());
        println!(
            "{:>3} {:>14} {:>10} {:>10.1} {:>10.1} {:>10.1} {:>+8.1} {:>+8.1}   (sim {:?} {})",
            i,
            format!("{:?}", c0.kind.unwrap_or(OpKind::AllReduce)),
            c0.bytes.unwrap_or(0),
            c0.dur_us,
            min,
            sim,
            100.0 * a,
            100.0 * b,
            o.kind,
            o.bytes
        );
    }
    println!("median |err| vs rank 0 kernel {:.1} %, vs min over ranks {:.1} %", 100.0 * median(e_r0), 100.0 * median(e_min));
    let _ = Work::IterationEnd { iter: 0 };
}

#[test]
#[ignore]
fn dump_program() {
    let wl = commlens_testdata::real_dir("workloads").unwrap();
    let kin = commlens_testdata::real_dir("kineto").unwrap();
    let mut w = load_path(&wl.join("param-dlrm_pytorch_et-8rank.tar.gz")).unwrap();
    attach_kineto_times(&mut w, &[&kin.join("param-dlrm_kineto-8rank-V100-worker0-7.tar.gz")]).unwrap();
    let r: u32 = std::env::var("RANK").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    for (i, t) in w.program_of(r).tasks.iter().enumerate() {
        let what = match &t.work {
            Work::Compute(c) => format!("C {:.1} {}", c.time_us.unwrap_or(-1.0), c.name),
            Work::Coll(c) => format!("COLL {:?} {} sync={}", c.kind, c.bytes(), c.sync),
            Work::P2p { .. } => "P2P".into(),
            Work::IterationEnd { .. } => "END".into(),
        };
        println!("{i:4} {:?} {:?} {what}", t.stream, t.deps);
    }
}
