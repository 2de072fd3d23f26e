//! Hive-partitioned datasets of the operation table: one folder per
//! partition value, `DIR/host=<name>/part-<run>.parquet` (or `rank=<n>/…`),
//! each file a complete commlens table of that value's processes or ranks.
//! A job too big for one machine is exported where its logs are, one
//! `commlens export --partition host` per node, into one shared folder that
//! DuckDB, Spark or `commlens` read whole.
//!
//! This module owns the layout: [`PartitionKey`], Hive's escaping of
//! partition values ([`escape_value`], [`unescape_value`]), the split of a
//! table into shards ([`shards`]), the writing of a run's shards
//! ([`write_dataset`]) and the listing of a dataset's files
//! ([`dataset_files`], [`is_dataset`]) with the check that a shard holds
//! what its folder says ([`check_shard`]).
//!
//! Concurrency: independent runs (one per node, at the same moment) write
//! into one folder without coordination. Each file name carries the run's
//! id ([`unique_run_id`]: machine, pid, time), each file is written under a
//! hidden temporary name and renamed into place, and nothing is shared: no
//! metadata file, no `_SUCCESS`, so two runs never write the same path.
//!
//! What one node cannot know (the other nodes' ranks of its communicators)
//! needs no file of its own: every row carries its handle's `comm_id`,
//! `rank_in_comm` and `nranks`, so a reader that has all shards groups the
//! handles into logical communicators and assigns global ranks as if it had
//! read every log (`commlens` re-assembles; SQL engines group by `comm_id`).

use crate::{validate, writer, ExtraColumn, ExtraValues, WriteError, WriteOptions, WriteSummary};
use commlens_core::{DevIdx, OpTable};
use std::path::{Path, PathBuf};

/// Hive's name for the partition of a null or empty value.
pub const HIVE_DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Footer key of a shard: its partition, `host=<name>` as in its folder name.
pub const META_PARTITION: &str = "commlens.partition";

/// What a dataset is partitioned by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionKey {
    /// The process's host name (`host` column): one shard per node.
    Host,
    /// The device's global rank (`global_rank` column): one shard per rank.
    Rank,
}

impl PartitionKey {
    pub const ALL: [PartitionKey; 2] = [PartitionKey::Host, PartitionKey::Rank];

    /// The folder name's key: `host`, `rank`.
    pub fn name(self) -> &'static str {
        match self {
            PartitionKey::Host => "host",
            PartitionKey::Rank => "rank",
        }
    }

    pub fn parse(s: &str) -> Option<PartitionKey> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Hive's `FileUtils.escapePathName`: control characters, `"#%'*/:=?\{[]^`
/// and DEL become `%XX` (upper-case hex); an empty value is
/// [`HIVE_DEFAULT_PARTITION`]. A leading `.` or `_` is escaped too, since
/// Spark, Hive and commlens skip such names as hidden files.
pub fn escape_value(v: &str) -> String {
    if v.is_empty() {
        return HIVE_DEFAULT_PARTITION.to_string();
    }
    let mut out = String::with_capacity(v.len());
    for (i, ch) in v.chars().enumerate() {
        let escaped = matches!(
            ch,
            '\0'..='\u{1f}'
                | '"'
                | '#'
                | '%'
                | '\''
                | '*'
                | '/'
                | ':'
                | '='
                | '?'
                | '\\'
                | '\u{7f}'
                | '{'
                | '['
                | ']'
                | '^'
        ) || (i == 0 && matches!(ch, '.' | '_'));
        if escaped {
            out.push_str(&format!("%{:02X}", ch as u32));
        } else {
            out.push(ch);
        }
    }
    out
}

/// The inverse of [`escape_value`] (any `%XX` is decoded, as Hive and Spark
/// do; a `%` not followed by two hex digits stays).
pub fn unescape_value(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The operations of one partition value: its devices, in table order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The value as the column holds it (`None`: null, the default partition).
    pub value: Option<String>,
    pub devices: Vec<DevIdx>,
}

impl Shard {
    /// `host=node%2F1`: the folder name.
    pub fn folder(&self, key: PartitionKey) -> String {
        format!("{}={}", key.name(), escape_value(self.value.as_deref().unwrap_or("")))
    }
}

/// The table's devices with operations, grouped by partition value (in
/// order of first appearance).
pub fn shards(table: &OpTable, key: PartitionKey) -> Vec<Shard> {
    let mut out: Vec<Shard> = Vec::new();
    for (d, dev) in table.devices.iter().enumerate() {
        if table.per_rank.get(d).is_none_or(|ops| ops.is_empty()) {
            continue;
        }
        let value = match key {
            PartitionKey::Host => {
                let h = &table.processes[dev.proc.ix()].host;
                (!h.is_empty()).then(|| h.clone())
            }
            PartitionKey::Rank => dev.global_rank.map(|r| r.to_string()),
        };
        match out.iter_mut().find(|s| s.value == value) {
            Some(s) => s.devices.push(DevIdx(d as u32)),
            None => out.push(Shard { value, devices: vec![DevIdx(d as u32)] }),
        }
    }
    out
}

/// An id for this run's file names that no other run shares: the machine's
/// name, the process id and the time in nanoseconds.
pub fn unique_run_id() -> String {
    let machine =
        std::fs::read_to_string("/proc/sys/kernel/hostname").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_default();
    let machine: String =
        machine.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{}-{}-{nanos}", if machine.is_empty() { "localhost" } else { &machine }, std::process::id())
}

/// One file [`write_dataset`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardWritten {
    pub path: PathBuf,
    pub folder: String,
    pub summary: WriteSummary,
}

/// Writes `table` as shards under `dir`, one file per partition value:
/// `dir/<key>=<escaped value>/part-<run_id>-<n>.parquet`. Extra columns hold
/// one value per operation of the whole table (`OpTable::ops()` order), as
/// for [`crate::write_table`]. Each file is written under a hidden
/// temporary name in its folder and renamed into place, so a reader never
/// sees half a shard; `run_id` must differ between runs writing into one
/// `dir` ([`unique_run_id`]). An existing file of that name is an error.
pub fn write_dataset(
    table: &OpTable,
    dir: &Path,
    key: PartitionKey,
    opts: &WriteOptions,
    run_id: &str,
) -> Result<Vec<ShardWritten>, WriteError> {
    validate(table, opts)?;
    if run_id.is_empty() || run_id.contains(['/', '\\']) || run_id.starts_with('.') {
        return Err(WriteError::InvalidExtra(format!("run id `{run_id}` is not a file name part")));
    }
    // Where each device's operations start among the extra columns' values.
    let mut start = Vec::with_capacity(table.per_rank.len());
    let mut at = 0usize;
    for ops in &table.per_rank {
        start.push(at);
        at += ops.len();
    }
    let mut written = Vec::new();
    for (n, shard) in shards(table, key).into_iter().enumerate() {
        let folder = shard.folder(key);
        let sub = dir.join(&folder);
        std::fs::create_dir_all(&sub)?;
        let extra = opts
            .extra
            .iter()
            .map(|e| ExtraColumn { name: e.name.clone(), values: gather(&e.values, &shard.devices, table, &start) })
            .collect();
        let shard_opts = WriteOptions { extra, ..opts.clone() };
        let name = format!("part-{run_id}-{n}.parquet");
        let path = sub.join(&name);
        if path.exists() {
            return Err(WriteError::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} exists: another run used the run id `{run_id}`", path.display()),
            )));
        }
        let tmp = sub.join(format!(".{name}.tmp"));
        let sel = writer::Selection {
            devices: Some(&shard.devices),
            footer: vec![(META_PARTITION.to_string(), folder.clone())],
        };
        let result = std::fs::File::create(&tmp).map_err(WriteError::from).and_then(|f| {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
            let s = writer::write_selected(table, &mut out, &shard_opts, &sel)?;
            let f = out.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
            Ok(s)
        });
        let summary = match result.and_then(|s| std::fs::rename(&tmp, &path).map(|_| s).map_err(WriteError::from)) {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        written.push(ShardWritten { path, folder, summary });
    }
    Ok(written)
}

/// The values of `devices`' operations, in order.
fn gather(values: &ExtraValues, devices: &[DevIdx], table: &OpTable, start: &[usize]) -> ExtraValues {
    let ranges = devices.iter().map(|d| start[d.ix()]..start[d.ix()] + table.per_rank[d.ix()].len());
    match values {
        ExtraValues::F64(v) => ExtraValues::F64(ranges.flat_map(|r| v[r].iter().copied()).collect()),
        ExtraValues::Str(v) => ExtraValues::Str(ranges.flat_map(|r| v[r].iter().cloned()).collect()),
    }
}

/// A Hive folder name `key=value`, split (the value still escaped).
fn partition_of(name: &str) -> Option<(&str, &str)> {
    let (k, v) = name.split_once('=')?;
    (!k.is_empty() && !k.starts_with(['.', '_'])).then_some((k, v))
}

fn hidden(name: &str) -> bool {
    name.starts_with(['.', '_'])
}

/// Whether `dir` is a Hive-partitioned dataset: it holds a (not hidden)
/// folder named `key=value` holding a `.parquet` file, directly or in
/// `key=value` folders below (a folder of logs named `job=7` is no dataset).
pub fn is_dataset(dir: &Path) -> bool {
    partition_with_parquet(dir, 0)
}

fn partition_with_parquet(dir: &Path, depth: usize) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else { return false };
    rd.filter_map(Result::ok).any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        // At the top only `key=value` folders count: the other names (a
        // job's 100,000 logs) are passed over without a look at the disk.
        if hidden(&name) || (depth == 0 && partition_of(&name).is_none()) {
            return false;
        }
        let path = e.path();
        if path.is_dir() {
            depth < 16 && partition_of(&name).is_some() && partition_with_parquet(&path, depth + 1)
        } else {
            depth > 0 && path.extension().and_then(|x| x.to_str()).is_some_and(|x| x.eq_ignore_ascii_case("parquet"))
        }
    })
}

/// Whether runs may write shards into `dir`: every entry not hidden is a
/// `key=value` folder (true for an empty folder, and for a dataset other
/// runs are still writing, whose shards are still hidden temporary files).
pub fn may_hold_dataset(dir: &Path) -> std::io::Result<bool> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !hidden(&name) && (partition_of(&name).is_none() || !e.path().is_dir()) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The files of a dataset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetFiles {
    /// The partition keys, outermost first (`["host"]`).
    pub keys: Vec<String>,
    /// Every `.parquet` file, in path order, with its partition values
    /// (key, unescaped value; `None` for the default partition), outermost first.
    pub shards: Vec<(PathBuf, Vec<(String, Option<String>)>)>,
    /// Other files of the dataset (not `.parquet`, not hidden): passed over.
    pub other: Vec<PathBuf>,
}

/// Lists a dataset's files. Hidden names (`.`, `_`: temporary files of runs
/// still writing, `_SUCCESS`) are passed over, other files that are not
/// `.parquet` listed in [`DatasetFiles::other`]. An error names the path
/// when the layout is not one dataset: a Parquet file or plain folder beside
/// partition folders, or partition folders of different keys at one level.
pub fn dataset_files(dir: &Path) -> Result<DatasetFiles, String> {
    let mut out = DatasetFiles::default();
    walk(dir, &mut Vec::new(), &mut out, 0)?;
    if out.shards.is_empty() {
        return Err(format!("{}: a partitioned dataset with no .parquet file in its partition folders", dir.display()));
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    values: &mut Vec<(String, Option<String>)>,
    out: &mut DatasetFiles,
    depth: usize,
) -> Result<(), String> {
    if depth > 16 {
        return Err(format!("{}: partition folders nested more than 16 deep", dir.display()));
    }
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    let mut level_key: Option<String> = None;
    let mut plain = Vec::new();
    for e in entries {
        let name = e.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if hidden(&name) {
            continue;
        }
        if e.is_dir() {
            let Some((k, v)) = partition_of(&name) else {
                plain.push(e);
                continue;
            };
            match &level_key {
                Some(lk) if lk != k => {
                    return Err(format!(
                        "{}: partition folder of key `{k}` beside folders of key `{lk}` in {}: one dataset has one key per level",
                        e.display(),
                        dir.display()
                    ))
                }
                _ => level_key = Some(k.to_string()),
            }
            if out.keys.len() == depth {
                out.keys.push(k.to_string());
            } else if out.keys[depth] != k {
                return Err(format!("{}: key `{k}` where other branches have `{}`", e.display(), out.keys[depth]));
            }
            let v = (v != HIVE_DEFAULT_PARTITION).then(|| unescape_value(v));
            values.push((k.to_string(), v));
            walk(&e, values, out, depth + 1)?;
            values.pop();
        } else {
            plain.push(e);
        }
    }
    for p in plain {
        let is_parquet = p.extension().and_then(|x| x.to_str()).is_some_and(|x| x.eq_ignore_ascii_case("parquet"));
        match (&level_key, is_parquet, p.is_dir()) {
            // Other files (a README, a report) are passed over wherever they are.
            (_, false, false) => out.other.push(p),
            (Some(k), _, _) => {
                return Err(format!(
                    "{}: {} beside the `{k}=…` partition folders of {}: a partitioned dataset holds its tables inside the partition folders",
                    p.display(),
                    if p.is_dir() { "a folder" } else { "a Parquet file" },
                    dir.display()
                ))
            }
            (None, true, false) if depth > 0 => out.shards.push((p, values.clone())),
            (None, true, false) => {} // a folder with no partition: `is_dataset` said no
            (None, _, true) => {
                return Err(format!("{}: a folder that is not a `key=value` partition inside a partitioned dataset", p.display()))
            }
        }
    }
    Ok(())
}

/// Checks that a shard read from a `host=`/`rank=` folder holds only that
/// value's operations (a file moved into the wrong folder would make SQL
/// engines, which take the value from the folder name, disagree with
/// commlens). Other keys are not ours to check.
pub fn check_shard(table: &OpTable, values: &[(String, Option<String>)]) -> Result<(), String> {
    for (k, v) in values {
        let Some(key) = PartitionKey::parse(k) else { continue };
        for s in shards(table, key) {
            if s.value != *v {
                return Err(format!(
                    "its folder says {k}={} but it holds operations of {k} {}",
                    v.as_deref().unwrap_or(HIVE_DEFAULT_PARTITION),
                    s.value.as_deref().unwrap_or("(none)")
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_escape_as_hive_does_and_come_back() {
        assert_eq!(escape_value("node01"), "node01");
        assert_eq!(escape_value("a/b=c:d"), "a%2Fb%3Dc%3Ad");
        assert_eq!(escape_value("50%"), "50%25");
        assert_eq!(escape_value(".hidden"), "%2Ehidden");
        assert_eq!(escape_value("_x_"), "%5Fx_");
        assert_eq!(escape_value("tab\there"), "tab%09here");
        assert_eq!(escape_value(""), HIVE_DEFAULT_PARTITION);
        assert_eq!(escape_value("ü-host"), "ü-host");
        for v in ["node01", "a/b=c:d", "50%", ".hidden", "x\\xff", "q?#[]^{}'\"*", "ü-host", "tab\there"] {
            assert_eq!(unescape_value(&escape_value(v)), v, "{v}");
        }
        assert_eq!(unescape_value("100%"), "100%");
        assert_eq!(unescape_value("%zz%4"), "%zz%4");
    }

    #[test]
    fn keys_parse() {
        assert_eq!(PartitionKey::parse("host"), Some(PartitionKey::Host));
        assert_eq!(PartitionKey::parse("rank"), Some(PartitionKey::Rank));
        assert_eq!(PartitionKey::parse("node"), None);
    }
}
