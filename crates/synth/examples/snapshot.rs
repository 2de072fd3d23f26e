//! Writes every byte-identity case (`tests/support/cases.rs`) into `OUT_DIR/<case>/`: the run's
//! logs and truth, and the traced run's logs, Kineto traces, nsys exports and trace truth.
//! Used to compare the generator's output before and after a change with `diff -r`.
//!
//! `cargo run -p commlens-synth --example snapshot -- OUT_DIR`

#[path = "../tests/support/cases.rs"]
mod cases;

use commlens_synth::{generate, generate_traces, write_to_dir, TraceConfig};
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: snapshot OUT_DIR"));
    for (name, cfg) in cases::cases() {
        let dir = out.join(name);
        let run = generate(&cfg);
        write_to_dir(&run, &dir.join("run")).unwrap();
        std::fs::write(dir.join("truth.json"), serde_json::to_string_pretty(&run.truth).unwrap()).unwrap();
        let tcfg = TraceConfig::default();
        let g = generate_traces(&cfg, &tcfg).unwrap();
        g.write_logs(&dir.join("trace-logs")).unwrap();
        g.write_kineto(&dir.join("kineto"), false).unwrap();
        g.write_nsys(&dir.join("nsys"), &tcfg).unwrap();
        std::fs::write(dir.join("trace-truth.json"), serde_json::to_string_pretty(&g.truth).unwrap()).unwrap();
        println!("{name}: {} files, {} bytes", run.files.len(), run.total_bytes());
    }
}
