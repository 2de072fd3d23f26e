//! The host names known per pid ([`KnownHosts`]), which undo the debris a
//! cut line glues in front of a host (`stonstone:2984738:…`), and what a
//! chunk parse's host answers assumed of the hosts known before it
//! ([`HostSpec`], checked by the join). [`KnownHosts`] also carries the
//! state of [`super`]'s line splitting (the prefix memo, the `NCCL `
//! finder, the shortcuts switch), which relies on these answers.

use super::super::prefix_cache::PrefixCache;
use crate::bytes::NcclFinder;

/// Host names seen so far, by pid, used to undo fused host names; also the
/// memo of recent prefixes (it lives here because it relies on this state).
pub struct KnownHosts {
    by_pid: rustc_hash::FxHashMap<u32, Vec<Box<[u8]>>>,
    pub(super) recent: PrefixCache,
    /// Whether [`super::split_line`] may take its shortcuts; off, every line goes
    /// through [`super::split_line_scan`] (the reference the shortcuts are tested on).
    pub(super) fast: bool,
    /// Finds `NCCL ` for [`super::split_line`]'s second-prefix check.
    pub(super) nccl: NcclFinder,
    /// Set by the last line [`super::split_line`] found no segment in: whether it
    /// held a `host:pid:tid ` all the same ([`super::has_cut_prefix`]'s answer,
    /// read off the scan that found no segment). Valid only right after
    /// such a line.
    pub(in crate::nccl_log) cut_prefix: bool,
    /// On a chunk parse (see [`super::super::chunk_join`]), what its answers
    /// assumed of the hosts known before it; `None` elsewhere.
    pub(in crate::nccl_log) spec: Option<Box<HostSpec>>,
    /// The last answers of [`KnownHosts::resolve`].
    answers: Answers,
}

/// How many answers [`Answers`] keeps: the cut lines of a burst repeat a
/// handful of (pid, spelling) pairs (on the bench log's sample, 3 of 4
/// questions about a host inside a line were one of the last 4 asked).
const ANSWERS: usize = 4;

/// The last few answers of [`KnownHosts::resolve`], by pid and spelling:
/// a compare of a few words instead of a hash lookup and a pass over the
/// pid's spellings. An answer never changes while `resolve` alone learns:
/// a known spelling stays known (0); a spelling `resolve` adds has no
/// known proper suffix, so none it adds later is a longer suffix of a
/// spelling already answered as debris (that suffix would have one). The
/// join's [`KnownHosts::learn`] adds spellings without that test: it
/// forgets every answer.
#[derive(Default)]
struct Answers {
    slots: [Answer; ANSWERS],
    /// The slot filled next (round robin).
    next: usize,
}

#[derive(Default)]
struct Answer {
    filled: bool,
    pid: u32,
    /// The spelling asked about (the buffer is reused: no allocation once large enough).
    host: Vec<u8>,
    debris: usize,
}

impl Answers {
    #[inline(always)]
    fn get(&self, pid: u32, host: &[u8]) -> Option<usize> {
        self.slots
            .iter()
            .find(|a| a.filled && a.pid == pid && crate::bytes::eq_words(&a.host, host))
            .map(|a| a.debris)
    }

    fn put(&mut self, pid: u32, host: &[u8], debris: usize) {
        let a = &mut self.slots[self.next];
        self.next = (self.next + 1) % ANSWERS;
        a.filled = true;
        a.pid = pid;
        a.host.clear();
        a.host.extend_from_slice(host);
        a.debris = debris;
    }
}

/// What a chunk parse's host answers rest on. [`KnownHosts::resolve`]
/// answers from the spellings known for a pid: those seeded (assumed known
/// before the chunk) and those learned in it. The join accepts the chunk only
/// if, for every spelling the chunk asked about, the state before the chunk
/// knows exactly the seeded spellings among its suffixes (then every answer,
/// and so every learned spelling, is the one the sequential reader gives).
#[derive(Default)]
pub(in crate::nccl_log) struct HostSpec {
    /// Spellings assumed known before the chunk, by pid.
    pub(in crate::nccl_log) seeds: Vec<(u32, Box<[u8]>)>,
    /// Spellings answered as debris of a known one, each once, at most
    /// [`MAX_DEBRIS`] (then `overflow`: the join cannot check them), with
    /// their answer; each key is the pid's 4 bytes (little-endian) then the
    /// spelling, so that a spelling answered again is looked up as a slice
    /// built in `key`, not boxed (an allocation per debris answer was 8 % of
    /// what chunking added to `stats` on the bench log). The answers are
    /// the chunk parse's memo behind [`Answers`] ([`KnownHosts::resolve_spec`]).
    pub(in crate::nccl_log) debris: rustc_hash::FxHashMap<Box<[u8]>, usize>,
    key: Vec<u8>,
    /// [`KnownHosts::learn`] added a spelling after answers were noted:
    /// they may have changed, and are noted but no longer used as a memo
    /// (a chunk parse learns only before its first question).
    stale: bool,
    pub(in crate::nccl_log) overflow: bool,
    /// Spellings learned after a longer spelling of the same pid ending with
    /// them (`stone` after `stonstone`): the longer one was debris if the
    /// state before the chunk knew this one. A spelling learned before any
    /// such question (not late) may have been known before the chunk without
    /// changing an answer.
    pub(in crate::nccl_log) late: Vec<(u32, Box<[u8]>)>,
}

impl HostSpec {
    /// Builds the key of (`pid`, `host`) in `key`.
    #[inline(always)]
    fn set_key(&mut self, pid: u32, host: &[u8]) {
        self.key.clear();
        self.key.extend_from_slice(&pid.to_le_bytes());
        self.key.extend_from_slice(host);
    }

    /// The debris answer noted for the spelling whose key is in `key`.
    #[inline(always)]
    fn noted(&self) -> Option<usize> {
        self.debris.get(&self.key[..]).copied()
    }

    /// The spelling whose key is in `key`, not noted, was answered as
    /// debris `d` of a known spelling.
    fn note_new_debris(&mut self, d: usize) {
        if self.debris.len() < MAX_DEBRIS {
            self.debris.insert(self.key[..].into(), d);
        } else {
            self.overflow = true;
        }
    }

    /// The noted spelling whose key is in `key` was answered as debris `d`
    /// again (the answers are `stale`).
    #[cold]
    fn renote(&mut self, d: usize) {
        if let Some(v) = self.debris.get_mut(&self.key[..]) {
            *v = d;
        }
    }

    /// `host` of `pid` was answered as debris `d` of a known spelling
    /// (the reference [`KnownHosts::resolve_spec`] is tested on).
    #[cfg(test)]
    fn note_debris(&mut self, pid: u32, host: &[u8], d: usize) {
        self.set_key(pid, host);
        match self.noted() {
            Some(_) => self.renote(d),
            None => self.note_new_debris(d),
        }
    }

    /// The debris answers, as (pid, spelling).
    fn debris(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.debris.keys().map(|k| (u32::from_le_bytes([k[0], k[1], k[2], k[3]]), &k[4..]))
    }
}

impl Default for KnownHosts {
    fn default() -> Self {
        KnownHosts {
            by_pid: Default::default(),
            recent: PrefixCache::default(),
            fast: true,
            nccl: NcclFinder::default(),
            cut_prefix: false,
            spec: None,
            answers: Answers::default(),
        }
    }
}

impl KnownHosts {
    /// Known hosts with [`super::split_line`]'s shortcuts on or off.
    pub fn with_fast_paths(fast: bool) -> Self {
        KnownHosts { fast, ..KnownHosts::default() }
    }

    /// Returns how many leading bytes of `host` are debris of a cut line:
    /// `stonstone` with a known `stone` for this pid gives 4. Learns new hosts.
    ///
    /// One lookup of the pid and one pass over its spellings answer both
    /// questions (is `host` known; which known spelling is its longest proper
    /// suffix), each compare a few words without `memcmp`: a second lookup
    /// and a `memcmp` per spelling made the debris answer (a cut line's
    /// `ostone`, `0x7f4d52c0e800stone`) cost twice the known one.
    pub(super) fn resolve(&mut self, host: &[u8], pid: u32) -> usize {
        match self.answers.get(pid, host) {
            // A remembered debris answer was noted when it was first given
            // (the noted set only grows): no lookup again (a hash lookup a
            // repeat was 3.4 M instructions on the 100 MB bench log).
            Some(d) => d,
            None => {
                let d = match self.spec.is_some() {
                    false => self.resolve_anew(host, pid),
                    true => self.resolve_spec(host, pid),
                };
                self.answers.put(pid, host, d);
                d
            }
        }
    }

    /// [`KnownHosts::resolve`] on a chunk parse when [`Answers`] does not
    /// know: a debris answer noted before is the answer (its key's lookup
    /// is needed anyway, to note each spelling once), else the answer of
    /// [`KnownHosts::resolve_anew`], noted when debris. Debris answers fall
    /// out of the 4 answers kept ~16.5k times on the 100 MB bench log, 5 in 6
    /// of them a spelling noted before: the noted answer spares its pass
    /// over the pid's spellings (chunked `stats`, 2 threads: `resolve` 8.99 M
    /// instructions -> 7.24 M with the map lookup, measured on a line-tables build). Valid as [`Answers`] is: no
    /// answer changes while `resolve` alone learns, and a chunk parse
    /// learns from nothing else once seeded.
    #[inline(never)]
    fn resolve_spec(&mut self, host: &[u8], pid: u32) -> usize {
        let s = self.spec.as_deref_mut().expect("a chunk parse");
        s.set_key(pid, host);
        let noted = s.noted();
        if let (Some(d), false) = (noted, s.stale) {
            return d;
        }
        let d = self.resolve_anew(host, pid);
        if d > 0 {
            let s = self.spec.as_deref_mut().expect("a chunk parse");
            match noted {
                Some(_) => s.renote(d),
                None => s.note_new_debris(d),
            }
        }
        d
    }

    /// [`KnownHosts::resolve`] without its memos ([`Answers`], the chunk
    /// parse's noted debris answers). Inlined into both: a call here cost
    /// the sequential read 0.4 M instructions on the 100 MB bench log.
    #[inline(always)]
    fn resolve_anew(&mut self, host: &[u8], pid: u32) -> usize {
        let n = host.len();
        let hosts = self.by_pid.entry(pid).or_default();
        let mut suffix: Option<usize> = None;
        for k in hosts.iter() {
            let m = k.len();
            if m == n {
                if crate::bytes::eq_words(k, host) {
                    return 0;
                }
            } else if m < n && suffix.is_none_or(|s| m > s) && crate::bytes::eq_words(k, &host[n - m..]) {
                suffix = Some(m);
            }
        }
        if let Some(k) = suffix {
            return n - k;
        }
        if let Some(s) = self.spec.as_deref_mut() {
            if hosts.iter().any(|h| h.len() > n && h.ends_with(host)) {
                s.late.push((pid, host.into()));
            }
        }
        hosts.push(host.into());
        0
    }

    /// A chunk parse's hosts: `seeds` (pid, spelling) assumed known before it.
    #[cfg(test)]
    pub(in crate::nccl_log) fn speculative(fast: bool, seeds: &[(u32, Box<[u8]>)]) -> Self {
        let mut h = KnownHosts::with_fast_paths(fast);
        h.speculate(seeds);
        h
    }

    /// Makes these hosts (new, asked nothing yet) a chunk parse's: `seeds`
    /// (pid, spelling) assumed known before it. In place, so that a chunk
    /// parser does not build a second [`PrefixCache`] (its `Default` was
    /// ~29k instructions, half of a chunk parser's setup).
    pub(in crate::nccl_log) fn speculate(&mut self, seeds: &[(u32, Box<[u8]>)]) {
        for (pid, host) in seeds {
            self.learn(*pid, host);
        }
        self.spec = Some(Box::new(HostSpec { seeds: seeds.to_vec(), ..HostSpec::default() }));
    }

    /// Whether the state before a chunk (`self`) answers every host question
    /// of the chunk's parse (`chunk`) as the chunk did (see [`HostSpec`]).
    /// For every spelling `h` the chunk asked about, each spelling known
    /// before that `h` ends with must be seeded, or be learned by the chunk
    /// before any question it could have answered differently (not
    /// [`HostSpec::late`]); each seeded one must be known before.
    pub(in crate::nccl_log) fn agrees_with(&self, chunk: &KnownHosts) -> bool {
        let Some(spec) = chunk.spec.as_deref() else { return true };
        if spec.overflow {
            return false;
        }
        let none: &[Box<[u8]>] = &[];
        let asked = chunk.by_pid.iter().flat_map(|(&pid, hs)| hs.iter().map(move |h| (pid, h)));
        let asked = asked.map(|(pid, h)| (pid, &h[..])).chain(spec.debris());
        let has = |list: &[(u32, Box<[u8]>)], pid: u32, k: &[u8]| list.iter().any(|(p, s)| *p == pid && &s[..] == k);
        for (pid, h) in asked {
            let before = self.by_pid.get(&pid).map_or(none, |v| &v[..]);
            let learned_early = |k: &[u8]| chunk.knows(pid, k) && !has(&spec.late, pid, k);
            if before.iter().any(|k| h.ends_with(k) && !has(&spec.seeds, pid, k) && !learned_early(k)) {
                return false;
            }
            let known_before = |k: &[u8]| before.iter().any(|b| &b[..] == k);
            if spec.seeds.iter().any(|(p, k)| *p == pid && h.ends_with(k) && !known_before(k)) {
                return false;
            }
        }
        true
    }

    /// The host spellings known per pid (seeded or learned).
    pub(in crate::nccl_log) fn learned(&self) -> impl Iterator<Item = (u32, &[Box<[u8]>])> {
        self.by_pid.iter().map(|(&pid, h)| (pid, &h[..]))
    }

    /// Whether `host` is a known spelling for `pid`.
    fn knows(&self, pid: u32, host: &[u8]) -> bool {
        self.by_pid.get(&pid).is_some_and(|hs| hs.iter().any(|k| &k[..] == host))
    }

    /// Learns `host` for `pid` unless known (the join of a chunk's hosts).
    pub(in crate::nccl_log) fn learn(&mut self, pid: u32, host: &[u8]) {
        let hosts = self.by_pid.entry(pid).or_default();
        if !hosts.iter().any(|h| &h[..] == host) {
            hosts.push(host.into());
            // Added without `resolve`'s test: it may change an answer.
            self.answers = Answers::default();
            if let Some(s) = self.spec.as_deref_mut() {
                s.stale |= !s.debris.is_empty();
            }
        }
    }
}

/// Most debris answers a parser remembers (see [`HostSpec::debris`]).
const MAX_DEBRIS: usize = 4096;


#[cfg(test)]
mod tests {
    use super::*;

    /// `resolve` with its memo against `resolve_anew` alone, on runs of
    /// spellings (debris glued in front of a few hosts, a few pids) with
    /// the join's `learn` in between, on a chunk parse's hosts and not.
    #[test]
    fn remembered_answers_are_the_answers() {
        let words: [&[u8]; 6] = [b"stone", b"tone", b"ostone", b"0x7f4d52c0e800stone", b"stonstone", b"gdr114"];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..400 {
            let seeds: Vec<(u32, Box<[u8]>)> = if round % 2 == 0 { vec![] } else { vec![(1, b"tone"[..].into())] };
            let (mut memo, mut plain) = if seeds.is_empty() {
                (KnownHosts::default(), KnownHosts::default())
            } else {
                (KnownHosts::speculative(true, &seeds), KnownHosts::speculative(true, &seeds))
            };
            for _ in 0..60 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (pid, w) = ((x % 3) as u32, words[(x >> 8) as usize % words.len()]);
                // Every fourth round learns nothing in between (as a chunk
                // parse, seeded first): the noted debris answers are the memo.
                if (x >> 20) % 9 == 0 && round % 4 != 3 {
                    memo.learn(pid, w);
                    plain.learn(pid, w);
                    continue;
                }
                let want = plain.resolve_anew(w, pid);
                if want > 0 {
                    if let Some(s) = plain.spec.as_deref_mut() {
                        s.note_debris(pid, w, want);
                    }
                }
                assert_eq!(memo.resolve(w, pid), want, "round {round}");
            }
            let sorted = |h: &KnownHosts| {
                let mut v: Vec<(u32, Vec<Box<[u8]>>)> = h.learned().map(|(p, s)| (p, s.to_vec())).collect();
                v.sort();
                v
            };
            assert_eq!(sorted(&memo), sorted(&plain));
            if let (Some(a), Some(b)) = (memo.spec.as_deref(), plain.spec.as_deref()) {
                assert_eq!((&a.debris, &a.late, a.overflow), (&b.debris, &b.late, b.overflow));
            }
        }
    }
}
