//! The built-in column set: names, Parquet types, nullability and how each
//! value is taken from a [`CollOp`] and the table around it. This module owns
//! the mapping from the model to flat columns; `SCHEMA.md` documents it for
//! people and a test keeps the two in step.
//!
//! Type choices, all for the widest reader support (pandas/pyarrow, DuckDB,
//! Spark):
//! * every integer is a *signed* INT32 or INT64 without an unsigned
//!   annotation, because Spark rejects or widens unsigned Parquet types;
//!   model values beyond the signed range are clamped and counted
//!   ([`crate::WriteSummary::clamped_values`]), which only corrupted input reaches;
//! * pointers and hashes (communicator pointer, `commId`, stream, buffers) are
//!   `0x…` hex strings as NCCL prints them: they are identifiers, a `commId`
//!   often exceeds `i64::MAX`, and hex lets people grep the logs for them;
//! * enums are their NCCL names as UTF-8 strings (dictionary-encoded, so they
//!   cost a few bits per row).

use crate::Ctx;
use commlens_core::{CollOp, DataType, RedOp, SourceKind};
use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::ByteArray;
use parquet::schema::types::{Type, TypePtr};
use std::borrow::Cow;
use std::sync::Arc;

/// Version of the column layout below. Bump it when a column is renamed,
/// retyped or removed (adding one is compatible); readers find it in the
/// footer under [`crate::META_SCHEMA_VERSION`].
pub const SCHEMA_VERSION: u32 = 1;

/// One row being written: the operation and the table it lives in.
pub(crate) struct Row<'a> {
    pub ctx: &'a Ctx<'a>,
    pub op: &'a CollOp,
}

/// How a column's value is read from a row; the variant fixes the Parquet
/// physical type. `None` is written as null (only for nullable columns).
pub(crate) enum Getter {
    Bool(fn(&Row) -> bool),
    I32(fn(&Row) -> Option<i32>),
    I64(fn(&Row) -> Option<i64>),
    Str(fn(&Row) -> Option<ByteArray>),
}

pub(crate) struct ColumnDef {
    pub name: &'static str,
    pub nullable: bool,
    pub get: Getter,
}

const fn col(name: &'static str, nullable: bool, get: Getter) -> ColumnDef {
    ColumnDef { name, nullable, get }
}

/// Stable name of a source kind in the `source_kind` column and the footer.
pub fn source_kind_name(k: SourceKind) -> &'static str {
    match k {
        SourceKind::NcclLog => "nccl_log",
        SourceKind::Nsys => "nsys",
        SourceKind::Kineto => "kineto",
        SourceKind::Plugin => "plugin",
        SourceKind::Inspector => "inspector",
        SourceKind::Simulated => "simulated",
    }
}

/// `unknown(12)` keeps the raw integer that the plain name would lose; known
/// types borrow their static name, so the common case allocates nothing.
fn dtype_text(d: DataType) -> Cow<'static, str> {
    match d {
        DataType::Unknown(v) => Cow::Owned(format!("unknown({v})")),
        known => Cow::Borrowed(known.name()),
    }
}

/// `user(7)` / `unknown(9)`: like [`dtype_text`], the raw value survives.
fn redop_text(r: RedOp) -> Cow<'static, str> {
    match r {
        RedOp::User(v) | RedOp::Unknown(v) => Cow::Owned(format!("{}({v})", r.name())),
        known => Cow::Borrowed(known.name()),
    }
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// The built-in columns, in file order.
pub(crate) fn builtin_columns() -> &'static [ColumnDef] {
    use Getter::*;
    static COLS: &[ColumnDef] = &[
        col(
            "source_kind",
            true,
            Str(|r| r.ctx.source_kind.map(|k| r.ctx.intern(source_kind_name(k)))),
        ),
        col("host", false, Str(|r| Some(r.ctx.host[r.op.proc.ix()].clone()))),
        col(
            "pid",
            false,
            I64(|r| Some(r.ctx.table.processes[r.op.proc.ix()].pid.into())),
        ),
        col("tid", false, I64(|r| Some(r.op.tid.into()))),
        col(
            "nccl_version",
            true,
            Str(|r| r.ctx.nccl_version[r.op.proc.ix()].clone()),
        ),
        col(
            "global_rank",
            true,
            I32(|r| r.ctx.u32(r.ctx.table.devices[r.op.dev.ix()].global_rank)),
        ),
        col(
            "local_rank",
            true,
            I32(|r| r.ctx.u32(r.ctx.table.devices[r.op.dev.ix()].local_rank)),
        ),
        col(
            "cuda_dev",
            true,
            I32(|r| r.ctx.u32(r.ctx.table.devices[r.op.dev.ix()].cuda_dev)),
        ),
        col("comm_ptr", false, Str(|r| Some(r.ctx.comm_ptr[r.op.comm.ix()].clone()))),
        col("comm_id", true, Str(|r| r.ctx.comm_id[r.op.comm.ix()].clone())),
        col(
            "logical_comm",
            true,
            Str(|r| r.ctx.logical_of(r.op).map(|l| r.ctx.logical_name[l].clone())),
        ),
        col(
            "logical_comm_idx",
            true,
            I32(|r| r.ctx.logical_of(r.op).and_then(|l| r.ctx.usize(l))),
        ),
        col("nranks", true, I32(|r| r.ctx.u32(r.ctx.nranks_of(r.op)))),
        col(
            "rank_in_comm",
            true,
            I32(|r| r.ctx.u32(r.ctx.table.comms[r.op.comm.ix()].rank)),
        ),
        col("comm_seq", false, I64(|r| Some(r.ctx.u64(r.op.comm_seq)))),
        col("seq", false, I64(|r| Some(r.ctx.u64(r.op.seq)))),
        col("kind", false, Str(|r| Some(r.ctx.intern(r.op.kind.name())))),
        col("count", false, I64(|r| Some(r.ctx.u64(r.op.count)))),
        col("datatype", false, Str(|r| Some(r.ctx.intern(&dtype_text(r.op.dtype))))),
        // Null where the size is unknown (`CollOp::size`), never 0.
        col("bytes", true, I64(|r| r.op.size().map(|b| r.ctx.u64(b)))),
        col("redop", true, Str(|r| r.op.redop.map(|x| r.ctx.intern(&redop_text(x))))),
        col("root", true, I32(|r| r.ctx.u32(r.op.root))),
        col("peer", true, I32(|r| r.ctx.u32(r.op.peer))),
        col("algorithm", true, Str(|r| r.op.algo.map(|a| r.ctx.intern(a.name())))),
        col("protocol", true, Str(|r| r.op.proto.map(|p| r.ctx.intern(p.name())))),
        col("channel_lo", true, I32(|r| r.op.channels.map(|c| c.0.into()))),
        col("channel_hi", true, I32(|r| r.op.channels.map(|c| c.1.into()))),
        // 0 is what readers store when the log named no buffer.
        col(
            "sendbuff",
            true,
            Str(|r| (r.op.sendbuff != 0).then(|| r.ctx.intern(&hex(r.op.sendbuff)))),
        ),
        col(
            "recvbuff",
            true,
            Str(|r| (r.op.recvbuff != 0).then(|| r.ctx.intern(&hex(r.op.recvbuff)))),
        ),
        col("stream", true, Str(|r| r.op.stream.map(|s| r.ctx.intern(&hex(s))))),
        col("cpu_ts_ns", true, I64(|r| r.op.cpu_ts_ns)),
        col("gpu_start_ns", true, I64(|r| r.op.gpu.map(|g| g.start_ns))),
        col("gpu_end_ns", true, I64(|r| r.op.gpu.map(|g| g.end_ns))),
        col(
            "gpu_dur_ns",
            true,
            I64(|r| r.op.gpu.map(|g| g.end_ns.saturating_sub(g.start_ns))),
        ),
        col(
            "kernel_name",
            true,
            Str(|r| r.op.kernel.as_ref().map(|k| r.ctx.intern(&k.name))),
        ),
        col(
            "grid_x",
            true,
            I32(|r| r.ctx.u32(r.op.kernel.as_ref().map(|k| k.grid[0]))),
        ),
        col(
            "grid_y",
            true,
            I32(|r| r.ctx.u32(r.op.kernel.as_ref().map(|k| k.grid[1]))),
        ),
        col(
            "grid_z",
            true,
            I32(|r| r.ctx.u32(r.op.kernel.as_ref().map(|k| k.grid[2]))),
        ),
        col(
            "block_x",
            true,
            I32(|r| r.ctx.u32(r.op.kernel.as_ref().map(|k| k.block[0]))),
        ),
        col(
            "block_y",
            true,
            I32(|r| r.ctx.u32(r.op.kernel.as_ref().map(|k| k.block[1]))),
        ),
        col(
            "block_z",
            true,
            I32(|r| r.ctx.u32(r.op.kernel.as_ref().map(|k| k.block[2]))),
        ),
        col(
            "shared_mem_bytes",
            true,
            I32(|r| r.ctx.u32(r.op.kernel.as_ref().map(|k| k.shared_mem_bytes))),
        ),
        col(
            "registers",
            true,
            I32(|r| r.ctx.u32(r.op.kernel.as_ref().map(|k| k.registers))),
        ),
        col(
            "correlation_id",
            true,
            I64(|r| r.op.kernel.as_ref().map(|k| r.ctx.u64(k.correlation_id))),
        ),
        col("line", false, I64(|r| Some(r.ctx.u64(r.op.line)))),
        col("recovered", false, Bool(|r| r.op.recovered)),
    ];
    COLS
}

/// Names of the built-in columns in file order; extra columns follow them.
pub fn builtin_column_names() -> impl Iterator<Item = &'static str> {
    builtin_columns().iter().map(|c| c.name)
}

fn repetition(nullable: bool) -> Repetition {
    if nullable {
        Repetition::OPTIONAL
    } else {
        Repetition::REQUIRED
    }
}

/// A Parquet leaf: physical type plus the logical annotation readers use to
/// pick a column type (STRING for byte arrays, signed INTEGER otherwise).
pub(crate) fn leaf(name: &str, physical: PhysicalType, nullable: bool) -> parquet::errors::Result<TypePtr> {
    let logical = match physical {
        PhysicalType::BYTE_ARRAY => Some(LogicalType::String),
        PhysicalType::INT32 => Some(LogicalType::integer(32, true)),
        PhysicalType::INT64 => Some(LogicalType::integer(64, true)),
        _ => None,
    };
    Type::primitive_type_builder(name, physical)
        .with_repetition(repetition(nullable))
        .with_logical_type(logical)
        .build()
        .map(Arc::new)
}

pub(crate) fn physical_of(g: &Getter) -> PhysicalType {
    match g {
        Getter::Bool(_) => PhysicalType::BOOLEAN,
        Getter::I32(_) => PhysicalType::INT32,
        Getter::I64(_) => PhysicalType::INT64,
        Getter::Str(_) => PhysicalType::BYTE_ARRAY,
    }
}
