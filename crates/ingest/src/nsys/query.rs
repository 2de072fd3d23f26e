//! The SQL reads of an nsys export, each tolerant of missing tables and
//! columns: kernel names and counts, NCCL kernel rows, their launch calls,
//! processes, GPUs, MPI ranks, session start and NVTX ranges.
//!
//! Kernel names are classified in Rust ([`crate::kernel_name`]), once per
//! distinct name: a `GROUP BY` over the name column counts kernels per name,
//! and only the NCCL names' rows are then read, in start order.

use super::schema::{pid_of, tid_of, EventTypes, Schema};
use crate::kineto::trace::{Launch, Names, Range, RangeKind};
use rusqlite::types::{FromSql, Value};
use rusqlite::Connection;
use std::collections::HashMap;

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

/// Distinct kernel names with their counts: (key value as written, name, count).
pub(crate) fn kernel_names(conn: &Connection, nc: &NameCols) -> rusqlite::Result<Vec<(Value, String, u64)>> {
    let sql = if nc.key_is_id {
        format!(
            "SELECT k.\"{key}\", COALESCE(s.value, ''), n FROM (SELECT \"{key}\", COUNT(*) AS n FROM {KERNELS} GROUP BY \"{key}\") AS k \
             LEFT JOIN StringIds AS s ON s.id = k.\"{key}\"",
            key = nc.key
        )
    } else {
        format!(
            "SELECT \"{key}\", COALESCE(CAST(\"{key}\" AS TEXT), ''), COUNT(*) FROM {KERNELS} GROUP BY \"{key}\"",
            key = nc.key
        )
    };
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map([], |r| Ok((r.get::<_, Value>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)? as u64)))?;
    rows.collect()
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

/// Reads the rows whose name key is in `keys`, in start order, into `f`.
pub(crate) fn kernels(
    conn: &Connection,
    s: &Schema,
    nc: &NameCols,
    keys: &[Value],
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
        "SELECT k.start, k.\"end\", {cols}, {key_name}, {disp_name} FROM {KERNELS} AS k {key_join} {disp_join} \
         WHERE k.\"{key}\" IN ({list}) ORDER BY k.start",
        key = nc.key,
        list = sql_list(keys),
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let g = |i: usize| r.get::<_, Option<i64>>(i);
        f(KernelRow {
            start: r.get::<_, Option<i64>>(0)?.unwrap_or(0),
            end: r.get::<_, Option<i64>>(1)?.unwrap_or(0),
            device: g(2)?,
            stream: g(3)?,
            correlation: g(4)?,
            global_pid: g(5)?,
            grid: [g(6)?, g(7)?, g(8)?],
            block: [g(9)?, g(10)?, g(11)?],
            static_smem: g(12)?,
            dynamic_smem: g(13)?,
            registers: g(14)?,
            key_name: r.get::<_, Option<String>>(15)?.unwrap_or_default(),
            display_name: r.get::<_, Option<String>>(16)?,
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
) -> rusqlite::Result<HashMap<(u32, i64), Launch>> {
    let mut out = HashMap::new();
    if !(s.has_col(RUNTIME, "correlationId") && s.has_col(RUNTIME, "start") && s.has_col(KERNELS, "correlationId")) {
        return Ok(out);
    }
    let sql = format!(
        "SELECT r.correlationId, r.start, {gtid} FROM {RUNTIME} AS r WHERE r.correlationId IN \
         (SELECT correlationId FROM {KERNELS} WHERE \"{key}\" IN ({list}))",
        gtid = s.expr("r", RUNTIME, "globalTid"),
        key = nc.key,
        list = sql_list(keys),
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let (corr, start, gtid) = (r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, Option<i64>>(2)?);
        let g = gtid.unwrap_or(0);
        out.entry((pid_of(g), corr)).or_insert(Launch { tid: tid_of(g), ts_ns: start });
    }
    Ok(out)
}

/// Runs `sql` and hands `f` the first two columns of each row where both are
/// non-NULL (rows with a NULL in either are skipped).
fn each_pair<A: FromSql, B: FromSql>(conn: &Connection, sql: &str, mut f: impl FnMut(A, B)) -> rusqlite::Result<()> {
    let mut st = conn.prepare(sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        if let (Some(a), Some(b)) = (r.get::<_, Option<A>>(0)?, r.get::<_, Option<B>>(1)?) {
            f(a, b);
        }
    }
    Ok(())
}

/// `globalPid` → (pid, process name) from `PROCESSES`.
pub(crate) fn processes(conn: &Connection, s: &Schema) -> rusqlite::Result<HashMap<i64, u32>> {
    let mut out = HashMap::new();
    if !(s.has_col("PROCESSES", "globalPid") && s.has_col("PROCESSES", "pid")) {
        return Ok(out);
    }
    each_pair(conn, "SELECT globalPid, pid FROM PROCESSES", |g: i64, p: i64| {
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

pub(crate) fn gpus(conn: &Connection, s: &Schema) -> rusqlite::Result<Vec<Gpu>> {
    let t = "TARGET_INFO_GPU";
    if !s.has_col(t, "id") {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT g.id, {name}, {bus}, {cu} FROM {t} AS g",
        name = s.expr("g", t, "name"),
        bus = s.expr("g", t, "busLocation"),
        cu = s.expr("g", t, "cuDevice")
    );
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map([], |r| {
        Ok(Gpu {
            id: r.get(0)?,
            name: r.get::<_, Option<String>>(1)?,
            bus_id: r.get::<_, Option<String>>(2)?.as_deref().and_then(super::schema::bus_id),
            cu_device: r.get::<_, Option<i64>>(3)?.map(|v| v as u32),
        })
    })?;
    rows.collect()
}

/// pid → MPI rank (`MPI_RANKS`).
pub(crate) fn mpi_ranks(conn: &Connection, s: &Schema) -> rusqlite::Result<HashMap<u32, u32>> {
    let mut out = HashMap::new();
    if !(s.has_col("MPI_RANKS", "globalTid") && s.has_col("MPI_RANKS", "rank")) {
        return Ok(out);
    }
    each_pair(conn, "SELECT globalTid, rank FROM MPI_RANKS", |g: i64, rank: i64| {
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
) -> rusqlite::Result<NvtxRanges> {
    let mut out = NvtxRanges { ranges: Vec::new(), unclosed: 0, capped: 0 };
    if !(s.has_col(NVTX, "start") && s.has_col(NVTX, "eventType")) {
        return Ok(out);
    }
    let (text, join) = nvtx_text(s);
    let dom = s.expr("n", NVTX, "domainId");
    let mut domains: HashMap<i64, u32> = HashMap::new();
    let sql = format!("SELECT {dom}, {text} FROM {NVTX} AS n {join} WHERE n.eventType = {}", ty.domain_create);
    each_pair(conn, &sql, |d: i64, t: String| {
        domains.insert(d, names.intern(&t));
    })?;
    let sql = format!(
        "SELECT n.start, {end}, n.eventType, {text}, {gtid}, {dom} FROM {NVTX} AS n {join} \
         WHERE n.eventType IN ({}, {}) ORDER BY n.start",
        ty.push_pop,
        ty.start_end,
        end = s.expr("n", NVTX, "end"),
        gtid = s.expr("n", NVTX, "globalTid"),
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let (start, end) = (r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?);
        let Some(end) = end.filter(|&e| e >= start) else {
            out.unclosed += 1;
            continue;
        };
        if out.ranges.len() >= max {
            out.capped += 1;
            continue;
        }
        let g = r.get::<_, Option<i64>>(4)?.unwrap_or(0);
        let domain = r.get::<_, Option<i64>>(5)?.filter(|&d| d != 0);
        out.ranges.push(Range {
            pid: pid_of(g),
            tid: tid_of(g),
            start_ns: start,
            end_ns: end,
            kind: if r.get::<_, i64>(2)? == ty.push_pop { RangeKind::PushPop } else { RangeKind::StartEnd },
            name: names.intern(r.get::<_, Option<String>>(3)?.as_deref().unwrap_or("")),
            domain: domain.map(|d| *domains.entry(d).or_insert_with(|| names.intern(&format!("domain {d}")))),
        });
    }
    Ok(out)
}
