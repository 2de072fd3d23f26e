//! Run configuration: what run to synthesize, its validation, and the NCCL version gates.
//!
//! Owns [`RunConfig`] (parallel layout, model size, schedule, realism knobs) and its
//! translation into the shared Megatron configuration ([`RunConfig::program_config`]), the
//! [`ConfigError`] returned by validation and [`NcclVersion`], which
//! decides which version-dependent line forms are written (see its methods for the evidence
//! behind each gate).

pub use commlens_core::NcclVersion;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The pipeline schedule and MoE dispatcher are the shared Megatron model's
/// (`commlens_workload::megatron`), re-exported here.
pub use commlens_workload::megatron::{MoeDispatcher, Schedule};
use crate::slowdown::Slowdown;

fn one() -> usize {
    1
}

fn two() -> usize {
    2
}

/// What to synthesize. `world = tp * pp * dp`, one process per GPU (as torchrun starts them).
/// Expert-parallel groups are carved out of the data-parallel ones (`ep` divides `dp`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Tensor-parallel size.
    pub tp: usize,
    /// Pipeline-parallel size.
    pub pp: usize,
    /// Data-parallel size.
    pub dp: usize,
    /// GPUs (processes) per node; hosts are `<host_prefix>00`, `<host_prefix>01`, ...
    pub gpus_per_node: usize,
    /// Host name prefix.
    pub host_prefix: String,
    /// Transformer layers of the whole model (must be divisible by `pp`).
    pub layers: usize,
    /// Hidden size (divisible by `tp`).
    pub hidden: usize,
    /// Sequence length.
    pub seq_len: usize,
    /// Micro-batch size.
    pub micro_batch: usize,
    /// Microbatches per iteration (gradient-accumulation steps).
    pub num_microbatches: usize,
    /// Training iterations.
    pub iterations: usize,
    /// Padded vocabulary size (divisible by `tp`).
    pub vocab: usize,
    /// NCCL version string, e.g. `"2.27.7"`.
    pub nccl_version: String,
    /// CUDA version the NCCL build targets (`+cuda12.8`), also gives `cudaDriverVersion 12080`.
    pub cuda_version: String,
    /// Prefix every line with `NCCL_DEBUG_TIMESTAMP_FORMAT="%s.%6f"` epoch seconds.
    pub timestamps: bool,
    /// Epoch second at which the first process starts.
    pub start_epoch_s: u64,
    /// Seed of the SplitMix64 generator.
    pub seed: u64,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Collective channels of single-node communicators (multi-node ones use at most 4).
    pub nccl_channels: usize,
    /// Also write `NCCL CALL ncclAllReduce(...)` / `ncclGroupStart()` lines (CALL subsystem).
    pub call_lines: bool,
    /// Also produce `combined.log`, the processes' lines merged as torchrun's stdout would.
    pub interleave: bool,
    /// Op lines of `combined.log` cut mid-way with another process's line spliced in.
    pub broken_lines: usize,
    /// Megatron sequence parallelism (`--sequence-parallel`): the TP AllReduces of each layer
    /// become AllGather + ReduceScatter of `seq*mb*hidden/tp` elements.
    #[serde(default)]
    pub sequence_parallel: bool,
    /// Distributed optimizer / ZeRO-1 (`--use-distributed-optimizer`): each gradient bucket is
    /// reduce-scattered (fp32) and the updated parameters all-gathered (bf16) after the step.
    #[serde(default)]
    pub distributed_optimizer: bool,
    /// Model chunks per pipeline stage (`--num-layers-per-virtual-pipeline-stage`); 1 = the
    /// plain schedule, more = Megatron's interleaved 1F1B.
    #[serde(default = "one")]
    pub virtual_stages: usize,
    /// Expert-parallel size (divides `dp`); 1 = no EP communicator.
    #[serde(default = "one")]
    pub ep: usize,
    /// Experts per MoE layer (0 = dense model; divisible by `ep`).
    #[serde(default)]
    pub num_experts: usize,
    /// Every `moe_layer_freq`-th layer (global index `% freq == 0`) is an MoE layer.
    #[serde(default = "one")]
    pub moe_layer_freq: usize,
    /// Experts each token is routed to.
    #[serde(default = "two")]
    pub moe_topk: usize,
    /// How MoE layers move tokens.
    #[serde(default)]
    pub moe_dispatcher: MoeDispatcher,
    /// Injected slowdowns (`slowdown = comm:tp rank:3 iter:5.. factor:2`), to test anomaly
    /// detection; none leaves the output byte-identical.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowdowns: Vec<Slowdown>,
}

impl Default for RunConfig {
    /// A 4-rank TP=2/PP=2/DP=1 run on one node of 4 GPUs; total output well under 1 MB.
    fn default() -> Self {
        RunConfig {
            tp: 2,
            pp: 2,
            dp: 1,
            gpus_per_node: 4,
            host_prefix: "node".to_string(),
            layers: 4,
            hidden: 1024,
            seq_len: 1024,
            micro_batch: 1,
            num_microbatches: 4,
            iterations: 2,
            vocab: 50304,
            nccl_version: "2.27.7".to_string(),
            cuda_version: "12.8".to_string(),
            timestamps: true,
            start_epoch_s: 1_766_081_200,
            seed: 42,
            schedule: Schedule::OneFOneB,
            nccl_channels: 8,
            call_lines: false,
            interleave: false,
            broken_lines: 0,
            sequence_parallel: false,
            distributed_optimizer: false,
            virtual_stages: 1,
            ep: 1,
            num_experts: 0,
            moe_layer_freq: 1,
            moe_topk: 2,
            moe_dispatcher: MoeDispatcher::AllToAll,
            slowdowns: Vec::new(),
        }
    }
}

impl RunConfig {
    /// Default model and run, with the given parallel sizes. Uses 8 GPUs per node when the
    /// world has 8 or more ranks (NVSwitch node), otherwise one node holding the whole world.
    /// The layer count is raised to a multiple of `pp` (at least 2 layers per stage).
    /// Every parallelism variant in one run, one iteration: 16 ranks on 2 nodes, TP 2 with
    /// sequence parallelism, PP 2 with 2 virtual stages, DP 4 with the distributed optimizer,
    /// EP 2 over 4 experts (all-to-all dispatcher). A compact fixture for all traffic kinds.
    pub fn all_variants() -> Self {
        RunConfig {
            sequence_parallel: true,
            distributed_optimizer: true,
            virtual_stages: 2,
            ep: 2,
            num_experts: 4,
            iterations: 1,
            ..RunConfig::megatron(2, 2, 4)
        }
    }

    pub fn megatron(tp: usize, pp: usize, dp: usize) -> Self {
        let world = tp * pp * dp;
        let mut cfg = RunConfig {
            tp,
            pp,
            dp,
            gpus_per_node: if world >= 8 { 8 } else { world.max(1) },
            ..RunConfig::default()
        };
        let per_stage = (cfg.layers / pp.max(1)).max(2);
        cfg.layers = per_stage * pp.max(1);
        cfg
    }

    /// The Megatron configuration whose programs this run renders (`commlens_workload`).
    pub fn program_config(&self) -> commlens_workload::megatron::Config {
        commlens_workload::megatron::Config {
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            layers: self.layers,
            hidden: self.hidden,
            seq_len: self.seq_len,
            micro_batch: self.micro_batch,
            num_microbatches: self.num_microbatches,
            iterations: self.iterations,
            vocab: self.vocab,
            schedule: self.schedule,
            sequence_parallel: self.sequence_parallel,
            distributed_optimizer: self.distributed_optimizer,
            virtual_stages: self.virtual_stages,
            ep: self.ep,
            num_experts: self.num_experts,
            moe_layer_freq: self.moe_layer_freq,
            moe_topk: self.moe_topk,
            moe_dispatcher: self.moe_dispatcher,
            seed: self.seed,
        }
    }

    /// Number of ranks (processes).
    pub fn world(&self) -> usize {
        self.tp * self.pp * self.dp
    }

    /// Number of nodes (the last one may be partially used).
    pub fn nodes(&self) -> usize {
        self.world().div_ceil(self.gpus_per_node.max(1))
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

    /// Checks the configuration; [`crate::generate`] panics on what this rejects.
    pub fn validate(&self) -> Result<NcclVersion, ConfigError> {
        for (name, v) in [("gpus_per_node", self.gpus_per_node), ("nccl_channels", self.nccl_channels)] {
            if v == 0 {
                return Err(ConfigError(format!("{name} must be at least 1")));
            }
        }
        // The model and parallel layout: positive sizes, layers per stage, tp divisibility and
        // the variants (virtual stages, experts, sequence parallelism), as the program builder
        // checks them.
        self.program_config().validate().map_err(|e| ConfigError(e.0))?;
        if self.world() > MAX_WORLD {
            return Err(ConfigError(format!(
                "world size {} exceeds {MAX_WORLD}",
                self.world()
            )));
        }
        if self.gpus_per_node > 16 {
            return Err(ConfigError("gpus_per_node must be at most 16".into()));
        }
        if self.nccl_channels > 32 {
            return Err(ConfigError("nccl_channels must be at most 32".into()));
        }
        if self.broken_lines > 0 && !self.interleave {
            return Err(ConfigError("broken_lines needs interleave = true".into()));
        }
        if self.host_prefix.is_empty() || self.host_prefix.contains([':', ' ', '/']) {
            return Err(ConfigError(
                "host_prefix must be non-empty, without ':', ' ' or '/'".into(),
            ));
        }
        cuda_driver_version(&self.cuda_version)?;
        for s in &self.slowdowns {
            s.check(self.world())?;
        }
        parse_version(&self.nccl_version)
    }
}

/// `"12.8"` -> `12080`, the value NCCL prints as `cudaDriverVersion`.
pub(crate) fn cuda_driver_version(cuda: &str) -> Result<u32, ConfigError> {
    let mut it = cuda.split('.');
    let major = it.next().and_then(|s| s.parse::<u32>().ok());
    let minor = it.next().and_then(|s| s.parse::<u32>().ok()).or(Some(0));
    match (major, minor) {
        (Some(a), Some(b)) if a > 0 && b < 100 => Ok(a * 1000 + b * 10),
        _ => Err(ConfigError(format!(
            "bad cuda_version {cuda:?}, expected like \"12.8\""
        ))),
    }
}

/// Largest world the generator accepts: 2^17 ranks, enough for the 100,000-rank scaling
/// benchmark (`scripts/bench-scale`); generation time and memory grow linearly in ranks.
pub const MAX_WORLD: usize = 131_072;

/// Invalid [`RunConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid synth config: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Version gates for version-dependent line forms, on the project's
/// [`NcclVersion`] (from `commlens-core`).
///
/// Evidence: the real logs under `shared/data/real/nccl-logs` (2.16.5, 2.18.1, 2.20.5, 2.26.x,
/// 2.27.7, 2.28.9). Gates between two sampled versions are placed at the newer sample unless
/// the NCCL release notes say otherwise (runtime connection: 2.22).
pub trait LogFormat {
    /// Whether this version is at least 2.`minor`.
    fn at_least(&self, minor: u16) -> bool;
    /// `[nranks=N]` after the comm pointer of op lines (seen in 2.26.6, 2.27.7, 2.28.9).
    fn nranks_field(&self) -> bool {
        self.at_least(26)
    }

    /// Init lines start with the API name (`ncclCommInitRankConfig comm ...`): 2.26+.
    fn init_api_prefix(&self) -> bool {
        self.at_least(26)
    }

    /// Ring connections are made at the first collective (NCCL_RUNTIME_CONNECT, 2.22+),
    /// not during init.
    fn runtime_connect(&self) -> bool {
        self.at_least(22)
    }

    /// `Connected all rings, use ring PXN 0 GDR 1` instead of `Connected all rings` (2.26+).
    fn ring_pxn_suffix(&self) -> bool {
        self.at_least(26)
    }

    /// The channel summary has a non-zero collnet count (2.26+); before, `0 collnet channels`.
    fn collnet_count(&self) -> bool {
        self.at_least(26)
    }

    /// The channel summary names collnet channels at all (2.19+).
    fn collnet_field(&self) -> bool {
        self.at_least(19)
    }

    /// `MNNVL 0` at the end of the rank-layout line (2.20+).
    fn mnnvl_field(&self) -> bool {
        self.at_least(20)
    }

    /// `Bootstrap: Using` (2.27) rather than `Bootstrap : Using` (older).
    fn bootstrap_colon_style(&self) -> bool {
        self.at_least(27)
    }

    /// `Init timings - ...` and `Bootstrap timings ...` lines (2.26+, seen in 2.27.7/2.28.9).
    fn init_timings(&self) -> bool {
        self.at_least(26)
    }

    /// `NET[..] - NET/0-0 (0/0/0/25.000000)` suffix in the topology dump (2.28).
    fn net_node_suffix(&self) -> bool {
        self.at_least(28)
    }
}

impl LogFormat for NcclVersion {
    fn at_least(&self, minor: u16) -> bool {
        self.major > 2 || (self.major == 2 && self.minor >= minor)
    }
}

/// Parses `"2.27.7"` (extra components such as `"2.28.9.1"` are ignored);
/// the generator knows the line forms of 2.12 and later.
pub fn parse_version(s: &str) -> Result<NcclVersion, ConfigError> {
    let parts: Vec<&str> = s.split('.').collect();
    let v = if parts.len() >= 3 { NcclVersion::parse(parts[..3].join(".").as_bytes()) } else { None };
    match v {
        Some(v) if v.major == 2 && v.minor >= 12 && parts[2].parse::<u16>().is_ok() => Ok(v),
        _ => Err(ConfigError(format!("bad nccl_version {s:?}, expected 2.<minor>.<patch> with minor >= 12"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_small() {
        let c = RunConfig::default();
        assert_eq!(c.world(), 4);
        assert_eq!(c.nodes(), 1);
        assert_eq!(
            c.validate().unwrap(),
            NcclVersion {
                major: 2,
                minor: 27,
                patch: 7
            }
        );
    }

    #[test]
    fn megatron_constructor() {
        let c = RunConfig::megatron(2, 4, 2);
        assert_eq!(c.world(), 16);
        assert_eq!(c.gpus_per_node, 8);
        assert_eq!(c.nodes(), 2);
        assert_eq!(c.layers % 4, 0);
        c.validate().unwrap();
    }

    #[test]
    fn rejects_bad_configs() {
        let mut c = RunConfig {
            layers: 3,
            ..RunConfig::default()
        };
        assert!(c.validate().is_err());
        c = RunConfig {
            broken_lines: 2,
            ..RunConfig::default()
        };
        assert!(c.validate().is_err());
        c = RunConfig {
            nccl_version: "2.x".into(),
            ..RunConfig::default()
        };
        assert!(c.validate().is_err());
        // ep must divide dp; interleaving needs pp > 1 and whole microbatch groups
        c = RunConfig { ep: 2, num_experts: 4, ..RunConfig::megatron(1, 1, 3) };
        assert!(c.validate().is_err());
        c = RunConfig { virtual_stages: 2, ..RunConfig::megatron(2, 1, 1) };
        assert!(c.validate().is_err());
        c = RunConfig { virtual_stages: 2, num_microbatches: 3, ..RunConfig::megatron(1, 2, 1) };
        assert!(c.validate().is_err());
        c = RunConfig { virtual_stages: 2, num_microbatches: 4, ..RunConfig::megatron(1, 2, 1) };
        assert!(c.validate().is_ok());
        assert_eq!(cuda_driver_version("12.8").unwrap(), 12080);
        assert_eq!(cuda_driver_version("13.0").unwrap(), 13000);
    }

    #[test]
    fn version_gates() {
        let v = parse_version("2.28.9.1").unwrap();
        assert!(v.nranks_field() && v.net_node_suffix());
        let old = parse_version("2.20.5").unwrap();
        assert!(!old.nranks_field() && !old.runtime_connect() && old.mnnvl_field());
    }
}
