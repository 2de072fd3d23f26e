//! A hand-built table that exercises every column, both null and set, odd
//! values (unknown datatype, user reduction op, values beyond the signed
//! range), several row groups, extra columns, the footer, and the rejection
//! of bad options before any file is created.

mod common;

use commlens_core::model::{Grouping, KernelInfo};
use commlens_core::*;
use commlens_parquet::*;
use common::*;
use parquet::record::Field;

fn table() -> OpTable {
    let mut t = OpTable {
        sources: vec!["node0/rank0.log".into(), "weird \"name\".log".into()],
        ..OpTable::default()
    };
    t.processes = vec![
        Process {
            host: "node0".into(),
            pid: 4242,
            nccl_version: Some(NcclVersion::new(2, 27, 7)),
        },
        Process {
            host: "node1".into(),
            pid: 77,
            nccl_version: None,
        },
    ];
    t.devices = vec![
        Device {
            proc: ProcIdx(0),
            cuda_dev: Some(0),
            nvml_dev: Some(0),
            bus_id: None,
            global_rank: Some(0),
            local_rank: Some(0),
        },
        Device {
            proc: ProcIdx(1),
            cuda_dev: None,
            nvml_dev: None,
            bus_id: None,
            global_rank: None,
            local_rank: None,
        },
    ];
    let mut c0 = CommMember::new(ProcIdx(0), 0x7f00_dead_beef);
    c0.comm_id = Some(0xfedc_ba98_7654_3210); // above i64::MAX: must stay exact as hex
    c0.nranks = Some(2);
    c0.rank = Some(0);
    c0.device = Some(DevIdx(0));
    c0.logical = Some(LogicalCommIdx(0));
    let mut c1 = CommMember::new(ProcIdx(1), 0x5555_0000_1000);
    c1.device = Some(DevIdx(1));
    c1.logical = Some(LogicalCommIdx(0)); // nranks only known from the logical comm
    let mut c2 = CommMember::new(ProcIdx(1), 0x5555_0000_2000);
    c2.device = Some(DevIdx(1)); // no logical communicator at all
    t.comms = vec![c0, c1, c2];
    t.logical = vec![LogicalComm {
        name: "world".into(),
        comm_id: Some(0xfedc_ba98_7654_3210),
        nranks: 2,
        members: vec![CommIdx(0), CommIdx(1)],
        grouping: Grouping::CommId,
    }];

    let full = CollOp {
        comm_seq: 3,
        tid: 4_000_000_000, // above i32::MAX: tid is INT64, so exact
        seq: 17,
        redop: Some(RedOp::Sum),
        algo: Some(Algorithm::Ring),
        proto: Some(Protocol::Ll128),
        channels: Some((0, 7)),
        sendbuff: 0x7f11_0000_0000,
        recvbuff: 0x7f22_0000_0000,
        stream: Some(0x5a5a),
        cpu_ts_ns: Some(1_700_000_000_123_456_789),
        gpu: Some(GpuSpan {
            start_ns: 1_000,
            end_ns: 26_500,
        }),
        kernel: Some(std::sync::Arc::new(KernelInfo {
            name: "ncclDevKernel_AllReduce_Sum_f32_RING_LL128".into(),
            grid: [8, 1, 1],
            block: [640, 1, 1],
            shared_mem_bytes: 99_000,
            registers: 96,
            correlation_id: 123_456,
        })),
        line: 120,
        ..CollOp::new(
            ProcIdx(0),
            DevIdx(0),
            CommIdx(0),
            OpKind::AllReduce,
            1 << 20,
            DataType::Float32,
        )
    };
    let bare = CollOp {
        line: 121,
        ..CollOp::new(
            ProcIdx(0),
            DevIdx(0),
            CommIdx(0),
            OpKind::Send,
            10,
            DataType::Unknown(42),
        )
    };
    let send = CollOp {
        peer: Some(0),
        seq: 2,
        recovered: true,
        line: 9,
        ..CollOp::new(ProcIdx(1), DevIdx(1), CommIdx(1), OpKind::Send, 256, DataType::Bfloat16)
    };
    let bcast = CollOp {
        root: Some(1),
        redop: Some(RedOp::User(7)),
        line: 10,
        ..CollOp::new(ProcIdx(1), DevIdx(1), CommIdx(2), OpKind::Broadcast, 3, DataType::Int64)
    };
    let huge = CollOp {
        comm_seq: u64::MAX,
        line: 11,
        ..CollOp::new(
            ProcIdx(1),
            DevIdx(1),
            CommIdx(2),
            OpKind::Recv,
            u64::MAX,
            DataType::Uint8,
        )
    };
    t.per_rank = vec![vec![full, bare].into(), vec![send, bcast, huge].into()];
    t
}

fn extras(n: usize) -> Vec<ExtraColumn> {
    vec![
        ExtraColumn {
            name: "busbw_gb_s".into(),
            values: ExtraValues::F64((0..n).map(|i| (i % 2 == 0).then_some(i as f64 * 1.5)).collect()),
        },
        ExtraColumn {
            name: "parallelism".into(),
            values: ExtraValues::Str((0..n).map(|i| (i != 1).then(|| format!("tp{i}"))).collect()),
        },
    ]
}

#[test]
fn every_column_round_trips_across_row_groups() {
    let t = table();
    let dir = tmpdir("hand");
    let path = dir.join("ops.parquet");
    let opts = WriteOptions {
        row_group_rows: 2,
        source_kind: Some(SourceKind::Kineto),
        extra: extras(t.n_ops()),
        ..WriteOptions::default()
    };
    let sum = write_table(&t, &path, &opts).unwrap();
    assert_eq!(sum.rows, 5);
    assert_eq!(sum.row_groups, 3);
    assert_eq!(sum.columns, COLUMNS.len() + 2);
    assert_eq!(sum.bytes_written, std::fs::metadata(&path).unwrap().len());
    // comm_seq, count and bytes (= count, saturated) of `huge`: the only
    // values beyond i64::MAX.
    assert_eq!(sum.clamped_values, 3);

    let rb = read_back(&path);
    assert_eq!(rb.row_groups, 3);
    assert_eq!(rb.row_group_sizes, vec![2, 2, 1]);
    assert_file_matches(&t, &rb, Some(SourceKind::Kineto), &opts.extra);

    // Spot checks written out by hand, so the oracle itself is checked too.
    let r0 = &rb.rows[0];
    assert_eq!(r0["comm_id"], Field::Str("0xfedcba9876543210".into()));
    assert_eq!(r0["comm_ptr"], Field::Str("0x7f00deadbeef".into()));
    assert_eq!(r0["gpu_dur_ns"], Field::Long(25_500));
    assert_eq!(r0["bytes"], Field::Long(4 << 20));
    assert_eq!(r0["tid"], Field::Long(4_000_000_000));
    assert_eq!(r0["nccl_version"], Field::Str("2.27.7".into()));
    assert_eq!(r0["source_kind"], Field::Str("kineto".into()));
    assert_eq!(r0["busbw_gb_s"], Field::Double(0.0));
    assert_eq!(rb.rows[1]["datatype"], Field::Str("unknown(42)".into()));
    // An unknown type: the size is unknown, null rather than 0.
    assert_eq!(rb.rows[1]["bytes"], Field::Null);
    assert_eq!(rb.rows[1]["kernel_name"], Field::Null);
    assert_eq!(rb.rows[1]["parallelism"], Field::Null);
    assert_eq!(
        rb.rows[2]["nranks"],
        Field::Int(2),
        "nranks falls back to the logical comm"
    );
    assert_eq!(rb.rows[2]["global_rank"], Field::Null);
    assert_eq!(rb.rows[2]["recovered"], Field::Bool(true));
    assert_eq!(rb.rows[3]["redop"], Field::Str("user(7)".into()));
    assert_eq!(rb.rows[3]["logical_comm"], Field::Null);
    assert_eq!(rb.rows[4]["count"], Field::Long(i64::MAX));
    assert_eq!(rb.rows[4]["busbw_gb_s"], Field::Double(6.0));

    assert_eq!(rb.kv[META_COMMLENS_VERSION], env!("CARGO_PKG_VERSION"));
    assert_eq!(rb.kv[META_SCHEMA_VERSION], SCHEMA_VERSION.to_string());
    assert_eq!(rb.kv[META_SOURCE_KIND], "kineto");
    assert_eq!(rb.kv[META_SOURCES], r#"["node0/rank0.log","weird \"name\".log"]"#);
    assert_eq!(rb.kv[META_EXTRA_COLUMNS], r#"["busbw_gb_s","parallelism"]"#);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uncompressed_single_group_and_writer_sink() {
    let t = table();
    let mut buf = Vec::new();
    let sum = write_table_to(
        &t,
        &mut buf,
        &WriteOptions {
            compression: Compression::Uncompressed,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(sum.row_groups, 1);
    assert_eq!(sum.bytes_written as usize, buf.len());
    assert!(buf.starts_with(b"PAR1") && buf.ends_with(b"PAR1"));
    let dir = tmpdir("sink");
    let path = dir.join("ops.parquet");
    std::fs::write(&path, &buf).unwrap();
    let rb = read_back(&path);
    assert_file_matches(&t, &rb, None, &[]);
    assert!(!rb.kv.contains_key(META_SOURCE_KIND));
    assert_eq!(rb.kv[META_EXTRA_COLUMNS], "[]");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "zstd")]
#[test]
fn zstd_round_trips() {
    let t = table();
    let dir = tmpdir("zstd");
    let path = dir.join("ops.parquet");
    write_table(
        &t,
        &path,
        &WriteOptions {
            compression: Compression::Zstd(3),
            ..Default::default()
        },
    )
    .unwrap();
    assert_file_matches(&t, &read_back(&path), None, &[]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn empty_table_gives_a_valid_file_with_the_schema() {
    let t = OpTable::default();
    let dir = tmpdir("empty");
    let path = dir.join("ops.parquet");
    let sum = write_table(&t, &path, &WriteOptions::default()).unwrap();
    assert_eq!((sum.rows, sum.row_groups), (0, 0));
    let rb = read_back(&path);
    assert!(rb.rows.is_empty());
    assert_eq!(rb.columns, COLUMNS);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_options_and_tables_are_refused_before_the_file_exists() {
    let t = table();
    let dir = tmpdir("bad");
    let path = dir.join("ops.parquet");
    let n = t.n_ops();
    let cases = [
        ExtraColumn {
            name: "x".into(),
            values: ExtraValues::F64(vec![None; n - 1]),
        },
        ExtraColumn {
            name: "bytes".into(),
            values: ExtraValues::F64(vec![None; n]),
        },
        ExtraColumn {
            name: String::new(),
            values: ExtraValues::Str(vec![None; n]),
        },
    ];
    for bad in cases {
        let opts = WriteOptions {
            extra: vec![bad.clone()],
            ..Default::default()
        };
        let err = write_table(&t, &path, &opts).unwrap_err();
        assert!(matches!(err, WriteError::InvalidExtra(_)), "{bad:?}: {err}");
        assert!(!path.exists());
    }
    let dup = ExtraColumn {
        name: "y".into(),
        values: ExtraValues::F64(vec![None; n]),
    };
    let opts = WriteOptions {
        extra: vec![dup.clone(), dup],
        ..Default::default()
    };
    assert!(matches!(
        write_table(&t, &path, &opts),
        Err(WriteError::InvalidExtra(_))
    ));

    let mut broken = table();
    broken.per_rank[1].update(0, |o| o.comm = CommIdx(99));
    let err = write_table(&broken, &path, &WriteOptions::default()).unwrap_err();
    assert!(matches!(err, WriteError::InvalidTable(_)), "{err}");
    assert!(!path.exists());

    // An I/O failure (no such directory) is reported, not panicked on.
    let err = write_table(&t, &dir.join("missing/ops.parquet"), &WriteOptions::default()).unwrap_err();
    assert!(matches!(err, WriteError::Io(_)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn schema_doc_lists_every_column() {
    let doc = include_str!("../SCHEMA.md");
    let names: Vec<&str> = builtin_column_names().collect();
    assert_eq!(names, COLUMNS);
    for c in COLUMNS {
        assert!(doc.contains(&format!("| `{c}` |")), "SCHEMA.md lacks a row for `{c}`");
    }
    assert!(doc.contains(&format!("schema version {SCHEMA_VERSION}")));
}

/// `cargo test --release -p commlens-parquet --test hand_built -- --ignored --nocapture`:
/// rows per second and bytes per row for a 2M-operation table, written and read back.
#[test]
#[ignore]
fn throughput() {
    let mut t = table();
    let template: Vec<CollOp> = t.ops().collect();
    for ops in t.per_rank.iter_mut() {
        ops.clear();
        for i in 0..1_000_000u64 {
            let mut op = template[(i % 5) as usize].clone();
            op.comm_seq = i;
            op.line = i + 1;
            op.count = 1 + i % 4096;
            op.cpu_ts_ns = Some(1_700_000_000_000_000_000 + i as i64 * 1_000);
            ops.push(op);
        }
    }
    let dir = tmpdir("throughput");
    let path = dir.join("ops.parquet");
    let t0 = std::time::Instant::now();
    let sum = write_table(&t, &path, &WriteOptions::default()).unwrap();
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "{} rows, {} row groups, {:.1} MB ({:.1} B/row) in {dt:.2} s = {:.2} M rows/s",
        sum.rows,
        sum.row_groups,
        sum.bytes_written as f64 / 1e6,
        sum.bytes_written as f64 / sum.rows as f64,
        sum.rows as f64 / dt / 1e6
    );
    assert_eq!(sum.rows, 2_000_000);
    let t0 = std::time::Instant::now();
    let (back, _) = read_table(&path).unwrap();
    let dt = t0.elapsed().as_secs_f64();
    println!("read back in {dt:.2} s = {:.2} M rows/s", sum.rows as f64 / dt / 1e6);
    assert_eq!(back.n_ops(), 2_000_000);
    let _ = std::fs::remove_dir_all(&dir);
}
