//! [`AggregateBuilder`]: [`Aggregate::add`] for a stream of operations,
//! counting into arrays indexed by the operation's fields instead of maps.
//!
//! `commlens stats` counts every operation of a log while reading it: three
//! hash-map entries per operation were ~5 % of its instructions on the bench
//! log, and a search of the last 4 keys per map in front of them still ~140
//! instructions an operation (4 % of `stats` on the 30 MB sample). Size
//! buckets and algorithm pairs have few keys per kind (256 buckets, 8 × 4
//! algorithm and protocol choices, absent included), so they are plain
//! counters. Cells are found through their handle: a reader numbers its
//! handles densely (`CommIdx` from 0), so a table per handle of one slot per
//! kind finds the cell with two loads; the cell stores its device, and an
//! operation of another device (rare: one thread driving several GPUs) goes
//! to the map. Sums of partial cells equal the sums of their operations
//! ([`Cell::absorb`]: counts add, minima and maxima combine, a saturated
//! byte sum stays saturated), so [`AggregateBuilder::finish`] gives the
//! [`Aggregate`] that adding each operation gives.

use crate::stats::{size_bucket, Aggregate, Cell, UNKNOWN_BUCKET};
use commlens_core::model::{CommIdx, DevIdx};
use commlens_core::{Algorithm, CollOp, OpKind, Protocol};

const KINDS: usize = OpKind::ALL.len();
/// `None` and each algorithm / protocol.
const ALGOS: usize = Algorithm::ALL.len() + 1;
const PROTOS: usize = Protocol::ALL.len() + 1;
/// A handle index this far past the table's end (not a reader's dense
/// numbering) goes to the map instead of growing the table.
const MAX_GAP: usize = 4096;

/// Builds an [`Aggregate`] one operation at a time (see the module doc).
#[derive(Debug, Clone)]
pub struct AggregateBuilder {
    /// Cells of the operations that [`AggregateBuilder::cells`] does not take.
    agg: Aggregate,
    /// Per handle index, per kind: 1 + the index of its cell in `cells`, 0 for none yet.
    by_comm: Vec<[u32; KINDS]>,
    cells: Vec<(DevIdx, CommIdx, OpKind, Cell)>,
    /// Per kind, per size bucket (`UNKNOWN_BUCKET` included): operations.
    /// Arrays of a fixed size: the kind and the bucket index them without
    /// a bounds check.
    sizes: Box<[[u64; 256]; KINDS]>,
    /// Per kind, per (algorithm, protocol) (index 0: `None`): operations.
    algos: Box<[[[u64; PROTOS]; ALGOS]; KINDS]>,
}

impl Default for AggregateBuilder {
    fn default() -> Self {
        AggregateBuilder {
            agg: Aggregate::default(),
            by_comm: Vec::new(),
            cells: Vec::new(),
            sizes: Box::new([[0; 256]; KINDS]),
            algos: Box::new([[[0; PROTOS]; ALGOS]; KINDS]),
        }
    }
}

impl AggregateBuilder {
    #[inline]
    pub fn add(&mut self, op: &CollOp) {
        let size = op.size();
        let k = op.kind as usize;
        self.cell(op.dev, op.comm, op.kind).add(size, op.recovered);
        self.sizes[k][size.map_or(UNKNOWN_BUCKET, size_bucket) as usize] += 1;
        let a = op.algo.map_or(0, |a| a as usize + 1);
        let p = op.proto.map_or(0, |p| p as usize + 1);
        self.algos[k][a][p] += 1;
    }

    /// The cell of (device, handle, kind).
    #[inline]
    fn cell(&mut self, dev: DevIdx, comm: CommIdx, kind: OpKind) -> &mut Cell {
        let c = comm.ix();
        if c >= self.by_comm.len() {
            if c > 2 * self.by_comm.len() + MAX_GAP {
                return self.agg.cells.entry((dev, comm, kind)).or_default();
            }
            self.by_comm.resize(c + 1, [0; KINDS]);
        }
        let slot = &mut self.by_comm[c][kind as usize];
        if *slot == 0 {
            self.cells.push((dev, comm, kind, Cell::default()));
            *slot = self.cells.len() as u32;
        }
        let i = *slot as usize - 1;
        if self.cells[i].0 != dev {
            return self.agg.cells.entry((dev, comm, kind)).or_default();
        }
        &mut self.cells[i].3
    }

    /// The aggregate of every operation added.
    pub fn finish(mut self) -> Aggregate {
        let a = &mut self.agg;
        for (d, c, k, cell) in self.cells {
            a.cells.entry((d, c, k)).or_default().absorb(&cell);
        }
        for (k, buckets) in self.sizes.iter().enumerate() {
            for (b, &n) in buckets.iter().enumerate().filter(|x| *x.1 > 0) {
                *a.sizes.entry((OpKind::ALL[k], b as u8)).or_default() += n;
            }
        }
        for (k, pairs) in self.algos.iter().enumerate() {
            for (ai, protos) in pairs.iter().enumerate() {
                for (pi, &n) in protos.iter().enumerate().filter(|x| *x.1 > 0) {
                    let algo = ai.checked_sub(1).map(|i| Algorithm::ALL[i]);
                    let proto = pi.checked_sub(1).map(|i| Protocol::ALL[i]);
                    *a.algos.entry((OpKind::ALL[k], algo, proto)).or_default() += n;
                }
            }
        }
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
    /// The discriminants index the `ALL` arrays (`finish` turns indices back into values).
    #[test]
    fn all_arrays_are_in_discriminant_order() {
        OpKind::ALL.iter().enumerate().for_each(|(i, &k)| assert_eq!(k as usize, i));
        Algorithm::ALL.iter().enumerate().for_each(|(i, &a)| assert_eq!(a as usize, i));
        Protocol::ALL.iter().enumerate().for_each(|(i, &p)| assert_eq!(p as usize, i));
    }

    /// Many keys in changing orders (runs, alternations, handles far apart),
    /// every kind, algorithm and protocol (absent ones too), handles whose
    /// operations name several devices, sizes known and unknown, recovered
    /// or not, sums that saturate: the builder's aggregate is the one of
    /// adding each operation.
    #[test]
    fn builds_what_adding_each_operation_builds() {
        let algos: Vec<Option<Algorithm>> = std::iter::once(None).chain(Algorithm::ALL.map(Some)).collect();
        let protos: Vec<Option<Protocol>> = std::iter::once(None).chain(Protocol::ALL.map(Some)).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for keys in [1u64, 2, 3, 4, 5, 9, 40, 5000] {
            let (mut want, mut got) = (Aggregate::default(), AggregateBuilder::default());
            for i in 0..20_000u64 {
                let k = if i % 7 == 0 { rnd(keys) } else { i / 50 % keys };
                let dtype = if rnd(10) == 0 { DataType::Unknown(99) } else { DataType::Float32 };
                let dev = if rnd(20) == 0 { rnd(3) } else { k % 3 };
                let comm = if k % 11 == 10 { u32::MAX - k as u32 } else { k as u32 };
                let kind = OpKind::ALL[((k + rnd(2)) % OpKind::ALL.len() as u64) as usize];
                let mut op = CollOp::new(ProcIdx(0), DevIdx(dev as u32), CommIdx(comm), kind, rnd(1 << 20), dtype);
                if rnd(50) == 0 {
                    op.bytes = u64::MAX / 3;
                }
                op.recovered = rnd(5) == 0;
                op.algo = algos[rnd(algos.len() as u64) as usize];
                op.proto = protos[rnd(protos.len() as u64) as usize];
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
        assert!(AggregateBuilder::default().finish().cells.is_empty());
    }
}
