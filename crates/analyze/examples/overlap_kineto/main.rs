//! `cargo run --release -p commlens-analyze --example overlap_kineto -- [--hta] [--steps] FILE|DIR…`
//!
//! Compute/communication overlap of Kineto traces (one file per rank), read
//! in parallel with one thread per core; prints one JSON object per rank
//! (overlap share, communication, exposed communication, kernel-type
//! breakdown, optionally per step) and a last line with the kernel-type
//! breakdown summed over ranks. `--hta` prepares the spans as HTA does
//! (see `spans.rs`), for `scripts/bench-hta`.

mod spans;

use commlens_analyze::overlap::{comm_comp_overlap, OverlapReport};
use commlens_ingest::kineto::{load_kineto_with, TraceOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

fn files(args: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in args {
        let p = PathBuf::from(a);
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&p)
                .expect("readable directory")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().contains(".json"))
                .collect();
            v.sort();
            out.extend(v);
        } else {
            out.push(p);
        }
    }
    out
}

fn line(rank: Option<u32>, file: &str, r: &OverlapReport, with_steps: bool) -> String {
    let pct = r.overlap_pct.map_or("null".to_string(), |p| format!("{p:.4}"));
    let kinds: Vec<String> = r.kernel_type_breakdown().iter().map(|(k, ns)| format!("\"{k}\":{ns}")).collect();
    let mut s = format!(
        "{{\"rank\":{},\"file\":{:?},\"overlap_pct\":{pct},\"comm_ns\":{},\"overlap_ns\":{},\"exposed_comm_ns\":{},\
         \"compute_ns\":{},\"span_ns\":{},\"idle_ns\":{},\"kernel_types_ns\":{{{}}}",
        rank.map_or("null".to_string(), |r| r.to_string()),
        file,
        r.comm_ns,
        r.overlap_ns,
        r.exposed_comm_ns,
        r.compute_ns,
        r.span_ns,
        r.idle_ns,
        kinds.join(",")
    );
    if with_steps {
        let it: Vec<String> =
            r.iterations.iter().map(|i| format!("[{},{},{}]", i.start_ns, i.comm_ns, i.exposed_comm_ns)).collect();
        s.push_str(&format!(",\"steps\":[{}]", it.join(",")));
    }
    s.push('}');
    s
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let hta = args.iter().any(|a| a == "--hta");
    let with_steps = args.iter().any(|a| a == "--steps");
    let paths = files(&args.iter().filter(|a| !a.starts_with("--")).cloned().collect::<Vec<_>>());
    if paths.is_empty() {
        eprintln!("usage: overlap_kineto [--hta] [--steps] FILE|DIR…");
        std::process::exit(2);
    }
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(paths.len());
    let opts = TraceOptions { allow_no_kernels: true, ..TraceOptions::default() };
    // Each worker reads a file, analyses its rank and drops the trace before the next.
    let mut results: Vec<(usize, Option<u32>, String, OverlapReport)> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                sc.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(p) = paths.get(i) else { break };
                        let trace = match load_kineto_with(p, &opts) {
                            Ok(t) => t,
                            Err(e) => {
                                eprintln!("{e}");
                                continue;
                            }
                        };
                        for rank in &trace.ranks {
                            let o = if hta { spans::hta_options(&trace, rank) } else { spans::SpanOptions::default() };
                            let steps = spans::steps(&trace, rank);
                            let (sp, _names) = spans::rank_spans(rank, &o);
                            let rep = comm_comp_overlap(sp, Some(&steps));
                            mine.push((i, rank.rank, p.display().to_string(), rep));
                        }
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("worker")).collect()
    });
    results.sort_by_key(|r| (r.1, r.0));
    let mut total = [0i64; 16];
    for (_, rank, file, rep) in &results {
        println!("{}", line(*rank, file, rep, with_steps));
        for (t, v) in total.iter_mut().zip(rep.by_set_ns) {
            *t += v;
        }
    }
    let sum = OverlapReport { by_set_ns: total, ..OverlapReport::default() };
    let kinds: Vec<String> = sum.kernel_type_breakdown().iter().map(|(k, ns)| format!("\"{k}\":{ns}")).collect();
    println!("{{\"ranks\":{},\"kernel_types_ns\":{{{}}}}}", results.len(), kinds.join(","));
}
