//! The SQL reads of an nsys export, each tolerant of missing tables and
//! columns: kernel names and counts, NCCL kernel rows, their launch calls,
//! processes, GPUs, MPI ranks, session start and NVTX ranges.
//!
//! Kernel names are classified in Rust ([`crate::kernel_name`]), once per
//! distinct name: a `GROUP BY` over the name column counts kernels per name,
//! and only the NCCL names' rows are then read, in start order.

use super::schema::{pid_of, tid_of, EventTypes, Schema};
use crate::kineto::trace::{Launch, Names, Range, RangeKind, Skipped};
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, Row};
use std::collections::HashMap;

/// Text of a column, leniently: numbers are printed, blobs decoded lossily.
pub(crate) fn text_at(r: &Row, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Null => None,
        ValueRef::Integer(v) => Some(v.to_string()),
        ValueRef::Real(v) => Some(v.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    })
}

/// A column as an owned value. rusqlite's own conversion panics on text that is not
/// UTF-8; such text is kept as its bytes (a blob), which compares equal to nothing a
/// query binds back, so the row is merely unnamed, never a crash.
pub(crate) fn value_at(r: &Row, i: usize) -> rusqlite::Result<Value> {
    Ok(match r.get_ref(i)? {
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(s) => Value::Text(s.to_string()),
            Err(_) => Value::Blob(t.to_vec()),
        },
        v => Value::from(v),
    })
}

/// Reads the integer columns of one row, remembering the first that is not
/// one (TEXT, REAL, BLOB, or NULL where a value is required): such a row is
/// skipped and counted, never a reason to reject the file.
pub(crate) struct Ints<'a, 'r> {
    row: &'a Row<'r>,
    pub bad: Option<String>,
}

impl<'a, 'r> Ints<'a, 'r> {
    pub fn new(row: &'a Row<'r>) -> Self {
        Ints { row, bad: None }
    }

    /// An optional integer (NULL is `None`).
    pub fn opt(&mut self, i: usize, col: &str) -> rusqlite::Result<Option<i64>> {
        let ty = match self.row.get_ref(i)? {
            ValueRef::Integer(v) => return Ok(Some(v)),
            ValueRef::Null => return Ok(None),
            ValueRef::Real(_) => "REAL",
            ValueRef::Text(_) => "TEXT",
            ValueRef::Blob(_) => "BLOB",
        };
        if self.bad.is_none() {
            self.bad = Some(format!("{ty} value in {col}"));
        }
        Ok(None)
    }

    /// A required integer.
    pub fn req(&mut self, i: usize, col: &str) -> rusqlite::Result<i64> {
        let v = self.opt(i, col)?;
        if v.is_none() && self.bad.is_none() {
            self.bad = Some(format!("NULL {col}"));
        }
        Ok(v.unwrap_or(0))
    }

    /// When the row is bad: counts it under `table` (named by the rowid in
    /// column `rowid_col`) and returns true.
    pub fn skip(&mut self, skipped: &mut Skipped, table: &str, rowid_col: usize) -> rusqlite::Result<bool> {
        let Some(why) = self.bad.take() else { return Ok(false) };
        let rowid = match self.row.get_ref(rowid_col)? {
            ValueRef::Integer(v) => Some(v),
            _ => None,
        };
        skip_row(skipped, table, &why, rowid);
        Ok(true)
    }
}

/// Counts a skipped row of `table` by reason, naming it when it is the first.
pub(crate) fn skip_row(skipped: &mut Skipped, table: &str, why: &str, rowid: Option<i64>) {
    skipped.add(&format!("{table}: {why}"), || match rowid {
        Some(r) => format!("{table} rowid {r} ({why})"),
        None => format!("a row of {table} ({why})"),
    });
}

pub(crate) const KERNELS: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
const NVTX: &str = "NVTX_EVENTS";

/// The kernel name column used to classify (short names first) and to display
/// (demangled names first).
pub(crate) struct NameCols {
    pub key: &'static str,
    pub key_is_id: bool,
    pub display: Option<&'static str>,
}

pub(crate) fn name_cols(s: &Schema) -> Option<NameCols> {
    let key = ["shortName", "demangledName", "mangledName", "name"].into_iter().find(|c| s.has_col(KERNELS, c))?;
    let display = ["demangledName", "shortName", "name"].into_iter().find(|c| s.has_col(KERNELS, c) && *c != key);
    Some(NameCols { key, key_is_id: s.is_string_id(KERNELS, key), display })
}

/// Distinct kernel names with their counts: (key value as written, name,
/// count). The name is `None` for a NULL key and for an id that `StringIds`
/// lacks (a dangling id): those rows cannot be classified.
pub(crate) fn kernel_names(conn: &Connection, nc: &NameCols) -> rusqlite::Result<Vec<(Value, Option<String>, u64)>> {
    let sql = if nc.key_is_id {
        format!(
            "SELECT k.\"{key}\", s.value, n FROM (SELECT \"{key}\", COUNT(*) AS n FROM {KERNELS} GROUP BY \"{key}\") AS k \
             LEFT JOIN StringIds AS s ON s.id = k.\"{key}\"",
            key = nc.key
        )
    } else {
        format!("SELECT \"{key}\", \"{key}\", COUNT(*) FROM {KERNELS} GROUP BY \"{key}\"", key = nc.key)
    };
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map([], |r| Ok((value_at(r, 0)?, text_at(r, 1)?, r.get::<_, i64>(2)? as u64)))?;
    rows.collect()
}

/// The rowid of the first kernel row whose name key is `key`.
pub(crate) fn first_rowid_of_key(conn: &Connection, s: &Schema, nc: &NameCols, key: &Value) -> Option<i64> {
    let sql = format!(
        "SELECT MIN({rowid}) FROM {KERNELS} AS k WHERE k.\"{key}\" IS ?1",
        rowid = s.rowid("k", KERNELS),
        key = nc.key
    );
    conn.query_row(&sql, [key], |r| r.get::<_, Option<i64>>(0)).ok().flatten()
}

/// One NCCL kernel row.
pub(crate) struct KernelRow {
    pub start: i64,
    pub end: i64,
    pub device: Option<i64>,
    pub stream: Option<i64>,
    pub correlation: Option<i64>,
    pub global_pid: Option<i64>,
    pub grid: [Option<i64>; 3],
    pub block: [Option<i64>; 3],
    pub static_smem: Option<i64>,
    pub dynamic_smem: Option<i64>,
    pub registers: Option<i64>,
    pub key_name: String,
    pub display_name: Option<String>,
}

fn sql_list(keys: &[Value]) -> String {
    keys.iter()
        .map(|v| match v {
            Value::Integer(i) => i.to_string(),
            Value::Text(t) => format!("'{}'", t.replace('\'', "''")),
            Value::Real(r) => r.to_string(),
            _ => "NULL".to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The integer columns of a [`KernelRow`] after `start` and `end`, in query
/// (and field) order: columns 2 to 14 of the query of [`kernels`].
const KERNEL_COLS: [&str; 13] = [
    "deviceId",
    "streamId",
    "correlationId",
    "globalPid",
    "gridX",
    "gridY",
    "gridZ",
    "blockX",
    "blockY",
    "blockZ",
    "staticSharedMemory",
    "dynamicSharedMemory",
    "registersPerThread",
];

/// Reads the rows whose name key is in `keys`, in start order, into `f`;
/// rows with a non-integer value (or a NULL start or end) are skipped and
/// counted in `skipped`.
pub(crate) fn kernels(
    conn: &Connection,
    s: &Schema,
    nc: &NameCols,
    keys: &[Value],
    skipped: &mut Skipped,
    mut f: impl FnMut(KernelRow),
) -> rusqlite::Result<()> {
    let name_expr = |col: &str, alias: &str| {
        if s.is_string_id(KERNELS, col) {
            (format!("{alias}.value"), format!("LEFT JOIN StringIds AS {alias} ON {alias}.id = k.\"{col}\""))
        } else {
            (format!("CAST(k.\"{col}\" AS TEXT)"), String::new())
        }
    };
    let (key_name, key_join) = name_expr(nc.key, "sk");
    let (disp_name, disp_join) = match nc.display {
        Some(c) => name_expr(c, "sd"),
        None => ("NULL".to_string(), String::new()),
    };
    let cols = KERNEL_COLS.map(|c| s.expr("k", KERNELS, c)).join(", ");
    let sql = format!(
        "SELECT k.start, k.\"end\", {cols}, {key_name}, {disp_name}, {rowid} FROM {KERNELS} AS k {key_join} {disp_join} \
         WHERE k.\"{key}\" IN ({list}) ORDER BY k.start",
        key = nc.key,
        list = sql_list(keys),
        rowid = s.rowid("k", KERNELS),
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let mut v = Ints::new(r);
        let (start, end) = (v.req(0, "start")?, v.req(1, "end")?);
        let mut g = [None; 13];
        for (i, col) in KERNEL_COLS.iter().enumerate() {
            g[i] = v.opt(i + 2, col)?;
        }
        if v.skip(skipped, KERNELS, 17)? {
            continue;
        }
        f(KernelRow {
            start,
            end,
            device: g[0],
            stream: g[1],
            correlation: g[2],
            global_pid: g[3],
            grid: [g[4], g[5], g[6]],
            block: [g[7], g[8], g[9]],
            static_smem: g[10],
            dynamic_smem: g[11],
            registers: g[12],
            key_name: text_at(r, 15)?.unwrap_or_default(),
            display_name: text_at(r, 16)?,
        });
    }
    Ok(())
}

/// Launch calls of the kernels whose name key is in `keys`, by (pid, correlation id).
pub(crate) fn launches(
    conn: &Connection,
    s: &Schema,
    nc: &NameCols,
    keys: &[Value],
    skipped: &mut Skipped,
) -> rusqlite::Result<HashMap<(u32, i64), Launch>> {
    let mut out = HashMap::new();
    if !(s.has_col(RUNTIME, "correlationId") && s.has_col(RUNTIME, "start") && s.has_col(KERNELS, "correlationId")) {
        return Ok(out);
    }
    let sql = format!(
        "SELECT r.correlationId, r.start, {gtid}, {rowid} FROM {RUNTIME} AS r WHERE r.correlationId IN \
         (SELECT correlationId FROM {KERNELS} WHERE \"{key}\" IN ({list}))",
        gtid = s.expr("r", RUNTIME, "globalTid"),
        rowid = s.rowid("r", RUNTIME),
        key = nc.key,
        list = sql_list(keys),
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let mut v = Ints::new(r);
        let (corr, start, gtid) = (v.req(0, "correlationId")?, v.req(1, "start")?, v.opt(2, "globalTid")?);
        if v.skip(skipped, RUNTIME, 3)? {
            continue;
        }
        let g = gtid.unwrap_or(0);
        out.entry((pid_of(g), corr)).or_insert(Launch { tid: tid_of(g), ts_ns: start });
    }
    Ok(out)
}

/// Hands `f` the integer columns `a` and `b` of each row of `table`; rows
/// where either is not an integer (NULL included) are skipped and counted.
fn each_int_pair(
    conn: &Connection,
    s: &Schema,
    table: &str,
    (a, b): (&str, &str),
    skipped: &mut Skipped,
    mut f: impl FnMut(i64, i64),
) -> rusqlite::Result<()> {
    let sql = format!("SELECT t.\"{a}\", t.\"{b}\", {rowid} FROM \"{table}\" AS t", rowid = s.rowid("t", table));
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let mut v = Ints::new(r);
        let (x, y) = (v.req(0, a)?, v.req(1, b)?);
        if !v.skip(skipped, table, 2)? {
            f(x, y);
        }
    }
    Ok(())
}

/// `globalPid` → (pid, process name) from `PROCESSES`.
pub(crate) fn processes(conn: &Connection, s: &Schema, skipped: &mut Skipped) -> rusqlite::Result<HashMap<i64, u32>> {
    let mut out = HashMap::new();
    if !(s.has_col("PROCESSES", "globalPid") && s.has_col("PROCESSES", "pid")) {
        return Ok(out);
    }
    each_int_pair(conn, s, "PROCESSES", ("globalPid", "pid"), skipped, |g, p| {
        out.insert(g, p as u32);
    })?;
    Ok(out)
}

pub(crate) struct Gpu {
    pub id: i64,
    pub name: Option<String>,
    pub bus_id: Option<u64>,
    pub cu_device: Option<u32>,
}

pub(crate) fn gpus(conn: &Connection, s: &Schema, skipped: &mut Skipped) -> rusqlite::Result<Vec<Gpu>> {
    let t = "TARGET_INFO_GPU";
    let mut out = Vec::new();
    if !s.has_col(t, "id") {
        return Ok(out);
    }
    let sql = format!(
        "SELECT g.id, {name}, {bus}, {cu}, {rowid} FROM {t} AS g",
        name = s.expr("g", t, "name"),
        bus = s.expr("g", t, "busLocation"),
        cu = s.expr("g", t, "cuDevice"),
        rowid = s.rowid("g", t),
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let mut v = Ints::new(r);
        let (id, cu) = (v.req(0, "id")?, v.opt(3, "cuDevice")?);
        if v.skip(skipped, t, 4)? {
            continue;
        }
        out.push(Gpu {
            id,
            name: text_at(r, 1)?,
            bus_id: text_at(r, 2)?.as_deref().and_then(super::schema::bus_id),
            cu_device: cu.map(|v| v as u32),
        });
    }
    Ok(out)
}

/// pid → MPI rank (`MPI_RANKS`).
pub(crate) fn mpi_ranks(conn: &Connection, s: &Schema, skipped: &mut Skipped) -> rusqlite::Result<HashMap<u32, u32>> {
    let mut out = HashMap::new();
    if !(s.has_col("MPI_RANKS", "globalTid") && s.has_col("MPI_RANKS", "rank")) {
        return Ok(out);
    }
    each_int_pair(conn, s, "MPI_RANKS", ("globalTid", "rank"), skipped, |g, rank| {
        out.insert(pid_of(g), rank as u32);
    })?;
    Ok(out)
}

pub(crate) fn session_start(conn: &Connection, s: &Schema) -> Option<i64> {
    let t = "TARGET_INFO_SESSION_START_TIME";
    if !s.has_col(t, "utcEpochNs") {
        return None;
    }
    conn.query_row(&format!("SELECT utcEpochNs FROM {t} LIMIT 1"), [], |r| r.get::<_, Option<i64>>(0)).ok().flatten()
}

/// NVTX text: inline `text`, else the registered string behind `textId`.
fn nvtx_text(s: &Schema) -> (String, &'static str) {
    let inline = s.has_col(NVTX, "text");
    let by_id = s.has_col(NVTX, "textId") && s.has("StringIds");
    match (inline, by_id) {
        (true, true) => ("COALESCE(n.text, st.value)".into(), "LEFT JOIN StringIds AS st ON st.id = n.textId"),
        (false, true) => ("st.value".into(), "LEFT JOIN StringIds AS st ON st.id = n.textId"),
        (true, false) => ("n.text".into(), ""),
        (false, false) => ("NULL".into(), ""),
    }
}

/// Push/pop and start/end ranges in start order, at most `max`.
pub(crate) struct NvtxRanges {
    pub ranges: Vec<Range>,
    /// Ranges without an end (never popped or ended before the capture stopped).
    pub unclosed: u64,
    /// Ranges beyond `max`.
    pub capped: u64,
}

pub(crate) fn nvtx_ranges(
    conn: &Connection,
    s: &Schema,
    ty: EventTypes,
    max: usize,
    names: &mut Names,
    skipped: &mut Skipped,
) -> rusqlite::Result<NvtxRanges> {
    let mut out = NvtxRanges { ranges: Vec::new(), unclosed: 0, capped: 0 };
    if !(s.has_col(NVTX, "start") && s.has_col(NVTX, "eventType")) {
        return Ok(out);
    }
    let (text, join) = nvtx_text(s);
    let dom = s.expr("n", NVTX, "domainId");
    let mut domains: HashMap<i64, u32> = HashMap::new();
    let rowid = s.rowid("n", NVTX);
    let sql = format!("SELECT {dom}, {text}, {rowid} FROM {NVTX} AS n {join} WHERE n.eventType = {}", ty.domain_create);
    {
        let mut st = conn.prepare(&sql)?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            // A domain without an id or a name names nothing: passed over.
            let mut v = Ints::new(r);
            let d = v.opt(0, "domainId")?;
            if v.skip(skipped, NVTX, 2)? {
                continue;
            }
            if let (Some(d), Some(t)) = (d, text_at(r, 1)?) {
                domains.insert(d, names.intern(&t));
            }
        }
    }
    let sql = format!(
        "SELECT n.start, {end}, n.eventType, {text}, {gtid}, {dom}, {rowid} FROM {NVTX} AS n {join} \
         WHERE n.eventType IN ({}, {}) ORDER BY n.start",
        ty.push_pop,
        ty.start_end,
        end = s.expr("n", NVTX, "end"),
        gtid = s.expr("n", NVTX, "globalTid"),
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let mut v = Ints::new(r);
        let (start, end) = (v.req(0, "start")?, v.opt(1, "end")?);
        let (event_type, g, domain) = (v.req(2, "eventType")?, v.opt(4, "globalTid")?, v.opt(5, "domainId")?);
        if v.skip(skipped, NVTX, 6)? {
            continue;
        }
        let Some(end) = end.filter(|&e| e >= start) else {
            out.unclosed += 1;
            continue;
        };
        if out.ranges.len() >= max {
            out.capped += 1;
            continue;
        }
        let g = g.unwrap_or(0);
        let domain = domain.filter(|&d| d != 0);
        out.ranges.push(Range {
            pid: pid_of(g),
            tid: tid_of(g),
            start_ns: start,
            end_ns: end,
            kind: if event_type == ty.push_pop { RangeKind::PushPop } else { RangeKind::StartEnd },
            name: names.intern(text_at(r, 3)?.as_deref().unwrap_or("")),
            domain: domain.map(|d| *domains.entry(d).or_insert_with(|| names.intern(&format!("domain {d}")))),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod value_tests {
    use super::*;

    /// Text that is not UTF-8 (found by the fuzzer in a kernel name key) comes back as
    /// its bytes instead of panicking inside rusqlite; good text and numbers are unchanged.
    #[test]
    fn text_that_is_not_utf8_is_kept_as_bytes() {
        let conn = Connection::open_in_memory().unwrap();
        let got = conn
            .query_row("SELECT CAST(x'61ff62' AS TEXT), 'ok', 7", [], |r| Ok((value_at(r, 0)?, value_at(r, 1)?, value_at(r, 2)?)))
            .unwrap();
        assert_eq!(got.0, Value::Blob(vec![0x61, 0xff, 0x62]));
        assert_eq!(got.1, Value::Text("ok".into()));
        assert_eq!(got.2, Value::Integer(7));
    }
}
