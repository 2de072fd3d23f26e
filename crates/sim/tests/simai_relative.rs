//! SimAI's published relative results (NSDI '25 §5, `shared/reference/simulation.md` §6.2),
//! reproduced in shape with our own stack: a Megatron program built from the named model
//! (`megatron::ModelJob`), the analytical network on the cluster preset, the roofline on the
//! preset's GPU, one data replica per (stage, TP rank) simulated (representatives).
//!
//! - P1: 1024 H100 (`dgx-h100`, NICs 8×100/200/400G), GPT-3 175B TP8 PP8 DP16: the gain of
//!   200→400 Gbit/s; paper ≈ +19 %.
//! - P2: 1024 H20 (`hgx-h20`), GPT-3 175B TP8 PP8 DP16 (the paper names no model for this
//!   figure; its design study is GPT-3 175B): 100→200 ≈ +11 %, 200→400 ≈ +6 %.
//! - T1: best TP ∈ {1, 2, 4, 8} on 8-GPU hosts at 1024 GPUs, PP of SimAI's Table 3 (13B: 1,
//!   LLaMA-65B: 2, 175B: 8), DP = 1024 / (TP·PP): paper 4 (GPT-3 13B), 8 (LLaMA-65B), 8
//!   (GPT-3 175B). The paper restricts TP to > 2 (13B) and > 4 (65B, 175B); we print our own
//!   memory estimate (`ModelJob::memory`) beside that rule.
//!
//! Fixed choices (the paper gives no batch sizes; none of these were tuned to its numbers):
//! global batches are the GPT-3 paper's token batches (Brown et al. 2020, Table 2.1: 13B 2M
//! tokens = 1024 sequences of 2048, 175B 3.2M = 1536) and LLaMA's 4M tokens (= 1024 sequences
//! of SimAI's 4096); micro batch 1; sequence parallelism; Megatron's distributed optimizer (the
//! DP items of AICB's SimAI workloads are its ReduceScatter/AllGather) with overlapped
//! gradient reduction; BF16 roofline; NCCL's default version and environment.
//!
//! Shape assertions: gains positive, P2 ordered (100→200 > 200→400 > 0), TP optima equal to
//! the paper's among the layouts the paper allows. P1/P2 run two setups of the same layout and
//! print both: `ours` (the fixed choices above) and `aicb-default` (SimAI's workload generator's
//! defaults, [`aicb_default`]). Magnitudes are printed against the paper's with whether they
//! fall within ±50 % and within a factor of 1.5; they are NOT asserted, because neither setup
//! lands there, and they bracket the paper: `ours` gives +4.3 % (P1), +1.8 / +0.9 % (P2), a
//! quarter to a sixth of the paper's; `aicb-default` +35.5 % (P1), +17.3 / +9.6 % (P2), 1.6–1.9
//! times the paper's. Only the DP gradient reduction (and the PP sends) cross the NICs, a
//! fixed volume per iteration (fp32 ReduceScatter + bf16 AllGather of the stage's shard, as
//! AICB's `grad_param_comm`/`grad_gather`); what sets the gain is how much compute an
//! iteration holds beside it, i.e. the micro-batches per iteration: 96 in `ours` (NIC-bound
//! exposed DP ≈ 8 % of the iteration at 200G on H100), 2 in `aicb-default` (≈ 53 %, with the
//! PP8 bubble at 3.5 × the compute), while the paper's +19 % needs ≈ 32 % (X/2 = 0.19/1.19 of
//! the time at 400G). The paper gives no batch size, so [`p1_sets_the_batch_p2_is_predicted`]
//! takes it from one anchor and checks the other two: the micro-batch count whose P1 gain is
//! nearest +19 % (12, i.e. 192 sequences: +19.3 %) predicts P2 at +9.0 % and +4.7 % against
//! +11 % and +6 %, asserted within a factor of 1.5. One free parameter, fitted on P1 only.
//! T1 with our own memory estimate instead of the paper's TP rule picks TP 2 / 4 / 4: the
//! estimate (distributed optimizer, 6 + 12/dp bytes per parameter) admits TP 2 for 13B and
//! TP 4 for 65B/175B, and there our TP collectives (intra-node, exposed on the compute
//! stream) cost less than the pipeline bubble and DP traffic they save; the paper's rule
//! matches 18 bytes per parameter (no ZeRO), under which only TP ≥ 4 / 8 / 8 fit.

use commlens_model::cluster::Cluster;
use commlens_model::gpu::Precision;
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::Roofline;
use commlens_sim::engine::{self, EngineOptions, Summary};
use commlens_workload::megatron::{Layout, ModelJob};
use commlens_workload::models::model_by_name;
use commlens_workload::GroupKind;

/// The layout every case uses, varied only in TP/PP/DP and batch.
fn layout(tp: usize, pp: usize, dp: usize, gbs: usize) -> Layout {
    Layout { sequence_parallel: true, distributed_optimizer: true, overlap_grad_reduce: true, ..Layout::new(tp, pp, dp, 1, gbs) }
}

fn cluster(name: &str, gpus: usize, nic: Option<&str>) -> Cluster {
    let base = preset(name).expect("preset");
    let mut c = base.with_nodes((gpus as u32).div_ceil(base.gpus_per_node));
    if let Some(n) = nic {
        c.set_nics(n).expect("nic spec");
    }
    c
}

/// One iteration of `job` on `c`.
fn simulate(job: &ModelJob, c: &Cluster) -> Summary {
    let w = job.workload().expect("workload");
    let mut net = AnalyticalNetwork::new(c, DEFAULT_VERSION, NcclEnv::default());
    let roof = Roofline::new(&c.gpu, Precision::Bf16);
    let run = engine::run(&w, &roof, &mut net, &EngineOptions { record: false, progress: None }).expect("simulates");
    run.summary
}

fn line(s: &Summary) -> String {
    format!(
        "iter {:8.1} ms  compute {:8.1}  exposed DP {:6.1} TP {:6.1} PP {:6.1}  bubble {:7.1}",
        s.mean_iteration_us / 1e3,
        s.compute_us / 1e3,
        s.exposed(GroupKind::Dp) / 1e3,
        s.exposed(GroupKind::Tp) / 1e3,
        s.exposed(GroupKind::Pp) / 1e3,
        s.bubble_us / 1e3
    )
}

/// GPT-3 175B TP8 PP8 DP16 set up as the module notes' fixed choices: 1536 sequences per
/// iteration (96 micro-batches per pipeline), sequence parallelism, overlapped gradient
/// reduction.
fn ours() -> Layout {
    layout(8, 8, 16, 1536)
}

/// GPT-3 175B TP8 PP8 DP16 set up as SimAI's workload generator sets it up by default
/// (AICB, `aliyun/aicb` `scripts/megatron_gpt.sh`, which SimAI's tutorial uses to generate its
/// workloads): `micro_batch=1`, `ga_num=2`, `global_batch = ga_num · dp · micro_batch` (= 32
/// at DP 16), `--use-distributed-optimizer`, sequence parallelism off unless `--sp`, 2048
/// tokens; no overlap of the gradient reduction (AICB's SimAI workload lists the DP
/// `grad_param_comm` ReduceScatter and `grad_gather` AllGather as the first layer rows,
/// reached after the whole backward pass; Megatron's own `--overlap-grad-reduce` is off by
/// default). The paper states none of these (only TP8 PP8, 2048 tokens, the model): this is
/// the tool's default, not a fit to the paper's gains.
fn aicb_default() -> Layout {
    Layout { distributed_optimizer: true, ..Layout::new(8, 8, 16, 1, 2 * 16) }
}

/// Iteration times of GPT-3 175B set up as `l` on `preset` with 8 NICs of each speed.
fn nic_sweep(preset_name: &str, label: &str, l: &Layout, speeds: &[u32]) -> Vec<f64> {
    let m = model_by_name("gpt3-175b").unwrap();
    let job = ModelJob::new(m, l).unwrap();
    speeds
        .iter()
        .map(|g| {
            let c = cluster(preset_name, 1024, Some(&format!("8x{g}g")));
            let s = simulate(&job, &c);
            println!("{preset_name} {label:12} 8x{g}G: {}", line(&s));
            s.mean_iteration_us
        })
        .collect()
}

/// Gain in iteration throughput going from time `slow` to time `fast`, percent.
fn gain(slow: f64, fast: f64) -> f64 {
    (slow / fast - 1.0) * 100.0
}

fn within_half(ours: f64, paper: f64) -> bool {
    (ours - paper).abs() <= 0.5 * paper
}

/// Within a factor of 1.5 of the paper's gain, either way.
fn within_factor(ours: f64, paper: f64) -> bool {
    ours >= paper / 1.5 && ours <= paper * 1.5
}

#[test]
fn p1_h100_nic_200_to_400() {
    let mut rows = Vec::new();
    for (label, l) in [("ours", ours()), ("aicb-default", aicb_default())] {
        let t = nic_sweep("dgx-h100", label, &l, &[100, 200, 400]);
        assert!(t[0] > t[1] && t[1] > t[2], "{label}: faster NICs must help");
        rows.push((label, gain(t[0], t[1]), gain(t[1], t[2])));
    }
    println!("case                      setup          ours     paper");
    for (label, g0, g) in &rows {
        println!("P1 H100 200->400 Gbps   {label:12}  {g:+6.1} %   +19 %   within ±50 %: {}, within 1.5x: {}  (100->200: {g0:+.1} %)", within_half(*g, 19.0), within_factor(*g, 19.0));
    }
}

#[test]
fn p2_h20_nic_sweep() {
    let mut rows = Vec::new();
    for (label, l) in [("ours", ours()), ("aicb-default", aicb_default())] {
        let t = nic_sweep("hgx-h20", label, &l, &[100, 200, 400]);
        let (g1, g2) = (gain(t[0], t[1]), gain(t[1], t[2]));
        assert!(g1 > g2 && g2 > 0.0, "{label}: diminishing returns: {g1} then {g2}");
        rows.push((label, g1, g2));
    }
    println!("case                      setup          ours     paper");
    for (label, g1, g2) in &rows {
        println!("P2 H20 100->200 Gbps    {label:12}  {g1:+6.1} %   +11 %   within ±50 %: {}, within 1.5x: {}", within_half(*g1, 11.0), within_factor(*g1, 11.0));
        println!("P2 H20 200->400 Gbps    {label:12}  {g2:+6.1} %    +6 %   within ±50 %: {}, within 1.5x: {}", within_half(*g2, 6.0), within_factor(*g2, 6.0));
    }
}

/// Best TP of one model at 1024 GPUs.
fn tp_sweep(model: &str, pp: usize, gbs: usize, paper_min_tp: usize) -> (usize, usize) {
    let m = model_by_name(model).unwrap();
    let c = cluster("dgx-h100", 1024, None);
    let mut best_paper: Option<(f64, usize)> = None;
    let mut best_ours: Option<(f64, usize)> = None;
    for tp in [1usize, 2, 4, 8] {
        let dp = 1024 / (tp * pp);
        if m.layers as usize % pp != 0 || m.heads as usize % tp != 0 || gbs % dp != 0 {
            println!("{model} TP{tp}: not a valid layout");
            continue;
        }
        let job = ModelJob::new(m, &layout(tp, pp, dp, gbs)).unwrap();
        let mem = job.memory();
        let fits = mem.fits(c.gpu.memory_gib);
        let allowed = tp >= paper_min_tp;
        let s = simulate(&job, &c);
        println!(
            "{model} TP{tp} PP{pp} DP{dp}: {}  memory {:5.1} GiB ({}), paper's rule: {}",
            line(&s),
            mem.total() / (1u64 << 30) as f64,
            if fits { "fits" } else { "too big" },
            if allowed { "allowed" } else { "excluded" }
        );
        let t = s.mean_iteration_us;
        if allowed && best_paper.is_none_or(|b| t < b.0) {
            best_paper = Some((t, tp));
        }
        if fits && best_ours.is_none_or(|b| t < b.0) {
            best_ours = Some((t, tp));
        }
    }
    (best_paper.expect("a layout").1, best_ours.map_or(0, |b| b.1))
}

#[test]
fn t1_best_tp_on_8_gpu_hosts() {
    let cases = [("gpt3-13b", 1, 1024, 4, 4), ("llama-65b", 2, 1024, 8, 8), ("gpt3-175b", 8, 1536, 8, 8)];
    let mut rows = Vec::new();
    for (model, pp, gbs, min_tp, paper) in cases {
        let (ours, mem_filtered) = tp_sweep(model, pp, gbs, min_tp);
        rows.push((model, ours, mem_filtered, paper));
    }
    println!("case                 ours (paper's TP rule)  ours (memory filter)  paper");
    for (model, ours, mem, paper) in &rows {
        println!("T1 best TP {model:10}  {ours:>10}              {mem:>10}           {paper:>5}");
    }
    for (model, ours, _, paper) in rows {
        assert_eq!(ours, paper, "{model}");
    }
}

/// Iteration times of GPT-3 175B TP8 PP8 DP16 with `ga` micro-batches per pipeline (the
/// fixed choices otherwise) on each (preset, NIC speed).
fn ga_times(ga: usize, cases: &[(&str, u32)]) -> Vec<f64> {
    let job = ModelJob::new(model_by_name("gpt3-175b").unwrap(), &layout(8, 8, 16, 16 * ga)).unwrap();
    cases.iter().map(|(p, g)| simulate(&job, &cluster(p, 1024, Some(&format!("8x{g}g")))).mean_iteration_us).collect()
}

/// The batch is the one thing the paper leaves out, so it is taken from one anchor and the
/// other two are predicted: the micro-batch count whose P1 gain (H100 200→400) comes closest to
/// the paper's +19 % (P1 falls as micro-batches dilute the fixed DP traffic, so the sweep stops
/// once it passes below), then P2 (H20 100→200 and 200→400) at that same batch, which nothing
/// was chosen on, must land within a factor of 1.5 of the paper's +11 % and +6 %.
#[test]
fn p1_sets_the_batch_p2_is_predicted() {
    const P1: f64 = 19.0;
    let mut best: Option<(f64, usize)> = None;
    for ga in [2usize, 4, 8, 12, 16, 24, 32, 48, 64, 96] {
        let t = ga_times(ga, &[("dgx-h100", 200), ("dgx-h100", 400)]);
        let g = gain(t[0], t[1]);
        println!("GPT-3 175B on 1024 H100, {ga:2} micro-batches: P1 200->400 Gbps {g:+6.1} %");
        if best.is_none_or(|b| (g - P1).abs() < (b.0 - P1).abs()) {
            best = Some((g, ga));
        }
        if g < P1 {
            break;
        }
    }
    let (p1, ga) = best.expect("a batch");
    assert!((p1 - P1).abs() <= 0.5 * P1, "no batch brings P1 near the paper's: best {p1:+.1} % at {ga} micro-batches");
    let t = ga_times(ga, &[("hgx-h20", 100), ("hgx-h20", 200), ("hgx-h20", 400)]);
    let (g1, g2) = (gain(t[0], t[1]), gain(t[1], t[2]));
    println!("case (batch set by P1: {ga} micro-batches, {} sequences)   ours     paper", 16 * ga);
    println!("P1 H100 200->400 Gbps (chosen on)                     {p1:+6.1} %   +19 %");
    println!("P2 H20 100->200 Gbps (predicted)                      {g1:+6.1} %   +11 %   within 1.5x: {}", within_factor(g1, 11.0));
    println!("P2 H20 200->400 Gbps (predicted)                      {g2:+6.1} %    +6 %   within 1.5x: {}", within_factor(g2, 6.0));
    assert!(within_factor(g1, 11.0) && within_factor(g2, 6.0), "P2 at the batch P1 sets: {g1:+.1} % and {g2:+.1} % against +11 % and +6 %");
}
