//! The path lines of a topology block: `X :` lists (one path per entry, the type as
//! printed), `Paths from X :` groups and their `--LINK->` chains (the type
//! recomputed the way NCCL types its paths, [`PathClass`]), and deduplication of
//! paths by (from, to). See [`super::topo`] for the grammar.
//!
//! Consecutive `X :` lines of a block list the same targets in the same
//! order, and mostly with the same `(hops/bw/TYPE)` (nine entries in ten on
//! the bench sample): [`PathRows`] keeps the previous line's entries. From
//! each entry on, the line's bytes are compared with the previous line's from
//! the entry at the same position ([`common_prefix`], eight bytes a step), and
//! every previous entry wholly inside the equal stretch is taken with its
//! parse (a run of entries for one comparison, not one comparison and one
//! bookkeeping step per entry); an entry that is not the same is read, its
//! node taken from the previous row when only its `(…)` differs.

use super::topo_block::{Block, Outcome};
use super::topo_lex::{node_ref, parse_bw, parse_path_entry, parse_path_suffix, skip_ws, upper_word, NodeRef};
use commlens_core::topo::{LinkKind, NodeKind, TopoPath};

impl Block {
    /// Keeps the first path per (from, to): 2.28 repeats NET nodes and their paths.
    #[inline]
    fn add_path(&mut self, p: TopoPath) {
        if self.path_keys.insert((p.from, p.to)) {
            self.topo.paths.push(p);
        }
    }

    /// `GPU/0-17000 :GPU/0-17000 (0/5000.0/LOC) GPU/0-65000 (1/240.0/NVL) …`
    pub(super) fn path_list(&mut self, src: NodeRef<'_>, entries: &[u8]) -> Outcome {
        let from = self.node(src.kind, src.id);
        // This line's entries are recorded as they are read (offsets into
        // `entries`); they become the previous row when the line is done.
        let mut rows = std::mem::take(&mut self.rows);
        rows.cur.clear();
        let outcome = self.path_entries(from, entries, &mut rows);
        rows.next_row(entries);
        self.rows = rows;
        outcome
    }

    /// The entries of a path line from `from`: runs of them taken from the
    /// previous row where the bytes are the same (see [`PathRows::same_run`]),
    /// the others read.
    fn path_entries(&mut self, from: usize, entries: &[u8], rows: &mut PathRows) -> Outcome {
        let mut s = entries;
        loop {
            s = skip_ws(s);
            if s.is_empty() {
                return Outcome::Ok;
            }
            let start = entries.len() - s.len();
            let (first, run, taken) = rows.same_run(s);
            if taken > 0 {
                let shift = start as u32 - rows.prev[first].start;
                for i in first..first + run {
                    let e = PathEntry { start: rows.prev[i].start + shift, ..rows.prev[i] };
                    rows.cur.push(e);
                    self.add_path(TopoPath { from, to: e.to, hops: e.hops, bw_gb_s: e.bw_gb_s, kind: e.kind });
                }
                s = &s[taken..];
                continue;
            }
            let e = match self.entry_read(s, start as u32, rows) {
                Some(e) => e,
                // Cut at NCCL's line-length limit: the complete entries are kept.
                None if !s.contains(&b')') => return Outcome::Ok,
                None => return Outcome::Malformed,
            };
            rows.cur.push(e);
            self.add_path(TopoPath { from, to: e.to, hops: e.hops, bw_gb_s: e.bw_gb_s, kind: e.kind });
            s = &s[e.len as usize..];
        }
    }

    /// The entry at the start of `s` (at `start` in the line's entries),
    /// read. Its target is the previous row's at this position when the
    /// bytes are the same (nine in ten of the entries that are not the same
    /// as a whole), and only what follows it is read; otherwise all of it.
    fn entry_read(&mut self, s: &[u8], start: u32, rows: &PathRows) -> Option<PathEntry> {
        let (to, target_len, (hops, bw_gb_s, kind, rest)) = match rows.same_target(s) {
            Some((to, target_len)) => (to, target_len, parse_path_suffix(&s[target_len as usize..])?),
            None => {
                let (target, hops, bw, kind, rest) = parse_path_entry(s)?;
                let target_len = (s.len() - target.rest.len()) as u32;
                (self.node(target.kind, target.id), target_len, (hops, bw, kind, rest))
            }
        };
        Some(PathEntry { start, len: (s.len() - rest.len()) as u32, target_len, to, hops, bw_gb_s, kind })
    }

    /// `Paths from GPU/F000 :` starts a group of chain lines.
    pub(super) fn paths_from(&mut self, rest: &[u8]) -> Outcome {
        self.path_src = None;
        let Some(r) = node_ref(rest) else {
            return Outcome::Malformed;
        };
        let after = skip_ws(r.rest);
        if after != b":" {
            return Outcome::Malformed;
        }
        self.path_src = Some(self.node(r.kind, r.id));
        Outcome::Ok
    }

    /// `--PCI->PCI/C000--PCI->CPU/0 (24.000000)` or ` (5000.000000)` (path to itself).
    pub(super) fn chain(&mut self, body: &[u8]) -> Outcome {
        let Some(from) = self.path_src else {
            return Outcome::Malformed;
        };
        let mut class = PathClass::new(self.topo.nodes[from].kind);
        let mut hops = 0u32;
        let mut last: Option<NodeRef<'_>> = None;
        let mut s = body;
        while let Some(step) = s.strip_prefix(b"--") {
            let Some((link, rest)) = upper_word(step) else {
                return Outcome::Malformed;
            };
            let Some(rest) = rest.strip_prefix(b"->") else {
                return Outcome::Malformed;
            };
            let Some(r) = node_ref(rest) else {
                return Outcome::Malformed;
            };
            class.step(LinkKind::from_name(link), r.kind);
            hops = hops.saturating_add(1);
            s = r.rest;
            last = Some(r);
        }
        let s = skip_ws(s);
        let Some(s) = s.strip_prefix(b"(") else {
            return Outcome::Malformed;
        };
        let Some((bw, s)) = parse_bw(s) else {
            return Outcome::Malformed;
        };
        if s != b")" {
            return Outcome::Malformed;
        }
        let (to, kind) = match last {
            Some(r) => (self.node(r.kind, r.id), class.kind()),
            None => (from, LinkKind::Loc),
        };
        self.add_path(
            TopoPath {
                from,
                to,
                hops,
                bw_gb_s: bw,
                kind,
            },
        );
        Outcome::Ok
    }
}

/// NCCL's path typing, recomputed from the link types of a `Paths from` chain.
struct PathClass {
    worst: LinkKind,
    prev: NodeKind,
    first: bool,
    pci: bool,
    cpu: bool,
    pci_switches: u32,
}

impl PathClass {
    fn new(source: NodeKind) -> PathClass {
        PathClass {
            worst: LinkKind::Loc,
            prev: source,
            first: true,
            pci: false,
            cpu: false,
            pci_switches: 0,
        }
    }

    fn step(&mut self, link: LinkKind, to: NodeKind) {
        let kind = match link {
            LinkKind::Nvl | LinkKind::Nvb if !self.first && self.prev == NodeKind::Gpu => {
                Some(LinkKind::Nvb)
            }
            LinkKind::Nvl | LinkKind::Nvb => Some(LinkKind::Nvl),
            LinkKind::Pci => {
                self.pci = true;
                None
            }
            // NCCL treats the NIC-to-network hop as local.
            LinkKind::Loc | LinkKind::Net => None,
            other => Some(other),
        };
        if let Some(k) = kind {
            self.worst = self.worst.max(k);
        }
        match to {
            NodeKind::Cpu => self.cpu = true,
            NodeKind::PciSwitch => self.pci_switches += 1,
            _ => {}
        }
        self.prev = to;
        self.first = false;
    }

    fn kind(&self) -> LinkKind {
        if !self.pci {
            return self.worst;
        }
        let pci = if self.cpu {
            LinkKind::Phb
        } else if self.pci_switches <= 1 {
            LinkKind::Pix
        } else {
            LinkKind::Pxb
        };
        self.worst.max(pci)
    }
}

/// A set of (from, to) node pairs, one bit per pair in a row per `from`:
/// node indices of a block are small and dense, and a bit test costs less
/// than hashing the pair (a path line adds one pair per entry).
#[derive(Debug, Default)]
pub(super) struct PairSet {
    rows: Vec<Vec<u64>>,
}

impl PairSet {
    /// Adds the pair; whether it was new.
    #[inline]
    pub(super) fn insert(&mut self, (from, to): (usize, usize)) -> bool {
        if from >= self.rows.len() {
            self.rows.resize_with(from + 1, Vec::new);
        }
        let row = &mut self.rows[from];
        let (word, bit) = (to / 64, 1u64 << (to % 64));
        if word >= row.len() {
            row.resize(word + 1, 0);
        }
        let new = row[word] & bit == 0;
        row[word] |= bit;
        new
    }
}

/// Length of the longest common prefix of `a` and `b`, sixteen bytes a
/// step with SSE2 (a path line repeats the previous one for hundreds of
/// bytes at a time), the rest by [`common_prefix_from`].
#[inline]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    #[allow(unused_mut)]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        while i + 16 <= n {
            // SAFETY: SSE2 is part of x86_64; both loads read [i, i + 16)
            // with i + 16 <= n, within both slices.
            let same = unsafe {
                let x = _mm_loadu_si128(a.as_ptr().add(i).cast::<__m128i>());
                let y = _mm_loadu_si128(b.as_ptr().add(i).cast::<__m128i>());
                _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) as u32
            };
            if same != 0xffff {
                return i + (!same).trailing_zeros() as usize;
            }
            i += 16;
        }
    }
    common_prefix_from(a, b, i)
}

/// The scalar reference of [`common_prefix`] (from byte 0), and its tail:
/// the common prefix given that the first `i` bytes are equal, eight bytes
/// a step.
#[inline]
fn common_prefix_from(a: &[u8], b: &[u8], mut i: usize) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (a8, b8) = (&a[i..], &b[i..]);
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        let d = u64::from_le_bytes(x.try_into().expect("8 bytes")) ^ u64::from_le_bytes(y.try_into().expect("8 bytes"));
        if d != 0 {
            return i + (d.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// One entry of a path line, read: where its bytes are in the line's
/// entries (from the target to the `)`), and what they gave.
#[derive(Clone, Copy, Debug)]
pub(super) struct PathEntry {
    start: u32,
    len: u32,
    /// Length of the target (`GPU/0-17000`) at the entry's start.
    target_len: u32,
    to: usize,
    hops: u32,
    bw_gb_s: f64,
    kind: LinkKind,
}

/// The entries of the previous path line of a block (its bytes and their
/// parse) and of the line being read. Reused from line to line: after the
/// first line of a block nothing is allocated.
#[derive(Debug, Default)]
pub(super) struct PathRows {
    prev_text: Vec<u8>,
    prev: Vec<PathEntry>,
    pub(super) cur: Vec<PathEntry>,
}

impl PathRows {
    /// The previous row's entries from the position `cur` is at that `s`
    /// (starting at an entry) repeats: (index of the first, how many, bytes
    /// of `s` they span). An entry counts when all its bytes, and the blanks
    /// before it, are the same as there (at the same distance from the first
    /// entry), and it ends in `s` as `parse_path_entry` ends an entry (a
    /// blank or the end of the line): the parse is a function of those bytes
    /// alone, and the node of a target id stays the same within a block
    /// (nodes are only appended), so reading it would give the same. The
    /// blanks between previous entries are what `skip_ws` skipped, so the
    /// same bytes here put the next entry at the same distance.
    #[inline]
    fn same_run(&self, s: &[u8]) -> (usize, usize, usize) {
        let first = self.cur.len();
        let Some(p) = self.prev.get(first) else { return (first, 0, 0) };
        let base = p.start as usize;
        let same = common_prefix(&self.prev_text[base..], s);
        let (mut run, mut taken) = (0, 0);
        for q in &self.prev[first..] {
            let end = q.start as usize - base + q.len as usize;
            if end > same || !matches!(s.get(end), None | Some(b' ' | b'\t')) {
                break;
            }
            run += 1;
            taken = end;
        }
        (first, run, taken)
    }

    /// The previous row's target at the position `cur` is at, when `s`
    /// starts with its bytes and a blank follows them: `node_ref` then ends
    /// the target there as it did (the id's hex digits stop at the blank),
    /// and gives the same node. Returns the node and the target's length.
    #[inline]
    fn same_target(&self, s: &[u8]) -> Option<(usize, u32)> {
        let p = self.prev.get(self.cur.len())?;
        let (start, len) = (p.start as usize, p.target_len as usize);
        let bytes = &self.prev_text[start..start + len];
        let blank = matches!(s.get(len), Some(b' ' | b'\t'));
        (blank && crate::bytes::eq_words(bytes, s.get(..len)?)).then_some((p.to, p.target_len))
    }

    /// Makes the line just read (`entries`, and `cur`) the previous row.
    fn next_row(&mut self, entries: &[u8]) {
        std::mem::swap(&mut self.prev, &mut self.cur);
        self.prev_text.clear();
        self.prev_text.extend_from_slice(entries);
    }
}

#[cfg(test)]
mod tests {
    use super::super::topo_block::{Block, Outcome};
    use commlens_core::topo::Topology;

    /// Reads `lines` as consecutive lines of one block, with the previous
    /// row remembered (as the reader does) or forgotten before every line
    /// (each line read from its bytes alone); gives the outcomes and the block.
    fn read(lines: &[Vec<u8>], remember: bool) -> (Vec<u8>, Topology) {
        let mut b = Block::new(Topology::default());
        let mut outcomes = Vec::new();
        for l in lines {
            if !remember {
                b.rows = Default::default();
            }
            outcomes.push(match b.line(0, l) {
                Outcome::Ok => 0,
                Outcome::Malformed => 1,
                Outcome::End => 2,
                Outcome::Restart => 3,
            });
        }
        (outcomes, b.topo)
    }

    /// Pairs of path lines where the second is the first with one entry
    /// changed (at every position, in every way that matters to the reuse:
    /// another value, another target, an entry glued to the next, a longer
    /// or shorter entry, a cut or damaged end), and lines of other sources:
    /// remembering the previous row changes nothing.
    /// The bit set against a hash set, on pairs in every order, repeated.
    #[test]
    fn pair_set_matches_hash_set() {
        let mut bits = super::PairSet::default();
        let mut hash = std::collections::HashSet::new();
        for i in 0..5000usize {
            let pair = ((i * 37) % 150, (i * 101 + i / 7) % 200);
            assert_eq!(bits.insert(pair), hash.insert(pair), "{pair:?}");
        }
        assert!(hash.len() > 1000);
    }

    /// `common_prefix` (SSE2) and its scalar reference against a
    /// byte-by-byte count: every pair of lengths up to 50 and every
    /// position of a first difference (and none).
    #[test]
    fn common_prefix_matches_bytewise() {
        let reference = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let base: Vec<u8> = (0..50u8).map(|i| b'a' + i % 26).collect();
        for la in 0..=50 {
            for lb in 0..=50 {
                for diff in 0..=50 {
                    for flip in [1u8, 0x80] {
                        let a = &base[..la];
                        let mut b = base[..lb].to_vec();
                        if diff < lb {
                            b[diff] ^= flip;
                        }
                        assert_eq!(super::common_prefix(a, &b), reference(a, &b), "{la} {lb} {diff}");
                        assert_eq!(super::common_prefix(&b, a), reference(&b, a), "{la} {lb} {diff}");
                        assert_eq!(super::common_prefix_from(a, &b, 0), reference(a, &b), "{la} {lb} {diff}");
                    }
                }
            }
        }
    }

    #[test]
    fn remembered_rows_read_as_fresh_ones() {
        let targets = ["GPU/0-17000", "GPU/0-65000", "NIC/0-4b000", "CPU/0-0", "NET/0-a"];
        let entry = |t: &str, v: &str| format!("{t} ({v})");
        let base: Vec<String> = targets.iter().map(|t| entry(t, "2/1.2/PHB")).collect();
        let edits: [&dyn Fn(&str) -> String; 10] = [
            &|t| entry(t, "3/1.2/PHB"),
            &|t| entry(t, "2/1.25/PHB"),
            &|t| entry(t, "2/1.2/SYS"),
            &|_| entry("GPU/0-99000", "2/1.2/PHB"),
            &|t| entry(&format!("{t}0"), "2/1.2/PHB"),
            &|t| format!("{}x", entry(t, "2/1.2/PHB")),
            &|t| entry(t, "2/1.2/PHB").replace(' ', "\t"),
            &|t| entry(t, "2/1.2"),
            &|t| format!("{t} (2/1."),
            &|t| entry(t, "2/1.2/PHB").to_lowercase(),
        ];
        // Each line from a source of its own: paths are kept once per (from, to).
        let mut lines: Vec<Vec<u8>> = Vec::new();
        let mut line = |es: &[String], sep: &str| {
            lines.push(format!("GPU/1-{:x} :{}", lines.len(), es.join(sep)).into_bytes());
        };
        line(&base, " ");
        for (i, target) in targets.iter().enumerate() {
            for edit in &edits {
                let mut es = base.clone();
                es[i] = edit(target);
                line(&base, " ");
                line(&es, " ");
                line(&es, "  ");
                // The row cut after the changed entry.
                line(&es[..=i], " ");
                line(&base, "\t");
            }
        }
        let (fresh_outcomes, fresh) = read(&lines, false);
        let (outcomes, remembered) = read(&lines, true);
        assert_eq!(outcomes, fresh_outcomes);
        assert_eq!(remembered.nodes, fresh.nodes);
        assert_eq!(remembered.paths, fresh.paths);
        assert!(fresh_outcomes.contains(&1) && fresh.paths.len() > 100);
    }
}
