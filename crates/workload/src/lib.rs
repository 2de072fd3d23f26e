//! The workload model and its front ends.
//!
//! | module | owns |
//! |---|---|
//! | `program` | the model: [`Workload`], [`Program`], [`Task`], groups by role |
//! | `aicb` | AICB / SimAI workload text files |
//! | `chakra` | Chakra execution traces: protobuf `.et` and PyTorch ET JSON, in archives too |
//! | `models` | named architectures (`gpt3-175b`, `llama-65b`, `mixtral-8x7b`, …): shape, parameters, FLOPs per token |
//! | `replay` | a measured run (any table commlens reads) as a workload, gaps between operations as compute |
//! | `megatron` | Megatron-LM (TP, SP, PP 1F1B/interleaved, DP buckets, distributed optimizer, EP) from a configuration or `model.conf`; the volumes its programs move |
//! | `deepspeed` | DeepSpeed ZeRO-0/1/2/3 and PyTorch FSDP (full, shard-grad-op, hybrid shard) from a `model.conf`: buckets, per-layer gathers, prefetch, gradient reduce-scatter |
//! | `axonn` | AxoNN's 4D layout (`G_x × G_y × G_z × G_data`, Algorithm 3 of Singh 2025 ch. 5) from a `model.conf`; eqs. 5.1–5.5 per layer |
//! | `ted` | DeepSpeed-TED (tensor × expert × data MoE, ch. 7) from a `model.conf`: expert all-to-all, duplicate token dropping, ZeRO-1 on both data groups |
//! | `frontend` | what those three share: task lists with streams and dependencies, layer parameters and FLOPs, per-rank volumes |

pub mod aicb;
pub mod archive;
pub mod axonn;
pub mod chakra;
pub mod deepspeed;
pub mod frontend;
pub mod megatron;
pub mod models;
pub mod program;
pub mod replay;
pub mod ted;

pub use program::*;

use megatron::{ConfigError, Framework, ModelConfig};

/// The workload of a model file, by its `framework` key: Megatron-LM (the configuration
/// [`ModelConfig::to_megatron`] builds, with a named model's layer shape), DeepSpeed/FSDP,
/// AxoNN or TED.
pub fn from_model_conf(c: &ModelConfig) -> Result<Workload, ConfigError> {
    match c.framework {
        Framework::Megatron => megatron::workload_with(&c.to_megatron()?, &c.megatron_options()),
        Framework::DeepSpeed | Framework::Fsdp => deepspeed::workload(c),
        Framework::Axonn => axonn::workload(c),
        Framework::Ted => ted::workload(c),
    }
}
