//! Writes a synthetic run to a directory and prints its ground-truth summary.
//!
//! `cargo run -p commlens-synth --example gen -- OUT_DIR [TP PP DP] [--interleave N] [--no-ts] [--seed S] [--version V]
//! [--gpus-per-node G] [--calls] [--slowdown 'comm:tp rank:R iter:I[..[J]] factor:F [op:K]']`

use commlens_synth::{generate_into, RunConfig};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first().map(PathBuf::from) else {
        eprintln!("usage: gen OUT_DIR [TP PP DP] [--interleave BROKEN] [--no-ts] [--seed S] [--version V] [--gpus-per-node G] [--calls] [--stream]");
        return ExitCode::from(2);
    };
    let nums: Vec<usize> = args[1..]
        .iter()
        .take_while(|a| !a.starts_with("--"))
        .filter_map(|a| a.parse().ok())
        .collect();
    let mut cfg = match nums.as_slice() {
        [tp, pp, dp] => RunConfig::megatron(*tp, *pp, *dp),
        [] => RunConfig::default(),
        _ => {
            eprintln!("give TP PP DP together");
            return ExitCode::from(2);
        }
    };
    let mut stream = false;
    let mut it = args[1..].iter().skip_while(|a| !a.starts_with("--"));
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().unwrap_or_default();
        match flag.as_str() {
            "--interleave" => {
                cfg.interleave = true;
                cfg.broken_lines = value().parse().unwrap_or(0);
            }
            "--no-ts" => cfg.timestamps = false,
            "--gpus-per-node" => cfg.gpus_per_node = value().parse().unwrap_or(cfg.gpus_per_node),
            "--calls" => cfg.call_lines = true,
            "--stream" => stream = true,
            "--seed" => cfg.seed = value().parse().unwrap_or(cfg.seed),
            "--version" => cfg.nccl_version = value(),
            "--slowdown" => match value().parse() {
                Ok(s) => cfg.slowdowns.push(s),
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(2);
                }
            },
            other => {
                eprintln!("unknown flag {other}");
                return ExitCode::from(2);
            }
        }
    }
    if stream {
        return match commlens_synth::stream_into(&cfg, &dir) {
            Ok(w) => {
                println!("{} ranks: {} files, {} lines, {} bytes in {}", cfg.world(), w.files, w.lines, w.bytes, dir.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match generate_into(&cfg, &dir) {
        Ok(run) => {
            print!("{}", run.truth.summary());
            println!(
                "{} files, {} bytes in {}",
                run.files.len(),
                run.total_bytes(),
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
