//! The host spellings a chunk of the parallel reader ([`super::chunked`])
//! starts with: those that the lines just before the chunk taught the
//! sequential reader, read off the starts of those lines ([`seed_hosts`]).

use super::chunked::chunk_size;
use super::ReadOptions;
use crate::lines::LineSource;
use crate::lines_mapped::{MappedLines, DEFAULT_WINDOW};
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
    let Some(mut src) = MappedLines::open_range(path, opts.max_line, DEFAULT_WINDOW, from, start)?
    else {
        return Ok(Vec::new());
    };
    let mut seeds = Seeds::default();
    // The first line may start mid-way.
    let skip_first = from != 0;
    #[cfg(target_arch = "x86_64")]
    match src.avx2() {
        // SAFETY: `avx2` gives a source only where the CPU has AVX2.
        Some(mut fast) => unsafe { seed_lines_avx2(&mut fast, skip_first, &mut seeds)? },
        None => seed_lines(&mut src, skip_first, &mut seeds)?,
    }
    #[cfg(not(target_arch = "x86_64"))]
    seed_lines(&mut src, skip_first, &mut seeds)?;
    // The cleanest: no other spelling of the pid is a proper suffix
    // (`stone`, not `stonstone`).
    let seen = &seeds.seen;
    let clean = |(pid, h): &(u32, Box<[u8]>)| {
        !seen.iter().any(|(p, k)| p == pid && k.len() < h.len() && h.ends_with(k))
    };
    Ok(seen.iter().filter(|e| clean(e)).cloned().collect())
}

/// What [`seed_lines`] found.
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

/// Adds the spelling starting each line of `src` to `seeds` (the first line
/// passed over when `skip_first`).
#[inline(always)]
fn seed_lines<L: LineSource>(src: &mut L, mut skip_first: bool, seeds: &mut Seeds) -> std::io::Result<()> {
    while let Some(line) = src.next_line()? {
        if std::mem::take(&mut skip_first) {
            continue;
        }
        let key = line.get(..16).map(|k| u128::from_le_bytes(k.try_into().expect("16 bytes")));
        if let Some(k) = key {
            if seeds.keys[seeds.last_hit] == k {
                continue;
            }
            if let Some(i) = seeds.keys.iter().position(|&x| x == k) {
                seeds.last_hit = i;
                continue;
            }
        }
        let Some((pid, host, end)) = line_start_host(line) else { continue };
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
    Ok(())
}

/// [`seed_lines`] compiled for AVX2 over the mapped source's AVX2 scan.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn seed_lines_avx2(
    src: &mut crate::lines_mapped::Avx2Lines<'_>,
    skip_first: bool,
    seeds: &mut Seeds,
) -> std::io::Result<()> {
    seed_lines(src, skip_first, seeds)
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
    use super::line_start_host;

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
