//! Byte identity of the generator's output, for the fixed configurations of
//! `tests/support/cases.rs`: the demo's default, MoE with each dispatcher, interleaved virtual
//! stages, sequence parallelism, the distributed optimizer, pp = 1, tp = 1, all-forward-all-
//! backward, a combined file with call lines on NCCL 2.20, every variant at once, one rank.
//!
//! Two tables:
//! - `RECORDED`: every byte. Each hash covers the run's files (logs, `combined.log`), its truth
//!   as JSON, the traced run's logs, its trace truth as JSON and every rank's kernels (FNV-1a 64
//!   over all of them in order). First recorded before the Megatron program moved into
//!   `commlens-workload` (the move kept every byte); re-recorded when the step durations came to
//!   be the simulator's models (`commlens-synth`'s `timing`: roofline compute, the collective
//!   model on the generated cluster) and every collective came to wait for its last member,
//!   which moved every timestamp; re-recorded when the model's point-to-point calls within a
//!   node (Send/Recv, AllToAll) became host time per call and Send/Recv plus one device step
//!   (the cases with pipeline send/recv or all-to-all moved; pp1, distopt, moe-ag and
//!   single-rank kept every byte). These hashes depend on the
//!   roofline's and the collective model's constants, so a calibration change there changes them.
//! - `RECORDED_UNTIMED`: what no timing may change: every process's log with each line's
//!   timestamp cut off, and the truth without the combined file's (time-ordered) interleaving.
//!   RECORDED WITH THE CODE BEFORE THE TIMING CHANGE (the flat FLOP rate and synth's own link
//!   model) and equal after it: the durations moved, not one operation, line or truth field.
//!   Re-recorded for `default` and `vpp` (the cases with 4-GPU nodes) when the model stopped
//!   giving every communicator on an NVLink mesh all of a GPU's links: their 4-rank
//!   communicators' logged search graphs (`Pattern … bw`) went from one pair's links to the
//!   three pairs they use (20 → 60 GB/s per channel), and with them their durations.
//!
//! A mismatch means the generated output changed: if that is intended, print the new tables
//! with `COMMLENS_PRINT_HASHES=1 cargo test -p commlens-synth --test byte_identity -- --nocapture`
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

/// Every byte, recorded with the simulator's timing (see the module docs).
const RECORDED: &[(&str, u64)] = &[
    ("default", 0x6e62831f5e7e01bd),
    ("moe-a2a", 0x2caf42700ed12023),
    ("moe-ag", 0xda566ce23f141051),
    ("moe-ep-eq-dp-freq2", 0x564c8bc16f154e37),
    ("vpp", 0x5fe695098e2e993d),
    ("vpp-tp-dp", 0x1f28d86a518e2122),
    ("sp", 0x928d9255576a3e51),
    ("distopt", 0xc36e26252e33f50f),
    ("pp1", 0x2c20db4957ac6d38),
    ("tp1", 0x3d96f5feaf0aeb9a),
    ("afab", 0x3ac71161704eb3ce),
    ("combined-calls-2.20", 0x099c9a7d27d8258b),
    ("all-variants", 0x83ee033be536dc2b),
    ("single-rank", 0x010d9ba22e21afa0),
];

/// Everything but time, recorded before the timing change (see the module docs).
const RECORDED_UNTIMED: &[(&str, u64)] = &[
    ("default", 0xdd5f42ddeea6addc),
    ("moe-a2a", 0x1db816d706e7920a),
    ("moe-ag", 0x3f40387f98615308),
    ("moe-ep-eq-dp-freq2", 0xae5da47c764be38d),
    ("vpp", 0xdcb503ee78347203),
    ("vpp-tp-dp", 0x52e8cbbb2f015f4f),
    ("sp", 0x3e2245000af25aa0),
    ("distopt", 0x425318c08bac2302),
    ("pp1", 0x82c93249efe40c9f),
    ("tp1", 0x06b92e8f2b7f64cd),
    ("afab", 0x93316e33613718aa),
    ("combined-calls-2.20", 0xe0b603ab37da2297),
    ("all-variants", 0x977ec49ad435d9d0),
    ("single-rank", 0x8845acfbf4fdf41c),
];

/// The run's per-process logs with each line's timestamp cut off, and its truth without the
/// combined file's interleaving (which follows the processes' clocks).
fn hash_untimed(cfg: &commlens_synth::RunConfig) -> u64 {
    let mut h = Fnv::new();
    let mut run = generate(cfg);
    for f in run.files.iter().filter(|f| f.name != "combined.log") {
        h.add(f.name.as_bytes());
        for line in f.contents.lines() {
            let rest = if cfg.timestamps { line.split_once(' ').map_or(line, |(_, r)| r) } else { line };
            h.add(rest.as_bytes());
        }
    }
    run.truth.combined = None;
    h.add(serde_json::to_string(&run.truth).unwrap().as_bytes());
    h.0
}

/// Compares `hash` of every case with `table`; the mismatches.
fn check(table: &[(&str, u64)], title: &str, hash: fn(&commlens_synth::RunConfig) -> u64) -> Vec<String> {
    let print = std::env::var_os("COMMLENS_PRINT_HASHES").is_some();
    if print {
        println!("{title}:");
    }
    let mut bad = Vec::new();
    for (name, cfg) in support::cases::cases() {
        let got = hash(&cfg);
        if print {
            println!("    (\"{name}\", {got:#018x}),");
        }
        match table.iter().find(|(n, _)| *n == name) {
            Some(&(_, want)) if want == got => {}
            Some(&(_, want)) => bad.push(format!("{title} {name}: {got:#018x}, recorded {want:#018x}")),
            None => bad.push(format!("{title} {name}: no recorded hash")),
        }
    }
    bad
}

#[test]
fn generated_output_is_byte_identical_to_the_recorded_one() {
    let bad = check(RECORDED, "RECORDED", hash_case);
    assert!(bad.is_empty(), "generated output changed:\n{}", bad.join("\n"));
}

#[test]
fn generated_output_but_its_times_is_what_it_was_before_the_timing_change() {
    let bad = check(RECORDED_UNTIMED, "RECORDED_UNTIMED", hash_untimed);
    assert!(bad.is_empty(), "generated operations, lines or truth changed:\n{}", bad.join("\n"));
}
