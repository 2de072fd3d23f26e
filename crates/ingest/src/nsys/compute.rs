//! The non-NCCL GPU activity of an nsys export: compute kernels (the kernel
//! rows whose name is not an NCCL kernel), `CUPTI_ACTIVITY_KIND_MEMCPY` and
//! `CUPTI_ACTIVITY_KIND_MEMSET`, read into the ranks the NCCL kernels made
//! as 24-byte [`ComputeKernel`]s with per-rank interned names.
//!
//! Rows are streamed in start order; a kernel name is resolved through the
//! kernel-name list already read for classification (by key value, so no
//! string is read per row when names are `StringIds` ids). Memcpy rows are
//! named by their `copyKind` (`Memcpy HtoD`, as Kineto names them without the
//! memory kinds) and memset rows `Memset`, so both readers classify alike.
//! Launch lags are not looked up (a per-row join on the runtime table has no
//! index to use in an export): every record has [`ComputeKernel::NO_LAUNCH`].

use super::query::{value_at, Ints, KERNELS};
use super::schema::{pid_of, Schema};
use crate::kineto::trace::{sat_u32, ComputeKernel, ComputeNames, RankTrace, Skipped};
use rusqlite::{types::Value, Connection};
use std::collections::HashMap;

const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";

/// Where a row's rank is: (pid, deviceId) → index into the ranks.
pub(crate) type Slots = HashMap<(u32, Option<i64>), usize>;

/// Per-rank interners plus the map from a global name index to each rank's id.
struct Interners {
    names: Vec<ComputeNames>,
    local: Vec<Vec<u32>>,
}

impl Interners {
    fn id(&mut self, rank: usize, global: usize, name: &str) -> u32 {
        let ids = &mut self.local[rank];
        if ids.len() <= global {
            ids.resize(global + 1, u32::MAX);
        }
        if ids[global] == u32::MAX {
            ids[global] = self.names[rank].intern(name);
        }
        ids[global]
    }
}

/// CUPTI's `CUpti_ActivityMemcpyKind` as Kineto spells it.
fn memcpy_name(kind: Option<i64>) -> &'static str {
    match kind {
        Some(1) => "Memcpy HtoD",
        Some(2) => "Memcpy DtoH",
        Some(3) => "Memcpy HtoA",
        Some(4) => "Memcpy AtoH",
        Some(5) => "Memcpy AtoA",
        Some(6) => "Memcpy AtoD",
        Some(7) => "Memcpy DtoA",
        Some(8) => "Memcpy DtoD",
        Some(9) => "Memcpy HtoH",
        Some(10) => "Memcpy PtoP",
        _ => "Memcpy",
    }
}

/// Reads the compute kernels (names `other`: key value and name, in the
/// order of the kernel-name list), memcpys and memsets into `ranks`; returns
/// how many rows had no rank (a process or GPU without NCCL kernels).
/// Rows with a non-integer value, or without a start or end, are skipped
/// and counted in `skipped`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read(
    conn: &Connection,
    s: &Schema,
    key_col: Option<&str>,
    other: &[(Value, String)],
    ranks: &mut [RankTrace],
    slots: &Slots,
    procs: &HashMap<i64, u32>,
    skipped: &mut Skipped,
) -> rusqlite::Result<u64> {
    let mut int_keys: HashMap<i64, usize> = HashMap::new();
    let mut text_keys: HashMap<&str, usize> = HashMap::new();
    for (i, (k, _)) in other.iter().enumerate() {
        match k {
            Value::Integer(v) => {
                int_keys.insert(*v, i);
            }
            Value::Text(t) => {
                text_keys.insert(t.as_str(), i);
            }
            _ => {}
        }
    }
    let n_names = other.len() + 11;
    let mut int = Interners { names: vec![ComputeNames::default(); ranks.len()], local: vec![Vec::new(); ranks.len()] };
    let mut unplaced = 0u64;
    let mut place = |row: &Row, global: usize, name: &str, ranks: &mut [RankTrace]| {
        let gpid = row.gpid.unwrap_or(0);
        let pid = procs.get(&gpid).copied().unwrap_or_else(|| pid_of(gpid));
        let Some(&r) = slots.get(&(pid, row.device)) else {
            unplaced += 1;
            return;
        };
        let name = int.id(r, global, name);
        ranks[r].compute.push(ComputeKernel {
            start_ns: row.start,
            dur_ns: sat_u32(row.end - row.start),
            launch_lag_ns: ComputeKernel::NO_LAUNCH,
            stream: row.stream.unwrap_or(0) as u32,
            name,
        });
    };
    if let (Some(key), true) = (key_col, !other.is_empty()) {
        let global_of = |extra: &Value| match extra {
            Value::Integer(v) => int_keys.get(v).copied(),
            Value::Text(t) => text_keys.get(t.as_str()).copied(),
            _ => None,
        };
        // NCCL kernel rows (and rows without a usable name) are read and
        // counted elsewhere: only compute rows are checked here.
        let wanted = |extra: &Value| global_of(extra).is_some();
        each_row(conn, s, KERNELS, &format!("k.\"{key}\""), skipped, wanted, |row, extra| {
            let global = global_of(&extra);
            // NCCL kernel rows have no entry: they are read elsewhere.
            if let Some(g) = global {
                place(&row, g, &other[g].1, ranks);
            }
        })?;
    }
    if s.has_col(MEMCPY, "start") {
        each_row(conn, s, MEMCPY, &s.expr("k", MEMCPY, "copyKind"), skipped, |_| true, |row, extra| {
            let kind = if let Value::Integer(v) = extra { Some(v) } else { None };
            let slot = other.len() + kind.filter(|k| (1..=10).contains(k)).unwrap_or(0) as usize;
            place(&row, slot, memcpy_name(kind), ranks);
        })?;
    }
    if s.has_col(MEMSET, "start") {
        each_row(conn, s, MEMSET, "NULL", skipped, |_| true, |row, _| place(&row, n_names, "Memset", ranks))?;
    }
    for (rank, names) in ranks.iter_mut().zip(int.names) {
        rank.compute.sort_unstable_by_key(|k| (k.start_ns, k.stream, k.name));
        rank.compute_names = names.names;
    }
    Ok(unplaced)
}

struct Row {
    start: i64,
    end: i64,
    device: Option<i64>,
    stream: Option<i64>,
    gpid: Option<i64>,
}

/// Streams `table`'s rows in start order with one extra column; rows with
/// a non-integer value or without start or end are counted in `skipped`.
fn each_row(
    conn: &Connection,
    s: &Schema,
    table: &str,
    extra: &str,
    skipped: &mut Skipped,
    wanted: impl Fn(&Value) -> bool,
    mut f: impl FnMut(Row, Value),
) -> rusqlite::Result<()> {
    let has_end = s.has_col(table, "end");
    let sql = format!(
        "SELECT k.start, {end}, {dev}, {stream}, {gpid}, {extra}, {rowid} FROM {table} AS k ORDER BY k.start",
        end = s.expr("k", table, "end"),
        dev = s.expr("k", table, "deviceId"),
        stream = s.expr("k", table, "streamId"),
        gpid = s.expr("k", table, "globalPid"),
        rowid = s.rowid("k", table),
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let extra = value_at(r, 5)?;
        if !wanted(&extra) {
            continue;
        }
        let mut v = Ints::new(r);
        let start = v.req(0, "start")?;
        // A table without an `end` column gives instants (old exports).
        let end = if has_end { v.req(1, "end")? } else { start };
        let (device, stream, gpid) = (v.opt(2, "deviceId")?, v.opt(3, "streamId")?, v.opt(4, "globalPid")?);
        if v.skip(skipped, table, 6)? {
            continue;
        }
        f(Row { start, end, device, stream, gpid }, extra);
    }
    Ok(())
}
