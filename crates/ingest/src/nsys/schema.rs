//! What an nsys SQLite export contains: its tables and their columns (nsys
//! creates tables lazily and adds columns between versions), the export
//! schema version, and the NVTX event-type numbers.
//!
//! Every query of [`super::query`] is built from this, selecting columns by
//! name and `NULL` for the ones a file lacks.

use rusqlite::Connection;
use std::collections::HashMap;

/// Tables (by exact name) and their columns with declared types.
///
/// Only real tables are read: a view (or a virtual table) named like an
/// nsys table is ignored and listed in [`Schema::ignored`], since its query
/// may be anything (a recursive view never ends). Tables declared `WITHOUT
/// ROWID` have no rowid to name a skipped row by.
pub(crate) struct Schema {
    tables: HashMap<String, Vec<(String, String)>>,
    without_rowid: Vec<String>,
    /// Views and virtual tables passed over: (name, what it is).
    pub ignored: Vec<(String, &'static str)>,
}

impl Schema {
    pub fn read(conn: &Connection) -> rusqlite::Result<Schema> {
        let mut names = Vec::new();
        let (mut without_rowid, mut ignored) = (Vec::new(), Vec::new());
        {
            let mut st = conn.prepare("SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view')")?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                let text = |i: usize| -> rusqlite::Result<String> {
                    Ok(match r.get_ref(i)? {
                        rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                        _ => String::new(),
                    })
                };
                let (ty, name, sql) = (text(0)?, text(1)?, text(2)?.to_ascii_uppercase());
                if ty != "table" {
                    ignored.push((name, "a view"));
                } else if sql.trim_start().starts_with("CREATE VIRTUAL") {
                    ignored.push((name, "a virtual table"));
                } else {
                    names.push(name);
                }
            }
        }
        let mut tables = HashMap::new();
        for name in names {
            // Table names come from sqlite_master; quote them anyway.
            let mut st = conn.prepare(&format!("PRAGMA table_info(\"{}\")", name.replace('"', "\"\"")))?;
            let cols = st
                .query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?.unwrap_or_default())))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            // `WITHOUT ROWID` tables have no rowid: compiling a read of it fails.
            if conn.prepare(&format!("SELECT rowid FROM \"{}\" LIMIT 0", name.replace('"', "\"\""))).is_err() {
                without_rowid.push(name.clone());
            }
            tables.insert(name, cols);
        }
        Ok(Schema { tables, without_rowid, ignored })
    }

    /// `alias.rowid`, or `NULL` for a `WITHOUT ROWID` table.
    pub fn rowid(&self, alias: &str, table: &str) -> String {
        if self.without_rowid.iter().any(|t| t == table) {
            "NULL".to_string()
        } else {
            format!("{alias}.rowid")
        }
    }

    /// Whether a view or virtual table of this name was passed over.
    pub fn ignored(&self, table: &str) -> Option<&'static str> {
        self.ignored.iter().find(|(n, _)| n == table).map(|(_, w)| *w)
    }

    pub fn has(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    pub fn has_col(&self, table: &str, col: &str) -> bool {
        self.tables.get(table).is_some_and(|c| c.iter().any(|(n, _)| n == col))
    }

    /// Declared type of a column (`INT`, `TEXT`, …), upper-cased.
    pub fn col_type(&self, table: &str, col: &str) -> Option<String> {
        let cols = self.tables.get(table)?;
        cols.iter().find(|(n, _)| n == col).map(|(_, t)| t.to_ascii_uppercase())
    }

    /// `alias.col` when the column exists, else `NULL`.
    pub fn expr(&self, alias: &str, table: &str, col: &str) -> String {
        if self.has_col(table, col) {
            format!("{alias}.\"{col}\"")
        } else {
            "NULL".to_string()
        }
    }

    /// Whether a name column holds `StringIds` ids (the documented layout)
    /// rather than the text itself (declared TEXT, or no `StringIds` table).
    pub fn is_string_id(&self, table: &str, col: &str) -> bool {
        self.has("StringIds") && !self.col_type(table, col).is_some_and(|t| t.contains("TEXT") || t.contains("CHAR"))
    }
}

/// `META_DATA_EXPORT` value for `name` (e.g. `EXPORT_SCHEMA_VERSION`).
pub(crate) fn meta_value(conn: &Connection, schema: &Schema, name: &str) -> Option<String> {
    let t = "META_DATA_EXPORT";
    if !(schema.has_col(t, "name") && schema.has_col(t, "value")) {
        return None;
    }
    conn.query_row(&format!("SELECT CAST(value AS TEXT) FROM {t} WHERE name = ?1"), [name], |r| r.get(0)).ok()
}

/// NVTX `eventType` numbers. Defaults are the values community tools use
/// (59 push/pop, 60 start/end, 75 domain create); `ENUM_NSYS_EVENT_TYPE`
/// overrides them when the file has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventTypes {
    pub push_pop: i64,
    pub start_end: i64,
    pub domain_create: i64,
}

pub(crate) fn event_types(conn: &Connection, schema: &Schema) -> EventTypes {
    let mut ty = EventTypes { push_pop: 59, start_end: 60, domain_create: 75 };
    let t = "ENUM_NSYS_EVENT_TYPE";
    if !schema.has_col(t, "id") {
        return ty;
    }
    let text = ["name", "label"].into_iter().filter(|c| schema.has_col(t, c)).collect::<Vec<_>>();
    if text.is_empty() {
        return ty;
    }
    let cols =
        text.iter().map(|c| format!("COALESCE(CAST(\"{c}\" AS TEXT), '')")).collect::<Vec<_>>().join(" || ' ' || ");
    let Ok(mut st) = conn.prepare(&format!("SELECT id, {cols} FROM {t}")) else { return ty };
    let Ok(rows) = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))) else { return ty };
    for (id, words) in rows.flatten() {
        let w: String = words.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
        if !w.contains("nvtx") {
            continue;
        }
        if w.contains("pushpoprange") {
            ty.push_pop = id;
        } else if w.contains("startendrange") {
            ty.start_end = id;
        } else if w.contains("domaincreate") {
            ty.domain_create = id;
        }
    }
    ty
}

/// `pid` of a `globalPid`/`globalTid` (bits 24–47; unverified in NVIDIA's
/// documentation, used by community tools), and `tid` (bits 0–23).
pub(crate) fn pid_of(global: i64) -> u32 {
    ((global >> 24) & 0xff_ffff) as u32
}

pub(crate) fn tid_of(global: i64) -> u64 {
    (global & 0xff_ffff) as u64
}

/// PCI location `0000:17:00.0` → NCCL's bus id integer (`0x17000`): all hex
/// digits, in order.
pub(crate) fn bus_id(s: &str) -> Option<u64> {
    let mut v: u64 = 0;
    let mut n = 0;
    for b in s.bytes() {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            b':' | b'.' => continue,
            _ => return None,
        };
        v = v.checked_mul(16)?.checked_add(d as u64)?;
        n += 1;
    }
    (n > 0).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_ids_and_bus_ids() {
        let gtid = (1i64 << 48) | (4242 << 24) | 4250;
        assert_eq!((pid_of(gtid), tid_of(gtid)), (4242, 4250));
        assert_eq!(bus_id("0000:17:00.0"), Some(0x17000));
        assert_eq!(bus_id("0000:B1:00.0"), Some(0xb1000));
        assert_eq!(bus_id("n/a"), None);
        assert_eq!(bus_id(""), None);
    }
}
