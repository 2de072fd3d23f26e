//! The `key = value` model file (`model.conf`) and its reading into a Megatron [`Config`].
//!
//! Owns [`ModelConfig`] (every key `commlens model` accepts: model size, parallel sizes, the
//! volume formulas' knobs such as bytes per element, parameter formula and count, MoE layer
//! count), its parser, validation and parameter count, and [`Config::from_model_conf`], which
//! turns such a file into the configuration a program is built from. `commlens-analyze`'s
//! volume model re-exports these types.
//!
//! Beyond Megatron: `model = NAME` starts from a named shape of [`crate::models`] (layers,
//! hidden, FFN, heads, KV heads, sequence, vocabulary, gated MLP, experts, top-k, tied
//! embeddings; explicit keys override it wherever they stand in the file), and `framework =
//! megatron|deepspeed|fsdp|axonn|ted` picks the front end, with that framework's knobs
//! ([`Framework`]): `zero_stage`, `reduce_bucket_size`, `allgather_bucket_size`,
//! `prefetch_bucket_size`, `param_persistence_threshold`, `overlap_comm` (DeepSpeed);
//! `fsdp_sharding = full|grad_op|hybrid`, `fsdp_shard_size` (FSDP); `gx`, `gy`, `gz` with
//! `dp` as `G_data` (AxoNN); `experts`, `drop_duplicate_tokens` with `tp`, `ep`, `dp` (TED).
//! A framework's knob in a file of another framework is an error naming the key. The
//! frameworks' types, the named shape and the layout checks per framework are `frameworks`.

use super::config::{Config, ConfigError};
use super::frameworks::{Framework, FsdpSharding, DEEPSPEED_BUCKET, DEEPSPEED_PERSISTENCE_THRESHOLD, DEEPSPEED_PREFETCH_BUCKET, FRAMEWORK_KEYS};
use crate::models::{model_by_name, model_names};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// A model and its parallel configuration. Field names double as the keys of
/// the `key = value` text form ([`ModelConfig::parse`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelConfig {
    /// Transformer layers of the whole model (`L`).
    pub layers: u64,
    /// Hidden size (`h`).
    pub hidden: u64,
    /// FFN size; `None` = `4h` (the thesis's `12h²` per layer assumes it).
    pub ffn_hidden: Option<u64>,
    /// Sequence length (`s`).
    pub seq_len: u64,
    /// Vocabulary (`V`).
    pub vocab: u64,
    /// Micro-batch size (`b`).
    pub micro_batch: u64,
    /// Global batch (`B`); gives `m = B/(b·dp)` when `num_microbatches` is not set.
    pub global_batch: Option<u64>,
    /// Micro-batches per iteration (`m`, gradient-accumulation steps).
    pub num_microbatches: Option<u64>,
    /// Iterations the compared run covers (totals = per iteration × this).
    pub iterations: u64,
    /// Bytes per activation element (`β`).
    pub bytes_per_element: u64,
    /// Bytes per gradient element in the DP reduction; `None` = `β`.
    pub grad_bytes: Option<u64>,
    /// Bytes per parameter element of the distributed optimizer's AllGather; `None` = `β`.
    pub param_bytes: Option<u64>,
    pub tp: u64,
    pub pp: u64,
    /// Megatron's data-parallel size, world / (tp·pp); EP groups lie inside it.
    pub dp: u64,
    pub ep: u64,
    pub sequence_parallel: bool,
    pub distributed_optimizer: bool,
    /// Pipeline tensors split across the TP group (eq. 2.9); implied by SP.
    pub pp_scatter_gather: bool,
    /// Parameter count; `None` = computed with `param_formula`.
    pub params: Option<u64>,
    pub param_formula: ParamFormula,
    /// Transformer layers that are MoE layers.
    pub moe_layers: u64,
    /// Experts per token (`k`).
    pub top_k: u64,
    /// Named shape the file starts from (`model = gpt3-13b`); see [`crate::models`].
    pub model: Option<String>,
    /// Attention heads; `None` = unknown (a named model sets it).
    pub heads: Option<u64>,
    /// Key/value heads (grouped-query attention); `None` = `heads`.
    pub kv_heads: Option<u64>,
    /// Gated (SwiGLU, three matrices) MLP rather than two matrices.
    pub gated_mlp: bool,
    /// Input and output embeddings share one matrix.
    pub tied_embeddings: bool,
    /// Experts per MoE layer; `None` = `max(ep, top_k)` (Megatron) or `ep` (TED).
    pub experts: Option<u64>,
    /// Front end the file describes.
    pub framework: Framework,
    /// DeepSpeed ZeRO stage (0–3).
    pub zero_stage: u64,
    /// DeepSpeed `reduce_bucket_size`, elements.
    pub reduce_bucket_size: u64,
    /// DeepSpeed `allgather_bucket_size`, elements.
    pub allgather_bucket_size: u64,
    /// DeepSpeed `stage3_prefetch_bucket_size`, elements.
    pub prefetch_bucket_size: u64,
    /// DeepSpeed `stage3_param_persistence_threshold`, elements.
    pub param_persistence_threshold: u64,
    /// Communication on its own stream, overlapping compute; `None` = the framework's default
    /// (DeepSpeed: off for ZeRO-1/2, on for ZeRO-3; AxoNN: on, its OAG/ORS/OAR).
    pub overlap_comm: Option<bool>,
    /// FSDP sharding strategy.
    pub fsdp_sharding: FsdpSharding,
    /// Ranks per FSDP shard group under hybrid sharding; `None` = 8 (a node).
    pub fsdp_shard_size: Option<u64>,
    /// AxoNN `G_x`.
    pub gx: u64,
    /// AxoNN `G_y`.
    pub gy: u64,
    /// AxoNN `G_z`.
    pub gz: u64,
    /// TED's duplicate-token dropping before the expert all-to-all.
    pub drop_duplicate_tokens: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            layers: 1,
            hidden: 1,
            ffn_hidden: None,
            seq_len: 1,
            vocab: 0,
            micro_batch: 1,
            global_batch: None,
            num_microbatches: None,
            iterations: 1,
            bytes_per_element: 2,
            grad_bytes: None,
            param_bytes: None,
            tp: 1,
            pp: 1,
            dp: 1,
            ep: 1,
            sequence_parallel: false,
            distributed_optimizer: false,
            pp_scatter_gather: false,
            params: None,
            param_formula: ParamFormula::Thesis,
            moe_layers: 0,
            top_k: 1,
            model: None,
            heads: None,
            kv_heads: None,
            gated_mlp: false,
            tied_embeddings: true,
            experts: None,
            framework: Framework::Megatron,
            zero_stage: 0,
            reduce_bucket_size: DEEPSPEED_BUCKET,
            allgather_bucket_size: DEEPSPEED_BUCKET,
            prefetch_bucket_size: DEEPSPEED_PREFETCH_BUCKET,
            param_persistence_threshold: DEEPSPEED_PERSISTENCE_THRESHOLD,
            overlap_comm: None,
            fsdp_sharding: FsdpSharding::Full,
            fsdp_shard_size: None,
            gx: 1,
            gy: 1,
            gz: 1,
            drop_duplicate_tokens: true,
        }
    }
}

/// How [`ModelConfig::param_count`] counts parameters when none are given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ParamFormula {
    /// Eq. 5.2 as the thesis prints and evaluates it: `12Lh² + Lh + (V+s)`.
    #[default]
    Thesis,
    /// Megatron's count: `12Lh² + 13Lh + (V+s)·h` (layer norms and biases, embeddings of width h).
    Megatron,
}

/// Largest parallel size (and product tp·pp·dp) a config may give: 16 Mi ranks.
pub const MAX_PARALLEL: u64 = 1 << 24;

fn int(key: &str, v: &str) -> Result<u64, ConfigError> {
    let digits: String = v.chars().filter(|c| *c != '_').collect();
    digits.parse().map_err(|_| ConfigError(format!("{key}: {v:?} is not a non-negative integer")))
}

/// An element count as DeepSpeed configs write them: an integer (`_` allowed) or a
/// non-negative whole number in scientific notation (`5e8`, `1.5e6`).
fn sci(key: &str, v: &str) -> Result<u64, ConfigError> {
    if let Ok(n) = int(key, v) {
        return Ok(n);
    }
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 1e18 => Ok(x as u64),
        _ => Err(ConfigError(format!("{key}: {v:?} is not a non-negative whole number of elements"))),
    }
}

fn boolean(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "on" => Ok(true),
        "false" | "no" | "0" | "off" => Ok(false),
        _ => Err(ConfigError(format!("{key}: {v:?} is not a boolean"))),
    }
}

impl ModelConfig {
    /// Parses `key = value` lines (`#` starts a comment, `[section]` lines
    /// and blank lines are skipped, values may be quoted, integers may hold
    /// `_`). Keys are the field names; Megatron's argument names
    /// (`num_layers`, `hidden_size`, `seq_length`, …) are accepted too.
    /// Missing keys keep [`Default`]; the result is validated.
    pub fn parse(text: &str) -> Result<ModelConfig, ConfigError> {
        let mut c = ModelConfig::default();
        let mut lines: Vec<(usize, String, &str)> = Vec::new();
        for (no, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() || line.starts_with('[') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                return Err(ConfigError(format!("line {}: expected `key = value`, got {raw:?}", no + 1)));
            };
            let key = k.trim().replace('-', "_");
            let v = v.trim().trim_matches(|ch| ch == '"' || ch == '\'');
            lines.push((no, key, v));
        }
        // The named shape first, so every explicit key overrides it wherever it stands.
        let named: Vec<&(usize, String, &str)> = lines.iter().filter(|(_, k, _)| k == "model").collect();
        if let Some(second) = named.get(1) {
            return Err(ConfigError(format!("line {}: model: named twice (first on line {})", second.0 + 1, named[0].0 + 1)));
        }
        if let Some((no, _, v)) = named.first() {
            let spec = model_by_name(v).ok_or_else(|| {
                ConfigError(format!("line {}: model: unknown model {v:?} (known: {})", no + 1, model_names().join(", ")))
            })?;
            c.apply_shape(spec);
        }
        let mut framework_keys: Vec<(usize, &str, Framework)> = Vec::new();
        for (no, key, v) in &lines {
            let (no, v) = (*no, *v);
            if let Some(&(k, fw)) = FRAMEWORK_KEYS.iter().find(|(k, _)| k == key) {
                framework_keys.push((no, k, fw));
            }
            let at = |e: ConfigError| ConfigError(format!("line {}: {}", no + 1, e.0));
            let n = || int(key, v).map_err(at);
            // A parallel size beyond any machine (`tp = 18446744073709551615`)
            // would only overflow the formulas: an error naming the line.
            let par = |max: u64| {
                let x = int(key, v).map_err(at)?;
                if x > max {
                    return Err(at(ConfigError(format!("{key} = {x} is implausible (at most {max})"))));
                }
                Ok(x)
            };
            let b = || boolean(key, v).map_err(at);
            match key.as_str() {
                "layers" | "num_layers" => c.layers = n()?,
                "hidden" | "hidden_size" => c.hidden = n()?,
                "ffn_hidden" | "ffn_hidden_size" => c.ffn_hidden = Some(n()?),
                "seq_len" | "seq_length" => c.seq_len = n()?,
                "vocab" | "vocab_size" | "padded_vocab_size" => c.vocab = n()?,
                "micro_batch" | "micro_batch_size" => c.micro_batch = n()?,
                "global_batch" | "global_batch_size" => c.global_batch = Some(n()?),
                "num_microbatches" => c.num_microbatches = Some(n()?),
                "iterations" | "train_iters" => c.iterations = n()?,
                "bytes_per_element" => c.bytes_per_element = par(64)?,
                "grad_bytes" => c.grad_bytes = Some(n()?),
                "param_bytes" => c.param_bytes = Some(n()?),
                "tp" | "tensor_model_parallel_size" => c.tp = par(MAX_PARALLEL)?,
                "pp" | "pipeline_model_parallel_size" => c.pp = par(MAX_PARALLEL)?,
                "dp" | "data_parallel_size" => c.dp = par(MAX_PARALLEL)?,
                "ep" | "expert_model_parallel_size" => c.ep = par(MAX_PARALLEL)?,
                "sequence_parallel" => c.sequence_parallel = b()?,
                "distributed_optimizer" | "use_distributed_optimizer" => c.distributed_optimizer = b()?,
                "pp_scatter_gather" => c.pp_scatter_gather = b()?,
                "params" => c.params = Some(n()?),
                "param_formula" => {
                    c.param_formula = match v.to_ascii_lowercase().as_str() {
                        "thesis" => ParamFormula::Thesis,
                        "megatron" => ParamFormula::Megatron,
                        _ => return Err(at(ConfigError(format!("param_formula: {v:?} is not thesis or megatron")))),
                    }
                }
                "moe_layers" => c.moe_layers = n()?,
                "top_k" | "moe_router_topk" => c.top_k = par(MAX_PARALLEL)?,
                "model" => {}
                "heads" | "num_attention_heads" => c.heads = Some(n()?),
                "kv_heads" | "num_query_groups" | "num_key_value_heads" => c.kv_heads = Some(n()?),
                "gated_mlp" | "swiglu" => c.gated_mlp = b()?,
                "tied_embeddings" => c.tied_embeddings = b()?,
                "experts" | "num_experts" => c.experts = Some(par(MAX_PARALLEL)?),
                "framework" => {
                    c.framework = Framework::parse(v).ok_or_else(|| {
                        at(ConfigError(format!("framework: {v:?} is not megatron, deepspeed, fsdp, axonn or ted")))
                    })?
                }
                "zero_stage" | "stage" => {
                    c.zero_stage = int(key, v).map_err(at)?;
                    if c.zero_stage > 3 {
                        return Err(at(ConfigError(format!("zero_stage: {v:?} is not 0, 1, 2 or 3"))));
                    }
                }
                "reduce_bucket_size" => c.reduce_bucket_size = sci(key, v).map_err(at)?,
                "allgather_bucket_size" => c.allgather_bucket_size = sci(key, v).map_err(at)?,
                "prefetch_bucket_size" | "stage3_prefetch_bucket_size" => c.prefetch_bucket_size = sci(key, v).map_err(at)?,
                "param_persistence_threshold" | "stage3_param_persistence_threshold" => {
                    c.param_persistence_threshold = sci(key, v).map_err(at)?
                }
                "overlap_comm" => c.overlap_comm = Some(b()?),
                "fsdp_sharding" | "sharding_strategy" => {
                    c.fsdp_sharding = match v.to_ascii_lowercase().replace('-', "_").as_str() {
                        "full" | "full_shard" => FsdpSharding::Full,
                        "grad_op" | "shard_grad_op" => FsdpSharding::GradOp,
                        "hybrid" | "hybrid_shard" => FsdpSharding::Hybrid,
                        _ => return Err(at(ConfigError(format!("fsdp_sharding: {v:?} is not full, grad_op or hybrid")))),
                    }
                }
                "fsdp_shard_size" => c.fsdp_shard_size = Some(par(MAX_PARALLEL)?),
                "gx" => c.gx = par(MAX_PARALLEL)?,
                "gy" => c.gy = par(MAX_PARALLEL)?,
                "gz" => c.gz = par(MAX_PARALLEL)?,
                "gdata" | "g_data" => c.dp = par(MAX_PARALLEL)?,
                "drop_duplicate_tokens" | "dtd" => c.drop_duplicate_tokens = b()?,
                other => return Err(ConfigError(format!("line {}: unknown key {other:?}", no + 1))),
            }
        }
        for (no, key, fw) in framework_keys {
            if fw != c.framework {
                return Err(ConfigError(format!(
                    "line {}: {key}: belongs to framework = {}, but this file's framework is {}",
                    no + 1,
                    fw.key(),
                    c.framework.key()
                )));
            }
        }
        c.validate()?;
        Ok(c)
    }

}

impl ModelConfig {
    /// Checks sizes; a zero size would make every formula meaningless.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("seq_len", self.seq_len),
            ("micro_batch", self.micro_batch),
            ("tp", self.tp),
            ("pp", self.pp),
            ("dp", self.dp),
            ("ep", self.ep),
            ("top_k", self.top_k),
            ("bytes_per_element", self.bytes_per_element),
        ] {
            if v == 0 {
                return Err(ConfigError(format!("{name} must be at least 1")));
            }
        }
        let world = [self.tp, self.pp, self.dp].iter().try_fold(1u64, |a, &b| a.checked_mul(b));
        if world.is_none_or(|w| w > MAX_PARALLEL) {
            return Err(ConfigError(format!(
                "tp·pp·dp = {}·{}·{} ranks is implausible (at most {MAX_PARALLEL})",
                self.tp, self.pp, self.dp
            )));
        }
        if self.micro_batch.checked_mul(self.dp).is_none() {
            return Err(ConfigError(format!("micro_batch·dp = {}·{} overflows", self.micro_batch, self.dp)));
        }
        if self.moe_layers > self.layers {
            return Err(ConfigError("moe_layers exceeds layers".into()));
        }
        if self.ep > 1 && self.dp.checked_rem(self.ep) != Some(0) {
            return Err(ConfigError(format!("ep ({}) must divide dp ({})", self.ep, self.dp)));
        }
        self.validate_framework()?;
        self.microbatches().map(|_| ())
    }

    /// `m`: given, or `global_batch / (micro_batch · dp)`.
    pub fn microbatches(&self) -> Result<u64, ConfigError> {
        match (self.num_microbatches, self.global_batch) {
            (Some(m), _) if m > 0 => Ok(m),
            (Some(_), _) => Err(ConfigError("num_microbatches must be at least 1".into())),
            (None, Some(gb)) => {
                let per = self.micro_batch * self.dp;
                if gb == 0 || gb % per != 0 {
                    Err(ConfigError(format!("global_batch {gb} is not a positive multiple of micro_batch·dp = {per}")))
                } else {
                    Ok(gb / per)
                }
            }
            // Volumes that do not depend on m (DP) still make sense.
            (None, None) => Ok(1),
        }
    }

    /// `P`: given, or by `param_formula` with the `12Lh²` of the layers
    /// generalised to an FFN of size `f` as `L·(4h² + 2hf)`: eq. 5.2 is
    /// `L·(4h² + 2hf) + L·h + (V+s)` (= `12Lh²(1 + 1/(12h) + (V+s)/(12Lh²))`
    /// for `f = 4h`), Megatron's `L·(4h² + 2hf) + 13·L·h + (V+s)·h`.
    ///
    /// A file naming a model (`model = NAME`) counts that shape's parameters
    /// ([`crate::models::ModelSpec::params`]: gated MLP, grouped-query attention, experts, embeddings of
    /// width `h`), with the file's explicit keys applied.
    pub fn param_count(&self) -> f64 {
        if let Some(p) = self.params {
            return p as f64;
        }
        if self.model.is_some() {
            return self.shape().params();
        }
        let (l, h) = (self.layers as f64, self.hidden as f64);
        let f = self.ffn_hidden.map_or(4.0 * h, |f| f as f64);
        let layers = l * (4.0 * h * h + 2.0 * h * f);
        let emb = (self.vocab + self.seq_len) as f64;
        match self.param_formula {
            ParamFormula::Thesis => layers + l * h + emb,
            ParamFormula::Megatron => layers + 13.0 * l * h + emb * h,
        }
    }

    /// `β`: bytes per activation element.
    pub fn beta(&self) -> f64 {
        self.bytes_per_element as f64
    }
}

impl FromStr for ModelConfig {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModelConfig::parse(s)
    }
}

impl Config {
    /// A Megatron configuration from the text of a model file (the keys [`ModelConfig::parse`]
    /// accepts). The program's own choices keep their defaults (1F1B, no virtual stages, the
    /// all-to-all dispatcher, seed 42): set them on the result. MoE layers (`moe_layers`) must
    /// recur evenly (`layers` a multiple of `moe_layers`, every `layers/moe_layers`-th layer,
    /// from the first) and get `max(ep, top_k)` experts. The volume formulas' own knobs
    /// (`bytes_per_element`, `grad_bytes`, `param_bytes`, `pp_scatter_gather`, `params`,
    /// `param_formula`) do not change a program, which has bf16 activations, fp32 gradients and
    /// pipeline tensors split across TP; an FFN other than `4h` cannot be expressed and is an
    /// error.
    pub fn from_model_conf(text: &str) -> Result<Config, ConfigError> {
        ModelConfig::parse(text)?.to_megatron()
    }
}

impl ModelConfig {
    /// The Megatron configuration of this model file (see [`Config::from_model_conf`]).
    pub fn to_megatron(&self) -> Result<Config, ConfigError> {
        if self.model.is_none() && self.ffn_hidden.is_some_and(|f| f != 4 * self.hidden) {
            return Err(ConfigError(
                "ffn_hidden other than 4·hidden has no Megatron program here (name a model with `model = …` for its FLOPs)".into(),
            ));
        }
        let size = |name: &str, v: u64| usize::try_from(v).map_err(|_| ConfigError(format!("{name} = {v} is too large")));
        let (num_experts, moe_layer_freq) = if self.moe_layers > 0 {
            if self.layers % self.moe_layers != 0 {
                return Err(ConfigError(format!(
                    "moe_layers ({}) must divide layers ({}) for a program (every n-th layer an MoE layer)",
                    self.moe_layers, self.layers
                )));
            }
            (self.experts.unwrap_or(self.ep.max(self.top_k)), self.layers / self.moe_layers)
        } else {
            (0, 1)
        };
        let cfg = Config {
            tp: size("tp", self.tp)?,
            pp: size("pp", self.pp)?,
            dp: size("dp", self.dp)?,
            layers: size("layers", self.layers)?,
            hidden: size("hidden", self.hidden)?,
            seq_len: size("seq_len", self.seq_len)?,
            micro_batch: size("micro_batch", self.micro_batch)?,
            num_microbatches: size("num_microbatches", self.microbatches()?)?,
            iterations: size("iterations", self.iterations)?,
            vocab: size("vocab", self.vocab)?,
            sequence_parallel: self.sequence_parallel,
            distributed_optimizer: self.distributed_optimizer,
            ep: size("ep", self.ep)?,
            num_experts: size("num_experts", num_experts)?,
            moe_layer_freq: size("moe_layer_freq", moe_layer_freq)?,
            moe_topk: size("top_k", if self.moe_layers > 0 { self.top_k } else { 2 })?,
            ..Config::default()
        };
        cfg.validate()?;
        Ok(cfg)
    }
}
