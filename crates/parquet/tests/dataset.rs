//! Hive-partitioned datasets at the library level: a generated 4-node run
//! split into shards by host and by rank, listed back with their partition
//! values, every operation and extra value found in its own shard; column
//! projection (columns left out come back null or 0, the others exact);
//! layout errors.

mod common;

use commlens_core::OpTable;
use commlens_ingest::{load_inputs, nccl_log::ReadOptions};
use commlens_parquet::dataset::{check_shard, dataset_files, is_dataset, write_dataset, PartitionKey};
use commlens_parquet::{read_table, read_table_with, Columns, ExtraColumn, ExtraValues, WriteOptions};
use common::*;
use parquet::record::Field;
use std::collections::BTreeMap;
use std::path::Path;

/// A 4-node, 2-GPU-per-node run read by the log reader.
fn four_nodes(dir: &Path) -> OpTable {
    let cfg = commlens_synth::RunConfig { tp: 2, pp: 2, dp: 2, gpus_per_node: 2, iterations: 1, ..Default::default() };
    let run = commlens_synth::generate(&cfg);
    let files = commlens_synth::write_to_dir(&run, dir).unwrap();
    load_inputs(&files, &ReadOptions::default()).unwrap().table
}

/// What identifies an operation across tables (indices are table-local).
fn key_of(t: &OpTable, op: &commlens_core::CollOp) -> (String, u32, u64, u64, String) {
    let p = &t.processes[op.proc.ix()];
    (p.host.clone(), p.pid, op.line, op.bytes, op.kind.name().to_string())
}

#[test]
fn host_shards_hold_each_hosts_operations_and_extra_values() {
    let dir = tmpdir("dataset-host");
    let t = four_nodes(&dir.join("logs"));
    // An extra value that names its operation, to see it land on its own row.
    let tag: Vec<Option<String>> =
        t.ops().map(|op| Some(format!("{}:{}", t.processes[op.proc.ix()].pid, op.line))).collect();
    let opts = WriteOptions {
        extra: vec![ExtraColumn { name: "tag".into(), values: ExtraValues::Str(tag) }],
        row_group_rows: 64,
        ..Default::default()
    };
    let ds = dir.join("ds");
    let written = write_dataset(&t, &ds, PartitionKey::Host, &opts, "run1").unwrap();
    assert_eq!(written.len(), 4);
    assert_eq!(written.iter().map(|w| w.summary.rows).sum::<u64>() as usize, t.n_ops());
    assert!(is_dataset(&ds));
    // No temporary file is left behind.
    for w in &written {
        let names: Vec<String> = std::fs::read_dir(w.path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec!["part-run1-".to_string() + &written.iter().position(|x| x == w).unwrap().to_string() + ".parquet"]
        );
    }

    let files = dataset_files(&ds).unwrap();
    assert_eq!(files.keys, vec!["host"]);
    let hosts: Vec<String> = files.shards.iter().map(|(_, v)| v[0].1.clone().unwrap()).collect();
    assert_eq!(hosts, vec!["node00", "node01", "node02", "node03"]);

    let mut want: Vec<_> = t.ops().map(|op| key_of(&t, &op)).collect();
    let mut got = Vec::new();
    for (path, values) in &files.shards {
        let (shard, sum) = read_table(path).unwrap();
        check_shard(&shard, values).unwrap();
        assert!(shard.processes.iter().all(|p| Some(&p.host) == values[0].1.as_ref()));
        assert_eq!(sum.rows as usize, shard.n_ops());
        got.extend(shard.ops().map(|op| key_of(&shard, &op)));
        let rb = read_back(path);
        assert_eq!(rb.kv["commlens.partition"], format!("host={}", values[0].1.as_ref().unwrap()));
        for row in &rb.rows {
            let (Field::Long(pid), Field::Long(line), Field::Str(tag)) = (&row["pid"], &row["line"], &row["tag"])
            else {
                panic!("{row:?}")
            };
            assert_eq!(*tag, format!("{pid}:{line}"));
        }
        // Another host's folder would be wrong for this shard.
        assert!(check_shard(&shard, &[("host".into(), Some("node99".into()))]).unwrap_err().contains("node99"));
    }
    want.sort();
    got.sort();
    assert_eq!(got, want);

    // A second write with the same run id would overwrite: refused.
    let e = write_dataset(&t, &ds, PartitionKey::Host, &opts, "run1").unwrap_err();
    assert!(e.to_string().contains("run id"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rank_shards_are_one_per_global_rank() {
    let dir = tmpdir("dataset-rank");
    let t = four_nodes(&dir.join("logs"));
    let ds = dir.join("ds");
    write_dataset(&t, &ds, PartitionKey::Rank, &WriteOptions::default(), "r").unwrap();
    let files = dataset_files(&ds).unwrap();
    let mut per_rank: BTreeMap<u32, usize> = BTreeMap::new();
    for (path, values) in &files.shards {
        let rank: u32 = values[0].1.as_ref().unwrap().parse().unwrap();
        let (shard, _) = read_table(path).unwrap();
        check_shard(&shard, values).unwrap();
        assert!(shard.devices.iter().all(|d| d.global_rank == Some(rank)));
        per_rank.insert(rank, shard.n_ops());
    }
    let want: BTreeMap<u32, usize> =
        t.devices.iter().zip(&t.per_rank).map(|(d, ops)| (d.global_rank.unwrap(), ops.len())).collect();
    assert_eq!(per_rank, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_projection_reads_its_columns_exactly_and_leaves_the_others_out() {
    let dir = tmpdir("dataset-projection");
    let t = four_nodes(&dir.join("logs"));
    let path = dir.join("all.parquet");
    commlens_parquet::write_table(&t, &path, &WriteOptions::default()).unwrap();
    let (full, fs) = read_table(&path).unwrap();
    let cols = Columns::identity_and(&["line"]).unwrap();
    let (part, ps) = read_table_with(&path, &cols).unwrap();
    assert_eq!(fs.columns_read, Columns::all().len());
    assert_eq!(ps.columns_read, Columns::IDENTITY.len() + 1);
    // `nccl_version` was left out; host and pid are identity.
    let who = |t: &OpTable| t.processes.iter().map(|p| (p.host.clone(), p.pid)).collect::<Vec<_>>();
    assert_eq!(who(&part), who(&full));
    assert!(part.processes.iter().all(|p| p.nccl_version.is_none()));
    assert!(full.processes.iter().any(|p| p.nccl_version.is_some()));
    assert_eq!(part.devices, full.devices);
    assert_eq!(part.logical, full.logical);
    assert_eq!(part.n_ops(), full.n_ops());
    let timed = full.ops().filter(|o| o.cpu_ts_ns.is_some()).count();
    assert!(timed > 0, "the generated logs carry timestamps");
    for (a, b) in full.ops().zip(part.ops()) {
        assert_eq!(
            (a.proc, a.dev, a.comm, a.kind, a.count, a.dtype, a.bytes, a.line),
            (b.proc, b.dev, b.comm, b.kind, b.count, b.dtype, b.bytes, b.line)
        );
        // Left out: null, or 0 for fields that are never null.
        assert_eq!(
            (b.cpu_ts_ns, b.algo, b.proto, b.channels, b.sendbuff, b.tid, b.comm_seq, b.seq),
            (None, None, None, None, 0, 0, 0, 0)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn layouts_that_are_not_one_dataset_are_errors_naming_the_path() {
    let dir = tmpdir("dataset-layout");
    let t = four_nodes(&dir.join("logs"));
    let ds = dir.join("ds");
    write_dataset(&t, &ds, PartitionKey::Host, &WriteOptions::default(), "a").unwrap();
    // A folder of another key beside the host folders.
    let first = dataset_files(&ds).unwrap().shards[0].0.clone();
    std::fs::create_dir_all(ds.join("rank=3")).unwrap();
    std::fs::copy(first, ds.join("rank=3/p.parquet")).unwrap();
    let e = dataset_files(&ds).unwrap_err();
    assert!(e.contains("rank=3") && e.contains("`host`"), "{e}");
    std::fs::remove_dir_all(ds.join("rank=3")).unwrap();
    // Hidden files (a run still writing, Spark's _SUCCESS) are passed over; others are listed.
    std::fs::write(ds.join("host=node00/.part-x.parquet.tmp"), b"half").unwrap();
    std::fs::write(ds.join("_SUCCESS"), b"").unwrap();
    std::fs::write(ds.join("host=node00/notes.txt"), b"n").unwrap();
    std::fs::write(ds.join("report.html"), b"r").unwrap();
    let files = dataset_files(&ds).unwrap();
    assert_eq!(files.shards.len(), 4);
    assert_eq!(files.other, vec![ds.join("host=node00/notes.txt"), ds.join("report.html")]);
    // A Parquet file beside the partition folders is no shard of any.
    std::fs::write(ds.join("stray.parquet"), b"x").unwrap();
    let e = dataset_files(&ds).unwrap_err();
    assert!(e.contains("stray.parquet") && e.contains("beside"), "{e}");
    std::fs::remove_file(ds.join("stray.parquet")).unwrap();
    // A plain folder inside a partition.
    std::fs::create_dir_all(ds.join("host=node01/extra")).unwrap();
    let e = dataset_files(&ds).unwrap_err();
    assert!(e.contains("host=node01/extra"), "{e}");
    // A folder of logs with a `key=value` subfolder of logs is no dataset.
    std::fs::create_dir_all(dir.join("logs/job=7")).unwrap();
    std::fs::write(dir.join("logs/job=7/x.log"), b"").unwrap();
    assert!(!is_dataset(&dir.join("logs")));
    let _ = std::fs::remove_dir_all(&dir);
}
