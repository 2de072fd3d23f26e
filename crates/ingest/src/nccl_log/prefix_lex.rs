//! Byte-level pieces of the line prefix (see [`super`]): the `host:pid:tid `
//! candidates found at a colon (the digit runs read 8 bytes at a time, with
//! the byte-at-a-time reference they are tested against; the host read
//! back from the colon 16 bytes at a time, `crate::bytes::host_run_start`)
//! and the epoch timestamps before a host, glued to it or not.

use super::Candidate;
use crate::bytes::{dec_u64, float};

/// Checks for `host:pid:tid ` where `line[colon]` is the first colon.
/// Most colons of a message are not followed by a digit: that test is
/// inlined, the rest is not.
#[inline(always)]
pub(super) fn candidate_at(line: &[u8], colon: usize) -> Option<Candidate> {
    if !line.get(colon + 1).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    candidate_after_digit(line, colon)
}

/// [`candidate_at`] past its first test. The digit runs' ends are checked
/// (`:` after the pid, a space after the tid) before their values are
/// worked out: a third of the colons followed by a digit start no
/// candidate (`topo.cc:1228,`), and their values were wasted work.
#[inline(never)]
fn candidate_after_digit(line: &[u8], colon: usize) -> Option<Candidate> {
    let pid_run = digit_run(line, colon + 1);
    let pid_end = pid_run.end;
    if pid_end == colon + 1 || line.get(pid_end) != Some(&b':') {
        return None;
    }
    let tid_run = digit_run(line, pid_end + 1);
    let tid_end = tid_run.end;
    if tid_end == pid_end + 1 || line.get(tid_end) != Some(&b' ') {
        return None;
    }
    let (pid, tid) = (pid_run.value(line, colon + 1)?, tid_run.value(line, pid_end + 1)?);
    // Debris glued in front makes this run long (`0x7f4d52c0e800stone`):
    // 16 bytes a test.
    let mut hs = crate::bytes::host_run_start(line, colon);
    // Host names start with a letter or digit: `-1gdr114` is debris + host.
    while hs < colon && !crate::bytes::is_host_start(line[hs]) {
        hs += 1;
    }
    if hs == colon {
        return None;
    }
    Some(Candidate { host_start: hs, host_end: colon, pid, tid, after: tid_end + 1 })
}

/// A run of decimal digits found by [`digit_run`]: its end, and what its
/// value is read from.
#[derive(Clone, Copy)]
struct DigitRun {
    end: usize,
    /// Under 8 digits, all in the 8 bytes read at the run's start: those
    /// digits moved to the top of this word (one per byte, less `0`), zeros
    /// below them. `None`: the value is read from the line.
    word: Option<u64>,
}

/// The run of decimal digits from `from` (its value is [`DigitRun::value`]).
/// Where the line has 8 bytes from `from`, they are tested at once (pids
/// and tids have about 7 digits); the rest of a longer run, and the end of
/// a line, byte by byte as `digits_u32_scalar` (the tests' reference) reads them.
#[inline(always)]
fn digit_run(line: &[u8], from: usize) -> DigitRun {
    if let Some(w) = line.get(from..from + 8) {
        // Each byte minus `0` (as xor: digits are 0x30..=0x39).
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes")) ^ 0x3030_3030_3030_3030;
        // The high bit of each byte that is no digit (above 9, or above
        // 0x7f). A carry out of the add only leaves such a byte, so it
        // changes only bytes after the first non-digit, which are not read.
        let non = (x.wrapping_add(0x7676_7676_7676_7676) | x) & 0x8080_8080_8080_8080;
        if non != 0 {
            let n = (non.trailing_zeros() / 8) as usize;
            // The n digits moved to the top, zeros (leading) below them
            // (n = 0: no digit; the word is then never read as a value).
            let word = if n == 0 { 0 } else { x << (8 * (8 - n)) };
            return DigitRun { end: from + n, word: Some(word) };
        }
        let mut j = from + 8;
        while line.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        return DigitRun { end: j, word: None };
    }
    let mut j = from;
    while line.get(j).is_some_and(u8::is_ascii_digit) {
        j += 1;
    }
    DigitRun { end: j, word: None }
}

impl DigitRun {
    /// The run's value as `dec_u64` and `u32::try_from` read it (`None`
    /// when it does not fit); `from` is where the run starts.
    #[inline(always)]
    fn value(self, line: &[u8], from: usize) -> Option<u32> {
        if let Some(w) = self.word {
            // Under 8 digits: always fits.
            return Some(eight_digits(w) as u32);
        }
        let j = self.end;
        // 10 digits or fewer fit in a u64 read a digit at a time; longer
        // runs (leading zeros) are left to `dec_u64`.
        let value = if j - from <= 10 {
            line[from..j].iter().fold(0u64, |v, &b| v * 10 + (b - b'0') as u64)
        } else {
            dec_u64(&line[from..j]).unwrap_or(u64::MAX)
        };
        u32::try_from(value).ok()
    }
}

/// [`digit_run`] and its value, as the candidate check reads them (the
/// exhaustive test compares this with [`digits_u32_scalar`]).
#[cfg(test)]
fn digits_u32(line: &[u8], from: usize) -> (usize, Option<u32>) {
    let r = digit_run(line, from);
    let v = if r.end == from { Some(0) } else { r.value(line, from) };
    (r.end, v)
}

/// The value of 8 digits, one per byte (0 to 9, the first, most
/// significant, in the lowest byte): pairs, then quads, then the whole.
#[inline(always)]
fn eight_digits(x: u64) -> u64 {
    let x = ((x & 0x000f_000f_000f_000f) * 10) + ((x & 0x0f00_0f00_0f00_0f00) >> 8);
    let x = ((x & 0x0000_00ff_0000_00ff) * 100) + ((x & 0x00ff_0000_00ff_0000) >> 16);
    ((x & 0x0000_0000_0000_ffff) * 10000) + ((x & 0x0000_ffff_0000_0000) >> 32)
}

/// [`digits_u32`] a byte at a time: the reference it is tested against.
#[cfg(test)]
fn digits_u32_scalar(line: &[u8], from: usize) -> (usize, Option<u32>) {
    let mut j = from;
    let mut v: u64 = 0;
    while let Some(&b) = line.get(j) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(d as u64);
        j += 1;
    }
    let value = if j - from <= 10 { v } else { dec_u64(&line[from..j]).unwrap_or(u64::MAX) };
    (j, u32::try_from(value).ok())
}

/// NCCL prints `NCCL_DEBUG_TIMESTAMP_FORMAT`'s expansion right before the
/// host with no separator of its own, so `%s.%6f` gives
/// `1795693065.217944vm:566:566 [0] NCCL INFO …` (NCCL 2.28.9): a host token
/// that starts with epoch seconds (ten digits, more in front being the tail of
/// a line this one cut), a dot and a fraction is a timestamp glued to the real
/// host. The fraction has as many digits as the format asked for (`%3f`,
/// `%6f`, `%9f`); when the host itself starts with a digit the run is longer,
/// and the widest of those shorter than the run is taken. Returns (ns, the timestamp's start, the
/// host's start).
///
/// Most hosts start with a letter: that test inlines, the rest does not.
/// So does a test of what any glued timestamp needs: ten digits, a dot, a
/// fraction digit and a host byte (13 bytes at least), the second byte a
/// digit. Hosts that start with a digit are mostly debris of a cut hex
/// pointer (`0x64a3eagdr116`): its `x` fails here, not after a call (on
/// the 30 MB sample, 11.5k calls of 55 instructions each).
#[inline(always)]
pub(super) fn glued_timestamp(line: &[u8], host_start: usize, host_end: usize) -> Option<(i64, usize, usize)> {
    if host_end < host_start + 13 || !line[host_start].is_ascii_digit() || !line[host_start + 1].is_ascii_digit() {
        return None;
    }
    glued_timestamp_digit(line, host_start, host_end)
}

/// [`glued_timestamp`] past its first test.
#[inline(never)]
fn glued_timestamp_digit(line: &[u8], host_start: usize, host_end: usize) -> Option<(i64, usize, usize)> {
    let h = &line[host_start..host_end];
    if !h.first()?.is_ascii_digit() {
        return None;
    }
    // The first `.` within 32 bytes, with only digits before it, is where
    // the run of leading digits ends (read that way, a host that merely
    // starts with a digit is rejected at its first non-digit).
    let dot = h.iter().take(32).take_while(|b| b.is_ascii_digit()).count();
    if dot < 10 || h.get(dot) != Some(&b'.') {
        return None;
    }
    let secs_at = dot - 10;
    let run = h[dot + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
    if run == 0 || dot + 1 + run == h.len() {
        return None; // no fraction, or no host after it
    }
    let frac = match run {
        3 | 6 | 9 => run,
        _ => [9, 6, 3].into_iter().find(|&n| n < run).unwrap_or(run),
    };
    let host_at = dot + 1 + frac;
    if host_at >= h.len() || !crate::bytes::is_host_start(h[host_at]) {
        return None;
    }
    let secs = dec_u64(&h[secs_at..dot])? as i64;
    let mut ns: i64 = 0;
    for i in 0..9 {
        ns = ns * 10 + if i < frac { (h[dot + 1 + i] - b'0') as i64 } else { 0 };
    }
    Some((secs.checked_mul(1_000_000_000)?.checked_add(ns)?, host_start + secs_at, host_start + host_at))
}

/// A `%s.%6f` epoch timestamp right before the host: returns (ns, its
/// start). Mostly no space precedes the host (a line's start, debris glued
/// in front): that test inlines, the rest does not.
#[inline(always)]
pub(super) fn timestamp_before(line: &[u8], host_start: usize) -> (Option<i64>, usize) {
    if host_start < 2 || line[host_start - 1] != b' ' {
        return (None, host_start);
    }
    timestamp_after_space(line, host_start)
}

/// [`timestamp_before`] past its first test.
#[inline(never)]
fn timestamp_after_space(line: &[u8], host_start: usize) -> (Option<i64>, usize) {
    let end = host_start - 1;
    let mut s = end;
    while s > 0 && (line[s - 1].is_ascii_digit() || line[s - 1] == b'.') {
        s -= 1;
    }
    // Epoch seconds have 10 digits (until 2286); more digits in front are
    // the tail of a line this one cut (`opCount 41766081201.557987`).
    if let Some(dot) = line[s..end].iter().position(|&b| b == b'.') {
        if dot > 10 {
            s += dot - 10;
        }
    }
    let tok = &line[s..end];
    if tok.len() < 10 || !tok.contains(&b'.') {
        return (None, host_start);
    }
    match float(tok) {
        Some(secs) if secs > 1e8 => {
            // Split at the dot to keep microsecond precision exact.
            let dot = tok.iter().position(|&b| b == b'.').unwrap_or(tok.len());
            let whole = dec_u64(&tok[..dot]).unwrap_or(0) as i64;
            let frac = &tok[(dot + 1).min(tok.len())..];
            let mut ns: i64 = 0;
            for i in 0..9 {
                ns = ns * 10 + frac.get(i).map_or(0, |d| (d - b'0') as i64);
            }
            (Some(whole * 1_000_000_000 + ns), s)
        }
        _ => (None, host_start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inline precheck of `glued_timestamp` turns away no host that
    /// `glued_timestamp_digit` accepts: every host of up to 24 bytes drawn
    /// from digits, a dot and letters (random), and timestamps of each
    /// width glued to hosts, at every cut of their front.
    #[test]
    fn glued_precheck_loses_nothing() {
        let check = |h: &[u8]| {
            let want = if h.first().is_some_and(u8::is_ascii_digit) { glued_timestamp_digit(h, 0, h.len()) } else { None };
            assert_eq!(glued_timestamp(h, 0, h.len()), want, "{}", String::from_utf8_lossy(h));
        };
        for ts in ["1795693065.217944", "1795693065.217", "1795693065.217944123", "91795693065.2179441", "1795693065.2"] {
            for host in ["vm", "0vm", "12ab", "x"] {
                let full = format!("{ts}{host}");
                for cut in 0..full.len() {
                    check(&full.as_bytes()[cut..]);
                }
            }
        }
        let alphabet = b"0123456789.0123456789ax";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..300_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % 25) as usize;
            let h: Vec<u8> = (0..n).map(|i| alphabet[((x >> (i * 2 % 50)) as usize + i) % alphabet.len()]).collect();
            check(&h);
        }
    }

    /// `digits_u32` against its byte-at-a-time reference: runs of every
    /// length up to 20 (each digit value in each position, all nines, all
    /// zeros) at every offset, followed by each kind of byte that ends a
    /// run (or by the line's end) and by bytes that make the 8-byte test
    /// carry; then random lines.
    #[test]
    fn digits_u32_matches_the_scalar_read() {
        let enders: &[u8] = &[b'/', b':', b' ', b'a', b'.', 0x80, 0xb0, 0xb9, 0xc9, 0xff, 0x00, 0x2f, 0x3a];
        let mut runs: Vec<Vec<u8>> = Vec::new();
        for n in 0..=20usize {
            runs.push(vec![b'9'; n]);
            runs.push(vec![b'0'; n]);
            for at in 0..n {
                for d in b'0'..=b'9' {
                    let mut r = vec![b'1'; n];
                    r[at] = d;
                    runs.push(r);
                }
            }
        }
        for run in &runs {
            for off in 0..3 {
                for end in enders.iter().map(Some).chain([None]) {
                    for tail in [&b""[..], b"99999999", b"\xff\xff\xff", b"\x80\x7f9"] {
                        let mut line = vec![b'x'; off];
                        line.extend_from_slice(run);
                        if let Some(&e) = end {
                            line.push(e);
                            line.extend_from_slice(tail);
                        }
                        assert_eq!(digits_u32(&line, off), digits_u32_scalar(&line, off), "{line:?}");
                    }
                }
            }
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let line: Vec<u8> = (0..(x % 24) as usize).map(|i| {
                let b = (x >> (i * 5 % 60)) as u8;
                if b % 4 == 0 { b } else { b'0' + b % 10 }
            }).collect();
            for from in 0..=line.len() {
                assert_eq!(digits_u32(&line, from), digits_u32_scalar(&line, from), "{line:?} {from}");
            }
        }
    }
}
