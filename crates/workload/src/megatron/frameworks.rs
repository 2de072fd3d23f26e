//! The frameworks side of the model file: which front end a `model.conf` describes and the
//! shape it names.
//!
//! Owns [`Framework`] (`framework = megatron|deepspeed|fsdp|axonn|ted`), [`FsdpSharding`],
//! DeepSpeed's documented defaults, which keys belong to which framework (`FRAMEWORK_KEYS`,
//! checked by `model_conf`'s parser), and the [`ModelConfig`] methods that serve every front
//! end: [`ModelConfig::apply_shape`] (what `model = NAME` fills), [`ModelConfig::shape`] (the
//! file as a [`ModelSpec`]), [`ModelConfig::world`], the per-framework layout checks, and
//! [`ModelConfig::megatron_options`] (a named model's layer shape for Megatron's FLOPs).

use super::model_conf::{ModelConfig, MAX_PARALLEL};
use super::{ConfigError, LayerShape, ProgramOptions};
use crate::models::{model_by_name, ModelSpec};
use serde::{Deserialize, Serialize};

/// The training framework whose program a model file describes (`framework = …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Framework {
    /// Megatron-LM: TP × PP × DP (× EP), the [`super::workload`] front end.
    #[default]
    Megatron,
    /// DeepSpeed ZeRO stage 0–3, data parallel (`crate::deepspeed`).
    DeepSpeed,
    /// PyTorch FSDP (full shard, shard-grad-op, hybrid shard), data parallel (`crate::deepspeed`).
    Fsdp,
    /// AxoNN's 4D layout `G_x × G_y × G_z × G_data` (`crate::axonn`).
    Axonn,
    /// DeepSpeed-TED: tensor × expert × data for MoE models (`crate::ted`).
    Ted,
}

impl Framework {
    /// The name the `framework` key takes.
    pub fn key(self) -> &'static str {
        match self {
            Framework::Megatron => "megatron",
            Framework::DeepSpeed => "deepspeed",
            Framework::Fsdp => "fsdp",
            Framework::Axonn => "axonn",
            Framework::Ted => "ted",
        }
    }

    pub(super) fn parse(v: &str) -> Option<Framework> {
        Some(match v.to_ascii_lowercase().replace(['_', '-'], "").as_str() {
            "megatron" | "megatronlm" => Framework::Megatron,
            "deepspeed" | "zero" => Framework::DeepSpeed,
            "fsdp" => Framework::Fsdp,
            "axonn" => Framework::Axonn,
            "ted" | "deepspeedted" => Framework::Ted,
            _ => return None,
        })
    }
}

/// PyTorch FSDP's `ShardingStrategy` (`fsdp_sharding = …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum FsdpSharding {
    /// `FULL_SHARD` (ZeRO-3): parameters gathered before forward and again before backward.
    #[default]
    Full,
    /// `SHARD_GRAD_OP` (ZeRO-2): parameters kept gathered from forward to backward.
    GradOp,
    /// `HYBRID_SHARD`: full shard inside a shard group of `fsdp_shard_size` ranks, gradient
    /// AllReduce across the replicas.
    Hybrid,
}

/// DeepSpeed's default `reduce_bucket_size` and `allgather_bucket_size`: 5e8 elements.
pub const DEEPSPEED_BUCKET: u64 = 500_000_000;
/// DeepSpeed's default `stage3_prefetch_bucket_size`: 5e7 elements.
pub const DEEPSPEED_PREFETCH_BUCKET: u64 = 50_000_000;
/// DeepSpeed's default `stage3_param_persistence_threshold`: 1e5 elements.
pub const DEEPSPEED_PERSISTENCE_THRESHOLD: u64 = 100_000;

/// Keys that belong to one framework only (a file of another framework naming them is an
/// error).
pub(super) const FRAMEWORK_KEYS: &[(&str, Framework)] = &[
    ("zero_stage", Framework::DeepSpeed),
    ("reduce_bucket_size", Framework::DeepSpeed),
    ("allgather_bucket_size", Framework::DeepSpeed),
    ("prefetch_bucket_size", Framework::DeepSpeed),
    ("param_persistence_threshold", Framework::DeepSpeed),
    ("fsdp_sharding", Framework::Fsdp),
    ("fsdp_shard_size", Framework::Fsdp),
    ("gx", Framework::Axonn),
    ("gy", Framework::Axonn),
    ("gz", Framework::Axonn),
    ("drop_duplicate_tokens", Framework::Ted),
];

impl ModelConfig {
    /// Fills the shape keys from a named model (what `model = NAME` does).
    pub fn apply_shape(&mut self, m: &ModelSpec) {
        self.model = Some(m.name.to_string());
        self.layers = m.layers as u64;
        self.hidden = m.hidden as u64;
        self.ffn_hidden = Some(m.ffn as u64);
        self.heads = Some(m.heads as u64);
        self.kv_heads = Some(m.kv_heads as u64);
        self.seq_len = m.seq_len as u64;
        self.vocab = m.vocab as u64;
        self.gated_mlp = m.gated_mlp;
        self.tied_embeddings = m.tied_embeddings;
        if m.experts > 1 {
            self.experts = Some(m.experts as u64);
            self.top_k = m.top_k as u64;
            self.moe_layers = m.layers as u64;
        }
    }

    /// The model's shape as a [`ModelSpec`] (named `model.conf`, or the named model's name):
    /// the keys as given, `ffn_hidden` defaulting to `4h`, `heads` to `hidden / 128` (at
    /// least one) and experts to one for a dense file. Experts apply to every layer of the
    /// spec; MoE front ends use `moe_layers` for which layers have them.
    pub fn shape(&self) -> ModelSpec {
        let name: &'static str = self.model.as_deref().and_then(model_by_name).map_or("model.conf", |m| m.name);
        let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let heads = self.heads.unwrap_or((self.hidden / 128).max(1));
        let experts = if self.moe_layers > 0 { self.experts.unwrap_or(self.ep.max(self.top_k)) } else { 1 };
        ModelSpec {
            name,
            layers: clamp(self.layers),
            hidden: clamp(self.hidden),
            ffn: clamp(self.ffn_hidden.unwrap_or(4 * self.hidden)),
            heads: clamp(heads),
            kv_heads: clamp(self.kv_heads.unwrap_or(heads)),
            vocab: clamp(self.vocab),
            seq_len: clamp(self.seq_len),
            gated_mlp: self.gated_mlp,
            experts: clamp(experts),
            top_k: clamp(self.top_k.min(experts)),
            tied_embeddings: self.tied_embeddings,
        }
    }

    /// Number of ranks the framework's layout needs: `tp·pp·dp` (Megatron, DeepSpeed, FSDP,
    /// TED), `gx·gy·gz·dp` (AxoNN).
    pub fn world(&self) -> u64 {
        match self.framework {
            Framework::Axonn => self.gx.saturating_mul(self.gy).saturating_mul(self.gz).saturating_mul(self.dp),
            _ => self.tp.saturating_mul(self.pp).saturating_mul(self.dp),
        }
    }

    /// Checks the framework's layout; the message names the key at fault.
    pub(super) fn validate_framework(&self) -> Result<(), ConfigError> {
        let fw = self.framework.key();
        let only_dp = |what: &str| -> Result<(), ConfigError> {
            for (name, v) in [("tp", self.tp), ("pp", self.pp), ("ep", self.ep)] {
                if v != 1 {
                    return Err(ConfigError(format!("{name} = {v}: framework = {fw} is modelled {what} (tp = pp = ep = 1)")));
                }
            }
            Ok(())
        };
        match self.framework {
            Framework::Megatron => {}
            Framework::DeepSpeed => only_dp("data parallel only")?,
            Framework::Fsdp => {
                only_dp("data parallel only")?;
                if self.fsdp_sharding == FsdpSharding::Hybrid {
                    let s = self.fsdp_shard_size.unwrap_or(8);
                    if s == 0 || self.dp % s != 0 || s == self.dp {
                        return Err(ConfigError(format!(
                            "fsdp_shard_size = {s}: hybrid sharding needs a shard group that divides dp = {} into at least two replicas",
                            self.dp
                        )));
                    }
                }
            }
            Framework::Axonn => {
                only_dp("by its own grid gx·gy·gz·dp")?;
                for (name, v) in [("gx", self.gx), ("gy", self.gy), ("gz", self.gz)] {
                    if v == 0 {
                        return Err(ConfigError(format!("{name} must be at least 1")));
                    }
                }
                if self.world() > MAX_PARALLEL {
                    return Err(ConfigError(format!(
                        "gx·gy·gz·dp = {}·{}·{}·{} ranks is implausible (at most {MAX_PARALLEL})",
                        self.gx, self.gy, self.gz, self.dp
                    )));
                }
            }
            Framework::Ted => {
                if self.pp != 1 {
                    return Err(ConfigError(format!("pp = {}: framework = ted is modelled without pipelining (pp = 1)", self.pp)));
                }
                if self.moe_layers == 0 {
                    return Err(ConfigError("moe_layers: framework = ted needs MoE layers (moe_layers > 0 or an MoE model)".into()));
                }
                let e = self.experts.unwrap_or(self.ep);
                if e % self.ep != 0 || self.top_k > e {
                    return Err(ConfigError(format!(
                        "experts = {e}: must be a multiple of ep = {} and at least top_k = {}",
                        self.ep, self.top_k
                    )));
                }
            }
        }
        Ok(())
    }
}

impl ModelConfig {
    /// Program options for a Megatron program of this file: the layer shape of a named model
    /// whose layers are not GPT layers (gated or wider MLP, grouped-query attention), which
    /// changes the compute FLOPs only ([`LayerShape`]); the default otherwise, so files without
    /// `model` build exactly the program they always did.
    pub fn megatron_options(&self) -> ProgramOptions {
        let m = self.shape();
        let gpt = !m.gated_mlp && m.ffn as u64 == 4 * self.hidden && m.kv_heads == m.heads;
        if self.model.is_none() || gpt {
            return ProgramOptions::default();
        }
        let h = m.hidden as f64;
        let kv = h * m.kv_heads as f64 / m.heads.max(1) as f64;
        let mats = if m.gated_mlp { 3.0 } else { 2.0 };
        ProgramOptions {
            shape: Some(LayerShape {
                attn_proj_scale: (2.0 * h * h + 2.0 * h * kv) / (4.0 * h * h),
                mlp_scale: mats * m.ffn as f64 / (8.0 * h),
            }),
            ..ProgramOptions::default()
        }
    }
}
