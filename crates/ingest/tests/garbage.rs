//! Robustness of the NCCL log reader on garbage: random bytes, truncated and
//! mutated real logs, glued NCCL-ish tokens, overlong lines, empty files, and
//! garbage lines between good ones. Property-style, driven by a small
//! deterministic PRNG; iteration counts are bounded so that the whole file
//! runs in a few seconds in a debug build.
//!
//! Tests that need the real logs look for them in the shared data folder next
//! to the workspace; without it they print "skipped: shared data not found"
//! and pass, except under `CI=true`, where they fail.

use commlens_ingest::nccl_log::{read_path, read_stream, ReadOptions, ReadReport};
use commlens_ingest::IngestError;
use std::path::{Path, PathBuf};

const SHARED_LOGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/real/nccl-logs");

/// xorshift64* — small, deterministic, good enough for fuzzing.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Result of one read: operations seen by the sink, and the report.
struct Parsed {
    ops: u64,
    op_bytes: u64,
    tuned: u64,
    report: ReadReport,
}

fn parse_with(name: &str, data: &[u8], opts: &ReadOptions) -> Result<Parsed, IngestError> {
    let mut ops = 0u64;
    let mut op_bytes = 0u64;
    let mut tuned = 0u64;
    let (_table, report) = read_stream(Path::new(name), data, opts, &mut |op| {
        ops += 1;
        op_bytes = op_bytes.wrapping_add(op.bytes);
        tuned += op.algo.is_some() as u64;
    })?;
    assert_eq!(report.ops, ops, "{name}: report.ops differs from the operations given to the sink");
    Ok(Parsed { ops, op_bytes, tuned, report })
}

fn parse(name: &str, data: &[u8]) -> Result<Parsed, IngestError> {
    parse_with(name, data, &ReadOptions::default())
}

/// The real `.log` files, or None (test skipped) when the shared data is absent.
fn real_logs() -> Option<Vec<(String, Vec<u8>)>> {
    let dir = Path::new(SHARED_LOGS);
    if !dir.is_dir() {
        commlens_testdata::skip_unless_ci("garbage in real logs", &format!("shared data not found at {SHARED_LOGS}"), "put ../shared beside the repository");
        return None;
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read shared log folder")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no .log files in {SHARED_LOGS}");
    Some(
        paths
            .into_iter()
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let data = std::fs::read(&p).expect("read log");
                (name, data)
            })
            .collect(),
    )
}

/// Does the reader's binary check fire: a NUL in the first 4096 bytes of line 1?
fn first_line_has_nul(data: &[u8]) -> bool {
    let end = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    data[..end].iter().take(4096).any(|&b| b == 0)
}

fn expect_not_nccl(name: &str, r: Result<Parsed, IngestError>) -> u64 {
    match r {
        Err(e @ IngestError::NotNcclLog { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(name), "message does not name the file: {msg}");
            assert!(msg.contains("not an NCCL debug log"), "{msg}");
            let IngestError::NotNcclLog { lines, .. } = e else { unreachable!() };
            lines
        }
        Err(e) => panic!("{name}: expected NotNcclLog, got {e}"),
        Ok(p) => panic!("{name}: expected NotNcclLog, parsed {} segments", p.report.nccl_segments),
    }
}

#[test]
fn random_bytes_give_a_clear_error() {
    let mut rng = Rng::new(1);
    let mut lengths: Vec<usize> = (0..80).collect();
    lengths.extend([127, 128, 255, 256, 1000, 4095, 4096, 4097, 10_000, 65_537, 200_000]);
    for (i, &len) in lengths.iter().enumerate() {
        for round in 0..3 {
            let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if round == 1 && len > 0 {
                // Binary at the very start.
                data[rng.below(len.min(64))] = 0;
            }
            if round == 2 {
                data.retain(|&b| b != 0);
            }
            let name = format!("random-{i}-{round}.bin");
            match parse(&name, &data) {
                Err(e @ IngestError::Binary { .. }) => {
                    assert!(first_line_has_nul(&data), "{name}: Binary without a NUL in line 1");
                    let msg = e.to_string();
                    assert!(msg.contains(&name) && msg.contains("binary"), "{msg}");
                }
                Err(IngestError::NotNcclLog { .. }) => {
                    assert!(!first_line_has_nul(&data), "{name}: NUL in line 1 not reported as binary");
                }
                Err(e) => panic!("{name}: unexpected error {e}"),
                Ok(p) => panic!("{name}: random bytes parsed as NCCL ({} segments)", p.report.nccl_segments),
            }
        }
    }
}

#[test]
fn binary_file_is_reported_as_binary() {
    for data in [&b"\0"[..], b"\x7fELF\x02\x01\x01\0\0\0", b"host:1:2 [0] NCCL INFO x\0\nhost:1:2 [0] NCCL INFO y\n"] {
        let Err(e) = parse("blob.bin", data) else { panic!("binary data must be refused") };
        assert!(matches!(e, IngestError::Binary { .. }), "{e}");
        assert!(e.to_string().starts_with("blob.bin: "), "{e}");
    }
}

#[test]
fn printable_garbage_is_not_an_nccl_log() {
    let mut rng = Rng::new(2);
    let alphabet: Vec<u8> = (b' '..=b'~').chain([b'\t', b'\r', b'\n', b'\n', b'\n']).collect();
    for i in 0..60 {
        let len = 1 + rng.below(if i < 50 { 2000 } else { 100_000 });
        let data: Vec<u8> = (0..len).map(|_| *rng.pick(&alphabet)).collect();
        let name = format!("garbage-{i}.log");
        let lines = expect_not_nccl(&name, parse(&name, &data));
        assert_eq!(lines, data.split(|&b| b == b'\n').count() as u64 - data.ends_with(b"\n") as u64, "{name}");
    }
    // Text that almost looks like NCCL prefixes.
    let near_misses =
        b"host:1:2 [x] NCCL INFO y\n:1:2 NCCL INFO\na:1:2\na:1:2 NCCL INFOx\n35:842735 [0] f, 1 NCCL INFO y\n\
host:99999999999:2 [0] NCCL INFO too big a pid\nhost:1:2 [0] NCCL DEBUG level\nNCCL INFO AllReduce: opCount 0\n";
    expect_not_nccl("near-miss.log", parse("near-miss.log", near_misses));
}

#[test]
fn empty_and_blank_files_are_not_nccl_logs() {
    for (name, data) in [
        ("empty.log", &b""[..]),
        ("newlines.log", b"\n\n\n\n"),
        ("crlf.log", b"\r\n\r\n"),
        ("blanks.log", b"   \n\t\n \r\n"),
    ] {
        let lines = expect_not_nccl(name, parse(name, data));
        assert_eq!(lines, data.iter().filter(|&&b| b == b'\n').count() as u64, "{name}");
    }
    let huge_blank = vec![b'\n'; 300_000];
    expect_not_nccl("many-newlines.log", parse("many-newlines.log", &huge_blank));
}

#[test]
fn read_path_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("commlens-garbage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("does-not-exist.log");
    let Err(e) = read_path(&missing, &ReadOptions::default(), &mut |_| {}) else { panic!("missing file: no error") };
    assert!(matches!(e, IngestError::Io { .. }), "{e}");
    assert!(e.to_string().contains("does-not-exist.log"), "{e}");
    let junk = dir.join("junk.log");
    std::fs::write(&junk, b"hello\nworld\n").unwrap();
    let Err(e) = read_path(&junk, &ReadOptions::default(), &mut |_| {}) else { panic!("junk file: no error") };
    assert!(matches!(e, IngestError::NotNcclLog { lines: 2, .. }), "{e}");
    assert!(e.to_string().contains(&*junk.to_string_lossy()), "{e}");
    assert!(e.to_string().contains("hello"), "the message shows line 1: {e}");
    let bin = dir.join("blob.log");
    std::fs::write(&bin, [0x1fu8, 0x00, 0x00, 0x41]).unwrap();
    let Err(e) = read_path(&bin, &ReadOptions::default(), &mut |_| {}) else { panic!("binary file: no error") };
    assert!(matches!(e, IngestError::Binary { .. }), "{e}");
    assert!(e.to_string().contains("blob.log"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Offset just after the first line that is an NCCL line on its own.
fn end_of_first_nccl_line(data: &[u8]) -> usize {
    let mut start = 0;
    while start < data.len() {
        let end = data[start..].iter().position(|&b| b == b'\n').map_or(data.len(), |i| start + i + 1);
        if parse("probe.log", &data[start..end]).is_ok() {
            return end;
        }
        start = end;
    }
    panic!("no NCCL line found");
}

#[test]
fn truncated_real_logs_parse_and_ops_grow_with_the_cut() {
    let Some(logs) = real_logs() else { return };
    let mut rng = Rng::new(3);
    for (name, data) in &logs {
        let full = match parse(name, data) {
            Ok(p) => p,
            Err(e) => panic!("{name}: the full log does not parse: {e}"),
        };
        let min_cut = end_of_first_nccl_line(data);
        // About 1 MB of input per log in total keeps this fast in debug builds.
        let n_cuts = (1_000_000 / data.len().max(1)).clamp(2, 24);
        let mut cuts: Vec<usize> = (0..n_cuts).map(|_| min_cut + rng.below(data.len() - min_cut + 1)).collect();
        cuts.push(min_cut);
        cuts.push(data.len());
        cuts.sort_unstable();
        let mut last = 0u64;
        for &cut in &cuts {
            let p = match parse(name, &data[..cut]) {
                Ok(p) => p,
                Err(e) => panic!("{name} cut at {cut}: {e}"),
            };
            assert!(p.ops <= full.ops, "{name} cut at {cut}: {} ops > {} of the full log", p.ops, full.ops);
            assert!(p.ops >= last, "{name} cut at {cut}: {} ops < {last} at a shorter cut", p.ops);
            last = p.ops;
        }
        assert_eq!(last, full.ops, "{name}: the last cut is the whole file");
    }
}

#[test]
fn mutated_real_logs_do_not_panic() {
    let Some(logs) = real_logs() else { return };
    let mut rng = Rng::new(4);
    let noise = b"\0\xff\n\r :[]0123456789abcdefx NCCL INFO opCount comm 0x";
    for (name, data) in &logs {
        let full = parse(name, data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let rounds = (1_000_000 / data.len().max(1)).clamp(1, 12);
        for round in 0..rounds {
            let mut m = data.clone();
            let edits = 1 + rng.below(40);
            for _ in 0..edits {
                let at = rng.below(m.len() + 1);
                match rng.below(3) {
                    0 if at < m.len() => m[at] ^= 1 << rng.below(8),
                    1 => {
                        let n = 1 + rng.below(8);
                        let bytes: Vec<u8> = (0..n).map(|_| *rng.pick(noise)).collect();
                        m.splice(at..at, bytes);
                    }
                    _ if at < m.len() => {
                        let n = (1 + rng.below(16)).min(m.len() - at);
                        m.drain(at..at + n);
                    }
                    _ => {}
                }
            }
            let label = format!("{name} mutation {round}");
            match parse(&label, &m) {
                Ok(p) => {
                    // Each edit touches at most two lines, each of which can
                    // hold a few operations (interleaved writers).
                    let slack = 4 * edits as u64;
                    assert!(p.ops <= full.ops + slack, "{label}: {} ops, full log {}", p.ops, full.ops);
                    assert!(p.ops + slack >= full.ops, "{label}: {} ops, full log {}", p.ops, full.ops);
                }
                Err(IngestError::Binary { .. }) => assert!(first_line_has_nul(&m), "{label}: Binary without a NUL"),
                Err(e) => panic!("{label}: {e}"),
            }
        }
    }
}

const NCCL_TOKENS: &[&str] = &[
    "host:1:2 ",
    "h0:12:12 [0] ",
    "gdr114:842735:842735 [0] ncclEnqueueCheck, 2306 ",
    "stone:2984736:2",
    "stone",
    "1766081276.802766 ",
    "[1] ",
    "[x] ",
    "NCCL INFO ",
    "NCCL CALL ",
    "NCCL TRACE ",
    "NCCL WARN ",
    "NCCL ABORT ",
    "AllReduce: ",
    "AllGather: ",
    "Send: ",
    "Recv: ",
    "Broadcast: ",
    "Frobnicate: ",
    "opCount ",
    "0 ",
    "1f ",
    "sendbuff ",
    "recvbuff ",
    "(nil) ",
    "count ",
    "datatype ",
    "7 ",
    "-1 ",
    "op ",
    "root ",
    "comm ",
    "0x55b6aa64a990 ",
    "0x",
    "[nranks=2] ",
    "[nranks=",
    "stream ",
    "0x55b6a98daaf0",
    "8388608 Bytes -> Algo ",
    "Bytes -> ",
    "RING ",
    "TREE ",
    "proto ",
    "SIMPLE ",
    "LL128 ",
    "channel{Lo..Hi}={0..23}",
    "ncclSend(0,7f1fd2c00000,256,2,0,0,0x55f7d902f5e0,0x55f7d84eb710)",
    "ncclGroupEnd()",
    "ncclAllReduce(",
    "=== System : maxBw 24.0 totalBw 24.0 ===",
    "CPU/0-0 (1/1/1)",
    "+ PCI[24.0] - GPU/0-17000 (0)",
    "Paths from GPU/F000 :",
    "--PCI->PCI/C000",
    "==========================================",
    "Channel 00/02 : 0 1",
    "Channel 00/0 : 1[1] -> 0[0] via P2P/IPC",
    "Trees [0] 1/-1/-1->0->-1",
    "Ring 00 : 0 1",
    "comm 0x55b6aa64a990 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 17000 commId 0x1234 - Init START",
    "Init COMPLETE",
    "ncclCommInitRank comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
    "NCCL version 2.27.7+cuda13.0",
    "NCCL version ",
    ":",
    "::",
    " ",
    "  ",
    "\r",
    "\t",
    "4294967296",
    "99999999999999999999999",
    "\u{fffd}",
    "\u{1f600}",
];

fn token_soup(rng: &mut Rng, len: usize, newline_percent: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 128);
    while out.len() < len {
        out.extend_from_slice(rng.pick(NCCL_TOKENS).as_bytes());
        if rng.chance(newline_percent) {
            out.push(b'\n');
        }
    }
    out
}

fn count_substr(hay: &[u8], needle: &[u8]) -> u64 {
    hay.windows(needle.len()).filter(|w| *w == needle).count() as u64
}

#[test]
fn glued_nccl_tokens_do_not_panic() {
    let mut rng = Rng::new(5);
    let mut parsed = 0;
    for i in 0..150 {
        let len = 1 + rng.below(if i % 10 == 9 { 100_000 } else { 3000 });
        // Mostly without newlines (one huge glued line), sometimes with a few.
        let newline_percent = [0, 0, 1, 5, 20][i % 5];
        let data = token_soup(&mut rng, len, newline_percent);
        let name = format!("soup-{i}.log");
        for opts in [ReadOptions::default(), ReadOptions { max_line: 100, ..Default::default() }] {
            match parse_with(&name, &data, &opts) {
                Ok(p) => {
                    parsed += 1;
                    assert!(
                        p.ops <= count_substr(&data, b"opCount"),
                        "{name}: {} ops from {} opCount tokens",
                        p.ops,
                        count_substr(&data, b"opCount")
                    );
                    assert!(p.report.nccl_segments <= count_substr(&data, b"NCCL "), "{name}");
                }
                Err(IngestError::NotNcclLog { .. }) => {}
                Err(e) => panic!("{name}: unexpected error {e}"),
            }
        }
    }
    assert!(parsed > 50, "the soup should often contain NCCL prefixes ({parsed} parsed)");
}

const GOOD_OP: &[u8] = b"mew0:64904:64904 [0] NCCL INFO AllReduce: opCount 1f sendbuff 0x720000000 recvbuff 0x920000000 count 2097152 datatype 7 op 0 root 0 comm 0x55b6aa64a990 [nranks=2] stream 0x55b6a98daaf0\n";

#[test]
fn very_long_line_is_cut_and_counted() {
    let max_line = 1 << 16;
    let opts = ReadOptions { max_line, ..Default::default() };
    let long = 5_000_000usize;
    // A good line, 5 MB without a newline, a good line.
    let mut data = GOOD_OP.to_vec();
    data.extend((0..long).map(|i| b"abcdefgh :[]0123"[i % 16]));
    data.push(b'\n');
    data.extend_from_slice(GOOD_OP);
    let p = parse_with("long.log", &data, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.report.overlong_lines, ((long - 1) / max_line) as u64);
    assert_eq!(p.ops, 2, "the lines around the long one are read");
    assert_eq!(p.report.lines, 2 + (long as u64).div_ceil(max_line as u64));

    // The same without a trailing newline, at the very end of the file.
    let mut data = GOOD_OP.to_vec();
    data.extend(std::iter::repeat_n(b'x', long));
    let p = parse_with("long-tail.log", &data, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.report.overlong_lines, ((long - 1) / max_line) as u64);
    assert_eq!(p.ops, 1);

    // Only one long line: an error, after reading all of it in pieces.
    let data = vec![b'y'; long];
    let lines = expect_not_nccl("long-only.log", parse_with("long-only.log", &data, &opts));
    assert_eq!(lines, (long as u64).div_ceil(max_line as u64));

    // 1 MB of glued operation lines: every piece holds NCCL prefixes.
    let glued_len = 1_000_000;
    let glued: Vec<u8> =
        GOOD_OP.iter().copied().filter(|&b| b != b'\n').chain([b' ']).cycle().take(glued_len).collect();
    let p = parse_with("glued.log", &glued, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.report.overlong_lines, ((glued_len - 1) / max_line) as u64);
    assert!(p.ops > 0);
    assert!(p.ops <= count_substr(&glued, b"opCount"));
}

/// Lines that are not NCCL lines of any process of the log.
fn garbage_line(rng: &mut Rng) -> Vec<u8> {
    const FIXED: &[&[u8]] = &[
        b"",
        b"   ",
        b"#  Rank  0 Group  0 Pid  64904 on       mew0 device  0 [0000:17:00] NVIDIA A100 80GB PCIe",
        b"NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 1 datatype 7 op 0 root 0 comm 0x1",
        b"AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}",
        b"host:1:2 [x] NCCL INFO AllReduce: opCount 0",
        b":1:2 NCCL INFO ncclGroupEnd()",
        b"Traceback (most recent call last):",
        b"  File \"train.py\", line 12, in <module>",
        b"\xff\xfe\xfd not utf-8 \xc3\x28",
        b"12:34:56 [0] something at 12:34:56",
        b"=== System : maxBw 24.0 totalBw 24.0 ===",
    ];
    if rng.chance(40) {
        return rng.pick(FIXED).to_vec();
    }
    // Printable noise without ':' (no prefix can form) plus some high bytes.
    let len = rng.below(300);
    (0..len)
        .map(|_| match rng.below(20) {
            0 => 0x80 + rng.below(128) as u8,
            1 => b' ',
            _ => {
                let b = b'!' + rng.below(94) as u8;
                if b == b':' {
                    b';'
                } else {
                    b
                }
            }
        })
        .collect()
}

#[test]
fn garbage_lines_between_good_lines_lose_no_operation() {
    let Some(logs) = real_logs() else { return };
    let mut rng = Rng::new(6);
    for (name, data) in &logs {
        let clean = parse(name, data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut dirty = Vec::with_capacity(data.len() * 2);
        let mut inserted = 0;
        for line in data.split_inclusive(|&b| b == b'\n') {
            if rng.chance(25) {
                dirty.extend_from_slice(&garbage_line(&mut rng));
                dirty.push(b'\n');
                inserted += 1;
            }
            dirty.extend_from_slice(line);
        }
        let p = parse(name, &dirty).unwrap_or_else(|e| panic!("{name} with garbage: {e}"));
        assert!(inserted > 0);
        assert_eq!(p.ops, clean.ops, "{name}: {inserted} garbage lines changed the number of operations");
        assert_eq!(p.op_bytes, clean.op_bytes, "{name}: bytes of the operations changed");
        assert_eq!(p.tuned, clean.tuned, "{name}: tuned operations changed");
        assert_eq!(p.report.nccl_segments, clean.report.nccl_segments, "{name}: segments changed");
    }
}

#[test]
fn crlf_line_ends_and_nul_bytes_after_line_one_change_nothing() {
    let Some(logs) = real_logs() else { return };
    for (name, data) in &logs {
        let clean = parse(name, data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut crlf = Vec::with_capacity(data.len() + data.len() / 50);
        for line in data.split_inclusive(|&b| b == b'\n') {
            match line.strip_suffix(b"\n") {
                Some(l) => {
                    crlf.extend_from_slice(l);
                    crlf.extend_from_slice(b"\r\n");
                }
                None => crlf.extend_from_slice(line),
            }
        }
        let p = parse(name, &crlf).unwrap_or_else(|e| panic!("{name} with CRLF: {e}"));
        assert_eq!((p.ops, p.op_bytes, p.tuned), (clean.ops, clean.op_bytes, clean.tuned), "{name} with CRLF");
        // A line of NUL bytes after the first line is just a bad line.
        let first_end = data.iter().position(|&b| b == b'\n').unwrap() + 1;
        let mut nul = data[..first_end].to_vec();
        nul.extend_from_slice(&[0u8; 100]);
        nul.push(b'\n');
        nul.extend_from_slice(&data[first_end..]);
        let p = parse(name, &nul).unwrap_or_else(|e| panic!("{name} with a NUL line: {e}"));
        assert_eq!((p.ops, p.op_bytes, p.tuned), (clean.ops, clean.op_bytes, clean.tuned), "{name} with a NUL line");
    }
}
