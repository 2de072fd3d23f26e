//! What reading one log found: line counts by kind, recovered and broken
//! lines, and samples of what was not understood, for `--verbose`.
//! Also the kind of an uninterpreted message ([`message_kind`]) and the
//! memo of recent first words that spares the reader folding and hashing it
//! again on every such line (`KindMemo`).

use serde::Serialize;

pub(super) const MAX_KINDS: usize = 256;
const SAMPLES_PER_KIND: usize = 3;

/// Counts of lines the reader did not turn into data, by kind, with samples.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KindCounts {
    pub kinds: Vec<KindCount>,
    #[serde(skip)]
    index: rustc_hash::FxHashMap<String, usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KindCount {
    pub kind: String,
    pub count: u64,
    /// (line number, text) of the first few occurrences.
    pub samples: Vec<(u64, String)>,
}

impl KindCounts {
    /// Counts one line of `kind`; `sample` is only called for the first few.
    pub fn add(&mut self, kind: &str, line: u64, sample: impl FnOnce() -> String) {
        let i = self.slot(kind);
        self.bump(i, line, sample);
    }

    /// Where a line of `kind` is counted (added when new; `(other kinds)`
    /// once there are `MAX_KINDS`). The answer for a kind never changes.
    fn slot(&mut self, kind: &str) -> usize {
        self.reindex();
        match self.index.get(kind) {
            Some(&i) => i,
            None => {
                let key = if self.kinds.len() >= MAX_KINDS { "(other kinds)" } else { kind };
                match self.index.get(key) {
                    Some(&i) => i,
                    None => {
                        self.kinds.push(KindCount { kind: key.to_string(), count: 0, samples: Vec::new() });
                        self.index.insert(key.to_string(), self.kinds.len() - 1);
                        self.kinds.len() - 1
                    }
                }
            }
        }
    }

    /// Counts one line in slot `i`; `sample` is only called for the first few.
    #[inline(always)]
    fn bump(&mut self, i: usize, line: u64, sample: impl FnOnce() -> String) {
        let k = &mut self.kinds[i];
        k.count += 1;
        if k.samples.len() < SAMPLES_PER_KIND {
            push_sample(k, line, sample());
        }
    }

    /// [`KindCounts::add`] of the kind [`message_kind`] gives `msg`, with
    /// `memo` answering for first words seen recently: the kind depends on
    /// the first word alone, and folding and hashing it was most of what an
    /// uninterpreted line cost (some logs have tens of thousands of them).
    pub(super) fn add_message(&mut self, msg: &[u8], memo: &mut KindMemo, line: u64, sample: impl FnOnce() -> String) {
        let word = first_word(msg);
        if let Some(i) = memo.lookup(word) {
            // Slots only grow, so a remembered one is still right; checked
            // all the same, in case these counts were replaced.
            if self.kinds.get(i).is_some_and(|k| crate::bytes::eq_words(k.kind.as_bytes(), memo.found_name())) {
                return self.bump(i, line, sample);
            }
        }
        let i = self.slot(message_kind_in(msg, &mut [0; KIND_MAX]));
        memo.insert(word, i, self.kinds[i].kind.as_bytes());
        self.bump(i, line, sample);
    }

    /// Adds the counts of a later part of the same file (its line numbers
    /// shifted by `line_offset`), as if its lines had been counted here: kinds
    /// new here keep their order, samples stay the first few in line order.
    /// The caller makes sure the kinds of both fit under the bound.
    pub(super) fn absorb(&mut self, later: KindCounts, line_offset: u64) {
        self.reindex();
        for k in later.kinds {
            let i = match self.index.get(&k.kind) {
                Some(&i) => i,
                None => {
                    self.index.insert(k.kind.clone(), self.kinds.len());
                    self.kinds.push(KindCount { kind: k.kind, count: 0, samples: Vec::new() });
                    self.kinds.len() - 1
                }
            };
            let mine = &mut self.kinds[i];
            mine.count += k.count;
            let room = SAMPLES_PER_KIND.saturating_sub(mine.samples.len());
            mine.samples.extend(k.samples.into_iter().take(room).map(|(line, text)| (line + line_offset, text)));
        }
    }

    /// Drops the samples (counts stay) and the index of kinds, which
    /// [`KindCounts::add`] rebuilds if it is called again.
    pub fn drop_samples(&mut self) {
        for k in &mut self.kinds {
            k.samples = Vec::new();
        }
        self.kinds.shrink_to_fit();
        self.index = Default::default();
    }

    fn reindex(&mut self) {
        if self.index.len() != self.kinds.len() {
            self.index = self.kinds.iter().enumerate().map(|(i, k)| (k.kind.clone(), i)).collect();
        }
    }

    pub fn total(&self) -> u64 {
        self.kinds.iter().map(|k| k.count).sum()
    }

    /// Kinds sorted by count, most frequent first.
    pub fn sorted(&self) -> Vec<&KindCount> {
        let mut v: Vec<&KindCount> = self.kinds.iter().collect();
        v.sort_by(|a, b| b.count.cmp(&a.count).then(a.kind.cmp(&b.kind)));
        v
    }

    pub fn count_of(&self, kind: &str) -> u64 {
        match self.index.get(kind) {
            Some(&i) => self.kinds[i].count,
            None => self.kinds.iter().find(|k| k.kind == kind).map_or(0, |k| k.count),
        }
    }
}

/// First words of recent uninterpreted messages and the slot of their kind
/// in [`KindCounts`], most recently used first. Entries are boxed and
/// reused, so that a miss (words that hold ids, such as `resp.opId=0x…`,
/// rarely repeat) allocates nothing once the memo is full.
#[derive(Default)]
pub(super) struct KindMemo {
    entries: Vec<Box<KindMemoEntry>>,
}

struct KindMemoEntry {
    word_len: usize,
    word: [u8; MEMO_WORD_MAX],
    slot: usize,
    /// The slot's kind when it was remembered.
    name_len: usize,
    name: [u8; MEMO_NAME_MAX],
}

/// Words kept: a log's uninterpreted lines come in runs of a few kinds.
const MEMO_WORDS: usize = 8;
/// Longer first words are not kept.
const MEMO_WORD_MAX: usize = 64;
/// Room for any kind name: [`message_kind`]'s or `(other kinds)`.
const MEMO_NAME_MAX: usize = KIND_MAX;

impl KindMemo {
    #[inline]
    fn lookup(&mut self, word: &[u8]) -> Option<usize> {
        let mut i = 0;
        loop {
            let e = self.entries.get(i)?;
            if e.word_len == word.len() && crate::bytes::eq_words(&e.word[..e.word_len], word) {
                break;
            }
            i += 1;
        }
        if i > 0 {
            self.entries.swap(0, i);
        }
        Some(self.entries[0].slot)
    }

    /// The kind name remembered by the entry [`KindMemo::lookup`] just found.
    #[inline]
    fn found_name(&self) -> &[u8] {
        &self.entries[0].name[..self.entries[0].name_len]
    }

    fn insert(&mut self, word: &[u8], slot: usize, name: &[u8]) {
        if word.len() > MEMO_WORD_MAX || name.len() > MEMO_NAME_MAX {
            return;
        }
        let mut e = if self.entries.len() == MEMO_WORDS {
            self.entries.pop().expect("full")
        } else {
            Box::new(KindMemoEntry { word_len: 0, word: [0; MEMO_WORD_MAX], slot: 0, name_len: 0, name: [0; MEMO_NAME_MAX] })
        };
        e.word_len = word.len();
        e.word[..word.len()].copy_from_slice(word);
        e.slot = slot;
        e.name_len = name.len();
        e.name[..name.len()].copy_from_slice(name);
        self.entries.insert(0, e);
    }
}

/// The first space-delimited token of `msg`, as [`crate::bytes::next_token`]
/// gives it: for a message that starts with no space and has one within 32
/// bytes, one vector compare instead of a byte loop.
#[inline(always)]
fn first_word(msg: &[u8]) -> &[u8] {
    if msg.len() >= 32 && msg[0] != b' ' {
        let m = crate::bytes::mask32(msg, 0, b' ');
        if m != 0 {
            return &msg[..m.trailing_zeros() as usize];
        }
    }
    crate::bytes::next_token(msg).0
}

/// Keeps `s` as a sample of `k` (out of line: only the first few lines of
/// a kind get here).
#[cold]
#[inline(never)]
fn push_sample(k: &mut KindCount, line: u64, s: String) {
    // A sample quotes the input: at most an excerpt of any value in it.
    let s = match crate::bytes::cap_excerpts(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(c) => c,
    };
    k.samples.push((line, s));
}

/// Summary of one file read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReadReport {
    pub path: String,
    pub bytes: u64,
    pub lines: u64,
    /// Prefixed NCCL segments found (a broken physical line may hold several).
    pub nccl_segments: u64,
    /// Operations emitted, recovered ones included.
    pub ops: u64,
    /// Operations rebuilt from lines cut by another writer (trailing fields lost).
    pub recovered_ops: u64,
    /// Physical lines rebuilt by joining a cut-off fragment with the next line.
    pub rejoined_lines: u64,
    /// Segments whose tail another writer overwrote.
    pub broken_segments: u64,
    /// Broken operation lines too short to recover (cut before the `comm` field).
    pub broken_unrecovered: u64,
    /// Line starts cut inside their own prefix (`host:pid:tid [2] N…`): some
    /// line of that process was lost whole.
    pub lost_fragments: u64,
    pub tuning_lines: u64,
    /// Operations that received algorithm/protocol from a tuning line.
    pub tuned_ops: u64,
    /// Tuning lines that matched no pending operation.
    pub tuning_unmatched: u64,
    pub call_lines: u64,
    pub init_lines: u64,
    pub channel_lines: u64,
    /// Init lines about tuning read: search graphs (`Pattern …`),
    /// `threadThresholds`, lines of the latency/bandwidth table.
    pub tuning_init_lines: u64,
    pub topology_lines: u64,
    pub topology_blocks: u64,
    pub topology_malformed: u64,
    pub version_lines: u64,
    pub warn_lines: u64,
    /// Complete lines of a known kind that failed to parse.
    pub malformed: KindCounts,
    /// NCCL lines of kinds commlens does not interpret.
    pub unknown: KindCounts,
    /// Lines without an NCCL prefix (program output, nccl-tests tables).
    pub non_nccl_lines: u64,
    pub non_nccl_samples: Vec<(u64, String)>,
    pub overlong_lines: u64,
}

impl ReadReport {
    /// Drops every sample of a finished report (the counts stay): what
    /// [`ReadOptions::samples`](super::ReadOptions::samples) off keeps.
    pub fn drop_samples(&mut self) {
        self.malformed.drop_samples();
        self.unknown.drop_samples();
        self.non_nccl_samples = Vec::new();
    }

    /// Adds the counts of a later part of the same file, read on its own
    /// (line numbers from `line_offset + 1`): the parallel reader's join.
    /// Line, byte and overlong counts are the reader's and are not added.
    pub(super) fn absorb(&mut self, o: ReadReport, line_offset: u64) {
        // Every field named, so that a new one is not forgotten here.
        let ReadReport {
            path: _,
            bytes: _,
            lines: _,
            overlong_lines: _,
            nccl_segments: _,
            ops: _,
            recovered_ops: _,
            rejoined_lines: _,
            broken_segments: _,
            broken_unrecovered: _,
            lost_fragments: _,
            tuning_lines: _,
            tuned_ops: _,
            tuning_unmatched: _,
            call_lines: _,
            init_lines: _,
            channel_lines: _,
            tuning_init_lines: _,
            topology_lines: _,
            topology_blocks: _,
            topology_malformed: _,
            version_lines: _,
            warn_lines: _,
            malformed: _,
            unknown: _,
            non_nccl_lines: _,
            non_nccl_samples: _,
        } = &o;
        self.nccl_segments += o.nccl_segments;
        self.ops += o.ops;
        self.recovered_ops += o.recovered_ops;
        self.rejoined_lines += o.rejoined_lines;
        self.broken_segments += o.broken_segments;
        self.broken_unrecovered += o.broken_unrecovered;
        self.lost_fragments += o.lost_fragments;
        self.tuning_lines += o.tuning_lines;
        self.tuned_ops += o.tuned_ops;
        self.tuning_unmatched += o.tuning_unmatched;
        self.call_lines += o.call_lines;
        self.init_lines += o.init_lines;
        self.channel_lines += o.channel_lines;
        self.tuning_init_lines += o.tuning_init_lines;
        self.topology_lines += o.topology_lines;
        self.topology_blocks += o.topology_blocks;
        self.topology_malformed = self.topology_malformed.max(o.topology_malformed);
        self.version_lines += o.version_lines;
        self.warn_lines += o.warn_lines;
        self.malformed.absorb(o.malformed, line_offset);
        self.unknown.absorb(o.unknown, line_offset);
        self.non_nccl_lines += o.non_nccl_lines;
        let room = 3usize.saturating_sub(self.non_nccl_samples.len());
        self.non_nccl_samples.extend(o.non_nccl_samples.into_iter().take(room).map(|(l, t)| (l + line_offset, t)));
    }

    /// Lines that carried information commlens could not use.
    pub fn skipped(&self) -> u64 {
        self.malformed.total() + self.broken_unrecovered
    }
}

/// Kind of an uninterpreted message: its first word, digits folded to `#`
/// (`init.cc:1798 Cuda Host Alloc` → `init.cc:#`, `NET/IB : Using` → `NET/IB`).
pub fn message_kind(msg: &[u8]) -> String {
    message_kind_in(msg, &mut [0; KIND_MAX]).to_string()
}

/// Longest [`message_kind`]: the first word is cut to 32 bytes, and every
/// byte gives at most one ASCII character.
pub const KIND_MAX: usize = 32;

/// [`message_kind`] written into `buf`, so counting a line allocates nothing.
pub fn message_kind_in<'a>(msg: &[u8], buf: &'a mut [u8; KIND_MAX]) -> &'a str {
    let (first, _) = crate::bytes::next_token(msg);
    let first = first.strip_suffix(b":").unwrap_or(first);
    let first = &first[..first.len().min(KIND_MAX)];
    let all_digits = !first.is_empty() && first.iter().all(u8::is_ascii_digit);
    let mut n = 0;
    let mut i = 0;
    while i < first.len() {
        let b = first[i];
        if b.is_ascii_digit() {
            let run = first[i..].iter().take_while(|d| d.is_ascii_digit()).count();
            // Numbers (line numbers, ids) fold; a digit inside a word (`P2P`) stays.
            if run >= 2 || all_digits {
                buf[n] = b'#';
                n += 1;
                i += run;
                continue;
            }
            buf[n] = b;
        } else {
            buf[n] = if b.is_ascii_graphic() { b } else { b'?' };
        }
        n += 1;
        i += 1;
    }
    if n == 0 {
        return "(empty)";
    }
    std::str::from_utf8(&buf[..n]).expect("ASCII only")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `first_word` against `next_token`: a space (or two) at every
    /// position of messages of every length up to 70, with and without
    /// leading spaces.
    #[test]
    fn first_word_is_next_tokens_word() {
        for n in 0..=70 {
            for lead in 0..3 {
                for at in 0..=n {
                    for second in [None, Some(at + 1), Some(at + 5)] {
                        let mut m = vec![b'x'; n];
                        m[..lead.min(n)].fill(b' ');
                        if at < n {
                            m[at] = b' ';
                        }
                        if let Some(j) = second.filter(|&j| j < n) {
                            m[j] = b' ';
                        }
                        assert_eq!(first_word(&m), crate::bytes::next_token(&m).0, "{n} {lead} {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn dropping_samples_keeps_counts_and_kinds() {
        let mut k = KindCounts::default();
        for (i, kind) in ["a", "b", "a", "c", "a"].iter().enumerate() {
            k.add(kind, i as u64 + 1, || format!("line {i}"));
        }
        k.drop_samples();
        assert!(k.kinds.iter().all(|x| x.samples.is_empty()));
        assert_eq!((k.count_of("a"), k.count_of("b"), k.count_of("c"), k.count_of("d")), (3, 1, 1, 0));
        // Counting goes on into the same kinds (the index is rebuilt), no duplicate.
        k.add("b", 9, || "again".into());
        k.add("d", 10, || "new".into());
        assert_eq!(k.kinds.iter().map(|x| (x.kind.as_str(), x.count)).collect::<Vec<_>>(), [("a", 3), ("b", 2), ("c", 1), ("d", 1)]);
        assert_eq!(k.kinds[1].samples, [(9, "again".to_string())]);
    }

    #[test]
    fn kinds() {
        assert_eq!(message_kind(b"init.cc:1798 Cuda Host Alloc"), "init.cc:#");
        assert_eq!(message_kind(b"NET/IB : Using"), "NET/IB");
        assert_eq!(message_kind(b"Connected all rings"), "Connected");
        assert_eq!(message_kind(b""), "(empty)");
        assert_eq!(message_kind(b"  0 : GPU/0-17000"), "#");
        assert_eq!(message_kind(b"P2P Chunksize set to 131072"), "P2P");
        assert_eq!(message_kind(b"transport/net_ib.cc:1234 x"), "transport/net_ib.cc:#");
        // Cut to 32 bytes; bytes outside printable ASCII become `?`.
        assert_eq!(message_kind(&[b'a'; 40]), "a".repeat(32));
        assert_eq!(message_kind("é\x01x".as_bytes()), "???x");
    }

    #[test]
    fn counts_are_bounded() {
        let mut k = KindCounts::default();
        for i in 0..1000 {
            k.add(&format!("k{i}"), i, || "x".into());
            k.add("hot", i, || format!("s{i}"));
        }
        assert!(k.kinds.len() <= MAX_KINDS + 1);
        assert_eq!(k.total(), 2000);
        assert_eq!(k.count_of("hot"), 1000);
        assert_eq!(k.sorted()[0].kind, "hot");
        assert_eq!(k.kinds.iter().find(|x| x.kind == "hot").unwrap().samples.len(), 3);
    }
}
