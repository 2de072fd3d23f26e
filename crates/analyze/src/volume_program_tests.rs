//! The closed-form volumes (thesis eqs. 5.3–5.6) against the shared Megatron program's own
//! byte sums (`commlens_workload::megatron::volumes`), term by term, over many configurations.
//!
//! The program is what `commlens-synth` renders and the simulator runs, so these tests pin the
//! formulas to it: where a formula models a term (PP's boundary tensors, TP's per-layer
//! reductions, DP's gradient reduction, EP's token exchange) the program's sum must equal it
//! up to float rounding (1e-12 relative); what the thesis leaves out (batch broadcasts,
//! embedding and loss reductions, sequence parallelism's re-gathered input, padding of the
//! distributed optimizer's shards, a rank's tokens to itself) is named and added in closed
//! form, so nothing is compared loosely.

use super::*;
use commlens_workload::megatron::{self, params, volumes, Config, MoeDispatcher, StageRole, Volumes};
use commlens_workload::GroupKind;

fn close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0), "{what}: program {a} vs formula {b}");
}

/// The volume model's configuration of a program: its bf16 activations, fp32 gradients, bf16
/// parameter gathers, pipeline tensors split over TP; the given parameter count.
fn model_of(c: &Config, params: u64) -> ModelConfig {
    ModelConfig {
        layers: c.layers as u64,
        hidden: c.hidden as u64,
        seq_len: c.seq_len as u64,
        vocab: c.vocab as u64,
        micro_batch: c.micro_batch as u64,
        num_microbatches: Some(c.num_microbatches as u64),
        iterations: c.iterations as u64,
        bytes_per_element: 2,
        grad_bytes: Some(4),
        param_bytes: Some(2),
        tp: c.tp as u64,
        pp: c.pp as u64,
        dp: c.dp as u64,
        ep: c.ep as u64,
        sequence_parallel: c.sequence_parallel,
        distributed_optimizer: c.distributed_optimizer,
        pp_scatter_gather: true,
        params: Some(params),
        moe_layers: (0..c.layers).filter(|&l| c.is_moe_layer(l)).count() as u64,
        top_k: c.moe_topk as u64,
        ..ModelConfig::default()
    }
}

fn row(rows: &[VolumeRow], p: Parallelism, role: RankRole) -> f64 {
    rows.iter().find(|r| r.parallelism == p && r.role == role).map_or(0.0, |r| r.total_bytes)
}

fn moved(v: &Volumes, k: GroupKind) -> f64 {
    v.by_group.get(&k).map_or(0.0, |g| g.moved_bytes)
}

fn configs() -> Vec<Config> {
    let mut out = Vec::new();
    for (tp, pp, dp) in [(1, 2, 1), (2, 1, 2), (2, 2, 1), (2, 2, 2), (4, 2, 2), (1, 4, 2), (2, 3, 1), (8, 1, 1), (1, 1, 4), (2, 4, 4)] {
        for sp in [false, true] {
            for distopt in [false, true] {
                if sp && tp == 1 {
                    continue;
                }
                out.push(Config {
                    tp,
                    pp,
                    dp,
                    layers: 2 * pp * (1 + tp % 3),
                    hidden: 256 * (1 + pp % 2),
                    seq_len: 128,
                    micro_batch: 1 + dp % 2,
                    num_microbatches: 2 * pp + 1,
                    iterations: 2,
                    vocab: 1024,
                    sequence_parallel: sp,
                    distributed_optimizer: distopt,
                    ..Config::default()
                });
            }
        }
    }
    out
}

#[test]
fn pipeline_formula_is_the_programs_p2p_exactly() {
    for c in configs().into_iter().filter(|c| c.pp > 1) {
        let rows = theoretical_volumes(&model_of(&c, 1));
        for v in volumes(&c).unwrap() {
            let role = if v.role == StageRole::Middle { RankRole::PipelineMiddle } else { RankRole::PipelineEdge };
            // Send and Recv move what they log: no rounding at all.
            assert_eq!(moved(&v, GroupKind::Pp), row(&rows, Parallelism::Pipeline, role), "{c:?} stage {}", v.stage);
        }
    }
}

#[test]
fn tensor_formula_is_the_programs_layer_reductions() {
    for c in configs().into_iter().filter(|c| c.tp > 1) {
        let rows = theoretical_volumes(&model_of(&c, 1));
        let n = c.tp as f64;
        let ar = |bytes: f64| bytes * (2.0 * (n - 1.0) / n);
        // AllGather/ReduceScatter of one rank's 1/tp share of `bytes`.
        let ag = |bytes: f64| bytes * ((n - 1.0) / n);
        let (act, tok) = ((c.seq_len * c.micro_batch * c.hidden) as f64 * 2.0, (c.seq_len * c.micro_batch) as f64);
        let per_mb_iters = (c.num_microbatches * c.iterations) as f64;
        for v in volumes(&c).unwrap() {
            let (first, last) = (v.stage == 0, v.stage + 1 == c.pp);
            let formula = row(&rows, Parallelism::Tensor, RankRole::All);
            // Eq. 5.5 counts 4 AllReduces of b·s·h per layer; SP's backward gathers the
            // layer input again for the weight gradient: 10 gathers/scatters = 10/8 of it.
            let layers = if c.sequence_parallel { formula * 10.0 / 8.0 } else { formula };
            let mut extra = 0.0;
            // Batch broadcasts: tokens and positions (int64) first, labels (int64) and mask (fp32) last.
            extra += tok * (if first { 16.0 } else { 0.0 } + if last { 12.0 } else { 0.0 });
            // Embedding output and output-layer input gradient (and under SP its gather).
            let edge_acts = first as u8 as f64 + last as u8 as f64;
            extra += if c.sequence_parallel {
                // embedding RS + bwd AG; output layer fwd AG + bwd AG + RS
                ag(act) * (2.0 * first as u8 as f64 + 3.0 * last as u8 as f64)
            } else {
                ar(act) * edge_acts
            };
            // Vocab-parallel cross entropy: 3 fp32 AllReduces of s·b.
            if last {
                extra += 3.0 * ar(tok * 4.0);
            }
            let mut program_total = layers + extra * per_mb_iters;
            if c.sequence_parallel {
                program_total += ar(params::layernorm_params(&c, v.stage) as f64 * 4.0) * c.iterations as f64;
            }
            close(moved(&v, GroupKind::Tp), program_total, &format!("TP {c:?} stage {}", v.stage));
        }
    }
}

#[test]
fn data_formula_is_the_programs_gradient_reduction() {
    for c in configs().into_iter().filter(|c| c.dp > 1) {
        let vols = volumes(&c).unwrap();
        for v in &vols {
            // Eq. 5.3 with P/(tp·pp) = this stage's parameters (padded to the distributed
            // optimizer's shards, which is what its ReduceScatter and AllGather move).
            let n = c.dp as u64;
            let buckets = params::grad_buckets(&c, v.stage);
            let stage_params: u64 = if c.distributed_optimizer {
                buckets.iter().map(|&b| params::shard(n, b) * n).sum()
            } else {
                buckets.iter().sum()
            };
            let rows = theoretical_volumes(&model_of(&c, stage_params * (c.tp * c.pp) as u64));
            close(moved(v, GroupKind::Dp), row(&rows, Parallelism::Data, RankRole::All), &format!("DP {c:?} stage {}", v.stage));
        }
    }
}

#[test]
fn expert_formula_is_the_off_rank_share_of_the_programs_tokens() {
    for (tp, pp, dp, ep, freq) in [(2, 1, 4, 2, 1), (2, 2, 4, 4, 2), (4, 1, 2, 2, 1), (2, 2, 8, 4, 1)] {
        let c = Config {
            tp,
            pp,
            dp,
            ep,
            layers: 4 * pp,
            hidden: 256,
            seq_len: 128,
            num_microbatches: 3,
            iterations: 2,
            vocab: 1024,
            num_experts: 2 * ep,
            moe_layer_freq: freq,
            moe_topk: 2,
            // Eq. 5.6's /tp is the sequence-parallel token shard.
            sequence_parallel: true,
            moe_dispatcher: MoeDispatcher::AllToAll,
            ..Config::default()
        };
        let rows = theoretical_volumes(&model_of(&c, 1));
        let formula = row(&rows, Parallelism::Expert, RankRole::All);
        let w = megatron::workload(&c).unwrap();
        assert!(w.validate().is_ok());
        // Every Send of the program, a rank's copies to itself included. Each MoE layer sends
        // each of its tokens' k copies forward (dispatch) and their gradients back (combine
        // backward): the rank's routing row. The combine and the dispatch's backward return
        // what others routed to it: its column, uneven per rank but summing over the EP group
        // to the same total. So over all ranks: 4 exchanges of all k copies per layer.
        let vols = volumes(&c).unwrap();
        let moe_layers_stage = params::stage_layers(&c, 0).iter().filter(|&&l| c.is_moe_layer(l)).count();
        let tokens = (c.seq_len * c.micro_batch / c.tp * c.moe_topk) as f64;
        let all = 4.0 * tokens * c.hidden as f64 * 2.0 * moe_layers_stage as f64 * (c.num_microbatches * c.iterations) as f64;
        let sends: f64 = vols
            .iter()
            .map(|v| v.by_group[&GroupKind::Ep].by_kind[&commlens_core::OpKind::Send].1 as f64 * v.ranks.len() as f64)
            .sum();
        assert_eq!(sends, all * c.world() as f64, "{c:?}");
        // Eq. 5.6 assumes uniform routing: 1 − 1/n of the copies leave the rank.
        close(all * (1.0 - 1.0 / c.ep as f64), formula, &format!("EP {c:?}"));
    }
}
