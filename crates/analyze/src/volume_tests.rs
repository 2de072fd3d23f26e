//! The thesis's Table 5.1 theoretical column from its own inputs, the text
//! form of [`ModelConfig`], and generated Megatron runs (read back through
//! the NCCL-log reader) against the theory. Also holds [`load_run`], shared
//! with the straggler and iteration tests.

use super::*;
use crate::classify::{classify_with_sizes, ParallelSizes};
use commlens_synth::{generate, write_to_dir, RunConfig, Truth};

/// Generates `cfg`, writes it to a scratch folder and reads it back.
pub(crate) fn load_run(cfg: &RunConfig, tag: &str) -> (OpTable, Truth) {
    let run = generate(cfg);
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("commlens-h3-{tag}-{}-{n}", std::process::id()));
    let files = write_to_dir(&run, &dir).unwrap();
    let loaded = commlens_ingest::inputs::load_inputs(&files, &Default::default()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (loaded.table, run.truth)
}

/// The thesis's experiment (§5.3.5): L = 16, h = 512, s = 1024, V = 50,257,
/// b = 4, β = 2, 10 iterations.
fn thesis(f: impl FnOnce(&mut ModelConfig)) -> ModelConfig {
    let mut c = ModelConfig {
        layers: 16,
        hidden: 512,
        seq_len: 1024,
        vocab: 50_257,
        micro_batch: 4,
        iterations: 10,
        bytes_per_element: 2,
        ..ModelConfig::default()
    };
    f(&mut c);
    c.validate().unwrap();
    c
}

fn row(rows: &[VolumeRow], p: Parallelism, role: RankRole) -> &VolumeRow {
    rows.iter().find(|r| r.parallelism == p && r.role == role).unwrap_or_else(|| panic!("no {p:?} {role:?} row"))
}

/// GB with two decimals, as Table 5.1 prints them.
fn gb2(bytes: f64) -> f64 {
    (bytes / 1e7).round() / 100.0
}

#[test]
fn table_5_1_theoretical_column() {
    // Eq. 5.2 as printed: P = 12·16·512² · (1 + 1/6144 + 51281/50331648)
    // = 50,331,648 + 8,192 + 51,281 ≈ 50.4 M (Megatron's count would be 76.7 M).
    let dp = thesis(|c| c.dp = 4);
    assert_eq!(dp.param_count(), 50_391_121.0);
    let megatron = ModelConfig { param_formula: ParamFormula::Megatron, ..dp.clone() };
    assert_eq!(megatron.param_count(), 50_331_648.0 + 13.0 * 16.0 * 512.0 + 51_281.0 * 512.0);
    // DP = 4 (eq. 5.3): 2 · 3/4 · P · 2 = 3P per iteration; 1.51 GB over 10.
    let rows = theoretical_volumes(&dp);
    assert_eq!(rows.len(), 1);
    let d = row(&rows, Parallelism::Data, RankRole::All);
    assert_eq!(d.per_iteration_bytes, 151_173_363.0);
    assert_eq!(gb2(d.total_bytes), 1.51);
    assert_eq!(d.kinds, [OpKind::AllReduce]);
    // The thesis rounds P to 50.4e6 for the arithmetic: 151.2 MB per iteration.
    let rounded = thesis(|c| (c.dp, c.params) = (4, Some(50_400_000)));
    assert_eq!(theoretical_volumes(&rounded)[0].per_iteration_bytes, 151_200_000.0);

    // PP = 4, 16 micro-batches (eq. 5.4): 4·1024·512·2 = 4,194,304 B per
    // micro-batch and direction; × 2 × 16 = 134.2 MB per boundary (printed 134.1).
    let pp = thesis(|c| (c.pp, c.num_microbatches) = (4, Some(16)));
    let rows = theoretical_volumes(&pp);
    assert_eq!(rows.len(), 2);
    let edge = row(&rows, Parallelism::Pipeline, RankRole::PipelineEdge);
    let mid = row(&rows, Parallelism::Pipeline, RankRole::PipelineMiddle);
    assert_eq!(edge.per_microbatch_bytes, Some(2.0 * 4_194_304.0));
    assert_eq!(edge.per_iteration_bytes, 134_217_728.0);
    assert_eq!((gb2(edge.total_bytes), gb2(mid.total_bytes)), (1.34, 2.68));
    // Cluster total 2 × 1.34 + 2 × 2.68 = 8.05 GB exactly (the thesis adds rounded figures: 8.04).
    assert_eq!(gb2(2.0 * edge.total_bytes + 2.0 * mid.total_bytes), 8.05);
    assert_eq!((edge.ops_per_iteration, mid.ops_per_iteration), (Some(32), Some(64)));

    // TP = 4 on the 8-layer model, 4 micro-batches (eq. 5.5):
    // 8·8·4·1024·512·3/4·2 = 201.3 MB per micro-batch, 8.05 GB over 10 iterations.
    let tp = thesis(|c| (c.layers, c.tp, c.num_microbatches) = (8, 4, Some(4)));
    let rows = theoretical_volumes(&tp);
    let t = row(&rows, Parallelism::Tensor, RankRole::All);
    assert_eq!(t.per_microbatch_bytes, Some(201_326_592.0));
    assert_eq!(gb2(t.total_bytes), 8.05);
    // "4 AllReduce operations per layer … 8 × 4 = 32 operations": the thesis
    // counts one micro-batch although it multiplies the bytes by 4.
    assert_eq!(t.ops_per_microbatch, Some(32));
    assert_eq!(t.ops_per_iteration, Some(128));

    // EP = 4 (AlltoAll, B = 64, k = 1, 4 MoE layers of 16), DP = 4 for the rest:
    // 4·64·1024·512·3/4·2 = 201.3 MB per MoE layer for the cluster, × 4 layers / 4 ranks;
    // non-expert AllReduce 151.2 × 12/16 = 113.4 MB; (201.3 + 113.4) × 10 = 3.15 GB.
    let ep = thesis(|c| (c.dp, c.ep, c.moe_layers, c.top_k, c.global_batch) = (4, 4, 4, 1, Some(64)));
    assert_eq!(ep.microbatches().unwrap(), 4);
    let rows = theoretical_volumes(&ep);
    let e = row(&rows, Parallelism::Expert, RankRole::All);
    let d = row(&rows, Parallelism::Data, RankRole::All);
    assert_eq!(e.per_iteration_bytes, 201_326_592.0);
    assert_eq!(d.per_iteration_bytes, 151_173_363.0 * 12.0 / 16.0);
    assert_eq!(gb2(e.total_bytes + d.total_bytes), 3.15);
    let ep_rounded = thesis(|c| {
        (c.dp, c.ep, c.moe_layers, c.global_batch, c.params) = (4, 4, 4, Some(64), Some(50_400_000));
    });
    let d = row(&theoretical_volumes(&ep_rounded), Parallelism::Data, RankRole::All).clone();
    assert_eq!((d.per_iteration_bytes / 1e5).round() / 10.0, 113.4);
}

#[test]
fn distributed_optimizer_and_sequence_parallel() {
    // AICB: ReduceScatter of fp32 gradients + AllGather of bf16 parameters.
    let c = thesis(|c| (c.dp, c.distributed_optimizer, c.grad_bytes, c.params) = (4, true, Some(4), Some(1_000_000)));
    let d = &theoretical_volumes(&c)[0];
    assert_eq!(d.per_iteration_bytes, 0.75 * 1e6 * 6.0);
    assert_eq!(d.kinds, [OpKind::ReduceScatter, OpKind::AllGather]);
    // Same β for both: the same volume as the AllReduce.
    let same = thesis(|c| (c.dp, c.distributed_optimizer) = (4, true));
    assert_eq!(theoretical_volumes(&same)[0].per_iteration_bytes, 151_173_363.0);
    // SP: TP volume unchanged, AllGather + ReduceScatter, PP tensors split by tp.
    let sp = thesis(|c| (c.tp, c.pp, c.sequence_parallel, c.num_microbatches) = (2, 2, true, Some(8)));
    let rows = theoretical_volumes(&sp);
    let t = row(&rows, Parallelism::Tensor, RankRole::All);
    assert_eq!(t.ops_per_microbatch, Some(8 * 8));
    assert_eq!(t.per_microbatch_bytes, Some(8.0 * 8.0 * 4.0 * 1024.0 * 512.0 * 0.5 * 2.0));
    let p = row(&rows, Parallelism::Pipeline, RankRole::PipelineEdge);
    assert_eq!(p.per_iteration_bytes, 2.0 * 8.0 * 4.0 * 1024.0 * 256.0 * 2.0);
    assert!(rows.iter().all(|r| r.role != RankRole::PipelineMiddle), "pp = 2 has only edge stages");
}

#[test]
fn key_value_text() {
    let text = "# thesis TP run\n[model]\nnum_layers = 8\nhidden_size = 512\nseq_length = 1_024\n\
                vocab = \"50257\"\nmicro_batch = 4\ntp = 4  # NVLink\nnum_microbatches = 4\n\
                iterations = 10\nsequence-parallel = false\nparam_formula = megatron\n";
    let c: ModelConfig = text.parse().unwrap();
    assert_eq!((c.layers, c.hidden, c.seq_len, c.vocab, c.tp, c.num_microbatches), (8, 512, 1024, 50257, 4, Some(4)));
    assert_eq!(c.param_formula, ParamFormula::Megatron);
    assert_eq!(gb2(theoretical_volumes(&c)[0].total_bytes), 8.05);
    let err = |s: &str| ModelConfig::parse(s).unwrap_err().0;
    assert!(err("layers = 4\nfoo = 1").contains("line 2: unknown key \"foo\""));
    assert!(err("layers 4").contains("expected `key = value`"));
    assert!(err("layers = -4").contains("not a non-negative integer"));
    assert!(err("sequence_parallel = maybe").contains("not a boolean"));
    assert!(err("tp = 0").contains("tp must be at least 1"));
    assert!(err("dp = 2\nmicro_batch = 4\nglobal_batch = 12").contains("not a positive multiple"));
    assert!(err("dp = 6\nep = 4").contains("must divide"));
    assert!(err("param_formula = gpt").contains("not thesis or megatron"));
}

/// The theory for a generated run: the generator's model has fp32 gradients
/// (β_grad = 4), bf16 activations, pipeline tensors of `s·b·h/tp` and
/// Megatron's parameter layout (so Megatron's parameter count).
fn model_of(cfg: &RunConfig) -> ModelConfig {
    let c = ModelConfig {
        layers: cfg.layers as u64,
        hidden: cfg.hidden as u64,
        seq_len: cfg.seq_len as u64,
        vocab: cfg.vocab as u64,
        micro_batch: cfg.micro_batch as u64,
        num_microbatches: Some(cfg.num_microbatches as u64),
        iterations: cfg.iterations as u64,
        bytes_per_element: 2,
        grad_bytes: Some(4),
        tp: cfg.tp as u64,
        pp: cfg.pp as u64,
        dp: cfg.dp as u64,
        pp_scatter_gather: true,
        param_formula: ParamFormula::Megatron,
        ..ModelConfig::default()
    };
    c.validate().unwrap();
    c
}

fn comparisons(cfg: &RunConfig, tag: &str) -> Vec<VolumeComparison> {
    let (t, truth) = load_run(cfg, tag);
    let sizes = ParallelSizes::megatron(cfg.tp as u32, cfg.pp as u32, cfg.dp as u32);
    let class = classify_with_sizes(&t, &sizes).unwrap();
    let cmp = compare(&theoretical_volumes(&model_of(cfg)), &t, &class);
    // Every logged byte is attributed exactly once.
    let logged: u64 = cmp.iter().flat_map(|c| &c.ranks).map(|r| r.logged_bytes).sum();
    assert_eq!(logged, truth.ops.iter().map(|o| o.bytes).sum::<u64>(), "{tag}");
    for c in &cmp {
        println!(
            "{tag}: {:<9} {:?} theory {:?} moved {:.0} logged {:.0} ratio {:?} ({} ranks)",
            c.parallelism.label(),
            c.role,
            c.theory_bytes,
            c.observed_moved_mean,
            c.observed_logged_mean,
            c.ratio,
            c.ranks.len()
        );
    }
    cmp
}

fn get(cmp: &[VolumeComparison], p: Parallelism, role: RankRole) -> &VolumeComparison {
    cmp.iter().find(|c| c.parallelism == p && c.role == role).unwrap_or_else(|| panic!("no {p:?} {role:?}"))
}

#[test]
fn generated_runs_match_the_theory() {
    // A small vocabulary keeps the embedding, which eq. 5.2 spreads evenly
    // over the stages, small against the layers.
    let base = RunConfig { layers: 8, hidden: 1024, vocab: 1024, iterations: 3, num_microbatches: 4, ..RunConfig::default() };
    let cfg = RunConfig { tp: 2, pp: 2, dp: 2, gpus_per_node: 8, ..base.clone() };
    let cmp = comparisons(&cfg, "vol-222");
    // PP: the generator sends one s·b·h/tp bf16 tensor per micro-batch and
    // direction over each boundary, exactly eq. 5.4's accounting.
    let pp = get(&cmp, Parallelism::Pipeline, RankRole::PipelineEdge);
    assert_eq!(pp.ranks.len(), 8);
    assert!((pp.ratio.unwrap() - 1.0).abs() < 1e-12, "{:?}", pp.ratio);
    assert_eq!(pp.ratio, pp.logged_ratio, "Send/Recv move what they log");
    // TP: the 4 AllReduces per layer and micro-batch are eq. 5.5 exactly; on
    // top, each stage has one more activation-sized AllReduce per micro-batch
    // (embedding on the first stage, output-layer gradient on the last) and
    // token-sized broadcasts and cross-entropy reductions (h times smaller):
    // ratio ≈ 1 + 1/(4·L_stage) = 1.0625 here.
    let tp = get(&cmp, Parallelism::Tensor, RankRole::All);
    let l_stage = (cfg.layers / cfg.pp) as f64;
    let r = tp.ratio.unwrap();
    assert!(r > 1.0 + 1.0 / (4.0 * l_stage) && r < 1.0 + 1.0 / (4.0 * l_stage) + 0.01, "TP ratio {r}");
    // Logged bytes of an AllReduce are 1/(2(n−1)/n) = 1× of the moved ones for n = 2.
    assert!((tp.logged_ratio.unwrap() - r).abs() < 0.01);
    // DP: fp32 gradients of the rank's shard, 2(n−1)/n each. The generator
    // holds Megatron's real layout: the position embedding and layer norms
    // are not split by TP and the last stage keeps a copy of the (small)
    // word embedding, so it sits ~2 % above P/(tp·pp) with Megatron's count
    // (eq. 5.2 as printed leaves out (V+s)·(h−1) parameters: ~4 % here).
    let dp = get(&cmp, Parallelism::Data, RankRole::All);
    assert_eq!(dp.ranks.len(), 8);
    let r = dp.ratio.unwrap();
    assert!(r > 1.0 && r < 1.03, "DP ratio {r}");
    assert_eq!(dp.by_kind.len(), 1);
    assert_eq!(dp.by_kind[0].moved_bytes, dp.by_kind[0].logged_bytes as f64, "2(n−1)/n = 1 for n = 2");
    // Types without a model are reported without a ratio.
    assert!(cmp.iter().filter(|c| c.theory_bytes.is_none()).all(|c| c.ratio.is_none()));
    assert!(cmp.iter().any(|c| c.parallelism == Parallelism::Embedding));

    // Four stages: middle stages move twice an edge's volume, both exact.
    let cfg = RunConfig { tp: 2, pp: 4, dp: 1, gpus_per_node: 8, ..base };
    let cmp = comparisons(&cfg, "vol-241");
    let edge = get(&cmp, Parallelism::Pipeline, RankRole::PipelineEdge);
    let mid = get(&cmp, Parallelism::Pipeline, RankRole::PipelineMiddle);
    assert_eq!((edge.ranks.len(), mid.ranks.len()), (4, 4));
    assert!((edge.ratio.unwrap() - 1.0).abs() < 1e-12 && (mid.ratio.unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(mid.observed_moved_mean, 2.0 * edge.observed_moved_mean);
    assert!(cmp.iter().all(|c| c.parallelism != Parallelism::Data), "dp = 1");
}
