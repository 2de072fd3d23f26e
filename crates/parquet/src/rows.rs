//! Decoding of row groups for [`crate::read_table`]: the column set read
//! back (one typed value vector per column, `None` for null), the inverse of
//! every conversion of [`crate::schema`] (hex strings, enum spellings incl.
//! `unknown(N)`/`user(N)`, signed columns → unsigned fields, null ↔ `None`
//! or 0), and the `Builder` that turns rows into operations while rebuilding
//! processes, devices, communicator handles and logical communicators.

use commlens_core::model::{Grouping, KernelInfo};
use commlens_core::{
    Algorithm, CollOp, CommIdx, CommMember, DataType, DevIdx, Device, GpuSpan, LogicalComm, LogicalCommIdx,
    NcclVersion, OpKind, OpTable, ProcIdx, Process, Protocol, RedOp,
};
use parquet::basic::Type as PhysicalType;
use parquet::column::reader::get_typed_column_reader;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DataType as PqType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::reader::RowGroupReader;
use crate::projection::Columns;
use std::collections::{BTreeMap, HashMap};

/// Leaf index and maximum definition level of each column the reader uses.
pub(crate) type ColumnMap = HashMap<&'static str, (usize, i16)>;

macro_rules! read_columns {
    ($($name:ident: $ty:ty),* $(,)?) => {
        /// One row group's values, column by column (`None` is null); a
        /// column left out of the projection holds no values.
        pub(crate) struct Group {
            $($name: Col<<$ty as PqType>::T>,)*
        }

        /// The built-in columns read back, with their physical types.
        pub(crate) fn needed() -> Vec<(&'static str, PhysicalType)> {
            vec![$((stringify!($name), <$ty as PqType>::get_physical_type()),)*]
        }

        pub(crate) fn read_group(
            rg: &dyn RowGroupReader,
            at: &ColumnMap,
            n: usize,
            cols: &Columns,
        ) -> Result<Group, ParquetError> {
            Ok(Group {
                $($name: if cols.contains(stringify!($name)) {
                    Col { name: stringify!($name), read: true, vals: read_column::<$ty>(rg, at[stringify!($name)], n)? }
                } else {
                    Col { name: stringify!($name), read: false, vals: Vec::new() }
                },)*
            })
        }
    };
}

/// One column of a row group.
pub(crate) struct Col<T> {
    name: &'static str,
    /// False when the projection left the column out: every value reads as
    /// null, and a required field as its default (0, false).
    read: bool,
    vals: Vec<Option<T>>,
}

impl<T: Clone + Default> Col<T> {
    fn at(&self, r: usize) -> Option<&T> {
        self.vals.get(r).and_then(Option::as_ref)
    }

    fn get(&self, r: usize) -> Option<T> {
        self.at(r).cloned()
    }

    /// A field that is never null: an error when null in a column that was
    /// read, the type's default when the column was not read.
    fn req(&self, r: usize) -> Result<T, Bad> {
        if !self.read {
            return Ok(T::default());
        }
        required(self.name, self.get(r))
    }
}

read_columns! {
    host: ByteArrayType, pid: Int64Type, tid: Int64Type, nccl_version: ByteArrayType,
    global_rank: Int32Type, local_rank: Int32Type, cuda_dev: Int32Type,
    comm_ptr: ByteArrayType, comm_id: ByteArrayType, logical_comm: ByteArrayType,
    logical_comm_idx: Int32Type, nranks: Int32Type, rank_in_comm: Int32Type,
    comm_seq: Int64Type, seq: Int64Type, kind: ByteArrayType, count: Int64Type,
    datatype: ByteArrayType, bytes: Int64Type, redop: ByteArrayType, root: Int32Type,
    peer: Int32Type, algorithm: ByteArrayType, protocol: ByteArrayType,
    channel_lo: Int32Type, channel_hi: Int32Type, sendbuff: ByteArrayType,
    recvbuff: ByteArrayType, stream: ByteArrayType, cpu_ts_ns: Int64Type,
    gpu_start_ns: Int64Type, gpu_end_ns: Int64Type, kernel_name: ByteArrayType,
    grid_x: Int32Type, grid_y: Int32Type, grid_z: Int32Type,
    block_x: Int32Type, block_y: Int32Type, block_z: Int32Type,
    shared_mem_bytes: Int32Type, registers: Int32Type, correlation_id: Int64Type,
    line: Int64Type, recovered: BoolType,
}

/// Reads `n` rows of one column of a row group, nulls expanded to `None`.
fn read_column<T: PqType>(
    rg: &dyn RowGroupReader,
    (idx, max_def): (usize, i16),
    n: usize,
) -> Result<Vec<Option<T::T>>, ParquetError> {
    let mut r = get_typed_column_reader::<T>(rg.get_column_reader(idx)?);
    let mut vals: Vec<T::T> = Vec::with_capacity(n);
    let mut defs: Vec<i16> = Vec::with_capacity(if max_def > 0 { n } else { 0 });
    let mut got = 0;
    while got < n {
        let (records, _, _) = r.read_records(n - got, (max_def > 0).then_some(&mut defs), None, &mut vals)?;
        if records == 0 {
            break;
        }
        got += records;
    }
    if got != n {
        return Err(ParquetError::General(format!("column chunk holds {got} of the row group's {n} rows")));
    }
    if max_def == 0 {
        return Ok(vals.into_iter().map(Some).collect());
    }
    let mut it = vals.into_iter();
    Ok(defs.iter().map(|&d| if d == max_def { it.next() } else { None }).collect())
}

/// A decoding failure: the column and what was wrong.
pub(crate) type Bad = (&'static str, String);

fn text<'a>(col: &'static str, v: &'a ByteArray) -> Result<&'a str, Bad> {
    std::str::from_utf8(v.data()).map_err(|_| (col, "not UTF-8".to_string()))
}

fn required<T>(col: &'static str, v: Option<T>) -> Result<T, Bad> {
    v.ok_or((col, "null in a field that is never null".to_string()))
}

/// `0x1f` → 31, exactly as the writer's `{:#x}` printed it.
fn hex(col: &'static str, v: &ByteArray) -> Result<u64, Bad> {
    let s = text(col, v)?;
    s.strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| (col, format!("`{s}` is not a 0x… hex value")))
}

fn opt_hex(col: &'static str, v: Option<&ByteArray>) -> Result<Option<u64>, Bad> {
    v.map(|v| hex(col, v)).transpose()
}

/// `unknown(12)` → 12 for the given prefix.
fn raw_of(s: &str, prefix: &str) -> Option<i32> {
    s.strip_prefix(prefix)?.strip_prefix('(')?.strip_suffix(')')?.parse().ok()
}

fn enum_of<T: Copy>(col: &'static str, v: &ByteArray, all: &[T], name: fn(T) -> &'static str) -> Result<T, Bad> {
    let s = text(col, v)?;
    all.iter().copied().find(|x| name(*x) == s).ok_or_else(|| (col, format!("unknown value `{s}`")))
}

fn dtype_of(v: &ByteArray) -> Result<DataType, Bad> {
    use DataType::*;
    const ALL: [DataType; 12] =
        [Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64, Bfloat16, Float8E4M3, Float8E5M2];
    let s = text("datatype", v)?;
    match raw_of(s, "unknown") {
        Some(n) => Ok(Unknown(n)),
        None => enum_of("datatype", v, &ALL, DataType::name),
    }
}

fn redop_of(v: &ByteArray) -> Result<RedOp, Bad> {
    use RedOp::*;
    let s = text("redop", v)?;
    if let Some(n) = raw_of(s, "user") {
        return Ok(User(n));
    }
    if let Some(n) = raw_of(s, "unknown") {
        return Ok(Unknown(n));
    }
    enum_of("redop", v, &[Sum, Prod, Max, Min, Avg], RedOp::name)
}

/// Per-handle facts as first seen, checked against every later row.
#[derive(PartialEq)]
struct HandleFacts {
    comm_id: Option<u64>,
    nranks: Option<u32>,
    rank: Option<u32>,
    logical: Option<u32>,
    device: DevIdx,
}

#[derive(Default)]
pub(crate) struct Builder {
    t: OpTable,
    procs: HashMap<(String, u32), ProcIdx>,
    devs: HashMap<(ProcIdx, [Option<u32>; 3]), DevIdx>,
    comms: HashMap<(ProcIdx, u64), CommIdx>,
    facts: Vec<HandleFacts>,
    /// Written logical index → name.
    logical: BTreeMap<u32, String>,
    last_proc: Option<(ByteArray, u32, ProcIdx)>,
    pub saturated: u64,
}

impl Builder {
    /// An unsigned model field from a signed INT64 column.
    fn u64(&mut self, col: &'static str, v: i64) -> Result<u64, Bad> {
        if v == i64::MAX {
            self.saturated += 1;
        }
        u64::try_from(v).map_err(|_| (col, format!("negative value {v}")))
    }

    /// An unsigned model field from a signed INT32 column.
    fn u32(&mut self, col: &'static str, v: Option<i32>) -> Result<Option<u32>, Bad> {
        if v == Some(i32::MAX) {
            self.saturated += 1;
        }
        v.map(|v| u32::try_from(v).map_err(|_| (col, format!("negative value {v}")))).transpose()
    }

    fn u32_req(&mut self, col: &'static str, v: Option<i32>) -> Result<u32, Bad> {
        required(col, self.u32(col, v)?)
    }

    fn process(&mut self, g: &Group, r: usize) -> Result<ProcIdx, Bad> {
        let host = required("host", g.host.at(r))?;
        let pid = required("pid", g.pid.get(r))?;
        let pid = u32::try_from(pid).map_err(|_| ("pid", format!("{pid} is not a process id")))?;
        if let Some((h, p, i)) = &self.last_proc {
            if *p == pid && h.data() == host.data() {
                return Ok(*i);
            }
        }
        let key = (text("host", host)?.to_string(), pid);
        let idx = match self.procs.get(&key) {
            Some(&i) => i,
            None => {
                let nccl_version = match g.nccl_version.at(r) {
                    None => None,
                    Some(v) => Some(NcclVersion::parse(v.data()).ok_or_else(|| {
                        ("nccl_version", format!("`{}` is not a version", String::from_utf8_lossy(v.data())))
                    })?),
                };
                let i = ProcIdx(self.t.processes.len() as u32);
                self.t.processes.push(Process { host: key.0.clone(), pid, nccl_version });
                self.procs.insert(key, i);
                i
            }
        };
        self.last_proc = Some((host.clone(), pid, idx));
        Ok(idx)
    }

    fn device(&mut self, g: &Group, r: usize, proc: ProcIdx) -> Result<DevIdx, Bad> {
        let global_rank = self.u32("global_rank", g.global_rank.get(r))?;
        let local_rank = self.u32("local_rank", g.local_rank.get(r))?;
        let cuda_dev = self.u32("cuda_dev", g.cuda_dev.get(r))?;
        let t = &mut self.t;
        Ok(*self.devs.entry((proc, [global_rank, local_rank, cuda_dev])).or_insert_with(|| {
            t.devices.push(Device { proc, cuda_dev, nvml_dev: None, bus_id: None, global_rank, local_rank });
            t.per_rank.push(commlens_core::RankOps::new());
            DevIdx(t.devices.len() as u32 - 1)
        }))
    }

    fn comm(&mut self, g: &Group, r: usize, proc: ProcIdx, device: DevIdx) -> Result<CommIdx, Bad> {
        let ptr = hex("comm_ptr", required("comm_ptr", g.comm_ptr.at(r))?)?;
        let logical = match (g.logical_comm.at(r), g.logical_comm_idx.get(r)) {
            (None, None) => None,
            (Some(name), Some(i)) => {
                let i = u32::try_from(i).map_err(|_| ("logical_comm_idx", format!("negative value {i}")))?;
                let name = text("logical_comm", name)?;
                match self.logical.get(&i) {
                    Some(n) if n != name => {
                        return Err(("logical_comm", format!("index {i} is `{n}` in earlier rows, `{name}` here")))
                    }
                    Some(_) => {}
                    None => {
                        self.logical.insert(i, name.to_string());
                    }
                }
                Some(i)
            }
            _ => return Err(("logical_comm", "name and `logical_comm_idx` must be null together".into())),
        };
        let facts = HandleFacts {
            comm_id: opt_hex("comm_id", g.comm_id.at(r))?,
            nranks: self.u32("nranks", g.nranks.get(r))?,
            rank: self.u32("rank_in_comm", g.rank_in_comm.get(r))?,
            logical,
            device,
        };
        if let Some(&i) = self.comms.get(&(proc, ptr)) {
            if self.facts[i.ix()] != facts {
                return Err((
                    "comm_ptr",
                    format!("handle {ptr:#x} has other communicator, rank or device columns than in earlier rows"),
                ));
            }
            return Ok(i);
        }
        let i = CommIdx(self.t.comms.len() as u32);
        self.t.comms.push(CommMember {
            comm_id: facts.comm_id,
            nranks: facts.nranks,
            rank: facts.rank,
            device: Some(device),
            ..CommMember::new(proc, ptr)
        });
        self.facts.push(facts);
        self.comms.insert((proc, ptr), i);
        Ok(i)
    }

    fn kernel(&mut self, g: &Group, r: usize) -> Result<Option<std::sync::Arc<KernelInfo>>, Bad> {
        let Some(name) = g.kernel_name.at(r) else { return Ok(None) };
        Ok(Some(std::sync::Arc::new(KernelInfo {
            name: text("kernel_name", name)?.to_string(),
            grid: [
                self.u32_req("grid_x", g.grid_x.get(r))?,
                self.u32_req("grid_y", g.grid_y.get(r))?,
                self.u32_req("grid_z", g.grid_z.get(r))?,
            ],
            block: [
                self.u32_req("block_x", g.block_x.get(r))?,
                self.u32_req("block_y", g.block_y.get(r))?,
                self.u32_req("block_z", g.block_z.get(r))?,
            ],
            shared_mem_bytes: self.u32_req("shared_mem_bytes", g.shared_mem_bytes.get(r))?,
            registers: self.u32_req("registers", g.registers.get(r))?,
            correlation_id: self.u64("correlation_id", required("correlation_id", g.correlation_id.get(r))?)?,
        })))
    }

    /// Decodes row `r` of a group into an operation of the table.
    pub fn row(&mut self, g: &Group, r: usize) -> Result<(), Bad> {
        let proc = self.process(g, r)?;
        let dev = self.device(g, r, proc)?;
        let comm = self.comm(g, r, proc, dev)?;
        let tid = g.tid.req(r)?;
        let kind = enum_of("kind", required("kind", g.kind.at(r))?, &OpKind::ALL, OpKind::name)?;
        use Algorithm::*;
        let algos = [Tree, Ring, CollNetDirect, CollNetChain, Nvls, NvlsTree, Pat];
        let protos = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];
        let channels = match (g.channel_lo.get(r), g.channel_hi.get(r)) {
            (None, None) => None,
            (Some(lo), Some(hi)) => {
                let ch = |c, v: i32| u16::try_from(v).map_err(|_| (c, format!("{v} is not a channel")));
                Some((ch("channel_lo", lo)?, ch("channel_hi", hi)?))
            }
            _ => return Err(("channel_lo", "channel_lo and channel_hi must be null together".into())),
        };
        let gpu = match (g.gpu_start_ns.get(r), g.gpu_end_ns.get(r)) {
            (None, None) => None,
            (Some(start_ns), Some(end_ns)) => Some(GpuSpan { start_ns, end_ns }),
            _ => return Err(("gpu_start_ns", "gpu_start_ns and gpu_end_ns must be null together".into())),
        };
        let op = CollOp {
            proc,
            dev,
            comm,
            comm_seq: self.u64("comm_seq", g.comm_seq.req(r)?)?,
            tid: u32::try_from(tid).map_err(|_| ("tid", format!("{tid} is not a thread id")))?,
            seq: self.u64("seq", g.seq.req(r)?)?,
            kind,
            count: self.u64("count", required("count", g.count.get(r))?)?,
            dtype: dtype_of(required("datatype", g.datatype.at(r))?)?,
            // Null: the size is unknown (stored as 0 with an unknown type).
            bytes: g.bytes.get(r).map(|b| self.u64("bytes", b)).transpose()?.unwrap_or(0),
            redop: g.redop.at(r).map(redop_of).transpose()?,
            root: self.u32("root", g.root.get(r))?,
            peer: self.u32("peer", g.peer.get(r))?,
            algo: g.algorithm.at(r).map(|v| enum_of("algorithm", v, &algos, Algorithm::name)).transpose()?,
            proto: g.protocol.at(r).map(|v| enum_of("protocol", v, &protos, Protocol::name)).transpose()?,
            channels,
            sendbuff: opt_hex("sendbuff", g.sendbuff.at(r))?.unwrap_or(0),
            recvbuff: opt_hex("recvbuff", g.recvbuff.at(r))?.unwrap_or(0),
            stream: opt_hex("stream", g.stream.at(r))?,
            cpu_ts_ns: g.cpu_ts_ns.get(r),
            gpu,
            kernel: self.kernel(g, r)?,
            line: self.u64("line", g.line.req(r)?)?,
            recovered: g.recovered.req(r)?,
        };
        self.t.comms[comm.ix()].note_op(op.kind);
        self.t.per_rank[dev.ix()].push(op);
        Ok(())
    }

    /// Logical communicators in written order (indices compacted when some
    /// had no operations), members ordered as `assemble` orders them.
    pub fn finish(mut self) -> OpTable {
        let new_idx: HashMap<u32, LogicalCommIdx> =
            self.logical.keys().enumerate().map(|(n, &old)| (old, LogicalCommIdx(n as u32))).collect();
        let mut members: Vec<Vec<CommIdx>> = vec![Vec::new(); self.logical.len()];
        for (i, f) in self.facts.iter().enumerate() {
            if let Some(l) = f.logical.map(|old| new_idx[&old]) {
                self.t.comms[i].logical = Some(l);
                members[l.ix()].push(CommIdx(i as u32));
            }
        }
        let t = &mut self.t;
        for (name, mut members) in std::mem::take(&mut self.logical).into_values().zip(members) {
            members.sort_by_key(|m| {
                let c = &t.comms[m.ix()];
                let g = c.device.and_then(|d| t.devices[d.ix()].global_rank);
                (c.rank.unwrap_or(u32::MAX), g.unwrap_or(u32::MAX))
            });
            let nranks = members.iter().filter_map(|m| t.comms[m.ix()].nranks).max();
            let nranks = nranks.unwrap_or(members.len() as u32).max(1);
            let comm_id = members.iter().find_map(|m| t.comms[m.ix()].comm_id);
            let grouping = match comm_id {
                _ if members.len() == 1 && nranks > 1 => Grouping::Single,
                Some(_) => Grouping::CommId,
                None => Grouping::OpSequence,
            };
            t.logical.push(LogicalComm { name, comm_id, nranks, members, grouping });
        }
        self.t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{builtin_columns, physical_of};

    #[test]
    fn reads_every_builtin_column_but_the_derived_ones_with_its_type() {
        let mut want: Vec<(&str, PhysicalType)> = builtin_columns()
            .iter()
            .filter(|c| c.name != "source_kind" && c.name != "gpu_dur_ns")
            .map(|c| (c.name, physical_of(&c.get)))
            .collect();
        let mut got = needed();
        want.sort();
        got.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn enum_spellings_invert() {
        let ba = |s: &str| ByteArray::from(s.as_bytes().to_vec());
        assert_eq!(dtype_of(&ba("unknown(-3)")).unwrap(), DataType::Unknown(-3));
        assert_eq!(dtype_of(&ba("float8e5m2")).unwrap(), DataType::Float8E5M2);
        assert!(dtype_of(&ba("Float")).is_err());
        assert_eq!(redop_of(&ba("user(7)")).unwrap(), RedOp::User(7));
        assert_eq!(redop_of(&ba("unknown(9)")).unwrap(), RedOp::Unknown(9));
        assert_eq!(redop_of(&ba("avg")).unwrap(), RedOp::Avg);
        assert!(redop_of(&ba("user(x)")).is_err());
        assert_eq!(hex("stream", &ba("0xfedcba9876543210")).unwrap(), 0xfedc_ba98_7654_3210);
        assert!(hex("stream", &ba("1234")).is_err());
    }
}
