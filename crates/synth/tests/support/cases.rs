//! The fixed configurations of the byte-identity check (`tests/byte_identity.rs` and
//! `examples/snapshot.rs`): the demo's default and one run per parallelism variant.

use commlens_synth::{MoeDispatcher, RunConfig, Schedule};

/// `(name, config)` of every case.
pub fn cases() -> Vec<(&'static str, RunConfig)> {
    let moe = |d| RunConfig { ep: 2, num_experts: 4, moe_dispatcher: d, iterations: 1, ..RunConfig::megatron(2, 2, 4) };
    vec![
        ("default", RunConfig::default()),
        ("moe-a2a", moe(MoeDispatcher::AllToAll)),
        ("moe-ag", moe(MoeDispatcher::AllGather)),
        (
            "moe-ep-eq-dp-freq2",
            RunConfig { ep: 4, num_experts: 8, moe_layer_freq: 2, moe_topk: 1, iterations: 1, ..RunConfig::megatron(1, 2, 4) },
        ),
        ("vpp", RunConfig { virtual_stages: 2, num_microbatches: 8, layers: 16, ..RunConfig::megatron(1, 4, 1) }),
        ("vpp-tp-dp", RunConfig { virtual_stages: 2, num_microbatches: 4, iterations: 1, ..RunConfig::megatron(2, 2, 2) }),
        ("sp", RunConfig { sequence_parallel: true, ..RunConfig::megatron(2, 2, 2) }),
        ("distopt", RunConfig { distributed_optimizer: true, hidden: 2048, ..RunConfig::megatron(2, 2, 4) }),
        ("pp1", RunConfig::megatron(2, 1, 4)),
        ("tp1", RunConfig::megatron(1, 4, 2)),
        ("afab", RunConfig { schedule: Schedule::AllForwardAllBackward, ..RunConfig::megatron(2, 2, 2) }),
        (
            "combined-calls-2.20",
            RunConfig {
                interleave: true,
                broken_lines: 3,
                call_lines: true,
                nccl_version: "2.20.5".into(),
                ..RunConfig::megatron(2, 2, 2)
            },
        ),
        ("all-variants", RunConfig::all_variants()),
        ("single-rank", RunConfig::megatron(1, 1, 1)),
    ]
}
