//! Memo of the line prefixes seen last, so that most lines are split with one
//! byte comparison instead of a parse.
//!
//! A thread prints the same `host:pid:tid [dev] [func, line ]NCCL LEVEL `
//! prefix on line after line, and a log interleaves only a handful of threads
//! at a time. When [`super::prefix`]'s single-prefix path accepts a prefix, its
//! bytes are remembered here with the segment they gave. A later line that
//! starts with exactly those bytes gives the same segment, because everything
//! that path decides is a function of the prefix bytes alone:
//!
//! * the forward `host:pid:tid ` read, the `[dev]` and `NCCL LEVEL ` search and
//!   the check for another candidate inside the prefix only look at bytes
//!   before the message (the first ` NCCL ` found in identical bytes is the
//!   same one; the level is followed by a space that is part of the prefix);
//! * the host fix-up ([`super::prefix::KnownHosts`]) returns 0 for a (host,
//!   pid) forever once it returned 0, as the host then stays in its list;
//! * a line starting at byte 0 with a host has no timestamp before it.
//!
//! The caller still checks the message for a second prefix, as for any line.

use super::prefix::{Level, Segment};

/// How many prefixes are kept: enough for the threads a log interleaves at
/// once, few enough that a miss (which then parses) costs little.
const ENTRIES: usize = 8;
/// Longer prefixes are not kept (a function name this long is unusual).
const MAX_PREFIX: usize = 192;
/// Shorter ones cannot be a prefix (`a:1:1 NCCL CALL ` is 16 bytes), which
/// lets the first 8 bytes, and the 16 at an entry's `key_at`, be read as words.
const MIN_PREFIX: usize = 16;

struct Entry {
    /// The first 8 bytes, and the 16 bytes at `key_at` (around the end of
    /// the tid: the tid's last digits and its space, then the `[dev]` or the
    /// start of `NCCL`): quick filters before the full comparison. Threads of
    /// one process share the first bytes and differ in the tid; one thread
    /// prints for several devices (a process driving many GPUs).
    head: u64,
    key: [u64; 2],
    key_at: usize,
    bytes: Vec<u8>,
    host_end: usize,
    pid: u32,
    tid: u32,
    dev: Option<u32>,
    level: Level,
}

#[derive(Default)]
pub struct PrefixCache {
    /// Most recently used first.
    // Boxed so that reordering and inserting move pointers, not entries:
    // measured cheaper than a vector of entries or of indices into one.
    #[allow(clippy::vec_box)]
    entries: Vec<Box<Entry>>,
}

#[inline]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl PrefixCache {
    /// The slot of the remembered prefix `line` starts with, moved towards
    /// the front.
    #[inline]
    fn find(&mut self, line: &[u8]) -> Option<usize> {
        if line.len() < MIN_PREFIX {
            return None;
        }
        let head = word(line, 0);
        let i = self.entries.iter().position(|e| {
            e.head == head
                && e.bytes.len() <= line.len()
                && e.key == [word(line, e.key_at), word(line, e.key_at + 8)]
                && crate::bytes::eq_words(&line[..e.bytes.len()], &e.bytes)
        })?;
        // Keep the threads that are writing now at the front (two threads
        // taking turns stay where they are).
        if i > 1 {
            self.entries.swap(1, i);
            return Some(1);
        }
        Some(i)
    }

    /// When `line` starts with a remembered prefix, appends its segment to
    /// `out` and returns where the message starts.
    #[inline]
    pub fn lookup(&mut self, line: &[u8], out: &mut Vec<Segment>) -> Option<usize> {
        let i = self.find(line)?;
        let e = &self.entries[i];
        out.push(Segment {
            host: 0..e.host_end,
            pid: e.pid,
            tid: e.tid,
            dev: e.dev,
            level: e.level,
            ts_ns: None,
            msg: e.bytes.len()..line.len(),
            cut: false,
        });
        Some(e.bytes.len())
    }

    /// Remembers the prefix of `seg`, the single prefix that `line` starts
    /// with. Only prefixes that end with the space after the level qualify: a
    /// level at the end of the line says nothing about a longer line.
    pub fn insert(&mut self, line: &[u8], seg: &Segment) {
        let n = seg.msg.start;
        if seg.host.start != 0
            || seg.ts_ns.is_some()
            || !(MIN_PREFIX..=MAX_PREFIX).contains(&n)
            || line[n - 1] != b' '
        {
            return;
        }
        // The tid ends at the first space after the host.
        let tid_end = memchr::memchr(b' ', &line[seg.host.end..n]).map_or(n, |i| seg.host.end + i + 1);
        let key_at = tid_end.saturating_sub(8).min(n - 16);
        // Once full, the least recently used entry is taken over (with its
        // buffer: no allocation per miss).
        let mut e = match self.entries.len() {
            ENTRIES => self.entries.pop().expect("full"),
            _ => Box::new(Entry {
                head: 0,
                key: [0; 2],
                key_at: 0,
                bytes: Vec::new(),
                host_end: 0,
                pid: 0,
                tid: 0,
                dev: None,
                level: seg.level,
            }),
        };
        e.bytes.clear();
        e.bytes.extend_from_slice(&line[..n]);
        (e.head, e.key, e.key_at) = (word(line, 0), [word(line, key_at), word(line, key_at + 8)], key_at);
        (e.host_end, e.pid, e.tid, e.dev, e.level) = (seg.host.end, seg.pid, seg.tid, seg.dev, seg.level);
        self.entries.insert(0, e);
    }
}
