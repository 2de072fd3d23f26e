//! The NCCL log reader's shortcuts for common line shapes (remembered
//! prefixes, the fixed-order opCount parse, …) must never change what it
//! produces. Every real log, and many damaged copies of them, is read with
//! `ReadOptions::fast_paths` on and off; the operations (in the order the sink
//! receives them), the table and the report must be identical.
//!
//! Without the shared data folder the real-log tests print a note and pass,
//! except under `CI=true` (see `common`).

#[allow(dead_code)]
mod common;

use commlens_ingest::nccl_log::{read_stream, ReadOptions};
use std::path::Path;

/// Everything one read produces, as JSON text (the report's serialisation
/// leaves out only its private lookup index).
fn read_all(name: &str, data: &[u8], fast: bool) -> String {
    let opts = ReadOptions { fast_paths: fast, ..ReadOptions::default() };
    let mut ops = Vec::new();
    match read_stream(Path::new(name), data, &opts, &mut |op| ops.push(op)) {
        Ok((table, report)) => format!(
            "ops {}\ntable {}\nreport {}",
            serde_json::to_string(&ops).unwrap(),
            serde_json::to_string(&table).unwrap(),
            serde_json::to_string(&report).unwrap()
        ),
        Err(e) => format!("error {e}"),
    }
}

fn assert_same(name: &str, data: &[u8]) {
    let fast = read_all(name, data, true);
    let slow = read_all(name, data, false);
    if fast != slow {
        // Point at the first difference rather than printing megabytes.
        let at = fast.bytes().zip(slow.bytes()).position(|(a, b)| a != b).unwrap_or(fast.len().min(slow.len()));
        let from = at.saturating_sub(300);
        panic!(
            "{name}: fast and general paths differ at byte {at}\n fast: …{}\n slow: …{}",
            &fast[from..(at + 300).min(fast.len())],
            &slow[from..(at + 300).min(slow.len())]
        );
    }
}

fn real_logs() -> Vec<(String, Vec<u8>)> {
    let Some(dir) = common::shared_dir("nccl-logs") else { return Vec::new() };
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    logs.sort();
    logs
}

#[test]
fn every_real_log_reads_the_same_both_ways() {
    let logs = real_logs();
    for (name, data) in &logs {
        assert_same(name, data);
    }
    // All of them in one stream: many processes and threads, so the prefix
    // memo keeps being replaced.
    let all: Vec<u8> = logs.iter().flat_map(|(_, d)| d.iter().copied().chain(std::iter::once(b'\n'))).collect();
    if !all.is_empty() {
        assert_same("all-logs", &all);
    }
}

/// xorshift64*: small and deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A damaged copy of `data`: lines cut into each other at random points (as
/// interleaving writers do), bytes changed next to prefixes and fields, lines
/// truncated, dropped and repeated with another pid or device.
fn damage(data: &[u8], rng: &mut Rng) -> Vec<u8> {
    const NOISE: &[&[u8]] = &[b":", b" ", b"0x", b"(nil)", b"[", b"]", b"NCCL ", b"INFO ", b"9", b"-", b"\r", b"[nranks="];
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let mut out = Vec::with_capacity(data.len() + data.len() / 8);
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let cut = rng.below(line.len() + 1);
        match rng.below(40) {
            // Another writer's line starts inside this one.
            0 | 1 => {
                let other = lines[rng.below(lines.len())];
                out.extend_from_slice(&line[..cut]);
                out.extend_from_slice(other);
            }
            // The rest of this line is pushed to the next one.
            2 => {
                out.extend_from_slice(&line[..cut]);
                out.push(b'\n');
                out.extend_from_slice(&line[cut..]);
            }
            3 => out.extend_from_slice(&line[..cut]),
            4 => {}
            5 => {
                let mut l = line.to_vec();
                if !l.is_empty() {
                    let at = rng.below(l.len());
                    l[at] = b"0123456789abcx:[] ()N"[rng.below(21)];
                }
                out.extend_from_slice(&l);
            }
            6 => {
                out.extend_from_slice(&line[..cut]);
                out.extend_from_slice(NOISE[rng.below(NOISE.len())]);
                out.extend_from_slice(&line[cut..]);
            }
            // The same line twice, the second time with other digits in it:
            // a prefix that differs from a remembered one in one byte.
            7 => {
                out.extend_from_slice(line);
                out.push(b'\n');
                let mut l = line.to_vec();
                if let Some(p) = l.iter().position(u8::is_ascii_digit) {
                    l[p] = b'0' + (l[p] - b'0' + 1) % 10;
                }
                out.extend_from_slice(&l);
            }
            _ => out.extend_from_slice(line),
        }
        out.push(b'\n');
        i += 1;
    }
    out
}

#[test]
fn damaged_real_logs_read_the_same_both_ways() {
    let logs = real_logs();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for (name, data) in &logs {
        let rounds = if data.len() > 1_000_000 { 2 } else { 6 };
        for round in 0..rounds {
            let damaged = damage(data, &mut rng);
            assert_same(&format!("{name} (damaged copy {round})"), &damaged);
        }
    }
}

#[test]
fn hand_made_edge_cases_read_the_same_both_ways() {
    // Prefixes that share their bytes with a remembered one up to the level,
    // levels at the very end of a line, second prefixes inside the message.
    let text = "\
h1:10:10 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x20
h1:10:10 [0] NCCL INFO
h1:10:10 [0] NCCL INFOx
h1:10:10 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream h1:10:11 [1] NCCL INFO x
h1:10:10 [0] NCCL INFO AllReduce: opCount 2 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x20 h1:10:10 NCCL CALL ncclGroupEnd()
h1:10:10 [0] NCCL INFO AllReduce: 16 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}
h1h1:10:10 [0] NCCL INFO AllReduce: opCount 3 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x20
1h1:10:10 [0] NCCL INFO AllReduce: opCount 4 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x20
1766081276.802766 h1:10:10 [0] NCCL INFO AllReduce: opCount 5 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x20
h1:10:10 [0] NCCL INFO AllReduce: opCount 6 sendbuff 0x1 recvbuff 0x2 count 4 datatype -1 op +0 root 0 comm 0X10 [nranks=4294967296] stream 0x20
h1:10:10 [0] NCCL INFO AllReduce: opCount 0x7 sendbuff 0x0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x20
h1:10:10 [0] NCCL INFO AllReduce: opCount 8 sendbuff (nil)x recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2 ] stream 0x20
h1:10:10 [0] NCCL INFO AllReduce: opCount 9 sendbuff 0x1 recvbuff 0x2 count 00000000000000000000001 datatype 7 op 0 root 0 comm 0x10 stream 0x20
h1:10:10 [0] NCCL INFO AllReduce: opCount 10 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x20 
h1:10:10 [0] NCCL INFO AllReduce: opCount 11 sendbuff 0x1 recvbuff 0x12345678901234567 count 4 datatype 7 op 0 root 0 comm 0x10 stream 0x20
h1:10:10 [0] NCCL INFO AllReduce: opCount 12 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x20 extra 1
";
    assert_same("edge-cases", text.as_bytes());
}
