//! Parse throughput of the NCCL log reader next to `wc -l` on the same file.
//!
//! ```text
//! bash scripts/bench [--mb N] [--runs K] [--same-pids] [--logs DIR]
//! cargo run --release -p commlens-ingest --example bench_parse -- [--mb N] …
//! ```
//!
//! Builds (or reuses) a log of about N MB (default 400; 1 MB = 10^6 bytes)
//! under `target/bench-data/` by concatenating the real logs that have
//! per-operation lines, and a second one of N/4 MB. Copy k of each source log
//! gets k·1 000 000 added to the pid of every `host:pid:tid` prefix, so that
//! copies look like other processes (`--same-pids` concatenates unchanged).
//!
//! For each file: `wc -l FILE` as a child process, best of K (after one
//! warm-up read that puts the file in the page cache), then the reader, one
//! thread, in a child process of this example (`--child-parse FILE`) with a
//! sink that only counts operations and sums their bytes, best of K; the child
//! reports its peak RSS (`VmHWM`). Both are timed the same way: from spawn to
//! exit of the child.
//!
//! Three reference contenders run the same way in the same run (see `floor`):
//! the `read()`-based line reader alone, the memory-mapped line source alone
//! (the one `read_path` uses for plain files), and a minimal scanner that
//! reads only the fields of opCount lines. They show where the target sits against any reader of this
//! shape, not just this one.

use commlens_ingest::bytes::is_host_byte;
use commlens_ingest::nccl_log::{read_path, ReadOptions};
use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

mod floor;

const SOURCES: &[&str] = &[
    "timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log",
    "ssbandjl-nccl-tests-run_with_mpi_2node_4gpu_trace-4xV100-2node-IB-2.26.6-modified.log",
    "ssbandjl-nccl-tests-all_ref_log-V100-2.26.6-modified.log",
    "sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log",
];
const MB: f64 = 1e6;

struct Args {
    mb: u64,
    runs: usize,
    same_pids: bool,
    logs: PathBuf,
}

fn usage() -> ! {
    eprintln!("usage: bench_parse [--mb N] [--runs K] [--same-pids] [--logs DIR]");
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        mb: 400,
        runs: 3,
        same_pids: false,
        logs: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/real/nccl-logs")),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--mb" => a.mb = it.next().and_then(|v| v.parse().ok()).filter(|&v| v >= 4).unwrap_or_else(|| usage()),
            "--runs" => a.runs = it.next().and_then(|v| v.parse().ok()).filter(|&v| v >= 1).unwrap_or_else(|| usage()),
            "--same-pids" => a.same_pids = true,
            "--logs" => a.logs = it.next().map(PathBuf::from).unwrap_or_else(|| usage()),
            "-h" | "--help" => usage(),
            _ => {
                eprintln!("unknown argument {arg:?}");
                usage()
            }
        }
    }
    a
}

fn main() {
    let mut argv = std::env::args().skip(1);
    match argv.next().as_deref() {
        Some("--child-parse") => return child_parse(Path::new(&argv.next().unwrap_or_else(|| usage()))),
        Some("--child-lines") => {
            return println!("{}", floor::child_lines(Path::new(&argv.next().unwrap_or_else(|| usage()))));
        }
        Some("--child-mapped-lines") => {
            return println!("{}", floor::child_mapped_lines(Path::new(&argv.next().unwrap_or_else(|| usage()))));
        }
        Some("--child-floor") => {
            return println!("{}", floor::child_floor(Path::new(&argv.next().unwrap_or_else(|| usage()))));
        }
        _ => {}
    }
    let args = parse_args();
    if !SOURCES.iter().all(|s| args.logs.join(s).is_file()) {
        println!("bench_parse: the real NCCL logs were not found in {} (the shared data folder).", args.logs.display());
        println!("skipped");
        return;
    }
    let sources: Vec<Vec<u8>> = SOURCES
        .iter()
        .map(|s| {
            let mut d = fs::read(args.logs.join(s)).unwrap_or_else(|e| fail(&format!("{s}: {e}")));
            if d.last() != Some(&b'\n') {
                d.push(b'\n');
            }
            d
        })
        .collect();
    let out_dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/bench-data"));
    fs::create_dir_all(&out_dir).unwrap_or_else(|e| fail(&format!("{}: {e}", out_dir.display())));
    let out_dir = out_dir.canonicalize().unwrap_or(out_dir);
    let tag = if args.same_pids { "samepid" } else { "pids" };
    let sizes = [args.mb, args.mb / 4];
    let files: Vec<PathBuf> = sizes
        .iter()
        .map(|&mb| {
            let path = out_dir.join(format!("nccl-{mb}mb-{tag}.log"));
            ensure_file(&path, mb * 1_000_000, &sources, args.same_pids);
            path
        })
        .collect();

    println!("cpu: {}", cpu_model());
    println!("wc: {}", first_line_of(Command::new("wc").arg("--version")));
    println!("best of {} runs each; MB = 10^6 bytes; both timed from spawn to exit of a child process", args.runs);
    println!();
    println!(
        "{:>9} {:>11} {:>14} {:>6} {:>11} {:>10} {:>6} {:>12} {:>16} {:>16} {:>16}",
        "size MB",
        "wc -l MB/s",
        "commlens MB/s",
        "ratio",
        "lines",
        "ops",
        "procs",
        "peak RSS MB",
        "lines-only MB/s",
        "mapped-lines MB/s",
        "floor MB/s"
    );
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("current_exe: {e}")));
    let mut rss = Vec::new();
    let mut ratios = Vec::new();
    for f in &files {
        let size = fs::metadata(f).map(|m| m.len()).unwrap_or_else(|e| fail(&format!("{}: {e}", f.display())));
        warm_up(f);
        let mut wc_best = f64::INFINITY;
        let mut wc_lines = String::new();
        for _ in 0..args.runs {
            let t = Instant::now();
            let out = Command::new("wc").arg("-l").arg(f).stderr(Stdio::inherit()).output();
            let secs = t.elapsed().as_secs_f64();
            let out = out.unwrap_or_else(|e| fail(&format!("wc -l: {e}")));
            if !out.status.success() {
                fail("wc -l failed");
            }
            wc_lines = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("?").to_string();
            wc_best = wc_best.min(secs);
        }
        let mut best = f64::INFINITY;
        let mut child = ChildResult::default();
        let mut peak_kb = 0u64;
        for _ in 0..args.runs {
            let t = Instant::now();
            let out = Command::new(&exe).arg("--child-parse").arg(f).stderr(Stdio::inherit()).output();
            let secs = t.elapsed().as_secs_f64();
            let out = out.unwrap_or_else(|e| fail(&format!("child: {e}")));
            if !out.status.success() {
                fail("the parse child failed");
            }
            child = ChildResult::parse(&String::from_utf8_lossy(&out.stdout));
            peak_kb = peak_kb.max(child.hwm_kb);
            best = best.min(secs);
        }
        let wc_rate = size as f64 / MB / wc_best;
        let rate = size as f64 / MB / best;
        let lines_rate = size as f64 / MB / best_of(&exe, "--child-lines", f, args.runs);
        let mapped_rate = size as f64 / MB / best_of(&exe, "--child-mapped-lines", f, args.runs);
        let floor_rate = size as f64 / MB / best_of(&exe, "--child-floor", f, args.runs);
        if wc_lines != child.lines.to_string() {
            println!("note: wc -l counted {wc_lines} lines, commlens {}", child.lines);
        }
        println!(
            "{:>9.1} {:>11.0} {:>14.0} {:>6.2} {:>11} {:>10} {:>6} {:>12.1} {:>9.0} ({:.2}) {:>9.0} ({:.2}) {:>9.0} ({:.2})",
            size as f64 / MB,
            wc_rate,
            rate,
            rate / wc_rate,
            child.lines,
            child.ops,
            child.processes,
            peak_kb as f64 * 1024.0 / MB,
            lines_rate,
            lines_rate / wc_rate,
            mapped_rate,
            mapped_rate / wc_rate,
            floor_rate,
            floor_rate / wc_rate
        );
        rss.push((size, peak_kb));
        ratios.push(rate / wc_rate);
    }
    if let [(big, big_kb), (small, small_kb)] = rss[..] {
        println!();
        println!(
            "peak RSS ratio {:.1} MB file / {:.1} MB file: {:.2} (file size ratio {:.2})",
            big as f64 / MB,
            small as f64 / MB,
            big_kb as f64 / small_kb.max(1) as f64,
            big as f64 / small.max(1) as f64
        );
    }
    let worst = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "target commlens >= 50% of wc -l: {} (worst ratio {:.1}%)",
        if worst >= 0.5 { "met" } else { "NOT met" },
        worst * 100.0
    );
    println!(
        "(in parentheses: share of wc -l. lines-only = the read()-based line reader alone (gzip, pipes); \
         mapped-lines = the memory-mapped line source alone (plain files, what commlens uses here); floor = a \
         minimal scanner over mapped lines that reads only the opCount fields, no table: no reader of every line \
         with scalar field parsing beats it)"
    );
    let mut cmd = format!("bash scripts/bench --mb {}", args.mb);
    if args.runs != 3 {
        cmd += &format!(" --runs {}", args.runs);
    }
    if args.same_pids {
        cmd += " --same-pids";
    }
    println!("reproduce: {cmd}   (files in {})", out_dir.display());
}

/// Best wall time of `runs` runs of this example as `mode FILE` (spawn to exit).
fn best_of(exe: &Path, mode: &str, file: &Path, runs: usize) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new(exe).arg(mode).arg(file).stderr(Stdio::inherit()).output();
        let secs = t.elapsed().as_secs_f64();
        match out {
            Ok(o) if o.status.success() => best = best.min(secs),
            _ => fail(&format!("the {mode} child failed")),
        }
    }
    best
}

fn fail(msg: &str) -> ! {
    eprintln!("bench_parse: {msg}");
    std::process::exit(1)
}

#[derive(Default)]
struct ChildResult {
    ops: u64,
    lines: u64,
    processes: u64,
    hwm_kb: u64,
}

impl ChildResult {
    fn parse(s: &str) -> ChildResult {
        let mut r = ChildResult::default();
        for kv in s.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else { continue };
            let v = v.parse().unwrap_or(0);
            match k {
                "ops" => r.ops = v,
                "lines" => r.lines = v,
                "hwm_kb" => r.hwm_kb = v,
                "processes" => r.processes = v,
                _ => {}
            }
        }
        r
    }
}

/// The measured part: one single-threaded read of `path`, no storage.
fn child_parse(path: &Path) {
    let mut ops = 0u64;
    let mut bytes = 0u64;
    let t = Instant::now();
    let res = read_path(path, &ReadOptions::default(), &mut |op| {
        ops += 1;
        bytes = bytes.wrapping_add(op.bytes);
    });
    let secs = t.elapsed().as_secs_f64();
    match res {
        Ok((table, report)) => {
            let hwm_kb = vm_hwm_kb().unwrap_or(0);
            println!(
                "ops={ops} op_bytes={bytes} lines={} segments={} processes={} secs={secs:.4} hwm_kb={hwm_kb}",
                report.lines,
                report.nccl_segments,
                table.processes.len()
            );
        }
        Err(e) => fail(&e.to_string()),
    }
}

fn vm_hwm_kb() -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Reads the file once so that both contenders find it in the page cache.
fn warm_up(path: &Path) {
    let mut f = File::open(path).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf).map(|n| n > 0).unwrap_or(false) {}
}

/// Makes `path` a concatenation of copies of `sources` of at least `target`
/// bytes, unless a complete one is already there.
fn ensure_file(path: &Path, target: u64, sources: &[Vec<u8>], same_pids: bool) {
    let one_pass: u64 = sources.iter().map(|s| s.len() as u64).sum();
    if let Ok(m) = fs::metadata(path) {
        // Whole source files are appended until the target is reached, and
        // rewritten pids add at most 4 digits per prefix (< 1/3 of a pass).
        if m.len() >= target && m.len() < target + 2 * one_pass {
            println!("reusing {} ({:.1} MB)", path.display(), m.len() as f64 / MB);
            return;
        }
    }
    let t = Instant::now();
    let tmp = path.with_extension("log.tmp");
    let f = File::create(&tmp).unwrap_or_else(|e| fail(&format!("{}: {e}", tmp.display())));
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut written = 0u64;
    let mut buf = Vec::new();
    let mut copy = 0u64;
    'outer: loop {
        for s in sources {
            buf.clear();
            let add = if same_pids { 0 } else { (copy % 4000) * 1_000_000 };
            rewrite_pids(s, add, &mut buf);
            w.write_all(&buf).unwrap_or_else(|e| fail(&format!("{}: {e}", tmp.display())));
            written += buf.len() as u64;
            if written >= target {
                break 'outer;
            }
        }
        copy += 1;
    }
    w.flush().unwrap_or_else(|e| fail(&format!("{}: {e}", tmp.display())));
    drop(w);
    fs::rename(&tmp, path).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
    println!(
        "built {} ({:.1} MB, {} copies of the sources) in {:.1} s",
        path.display(),
        written as f64 / MB,
        copy + 1,
        t.elapsed().as_secs_f64()
    );
}

/// Copies `src` to `out`, adding `add` to the pid of every `host:pid:tid`
/// (followed by a space or the end of the line; an empty tid is allowed at
/// the end of a line, where another writer cut the prefix). Bus ids such as
/// `0000:17:00]` or `0000:00:02.0` do not match.
fn rewrite_pids(src: &[u8], add: u64, out: &mut Vec<u8>) {
    if add == 0 {
        out.extend_from_slice(src);
        return;
    }
    let digits_end = |mut j: usize| {
        while j < src.len() && src[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let mut copied = 0;
    for colon in memchr::memchr_iter(b':', src) {
        if colon == 0 || colon < copied || !is_host_byte(src[colon - 1]) {
            continue;
        }
        let pid_end = digits_end(colon + 1);
        if pid_end == colon + 1 || pid_end - colon - 1 > 10 || src.get(pid_end) != Some(&b':') {
            continue;
        }
        let tid_end = digits_end(pid_end + 1);
        let ok = match src.get(tid_end) {
            None | Some(b'\n') | Some(b'\r') => true,
            Some(b' ') => tid_end > pid_end + 1,
            _ => false,
        };
        if !ok {
            continue;
        }
        let Ok(pid) = std::str::from_utf8(&src[colon + 1..pid_end]).unwrap_or("x").parse::<u64>() else { continue };
        out.extend_from_slice(&src[copied..colon + 1]);
        out.extend_from_slice((pid + add).to_string().as_bytes());
        copied = pid_end;
    }
    out.extend_from_slice(&src[copied..]);
}

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn first_line_of(cmd: &mut Command) -> String {
    cmd.output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").to_string())
        .unwrap_or_else(|| "unknown".into())
}
