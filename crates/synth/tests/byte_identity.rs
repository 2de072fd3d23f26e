//! Byte identity of the generator across the move of the Megatron program into
//! `commlens-workload` (`workload::megatron`).
//!
//! The hashes below were RECORDED WITH THE CODE BEFORE THE MOVE (when `commlens-synth` still held
//! its own `traffic`/`interleaved`/`moe`/`params` program), for the fixed configurations of
//! `tests/support/cases.rs`: the demo's default, MoE with each dispatcher, interleaved virtual
//! stages, sequence parallelism, the distributed optimizer, pp = 1, tp = 1, all-forward-all-
//! backward, a combined file with call lines on NCCL 2.20, every variant at once, one rank.
//! Each hash covers the run's files (logs, `combined.log`), its truth as JSON, the traced run's
//! logs, its trace truth as JSON and every rank's kernels (FNV-1a 64 over all of them in order).
//! A mismatch means the generated output changed: if that is intended, print the new table with
//! `COMMLENS_PRINT_HASHES=1 cargo test -p commlens-synth --test byte_identity -- --nocapture`
//! and say in the commit why the output changed.

mod support;

use commlens_synth::{generate, generate_traces, TraceConfig};

struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separator, so moving bytes between parts changes the hash.
        self.0 ^= 0xff;
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

fn hash_case(cfg: &commlens_synth::RunConfig) -> u64 {
    let mut h = Fnv::new();
    let run = generate(cfg);
    for f in &run.files {
        h.add(f.name.as_bytes());
        h.add(f.contents.as_bytes());
    }
    h.add(serde_json::to_string(&run.truth).unwrap().as_bytes());
    let g = generate_traces(cfg, &TraceConfig::default()).unwrap();
    for f in &g.logs {
        h.add(f.name.as_bytes());
        h.add(f.contents.as_bytes());
    }
    h.add(serde_json::to_string(&g.truth).unwrap().as_bytes());
    for r in 0..cfg.world() {
        h.add(format!("{:?}", g.kernels(r)).as_bytes());
    }
    h.0
}

/// Recorded before the move (see the module docs).
const RECORDED: &[(&str, u64)] = &[
    ("default", 0xd3e1db83329131a1),
    ("moe-a2a", 0xbc1c07ed6c1e177b),
    ("moe-ag", 0xefe1ba782201f68a),
    ("moe-ep-eq-dp-freq2", 0x2548acb5e5f98b31),
    ("vpp", 0x1324e5b7c0c8626f),
    ("vpp-tp-dp", 0x9a6973411cc68e72),
    ("sp", 0xe68a19b54437d8ff),
    ("distopt", 0x4c73f5f826898ce1),
    ("pp1", 0x82d46cbf8d4d3276),
    ("tp1", 0xb4fbf7ac52f60e87),
    ("afab", 0x84f1293f10b329cc),
    ("combined-calls-2.20", 0xa7dd9798a3757b2c),
    ("all-variants", 0xf144e11de410bb3d),
    ("single-rank", 0xf020591e2e9eda27),
];

#[test]
fn generated_output_is_byte_identical_to_the_recorded_one() {
    let print = std::env::var_os("COMMLENS_PRINT_HASHES").is_some();
    let mut bad = Vec::new();
    for (name, cfg) in support::cases::cases() {
        let got = hash_case(&cfg);
        if print {
            println!("    (\"{name}\", {got:#018x}),");
        }
        match RECORDED.iter().find(|(n, _)| *n == name) {
            Some(&(_, want)) if want == got => {}
            Some(&(_, want)) => bad.push(format!("{name}: {got:#018x}, recorded {want:#018x}")),
            None => bad.push(format!("{name}: no recorded hash")),
        }
    }
    assert!(bad.is_empty(), "generated output changed:\n{}", bad.join("\n"));
}
