//! Parquet export of the canonical operation table: one row per [`CollOp`],
//! flat typed columns, readable by pandas/pyarrow, DuckDB and Spark.
//!
//! The crate owns the public API ([`write_table`], [`WriteOptions`],
//! [`ExtraColumn`], [`WriteSummary`], [`WriteError`], and for reading back
//! [`read_table`], [`ReadSummary`], [`ReadError`]); [`schema`] owns the
//! column layout (documented in `SCHEMA.md`), `writer` the streaming
//! row-group loop, and `reader` (with `rows`) its inverse (file →
//! [`OpTable`]; [`read_table_with`] decodes only a [`Columns`] projection),
//! [`dataset`] the Hive-partitioned layout (`DIR/host=<name>/part-….parquet`,
//! one shard per host or rank, written by one run per node). It uses the
//! `parquet` crate's low-level column writer and
//! readers, not arrow, so the dependency stays small and stays inside this
//! crate.
//!
//! Memory: rows are written one row group at a time ([`WriteOptions::row_group_rows`],
//! 64 Ki by default); per row group only the references to its operations,
//! one column's value buffer and the interned strings of that group are held,
//! never the file. Reading decodes one row group at a time into the table.
//!
//! ```no_run
//! # fn demo(table: &commlens_core::OpTable) -> Result<(), commlens_parquet::WriteError> {
//! use commlens_parquet::{write_table, ExtraColumn, ExtraValues, WriteOptions};
//! let busbw: Vec<Option<f64>> = table.ops().map(|_| None).collect();
//! let opts = WriteOptions {
//!     extra: vec![ExtraColumn { name: "busbw_gb_s".into(), values: ExtraValues::F64(busbw) }],
//!     ..WriteOptions::default()
//! };
//! let summary = write_table(table, std::path::Path::new("ops.parquet"), &opts)?;
//! println!("{} rows in {} row groups", summary.rows, summary.row_groups);
//! # Ok(()) }
//! ```

pub mod dataset;
pub mod projection;
mod reader;
mod rows;
pub mod schema;
mod writer;

use commlens_core::{CollOp, OpTable, SourceKind};
use std::fmt;
use std::io::Write;
use std::path::Path;

pub use projection::Columns;
pub use reader::{quiet_guarded_panics, read_table, read_table_with, ReadError, ReadSummary};
pub use schema::{builtin_column_names, source_kind_name, SCHEMA_VERSION};
pub(crate) use writer::Ctx;

/// Footer key holding the commlens version that wrote the file.
pub const META_COMMLENS_VERSION: &str = "commlens.version";
/// Footer key holding [`SCHEMA_VERSION`].
pub const META_SCHEMA_VERSION: &str = "commlens.schema_version";
/// Footer key holding the table's source files as a JSON array of strings.
pub const META_SOURCES: &str = "commlens.sources";
/// Footer key holding [`WriteOptions::source_kind`] (absent when not given).
pub const META_SOURCE_KIND: &str = "commlens.source_kind";
/// Footer key holding [`WriteOptions::ranks_represented`] (absent when not given).
pub const META_RANKS_REPRESENTED: &str = "commlens.ranks_represented";
/// Footer key holding the extra column names as a JSON array of strings.
pub const META_EXTRA_COLUMNS: &str = "commlens.extra_columns";

/// Default rows per row group: large enough for good compression and
/// predicate pushdown, small enough that a row group's buffers stay in the
/// low megabytes.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 64 * 1024;

/// Page compression. Snappy is what every Parquet reader supports and is the
/// default; ZSTD (smaller files) needs this crate's `zstd` feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Uncompressed,
    Snappy,
    /// ZSTD at the given level (1–22).
    #[cfg(feature = "zstd")]
    Zstd(i32),
}

/// Values of one extra column, one per operation in [`OpTable::ops`] order
/// (rank after rank, source order inside a rank); `None` is written as null.
#[derive(Debug, Clone, PartialEq)]
pub enum ExtraValues {
    F64(Vec<Option<f64>>),
    Str(Vec<Option<String>>),
}

impl ExtraValues {
    pub fn len(&self) -> usize {
        match self {
            ExtraValues::F64(v) => v.len(),
            ExtraValues::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A computed per-operation column appended after the built-in ones (e.g.
/// bus bandwidth, parallelism class). Always nullable.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraColumn {
    pub name: String,
    pub values: ExtraValues,
}

/// How to write the file.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Rows per row group (values below 1 are treated as 1).
    pub row_group_rows: usize,
    pub compression: Compression,
    /// Where the table came from; the table itself does not record it. Written
    /// to every row's `source_kind` (null when `None`) and to the footer.
    pub source_kind: Option<SourceKind>,
    /// How many ranks the rows stand for, when the table holds only some of the job's ranks
    /// (a simulation keeps one rank per program); written to the footer.
    pub ranks_represented: Option<u64>,
    pub extra: Vec<ExtraColumn>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            compression: Compression::Snappy,
            source_kind: None,
            ranks_represented: None,
            extra: Vec::new(),
        }
    }
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteSummary {
    pub rows: u64,
    pub row_groups: usize,
    /// Built-in plus extra columns.
    pub columns: usize,
    /// File size in bytes.
    pub bytes_written: u64,
    /// Unsigned model values that exceeded the signed Parquet column type and
    /// were written as the type's maximum (see `SCHEMA.md`); 0 for sane input.
    pub clamped_values: u64,
}

/// Why a file could not be written.
#[derive(Debug)]
pub enum WriteError {
    Io(std::io::Error),
    Parquet(parquet::errors::ParquetError),
    /// An extra column has a bad name or the wrong number of values.
    InvalidExtra(String),
    /// An operation points outside the table's processes/devices/communicators.
    InvalidTable(String),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Io(e) => write!(f, "parquet export: {e}"),
            WriteError::Parquet(e) => write!(f, "parquet export: {e}"),
            WriteError::InvalidExtra(m) => write!(f, "parquet export: extra column: {m}"),
            WriteError::InvalidTable(m) => write!(f, "parquet export: inconsistent table: {m}"),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Io(e) => Some(e),
            WriteError::Parquet(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

impl From<parquet::errors::ParquetError> for WriteError {
    fn from(e: parquet::errors::ParquetError) -> Self {
        WriteError::Parquet(e)
    }
}

/// Writes `table` to a Parquet file at `path`, one row per operation.
///
/// Options and the table are checked before the file is created; if writing
/// fails later the partial file is removed, so `path` never holds a file
/// without a footer.
pub fn write_table(table: &OpTable, path: &Path, opts: &WriteOptions) -> Result<WriteSummary, WriteError> {
    validate(table, opts)?;
    let file = std::fs::File::create(path)?;
    let result = writer::write(table, std::io::BufWriter::with_capacity(1 << 20, file), opts);
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// Like [`write_table`], into any writer (a socket, a `Vec<u8>`, stdout).
/// The writer is not removed or truncated on error.
pub fn write_table_to<W: Write + Send>(
    table: &OpTable,
    out: W,
    opts: &WriteOptions,
) -> Result<WriteSummary, WriteError> {
    validate(table, opts)?;
    writer::write(table, out, opts)
}

/// Rejects extra columns and tables that would make a wrong or unreadable
/// file, so nothing is written for them.
fn validate(table: &OpTable, opts: &WriteOptions) -> Result<(), WriteError> {
    let n = table.n_ops();
    let mut seen: Vec<&str> = builtin_column_names().collect();
    for e in &opts.extra {
        if e.name.is_empty() {
            return Err(WriteError::InvalidExtra("empty name".into()));
        }
        if seen.contains(&e.name.as_str()) {
            return Err(WriteError::InvalidExtra(format!("duplicate column name `{}`", e.name)));
        }
        seen.push(&e.name);
        if e.values.len() != n {
            return Err(WriteError::InvalidExtra(format!(
                "`{}` has {} values for {n} operations",
                e.name,
                e.values.len()
            )));
        }
    }
    check_indices(table)
}

fn check_indices(t: &OpTable) -> Result<(), WriteError> {
    let bad = |what: &str, i: usize, op: &CollOp| {
        Err(WriteError::InvalidTable(format!(
            "operation at line {} names {what} {i}, which does not exist",
            op.line
        )))
    };
    for c in &t.comms {
        if let Some(l) = c.logical.filter(|l| l.ix() >= t.logical.len()) {
            return Err(WriteError::InvalidTable(format!(
                "comm {:#x} names logical comm {}",
                c.ptr,
                l.ix()
            )));
        }
    }
    for op in t.ops() {
        if op.proc.ix() >= t.processes.len() {
            return bad("process", op.proc.ix(), &op);
        }
        if op.dev.ix() >= t.devices.len() {
            return bad("device", op.dev.ix(), &op);
        }
        if op.comm.ix() >= t.comms.len() {
            return bad("communicator", op.comm.ix(), &op);
        }
    }
    Ok(())
}

/// Minimal JSON array of strings for footer values (no serde dependency here).
pub(crate) fn json_string_array<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut s = String::from("[");
    for (i, it) in items.enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push('"');
        for ch in it.chars() {
            match ch {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
                c => s.push(c),
            }
        }
        s.push('"');
    }
    s.push(']');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_array_escapes() {
        let v = ["a\"b", "c\\d", "e\nf"];
        assert_eq!(json_string_array(v.iter().copied()), r#"["a\"b","c\\d","e\u000af"]"#);
        assert_eq!(json_string_array(std::iter::empty()), "[]");
    }
}
