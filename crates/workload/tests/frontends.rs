//! The DeepSpeed/FSDP, AxoNN and TED front ends against closed-form volumes, and the
//! `model.conf` keys that choose them (`model = NAME`, `framework = …` and its knobs).
//!
//! Volumes are per rank and iteration, in bytes a rank sends under ring algorithms
//! (`frontend::ring_send_bytes`: AllReduce `2(n−1)/n·S`, AllGather/ReduceScatter `(n−1)/n` of the
//! gathered/reduced buffer, AllToAll `(n−1)/n·S`), the convention of the ZeRO paper (`2Ψ` for
//! DP) and of Singh's eqs. 5.1–5.5.

use commlens_core::OpKind;
use commlens_workload::frontend::{group_call_sequences, rank_volumes, LayerCost};
use commlens_workload::megatron::{Framework, FsdpSharding, ModelConfig};
use commlens_workload::{from_model_conf, GroupKind, Workload};

fn conf(text: &str) -> ModelConfig {
    ModelConfig::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn build(text: &str) -> Workload {
    let w = from_model_conf(&conf(text)).unwrap_or_else(|e| panic!("{text}: {e}"));
    w.validate().unwrap_or_else(|e| panic!("{text}: {e}"));
    // Every member of every group issues the same calls in the same order (else NCCL hangs).
    for (g, seqs) in group_call_sequences(&w).iter().enumerate() {
        assert!(seqs.windows(2).all(|p| p[0] == p[1]), "{}: members of group {} disagree", w.name, w.groups[g].name);
    }
    w
}

/// Send bytes of rank `r` on groups of `kind` with operation `op`, per iteration.
fn sent(w: &Workload, r: u32, kind: GroupKind, op: OpKind) -> f64 {
    rank_volumes(w, r).unwrap().get(&(kind, op)).map_or(0.0, |v| v.send_bytes)
}

fn assert_close(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{what}: got {got}, closed form {want}");
}

// ---------------------------------------------------------------- model.conf keys

#[test]
fn named_model_fills_the_shape_and_explicit_keys_override_it_anywhere() {
    let c = conf("seq_len = 1024\nmodel = llama-7b\nlayers = 4\n");
    assert_eq!((c.layers, c.hidden, c.ffn_hidden, c.heads, c.seq_len, c.vocab), (4, 4096, Some(11008), Some(32), 1024, 32000));
    assert!(c.gated_mlp && !c.tied_embeddings);
    assert_eq!(c.framework, Framework::Megatron);
    // A named model counts its own parameters (SwiGLU, untied embeddings).
    let full = conf("model = llama-7b");
    let spec = commlens_workload::models::model_by_name("llama-7b").unwrap();
    assert_eq!(full.param_count(), spec.params());
    // MoE shapes bring experts, top-k and MoE layers.
    let m = conf("model = mixtral-8x7b");
    assert_eq!((m.experts, m.top_k, m.moe_layers), (Some(8), 2, 32));
    // A named model with a non-4h FFN still builds a Megatron program (FLOPs scaled).
    let w = from_model_conf(&conf("model = llama-7b\nlayers = 2\ntp = 2\ndp = 2\nnum_microbatches = 1")).unwrap();
    assert_eq!(w.world, 4);
}

#[test]
fn framework_keys_and_their_errors_name_the_key() {
    let c = conf("model = gpt3-6.7b\nframework = deepspeed\nzero_stage = 3\ndp = 8\nreduce_bucket_size = 5e8\nprefetch_bucket_size = 1.5e7");
    assert_eq!((c.framework, c.zero_stage, c.reduce_bucket_size, c.prefetch_bucket_size), (Framework::DeepSpeed, 3, 500_000_000, 15_000_000));
    let f = conf("framework = fsdp\nfsdp_sharding = hybrid\nfsdp_shard_size = 4\ndp = 8\nlayers = 2\nhidden = 64");
    assert_eq!((f.fsdp_sharding, f.fsdp_shard_size), (FsdpSharding::Hybrid, Some(4)));
    let a = conf("framework = axonn\ngx = 2\ngy = 4\ngz = 2\ngdata = 4\nlayers = 2\nhidden = 64");
    assert_eq!((a.gx, a.gy, a.gz, a.dp, a.world()), (2, 4, 2, 4, 64));
    let err = |t: &str| ModelConfig::parse(t).unwrap_err().0;
    let e = err("model = gpt7");
    assert!(e.contains("model") && e.contains("gpt3-175b"), "{e}");
    let e = err("gx = 2\nlayers = 2");
    assert!(e.contains("gx") && e.contains("framework = axonn"), "{e}");
    let e = err("framework = fsdp\nzero_stage = 2");
    assert!(e.contains("zero_stage") && e.contains("deepspeed"), "{e}");
    let e = err("framework = horovod");
    assert!(e.contains("framework") && e.contains("horovod"), "{e}");
    let e = err("framework = deepspeed\nzero_stage = 4");
    assert!(e.contains("zero_stage"), "{e}");
    let e = err("framework = deepspeed\ntp = 2\ndp = 2");
    assert!(e.contains("tp = 2") && e.contains("deepspeed"), "{e}");
    let e = err("framework = fsdp\nfsdp_sharding = hybrid\ndp = 6\nfsdp_shard_size = 4");
    assert!(e.contains("fsdp_shard_size"), "{e}");
    let e = err("framework = ted\ntp = 2\ndp = 4\nep = 4\nlayers = 4");
    assert!(e.contains("moe_layers"), "{e}");
    let e = err("framework = deepspeed\nreduce_bucket_size = lots");
    assert!(e.contains("reduce_bucket_size") && e.contains("line 2"), "{e}");
}

// ---------------------------------------------------------------- DeepSpeed ZeRO and FSDP

/// A small GPT: h = 256, 4 layers, tied vocabulary of 1024. `P_l = 12h² + 4h = 787,456`,
/// root `P_r = V·h + 2h = 262,656`, `φ = 4·P_l + P_r = 3,412,480`, divisible by 4 and 8, so
/// no shard is padded.
const SMALL: &str = "layers = 4\nhidden = 256\nseq_len = 128\nvocab = 1024\nmicro_batch = 1\n";
const P_L: f64 = 787_456.0;
const P_R: f64 = 262_656.0;
const PHI: f64 = 4.0 * P_L + P_R;
const BF16: f64 = 2.0;

#[test]
fn zero_1_and_2_move_2phi_and_zero_2_reduces_every_microbatch() {
    let n = 4.0;
    for stage in [1, 2] {
        for m in [1, 3] {
            let w = build(&format!("{SMALL}framework = deepspeed\nzero_stage = {stage}\ndp = 4\nnum_microbatches = {m}"));
            // Reduce-scatter of the gradients, all-gather of the updated parameters: each
            // (n−1)/n·φ elements, so 2φ(n−1)/n per iteration as plain DP's AllReduce (ZeRO §7).
            let rs = sent(&w, 0, GroupKind::Dp, OpKind::ReduceScatter);
            let ag = sent(&w, 0, GroupKind::Dp, OpKind::AllGather);
            let reductions = if stage == 2 { m as f64 } else { 1.0 };
            assert_close(rs, reductions * (n - 1.0) / n * PHI * BF16, &format!("ZeRO-{stage} m={m} reduce-scatter"));
            assert_close(ag, (n - 1.0) / n * PHI * BF16, &format!("ZeRO-{stage} m={m} all-gather"));
            assert_eq!(sent(&w, 0, GroupKind::Dp, OpKind::AllReduce), 2.0 * 3.0 / 4.0 * 4.0, "only the fp32 grad norm");
        }
    }
    // Stage 0: the gradient AllReduce of φ elements, 2φ(n−1)/n.
    let w = build(&format!("{SMALL}framework = deepspeed\nzero_stage = 0\ndp = 4\nnum_microbatches = 1"));
    assert_close(sent(&w, 0, GroupKind::Dp, OpKind::AllReduce) - 6.0, 2.0 * (n - 1.0) / n * PHI * BF16, "ZeRO-0 all-reduce");
    // Smaller buckets split the same bytes over more calls.
    let w = build(&format!("{SMALL}framework = deepspeed\nzero_stage = 2\ndp = 4\nnum_microbatches = 1\nreduce_bucket_size = 1e6\nallgather_bucket_size = 4e5"));
    let v = rank_volumes(&w, 0).unwrap();
    let rs = v[&(GroupKind::Dp, OpKind::ReduceScatter)];
    let ag = v[&(GroupKind::Dp, OpKind::AllGather)];
    assert_close(rs.send_bytes, 3.0 / 4.0 * PHI * BF16, "bucketed reduce-scatter");
    // Buckets close when a layer's gradients push them past 1e6: layers of 787,456 make
    // buckets of two layers (head+2 layers, 2 layers, embedding).
    assert_eq!(rs.calls, 3, "{rs:?}");
    assert_eq!(ag.calls, (PHI / 4.0 / 100_000.0).ceil() as u64, "all-gather chunks of 4e5/n per rank");
}

#[test]
fn zero_3_and_fsdp_full_shard_move_3phi() {
    let n = 8.0;
    // ZeRO-3 without the persistence threshold: every layer gathered for forward and again
    // for backward, gradients reduce-scattered: 3·L·P_l, plus the root gathered once (kept
    // from forward to backward) and reduced once: (3·L·P_l + 2·P_r)·(n−1)/n.
    let want = (3.0 * 4.0 * P_L + 2.0 * P_R) * (n - 1.0) / n * BF16;
    for text in [
        "framework = deepspeed\nzero_stage = 3\nparam_persistence_threshold = 0",
        "framework = fsdp\nfsdp_sharding = full",
    ] {
        let w = build(&format!("{SMALL}{text}\ndp = 8\nnum_microbatches = 1"));
        let total = sent(&w, 0, GroupKind::Dp, OpKind::AllGather) + sent(&w, 0, GroupKind::Dp, OpKind::ReduceScatter);
        assert_close(total, want, text);
    }
    // DeepSpeed's default threshold (1e5) keeps the layer norms (4h per layer, 2h final) whole:
    // they are not gathered, but still reduced.
    let w = build(&format!("{SMALL}framework = deepspeed\nzero_stage = 3\ndp = 8\nnum_microbatches = 1"));
    let ag = sent(&w, 0, GroupKind::Dp, OpKind::AllGather);
    assert_close(ag, (2.0 * 4.0 * (P_L - 4.0 * 256.0) + (P_R - 512.0)) * (n - 1.0) / n * BF16, "ZeRO-3 gathers without persistent tensors");
    // FSDP SHARD_GRAD_OP keeps units gathered from forward to backward: 2φ.
    let w = build(&format!("{SMALL}framework = fsdp\nfsdp_sharding = grad_op\ndp = 8\nnum_microbatches = 2"));
    let total = sent(&w, 0, GroupKind::Dp, OpKind::AllGather) + sent(&w, 0, GroupKind::Dp, OpKind::ReduceScatter);
    assert_close(total, 2.0 * 2.0 * PHI * (n - 1.0) / n * BF16, "SHARD_GRAD_OP, two microbatches");
}

/// ZeRO paper (Rajbhandari et al. 2020, §7.2): stage 3 moves 3Ψ against DP's 2Ψ, 1.5×. With
/// our root (embedding gathered once per microbatch), the ratio is `1.5 − P_r/(2φ)`: 1.49 for
/// GPT-3 13B.
#[test]
fn zero_3_is_one_and_a_half_times_zero_1_for_gpt3_13b() {
    let base = "model = gpt3-13b\nframework = deepspeed\ndp = 8\nnum_microbatches = 1\nparam_persistence_threshold = 0\n";
    let total = |stage: u32| {
        let w = build(&format!("{base}zero_stage = {stage}"));
        sent(&w, 0, GroupKind::Dp, OpKind::AllGather) + sent(&w, 0, GroupKind::Dp, OpKind::ReduceScatter)
    };
    let ratio = total(3) / total(1);
    assert!((ratio - 1.5).abs() < 0.015, "ZeRO-3 / ZeRO-1 = {ratio}");
    eprintln!("ZeRO-3 / ZeRO-1 communication for gpt3-13b on 8 ranks: {ratio:.4} (paper: 1.5)");
}

#[test]
fn hybrid_shard_reduces_inside_the_node_and_all_reduces_across_replicas() {
    let w = build(&format!("{SMALL}framework = fsdp\nfsdp_sharding = hybrid\nfsdp_shard_size = 4\ndp = 8\nnum_microbatches = 1"));
    let size = |kind: GroupKind| w.group(w.group_of(5, commlens_workload::GroupSel::of(kind)).unwrap()).ranks.clone();
    assert_eq!(size(GroupKind::Dp), vec![4, 5, 6, 7]);
    assert_eq!(size(GroupKind::DpReplica), vec![1, 5]);
    let s = 4.0;
    let want_shard = (3.0 * 4.0 * P_L + 2.0 * P_R) * (s - 1.0) / s * BF16;
    let got = sent(&w, 5, GroupKind::Dp, OpKind::AllGather) + sent(&w, 5, GroupKind::Dp, OpKind::ReduceScatter);
    assert_close(got, want_shard, "HSDP within the shard group");
    // Each gradient shard φ/s all-reduced over 2 replicas: 2·(1/2)·φ/s.
    assert_close(sent(&w, 5, GroupKind::DpReplica, OpKind::AllReduce), PHI / s * BF16, "HSDP across replicas");
}

#[test]
fn sharded_programs_prefetch_on_their_own_streams() {
    use commlens_workload::{Stream, Work};
    let w = build(&format!("{SMALL}framework = fsdp\ndp = 4\nnum_microbatches = 1"));
    let p = w.program_of(0);
    let gathers: Vec<usize> = (0..p.tasks.len())
        .filter(|&i| matches!(&p.tasks[i].work, Work::Coll(c) if c.kind == OpKind::AllGather))
        .collect();
    assert!(gathers.iter().all(|&i| p.tasks[i].stream == Stream::Comm(0)));
    // The third layer's gather waits for the first layer to finish (two in flight), not more.
    let layer_gathers: Vec<usize> = gathers[1..].to_vec();
    assert!(p.tasks[layer_gathers[0]].deps.is_empty() && p.tasks[layer_gathers[1]].deps.is_empty());
    assert_eq!(p.tasks[layer_gathers[2]].deps.len(), 1);
    let d = p.tasks[layer_gathers[2]].deps[0] as usize;
    assert!(matches!(&p.tasks[d].work, Work::Compute(c) if c.name == "mlp fwd"));
    // Every compute of a layer waits for its gather.
    let first_attn = (0..p.tasks.len()).find(|&i| matches!(&p.tasks[i].work, Work::Compute(c) if c.name == "attention fwd")).unwrap();
    assert_eq!(p.tasks[first_attn].deps, vec![layer_gathers[0] as u32]);
}

// ---------------------------------------------------------------- AxoNN

#[test]
fn axonn_groups_follow_the_dissertations_hierarchy() {
    let w = build("framework = axonn\ngx = 2\ngy = 2\ngz = 2\nlayers = 1\nhidden = 64\nseq_len = 16\nvocab = 128");
    let of = |kind: GroupKind| {
        let mut v: Vec<Vec<u32>> = w.groups.iter().filter(|g| g.kind == kind).map(|g| g.ranks.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(of(GroupKind::TensorX), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    assert_eq!(of(GroupKind::TensorY), vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]);
    assert_eq!(of(GroupKind::TensorZ), vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
}

/// Eqs. 5.1–5.5 (Singh 2025, §5.2), summed over the four FC layers of each block (QKV h×3h,
/// projection h×h transposed, fc1 h×4h, fc2 4h×h transposed; transposed layers swap G_x and
/// G_y), times β = 2 bytes: the program's per-rank bytes on each group equal them term by term,
/// and their sum is t_comm·β (eq. 5.6).
#[test]
fn axonn_volumes_are_equations_5_1_to_5_6() {
    for (gx, gy, gz, gd) in [(2, 2, 2, 2), (4, 1, 2, 2), (1, 2, 4, 1), (2, 4, 1, 2)] {
        let (h, layers, rows) = (256.0, 2.0, 2.0 * 128.0);
        let w = build(&format!(
            "framework = axonn\ngx = {gx}\ngy = {gy}\ngz = {gz}\ndp = {gd}\nlayers = 2\nhidden = 256\nseq_len = 128\nmicro_batch = 2\nnum_microbatches = 1\nvocab = 1024"
        ));
        let (gx, gy, gz, gd) = (gx as f64, gy as f64, gz as f64, gd as f64);
        let (mut ag, mut rs, mut ar_x, mut ar_y, mut ar_d) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (k, n, transposed) in [(h, 3.0 * h, false), (h, h, true), (h, 4.0 * h, false), (4.0 * h, h, true)] {
            let (x, y) = if transposed { (gy, gx) } else { (gx, gy) };
            ag += (gz - 1.0) * k * n / (x * y * gz); // 5.1
            rs += (gz - 1.0) / gz * k * n / (x * y); // 5.2
            let out = 2.0 * (y - 1.0) / y * rows * n / (gz * x); // 5.3: AR over Y (X when transposed)
            let inp = 2.0 * (x - 1.0) / x * rows * k / (gz * y); // 5.4: AR over X (Y when transposed)
            if transposed {
                ar_x += out;
                ar_y += inp;
            } else {
                ar_y += out;
                ar_x += inp;
            }
            ar_d += 2.0 * (gd - 1.0) / gd * k * n / (x * y * gz); // 5.5
        }
        let b = 2.0 * layers;
        let what = format!("gx{gx} gy{gy} gz{gz} gdata{gd}");
        assert_close(sent(&w, 0, GroupKind::TensorZ, OpKind::AllGather), b * ag, &format!("{what} eq 5.1"));
        assert_close(sent(&w, 0, GroupKind::TensorZ, OpKind::ReduceScatter), b * rs, &format!("{what} eq 5.2"));
        assert_close(sent(&w, 0, GroupKind::TensorY, OpKind::AllReduce), b * ar_y, &format!("{what} eqs 5.3/5.4 on Y"));
        assert_close(sent(&w, 0, GroupKind::TensorX, OpKind::AllReduce), b * ar_x, &format!("{what} eqs 5.3/5.4 on X"));
        assert_close(sent(&w, 0, GroupKind::Dp, OpKind::AllReduce), b * ar_d, &format!("{what} eq 5.5"));
        let total: f64 = rank_volumes(&w, 0).unwrap().values().map(|v| v.send_bytes).sum();
        assert_close(total, b * (ag + rs + ar_x + ar_y + ar_d), &format!("{what} eq 5.6"));
    }
}

// ---------------------------------------------------------------- TED

/// TED with G_tensor = 2, G_expert = 4, G_data = 8 (16 ranks), 8 experts, top-2, every other
/// layer MoE. Per MoE layer and microbatch: two all-to-alls forward, two backward, each of
/// `s·b·k·h` elements (k·h·β bytes per token), divided by G_tensor with duplicate token
/// dropping (ch. 7: "shrinking all-to-all messages by G_tensor"), which costs one TP
/// all-gather of the same size per all-to-all.
#[test]
fn ted_all_to_all_is_k_h_beta_per_token_and_dtd_divides_it_by_tp() {
    let base = "framework = ted\ntp = 2\nep = 4\ndp = 8\nexperts = 8\ntop_k = 2\nlayers = 4\nmoe_layers = 2\nhidden = 256\nseq_len = 128\nvocab = 1024\nmicro_batch = 1\nnum_microbatches = 1\n";
    let (tokens, k, h, tp, moe) = (128.0, 2.0, 256.0, 2.0, 2.0);
    let per_token = k * h * BF16;
    let mut a2a = [0.0; 2];
    for (i, dtd) in [true, false].into_iter().enumerate() {
        let w = build(&format!("{base}drop_duplicate_tokens = {dtd}"));
        assert_eq!(w.world, 16);
        let v = rank_volumes(&w, 3).unwrap();
        let calls = v[&(GroupKind::Ep, OpKind::AllToAll)];
        assert_eq!(calls.calls, 4 * moe as u64);
        let buffer_bytes = calls.elements as f64 * BF16 / calls.calls as f64;
        let want = if dtd { per_token / tp } else { per_token };
        assert_close(buffer_bytes / tokens, want, &format!("all-to-all bytes per token, dtd {dtd}"));
        a2a[i] = calls.send_bytes;
        let tp_gathers = v.get(&(GroupKind::Tp, OpKind::AllGather)).map_or(0, |v| v.calls);
        assert_eq!(tp_gathers, if dtd { 4 * moe as u64 } else { 0 });
        // Groups: TP pairs, EP of 4 replicas at stride tp, expert DP of dp/ep = 2 at stride tp·ep.
        let g = |kind| w.group(w.group_of(3, commlens_workload::GroupSel::of(kind)).unwrap()).ranks.clone();
        assert_eq!(g(GroupKind::Tp), vec![2, 3]);
        assert_eq!(g(GroupKind::Ep), vec![1, 3, 5, 7]);
        assert_eq!(g(GroupKind::DpEp), vec![3, 11]);
        assert_eq!(g(GroupKind::Dp).len(), 8);
    }
    assert_close(a2a[1] / a2a[0], tp, "DTD shrinks the all-to-all by G_tensor");
    // ZeRO-1 on both data groups: non-expert gradients over DP (8), expert over DP_EP (2).
    let w = build(&format!("{base}drop_duplicate_tokens = true"));
    let c = LayerCost::of(&conf(base).shape());
    let expert = moe * (8.0 / 4.0) * c.mlp_params / tp;
    let v = rank_volumes(&w, 0).unwrap();
    assert_close(v[&(GroupKind::DpEp, OpKind::ReduceScatter)].send_bytes, (2.0 - 1.0) / 2.0 * expert * BF16, "expert gradients over DP_EP");
    assert_close(v[&(GroupKind::DpEp, OpKind::AllGather)].send_bytes, (2.0 - 1.0) / 2.0 * expert * BF16, "expert parameters over DP_EP");
    let dense = 4.0 * c.attn_params + 2.0 * c.mlp_params + 1024.0 * h;
    let replicated = 4.0 * c.norm_params + 2.0 * h + moe * h * 8.0;
    let non_expert = dense / tp + replicated;
    assert_close(v[&(GroupKind::Dp, OpKind::ReduceScatter)].send_bytes, 7.0 / 8.0 * non_expert * BF16, "non-expert gradients over DP");
}

/// Algorithm 3's special cases (§5.1.1): "X + transpose = Megatron-LM" — with only G_x > 1
/// every block all-reduces `s·b·h` twice forward (after the transposed layers) and twice
/// backward (after the others' input gradients), Megatron's TP pattern; our Megatron program
/// for tp = 2 has the same calls plus the embedding's and the output layer's. "Z only =
/// FSDP": with only G_z > 1 the layers' weights are gathered once and their gradients
/// reduce-scattered once, `2·(n−1)/n` of the FC parameters (AxoNN keeps the gathered weights
/// for backward: SHARD_GRAD_OP's volume, not FULL_SHARD's).
#[test]
fn axonn_special_cases_are_megatron_tp_and_fsdp() {
    let shape = "layers = 2\nhidden = 256\nseq_len = 128\nmicro_batch = 2\nnum_microbatches = 1\nvocab = 1024\n";
    let act = 2 * 128 * 256;
    let w = build(&format!("{shape}framework = axonn\ngx = 2"));
    let v = rank_volumes(&w, 0).unwrap();
    let x = v[&(GroupKind::TensorX, OpKind::AllReduce)];
    assert_eq!((x.calls, x.elements), (4 * 2, 4 * 2 * act));
    assert_eq!(v.len(), 1, "only X all-reduces: {v:?}");
    let m = commlens_workload::megatron::workload(&conf(&format!("{shape}tp = 2")).to_megatron().unwrap()).unwrap();
    let megatron_act_all_reduces = m
        .program_of(0)
        .tasks
        .iter()
        .filter(|t| matches!(&t.work, commlens_workload::Work::Coll(c) if c.kind == OpKind::AllReduce && c.count == act && c.group.kind == GroupKind::Tp))
        .count() as u64;
    let iterations = m.iterations as u64;
    assert_eq!(megatron_act_all_reduces, iterations * (x.calls + 2), "Megatron: the layers' plus embedding and output layer");
    let n = 4.0;
    let w = build(&format!("{shape}framework = axonn\ngz = 4"));
    let fc: f64 = 2.0 * (3.0 + 1.0 + 4.0 + 4.0) * 256.0 * 256.0;
    let total: f64 = rank_volumes(&w, 0).unwrap().values().map(|v| v.send_bytes).sum();
    assert_close(total, 2.0 * (n - 1.0) / n * fc * BF16, "Z only");
}
