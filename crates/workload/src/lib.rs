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

pub mod aicb;
pub mod archive;
pub mod chakra;
pub mod megatron;
pub mod models;
pub mod program;
pub mod replay;

pub use program::*;
