//! Prints what the NCCL log reader makes of files: `cargo run --example readlog -- FILE…`.
use commlens_ingest::nccl_log::{load_path, ReadOptions};
use std::path::PathBuf;

fn main() {
    if let Ok(p) = std::env::var("COMPARE") { compare_paths(std::path::Path::new(&p)); return; }
    if let Ok(p) = std::env::var("CHUNKS") { return chunks(std::path::Path::new(&p)); }
    for arg in std::env::args().skip(1) {
        let path = PathBuf::from(&arg);
        match load_path(&path, &ReadOptions::default()) {
            Ok((t, r)) => {
                println!("== {arg}");
                println!(
                    "lines {} segs {} ops {} recovered {} rejoined {} broken {} unrecovered {} tuning {} tuned {} unmatched {} calls {} init {} chan {} topo {}/{} malformed {} unknown {} non-nccl {}",
                    r.lines, r.nccl_segments, r.ops, r.recovered_ops, r.rejoined_lines, r.broken_segments,
                    r.broken_unrecovered, r.tuning_lines, r.tuned_ops, r.tuning_unmatched, r.call_lines,
                    r.init_lines, r.channel_lines, r.topology_lines, r.topology_blocks, r.malformed.total(),
                    r.unknown.total(), r.non_nccl_lines
                );
                println!("procs {} devices {} comms {} topologies {}", t.processes.len(), t.devices.len(), t.comms.len(), t.topologies.len());
                for p in &t.processes { println!("  proc {}:{}", p.host, p.pid); }
                for c in &t.comms {
                    let p = &t.processes[c.proc.ix()];
                    println!("  comm {}:{} {:#x} id {:?} rank {:?}/{:?} ops {}", p.host, p.pid, c.ptr, c.comm_id, c.rank, c.nranks, c.n_ops);
                }
                for (d, ops) in t.per_rank.iter().enumerate() {
                    let bytes: u64 = ops.iter().map(|o| o.bytes).sum();
                    println!("  dev{d} {} ops {} bytes", ops.len(), bytes);
                }
                for m in r.malformed.sorted() {
                    println!("  MALFORMED {} x{} e.g. {:?}", m.kind, m.count, m.samples.first());
                }
                for k in r.unknown.sorted().iter().take(8) {
                    println!("  unknown {} x{}", k.kind, k.count);
                }
            }
            Err(e) => println!("== {arg}\nERROR {e}"),
        }
    }
}

#[allow(dead_code)]
fn compare_paths(path: &std::path::Path) {
    use commlens_ingest::nccl_log::prefix::{split_line, split_line_scan, KnownHosts};
    let data = std::fs::read(path).unwrap();
    let (mut h1, mut h2) = (KnownHosts::default(), KnownHosts::default());
    let (mut o1, mut o2) = (Vec::new(), Vec::new());
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        let a = split_line(line, &mut h1, &mut o1);
        let b = split_line_scan(line, &mut h2, &mut o2);
        if a != b || o1 != o2 {
            println!("DIFF line {}: {}\n  fast {:?}\n  scan {:?}", i + 1, String::from_utf8_lossy(line), o1, o2);
        }
    }
}

/// `CHUNKS=FILE`: how the parallel reader cuts FILE, how many chunks its join
/// had to read again, and the time (the chunk size from `COMMLENS_CHUNK_BYTES`).
fn chunks(path: &std::path::Path) {
    use commlens_ingest::nccl_log::chunked::{plan, read_chunked};
    let opts = ReadOptions::default();
    let Some(ranges) = plan(path, &opts) else { return println!("{}: read sequentially", path.display()) };
    let t = std::time::Instant::now();
    let c = read_chunked(path, &opts, &ranges, false, &|| 0u64, &|n: &mut u64, _| *n += 1).unwrap();
    let folded: u64 = c.parts.iter().map(|p| p.0).sum();
    println!(
        "{}: {} chunks, {} read again by the join {:?}, {} ops ({} folded), {:.3} s",
        path.display(),
        c.chunks,
        c.replayed,
        c.reasons,
        c.report.ops,
        folded,
        t.elapsed().as_secs_f64()
    );
}
