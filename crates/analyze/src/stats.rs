//! Counting what was communicated: per rank, per logical communicator, per
//! operation kind, plus message-size histograms (power-of-two buckets) and
//! the algorithm/protocol mix.
//!
//! [`Aggregate`] holds only counters keyed by (device, communicator, kind), so
//! its memory depends on the number of communicators, not of operations.
//! Aggregates of separate files are re-keyed with [`Aggregate::remap`] and
//! merged with [`Aggregate::merge`].
//!
//! Operations whose size the input does not give ([`CollOp::size`] is
//! `None`) are counted in `ops` and in `unknown_size` but never in bytes,
//! minima, maxima or means, and land in their own size bucket
//! ([`UNKNOWN_BUCKET`]): unknown is never shown as 0 B.

use commlens_core::model::{CommIdx, DevIdx, Grouping};
use commlens_core::{Algorithm, CollOp, OpKind, OpTable, Protocol};
use serde::Serialize;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Cell {
    pub ops: u64,
    /// Sum over the operations of known size.
    pub bytes: u64,
    /// Operations of unknown size (in `ops`, not in the byte figures).
    pub unknown_size: u64,
    pub recovered: u64,
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// `bytes` reached `u64::MAX` and stopped there: the sum is not the true total.
    pub saturated: bool,
}

impl Cell {
    /// Operations of known size.
    pub fn known_ops(&self) -> u64 {
        self.ops - self.unknown_size
    }

    #[inline]
    pub(crate) fn add(&mut self, size: Option<u64>, recovered: bool) {
        let Some(bytes) = size else {
            self.ops += 1;
            self.unknown_size += 1;
            self.recovered += recovered as u64;
            return;
        };
        if self.known_ops() == 0 || bytes < self.min_bytes {
            self.min_bytes = bytes;
        }
        self.max_bytes = self.max_bytes.max(bytes);
        self.ops += 1;
        let (sum, over) = self.bytes.overflowing_add(bytes);
        self.bytes = if over { u64::MAX } else { sum };
        self.saturated |= over;
        self.recovered += recovered as u64;
    }

    pub(crate) fn absorb(&mut self, o: &Cell) {
        if o.ops == 0 {
            return;
        }
        if o.known_ops() > 0 {
            if self.known_ops() == 0 || o.min_bytes < self.min_bytes {
                self.min_bytes = o.min_bytes;
            }
            self.max_bytes = self.max_bytes.max(o.max_bytes);
        }
        self.ops += o.ops;
        self.unknown_size += o.unknown_size;
        let (sum, over) = self.bytes.overflowing_add(o.bytes);
        self.bytes = if over { u64::MAX } else { sum };
        self.saturated |= over || o.saturated;
        self.recovered += o.recovered;
    }
}

/// Power-of-two size bucket: 0 for 0 bytes, else 1 + floor(log2(bytes)).
pub fn size_bucket(bytes: u64) -> u8 {
    if bytes == 0 {
        0
    } else {
        (64 - bytes.leading_zeros()) as u8
    }
}

/// The size bucket of operations of unknown size (after every real bucket).
pub const UNKNOWN_BUCKET: u8 = u8::MAX;

/// Lower bound in bytes of a bucket from [`size_bucket`] (0 for [`UNKNOWN_BUCKET`]).
pub fn bucket_floor(b: u8) -> u64 {
    if b == 0 || b == UNKNOWN_BUCKET {
        0
    } else {
        1u64 << (b - 1)
    }
}

/// Streaming counters over operations.
#[derive(Debug, Clone, Default)]
pub struct Aggregate {
    pub cells: HashMap<(DevIdx, CommIdx, OpKind), Cell>,
    pub sizes: HashMap<(OpKind, u8), u64>,
    pub algos: HashMap<(OpKind, Option<Algorithm>, Option<Protocol>), u64>,
}

impl Aggregate {
    #[inline]
    pub fn add(&mut self, op: &CollOp) {
        let size = op.size();
        self.cells.entry((op.dev, op.comm, op.kind)).or_default().add(size, op.recovered);
        *self.sizes.entry((op.kind, size.map_or(UNKNOWN_BUCKET, size_bucket))).or_default() += 1;
        *self.algos.entry((op.kind, op.algo, op.proto)).or_default() += 1;
    }

    pub fn from_table(t: &OpTable) -> Aggregate {
        let mut a = Aggregate::default();
        for op in t.ops() {
            a.add(&op);
        }
        a
    }

    /// Re-keys device and communicator indices (after tables were merged):
    /// `map` gives a cell's new (device, handle) from its old ones.
    pub fn remap(self, map: impl Fn(DevIdx, CommIdx) -> (DevIdx, CommIdx)) -> Aggregate {
        let mut out = Aggregate { sizes: self.sizes, algos: self.algos, ..Aggregate::default() };
        for ((d, c, k), cell) in self.cells {
            let (d, c) = map(d, c);
            out.cells.entry((d, c, k)).or_default().absorb(&cell);
        }
        out
    }

    pub fn merge(&mut self, o: Aggregate) {
        for (k, c) in o.cells {
            self.cells.entry(k).or_default().absorb(&c);
        }
        for (k, n) in o.sizes {
            *self.sizes.entry(k).or_default() += n;
        }
        for (k, n) in o.algos {
            *self.algos.entry(k).or_default() += n;
        }
    }

    pub fn total(&self) -> Cell {
        let mut t = Cell::default();
        for c in self.cells.values() {
            t.absorb(c);
        }
        t
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RankRow {
    pub rank: Option<u32>,
    pub host: String,
    pub pid: u32,
    pub cuda_dev: Option<u32>,
    pub ops: u64,
    pub bytes: u64,
    /// Operations of unknown size (not in `bytes`).
    pub unknown_size: u64,
    pub collective_ops: u64,
    pub p2p_ops: u64,
    pub recovered: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommRow {
    pub name: String,
    pub comm_id: Option<String>,
    pub nranks: u32,
    pub members_seen: usize,
    pub global_ranks: Vec<Option<u32>>,
    pub grouping: Grouping,
    pub ops: u64,
    pub bytes: u64,
    /// Operations of unknown size (not in `bytes`).
    pub unknown_size: u64,
    /// Operation kinds with their share of this communicator's operations.
    pub mix: Vec<(OpKind, u64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpRow {
    pub kind: OpKind,
    pub ops: u64,
    pub bytes: u64,
    /// Minimum, maximum and mean over the operations of known size (0 when none is known).
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub mean_bytes: f64,
    /// Operations of unknown size (not in the byte figures).
    pub unknown_size: u64,
    /// (algorithm/protocol label, operations)
    pub algorithms: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    /// Bucket [lo, 2·lo) in bytes; lo = 0 holds empty operations (and the
    /// unknown-size row, which has `unknown` set).
    pub lo_bytes: u64,
    /// The row of operations whose size is unknown.
    pub unknown: bool,
    pub counts: Vec<(OpKind, u64)>,
    pub total: u64,
}

/// Everything `commlens stats` prints.
#[derive(Debug, Clone, Serialize)]
pub struct StatsReport {
    pub total_ops: u64,
    pub total_bytes: u64,
    /// Operations of unknown size (not in `total_bytes`).
    pub total_unknown_size: u64,
    pub ranks: Vec<RankRow>,
    pub comms: Vec<CommRow>,
    pub ops: Vec<OpRow>,
    pub sizes: Vec<SizeRow>,
    /// Implausible values flagged rather than summed (byte totals beyond 2^64).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl StatsReport {
    pub fn build(t: &OpTable, a: &Aggregate) -> StatsReport {
        let total = a.total();
        // Per rank.
        let mut per_dev: BTreeMap<DevIdx, (Cell, u64, u64)> = BTreeMap::new();
        for ((d, _, k), c) in &a.cells {
            let e = per_dev.entry(*d).or_default();
            e.0.absorb(c);
            if k.is_p2p() {
                e.2 += c.ops;
            } else {
                e.1 += c.ops;
            }
        }
        let mut ranks: Vec<RankRow> = t
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let (c, coll, p2p) = per_dev.get(&DevIdx(i as u32)).copied().unwrap_or_default();
                let p = &t.processes[d.proc.ix()];
                RankRow {
                    rank: d.global_rank,
                    host: p.host.clone(),
                    pid: p.pid,
                    cuda_dev: d.cuda_dev,
                    ops: c.ops,
                    bytes: c.bytes,
                    unknown_size: c.unknown_size,
                    collective_ops: coll,
                    p2p_ops: p2p,
                    recovered: c.recovered,
                }
            })
            .collect();
        // The host compared by reference: a key holding it cloned it twice a
        // comparison (half of this function's time with hundreds of ranks).
        fn key(r: &RankRow) -> (u32, &str, u32, Option<u32>) {
            (r.rank.unwrap_or(u32::MAX), &r.host, r.pid, r.cuda_dev)
        }
        ranks.sort_by(|x, y| key(x).cmp(&key(y)));

        // Per logical communicator.
        let mut per_comm: HashMap<CommIdx, (Cell, BTreeMap<OpKind, u64>)> = HashMap::default();
        for ((_, c, k), cell) in &a.cells {
            let e = per_comm.entry(*c).or_default();
            e.0.absorb(cell);
            *e.1.entry(*k).or_default() += cell.ops;
        }
        let mut comms: Vec<CommRow> = t
            .logical
            .iter()
            .map(|l| {
                let mut cell = Cell::default();
                let mut mix: BTreeMap<OpKind, u64> = BTreeMap::new();
                for m in &l.members {
                    if let Some((c, kinds)) = per_comm.get(m) {
                        cell.absorb(c);
                        for (k, n) in kinds {
                            *mix.entry(*k).or_default() += n;
                        }
                    }
                }
                let mut mix: Vec<(OpKind, u64)> = mix.into_iter().collect();
                mix.sort_by_key(|x| std::cmp::Reverse(x.1));
                CommRow {
                    name: l.name.clone(),
                    comm_id: l.comm_id.map(|id| format!("{id:#018x}")),
                    nranks: l.nranks,
                    members_seen: l.members.len(),
                    global_ranks: l.members.iter().map(|m| t.global_rank_of(*m)).collect(),
                    grouping: l.grouping,
                    ops: cell.ops,
                    bytes: cell.bytes,
                    unknown_size: cell.unknown_size,
                    mix,
                }
            })
            .collect();
        comms.sort_by(|x, y| y.bytes.cmp(&x.bytes).then(y.ops.cmp(&x.ops)).then(x.name.cmp(&y.name)));

        // Per kind.
        let mut per_kind: BTreeMap<OpKind, Cell> = BTreeMap::new();
        for ((_, _, k), c) in &a.cells {
            per_kind.entry(*k).or_default().absorb(c);
        }
        let ops = per_kind
            .into_iter()
            .map(|(kind, c)| {
                let mut algorithms: Vec<(String, u64)> = a
                    .algos
                    .iter()
                    .filter(|((k, _, _), _)| *k == kind)
                    .map(|((_, al, pr), n)| {
                        let label = match (al, pr) {
                            (None, None) => "(not logged)".to_string(),
                            (a, p) => format!(
                                "{}/{}",
                                a.map_or("?", |a| a.name()),
                                p.map_or("?", |p| p.name())
                            ),
                        };
                        (label, *n)
                    })
                    .collect();
                algorithms.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
                OpRow {
                    kind,
                    ops: c.ops,
                    bytes: c.bytes,
                    min_bytes: c.min_bytes,
                    max_bytes: c.max_bytes,
                    mean_bytes: if c.known_ops() > 0 { c.bytes as f64 / c.known_ops() as f64 } else { 0.0 },
                    unknown_size: c.unknown_size,
                    algorithms,
                }
            })
            .collect();

        // Size histogram.
        let mut by_bucket: BTreeMap<u8, BTreeMap<OpKind, u64>> = BTreeMap::new();
        for ((k, b), n) in &a.sizes {
            *by_bucket.entry(*b).or_default().entry(*k).or_default() += n;
        }
        let sizes = by_bucket
            .into_iter()
            .map(|(b, kinds)| {
                let total = kinds.values().sum();
                SizeRow { lo_bytes: bucket_floor(b), unknown: b == UNKNOWN_BUCKET, counts: kinds.into_iter().collect(), total }
            })
            .collect();

        let mut warnings = Vec::new();
        if total.saturated {
            warnings.push(format!(
                "implausible byte counts: the sum of the operations' sizes exceeds 2^64 bytes; byte totals that \
                 overflowed are shown as {} (the largest value) and are not true sums",
                u64::MAX
            ));
        }
        StatsReport {
            total_ops: total.ops,
            total_bytes: total.bytes,
            total_unknown_size: total.unknown_size,
            ranks,
            comms,
            ops,
            sizes,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commlens_core::model::{CommMember, Device, ProcIdx, Process};
    use commlens_core::DataType;

    fn op(dev: u32, comm: u32, kind: OpKind, bytes: u64) -> CollOp {
        let op = CollOp::new(ProcIdx(dev), DevIdx(dev), CommIdx(comm), kind, bytes / 4, DataType::Float32);
        CollOp { tid: 1, line: 1, ..op }
    }

    #[test]
    fn buckets() {
        assert_eq!(size_bucket(0), 0);
        assert_eq!(size_bucket(1), 1);
        assert_eq!(size_bucket(1024), 11);
        assert_eq!(size_bucket(1023), 10);
        assert_eq!(bucket_floor(size_bucket(4096)), 4096);
        assert_eq!(bucket_floor(size_bucket(u64::MAX)), 1 << 63);
    }

    #[test]
    fn report_sums_and_remap() {
        let mut t = OpTable::default();
        for i in 0..2u32 {
            t.processes.push(Process { host: "h".into(), pid: i, nccl_version: None });
            t.devices.push(Device {
                proc: ProcIdx(i),
                cuda_dev: Some(i),
                nvml_dev: None,
                bus_id: None,
                global_rank: Some(i),
                local_rank: None,
            });
            let mut c = CommMember::new(ProcIdx(i), 0x10 + i as u64);
            c.device = Some(DevIdx(i));
            c.nranks = Some(2);
            c.rank = Some(i);
            c.comm_id = Some(7);
            t.comms.push(c);
        }
        commlens_core::assemble::assemble(&mut t);
        let mut a = Aggregate::default();
        a.add(&op(0, 0, OpKind::AllReduce, 1000));
        a.add(&op(0, 0, OpKind::AllReduce, 3000));
        a.add(&op(1, 1, OpKind::AllReduce, 1000));
        a.add(&op(1, 1, OpKind::Send, 0));
        let r = StatsReport::build(&t, &a);
        assert_eq!((r.total_ops, r.total_bytes), (4, 5000));
        assert_eq!(r.ranks[0].ops, 2);
        assert_eq!(r.ranks[1].p2p_ops, 1);
        assert_eq!(r.comms.len(), 1);
        assert_eq!(r.comms[0].ops, 4);
        let ar = r.ops.iter().find(|o| o.kind == OpKind::AllReduce).unwrap();
        assert_eq!((ar.min_bytes, ar.max_bytes, ar.mean_bytes), (1000, 3000, 5000.0 / 3.0));
        assert_eq!(ar.algorithms, vec![("(not logged)".to_string(), 3)]);
        assert_eq!(r.sizes.iter().map(|s| s.total).sum::<u64>(), 4);
        // Remapping both devices (and handles) onto one merges their cells.
        let b = a.clone().remap(|_, _| (DevIdx(0), CommIdx(0)));
        let cell = b.cells[&(DevIdx(0), CommIdx(0), OpKind::AllReduce)];
        assert_eq!((cell.ops, cell.bytes, cell.min_bytes, cell.max_bytes), (3, 5000, 1000, 3000));
        let mut m = a.clone();
        m.merge(a);
        assert_eq!(m.total().ops, 8);
    }
}
