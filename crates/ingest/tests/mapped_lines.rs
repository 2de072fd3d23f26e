//! The memory-mapped line source must hand out exactly what the `read()`-based
//! `LineReader` hands out: every line, its number, the count of cut lines and
//! the final byte count, for any bytes, `max_line` and window size. Many
//! generated files (window and page boundaries on `\n`, on `\r\n`, inside
//! lines; lines around `max_line`; CR oddities) are read both ways. Then every
//! real log is read by `read_path` mapped and not mapped, and the operations,
//! table and report must be identical.
//!
//! Without the shared data folder the real-log tests print a note and pass,
//! except under `CI=true` (see `common`).

#[allow(dead_code)]
mod common;

use commlens_ingest::lines::{LineReader, LineSource};
use commlens_ingest::lines_mapped::{MappedLines, SharedMap};
use commlens_ingest::nccl_log::{read_path, ReadOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A file under the system temp folder, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(data: &[u8]) -> TempFile {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!("commlens-mapped-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, data).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Everything a line source hands out: (line_no, line) pairs, cut lines,
/// final bytes.
#[derive(Debug, PartialEq)]
struct Out {
    lines: Vec<(u64, Vec<u8>)>,
    overlong: u64,
    bytes: u64,
}

fn drain(src: &mut impl LineSource) -> Out {
    let mut lines = Vec::new();
    while let Some(l) = src.next_line().unwrap() {
        let l = l.to_vec();
        lines.push((src.line_no(), l));
    }
    Out { lines, overlong: src.overlong_lines(), bytes: src.bytes_read() }
}

/// Reads `data` both ways and requires the same output; returns the number
/// of windows the mapped reader used.
fn check(data: &[u8], max_line: usize, window: usize) -> u64 {
    let want = drain(&mut LineReader::new(data, max_line));
    let file = TempFile::new(data);
    match MappedLines::open_with_window(&file.0, max_line, window).unwrap() {
        Some(mut m) => {
            let got = drain(&mut m);
            if got != want {
                let at = got.lines.iter().zip(&want.lines).position(|(a, b)| a != b);
                panic!(
                    "mapped and read() differ (max_line {max_line}, window {window}, {} bytes): first different \
                     line {at:?}: mapped {:?} read {:?}; lines {} vs {}, overlong {} vs {}, bytes {} vs {}",
                    data.len(),
                    at.map(|i| String::from_utf8_lossy(&got.lines[i].1).into_owned()),
                    at.map(|i| String::from_utf8_lossy(&want.lines[i].1).into_owned()),
                    got.lines.len(),
                    want.lines.len(),
                    got.overlong,
                    want.overlong,
                    got.bytes,
                    want.bytes
                );
            }
            assert_eq!(got.bytes, data.len() as u64);
            // Windows in one mapping of the whole file (the parallel
            // reader's), populated and released by `madvise`: the same.
            let shared = SharedMap::open(&file.0).unwrap().expect("mapped");
            let mut m3 = MappedLines::open_shared(&file.0, &shared, max_line, window, 0, u64::MAX).unwrap().expect("mapped");
            assert!(drain(&mut m3) == want, "shared map differs (max_line {max_line}, window {window})");
            assert_eq!(m3.windows(), m.windows());
            // The AVX2 scan, where the CPU has it, hands out the same.
            let mut m2 = MappedLines::open_with_window(&file.0, max_line, window).unwrap().expect("mapped");
            if let Some(mut fast) = m2.avx2() {
                assert!(drain(&mut fast) == want, "AVX2 scan differs (max_line {max_line}, window {window})");
            }
            m.windows()
        }
        None => {
            assert!(data.is_empty() || data.starts_with(&[0x1f, 0x8b]), "a plain file was not mapped");
            0
        }
    }
}

/// SplitMix64: a small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A file of lines whose lengths cluster around `max_line` and zero, with CR
/// before some newlines, lone CRs inside lines, and maybe no final newline.
fn generated(rng: &mut Rng, max_line: usize, size: usize) -> Vec<u8> {
    let m = max_line as u64;
    let mut out = Vec::with_capacity(size + 2 * max_line);
    while out.len() < size {
        let len = match rng.below(10) {
            0 => 0,
            1 => rng.below(3),
            2 => m - 1,
            3 => m,
            4 => m + 1,
            5 => 2 * m + 1,
            6 => rng.below(3 * m),
            _ => rng.below(m / 2 + 1),
        } as usize;
        for _ in 0..len {
            out.push(match rng.below(40) {
                0 => b'\r',
                1 => 0,
                _ => b'a' + rng.below(26) as u8,
            });
        }
        match rng.below(4) {
            0 => out.extend_from_slice(b"\r\n"),
            1 if rng.below(4) == 0 => out.extend_from_slice(b"\n\n\n"),
            _ => out.push(b'\n'),
        }
    }
    if rng.below(2) == 0 {
        // No final newline: a last line of any length, maybe ending in CR.
        let tail = rng.below(2 * m + 2) as usize;
        out.extend(std::iter::repeat_n(b'z', tail));
        if rng.below(3) == 0 {
            out.push(b'\r');
        }
    }
    out
}

#[test]
fn small_and_odd_files() {
    let cases: Vec<Vec<u8>> = vec![
        b"x".to_vec(),
        b"\n".to_vec(),
        b"\r".to_vec(),
        b"\r\n".to_vec(),
        b"\n\r".to_vec(),
        b"a\r\nbb\n\nccc".to_vec(),
        b"a\rb\r\r\n\r\rc\r".to_vec(),
        vec![b'\n'; 10_000],
        b"\r\n".repeat(5000),
        vec![b'x'; 64],
        vec![b'x'; 65],
        vec![b'x'; 10_000],
        [vec![b'x'; 64], b"\r\n".to_vec()].concat(),
        [vec![b'x'; 63], b"\r\n".to_vec()].concat(),
        [vec![b'x'; 64], b"\n".to_vec()].concat(),
        [vec![b'x'; 65], b"\n".to_vec()].concat(),
        [vec![b'x'; 129], b"\r".to_vec()].concat(),
        [vec![b'x'; 64], b"\r".to_vec()].concat(),
    ];
    for data in &cases {
        for max_line in [1, 64, 65, 100, 4096] {
            for window in [1, 4096, 8192] {
                check(data, max_line, window);
            }
        }
    }
    check(b"", 64, 4096);
}

#[test]
fn not_mapped_files_fall_back() {
    let empty = TempFile::new(b"");
    assert!(MappedLines::open(&empty.0, 1 << 20).unwrap().is_none());
    let gz = TempFile::new(&[0x1f, 0x8b, 8, 0, 0, 0]);
    assert!(MappedLines::open(&gz.0, 1 << 20).unwrap().is_none());
    assert!(MappedLines::open(&std::env::temp_dir(), 1 << 20).unwrap().is_none());
    assert!(MappedLines::open(Path::new("/nonexistent/commlens/file"), 1 << 20).is_err());
}

/// Lines of lengths around `max_line` placed so that a newline, or the `\n`
/// of a `\r\n`, or the `\r` of one, sits at every offset around the end of
/// the first window and the first page.
#[test]
fn window_boundaries_on_newlines() {
    let max_line = 64;
    let window = 4096; // mapped as 4096 + 64 bytes: a page plus max_line
    for first_end in (4096 - 200)..(4096 + 64 + 200) {
        for crlf in [false, true] {
            let mut data = Vec::new();
            // Lines of 50 bytes up to near first_end, then one to reach it.
            while data.len() + 51 < first_end {
                data.extend(std::iter::repeat_n(b'q', 50));
                data.push(b'\n');
            }
            let fill = first_end - data.len();
            data.extend(std::iter::repeat_n(b'r', fill));
            if crlf {
                data.pop();
                data.push(b'\r');
            }
            data.push(b'\n');
            assert_eq!(data.len(), first_end + 1);
            // A tail that straddles the next windows: lines of max_line - 1,
            // max_line, max_line + 1 and 2 max_line + 1 bytes.
            for (k, len) in [63usize, 64, 65, 129, 0, 1].iter().cycle().take(300).enumerate() {
                data.extend(std::iter::repeat_n(b'a' + (k % 26) as u8, *len));
                data.extend_from_slice(if k % 3 == 0 { b"\r\n" } else { b"\n" });
            }
            assert!(check(&data, max_line, window) >= 2);
        }
    }
}

#[test]
fn generated_files_many_windows() {
    let mut rng = Rng(0x5eed);
    let mut crossed = 0;
    for round in 0..1500 {
        let max_line = [64, 65, 100, 333, 1024][round % 5];
        let window = [1, 4096, 3 * 4096 + 5, 8192][(round / 5) % 4];
        // Mostly a few windows; some files small enough for one.
        let size = rng.below(if round % 10 == 0 { 2_000 } else { 30_000 }) as usize;
        let data = generated(&mut rng, max_line, size);
        if check(&data, max_line, window) >= 2 {
            crossed += 1;
        }
    }
    assert!(crossed > 1000, "only {crossed} files crossed windows");
}

#[test]
fn default_window_large_max_line() {
    // The production shape on a file of a few windows: a 1 MiB window (not
    // 16: test time) with max_line 256 KiB, and one line longer than that.
    let mut rng = Rng(7);
    let mut data = generated(&mut rng, 300, 3 << 20);
    data.extend(std::iter::repeat_n(b'L', 600_000));
    data.extend_from_slice(b"\r\nend\n");
    assert!(check(&data, 256 << 10, 1 << 20) >= 3);
    check(&data, 256 << 10, 16 << 20);
}

/// Everything `read_path` produces, as JSON text, plus the progress total.
fn read_all(path: &Path, mmap: bool) -> String {
    let total = Arc::new(Mutex::new((0u64, 0u32)));
    let t = total.clone();
    let opts = ReadOptions {
        mmap,
        progress: Some(Arc::new(move |d| {
            let mut g = t.lock().unwrap();
            g.0 += d;
            g.1 += 1;
        })),
        ..ReadOptions::default()
    };
    let mut ops = Vec::new();
    let res = read_path(path, &opts, &mut |op| ops.push(op));
    let (progress_bytes, calls) = *total.lock().unwrap();
    let res = match res {
        Ok((table, report)) => {
            // The deltas add up to what was read (decompressed for gzip).
            assert_eq!(progress_bytes, report.bytes, "{}: progress total", path.display());
            format!(
                "ops {}\ntable {}\nreport {}",
                serde_json::to_string(&ops).unwrap(),
                serde_json::to_string(&table).unwrap(),
                serde_json::to_string(&report).unwrap()
            )
        }
        Err(e) => format!("error {e}"),
    };
    format!("{res}\nprogress calls>1: {}", calls > 1)
}

fn assert_same_both_ways(path: &Path) {
    let mapped = read_all(path, true);
    let plain = read_all(path, false);
    if mapped != plain {
        let at = mapped.bytes().zip(plain.bytes()).position(|(a, b)| a != b).unwrap_or(mapped.len().min(plain.len()));
        let from = at.saturating_sub(300);
        panic!(
            "{}: mapped and read() differ at byte {at}\n mapped: …{}\n read(): …{}",
            path.display(),
            &mapped[from..(at + 300).min(mapped.len())],
            &plain[from..(at + 300).min(plain.len())]
        );
    }
}

#[test]
fn every_real_log_reads_the_same_mapped() {
    let Some(dir) = common::shared_dir("nccl-logs") else { return };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    assert!(paths.len() >= 11);
    for p in &paths {
        // The XML file is not a log: the same error both ways.
        assert_same_both_ways(p);
    }
}

#[test]
fn big_log_progress_and_errors_match() {
    let Some(dir) = common::shared_dir("nccl-logs") else { return };
    let log = std::fs::read(dir.join("sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log")).unwrap();
    // Several progress steps (every 4 MiB) and a few 16 MiB windows' worth
    // would take long; 10 MiB gives several progress calls both ways.
    let mut big = Vec::new();
    while big.len() < 10 << 20 {
        big.extend_from_slice(&log);
        big.push(b'\n');
    }
    let f = TempFile::new(&big);
    let out = read_all(&f.0, true);
    assert!(out.ends_with("progress calls>1: true"), "{}", &out[out.len().saturating_sub(200)..]);
    assert_same_both_ways(&f.0);
    // Errors: a binary first line, text that is not a log, a gzip file.
    let binary = TempFile::new(b"\x7fELF\0\0\0\x01\nmore\n");
    assert!(read_all(&binary.0, true).starts_with("error"));
    assert_same_both_ways(&binary.0);
    let text = TempFile::new(&b"just some text\r\n".repeat(1000));
    assert!(read_all(&text.0, true).starts_with("error"));
    assert_same_both_ways(&text.0);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &log).unwrap();
    let gz = TempFile::new(&gz.finish().unwrap());
    assert_same_both_ways(&gz.0);
    let plain = TempFile::new(&log);
    let strip = |s: String| s.replace(&gz.0.display().to_string(), "P").replace(&plain.0.display().to_string(), "P");
    assert_eq!(strip(read_all(&gz.0, true)), strip(read_all(&plain.0, true)));
}

/// A file cut shorter while it is read: the next window is refused with an
/// `UnexpectedEof` error naming both sizes (not mapped over vanished pages,
/// which would raise SIGBUS), the lines already handed out stay valid, and
/// asking again gives the same error rather than lines from a stale state.
#[test]
fn a_file_cut_while_read_is_an_error_at_the_next_window() {
    for shared in [false, true] {
        cut_while_read(shared);
    }
}

/// [`a_file_cut_while_read_is_an_error_at_the_next_window`] with windows
/// of their own, or in one mapping of the whole file.
fn cut_while_read(shared: bool) {
    let line = [b'x'; 99];
    let mut data = Vec::new();
    for _ in 0..200 {
        data.extend_from_slice(&line);
        data.push(b'\n');
    }
    let file = TempFile::new(&data);
    let mut m = match shared {
        true => {
            let whole = SharedMap::open(&file.0).unwrap().expect("mapped");
            MappedLines::open_shared(&file.0, &whole, 256, 4096, 0, u64::MAX).unwrap().expect("mapped")
        }
        false => MappedLines::open_with_window(&file.0, 256, 4096).unwrap().expect("mapped"),
    };
    // The first window's lines (a window is a page here, plus max_line).
    let mut read = 0;
    while read < 30 {
        assert_eq!(m.next_line().unwrap().expect("a line"), &line[..]);
        read += 1;
    }
    // Still beyond the first window, so its pages stay valid.
    std::fs::OpenOptions::new().write(true).open(&file.0).unwrap().set_len(3 * 4096).unwrap();
    let err = loop {
        match m.next_line() {
            Ok(Some(l)) => assert_eq!(l, &line[..]),
            Ok(None) => panic!("the end of a file cut from {} bytes", data.len()),
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
    assert!(err.to_string().contains(&format!("from {} to {}", data.len(), 3 * 4096)), "{err}");
    assert_eq!(m.next_line().unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
}

/// A chunk opened in a whole-file mapping after the file shrank is an
/// error naming both sizes, not a chunk without lines (which would lose
/// them silently).
#[test]
fn a_chunk_of_a_file_cut_since_it_was_mapped_is_an_error() {
    let data = [b"x".repeat(99), b"\n".to_vec()].concat().repeat(100);
    let file = TempFile::new(&data);
    let whole = SharedMap::open(&file.0).unwrap().expect("mapped");
    std::fs::OpenOptions::new().write(true).open(&file.0).unwrap().set_len(5000).unwrap();
    let err = MappedLines::open_shared(&file.0, &whole, 256, 4096, 0, 4000).err().expect("an error");
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
    assert!(err.to_string().contains(&format!("from {} to 5000", data.len())), "{err}");
}
