//! Fuzzing that stays: `ModelConfig::parse` (model.conf) over mutated
//! example and hand-written configurations. Property: Ok or Err within a
//! bounded time, no panic, no unbounded allocation. Knobs: see
//! `crates/ingest/tests/fuzz_support`.

#[path = "../../ingest/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use commlens_analyze::volume::ModelConfig;
use fuzz_support::{mutate, run, Kind, Seed};

counting_allocator!();

#[test]
fn fuzz_model_conf() {
    let seeds = [
        Seed::new("demo", include_str!("../../../examples/demo-model.conf")),
        Seed::new(
            "hand",
            "layers = 96\nhidden = 12288\nseq_len = 2048\nvocab = 51200\nmicro_batch = 1\nnum_microbatches = 64\n\
iterations = 1\nbytes_per_element = 2\ngrad_bytes = 4\ntp = 8\npp = 8\ndp = 16\nparam_formula = megatron\n\
pp_scatter_gather = false\n",
        ),
    ];
    run(
        "model_conf",
        |rng, i, n| {
            let s = rng.pick(&seeds);
            mutate(rng, &s.data, Kind { text: true, ..Kind::default() }, i, n)
        },
        |d| {
            let text = String::from_utf8_lossy(d);
            ModelConfig::parse(&text).is_ok()
        },
    );
}
