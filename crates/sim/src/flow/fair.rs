//! Max-min fair rates of coflows over weighted links, by progressive filling.
//!
//! A coflow advances at one rate `x` (bytes of its operation per µs); on link `l` it puts
//! `x · w_l`, where `w_l` is the bytes the whole operation moves over `l` per byte of the
//! operation. Filling raises every unfrozen rate together; a link saturates at the level
//! `(cap − load of frozen coflows) / Σ w of unfrozen coflows`; the coflows on the first link to
//! saturate freeze at that level, and the loads of their other links are updated. A link's
//! level only rises as coflows freeze elsewhere (it was at least the freezing level), so the
//! heap keeps possibly stale, too-low keys and re-checks a link when it pops: a key that is
//! still current is the true minimum. Every (coflow, link) entry is touched once and the heap
//! sees a push per link plus one per stale pop: about O(E + L log L) per recomputation.
//! Equal rates mean equal algorithm bandwidth (operation bytes per second) on a shared
//! bottleneck.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What the filling reads of a coflow.
pub(super) trait Weighted {
    fn active(&self) -> bool;
    fn links(&self) -> &[(u32, f64)];
    fn set_rate(&mut self, r: f64);
    fn rate(&self) -> f64;
}

#[derive(Clone, Copy)]
struct Item {
    level: f64,
    link: u32,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    /// Reversed: `BinaryHeap` pops the lowest level first (ties by link id, for determinism).
    fn cmp(&self, o: &Self) -> Ordering {
        o.level.total_cmp(&self.level).then(o.link.cmp(&self.link))
    }
}

/// Reusable buffers, sized by the link count.
#[derive(Default)]
pub(super) struct Fair {
    wsum: Vec<f64>,
    cnt: Vec<u32>,
    len: Vec<u32>,
    off: Vec<u32>,
    fill: Vec<u32>,
    load: Vec<f64>,
    members: Vec<u32>,
    touched: Vec<u32>,
    heap: BinaryHeap<Item>,
    /// Every coflow through the heap (tests compare the fast path against it).
    #[cfg(test)]
    heap_only: bool,
}

impl Fair {
    pub fn new(links: usize) -> Fair {
        Fair {
            wsum: vec![0.0; links],
            cnt: vec![0; links],
            len: vec![0; links],
            off: vec![0; links],
            fill: vec![0; links],
            load: vec![0.0; links],
            ..Fair::default()
        }
    }

    /// Sets the rate of every active coflow; inactive ones keep theirs.
    pub fn rates<C: Weighted>(&mut self, caps: &[f64], cf: &mut [C]) {
        self.touched.clear();
        for c in cf.iter_mut().filter(|c| c.active()) {
            c.set_rate(f64::NAN);
            if c.links().is_empty() {
                // Nothing on any link (all members on one GPU): done as soon as it starts.
                c.set_rate(f64::INFINITY);
            }
            for &(l, w) in c.links() {
                let l = l as usize;
                if self.cnt[l] == 0 {
                    self.touched.push(l as u32);
                }
                self.cnt[l] += 1;
                self.wsum[l] += w;
            }
        }
        // A coflow alone on every link it uses is a component of its own: filling would freeze
        // it at its first saturating link, `cap / w` lowest over its links (the heap's first
        // pop; its load is 0 then). Components never interact, and the heap pops each
        // component's links in the order it would alone, so taking these out leaves the
        // others' rates bit-for-bit as they were. Usually every coflow is alone (operations of
        // simulated ranks rarely share a link), and the heap is then skipped.
        let mut shared = false;
        #[cfg(test)]
        let skip = self.heap_only;
        #[cfg(not(test))]
        let skip = false;
        for c in cf.iter_mut().filter(|c| !skip && c.active() && c.rate().is_nan()) {
            if !c.links().iter().all(|&(l, _)| self.cnt[l as usize] == 1) {
                shared = true;
                continue;
            }
            let mut r = f64::INFINITY;
            for &(l, _) in c.links() {
                let lu = l as usize;
                let level = if self.wsum[lu] > 0.0 { caps[lu] / self.wsum[lu] } else { f64::INFINITY };
                r = r.min(level);
                self.cnt[lu] = 0;
            }
            c.set_rate(r);
        }
        if !shared && !skip {
            for &l in &self.touched {
                self.wsum[l as usize] = 0.0;
                self.cnt[l as usize] = 0;
            }
            return;
        }
        let mut acc = 0u32;
        for &l in &self.touched {
            let l = l as usize;
            self.off[l] = acc;
            self.fill[l] = acc;
            self.len[l] = self.cnt[l];
            self.load[l] = 0.0;
            acc += self.cnt[l];
        }
        self.members.clear();
        self.members.resize(acc as usize, 0);
        for (i, c) in cf.iter().enumerate() {
            if !c.active() || !c.rate().is_nan() {
                continue;
            }
            for &(l, _) in c.links() {
                let l = l as usize;
                self.members[self.fill[l] as usize] = i as u32;
                self.fill[l] += 1;
            }
        }
        self.heap.clear();
        for &l in self.touched.iter().filter(|&&l| self.cnt[l as usize] > 0) {
            let lu = l as usize;
            let level = if self.wsum[lu] > 0.0 { caps[lu] / self.wsum[lu] } else { f64::INFINITY };
            self.heap.push(Item { level, link: l });
        }
        while let Some(mut it) = self.heap.pop() {
            let l = it.link as usize;
            if self.cnt[l] == 0 {
                continue;
            }
            let room = (caps[l] - self.load[l]).max(0.0);
            let now = if self.wsum[l] > 0.0 { (room / self.wsum[l]).max(it.level) } else { f64::INFINITY };
            if now > it.level * (1.0 + 1e-12) {
                // Stale: the link rose since it was pushed; put it back at its level.
                self.heap.push(Item { level: now, link: it.link });
                continue;
            }
            it.level = now;
            let (o, n) = (self.off[l] as usize, self.len[l] as usize);
            for k in o..o + n {
                let ci = self.members[k] as usize;
                if !cf[ci].rate().is_nan() {
                    continue;
                }
                cf[ci].set_rate(it.level);
                for &(l2, w2) in cf[ci].links() {
                    let l2u = l2 as usize;
                    self.load[l2u] += it.level * w2;
                    self.wsum[l2u] -= w2;
                    self.cnt[l2u] -= 1;
                }
            }
        }
        for &l in &self.touched {
            self.wsum[l as usize] = 0.0;
            self.cnt[l as usize] = 0;
        }
        // Unreachable by construction (every coflow's links were in the heap); a rate of its
        // own bottleneck keeps the simulation moving should float residue ever leave one.
        for c in cf.iter_mut().filter(|c| c.active() && c.rate().is_nan()) {
            let r = c.links().iter().map(|&(l, w)| caps[l as usize] / w).fold(f64::INFINITY, f64::min);
            c.set_rate(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct C {
        links: Vec<(u32, f64)>,
        active: bool,
        rate: f64,
    }

    impl Weighted for C {
        fn active(&self) -> bool {
            self.active
        }
        fn links(&self) -> &[(u32, f64)] {
            &self.links
        }
        fn set_rate(&mut self, r: f64) {
            self.rate = r;
        }
        fn rate(&self) -> f64 {
            self.rate
        }
    }

    /// A small deterministic generator (xorshift), so the cases are the same every run.
    fn next(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Mixes of lone and link-sharing coflows: the lone-coflow shortcut gives the heap's rates
    /// to the bit, for both the lone and the sharing ones.
    #[test]
    fn lone_coflows_shortcut_matches_the_heap() {
        let n_links = 64;
        let caps: Vec<f64> = (0..n_links).map(|l| 10.0 + (l % 7) as f64 * 3.5).collect();
        let mut seed = 0x1234_5678_9abc_def1u64;
        let (mut lone, mut shared) = (0, 0);
        for case in 0..300 {
            let n = 1 + (next(&mut seed) % 12) as usize;
            // Spread: some cases use few links (much sharing), some many (mostly alone).
            let span = if case % 3 == 0 { 8 } else { n_links as u64 };
            let mut cf: Vec<C> = (0..n)
                .map(|_| {
                    let k = (next(&mut seed) % 5) as usize;
                    let mut links: Vec<(u32, f64)> =
                        (0..k).map(|_| ((next(&mut seed) % span) as u32, 0.25 + (next(&mut seed) % 8) as f64 * 0.5)).collect();
                    links.sort_by_key(|l| l.0);
                    links.dedup_by_key(|l| l.0);
                    C { links, active: next(&mut seed) % 5 != 0, rate: 1.5 }
                })
                .collect();
            let mut slow = cf.clone();
            let mut fast = Fair::new(n_links);
            fast.rates(&caps, &mut cf);
            let mut heap = Fair::new(n_links);
            heap.heap_only = true;
            heap.rates(&caps, &mut slow);
            for (a, b) in cf.iter().zip(&slow) {
                assert_eq!(a.rate.to_bits(), b.rate.to_bits(), "case {case}: {cf:?} vs {slow:?}");
            }
            let mut cnt = vec![0; n_links];
            for c in cf.iter().filter(|c| c.active) {
                for &(l, _) in &c.links {
                    cnt[l as usize] += 1;
                }
            }
            for c in cf.iter().filter(|c| c.active && !c.links.is_empty()) {
                if c.links.iter().all(|&(l, _)| cnt[l as usize] == 1) {
                    lone += 1;
                } else {
                    shared += 1;
                }
            }
        }
        // Both paths were exercised.
        assert!(lone > 100 && shared > 100, "lone {lone}, shared {shared}");
    }
}
