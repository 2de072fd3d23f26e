//! `write_table` → `read_table` gives the table back: on a generated run read
//! through the real log reader, on a Kineto-trace table (GPU spans, kernel
//! details, no commId), and on hand-built edge cases (nulls everywhere they
//! are allowed, unknown enums, values at and beyond the signed range, several
//! row groups). Every field of every operation and every stored field of the
//! processes, devices, handles and logical communicators is compared. Also:
//! foreign, truncated and mistyped files are errors naming the file.

mod common;

use commlens_core::model::{Grouping, KernelInfo};
use commlens_core::*;
use commlens_parquet::*;
use common::*;
use std::path::{Path, PathBuf};

/// What `read_table` can restore of `t`, for a table in which every process,
/// device and handle has operations and they first appear in index order:
/// the fields the schema does not store are reset, a handle's `nranks` is
/// filled from its logical communicator (the column holds the one or the
/// other), and `n_ops`/`op_seq_hash` are those of the handle's operations.
fn restorable(t: &OpTable) -> OpTable {
    let mut r = t.clone();
    r.topologies.clear();
    for d in &mut r.devices {
        d.nvml_dev = None;
        d.bus_id = None;
    }
    for (i, c) in r.comms.iter_mut().enumerate() {
        let logical_n = c.logical.map(|l| t.logical[l.ix()].nranks);
        *c = CommMember {
            comm_id: c.comm_id,
            nranks: c.nranks.or(logical_n),
            rank: c.rank,
            device: c.device,
            logical: c.logical,
            ..CommMember::new(c.proc, c.ptr)
        };
        for op in t.ops().filter(|o| o.comm.ix() == i) {
            c.note_op(op.kind);
        }
    }
    r
}

/// `want` (a [`restorable`] table) numbered as `got` numbers the same
/// processes (host, pid), devices (process and ranks), handles (process and
/// pointer) and logical communicators (name): the reader numbers them in
/// order of first appearance, which need not be the source's order. Entities
/// without operations must be absent from `got`; every entity of `got` must
/// come from exactly one of `want`.
fn renumbered(want: &OpTable, got: &OpTable) -> OpTable {
    /// Source index → read index, by a key computed within each table.
    fn map<T, K: PartialEq>(w: &OpTable, g: &OpTable, items: fn(&OpTable) -> &[T], key: impl Fn(&OpTable, &T) -> K) -> Vec<Option<usize>> {
        let m: Vec<Option<usize>> =
            items(w).iter().map(|x| items(g).iter().position(|y| key(g, y) == key(w, x))).collect();
        for j in 0..items(g).len() {
            assert_eq!(m.iter().filter(|&&i| i == Some(j)).count(), 1, "entity {j} of the read table comes from one source entity");
        }
        m
    }
    let proc_key = |t: &OpTable, p: ProcIdx| (t.processes[p.ix()].host.clone(), t.processes[p.ix()].pid);
    let pm = map(want, got, |t| &t.processes, |_, p| (p.host.clone(), p.pid));
    let dm = map(want, got, |t| &t.devices, |t, d| (proc_key(t, d.proc), d.global_rank, d.local_rank, d.cuda_dev));
    let cm = map(want, got, |t| &t.comms, |t, c| (proc_key(t, c.proc), c.ptr));
    let lm = map(want, got, |t| &t.logical, |_, l| l.name.clone());
    let mut out = OpTable { sources: want.sources.clone(), ..OpTable::default() };
    out.processes = (0..got.processes.len()).map(|j| want.processes[pm.iter().position(|&i| i == Some(j)).unwrap()].clone()).collect();
    out.devices = (0..got.devices.len())
        .map(|j| {
            let d = &want.devices[dm.iter().position(|&i| i == Some(j)).unwrap()];
            Device { proc: ProcIdx(pm[d.proc.ix()].unwrap() as u32), ..d.clone() }
        })
        .collect();
    out.comms = (0..got.comms.len())
        .map(|j| {
            let c = &want.comms[cm.iter().position(|&i| i == Some(j)).unwrap()];
            CommMember {
                proc: ProcIdx(pm[c.proc.ix()].unwrap() as u32),
                device: c.device.map(|d| DevIdx(dm[d.ix()].unwrap() as u32)),
                logical: c.logical.map(|l| LogicalCommIdx(lm[l.ix()].unwrap() as u32)),
                ..c.clone()
            }
        })
        .collect();
    out.logical = (0..got.logical.len())
        .map(|j| {
            let l = &want.logical[lm.iter().position(|&i| i == Some(j)).unwrap()];
            LogicalComm { members: l.members.iter().map(|m| CommIdx(cm[m.ix()].unwrap() as u32)).collect(), ..l.clone() }
        })
        .collect();
    out.per_rank = vec![commlens_core::RankOps::new(); got.devices.len()];
    for (d, ops) in want.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        if ops.is_empty() {
            continue;
        }
        out.per_rank[dm[d].expect("a device with operations comes back")] = ops
            .iter()
            .map(|o| CollOp {
                proc: ProcIdx(pm[o.proc.ix()].unwrap() as u32),
                dev: DevIdx(dm[o.dev.ix()].unwrap() as u32),
                comm: CommIdx(cm[o.comm.ix()].unwrap() as u32),
                ..o.clone()
            })
            .collect();
    }
    out
}

/// Asserts that `got` is `want` field by field (OpTable has no PartialEq).
fn assert_tables_equal(got: &OpTable, want: &OpTable) {
    assert_eq!(got.sources, want.sources, "sources");
    assert_eq!(got.processes, want.processes, "processes");
    assert_eq!(got.devices, want.devices, "devices");
    assert_eq!(got.comms.len(), want.comms.len(), "handle count");
    for (i, (g, w)) in got.comms.iter().zip(&want.comms).enumerate() {
        assert_eq!(g, w, "handle {i}");
    }
    assert_eq!(got.logical, want.logical, "logical communicators");
    assert_eq!(got.per_rank.len(), want.per_rank.len(), "ranks");
    for (d, (g, w)) in got.per_rank.iter().zip(&want.per_rank).enumerate() {
        assert_eq!(g.len(), w.len(), "rank {d} op count");
        for (i, (g, w)) in g.iter().zip(w).enumerate() {
            assert_eq!(g, w, "rank {d} op {i}");
        }
    }
    assert!(got.topologies.is_empty());
}

fn write_read(t: &OpTable, dir: &Path, opts: &WriteOptions) -> (OpTable, ReadSummary, WriteSummary) {
    let path = dir.join("t.parquet");
    let w = write_table(t, &path, opts).unwrap();
    let (r, s) = read_table(&path).unwrap();
    assert_eq!(s.rows, w.rows);
    assert_eq!(s.row_groups, w.row_groups);
    assert_eq!(s.schema_version, SCHEMA_VERSION);
    assert_eq!(s.writer_version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
    (r, s, w)
}

#[test]
fn generated_log_run_comes_back_exactly() {
    let dir = tmpdir("rt-synth");
    let (_, t) = load_generated(&dir.join("logs"));
    assert!(t.n_ops() > 300);
    let busbw: Vec<Option<f64>> = t.ops().map(|o| Some(o.bytes as f64)).collect();
    let opts = WriteOptions {
        row_group_rows: 97,
        source_kind: Some(SourceKind::NcclLog),
        extra: vec![ExtraColumn { name: "busbw_gb_s".into(), values: ExtraValues::F64(busbw) }],
        ..WriteOptions::default()
    };
    let (r, s, w) = write_read(&t, &dir, &opts);
    assert!(w.row_groups > 3);
    assert_eq!(s.source_kind, Some(SourceKind::NcclLog));
    assert_eq!(s.ignored_columns, ["source_kind", "gpu_dur_ns", "busbw_gb_s"]);
    assert_eq!(s.saturated_values, 0);
    assert!(t.logical.iter().all(|l| l.members.len() as u32 == l.nranks), "every member logged");
    assert_tables_equal(&r, &renumbered(&restorable(&t), &r));
    // Handles built by the log reader count their operations the same way.
    for g in &r.comms {
        let host_pid = |t: &OpTable, c: &CommMember| (t.processes[c.proc.ix()].host.clone(), t.processes[c.proc.ix()].pid);
        let w = t.comms.iter().find(|w| w.ptr == g.ptr && host_pid(&t, w) == host_pid(&r, g)).unwrap();
        assert_eq!((g.n_ops, g.op_seq_hash), (w.n_ops, w.op_seq_hash));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kineto_table_with_spans_and_kernels_comes_back_exactly() {
    let dir = tmpdir("rt-kineto");
    let g = commlens_synth::generate_traces(&commlens_synth::RunConfig::default(), &Default::default()).unwrap();
    let files = g.write_kineto(&dir.join("kineto"), false).unwrap();
    let loaded = commlens_ingest::load_any(&files, &Default::default()).unwrap();
    let t = loaded.table;
    let spans = t.ops().filter(|o| o.gpu.is_some() && o.kernel.is_some()).count();
    assert!(spans * 2 > t.n_ops(), "a trace table has spans and kernels: {spans} of {}", t.n_ops());
    let (r, s, _) = write_read(&t, &dir, &WriteOptions { row_group_rows: 1000, ..WriteOptions::default() });
    assert_eq!(s.source_kind, None);
    assert_tables_equal(&r, &renumbered(&restorable(&t), &r));
    let _ = std::fs::remove_dir_all(&dir);
}

fn kernel(name: &str, big: bool) -> Option<std::sync::Arc<KernelInfo>> {
    let m = if big { i32::MAX as u32 - 1 } else { 1 };
    Some(std::sync::Arc::new(KernelInfo {
        name: name.into(),
        grid: [m, 0, 3],
        block: [640, m, 1],
        shared_mem_bytes: m,
        registers: 0,
        correlation_id: if big { i64::MAX as u64 - 1 } else { 0 },
    }))
}

/// Every nullable field both null and set, odd values that must survive.
fn edge_table() -> OpTable {
    let mut t = OpTable { sources: vec!["a.log".into(), "we\"ird\\ \u{1} ü.log".into()], ..OpTable::default() };
    t.processes = vec![
        Process { host: "node-0".into(), pid: u32::MAX, nccl_version: Some(NcclVersion::new(2, 27, 7)) },
        Process { host: "ünïcode host".into(), pid: 0, nccl_version: None },
    ];
    let dev = |proc, cuda_dev, global_rank, local_rank| Device {
        proc: ProcIdx(proc),
        cuda_dev,
        nvml_dev: None,
        bus_id: None,
        global_rank,
        local_rank,
    };
    t.devices = vec![
        dev(0, Some(0), Some(0), Some(0)),
        dev(0, Some(1), Some(i32::MAX as u32 - 1), Some(1)),
        dev(1, None, None, None),
    ];
    let member = |proc, ptr, dev, comm_id, nranks, rank, logical: Option<u32>| CommMember {
        comm_id,
        nranks,
        rank,
        device: Some(DevIdx(dev)),
        logical: logical.map(LogicalCommIdx),
        ..CommMember::new(ProcIdx(proc), ptr)
    };
    t.comms = vec![
        member(0, u64::MAX, 0, Some(u64::MAX), Some(3), Some(0), Some(0)),
        member(0, 0x7f00_0000_0010, 1, Some(u64::MAX), Some(3), Some(1), Some(0)),
        member(0, 0x2, 1, None, Some(2), None, Some(1)),
        member(1, 0, 2, None, None, None, Some(0)), // nranks from the logical comm
        member(1, 0x1, 2, None, None, None, None),  // no logical communicator
    ];
    t.logical = vec![
        LogicalComm {
            name: "world0".into(),
            comm_id: Some(u64::MAX),
            nranks: 3,
            members: vec![CommIdx(0), CommIdx(1), CommIdx(3)],
            grouping: Grouping::CommId,
        },
        LogicalComm {
            name: "comm1[…]".into(),
            comm_id: None,
            nranks: 2,
            members: vec![CommIdx(2)],
            grouping: Grouping::Single,
        },
    ];
    let op = |d: u32, c: u32, kind, count, dtype| {
        let proc = t.devices[d as usize].proc;
        CollOp::new(proc, DevIdx(d), CommIdx(c), kind, count, dtype)
    };
    let full = CollOp {
        comm_seq: i64::MAX as u64 - 1,
        tid: u32::MAX,
        seq: 1 << 40,
        bytes: i64::MAX as u64 - 1, // not count × size: stored, not recomputed
        redop: Some(RedOp::User(7)),
        root: Some(0),
        peer: Some(i32::MAX as u32 - 1),
        algo: Some(Algorithm::NvlsTree),
        proto: Some(Protocol::Ll128),
        channels: Some((0, u16::MAX)),
        sendbuff: u64::MAX,
        recvbuff: 1,
        stream: Some(0),
        cpu_ts_ns: Some(i64::MIN),
        gpu: Some(GpuSpan { start_ns: -5, end_ns: i64::MAX }),
        kernel: kernel("ncclDevKernel_AllReduce_Sum_f32_NVLS_TREE_LL128", true),
        line: 1,
        recovered: true,
        ..op(0, 0, OpKind::AllReduce, u64::MAX >> 2, DataType::Float8E4M3)
    };
    let bare = CollOp { line: 2, ..op(0, 0, OpKind::SendRecv, 0, DataType::Unknown(-5)) };
    let mut ops0 = vec![full, bare];
    for (i, (algo, proto)) in [Algorithm::Tree, Algorithm::Ring, Algorithm::CollNetDirect, Algorithm::CollNetChain, Algorithm::Nvls, Algorithm::Pat]
        .into_iter()
        .zip([Protocol::Ll, Protocol::Simple].into_iter().cycle())
        .enumerate()
    {
        let redop = [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg, RedOp::Unknown(-1)][i];
        ops0.push(CollOp {
            comm_seq: i as u64 + 1,
            algo: Some(algo),
            proto: Some(proto),
            redop: Some(redop),
            gpu: Some(GpuSpan { start_ns: 100, end_ns: 50 }), // end before start: kept as is
            kernel: kernel("k", false),
            line: 3 + i as u64,
            ..op(0, 0, OpKind::ALL[i], i as u64, [DataType::Int8, DataType::Uint8, DataType::Int32, DataType::Uint32, DataType::Int64, DataType::Uint64][i])
        });
    }
    let ops1 = vec![
        CollOp { line: 7, ..op(1, 1, OpKind::Gather, 5, DataType::Float16) },
        CollOp { line: 8, root: Some(2), ..op(1, 2, OpKind::Scatter, 5, DataType::Float32) },
        CollOp { line: 9, ..op(1, 1, OpKind::Broadcast, 5, DataType::Float64) },
    ];
    let ops2 = vec![
        CollOp { line: 1, peer: Some(0), ..op(2, 3, OpKind::Send, 7, DataType::Bfloat16) },
        CollOp { line: 2, ..op(2, 4, OpKind::Recv, 7, DataType::Float8E5M2) },
        CollOp { line: 3, redop: Some(RedOp::Unknown(i32::MIN)), ..op(2, 3, OpKind::AllToAll, 1, DataType::Unknown(i32::MAX)) },
    ];
    t.per_rank = vec![ops0.into(), ops1.into(), ops2.into()];
    t
}

#[test]
fn edge_cases_come_back_exactly() {
    let dir = tmpdir("rt-edge");
    let t = edge_table();
    for rows in [1, 2, 1000] {
        let opts = WriteOptions {
            row_group_rows: rows,
            compression: if rows == 2 { Compression::Uncompressed } else { Compression::Snappy },
            source_kind: Some(SourceKind::Simulated),
            ..WriteOptions::default()
        };
        let (r, s, w) = write_read(&t, &dir, &opts);
        assert_eq!(w.clamped_values, 0);
        assert_eq!(s.saturated_values, 0, "values one below the maximum are not suspicious");
        assert_eq!(s.source_kind, Some(SourceKind::Simulated));
        // Everything first appears in index order here: not even renumbered.
        assert_tables_equal(&r, &restorable(&t));
        // The handle without nranks got its logical communicator's.
        assert_eq!(r.comms[3].nranks, Some(3));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clamped_values_come_back_as_the_maximum_and_are_counted() {
    let dir = tmpdir("rt-clamp");
    let mut t = edge_table();
    t.per_rank[0].update(0, |o| o.count = u64::MAX);
    t.per_rank[0].update(0, |o| o.line = i64::MAX as u64); // exactly the maximum: counted too
    t.per_rank[1].update(0, |o| o.root = Some(u32::MAX));
    let (r, s, w) = write_read(&t, &dir, &WriteOptions::default());
    assert_eq!(w.clamped_values, 2);
    assert_eq!(s.saturated_values, 3);
    assert_eq!(r.per_rank[0].op(0).count, i64::MAX as u64);
    assert_eq!(r.per_rank[0].op(0).line, i64::MAX as u64);
    assert_eq!(r.per_rank[1].op(0).root, Some(i32::MAX as u32));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_is_not_stored_does_not_come_back() {
    let dir = tmpdir("rt-lost");
    let mut t = edge_table();
    // A process, device, handle and logical communicator without operations,
    // placed first so that everything after them shifts.
    t.processes.insert(0, Process { host: "idle".into(), pid: 9, nccl_version: None });
    for d in &mut t.devices {
        d.proc.0 += 1;
    }
    for ops in t.per_rank.iter_mut() {
        ops.update_all(|_, op| op.proc.0 += 1);
    }
    for c in &mut t.comms {
        c.proc.0 += 1;
    }
    t.devices.push(Device { proc: ProcIdx(0), cuda_dev: Some(0), nvml_dev: Some(3), bus_id: Some(0x17000), global_rank: Some(9), local_rank: None });
    t.per_rank.push(commlens_core::RankOps::new());
    // Logical communicator 1 has no operations: the one after it moves up.
    t.comms.push(CommMember { device: Some(DevIdx(3)), logical: Some(LogicalCommIdx(1)), ..CommMember::new(ProcIdx(0), 0xdead) });
    t.logical.insert(1, LogicalComm { name: "gone".into(), comm_id: None, nranks: 1, members: vec![CommIdx(5)], grouping: Grouping::Single });
    t.comms[2].logical = Some(LogicalCommIdx(2));
    t.devices[0].bus_id = Some(0x1b000);
    let (r, _, _) = write_read(&t, &dir, &WriteOptions::default());
    assert_eq!(r.processes.len(), 2);
    assert_eq!(r.processes[0].host, "node-0");
    assert_eq!(r.devices.len(), 3);
    assert_eq!(r.devices[0].bus_id, None);
    assert_eq!(r.comms.len(), 5);
    assert_eq!(r.logical.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["world0", "comm1[…]"]);
    assert_eq!(r.comms[2].logical, Some(LogicalCommIdx(1)));
    assert_eq!(r.logical[1].members, [CommIdx(2)]);
    assert_eq!(r.n_ops(), t.n_ops());
    // All the rest is as written.
    assert_tables_equal(&r, &renumbered(&restorable(&t), &r));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn empty_table_reads_as_empty() {
    let dir = tmpdir("rt-empty");
    let t = OpTable { sources: vec!["x.log".into()], ..OpTable::default() };
    let (r, s, _) = write_read(&t, &dir, &WriteOptions::default());
    assert_eq!((s.rows, r.n_ops(), r.devices.len()), (0, 0, 0));
    assert_eq!(r.sources, ["x.log"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes a Parquet file with the given schema, footer and one row group
/// of `rows` rows in which every column is a run of zeros (or "0x0").
fn foreign_file(path: &Path, schema: &str, kv: &[(&str, &str)], rows: usize) {
    use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let schema = std::sync::Arc::new(parquet::schema::parser::parse_message_type(schema).unwrap());
    let kv = kv.iter().map(|(k, v)| KeyValue::new(k.to_string(), v.to_string())).collect();
    let props = std::sync::Arc::new(WriterProperties::builder().set_key_value_metadata(Some(kv)).build());
    let mut w = SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
    let mut rg = w.next_row_group().unwrap();
    while let Some(mut c) = rg.next_column().unwrap() {
        use parquet::column::writer::ColumnWriter::*;
        let physical = match c.untyped() {
            Int32ColumnWriter(_) => 32,
            Int64ColumnWriter(_) => 64,
            BoolColumnWriter(_) => 1,
            _ => 0,
        };
        let ones = vec![1i16; rows];
        macro_rules! put {
            ($ty:ty, $v:expr) => {{
                let w = c.typed::<$ty>();
                let defs = (w.get_descriptor().max_def_level() > 0).then_some(&ones[..]);
                w.write_batch(&vec![$v; rows], defs, None).unwrap();
            }};
        }
        match physical {
            32 => put!(Int32Type, 0),
            64 => put!(Int64Type, 0),
            1 => put!(BoolType, false),
            _ => put!(ByteArrayType, ByteArray::from("0x0")),
        }
        c.close().unwrap();
    }
    rg.close().unwrap();
    w.close().unwrap();
}

fn err_of(path: &Path) -> (ReadError, String) {
    let e = read_table(path).expect_err("must not read");
    let msg = e.to_string();
    assert!(msg.contains(&path.display().to_string()), "the error names the file: {msg}");
    (e, msg)
}

#[test]
fn foreign_truncated_and_mistyped_files_are_errors_naming_the_file() {
    let dir = tmpdir("rt-errors");
    let p = |n: &str| -> PathBuf { dir.join(n) };

    foreign_file(&p("other.parquet"), "message m { required int64 a; optional binary b (UTF8); }", &[], 3);
    let (e, msg) = err_of(&p("other.parquet"));
    assert!(matches!(e, ReadError::NotCommlens { .. }), "{msg}");
    assert!(msg.contains("commlens.schema_version"), "{msg}");

    foreign_file(&p("future.parquet"), "message m { required int64 pid; }", &[("commlens.schema_version", "2")], 1);
    let (e, msg) = err_of(&p("future.parquet"));
    assert!(matches!(e, ReadError::NotCommlens { .. }) && msg.contains("version `2`"), "{msg}");

    foreign_file(&p("missing.parquet"), "message m { required binary host (UTF8); required int64 pid; }", &[("commlens.schema_version", "1")], 1);
    let (e, msg) = err_of(&p("missing.parquet"));
    assert!(matches!(e, ReadError::Schema { .. }) && msg.contains("`tid`") && msg.contains("missing"), "{msg}");

    // A real file with the pid column retyped.
    let t = edge_table();
    write_table(&t, &p("good.parquet"), &WriteOptions::default()).unwrap();
    let mut cols: Vec<String> = Vec::new();
    for c in builtin_column_names() {
        let ty = if c == "pid" { "optional int32 pid".to_string() } else { format!("optional binary {c} (UTF8)") };
        cols.push(ty);
    }
    let schema = format!("message m {{ {}; }}", cols.join("; "));
    foreign_file(&p("retyped.parquet"), &schema, &[("commlens.schema_version", "1")], 1);
    let (e, msg) = err_of(&p("retyped.parquet"));
    assert!(matches!(e, ReadError::Schema { .. }) && msg.contains("`pid` is INT32, expected INT64"), "{msg}");

    // The right columns, but values the writer cannot have written.
    let good = parquet::file::reader::SerializedFileReader::new(std::fs::File::open(p("good.parquet")).unwrap()).unwrap();
    let mut schema = Vec::new();
    parquet::schema::printer::print_schema(&mut schema, parquet::file::reader::FileReader::metadata(&good).file_metadata().schema());
    foreign_file(&p("values.parquet"), std::str::from_utf8(&schema).unwrap(), &[("commlens.schema_version", "1")], 4);
    let (e, msg) = err_of(&p("values.parquet"));
    assert!(matches!(e, ReadError::Value { row: 0, column: "nccl_version", .. }) && msg.contains("`0x0` is not a version"), "{msg}");

    // Truncated: the footer is gone, and so is the middle.
    let bytes = std::fs::read(p("good.parquet")).unwrap();
    for keep in [bytes.len() - 10, bytes.len() / 2, 3] {
        std::fs::write(p("cut.parquet"), &bytes[..keep]).unwrap();
        let (e, msg) = err_of(&p("cut.parquet"));
        assert!(matches!(e, ReadError::Parquet { .. }), "{keep}: {msg}");
    }
    std::fs::write(p("text.parquet"), "NCCL INFO hello\n".repeat(10)).unwrap();
    assert!(matches!(err_of(&p("text.parquet")).0, ReadError::Parquet { .. }));
    assert!(matches!(err_of(&p("absent.parquet")).0, ReadError::Io { .. }));
    let _ = std::fs::remove_dir_all(&dir);
}
