//! Fuzzing that stays: `cluster_from_toml` (cluster TOML) over mutated
//! example and hand-written cluster files; a cluster that parses is also
//! asked for its GPU count and bandwidths. Property: Ok or Err within a
//! bounded time, no panic, no unbounded allocation. Knobs: see
//! `crates/ingest/tests/fuzz_support`.

#[path = "../../ingest/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use commlens_model::cluster_toml::cluster_from_toml;
use fuzz_support::{mutate, run, Kind, Seed};

counting_allocator!();

#[test]
fn fuzz_cluster_toml() {
    let seeds = [
        Seed::new("example", include_str!("../../../examples/cluster.toml")),
        Seed::new("preset", "preset = \"dgx-h100\"\nnodes = 4\n"),
        Seed::new(
            "hand",
            "name = \"x\"\nnodes = 2\ngpus_per_node = 4\ngpu = \"A100\"\n[intra]\nfabric = \"pcie\"\n[nics]\ncount = 1\nspeed = \"100g\"\n",
        ),
    ];
    run(
        "cluster_toml",
        |rng, i, n| {
            let s = rng.pick(&seeds);
            mutate(rng, &s.data, Kind { text: true, ..Kind::default() }, i, n)
        },
        |d| {
            let text = String::from_utf8_lossy(d);
            match cluster_from_toml(&text, "fuzz.toml") {
                Ok(c) => {
                    let _ = (c.gpus(), c.intra_gb_s(0), c.net_latency_us(2), c.node_net_gb_s(2));
                    true
                }
                Err(_) => false,
            }
        },
    );
}
