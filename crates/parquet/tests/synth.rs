//! A generated Megatron-like run goes through the real log reader, then to
//! Parquet; the file is read back and checked cell by cell against the table
//! and, for counts and bytes per (rank, communicator, kind), against the
//! generator's ground truth, which is independent of both reader and writer.

mod common;

use commlens_core::SourceKind;
use commlens_parquet::{write_table, ExtraColumn, ExtraValues, WriteOptions};
use common::*;
use parquet::record::Field;
use std::collections::HashMap;

fn str_of(f: &Field) -> &str {
    match f {
        Field::Str(s) => s,
        other => panic!("expected a string, got {other:?}"),
    }
}

fn long_of(f: &Field) -> i64 {
    match f {
        Field::Long(v) => *v,
        other => panic!("expected an int64, got {other:?}"),
    }
}

#[test]
fn generated_run_round_trips_through_parquet() {
    let dir = tmpdir("synth");
    let (run, t) = load_generated(&dir.join("logs"));
    const GROUP: usize = 100;
    assert!(
        t.n_ops() > 3 * GROUP,
        "the run should span several row groups: {} ops",
        t.n_ops()
    );
    let path = dir.join("ops.parquet");
    let mb: Vec<Option<f64>> = t.ops().map(|o| (o.bytes > 0).then(|| o.bytes as f64 / 1e6)).collect();
    let extra = vec![ExtraColumn {
        name: "mbytes".into(),
        values: ExtraValues::F64(mb),
    }];
    let opts = WriteOptions {
        row_group_rows: GROUP,
        source_kind: Some(SourceKind::NcclLog),
        extra,
        ..Default::default()
    };
    let sum = write_table(&t, &path, &opts).unwrap();
    assert_eq!(sum.rows as usize, t.n_ops());
    assert_eq!(sum.clamped_values, 0);

    let rb = read_back(&path);
    assert_eq!(rb.row_groups, t.n_ops().div_ceil(GROUP));
    assert!(rb.row_group_sizes[..rb.row_groups - 1]
        .iter()
        .all(|&n| n == GROUP as i64));
    assert_file_matches(&t, &rb, Some(SourceKind::NcclLog), &opts.extra);

    // Per-kind totals from the file equal the table's.
    let mut file_kind: HashMap<String, (usize, i64)> = HashMap::new();
    for r in &rb.rows {
        let e = file_kind.entry(str_of(&r["kind"]).to_string()).or_default();
        e.0 += 1;
        e.1 += long_of(&r["bytes"]);
    }
    let mut table_kind: HashMap<String, (usize, i64)> = HashMap::new();
    for o in t.ops() {
        let e = table_kind.entry(o.kind.name().to_string()).or_default();
        e.0 += 1;
        e.1 += o.bytes as i64;
    }
    assert_eq!(file_kind, table_kind);

    // Per (global rank, communicator, kind) from the file equal the generator's truth.
    let name_of: HashMap<String, &str> = run
        .truth
        .communicators
        .iter()
        .map(|c| (format!("0x{:x}", c.comm_id), c.name.as_str()))
        .collect();
    let mut got: HashMap<(usize, String, String), (usize, u64)> = HashMap::new();
    for r in &rb.rows {
        let Field::Int(rank) = r["global_rank"] else {
            panic!("every generated rank is known")
        };
        let comm = name_of[str_of(&r["comm_id"])].to_string();
        let e = got
            .entry((rank as usize, comm, str_of(&r["kind"]).to_string()))
            .or_default();
        e.0 += 1;
        e.1 += long_of(&r["bytes"]) as u64;
    }
    for o in &run.truth.ops {
        assert_eq!(
            got.get(&(o.rank, o.comm.clone(), o.op.clone())),
            Some(&(o.lines, o.bytes)),
            "{o:?}"
        );
    }
    assert_eq!(got.values().map(|v| v.0).sum::<usize>(), run.truth.total_op_lines());

    // Logs carry no GPU spans or kernels: those columns are all null; the
    // logs' timestamps and tuning make cpu_ts_ns and algorithm non-null.
    let nulls = |c: &str| rb.rows.iter().filter(|r| r[c] == Field::Null).count();
    for c in [
        "gpu_start_ns",
        "gpu_end_ns",
        "gpu_dur_ns",
        "kernel_name",
        "correlation_id",
        "grid_x",
    ] {
        assert_eq!(nulls(c), t.n_ops(), "{c}");
    }
    assert_eq!(nulls("cpu_ts_ns"), t.ops().filter(|o| o.cpu_ts_ns.is_none()).count());
    assert_eq!(nulls("algorithm"), t.ops().filter(|o| o.algo.is_none()).count());
    assert_eq!(nulls("peer"), t.ops().filter(|o| o.peer.is_none()).count());
    assert!(nulls("peer") < t.n_ops(), "the pipeline sends name peers");
    assert_eq!(nulls("logical_comm"), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
