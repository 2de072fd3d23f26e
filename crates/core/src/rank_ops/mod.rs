//! [`RankOps`]: the compact storage of one rank's operations
//! (`OpTable::per_rank[d]`). The table commands hold every operation of a
//! job in memory; a [`CollOp`] is 184 bytes, a packed [`row::OpRow`] 48, and
//! what rarely varies (buffers, thread, stream, GPU span, kernel) goes to
//! per-rank side tables deduplicated while pushing. [`CollOp`] stays the API
//! type: rows are materialised on access, without allocating.
//!
//! Invariants: every operation reads back exactly as pushed (`get(i)` equals
//! the pushed `CollOp`, field by field); an operation the row cannot express
//! (another process or device than the rank's first operation, a value
//! above 32 bits, a size that is not `count × sizeof(dtype)`, …) is kept
//! whole in its extra. Side-table entries are never removed: `set` may leave
//! an unused one behind.

mod row;

use crate::model::{CollOp, CommIdx, DevIdx, GpuSpan, KernelInfo, ProcIdx};
use row::{OpRow, NO_TS};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Bytes of one stored row ([`row::OpRow`]).
pub const ROW_BYTES: usize = std::mem::size_of::<OpRow>();

/// What one or more operations of a rank share beyond the row.
#[derive(Debug, Clone, Default)]
struct Extra {
    tid: u32,
    dtype_raw: i32,
    redop_raw: i32,
    stream: Option<u64>,
    gpu: Option<GpuSpan>,
    kernel: Option<Arc<KernelInfo>>,
    /// The whole operation, when the row cannot hold it.
    full: Option<Box<CollOp>>,
}

/// Dedup key of an [`Extra`] without `full`; a kernel by its `Arc`'s address.
#[derive(Hash, PartialEq, Eq)]
struct ExtraKey(u32, i32, i32, Option<u64>, Option<(i64, i64)>, usize);

impl Extra {
    fn key(&self) -> ExtraKey {
        let gpu = self.gpu.map(|g| (g.start_ns, g.end_ns));
        let kernel = self.kernel.as_ref().map_or(0, |k| Arc::as_ptr(k) as usize);
        ExtraKey(self.tid, self.dtype_raw, self.redop_raw, self.stream, gpu, kernel)
    }
}

/// Lookup tables used while pushing; dropped by [`RankOps::shrink_to_fit`]
/// and rebuilt on the next push, so a finished table does not carry them.
#[derive(Default)]
struct Dedup {
    bufs: HashMap<(u64, u64), u32>,
    extras: HashMap<ExtraKey, u32>,
}

/// The operations of one rank, in order, packed (see the module doc).
#[derive(Default)]
pub struct RankOps {
    rows: Vec<OpRow>,
    bufs: Vec<(u64, u64)>,
    extras: Vec<Extra>,
    /// Process and device of the first operation pushed: those of every row
    /// that is not a full one.
    ident: Option<(ProcIdx, DevIdx)>,
    index: Option<Box<Dedup>>,
}

impl RankOps {
    pub fn new() -> RankOps {
        RankOps::default()
    }

    pub fn with_capacity(n: usize) -> RankOps {
        RankOps { rows: Vec::with_capacity(n), ..RankOps::default() }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn push(&mut self, op: CollOp) {
        let row = self.pack(op);
        self.rows.push(row);
    }

    /// The operation at `i`; panics when out of range, like slice indexing.
    #[inline]
    pub fn op(&self, i: usize) -> CollOp {
        self.unpack(&self.rows[i])
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<CollOp> {
        self.rows.get(i).map(|r| self.unpack(r))
    }

    pub fn first(&self) -> Option<CollOp> {
        self.get(0)
    }

    pub fn last(&self) -> Option<CollOp> {
        self.rows.last().map(|r| self.unpack(r))
    }

    /// Replaces the operation at `i`.
    pub fn set(&mut self, i: usize, op: CollOp) {
        let row = self.pack(op);
        self.rows[i] = row;
    }

    /// Changes the operation at `i` through `f`.
    pub fn update<R>(&mut self, i: usize, f: impl FnOnce(&mut CollOp) -> R) -> R {
        let mut op = self.op(i);
        let r = f(&mut op);
        self.set(i, op);
        r
    }

    /// Changes every operation through `f`, in order. The storage is
    /// rebuilt: side-table entries no longer used go, and a rank whose
    /// operations all move to another process or device stays packed.
    pub fn update_all(&mut self, mut f: impl FnMut(usize, &mut CollOp)) {
        let ops = std::mem::take(self);
        *self = ops
            .into_iter()
            .enumerate()
            .map(|(i, mut op)| {
                f(i, &mut op);
                op
            })
            .collect();
    }

    pub fn iter(&self) -> Iter<'_> {
        Ops { ops: self, front: 0, back: self.rows.len() }
    }

    pub fn to_vec(&self) -> Vec<CollOp> {
        self.iter().collect()
    }

    pub fn clear(&mut self) {
        *self = RankOps::default();
    }

    /// Keeps the operations for which `keep` is true, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&CollOp) -> bool) {
        let keep: Vec<bool> = self.iter().map(|op| keep(&op)).collect();
        let mut k = keep.iter();
        self.rows.retain(|_| *k.next().unwrap());
    }

    /// Stable sort by a key of the operation (computed once per operation).
    pub fn sort_by_key<K: Ord>(&mut self, mut key: impl FnMut(&CollOp) -> K) {
        let mut keyed: Vec<(K, OpRow)> = self.iter().map(|op| key(&op)).zip(self.rows.iter().copied()).collect();
        if keyed.windows(2).all(|w| w[0].0 <= w[1].0) {
            return;
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        self.rows.clear();
        self.rows.extend(keyed.into_iter().map(|(_, r)| r));
    }

    /// Renumbers the process, device and communicator of every operation
    /// (merging tables) without unpacking the rows.
    pub fn remap(&mut self, proc: impl Fn(ProcIdx) -> ProcIdx, dev: impl Fn(DevIdx) -> DevIdx, comm: impl Fn(CommIdx) -> CommIdx) {
        if let Some((p, d)) = self.ident {
            self.ident = Some((proc(p), dev(d)));
        }
        for r in &mut self.rows {
            if row::kind_code(r.bits) != row::KIND_FULL {
                r.comm = comm(CommIdx(r.comm)).0;
            }
        }
        for e in &mut self.extras {
            if let Some(op) = e.full.as_deref_mut() {
                op.proc = proc(op.proc);
                op.dev = dev(op.dev);
                op.comm = comm(op.comm);
            }
        }
    }

    /// Drops spare capacity and the push-time lookup tables.
    pub fn shrink_to_fit(&mut self) {
        self.rows.shrink_to_fit();
        self.bufs.shrink_to_fit();
        self.extras.shrink_to_fit();
        self.index = None;
    }

    /// Bytes this rank's operations hold on the heap: rows, side tables, the
    /// boxed full operations and, while pushing, the lookup tables.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let mut n = self.rows.capacity() * size_of::<OpRow>()
            + self.bufs.capacity() * size_of::<(u64, u64)>()
            + self.extras.capacity() * size_of::<Extra>();
        for e in &self.extras {
            if let Some(op) = &e.full {
                n += size_of::<CollOp>() + op.kernel.as_ref().map_or(0, |k| size_of::<KernelInfo>() + k.name.capacity());
            }
            if let Some(k) = &e.kernel {
                n += size_of::<KernelInfo>() + k.name.capacity();
            }
        }
        if let Some(ix) = &self.index {
            n += ix.bufs.capacity() * (size_of::<(u64, u64)>() + 8) + ix.extras.capacity() * (size_of::<ExtraKey>() + 8);
        }
        n
    }

    /// Number of operations with a GPU span, without materialising the
    /// others: only rows with an extra can have one, and a rank none of
    /// whose extras holds a span has none at all (the common case of logs).
    pub fn count_gpu(&self) -> usize {
        if !self.extras.iter().any(|e| e.gpu.is_some() || e.full.as_ref().is_some_and(|f| f.gpu.is_some())) {
            return 0;
        }
        self.iter().filter(|o| o.gpu.is_some()).count()
    }

    /// Whether any operation has a GPU span ([`RankOps::count_gpu`] > 0).
    pub fn any_gpu(&self) -> bool {
        self.extras.iter().any(|e| e.gpu.is_some() || e.full.as_ref().is_some_and(|f| f.gpu.is_some()))
            && self.iter().any(|o| o.gpu.is_some())
    }

    /// Number of operations stored whole (that the row could not express).
    pub fn n_full(&self) -> usize {
        self.rows.iter().filter(|r| row::kind_code(r.bits) == row::KIND_FULL).count()
    }

    fn index(&mut self) -> &mut Dedup {
        if self.index.is_none() {
            let mut ix = Dedup::default();
            for (i, b) in self.bufs.iter().enumerate() {
                ix.bufs.entry(*b).or_insert(i as u32);
            }
            for (i, e) in self.extras.iter().enumerate() {
                if e.full.is_none() {
                    ix.extras.entry(e.key()).or_insert(i as u32);
                }
            }
            self.index = Some(Box::new(ix));
        }
        self.index.as_deref_mut().unwrap()
    }

    fn buf_index(&mut self, b: (u64, u64)) -> u32 {
        let next = self.bufs.len() as u32;
        let i = *self.index().bufs.entry(b).or_insert(next);
        if i == next {
            self.bufs.push(b);
        }
        i
    }

    fn extra_index(&mut self, e: Extra) -> u32 {
        let next = self.extras.len() as u32;
        let i = *self.index().extras.entry(e.key()).or_insert(next);
        if i == next {
            self.extras.push(e);
        }
        i
    }

    fn pack(&mut self, op: CollOp) -> OpRow {
        let ident = *self.ident.get_or_insert((op.proc, op.dev));
        let small = |v: u64| v <= u32::MAX as u64;
        let fits = ident == (op.proc, op.dev)
            && small(op.comm_seq)
            && small(op.seq)
            && small(op.line)
            && !(op.root.is_some() && op.peer.is_some())
            && op.cpu_ts_ns != Some(NO_TS)
            && op.bytes == op.dtype.size_bytes().map_or(0, |s| op.count.saturating_mul(s))
            && self.extras.len() < u32::MAX as usize - 1
            && self.bufs.len() < u32::MAX as usize;
        let codes = if fits { row::encode(op.kind, op.dtype, op.redop, op.algo, op.proto, op.channels, op.recovered) } else { None };
        let Some(codes) = codes else {
            let extra = self.extras.len() as u32 + 1;
            self.extras.push(Extra { full: Some(Box::new(op)), ..Extra::default() });
            return OpRow { count: 0, cpu_ts: 0, comm: 0, comm_seq: 0, seq: 0, line: 0, root_or_peer: 0, bits: row::KIND_FULL, buf: 0, extra };
        };
        let mut bits = codes.bits;
        let root_or_peer = match (op.root, op.peer) {
            (Some(r), _) => {
                bits |= row::F_ROOT;
                r
            }
            (_, Some(p)) => {
                bits |= row::F_PEER;
                p
            }
            _ => 0,
        };
        let buf = self.buf_index((op.sendbuff, op.recvbuff));
        let plain = op.tid == 0 && op.stream.is_none() && op.gpu.is_none() && op.kernel.is_none() && !row::needs_raw(bits);
        let extra = if plain {
            0
        } else {
            let e = Extra { tid: op.tid, dtype_raw: codes.dtype_raw, redop_raw: codes.redop_raw, stream: op.stream, gpu: op.gpu, kernel: op.kernel, full: None };
            self.extra_index(e) + 1
        };
        OpRow {
            count: op.count,
            cpu_ts: op.cpu_ts_ns.unwrap_or(NO_TS),
            comm: op.comm.0,
            comm_seq: op.comm_seq as u32,
            seq: op.seq as u32,
            line: op.line as u32,
            root_or_peer,
            bits,
            buf,
            extra,
        }
    }

    #[inline]
    fn unpack(&self, r: &OpRow) -> CollOp {
        let e = (r.extra != 0).then(|| &self.extras[r.extra as usize - 1]);
        if row::kind_code(r.bits) == row::KIND_FULL {
            return (**e.and_then(|e| e.full.as_ref()).expect("full row without its operation")).clone();
        }
        let (proc, dev) = self.ident.expect("rows without an identity");
        let bits = r.bits;
        let dtype = row::dtype_of(bits, e.map_or(0, |e| e.dtype_raw));
        let (sendbuff, recvbuff) = self.bufs[r.buf as usize];
        CollOp {
            proc,
            dev,
            comm: CommIdx(r.comm),
            comm_seq: r.comm_seq as u64,
            tid: e.map_or(0, |e| e.tid),
            seq: r.seq as u64,
            kind: row::kind_of(bits),
            count: r.count,
            dtype,
            bytes: dtype.size_bytes().map_or(0, |s| r.count.saturating_mul(s)),
            redop: row::redop_of(bits, e.map_or(0, |e| e.redop_raw)),
            root: (bits & row::F_ROOT != 0).then_some(r.root_or_peer),
            peer: (bits & row::F_PEER != 0).then_some(r.root_or_peer),
            algo: row::algo_of(bits),
            proto: row::proto_of(bits),
            channels: row::channels_of(bits),
            sendbuff,
            recvbuff,
            stream: e.and_then(|e| e.stream),
            cpu_ts_ns: (r.cpu_ts != NO_TS).then_some(r.cpu_ts),
            gpu: e.and_then(|e| e.gpu),
            kernel: e.and_then(|e| e.kernel.clone()),
            line: r.line as u64,
            recovered: bits & row::F_RECOVERED != 0,
        }
    }
}

/// The operations of a [`RankOps`], materialised one by one; `B` is how the
/// iterator holds them (borrowed: [`Iter`], owned: [`IntoIter`]).
#[derive(Clone)]
pub struct Ops<B> {
    ops: B,
    front: usize,
    back: usize,
}

/// [`RankOps::iter`].
pub type Iter<'a> = Ops<&'a RankOps>;
/// `RankOps::into_iter`.
pub type IntoIter = Ops<RankOps>;

impl<B: std::borrow::Borrow<RankOps>> Iterator for Ops<B> {
    type Item = CollOp;

    #[inline]
    fn next(&mut self) -> Option<CollOp> {
        (self.front < self.back).then(|| {
            self.front += 1;
            let ops = self.ops.borrow();
            ops.unpack(&ops.rows[self.front - 1])
        })
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }

    fn nth(&mut self, n: usize) -> Option<CollOp> {
        self.front = self.front.saturating_add(n).min(self.back);
        self.next()
    }

    fn last(mut self) -> Option<CollOp> {
        self.next_back()
    }

    fn count(self) -> usize {
        self.back - self.front
    }
}

impl<B: std::borrow::Borrow<RankOps>> DoubleEndedIterator for Ops<B> {
    #[inline]
    fn next_back(&mut self) -> Option<CollOp> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            let ops = self.ops.borrow();
            ops.unpack(&ops.rows[self.back])
        })
    }
}

impl<B: std::borrow::Borrow<RankOps>> ExactSizeIterator for Ops<B> {}

impl<'a> IntoIterator for &'a RankOps {
    type Item = CollOp;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for RankOps {
    type Item = CollOp;
    type IntoIter = IntoIter;
    fn into_iter(self) -> IntoIter {
        let back = self.rows.len();
        Ops { ops: self, front: 0, back }
    }
}

impl FromIterator<CollOp> for RankOps {
    fn from_iter<I: IntoIterator<Item = CollOp>>(it: I) -> RankOps {
        let mut r = RankOps::new();
        r.extend(it);
        r.shrink_to_fit();
        r
    }
}

impl Extend<CollOp> for RankOps {
    fn extend<I: IntoIterator<Item = CollOp>>(&mut self, it: I) {
        let it = it.into_iter();
        self.rows.reserve(it.size_hint().0);
        for op in it {
            self.push(op);
        }
    }
}

impl From<Vec<CollOp>> for RankOps {
    fn from(v: Vec<CollOp>) -> RankOps {
        v.into_iter().collect()
    }
}

impl Clone for RankOps {
    fn clone(&self) -> RankOps {
        RankOps { rows: self.rows.clone(), bufs: self.bufs.clone(), extras: self.extras.clone(), ident: self.ident, index: None }
    }
}

impl PartialEq for RankOps {
    fn eq(&self, other: &RankOps) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for RankOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for RankOps {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for RankOps {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RankOps, D::Error> {
        Vec::<CollOp>::deserialize(d).map(RankOps::from)
    }
}

#[cfg(test)]
mod tests;
