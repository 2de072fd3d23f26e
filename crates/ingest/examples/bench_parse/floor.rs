//! Reference contenders for the benchmark, timed in the same run as `wc -l`
//! and the reader: how fast could any reader of this shape be?
//!
//! * `lines`: the `read()`-based [`LineReader`] and nothing else, the cost of
//!   handing out lines from a buffer (the reader's path for gzip and pipes).
//! * `mapped-lines`: the memory-mapped [`MappedLines`] and nothing else, the
//!   line source the reader uses for plain files.
//! * `floor`: a deliberately minimal scanner, far short of a reader: it takes
//!   lines from [`MappedLines`], remembers the previous line's `… NCCL LEVEL ` prefix (else finds
//!   it with one substring search), and reads the eight numeric fields of each
//!   `opCount` line into a checksum, stepping over the labels between them by
//!   their known lengths. No processes, communicators, tuning
//!   lines, interleaving, recovery, topology or errors. A reader doing all of
//!   that cannot be faster than this, so this figure bounds what a reader that
//!   looks at every line can reach with scalar field parsing.

use commlens_ingest::bytes::hex_digit;
use commlens_ingest::lines::{LineReader, LineSource};
use commlens_ingest::lines_mapped::MappedLines;
use std::fs::File;
use std::path::Path;

/// `lines=N` and a checksum of line lengths (so nothing is optimised away).
pub fn child_lines(path: &Path) -> String {
    let f = File::open(path).unwrap_or_else(|e| super::fail(&format!("{}: {e}", path.display())));
    sum_lines(&mut LineReader::new(f, 1 << 20))
}

/// [`child_lines`] over the memory-mapped line source.
pub fn child_mapped_lines(path: &Path) -> String {
    sum_lines(&mut open_mapped(path))
}

fn open_mapped(path: &Path) -> MappedLines {
    match MappedLines::open(path, 1 << 20) {
        Ok(Some(r)) => r,
        Ok(None) => super::fail(&format!("{}: cannot be memory-mapped", path.display())),
        Err(e) => super::fail(&format!("{}: {e}", path.display())),
    }
}

fn sum_lines(r: &mut impl LineSource) -> String {
    let mut sum = 0u64;
    while let Some(line) = r.next_line().unwrap_or_else(|e| super::fail(&e.to_string())) {
        sum = sum.wrapping_add(line.len() as u64);
    }
    format!("lines={} sum={sum}", r.line_no())
}

#[inline]
fn hex(s: &[u8], p: &mut usize) -> u64 {
    let mut v = 0u64;
    while let Some(&b) = s.get(*p) {
        let d = hex_digit(b);
        if d > 15 {
            break;
        }
        v = v << 4 | d as u64;
        *p += 1;
    }
    v
}

#[inline]
fn dec(s: &[u8], p: &mut usize) -> u64 {
    let mut v = 0u64;
    while let Some(&b) = s.get(*p) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(d as u64);
        *p += 1;
    }
    v
}

/// The labels between the values of an opCount line, as NCCL prints them.
const LABELS: [&[u8]; 7] =
    [b" sendbuff 0x", b" recvbuff 0x", b" count ", b" datatype ", b" op ", b" root ", b" comm 0x"];

/// `lines=N ops=M sum=S` from the minimal scanner described above.
pub fn child_floor(path: &Path) -> String {
    // The same line source as the reader on plain files, so the floor stays
    // a bound on it.
    let mut r = open_mapped(path);
    let finder = memchr::memmem::Finder::new(b" NCCL ");
    let mut prev: Vec<u8> = Vec::new();
    let (mut ops, mut sum) = (0u64, 0u64);
    while let Some(line) = r.next_line().unwrap_or_else(|e| super::fail(&e.to_string())) {
        let msg_at = if !prev.is_empty() && line.starts_with(&prev) {
            prev.len()
        } else {
            let Some(i) = finder.find(line) else { continue };
            let level_end = memchr::memchr(b' ', &line[i + 6..]).map_or(line.len(), |j| i + 6 + j + 1);
            prev.clear();
            prev.extend_from_slice(&line[..level_end.min(line.len())]);
            prev.len()
        };
        let msg = &line[msg_at..];
        let Some(colon) = memchr::memchr(b':', &msg[..msg.len().min(24)]) else { continue };
        if !msg[colon..].starts_with(b": opCount ") {
            continue;
        }
        // opCount sendbuff recvbuff count datatype op root comm
        let mut p = colon + 10;
        let mut v = hex(msg, &mut p);
        for (field, label) in LABELS.iter().enumerate() {
            if msg.get(p..p + label.len()) != Some(label) {
                break;
            }
            p += label.len();
            v ^= if matches!(field, 0 | 1 | 6) { hex(msg, &mut p) } else { dec(msg, &mut p) };
        }
        sum = sum.wrapping_add(v);
        ops += 1;
    }
    format!("lines={} ops={ops} sum={sum}", r.line_no())
}
