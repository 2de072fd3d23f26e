//! The Megatron-LM configuration a program is built from.
//!
//! Owns [`Config`] (parallel layout, model size, pipeline [`Schedule`], sequence parallelism,
//! distributed optimizer, virtual stages, experts and their [`MoeDispatcher`], the routing
//! seed), its validation ([`Config::validate`]) and the derived sizes (layers per stage and
//! chunk, MoE layer pattern). Parsing of the `key = value` model file is `model_conf`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Pipeline schedule of the microbatches of one iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Schedule {
    /// Megatron's default non-interleaved 1F1B schedule (warm-up, steady state, cool-down).
    OneFOneB,
    /// GPipe-like: all forward passes, then all backward passes.
    AllForwardAllBackward,
}

/// Token dispatcher of the MoE layers (Megatron `--moe-token-dispatcher-type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MoeDispatcher {
    /// `alltoall`: tokens travel by `all_to_all_single` on the EP group, which PyTorch issues as
    /// one NCCL group of `Send`/`Recv` per peer (itself included, zero-sized splits skipped).
    #[default]
    AllToAll,
    /// `allgather`: every EP rank gathers all tokens (AllGather) and reduce-scatters the output.
    AllGather,
}

/// A Megatron-LM training job: `world = tp · pp · dp`, rank order `tp-dp-pp`; expert-parallel
/// groups are carved out of the data-parallel ones (`ep` divides `dp`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub tp: usize,
    pub pp: usize,
    pub dp: usize,
    /// Transformer layers of the whole model (divisible by `pp`).
    pub layers: usize,
    pub hidden: usize,
    pub seq_len: usize,
    pub micro_batch: usize,
    /// Microbatches per iteration (gradient-accumulation steps).
    pub num_microbatches: usize,
    pub iterations: usize,
    /// Padded vocabulary size (divisible by `tp`).
    pub vocab: usize,
    pub schedule: Schedule,
    /// `--sequence-parallel`.
    pub sequence_parallel: bool,
    /// `--use-distributed-optimizer` (ZeRO-1).
    pub distributed_optimizer: bool,
    /// Model chunks per pipeline stage; more than 1 = Megatron's interleaved 1F1B.
    pub virtual_stages: usize,
    /// Expert-parallel size (divides `dp`).
    pub ep: usize,
    /// Experts per MoE layer (0 = dense model; divisible by `ep`).
    pub num_experts: usize,
    /// Every `moe_layer_freq`-th layer (global index `% freq == 0`) is an MoE layer.
    pub moe_layer_freq: usize,
    /// Experts each token is routed to.
    pub moe_topk: usize,
    pub moe_dispatcher: MoeDispatcher,
    /// Seed of the token routing (uneven all-to-all splits); the same seed gives the same
    /// routing.
    pub seed: u64,
}

impl Default for Config {
    /// commlens-synth's default run: TP 2, PP 2, DP 1, 4 layers, hidden 1024, 4 microbatches.
    fn default() -> Self {
        Config {
            tp: 2,
            pp: 2,
            dp: 1,
            layers: 4,
            hidden: 1024,
            seq_len: 1024,
            micro_batch: 1,
            num_microbatches: 4,
            iterations: 2,
            vocab: 50304,
            schedule: Schedule::OneFOneB,
            sequence_parallel: false,
            distributed_optimizer: false,
            virtual_stages: 1,
            ep: 1,
            num_experts: 0,
            moe_layer_freq: 1,
            moe_topk: 2,
            moe_dispatcher: MoeDispatcher::AllToAll,
            seed: 42,
        }
    }
}

/// An invalid [`Config`] or model file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Number of ranks.
    pub fn world(&self) -> usize {
        self.tp * self.pp * self.dp
    }

    /// Transformer layers held by each pipeline stage.
    pub fn layers_per_stage(&self) -> usize {
        self.layers / self.pp.max(1)
    }

    /// Transformer layers of one model chunk (a stage holds `virtual_stages` chunks).
    pub fn layers_per_chunk(&self) -> usize {
        self.layers_per_stage() / self.virtual_stages.max(1)
    }

    /// Whether global layer `layer` is an MoE layer.
    pub fn is_moe_layer(&self, layer: usize) -> bool {
        self.num_experts > 0 && layer % self.moe_layer_freq.max(1) == 0
    }

    /// Pipeline stage of global rank `rank` (rank order `tp-dp-pp`).
    pub fn stage_of(&self, rank: usize) -> usize {
        rank / (self.tp * self.dp)
    }

    /// Checks what the program builder relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("tp", self.tp),
            ("pp", self.pp),
            ("dp", self.dp),
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("seq_len", self.seq_len),
            ("micro_batch", self.micro_batch),
            ("num_microbatches", self.num_microbatches),
            ("vocab", self.vocab),
            ("virtual_stages", self.virtual_stages),
            ("ep", self.ep),
            ("moe_layer_freq", self.moe_layer_freq),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(ConfigError(format!("{name} must be at least 1")));
            }
        }
        if self.layers % self.pp != 0 {
            return Err(ConfigError(format!("layers ({}) must be divisible by pp ({})", self.layers, self.pp)));
        }
        if self.hidden % self.tp != 0 || self.vocab % self.tp != 0 {
            return Err(ConfigError("hidden and vocab must be divisible by tp".into()));
        }
        let v = self.virtual_stages;
        if v > 1 && (self.pp < 2 || self.num_microbatches % self.pp != 0 || self.layers % (self.pp * v) != 0) {
            return Err(ConfigError(format!(
                "virtual_stages {v} needs pp >= 2, num_microbatches divisible by pp and layers divisible by pp * virtual_stages"
            )));
        }
        if self.ep > 1 && (self.dp % self.ep != 0 || self.num_experts == 0) {
            return Err(ConfigError(format!("ep {} must divide dp {} and needs num_experts > 0", self.ep, self.dp)));
        }
        if self.num_experts > 0
            && (self.num_experts % self.ep != 0 || self.moe_topk == 0 || self.moe_topk > self.num_experts)
        {
            return Err(ConfigError("num_experts must be divisible by ep, 1 <= moe_topk <= num_experts".into()));
        }
        if self.sequence_parallel && self.seq_len % self.tp != 0 {
            return Err(ConfigError("sequence_parallel needs seq_len divisible by tp".into()));
        }
        Ok(())
    }
}
