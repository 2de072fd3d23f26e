//! Memo of recent line prefixes, so that most lines are split with one
//! byte comparison instead of a parse: a small two-way set-associative table
//! keyed by the prefix's first bytes and the bytes around the tid's end.
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
//!
//! Which prefixes are kept only decides how often a line is parsed, never
//! its segment: a lookup answers only for identical prefix bytes.
//!
//! The same box also keeps the last line split without a segment (see
//! [`PrefixCache::bare`]), which `super::prefix` answers a repeat from.

use super::prefix::{Level, Segment};

/// Sets of the memo, a power of two, of [`WAYS`] entries each. A prefix
/// goes to the set its hash names (see [`set_of`]), so a lookup compares at
/// most two entries, whatever the order in which threads write; the two
/// ways keep a pair of prefixes that share a set (a direct-mapped memo
/// evicted them in turn on every line: with a dozen live prefixes, some
/// pair shares a slot).
const SETS: usize = 64;
const WAYS: usize = 2;
/// Longer prefixes are not kept (a function name this long is unusual).
const MAX_PREFIX: usize = 192;
/// Shorter ones cannot be a prefix (`a:1:1 NCCL CALL ` is 16 bytes), which
/// lets the first 8 bytes, and the 16 at `key_at`, be read as words.
const MIN_PREFIX: usize = 16;
/// The tid's space must lie within this many bytes for a prefix to be kept
/// (and for a line to be looked up): hosts are short.
const KEY_WITHIN: usize = 64;

struct Entry {
    /// The first 8 bytes, and the 16 bytes at `key_at` (around the end of
    /// the tid: the tid's last digits and its space, then the `[dev]` or the
    /// start of `NCCL`): quick filters before the full comparison. Threads of
    /// one process share the first bytes and differ in the tid; one thread
    /// prints for several devices (a process driving many GPUs).
    head: u64,
    key: [u64; 2],
    /// The prefix; empty in a slot never filled.
    bytes: Vec<u8>,
    host_end: usize,
    pid: u32,
    tid: u32,
    dev: Option<u32>,
    level: Level,
}

pub struct PrefixCache {
    /// Set `i` is `slots.sets[i]`. Arrays of a fixed size: a set index, being
    /// under [`SETS`] by construction, then needs no bounds check.
    slots: Box<Slots>,
    /// Per set, the way that answered or was filled last (the other one is
    /// replaced).
    last: [u8; SETS],
}

/// The memo's sets, and the last line [`super::prefix`] scanned without
/// finding a segment with whether it held a candidate (`split_line_rest`
/// answers a repeat of it; at first the empty line, which holds none). Kept
/// in this box: a field of the reader's state of its own moved the
/// compiler's inlining elsewhere in the reader (0.8 M instructions more on
/// the 30 MB sample).
struct Slots {
    sets: [[Entry; WAYS]; SETS],
    bare: Vec<u8>,
    bare_cut: bool,
}

impl Default for PrefixCache {
    fn default() -> Self {
        let vacant = || Entry {
            head: 0,
            key: [0; 2],
            bytes: Vec::new(),
            host_end: 0,
            pid: 0,
            tid: 0,
            dev: None,
            level: Level::Info,
        };
        let sets = std::array::from_fn(|_| std::array::from_fn(|_| vacant()));
        PrefixCache { slots: Box::new(Slots { sets, bare: Vec::new(), bare_cut: false }), last: [0; SETS] }
    }
}

#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Where the key words of a line that starts with a prefix lie: 8 bytes
/// before the end of its tid (the first space: hosts and numbers hold
/// none), clamped at 0. `None` when no space lies within [`KEY_WITHIN`]
/// bytes or the key would not fit in the line.
#[inline(always)]
fn key_at(line: &[u8]) -> Option<usize> {
    // The space is nearly always within 32 bytes: one unrolled compare.
    let m = if line.len() >= 32 { crate::bytes::mask32(line, 0, b' ') } else { 0 };
    let sp = match m {
        0 => crate::bytes::Positions::new(&line[..line.len().min(KEY_WITHIN)], 0, b' ').next()?,
        m => m.trailing_zeros() as usize,
    };
    let at = (sp + 1).saturating_sub(8);
    (at + 16 <= line.len()).then_some(at)
}

/// The set of a prefix with these first 8 bytes and key words.
#[inline(always)]
fn set_of(head: u64, key: [u64; 2]) -> usize {
    let h = (head ^ key[0].rotate_left(21) ^ key[1].rotate_left(42)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - SETS.trailing_zeros())) as usize
}

impl PrefixCache {
    /// Whether `line` is the last line without a segment (see [`Slots`]),
    /// and if so whether it held a candidate.
    #[inline(always)]
    pub fn bare(&self, line: &[u8]) -> Option<bool> {
        let b = &self.slots.bare;
        (line.len() == b.len() && crate::bytes::eq_words(line, b)).then_some(self.slots.bare_cut)
    }

    /// Remembers `line`, which held no segment (a candidate if `cut`).
    #[inline(always)]
    pub fn set_bare(&mut self, line: &[u8], cut: bool) {
        self.slots.bare.clear();
        self.slots.bare.extend_from_slice(line);
        self.slots.bare_cut = cut;
    }

    /// When `line` starts with a remembered prefix, its segment (the
    /// message from the prefix's end to the line's end).
    #[inline(always)]
    pub fn lookup(&mut self, line: &[u8]) -> Option<Segment> {
        if line.len() < MIN_PREFIX {
            return None;
        }
        let at = key_at(line)?;
        let (head, key) = (word(line, 0), [word(line, at), word(line, at + 8)]);
        let set = set_of(head, key);
        let way = (0..WAYS).find(|&w| {
            let e = &self.slots.sets[set][w];
            let n = e.bytes.len();
            // A filled entry's prefix is at least MIN_PREFIX bytes, and its
            // key lies at `at` when the line starts with it (same first space).
            e.head == head
                && e.key == key
                && n >= MIN_PREFIX
                && n <= line.len()
                && crate::bytes::eq_words(&line[..n], &e.bytes)
        })?;
        self.last[set] = way as u8;
        let e = &self.slots.sets[set][way];
        let n = e.bytes.len();
        Some(Segment {
            host: 0..e.host_end,
            pid: e.pid,
            tid: e.tid,
            dev: e.dev,
            level: e.level,
            ts_ns: None,
            msg: n..line.len(),
            cut: false,
        })
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
        let prefix = &line[..n];
        let Some(at) = key_at(prefix) else { return };
        let (head, key) = (word(line, 0), [word(line, at), word(line, at + 8)]);
        // The slot's buffer is reused: no allocation once it is large enough.
        let set = set_of(head, key);
        let way = match (0..WAYS).find(|&w| self.slots.sets[set][w].bytes.is_empty()) {
            Some(w) => w,
            None => (self.last[set] as usize + 1) % WAYS,
        };
        self.last[set] = way as u8;
        let e = &mut self.slots.sets[set][way];
        e.bytes.clear();
        e.bytes.extend_from_slice(prefix);
        (e.head, e.key) = (head, key);
        (e.host_end, e.pid, e.tid, e.dev, e.level) = (seg.host.end, seg.pid, seg.tid, seg.dev, seg.level);
    }
}
