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
            if !c.active() {
                continue;
            }
            for &(l, _) in c.links() {
                let l = l as usize;
                self.members[self.fill[l] as usize] = i as u32;
                self.fill[l] += 1;
            }
        }
        self.heap.clear();
        for &l in &self.touched {
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
