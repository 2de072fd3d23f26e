//! [`AggregateBuilder`]: [`Aggregate::add`] for a stream of operations, with
//! the few keys recently counted held in small arrays in front of the maps.
//!
//! `commlens stats` counts every operation of a log while reading it; three
//! hash-map entries per operation were ~5 % of its instructions on the bench
//! log. A thread's operations go to few (device, handle, kind) cells, size
//! buckets and algorithm pairs at a time, so a linear search of 4 recent keys
//! answers nearly every operation; a key pushed out, and every key at
//! [`AggregateBuilder::finish`], is added to the maps. Sums of partial cells
//! equal the sums of their operations ([`Cell::absorb`]: counts add, minima
//! and maxima combine, a saturated byte sum stays saturated), so the result
//! is the [`Aggregate`] that adding each operation gives.

use crate::stats::{size_bucket, Aggregate, Cell, UNKNOWN_BUCKET};
use commlens_core::model::{CommIdx, DevIdx};
use commlens_core::{Algorithm, CollOp, OpKind, Protocol};
use std::hash::Hash;

/// Recent keys per map.
const WAYS: usize = 4;

/// Up to [`WAYS`] keys and their partial values, oldest replaced first.
#[derive(Debug, Clone)]
struct Recent<K, V> {
    keys: [Option<K>; WAYS],
    vals: [V; WAYS],
    next: usize,
}

impl<K: Copy + Eq + Hash, V: Default + Copy> Default for Recent<K, V> {
    fn default() -> Self {
        Recent { keys: [None; WAYS], vals: [V::default(); WAYS], next: 0 }
    }
}

impl<K: Copy + Eq + Hash, V: Default + Copy> Recent<K, V> {
    /// The slot of `key`, made when absent (the replaced key's value goes to `spill`).
    #[inline]
    fn slot(&mut self, key: K, spill: impl FnOnce(K, V)) -> &mut V {
        let i = match self.keys.iter().position(|k| *k == Some(key)) {
            Some(i) => i,
            None => {
                let i = self.next;
                self.next = (i + 1) % WAYS;
                if let Some(old) = self.keys[i].replace(key) {
                    spill(old, std::mem::take(&mut self.vals[i]));
                }
                i
            }
        };
        &mut self.vals[i]
    }

    fn drain(&mut self, mut spill: impl FnMut(K, V)) {
        for i in 0..WAYS {
            if let Some(k) = self.keys[i].take() {
                spill(k, std::mem::take(&mut self.vals[i]));
            }
        }
    }
}

/// Builds an [`Aggregate`] one operation at a time (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct AggregateBuilder {
    agg: Aggregate,
    cells: Recent<(DevIdx, CommIdx, OpKind), Cell>,
    sizes: Recent<(OpKind, u8), u64>,
    algos: Recent<(OpKind, Option<Algorithm>, Option<Protocol>), u64>,
}

impl AggregateBuilder {
    #[inline]
    pub fn add(&mut self, op: &CollOp) {
        let size = op.size();
        let a = &mut self.agg;
        self.cells
            .slot((op.dev, op.comm, op.kind), |k, c| a.cells.entry(k).or_default().absorb(&c))
            .add(size, op.recovered);
        *self.sizes.slot((op.kind, size.map_or(UNKNOWN_BUCKET, size_bucket)), |k, n| *a.sizes.entry(k).or_default() += n) += 1;
        *self.algos.slot((op.kind, op.algo, op.proto), |k, n| *a.algos.entry(k).or_default() += n) += 1;
    }

    /// The aggregate of every operation added.
    pub fn finish(mut self) -> Aggregate {
        let a = &mut self.agg;
        self.cells.drain(|k, c| a.cells.entry(k).or_default().absorb(&c));
        self.sizes.drain(|k, n| *a.sizes.entry(k).or_default() += n);
        self.algos.drain(|k, n| *a.algos.entry(k).or_default() += n);
        self.agg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commlens_core::model::ProcIdx;
    use commlens_core::DataType;

    /// Many keys in changing orders (runs, alternations, more keys than
    /// ways), sizes known and unknown, recovered or not, sums that saturate:
    /// the builder's aggregate is the one of adding each operation.
    #[test]
    fn builds_what_adding_each_operation_builds() {
        let kinds = [OpKind::AllReduce, OpKind::Send, OpKind::Recv, OpKind::AllGather];
        let algos = [None, Some(Algorithm::Ring), Some(Algorithm::Tree)];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for keys in [1u64, 2, 3, 4, 5, 9, 40] {
            let (mut want, mut got) = (Aggregate::default(), AggregateBuilder::default());
            for i in 0..5_000u64 {
                let k = if i % 7 == 0 { rnd(keys) } else { i / 50 % keys };
                let dtype = if rnd(10) == 0 { DataType::Unknown(99) } else { DataType::Float32 };
                let mut op = CollOp::new(ProcIdx(0), DevIdx((k % 3) as u32), CommIdx(k as u32), kinds[(k % 4) as usize], rnd(1 << 20), dtype);
                if rnd(50) == 0 {
                    op.bytes = u64::MAX / 3;
                }
                op.recovered = rnd(5) == 0;
                op.algo = algos[rnd(3) as usize];
                want.add(&op);
                got.add(&op);
            }
            let got = got.finish();
            let sorted = |a: &Aggregate| {
                let mut c: Vec<_> = a.cells.iter().map(|(k, v)| format!("{k:?} {v:?}")).collect();
                let mut s: Vec<_> = a.sizes.iter().map(|(k, v)| format!("{k:?} {v}")).collect();
                let mut g: Vec<_> = a.algos.iter().map(|(k, v)| format!("{k:?} {v}")).collect();
                c.sort();
                s.sort();
                g.sort();
                (c, s, g)
            };
            assert_eq!(sorted(&got), sorted(&want), "{keys} keys");
            assert!(want.cells.values().any(|c| c.saturated) || keys > 9, "{keys} keys: a saturated cell");
        }
    }
}
