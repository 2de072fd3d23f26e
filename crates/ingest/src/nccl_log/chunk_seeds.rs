//! The host spellings a chunk of the parallel reader ([`super::chunked`])
//! starts with: those that the lines just before the chunk taught the
//! sequential reader, read off the starts of those lines ([`seed_hosts`]).

use super::chunked::chunk_size;
use super::ReadOptions;
use crate::lines::{read_up_to_at, strip_cr};
use std::path::Path;

/// How far before a chunk its seeds are looked for:
/// a quarter of a chunk, at most this. 256 KiB missed spellings: 3 of its 48
/// chunks read again by the join ("host names with debris"), none at 512
/// KiB.
const SEED_BYTES: u64 = 1 << 19;

/// Host spellings to seed a chunk starting at byte `start` with: the
/// cleanest spellings of the processes that wrote the bytes before it,
/// which the lines before the chunk have taught the sequential reader (the
/// join checks that). Without them a chunk that meets a spelling with debris
/// glued in front (`stonstone:2984738`) before the clean one would take it
/// for a new host.
///
/// Only the prefix at each line's start is read ([`line_start_host`]), not
/// the line split into segments as the parser splits it: a process's clean
/// spelling starts its lines, debris glues onto prefixes inside cut lines.
/// A spelling missed, or one the parser would not have learned, costs at
/// most the chunk read again by the join, never a different result. The
/// split (even passing over lines whose prefix the parser's memo knew) was
/// 11.2 M instructions for the 12 chunks of the 100 MB bench log, this 7.8 M
/// (4.7 M with the last key that settled a line tried first),
/// no chunk read again there nor on the 400 MB one.
pub(super) fn seed_hosts(
    path: &Path,
    opts: &ReadOptions,
    start: u64,
) -> std::io::Result<Vec<(u32, Box<[u8]>)>> {
    let from = start.saturating_sub(SEED_BYTES.min(chunk_size(opts) / 4));
    if from >= start {
        return Ok(Vec::new());
    }
    // Read, not mapped: a mapping (and its unmapping) takes the process's
    // mmap lock for writing, so on two threads each chunk's seeds queued
    // behind the other worker's window populate (up to ~2 ms a run in the
    // kernel's lock contention events); a copy of 512 KiB from the page
    // cache into a buffer each worker keeps is ~30 µs and takes no lock.
    let file = std::fs::File::open(path)?;
    SEED_BUF.with(|b| {
        let mut buf = b.borrow_mut();
        let len = (start - from) as usize;
        if buf.len() < len {
            buf.resize(len, 0);
        }
        let bytes = &mut buf[..len];
        // A file cut since it was planned: what is left before `start`.
        let got = read_up_to_at(&file, bytes, from)?;
        let mut seeds = Seeds::default();
        // The first line may start mid-way.
        let mut skip_first = from != 0;
        for_each_line(&bytes[..got], opts.max_line.max(64), |line| {
            if !std::mem::take(&mut skip_first) {
                seed_line(line, &mut seeds);
            }
        });
        // The cleanest: no other spelling of the pid is a proper suffix
        // (`stone`, not `stonstone`).
        let seen = &seeds.seen;
        let clean = |(pid, h): &(u32, Box<[u8]>)| {
            !seen.iter().any(|(p, k)| p == pid && k.len() < h.len() && h.ends_with(k))
        };
        Ok(seen.iter().filter(|e| clean(e)).cloned().collect())
    })
}

thread_local! {
    /// The bytes before a chunk, read by [`seed_hosts`]; kept by each worker
    /// (its pages touched once, not once a chunk).
    static SEED_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Calls `f` with each line of `bytes` as the line readers hand them out
/// for `max_line` (at least 64): without the newline and a `\r` before it,
/// a line longer than `max_line` in pieces of `max_line` bytes (kept whole)
/// and then its rest, the last line also when no newline ends it.
fn for_each_line(bytes: &[u8], max_line: usize, mut f: impl FnMut(&[u8])) {
    let mut pos = 0;
    while pos < bytes.len() {
        let nl = memchr::memchr(b'\n', &bytes[pos..]).map_or(bytes.len(), |i| pos + i);
        while nl - pos > max_line {
            f(&bytes[pos..pos + max_line]);
            pos += max_line;
        }
        let line = &bytes[pos..nl];
        f(strip_cr(line));
        pos = nl + 1;
    }
}

/// What [`seed_line`] found.
#[derive(Default)]
struct Seeds {
    /// (pid, spelling), each once.
    seen: Vec<(u32, Box<[u8]>)>,
    /// The first 16 bytes of recent lines whose `host:pid:` lies within
    /// them (so that a line starting with the same bytes names the same
    /// spelling): a few compares settle most lines, as the parser's prefix
    /// memo does.
    keys: [u128; RECENT],
    next_key: usize,
    /// The key that settled the last line settled by one: tried first
    /// (lines of one process come in runs; the search of all of them was
    /// most of what a line cost here).
    last_hit: usize,
}

/// Adds the spelling starting `line` to `seeds`.
#[inline(always)]
fn seed_line(line: &[u8], seeds: &mut Seeds) {
    let key = line.get(..16).map(|k| u128::from_le_bytes(k.try_into().expect("16 bytes")));
    if let Some(k) = key {
        if seeds.keys[seeds.last_hit] == k {
            return;
        }
        if let Some(i) = seeds.keys.iter().position(|&x| x == k) {
            seeds.last_hit = i;
            return;
        }
    }
    let Some((pid, host, end)) = line_start_host(line) else { return };
    // A line starting with a digit may be read past its first 16 bytes
    // (`after_timestamp`): never settled by them.
    if let Some(k) = key.filter(|_| end <= 16 && !line[0].is_ascii_digit()) {
        seeds.keys[seeds.next_key] = k;
        seeds.next_key = (seeds.next_key + 1) % RECENT;
    }
    if !seeds.seen.iter().any(|(p, h)| *p == pid && &h[..] == host) {
        seeds.seen.push((pid, host.into()));
    }
}

/// Line starts [`Seeds::keys`] remembers.
const RECENT: usize = 8;

/// The `host` and `pid` of a `host:pid:tid ` at the start of `line`, and
/// where the `:` after the pid ends, after an optional `%s.%6f` timestamp
/// (with its space, or glued to the host as the parser's `glued_timestamp`
/// reads it). Plain loops: iterator chains here cost twice the
/// instructions.
#[inline(always)]
fn line_start_host(line: &[u8]) -> Option<(u32, &[u8], usize)> {
    if line.first()?.is_ascii_digit() {
        // As the parser: after a timestamp, else a host that starts with a
        // digit (which its colon scan finds).
        let i = after_timestamp(line);
        return prefix_at(line, i).or_else(|| if i > 0 { prefix_at(line, 0) } else { None });
    }
    prefix_at(line, 0)
}

/// [`line_start_host`] for the host starting at byte `i`.
#[inline(always)]
fn prefix_at(line: &[u8], mut i: usize) -> Option<(u32, &[u8], usize)> {
    use crate::bytes::{is_host_byte, is_host_start};
    let host_start = i;
    if !is_host_start(*line.get(i)?) {
        return None;
    }
    i += 1;
    while i < line.len() && is_host_byte(line[i]) {
        i += 1;
    }
    if i >= line.len() || line[i] != b':' || i - host_start > 255 {
        return None;
    }
    let host = &line[host_start..i];
    // The pid and the tid: 1 to 10 digits, then `:` and ` `.
    let pid = digits_then(line, &mut i, b':')?;
    let end = i + 1;
    digits_then(line, &mut i, b' ')?;
    Some((u32::try_from(pid).ok()?, host, end))
}

/// The number of 1 to 10 digits after `*i` (a separator), followed by
/// `end`; `*i` is left at that `end`.
#[inline(always)]
fn digits_then(line: &[u8], i: &mut usize, end: u8) -> Option<u64> {
    *i += 1;
    let from = *i;
    let mut v = 0u64;
    while *i < line.len() && line[*i].is_ascii_digit() && *i - from < 11 {
        v = v * 10 + (line[*i] - b'0') as u64;
        *i += 1;
    }
    (*i > from && *i - from <= 10 && *i < line.len() && line[*i] == end).then_some(v)
}

/// Where the host starts in a line that starts with a digit: after a
/// timestamp and its space (within 24 bytes), after a `%s.%6f` glued to
/// the host, else at 0 (a host that starts with a digit).
#[inline(never)]
fn after_timestamp(line: &[u8]) -> usize {
    if let Some(sp) = line.iter().take(24).position(|&b| b == b' ') {
        return sp + 1;
    }
    let int = line.iter().take_while(|b| b.is_ascii_digit()).count();
    let frac = line.get(int + 1..).map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count());
    if line.get(int) == Some(&b'.') && frac == 6 && line.get(int + 7).is_some_and(|&b| crate::bytes::is_host_start(b)) {
        return int + 7;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::{for_each_line, line_start_host};
    use crate::lines::LineReader;

    /// The lines `for_each_line` hands out are the line reader's for the
    /// same bytes and `max_line`: CRLF, empty lines, no newline at the end,
    /// lines of exactly, one under and one over `max_line` (cut in pieces),
    /// a `\r` at a piece's end and before the newline.
    #[test]
    fn lines_as_the_line_reader_gives_them() {
        let long = |c: u8, n: usize| vec![c; n];
        let mut cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"a\n".to_vec(),
            b"\n\n".to_vec(),
            b"\r\n".to_vec(),
            b"a\r\nb\r\n\r\nc".to_vec(),
            b"host:1:2 NCCL INFO x\nhost:1:2 NCCL INFO y\r\n".to_vec(),
        ];
        for n in [63, 64, 65, 99, 100, 101, 127, 128, 129, 200, 300] {
            for end in [&b"\n"[..], b"\r\n", b"", b"\r"] {
                let mut v = long(b'x', n);
                v.extend_from_slice(end);
                v.extend_from_slice(b"next\n");
                cases.push(v.clone());
                // A `\r` that falls at the end of a piece.
                let mut w = long(b'y', n);
                w[n - 1] = b'\r';
                w.extend_from_slice(end);
                cases.push(w);
            }
        }
        for bytes in &cases {
            for max_line in [0usize, 64, 100] {
                let mut want = Vec::new();
                let mut r = LineReader::new(&bytes[..], max_line);
                while let Some(l) = r.next_line().unwrap() {
                    want.push(l.to_vec());
                }
                let mut got = Vec::new();
                for_each_line(bytes, max_line.max(64), |l| got.push(l.to_vec()));
                assert_eq!(got, want, "{max_line}: {}", String::from_utf8_lossy(bytes));
            }
        }
    }

    /// The prefixes the parser reads at a line start, with and without
    /// timestamps, and lines that start with none.
    #[test]
    fn line_start_hosts() {
        let some: [(&[u8], u32, &[u8], usize); 7] = [
            (b"stone:2984736:2984736 [1] NCCL INFO x", 2984736, b"stone", 14),
            (b"stonstone:2984738:2984738 [3] NCCL INFO x", 2984738, b"stonstone", 18),
            (b"mew0:64904:64921 [1] NCCL INFO NET/Plugin", 64904, b"mew0", 11),
            (b"1766081276.802766 gdr114:7:7 NCCL CALL y", 7, b"gdr114", 27),
            (b"1795693065.217944vm:12:13 [0] NCCL INFO z", 12, b"vm", 23),
            (b"8427gdr116:42:1 [0] NCCL INFO x", 42, b"8427gdr116", 14),
            (b"gdr:4294967295:1 x", u32::MAX, b"gdr", 15),
        ];
        for (line, pid, host, end) in some {
            assert_eq!(line_start_host(line), Some((pid, host, end)), "{}", String::from_utf8_lossy(line));
        }
        let none: [&[u8]; 9] = [
            b"",
            b"# nThread 1 nGpus 2",
            b"ncclIbAccept(), transport/net_ib.cc:1539, NCCL RDMA",
            b"host:4294967296:1 x",
            b"host:12345678901:1 x",
            b"host:1:2",
            b"host:1:2x",
            b":1:2 x",
            b"host::2 x",
        ];
        for line in none {
            assert_eq!(line_start_host(line), None, "{}", String::from_utf8_lossy(line));
        }
    }
}
