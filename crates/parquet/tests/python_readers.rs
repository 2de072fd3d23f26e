//! The files must work in the tools people use: when `python3` can import
//! DuckDB (resp. pyarrow + pandas), a query on a generated run's file must give
//! the table's totals, column types and footer. Without the module the test
//! prints a skip note and passes (CI decides whether to install them).

mod common;

use commlens_core::{OpTable, SourceKind};
use commlens_parquet::{write_table, ExtraColumn, ExtraValues, WriteOptions, SCHEMA_VERSION};
use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run_python(script: &str, file: &Path) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(file)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Writes the generated run with one extra float column; returns the table
/// and the extra column's sum.
fn write_generated(dir: &Path) -> (OpTable, f64, std::path::PathBuf) {
    let (_, t) = load_generated(&dir.join("logs"));
    let mb: Vec<Option<f64>> = t.ops().map(|o| (o.bytes > 0).then(|| o.bytes as f64 / 1e6)).collect();
    let mb_sum: f64 = mb.iter().flatten().sum();
    let path = dir.join("ops.parquet");
    let opts = WriteOptions {
        row_group_rows: 500,
        source_kind: Some(SourceKind::NcclLog),
        extra: vec![ExtraColumn {
            name: "mbytes".into(),
            values: ExtraValues::F64(mb),
        }],
        ..Default::default()
    };
    write_table(&t, &path, &opts).unwrap();
    (t, mb_sum, path)
}

/// (count, bytes) per kind, as `kind\tcount\tbytes` lines would print them.
fn table_kinds(t: &OpTable) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for o in t.ops() {
        let e: &mut (u64, u64) = m.entry(o.kind.name().to_string()).or_default();
        e.0 += 1;
        e.1 += o.bytes;
    }
    m
}

/// Lines `tag\tf1\tf2…` of the script's output, by tag.
fn tagged<'a>(out: &'a str, tag: &str) -> Vec<Vec<&'a str>> {
    out.lines()
        .filter_map(|l| l.strip_prefix(tag).and_then(|r| r.strip_prefix('\t')))
        .map(|r| r.split('\t').collect())
        .collect()
}

fn kinds_of(out: &str) -> BTreeMap<String, (u64, u64)> {
    tagged(out, "kind")
        .into_iter()
        .map(|f| (f[0].to_string(), (f[1].parse().unwrap(), f[2].parse().unwrap())))
        .collect()
}

const DUCKDB_SCRIPT: &str = r#"
import sys, duckdb
p = sys.argv[1].replace("'", "''")
con = duckdb.connect()
src = f"read_parquet('{p}')"
for k, n, b in con.execute(f"SELECT kind, count(*), sum(bytes) FROM {src} GROUP BY kind ORDER BY kind").fetchall():
    print(f"kind\t{k}\t{n}\t{b}")
for name, typ in con.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {src})").fetchall():
    print(f"type\t{name}\t{typ}")
row = con.execute(f"SELECT count(*) - count(gpu_start_ns), count(*) - count(peer), sum(mbytes), count(DISTINCT global_rank) FROM {src}").fetchone()
print("agg\t" + "\t".join(str(x) for x in row))
for k, v in con.execute(f"SELECT decode(key), decode(value) FROM parquet_kv_metadata('{p}')").fetchall():
    print(f"kv\t{k}\t{v}")
"#;

#[test]
fn duckdb_sql_gives_the_table_totals() {
    if !python_has("duckdb") {
        commlens_testdata::skip_unless_ci("Parquet read by DuckDB", "the duckdb Python module is not installed", "pip install duckdb");
        return;
    }
    let dir = tmpdir("duckdb");
    let (t, mb_sum, path) = write_generated(&dir);
    let out = run_python(DUCKDB_SCRIPT, &path);
    assert_eq!(kinds_of(&out), table_kinds(&t));

    let types: BTreeMap<&str, &str> = tagged(&out, "type").into_iter().map(|f| (f[0], f[1])).collect();
    assert_eq!(types.len(), COLUMNS.len() + 1);
    for (c, want) in [
        ("kind", "VARCHAR"),
        ("comm_id", "VARCHAR"),
        ("global_rank", "INTEGER"),
        ("bytes", "BIGINT"),
        ("gpu_dur_ns", "BIGINT"),
        ("recovered", "BOOLEAN"),
        ("mbytes", "DOUBLE"),
    ] {
        assert_eq!(types[c], want, "DuckDB type of {c}");
    }

    let agg = &tagged(&out, "agg")[0];
    assert_eq!(agg[0].parse::<usize>().unwrap(), t.n_ops(), "logs have no GPU spans");
    assert_eq!(
        agg[1].parse::<usize>().unwrap(),
        t.ops().filter(|o| o.peer.is_none()).count()
    );
    let got_mb: f64 = agg[2].parse().unwrap();
    assert!(
        (got_mb - mb_sum).abs() <= 1e-9 * mb_sum.max(1.0),
        "{got_mb} vs {mb_sum}"
    );
    assert_eq!(agg[3].parse::<usize>().unwrap(), t.devices.len());

    let kv: BTreeMap<&str, &str> = tagged(&out, "kv").into_iter().map(|f| (f[0], f[1])).collect();
    assert_eq!(kv["commlens.schema_version"], SCHEMA_VERSION.to_string());
    assert_eq!(kv["commlens.source_kind"], "nccl_log");
    let _ = std::fs::remove_dir_all(&dir);
}

const PANDAS_SCRIPT: &str = r#"
import sys, pandas as pd, pyarrow.parquet as pq
p = sys.argv[1]
df = pd.read_parquet(p)
g = df.groupby("kind")["bytes"].agg(["count", "sum"])
for k, row in g.iterrows():
    print(f"kind\t{k}\t{int(row['count'])}\t{int(row['sum'])}")
print(f"rows\t{len(df)}\t{int(df['gpu_start_ns'].isna().sum())}\t{float(df['mbytes'].sum())!r}")
md = pq.read_metadata(p).metadata
print("kv\t" + md[b"commlens.schema_version"].decode() + "\t" + md[b"commlens.version"].decode())
"#;

#[test]
fn pandas_gives_the_table_totals() {
    if !(python_has("pyarrow") && python_has("pandas")) {
        commlens_testdata::skip("Parquet read by pandas", "pyarrow/pandas not installed (pip install pyarrow pandas)");
        return;
    }
    let dir = tmpdir("pandas");
    let (t, mb_sum, path) = write_generated(&dir);
    let out = run_python(PANDAS_SCRIPT, &path);
    assert_eq!(kinds_of(&out), table_kinds(&t));
    let rows = &tagged(&out, "rows")[0];
    assert_eq!(rows[0].parse::<usize>().unwrap(), t.n_ops());
    assert_eq!(rows[1].parse::<usize>().unwrap(), t.n_ops());
    let got_mb: f64 = rows[2].parse().unwrap();
    assert!(
        (got_mb - mb_sum).abs() <= 1e-9 * mb_sum.max(1.0),
        "{got_mb} vs {mb_sum}"
    );
    let kv = &tagged(&out, "kv")[0];
    assert_eq!(kv[0], SCHEMA_VERSION.to_string());
    assert!(!kv[1].is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
