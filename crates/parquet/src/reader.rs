//! Reading back what [`crate::write_table`] wrote: [`read_table`] turns a
//! commlens Parquet file into the [`OpTable`] it came from, so a fused or
//! exported run can be reported and compared later without its inputs.
//!
//! This module owns the public read API ([`read_table`], [`ReadSummary`],
//! [`ReadError`]), the recognition of our files and the check of their
//! columns; `rows` owns the decoding of values (the inverse of every
//! conversion in [`crate::schema`]) and the rebuilding of processes,
//! devices, handles and logical communicators. Files are recognised by the
//! footer key [`crate::META_SCHEMA_VERSION`]; a file without it, of another
//! schema version, or with a missing or mistyped column is an error naming
//! the file. Extra (caller-computed) columns and the derived `gpu_dur_ns`
//! and `source_kind` columns are not read back.
//!
//! Streaming: one row group at a time is decoded (one value vector per
//! column of that group), turned into operations and dropped; only the
//! resulting table grows with the file. What the schema does not store
//! (topologies, rings/trees/connections, NVML index, bus id, handles and
//! devices without operations) is not in the result; see `SCHEMA.md`.

use crate::projection::Columns;
use crate::rows::{needed, read_group, Builder, ColumnMap};
use crate::schema::{source_kind_name, SCHEMA_VERSION};
use crate::{META_COMMLENS_VERSION, META_RANKS_REPRESENTED, META_SCHEMA_VERSION, META_SOURCES, META_SOURCE_KIND};
use commlens_core::{OpTable, SourceKind};
use parquet::errors::ParquetError;
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// What was read besides the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSummary {
    pub rows: u64,
    pub row_groups: usize,
    /// `commlens.schema_version` of the file.
    pub schema_version: u32,
    /// `commlens.version` of the crate that wrote it.
    pub writer_version: Option<String>,
    /// `commlens.source_kind`, when the writer was told.
    pub source_kind: Option<SourceKind>,
    /// `commlens.ranks_represented`: the ranks the rows stand for, when the table holds only
    /// some (a simulation's representatives); unreadable values count as absent.
    pub ranks_represented: Option<u64>,
    /// Columns of the file that are not read back (extra columns such as
    /// `busbw_gb_s`, and the derived `source_kind`/`gpu_dur_ns`).
    pub ignored_columns: Vec<String>,
    /// Values equal to their column type's maximum in columns of unsigned
    /// model fields: the writer clamps out-of-range values to that maximum,
    /// so these may have been larger (only corrupted input gets there).
    pub saturated_values: u64,
    /// Built-in columns decoded (the projection's size; see [`Columns`]).
    pub columns_read: usize,
}

/// Why a file could not be read; every variant names the file.
#[derive(Debug)]
pub enum ReadError {
    Io { path: PathBuf, source: std::io::Error },
    /// Not a readable Parquet file (truncated, not Parquet at all, corrupt pages).
    Parquet { path: PathBuf, source: ParquetError },
    /// A Parquet file, but not a commlens table of a schema this reader knows.
    NotCommlens { path: PathBuf, what: String },
    /// A commlens file whose columns are missing or of the wrong type.
    Schema { path: PathBuf, what: String },
    /// A value the writer cannot have written (null in a required field,
    /// unknown enum spelling, negative count, inconsistent handle).
    Value { path: PathBuf, row: u64, column: &'static str, what: String },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ReadError::Parquet { path, source } => {
                write!(f, "{}: not a readable Parquet file (truncated or corrupt?): {source}", path.display())
            }
            ReadError::NotCommlens { path, what } => write!(f, "{}: not a commlens table: {what}", path.display()),
            ReadError::Schema { path, what } => {
                write!(f, "{}: not the commlens table schema {SCHEMA_VERSION}: {what}", path.display())
            }
            ReadError::Value { path, row, column, what } => {
                write!(f, "{}: row {row}, column `{column}`: {what}", path.display())
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            ReadError::Parquet { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Reads a file written by [`crate::write_table`] back into a table.
///
/// Operations come back in file order (`per_rank[d]` in source order, as
/// written), with every stored field exact; processes, devices and handles
/// in order of first appearance; logical communicators in their written
/// order. See `SCHEMA.md` ("Reading back") for what cannot come back.
pub fn read_table(path: &Path) -> Result<(OpTable, ReadSummary), ReadError> {
    read_table_with(path, &Columns::all())
}

/// [`read_table`] decoding only the columns `cols` names: the others are
/// neither read from disk nor decoded, and come back null (a field that is
/// never null as 0 or false). The whole schema is still checked.
pub fn read_table_with(path: &Path, cols: &Columns) -> Result<(OpTable, ReadSummary), ReadError> {
    // The parquet crate's page decoders panic on some corrupt pages (a
    // dictionary-encoded page without its dictionary, found by fuzzing):
    // a damaged file must be an error naming it, never a crash.
    GUARDED.with(|g| g.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_table_unguarded(path, cols)));
    GUARDED.with(|g| g.set(false));
    match r {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the decoder gave up".to_string());
            Err(ReadError::Parquet { path: path.to_path_buf(), source: ParquetError::General(format!("corrupt page: {what}")) })
        }
    }
}

thread_local! {
    /// Set while this thread decodes inside [`read_table`]'s guard.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs a panic hook that stays silent for panics [`read_table`] catches
/// and turns into errors (the default hook would print a backtrace for a
/// corrupt file that is then reported cleanly); others go to the previous hook.
pub fn quiet_guarded_panics() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !GUARDED.with(|g| g.get()) {
            prev(info);
        }
    }));
}

fn read_table_unguarded(path: &Path, cols: &Columns) -> Result<(OpTable, ReadSummary), ReadError> {
    let file = std::fs::File::open(path).map_err(|e| ReadError::Io { path: path.to_path_buf(), source: e })?;
    let pq = |e| ReadError::Parquet { path: path.to_path_buf(), source: e };
    let reader = SerializedFileReader::new(file).map_err(pq)?;
    let md = reader.metadata();
    let kv: HashMap<&str, &str> = md
        .file_metadata()
        .key_value_metadata()
        .map(|kv| kv.iter().map(|e| (e.key.as_str(), e.value.as_deref().unwrap_or(""))).collect())
        .unwrap_or_default();
    let not_ours = |what: String| ReadError::NotCommlens { path: path.to_path_buf(), what };
    let Some(version) = kv.get(META_SCHEMA_VERSION) else {
        let by = md.file_metadata().created_by().unwrap_or("an unknown writer");
        return Err(not_ours(format!("no `{META_SCHEMA_VERSION}` key in the footer (written by {by})")));
    };
    let schema_version: u32 = match version.parse() {
        Ok(v) if v == SCHEMA_VERSION => v,
        _ => {
            return Err(not_ours(format!(
                "schema version `{version}`, this reader reads version {SCHEMA_VERSION}"
            )))
        }
    };
    let at = column_map(path, &reader)?;
    let sources = kv
        .get(META_SOURCES)
        .map(|s| parse_string_array(s).ok_or_else(|| not_ours(format!("`{META_SOURCES}` is not a JSON array of strings"))))
        .transpose()?
        .unwrap_or_default();
    let source_kind = match kv.get(META_SOURCE_KIND) {
        None => None,
        Some(name) => Some(source_kind_of(name).ok_or_else(|| not_ours(format!("unknown source kind `{name}`")))?),
    };
    let ranks_represented = kv.get(META_RANKS_REPRESENTED).and_then(|v| v.parse().ok());
    let used: Vec<&str> = needed().iter().map(|c| c.0).collect();
    let ignored_columns = md
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .filter(|c| !used.contains(&c.as_str()))
        .collect();

    let mut b = Builder::default();
    let mut row0 = 0u64;
    for i in 0..md.num_row_groups() {
        let n = usize::try_from(md.row_group(i).num_rows()).unwrap_or(0);
        let rg = reader.get_row_group(i).map_err(pq)?;
        let g = read_group(rg.as_ref(), &at, n, cols).map_err(pq)?;
        for r in 0..n {
            b.row(&g, r).map_err(|(column, what)| ReadError::Value {
                path: path.to_path_buf(),
                row: row0 + r as u64,
                column,
                what,
            })?;
        }
        row0 += n as u64;
    }
    let saturated_values = b.saturated;
    let mut table = b.finish();
    table.sources = sources;
    let summary = ReadSummary {
        rows: row0,
        row_groups: md.num_row_groups(),
        schema_version,
        writer_version: kv.get(META_COMMLENS_VERSION).map(|s| s.to_string()),
        source_kind,
        ranks_represented,
        ignored_columns,
        saturated_values,
        columns_read: cols.len(),
    };
    Ok((table, summary))
}

/// Finds every needed column as a top-level leaf of the right physical type.
fn column_map(path: &Path, reader: &SerializedFileReader<std::fs::File>) -> Result<ColumnMap, ReadError> {
    let schema = reader.metadata().file_metadata().schema_descr();
    let mut at = ColumnMap::new();
    for (name, physical) in needed() {
        let found = schema.columns().iter().enumerate().find(|(_, c)| c.path().parts() == [name]);
        let bad = |what: String| ReadError::Schema { path: path.to_path_buf(), what };
        let Some((i, c)) = found else {
            return Err(bad(format!("column `{name}` ({physical}) is missing")));
        };
        if c.physical_type() != physical || c.max_rep_level() != 0 {
            return Err(bad(format!(
                "column `{name}` is {}{}, expected {physical}",
                c.physical_type(),
                if c.max_rep_level() != 0 { " (repeated)" } else { "" }
            )));
        }
        at.insert(name, (i, c.max_def_level()));
    }
    Ok(at)
}

fn source_kind_of(name: &str) -> Option<SourceKind> {
    use SourceKind::*;
    [NcclLog, Nsys, Kineto, Plugin, Inspector, Simulated].into_iter().find(|k| source_kind_name(*k) == name)
}

/// Parses what [`crate::json_string_array`] writes (and any plain JSON
/// array of strings): `["a","b\"c"]`.
fn parse_string_array(s: &str) -> Option<Vec<String>> {
    let mut it = s.trim().chars().peekable();
    let mut out = Vec::new();
    (it.next()? == '[').then_some(())?;
    let skip_ws = |it: &mut std::iter::Peekable<std::str::Chars>| while it.next_if(|c| c.is_whitespace()).is_some() {};
    skip_ws(&mut it);
    if it.next_if_eq(&']').is_some() {
        return it.next().is_none().then_some(out);
    }
    loop {
        skip_ws(&mut it);
        (it.next()? == '"').then_some(())?;
        let mut cur = String::new();
        loop {
            match it.next()? {
                '"' => break,
                '\\' => match it.next()? {
                    'n' => cur.push('\n'),
                    't' => cur.push('\t'),
                    'r' => cur.push('\r'),
                    'b' => cur.push('\u{8}'),
                    'f' => cur.push('\u{c}'),
                    'u' => {
                        let hex: String = (0..4).map(|_| it.next()).collect::<Option<_>>()?;
                        cur.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    c => cur.push(c), // \" \\ \/
                },
                c => cur.push(c),
            }
        }
        out.push(cur);
        skip_ws(&mut it);
        match it.next()? {
            ',' => continue,
            ']' => return it.next().is_none().then_some(out),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_arrays_parse_back() {
        let items = ["a\"b", "c\\d", "e\nf", "", "ü"];
        let s = crate::json_string_array(items.iter().copied());
        assert_eq!(parse_string_array(&s).unwrap(), items);
        assert_eq!(parse_string_array("[]").unwrap(), Vec::<String>::new());
        assert_eq!(parse_string_array(" [ \"x\" , \"y\" ] ").unwrap(), ["x", "y"]);
        for bad in ["", "[", "[\"a\"", "[\"a\",]", "[1]", "[\"a\"]x", "{}"] {
            assert!(parse_string_array(bad).is_none(), "{bad}");
        }
    }
}
