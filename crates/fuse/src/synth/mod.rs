//! Test data with exact ground truth, deterministic in a seed.
//!
//! * [`rng`]: the seeded PRNG;
//! * [`megatron`]: Megatron-like ranks (TP/PP/DP, fusion, 2:1 batching, anomalies, drops),
//!   simulated by [`gpu_sim`], all ranks stepped together (`world`);
//! * [`validation`]: the five alignment validation cases of thesis §4.3.1;
//! * [`table_4_5`]: the four comparative scenarios of thesis Table 4.5, with the
//!   thesis's published F1 scores next to them.

pub mod gpu_sim;
pub mod megatron;
pub mod rng;
pub mod validation;
mod world;

pub use megatron::{generate, generate_rank, MegatronConfig, RankTrace};

/// One scenario of thesis Table 4.5: 4 ranks × 200 operations.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: &'static str,
    /// F1 the thesis reports for its optimized Needleman-Wunsch.
    pub thesis_nw_f1: f64,
    /// F1 the thesis reports for its sliding-window baseline.
    pub thesis_sliding_window_f1: f64,
    pub config: MegatronConfig,
}

/// The thesis's average optimized-NW F1 over the four scenarios.
pub const THESIS_AVERAGE_NW_F1: f64 = 0.893;

/// The four scenarios as the thesis's alphabet-level aligner can score them:
/// one-to-one only (TP=4, no pipeline so no Send/Recv fusion, no 2:1 batching,
/// no orphan records or kernels, no Generic kernels). The thesis does not
/// describe its generator; this is the closest reading of "Easy 1:1".
pub fn table_4_5_one_to_one(seed: u64) -> Vec<Scenario> {
    table_4_5(seed)
        .into_iter()
        .map(|mut sc| {
            sc.config = MegatronConfig {
                tp: 4,
                pp: 1,
                batching: false,
                orphan_log_rate: 0.0,
                orphan_kernel_rate: 0.0,
                generic_kernel_rate: 0.0,
                ..sc.config
            };
            sc
        })
        .collect()
}

/// The four scenarios (none dropped, 20% of kernels dropped, 20% of log records
/// dropped, both), on a TP=2 × PP=2 run of 4 ranks with 200 kernels each,
/// 2:1 batching on one rank per TP group, and the §4.1.1 anomalies.
pub fn table_4_5(seed: u64) -> Vec<Scenario> {
    let base = MegatronConfig {
        seed,
        ..MegatronConfig::default()
    };
    let with = |kd: f64, ld: f64| MegatronConfig {
        kernel_drop: kd,
        log_drop: ld,
        ..base.clone()
    };
    vec![
        Scenario {
            name: "Easy 1:1",
            thesis_nw_f1: 0.988,
            thesis_sliding_window_f1: 1.000,
            config: with(0.0, 0.0),
        },
        Scenario {
            name: "Nsys drops 20%",
            thesis_nw_f1: 0.912,
            thesis_sliding_window_f1: 0.916,
            config: with(0.2, 0.0),
        },
        Scenario {
            name: "NCCL drops 20%",
            thesis_nw_f1: 0.868,
            thesis_sliding_window_f1: 0.276,
            config: with(0.0, 0.2),
        },
        Scenario {
            name: "Both drop 20%",
            thesis_nw_f1: 0.805,
            thesis_sliding_window_f1: 0.256,
            config: with(0.2, 0.2),
        },
    ]
}
