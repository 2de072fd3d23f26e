//! The acceptance check against a measured run: the 8-rank PARAM DLRM PyTorch ETs and
//! the Kineto traces of the same job (8x V100-SXM2-32GB, one node), simulated on the
//! `dgx-v100` preset with the analytical network and compute times from the Kineto traces.
//!
//! The step is launch-bound (the GPUs are busy ~1 ms of a 12.5-20 ms step; the rest is the
//! CPU between and inside ops), so compute tasks take host time
//! ([`AttachOptions::host_time`]); GPU time alone simulates a 1.5 ms step. With host time a
//! compute task waits for a collective only where its CPU span holds a synchronising call
//! (the CPU runs ahead of asynchronous collectives), and a collective is issued where the CPU
//! called it. Prints per rank the measured and simulated step, and per collective the
//! measured kernel duration (each rank's, and the instance's shortest: the part that is not
//! waiting for peers) against the simulation, with the wait for the last member of each.
//! Step bounds and the per-collective kernel median hold at the 10 % and 20 %; the
//! network-time median (last arriver's kernel) is pinned at the achieved figure.

use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::Roofline;
use commlens_sim::engine::{run, EngineOptions};
use commlens_model::gpu::Precision;
use commlens_workload::chakra::{attach_kineto_times_with, load_path, AttachOptions};
use commlens_workload::{Compute, ComputeKind, Phase, Stream, Task, Work, Workload};

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

/// Prepends to every rank's program a wait of `offset[r]` µs (the rank enters the step then):
/// a compute task every first task of another stream also waits for.
fn enter_at(w: &mut Workload, offset: &[f64]) {
    let mut seen = vec![false; w.programs.len()];
    for r in 0..w.world as usize {
        let pi = w.rank_program[r] as usize;
        assert!(!std::mem::replace(&mut seen[pi], true), "one program per rank");
        let p = &mut w.programs[pi];
        for t in &mut p.tasks {
            for d in &mut t.deps {
                *d += 1;
            }
            if t.stream != Stream::Compute && t.deps.is_empty() {
                t.deps.push(0);
            }
        }
        p.tasks.insert(
            0,
            Task {
                stream: Stream::Compute,
                deps: Vec::new(),
                phase: Phase::Other,
                work: Work::Compute(Compute {
                    name: "entry skew (measured)".into(),
                    kind: ComputeKind::Other,
                    flops: 0.0,
                    mem_bytes: 0.0,
                    time_us: Some(offset[r]),
                }),
            },
        );
    }
}

struct Sim {
    run: commlens_sim::engine::Run,
}

fn simulate(w: &Workload) -> Sim {
    let mut cluster = preset("dgx-v100").expect("preset");
    cluster.nodes = 1;
    assert_eq!(cluster.gpus_per_node, 8);
    // Compute tasks carry the measured time (`time_us`), which the roofline returns as is.
    let compute = Roofline::new(&cluster.gpu, Precision::Fp32);
    let mut net = AnalyticalNetwork::new(&cluster, DEFAULT_VERSION, NcclEnv::default());
    let run = run(w, &compute, &mut net, &EngineOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    Sim { run }
}

fn step_end(s: &Sim, rank: u32) -> f64 {
    let rr = s.run.rank(rank).expect("simulated rank");
    rr.iteration_end_us.first().copied().unwrap_or(rr.end_us)
}

#[test]
fn dlrm_8rank_simulated_against_measured() {
    let Some(wl) = commlens_testdata::real_dir("workloads") else { return };
    let Some(kin) = commlens_testdata::real_dir("kineto") else { return };
    let et = wl.join("param-dlrm_pytorch_et-8rank.tar.gz");
    let kt = kin.join("param-dlrm_kineto-8rank-V100-worker0-7.tar.gz");
    let mut w = load_path(&et).unwrap_or_else(|e| panic!("{e}"));
    let report = attach_kineto_times_with(&mut w, &[&kt], AttachOptions { host_time: true })
        .unwrap_or_else(|e| panic!("{e}"));
    for n in w.notes.iter().chain(&report.notes) {
        println!("note: {n}");
    }
    for l in &report.ranks {
        println!("link rank {}: {} compute tasks, {} linked, {} fallback, {} unmeasured", l.rank, l.compute_tasks, l.linked, l.fallback, l.unmeasured);
    }
    assert_eq!(w.world, 8);
    let meas = &report.measured;
    assert_eq!(meas.len(), 8);
    assert!(meas.iter().enumerate().all(|(i, m)| m.rank == i as u32));

    // The eight traces share one host clock (the collectives end within a few µs of each
    // other on every rank), but the ranks entered the profiled step up to 7.5 ms apart: the
    // early ones spend that time inside their first collective waiting for the last. That is
    // an initial condition, not something the workload describes, so the replay starts each
    // rank at its measured step start.
    let starts: Vec<f64> = meas.iter().map(|m| m.steps[0].start_us).collect();
    let t0 = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let offset: Vec<f64> = starts.iter().map(|s| s - t0).collect();
    let common = simulate(&w);
    let mut ws = w.clone();
    enter_at(&mut ws, &offset);
    let skewed = simulate(&ws);

    println!("\nper rank (replay: each rank enters the step at its measured start; common: all at 0)");
    println!("{:>4} {:>9} {:>11} {:>11} {:>7} {:>11} {:>7}", "rank", "entry_us", "measured_us", "replay_us", "err_%", "common_us", "err_%");
    let (mut sum_m, mut sum_s) = (0.0, 0.0);
    let mut worst: f64 = 0.0;
    for m in meas {
        let r = m.rank;
        let mu = m.step_us().expect("a profiler step");
        let su = step_end(&skewed, r) - offset[r as usize];
        let cu = step_end(&common, r);
        let e = (su - mu) / mu;
        worst = worst.max(e.abs());
        sum_m += mu;
        sum_s += su;
        println!("{:>4} {:>9.0} {:>11.0} {:>11.0} {:>+7.1} {:>11.0} {:>+7.1}", r, offset[r as usize], mu, su, 100.0 * e, cu, 100.0 * (cu - mu) / mu);
    }
    let mean_err = (sum_s - sum_m) / sum_m;
    // The job's step without the entry skew: from the last rank's entry to the last end.
    let last_entry = offset.iter().copied().fold(0.0, f64::max);
    let meas_end = meas.iter().map(|m| m.steps[0].start_us + m.steps[0].dur_us - t0).fold(0.0, f64::max);
    let crit_m = meas_end - last_entry;
    let crit_s = (0..8).map(|r| step_end(&common, r)).fold(0.0, f64::max);
    println!(
        "mean step: measured {:.0} us, replay {:.0} us, error {:+.1} %; worst rank {:.1} %",
        sum_m / 8.0, sum_s / 8.0, 100.0 * mean_err, 100.0 * worst
    );
    println!(
        "job step without entry skew (last rank's entry to last end): measured {:.0} us, simulated from a common start {:.0} us, error {:+.1} %",
        crit_m, crit_s, 100.0 * (crit_s - crit_m) / crit_m
    );

    // Per collective instance (the i-th NCCL kernel of every rank).
    let n = meas[0].colls.len();
    assert!(meas.iter().all(|m| m.colls.len() == n));
    println!("\nper collective: kernel = this rank's measured NCCL kernel (waits for peers included) vs simulated end - arrival, mean over ranks;");
    println!("network = the shortest kernel of the instance over ranks (the last arriver's: no waiting) vs simulated network time");
    println!("wait = the kernel's part spent waiting for the last member (measured: last kernel start - this one's; simulated: start - arrival), mean over ranks");
    println!("{:>2} {:>9} {:>8} {:>10} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>7}", "i", "kind", "bytes", "kernel_us", "sim_us", "err_%", "wait_us", "sim_us", "net_us", "sim_us", "err_%");
    let mut e_kernel = Vec::new();
    let mut e_net = Vec::new();
    for i in 0..n {
        let c0 = &meas[0].colls[i];
        let (mut km, mut ks) = (0.0, 0.0);
        let mut net_m = f64::INFINITY;
        let mut net_s = 0.0;
        let last = meas.iter().map(|m| m.colls[i].start_us).fold(f64::MIN, f64::max);
        let (mut wm, mut ws) = (0.0, 0.0);
        for m in meas {
            let c = &m.colls[i];
            let o = skewed.run.rank(m.rank).unwrap().ops.iter().filter(|o| o.call == 0).nth(i).expect("op");
            assert_eq!((Some(o.kind), Some(o.bytes)), (c.kind, c.bytes), "rank {} collective {i}", m.rank);
            let sim = o.end_us - o.arrive_us;
            e_kernel.push(((sim - c.dur_us) / c.dur_us).abs());
            km += c.dur_us / 8.0;
            ks += sim / 8.0;
            net_m = net_m.min(c.dur_us);
            wm += (last - c.start_us) / 8.0;
            ws += (o.start_us - o.arrive_us) / 8.0;
            net_s = o.end_us - o.start_us;
        }
        let en = (net_s - net_m) / net_m;
        e_net.push(en.abs());
        println!(
            "{:>2} {:>9} {:>8} {:>10.1} {:>10.1} {:>+7.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>+7.1}",
            i, format!("{:?}", c0.kind.expect("kind")), c0.bytes.expect("bytes"), km, ks, 100.0 * (ks - km) / km, wm, ws, net_m, net_s, 100.0 * en
        );
    }
    // Where the model's time of each collective comes from (the analytical network's
    // figure): the per-call launch cost (for AllToAll, its host time: a call and 14
    // Sends/Recvs for one GPU per thread), the rest of its zero-byte latency, and the bytes.
    let cluster = {
        let mut c = preset("dgx-v100").expect("preset");
        c.nodes = 1;
        c
    };
    let model = commlens_model::Predictor::new(&cluster, 8, 1, DEFAULT_VERSION, NcclEnv::default());
    println!("\nmodel time per collective (dgx-v100, 8 ranks): launch + latency (rest of a zero-byte call, as the simulator splits it) + bytes = total");
    println!("{:>2} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10}", "i", "kind", "bytes", "launch", "latency", "bytes_us", "total", "algo/proto");
    for i in 0..n {
        let c0 = &meas[0].colls[i];
        let (kind, bytes) = (c0.kind.expect("kind"), c0.bytes.expect("bytes"));
        let size = commlens_sim::analytical::tests_size(kind, bytes, 8);
        let full = model.predict(kind, size);
        let empty = model.predict(kind, 0);
        let launch = if full.algo.is_none() { model.p2p_host_us(kind) } else { cluster.efficiency.launch_us };
        println!(
            "{:>2} {:>9} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10}",
            i,
            format!("{kind:?}"),
            bytes,
            launch,
            empty.time_us - launch,
            full.time_us - empty.time_us,
            full.time_us,
            format!("{}/{}", full.algo.map_or("p2p", |a| a.name()), full.proto.map_or("-", |p| p.name()))
        );
    }
    let med_kernel = median(e_kernel);
    let med_net = median(e_net);
    println!(
        "median |error|: kernel durations per rank and instance {:.1} %, network time per instance {:.1} %",
        100.0 * med_kernel, 100.0 * med_net
    );

    // Step time: the bound, on the mean over ranks and on every rank (replay with the
    // measured entry times), and on the job step from a common start.
    assert!(mean_err.abs() <= 0.10, "mean step error {:.1} %", 100.0 * mean_err);
    assert!(worst <= 0.10, "worst rank step error {:.1} %", 100.0 * worst);
    assert!(((crit_s - crit_m) / crit_m).abs() <= 0.10, "job step {crit_s:.0} vs {crit_m:.0} us");

    // Per collective, the bound: median error of the kernel durations (measured NCCL
    // kernel on each rank vs simulated end - arrival) at most 20 % (achieved 7.2 %; 31.0 %
    // before compute tasks stopped waiting for collectives the CPU did not wait for, 9.0 %
    // with that alone).
    assert!(med_kernel <= 0.20, "median kernel-duration error {:.1} % (bound 20 %, achieved 7.2 %)", 100.0 * med_kernel);
    // Network time (the instance's shortest kernel, the last arriver's, vs the simulated
    // network time): 77.8 %, pinned. The model's 8-rank AllToAll is 16.6 us (10.8 us of host
    // time for one GPU per thread + one 5.8 us device step) where NCCL's grouped send/recv
    // kernel measured 7-10 us; the three AllReduces are 25-88 % slow (model latency at small
    // sizes, which includes the 12 us per-call launch the kernel does not show).
    assert!(med_net <= 0.85, "median network-time error {:.1} % (achieved 77.8 %)", 100.0 * med_net);
}
