//! Shared test oracle: reads a written file back with the `parquet` crate's
//! row reader and compares every cell with values derived from the table here,
//! independently of the crate's own column getters.

#![allow(dead_code)]

use commlens_core::{CollOp, DataType, OpTable, RedOp, SourceKind};
use commlens_ingest::inputs::load_inputs;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_parquet::{ExtraColumn, ExtraValues};
use commlens_synth::{generate, write_to_dir, GeneratedRun, RunConfig};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-parquet-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The full column list in file order, as SCHEMA.md documents it. Pinned here
/// so that a reorder or rename fails a test instead of silently breaking users.
pub const COLUMNS: &[&str] = &[
    "source_kind",
    "host",
    "pid",
    "tid",
    "nccl_version",
    "global_rank",
    "local_rank",
    "cuda_dev",
    "comm_ptr",
    "comm_id",
    "logical_comm",
    "logical_comm_idx",
    "nranks",
    "rank_in_comm",
    "comm_seq",
    "seq",
    "kind",
    "count",
    "datatype",
    "bytes",
    "redop",
    "root",
    "peer",
    "algorithm",
    "protocol",
    "channel_lo",
    "channel_hi",
    "sendbuff",
    "recvbuff",
    "stream",
    "cpu_ts_ns",
    "gpu_start_ns",
    "gpu_end_ns",
    "gpu_dur_ns",
    "kernel_name",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "shared_mem_bytes",
    "registers",
    "correlation_id",
    "line",
    "recovered",
];

pub struct ReadBack {
    pub rows: Vec<HashMap<String, Field>>,
    /// Column names in file order.
    pub columns: Vec<String>,
    pub kv: HashMap<String, String>,
    pub row_groups: usize,
    pub row_group_sizes: Vec<i64>,
}

pub fn read_back(path: &Path) -> ReadBack {
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let md = reader.metadata();
    let columns = md
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let kv = md
        .file_metadata()
        .key_value_metadata()
        .map(|kv| {
            kv.iter()
                .map(|e| (e.key.clone(), e.value.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    let row_group_sizes = md.row_groups().iter().map(|rg| rg.num_rows()).collect();
    let rows = reader
        .get_row_iter(None)
        .unwrap()
        .map(|r| {
            r.unwrap()
                .get_column_iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect();
    ReadBack {
        rows,
        columns,
        kv,
        row_groups: md.num_row_groups(),
        row_group_sizes,
    }
}

fn s(v: impl ToString) -> Field {
    Field::Str(v.to_string())
}
fn opt_s<T: ToString>(v: Option<T>) -> Field {
    v.map_or(Field::Null, s)
}
fn i32f(v: Option<u32>) -> Field {
    v.map_or(Field::Null, |v| Field::Int(v as i32))
}
fn i64f(v: Option<i64>) -> Field {
    v.map_or(Field::Null, Field::Long)
}
fn hex(v: u64) -> String {
    format!("0x{v:x}")
}

fn source_name(k: SourceKind) -> &'static str {
    match k {
        SourceKind::NcclLog => "nccl_log",
        SourceKind::Nsys => "nsys",
        SourceKind::Kineto => "kineto",
        SourceKind::Plugin => "plugin",
        SourceKind::Inspector => "inspector",
        SourceKind::Simulated => "simulated",
    }
}

fn dtype_name(d: DataType) -> String {
    match d {
        DataType::Unknown(v) => format!("unknown({v})"),
        d => d.name().to_string(),
    }
}

fn redop_name(r: RedOp) -> String {
    match r {
        RedOp::User(v) => format!("user({v})"),
        RedOp::Unknown(v) => format!("unknown({v})"),
        r => r.name().to_string(),
    }
}

/// What the file must hold for `op`, column by column. u64 values above
/// i64::MAX are expected clamped, u32 values above i32::MAX likewise.
pub fn expected_row(t: &OpTable, op: &CollOp, source: Option<SourceKind>) -> Vec<(&'static str, Field)> {
    let p = &t.processes[op.proc.ix()];
    let d = &t.devices[op.dev.ix()];
    let c = &t.comms[op.comm.ix()];
    let l = c.logical.map(|l| (l.ix(), &t.logical[l.ix()]));
    let cl32 = |v: Option<u32>| i32f(v.map(|v| v.min(i32::MAX as u32)));
    let cl64 = |v: u64| Field::Long(v.min(i64::MAX as u64) as i64);
    let k = op.kernel.as_deref();
    vec![
        ("source_kind", opt_s(source.map(source_name))),
        ("host", s(&p.host)),
        ("pid", Field::Long(p.pid as i64)),
        ("tid", Field::Long(op.tid as i64)),
        ("nccl_version", opt_s(p.nccl_version)),
        ("global_rank", cl32(d.global_rank)),
        ("local_rank", cl32(d.local_rank)),
        ("cuda_dev", cl32(d.cuda_dev)),
        ("comm_ptr", s(hex(c.ptr))),
        ("comm_id", opt_s(c.comm_id.map(hex))),
        ("logical_comm", opt_s(l.map(|l| &l.1.name))),
        ("logical_comm_idx", i32f(l.map(|l| l.0 as u32))),
        ("nranks", cl32(c.nranks.or(l.map(|l| l.1.nranks)))),
        ("rank_in_comm", cl32(c.rank)),
        ("comm_seq", cl64(op.comm_seq)),
        ("seq", cl64(op.seq)),
        ("kind", s(op.kind.name())),
        ("count", cl64(op.count)),
        ("datatype", s(dtype_name(op.dtype))),
        ("bytes", op.size().map_or(Field::Null, cl64)),
        ("redop", opt_s(op.redop.map(redop_name))),
        ("root", cl32(op.root)),
        ("peer", cl32(op.peer)),
        ("algorithm", opt_s(op.algo.map(|a| a.name()))),
        ("protocol", opt_s(op.proto.map(|a| a.name()))),
        ("channel_lo", i32f(op.channels.map(|c| c.0 as u32))),
        ("channel_hi", i32f(op.channels.map(|c| c.1 as u32))),
        ("sendbuff", opt_s((op.sendbuff != 0).then(|| hex(op.sendbuff)))),
        ("recvbuff", opt_s((op.recvbuff != 0).then(|| hex(op.recvbuff)))),
        ("stream", opt_s(op.stream.map(hex))),
        ("cpu_ts_ns", i64f(op.cpu_ts_ns)),
        ("gpu_start_ns", i64f(op.gpu.map(|g| g.start_ns))),
        ("gpu_end_ns", i64f(op.gpu.map(|g| g.end_ns))),
        ("gpu_dur_ns", i64f(op.gpu.map(|g| g.end_ns - g.start_ns))),
        ("kernel_name", opt_s(k.map(|k| &k.name))),
        ("grid_x", cl32(k.map(|k| k.grid[0]))),
        ("grid_y", cl32(k.map(|k| k.grid[1]))),
        ("grid_z", cl32(k.map(|k| k.grid[2]))),
        ("block_x", cl32(k.map(|k| k.block[0]))),
        ("block_y", cl32(k.map(|k| k.block[1]))),
        ("block_z", cl32(k.map(|k| k.block[2]))),
        ("shared_mem_bytes", cl32(k.map(|k| k.shared_mem_bytes))),
        ("registers", cl32(k.map(|k| k.registers))),
        ("correlation_id", k.map_or(Field::Null, |k| cl64(k.correlation_id))),
        ("line", cl64(op.line)),
        ("recovered", Field::Bool(op.recovered)),
    ]
}

fn extra_field(e: &ExtraColumn, i: usize) -> Field {
    match &e.values {
        ExtraValues::F64(v) => v[i].map_or(Field::Null, Field::Double),
        ExtraValues::Str(v) => v[i].as_ref().map_or(Field::Null, |x| Field::Str(x.clone())),
    }
}

/// Every row and every cell of the file against the table, in `ops()` order.
pub fn assert_file_matches(t: &OpTable, rb: &ReadBack, source: Option<SourceKind>, extra: &[ExtraColumn]) {
    let mut want_cols: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    want_cols.extend(extra.iter().map(|e| e.name.clone()));
    assert_eq!(rb.columns, want_cols, "column order");
    assert_eq!(rb.rows.len(), t.n_ops(), "row count");
    for (i, (op, row)) in t.ops().zip(&rb.rows).enumerate() {
        let want = expected_row(t, &op, source);
        assert_eq!(want.len(), COLUMNS.len());
        for (name, field) in want {
            assert_eq!(row.get(name), Some(&field), "row {i} column {name}");
        }
        for e in extra {
            assert_eq!(
                row.get(&e.name),
                Some(&extra_field(e, i)),
                "row {i} extra column {}",
                e.name
            );
        }
        assert_eq!(row.len(), COLUMNS.len() + extra.len(), "row {i} has no other columns");
    }
}

/// Generates the default run under `dir` and loads it like `commlens stats` would.
pub fn load_generated(dir: &Path) -> (GeneratedRun, OpTable) {
    let run = generate(&RunConfig::default());
    let files = write_to_dir(&run, dir).unwrap();
    let per_process: Vec<PathBuf> = files.into_iter().filter(|f| !f.ends_with("combined.log")).collect();
    let loaded = load_inputs(&per_process, &ReadOptions::default()).unwrap();
    (run, loaded.table)
}
