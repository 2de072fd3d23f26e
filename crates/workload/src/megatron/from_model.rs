//! A Megatron job from a named model architecture and a parallel layout.
//!
//! Owns [`Layout`] (TP, PP, DP, micro and global batch, sequence parallelism, distributed
//! optimizer, overlapped gradient reduction), [`ModelJob`] (the [`Config`] plus the
//! [`ProgramOptions`] that carry what `Config` cannot express: the layer shape for the FLOPs
//! and the overlap), [`Config::from_model`], and a per-GPU [`MemoryEstimate`] for excluding
//! layouts that cannot fit.
//!
//! Mapping: `layers`, `hidden`, `seq_len` from the [`ModelSpec`]; the vocabulary padded to a
//! multiple of `128 · tp` (Megatron's `--make-vocab-size-divisible-by 128`); `num_microbatches
//! = global_batch / (micro_batch · dp)`. The program's communication is Megatron's for a GPT
//! layer (TP collectives of `s·b·h`, DP buckets of the GPT parameter tensors); a gated or wider
//! MLP or grouped-query attention changes only the compute FLOPs ([`super::LayerShape`]), so
//! for LLaMA-style models the DP gradient bytes are those of a GPT layer of the same hidden
//! size (`12h²` per layer). MoE models are refused here (use a model file).
//!
//! Memory (per GPU, the heaviest stage: the first, which holds `min(pp, m)` microbatches in
//! flight under 1F1B, or the last when its output layer outweighs that):
//! - model and optimizer state: parameters of the stage's shard (the [`ModelSpec`]'s own
//!   count, so a SwiGLU MLP counts fully) × bytes per parameter: 18 without the distributed
//!   optimizer (bf16 weight 2, fp32 main gradient 4, fp32 master weight 4, Adam moments 8),
//!   `6 + 12/dp` with it (master weights and moments sharded over DP);
//! - activations: Korthikanti et al. 2022 (Table 2), per layer and microbatch in flight,
//!   `34·s·b·h/tp` bytes with sequence parallelism and selective recomputation, or
//!   `s·b·h·(10 + 24/tp)` bytes with selective recomputation alone;
//! - not counted: embedding/logits buffers, NCCL and allocator overhead, CUDA context.

use super::{Config, ConfigError, LayerShape, ProgramOptions};
use crate::models::ModelSpec;
use crate::Workload;

/// How a model is laid out on the GPUs and batched.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Layout {
    pub tp: usize,
    pub pp: usize,
    pub dp: usize,
    /// Sequences per microbatch.
    pub micro_batch: usize,
    /// Sequences per iteration over all data replicas.
    pub global_batch: usize,
    /// `--sequence-parallel`.
    pub sequence_parallel: bool,
    /// `--use-distributed-optimizer` (ZeRO-1).
    pub distributed_optimizer: bool,
    /// `--overlap-grad-reduce` ([`ProgramOptions::overlap_grad_reduce`]).
    pub overlap_grad_reduce: bool,
    pub iterations: usize,
}

impl Layout {
    /// TP × PP × DP with micro batch `mbs` and global batch `gbs`; no sequence parallelism,
    /// no distributed optimizer, no overlap, one iteration.
    pub fn new(tp: usize, pp: usize, dp: usize, mbs: usize, gbs: usize) -> Layout {
        Layout {
            tp,
            pp,
            dp,
            micro_batch: mbs,
            global_batch: gbs,
            sequence_parallel: false,
            distributed_optimizer: false,
            overlap_grad_reduce: false,
            iterations: 1,
        }
    }

    pub fn world(&self) -> usize {
        self.tp * self.pp * self.dp
    }
}

/// A configuration built from a named model, with the program options it needs.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelJob {
    pub model: ModelSpec,
    pub layout: Layout,
    pub config: Config,
    pub options: ProgramOptions,
}

/// Per-GPU memory of the heaviest pipeline stage, bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// Parameters held by one GPU of that stage.
    pub params: f64,
    /// Weights, gradients and optimizer state.
    pub states: f64,
    pub activations: f64,
}

impl MemoryEstimate {
    pub fn total(&self) -> f64 {
        self.states + self.activations
    }

    /// Whether the estimate fits `gib` GiB of device memory.
    pub fn fits(&self, gib: f64) -> bool {
        self.total() <= gib * (1u64 << 30) as f64
    }
}

impl Config {
    /// The Megatron configuration of `model` laid out as `layout` (see the module notes).
    pub fn from_model(model: &ModelSpec, layout: &Layout) -> Result<Config, ConfigError> {
        ModelJob::new(model, layout).map(|j| j.config)
    }
}

impl ModelJob {
    pub fn new(model: &ModelSpec, layout: &Layout) -> Result<ModelJob, ConfigError> {
        let l = layout;
        if model.experts > 1 {
            return Err(ConfigError(format!("{}: MoE models need a model file, not a named shape", model.name)));
        }
        if l.tp == 0 || l.pp == 0 || l.dp == 0 || l.micro_batch == 0 {
            return Err(ConfigError("tp, pp, dp and micro_batch must be at least 1".into()));
        }
        if model.heads as usize % l.tp != 0 || model.kv_heads as usize % l.tp != 0 {
            return Err(ConfigError(format!("tp {} must divide the {} attention heads of {}", l.tp, model.heads, model.name)));
        }
        let per_step = l.micro_batch * l.dp;
        if l.global_batch == 0 || l.global_batch % per_step != 0 {
            return Err(ConfigError(format!(
                "global batch {} must be a positive multiple of micro_batch · dp = {per_step}",
                l.global_batch
            )));
        }
        let align = 128 * l.tp;
        let vocab = (model.vocab as usize).div_ceil(align) * align;
        let config = Config {
            tp: l.tp,
            pp: l.pp,
            dp: l.dp,
            layers: model.layers as usize,
            hidden: model.hidden as usize,
            seq_len: model.seq_len as usize,
            micro_batch: l.micro_batch,
            num_microbatches: l.global_batch / per_step,
            iterations: l.iterations.max(1),
            vocab,
            sequence_parallel: l.sequence_parallel,
            distributed_optimizer: l.distributed_optimizer,
            ..Config::default()
        };
        config.validate()?;
        let h = model.hidden as f64;
        let attn_proj_scale = 0.5 + 0.5 * model.kv_heads as f64 / model.heads as f64;
        let mats = if model.gated_mlp { 3.0 } else { 2.0 };
        let mlp_scale = mats * model.ffn as f64 / (8.0 * h);
        let gpt_like = attn_proj_scale == 1.0 && mlp_scale == 1.0;
        let options = ProgramOptions {
            overlap_grad_reduce: l.overlap_grad_reduce,
            shape: (!gpt_like).then_some(LayerShape { attn_proj_scale, mlp_scale }),
        };
        Ok(ModelJob { model: *model, layout: *layout, config, options })
    }

    /// Every rank's program ([`super::workload_with`]).
    pub fn workload(&self) -> Result<Workload, ConfigError> {
        super::workload_with(&self.config, &self.options)
    }

    /// Per-GPU memory of the heaviest stage (see the module notes).
    pub fn memory(&self) -> MemoryEstimate {
        let (m, c) = (&self.model, &self.config);
        let (tp, dp) = (c.tp as f64, c.dp as f64);
        let (s, b, h) = (c.seq_len as f64, c.micro_batch as f64, c.hidden as f64);
        let layer = m.layer_params() / tp;
        let lps = c.layers_per_stage() as f64;
        // One vocabulary-parallel embedding shard: the first stage's input embedding, the last
        // stage's output layer (a tied copy or its own matrix); both on one stage when pp = 1.
        let emb = m.vocab as f64 * h / tp;
        let untied_extra = if c.pp == 1 && !m.tied_embeddings { emb } else { 0.0 };
        let first = lps * layer + emb + untied_extra;
        let last = lps * layer + emb;
        let per_param = if c.distributed_optimizer { 6.0 + 12.0 / dp } else { 18.0 };
        let per_layer = if c.sequence_parallel { 34.0 * s * b * h / tp } else { s * b * h * (10.0 + 24.0 / tp) };
        let in_flight_first = (c.pp.min(c.num_microbatches)) as f64;
        let first_mem = MemoryEstimate { params: first, states: first * per_param, activations: per_layer * lps * in_flight_first };
        let last_mem = MemoryEstimate { params: last, states: last * per_param, activations: per_layer * lps };
        if last_mem.total() > first_mem.total() {
            last_mem
        } else {
            first_mem
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::model_by_name;
    use crate::{Stream, Work};

    #[test]
    fn gpt3_175b_on_1024_gpus() {
        let m = model_by_name("gpt3-175b").unwrap();
        let mut l = Layout::new(8, 8, 16, 1, 1536);
        l.overlap_grad_reduce = true;
        let j = ModelJob::new(m, &l).unwrap();
        assert_eq!(j.config.num_microbatches, 96);
        assert_eq!(j.config.vocab % 1024, 0);
        assert!(j.options.shape.is_none(), "GPT-3 is a GPT layer");
        let mem = j.memory();
        assert!(mem.fits(80.0), "{mem:?}");
        // TP 4 with the same PP does not fit without the distributed optimizer.
        let j4 = ModelJob::new(m, &Layout::new(4, 8, 32, 1, 1536)).unwrap();
        assert!(!j4.memory().fits(80.0));
        assert!(ModelJob::new(m, &Layout::new(8, 8, 16, 1, 1000)).is_err());
    }

    #[test]
    fn overlap_moves_dp_buckets_to_a_comm_stream() {
        let m = model_by_name("gpt3-6.7b").unwrap();
        let mut l = Layout::new(2, 2, 4, 1, 16);
        for dist in [false, true] {
            l.distributed_optimizer = dist;
            l.overlap_grad_reduce = false;
            let plain = ModelJob::new(m, &l).unwrap().workload().unwrap();
            l.overlap_grad_reduce = true;
            let over = ModelJob::new(m, &l).unwrap().workload().unwrap();
            for (p, o) in plain.programs.iter().zip(&over.programs) {
                let on_comm: Vec<usize> = o.tasks.iter().enumerate().filter(|(_, t)| t.stream == Stream::Comm(0)).map(|(i, _)| i).collect();
                let dp_plain = p.tasks.iter().filter(|t| matches!(&t.work, Work::Coll(c) if c.group.kind == crate::GroupKind::Dp && c.tag < 0x6a0)).count();
                assert_eq!(on_comm.len(), dp_plain, "every DP bucket reduction moves");
                assert_eq!(p.tasks.len(), o.tasks.len());
                // Something on the compute stream waits for the last of them.
                let last = *on_comm.last().unwrap() as u32;
                assert!(o.tasks.iter().any(|t| t.stream == Stream::Compute && t.deps.contains(&last)));
                // Reductions start before the last backward compute ends.
                let last_bwd = o.tasks.iter().rposition(|t| matches!(&t.work, Work::Compute(c) if c.name.ends_with("bwd"))).unwrap();
                assert!(on_comm[0] < last_bwd);
            }
            assert_eq!(over.validate(), Ok(()));
        }
    }

    #[test]
    fn llama_shape_scales_flops_only() {
        let m = model_by_name("llama-65b").unwrap();
        let j = ModelJob::new(m, &Layout::new(8, 2, 4, 1, 8)).unwrap();
        let sh = j.options.shape.unwrap();
        assert!((sh.mlp_scale - 3.0 * 28672.0 / (8.0 * 8192.0)).abs() < 1e-12);
        assert_eq!(sh.attn_proj_scale, 1.0);
        assert!(ModelJob::new(m, &Layout::new(3, 2, 4, 1, 8)).is_err(), "tp must divide heads");
        assert!(ModelJob::new(model_by_name("mixtral-8x7b").unwrap(), &Layout::new(1, 1, 1, 1, 1)).is_err());
    }
}
