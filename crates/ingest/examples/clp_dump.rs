//! Prints the communicators (stderr) and every event (stdout, one JSON line
//! each) of a `.clp` file written by the commlens plugin: a debugging aid for
//! questions the table does not answer (which ProxyOps and KernelCh events an
//! operation had, and when the proxy saw them).
//! `cargo run --release -p commlens-ingest --example clp_dump -- FILE.clp`
use std::io::Write;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: clp_dump FILE.clp");
        std::process::exit(2);
    };
    let t = match commlens_ingest::plugin_out::read_trace(std::path::Path::new(&path)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    for c in &t.comms {
        eprintln!("comm {}: {c:?}", c.index);
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for e in &t.events {
        let line = serde_json::to_string(e).expect("events serialize");
        if writeln!(out, "{line}").is_err() {
            return; // a closed pipe (`| head`)
        }
    }
}
