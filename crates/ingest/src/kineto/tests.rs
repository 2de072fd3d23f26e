//! Unit tests of the Kineto reader on small hand-written traces: both link
//! kinds, field-order and type variants, gzip, truncation, loud failures,
//! and the conversion into an assembled `OpTable`.

use super::*;
use commlens_core::{Algorithm, DataType, OpKind, Protocol, RedOp};
use std::io::Write;

fn read(s: &str) -> Result<KernelTrace, TraceError> {
    read_kineto(s.as_bytes(), "test.json", &TraceOptions::default())
}

/// A newer-Kineto trace: metadata on `record_param_comms` and on the kernel,
/// kernel `External id` = the CPU op's.
fn new_style(rank: u32) -> String {
    format!(
        r#"{{"schemaVersion": 1, "deviceProperties": [{{"id": 0, "name": "NVIDIA B200"}}],
  "distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": 2, "nccl_version": "2.27.5",
     "pg_config": [{{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}}]}},
  "baseTimeNanoseconds": 1000000000000,
  "traceEvents": [
  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 77, "tid": 77, "ts": 90.0, "dur": 100.0, "args": {{}}}},
  {{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 77, "tid": 78, "ts": 100.5, "dur": 20.25,
    "args": {{"External id": 11, "Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
             "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Rank": {rank}, "Seq": 5}}}},
  {{"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 77, "tid": 78, "ts": 101.0, "dur": 10.0, "args": {{"External id": 12}}}},
  {{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 77, "tid": 78, "ts": 150.0, "dur": 5.0,
    "args": {{"External id": 20, "Collective name": "wait", "dtype": "Byte"}}}},
  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 77, "tid": 78, "ts": 105.0, "dur": 3.0, "args": {{"External id": 11, "correlation": 900}}}},
  {{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 7,
    "ts": 110.0, "dur": 30.5, "args": {{"External id": 11, "device": 0, "stream": 7, "correlation": 900, "registers per thread": 96,
    "shared memory": 103808, "grid": [11, 1, 1], "block": [512, 1, 1], "Collective name": "allreduce", "Process Group Name": "0"}}}},
  {{"ph": "X", "cat": "kernel", "name": "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 8, 16>", "pid": 0, "tid": 7, "ts": 200.0, "dur": 1.0, "args": {{}}}},
  {{"ph": "X", "cat": "kernel", "name": "ampere_sgemm", "pid": 0, "tid": 8, "ts": 210.0, "dur": 1.0, "args": {{"correlation": 901}}}},
  {{"ph": "X", "cat": "gpu_user_annotation", "name": "nccl:all_reduce", "pid": 0, "tid": 7, "ts": 110.0, "dur": 30.5, "args": {{"External id": 12}}}},
  {{"ph": "f", "id": 900, "pid": 0, "tid": 7, "ts": 110.0, "cat": "ac2g", "name": "ac2g", "bp": "e"}},
  {{"name": "process_name", "ph": "M", "ts": 0, "pid": 77, "tid": 0, "args": {{"name": "python3"}}}}
  ]}}"#
    )
}

#[test]
fn newer_kineto_links_by_external_id() {
    let t = read(&new_style(1)).unwrap();
    assert_eq!((t.world_size, t.base_time_ns), (Some(2), 1_000_000_000_000));
    assert_eq!(t.nccl_version.unwrap().to_string(), "2.27.5");
    assert_eq!(t.process_groups.len(), 1);
    assert_eq!(t.process_groups[0].ranks, vec![0, 1]);
    let r = &t.ranks[0];
    assert_eq!((r.rank, r.pid, r.device), (Some(1), 77, Some(0)));
    assert_eq!(r.gpu_name.as_deref(), Some("NVIDIA B200"));
    assert_eq!(r.kernels.len(), 1);
    let k = &r.kernels[0];
    assert_eq!((k.start_ns, k.end_ns, k.stream, k.correlation), (110_000, 140_500, 7, Some(900)));
    assert_eq!((k.grid, k.block, k.registers, k.shared_mem_bytes), ([11, 1, 1], [512, 1, 1], 96, 103808));
    assert_eq!(k.parsed.kind, Some(OpKind::AllReduce));
    assert_eq!(k.launch, Some(Launch { tid: 78, ts_ns: 105_000 }));
    assert_eq!(k.meta.as_ref().unwrap().pg_name.as_deref(), Some("0"));
    // The annotation folds into its record_param_comms; `wait` stays, without a kind.
    assert_eq!(r.cpu_ops.len(), 2);
    let op = &r.cpu_ops[0];
    assert_eq!((op.ts_ns, op.dur_ns, op.tid), (100_500, 20_250, 78));
    assert_eq!(op.annotation.as_deref(), Some("nccl:all_reduce"));
    assert_eq!((op.external_id, op.annotation_external_id), (Some(11), Some(12)));
    assert_eq!(op.kind, Some(OpKind::AllReduce));
    assert_eq!((op.meta.in_nelems, op.meta.dtype, op.meta.seq), (Some(1024), Some(DataType::Bfloat16), Some(5)));
    assert_eq!(op.meta.pg_ranks, Some(vec![0, 1]));
    assert_eq!(r.cpu_ops[1].kind, None);
    assert_eq!(r.links, vec![Link { cpu: 0, kernel: 0, via: LinkVia::ExternalId }]);
    assert_eq!(r.correlation_pairs(), vec![(0, 0)]);
    assert_eq!(t.ranges.len(), 1);
    assert_eq!((t.name(t.ranges[0].name), t.ranges[0].kind), ("ProfilerStep#7", RangeKind::ProfilerStep));
    assert_eq!((t.stats.gpu_kernels, t.stats.nccl_kernels, t.stats.launches), (3, 1, 1));
    assert_eq!(t.stats.other_comm_kernels.len(), 1);
    assert!(t.warnings.iter().any(|w| w.contains("not NCCL's")), "{:?}", t.warnings);
}

/// Older Kineto: kernels and launches repeat the correlation id as
/// `External id`; metadata only in the `nccl:*` op's `Input Dims`/`Input type`.
const OLD_STYLE: &str = r#"[
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 5, "tid": 6, "ts": 1661203462602585, "dur": 141,
   "args": {"External id": 292, "Input Dims": [[], []], "Input type": ["TensorList", "Scalar"]}},
  {"ph": "X", "cat": "user_annotation", "name": "nccl:all_to_all", "pid": 5, "tid": 6, "ts": 1661203462602605, "dur": 116,
   "args": {"External id": 293, "Input Dims": [[8, 1024, 8816]], "Input type": ["float"]}},
  {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 5, "tid": 9, "ts": 1661203462603000, "dur": 50,
   "args": {"External id": 300, "Input Dims": [[100]], "Input type": ["float"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 6, "ts": 1661203462602700, "dur": 5, "args": {"External id": 1873266, "cbid": 211, "correlation": 1873266}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 9, "ts": 1661203462603010, "dur": 5, "args": {"External id": 1873300, "correlation": 1873300}},
  {"ph": "X", "cat": "kernel", "name": "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "pid": 3, "tid": 21, "ts": 1661203463042907, "dur": 5847,
   "args": {"External id": 1873266, "device": 3, "stream": 21, "correlation": 1873266, "grid": [24, 1, 1], "block": [640, 1, 1]}},
  {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "pid": 3, "tid": 21, "ts": 1661203463050000, "dur": 100,
   "args": {"External id": 1873300, "device": 3, "stream": 21, "correlation": 1873300}},
  {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "pid": 3, "tid": 21, "ts": 1661203463060000, "dur": 100,
   "args": {"External id": 292, "device": 3, "stream": 21, "correlation": 292}}
]"#;

#[test]
fn older_kineto_links_by_launch_nesting() {
    let t = read(OLD_STYLE).unwrap();
    let r = &t.ranks[0];
    assert_eq!((r.pid, r.device, r.rank), (5, Some(3), None));
    assert_eq!(r.kernels.len(), 3);
    assert_eq!(r.cpu_ops.len(), 2);
    let a2a = &r.cpu_ops[0];
    assert_eq!((a2a.kind, a2a.annotation.as_deref()), (Some(OpKind::AllToAll), Some("nccl:all_to_all")));
    assert_eq!((a2a.meta.in_nelems, a2a.meta.dtype), (Some(8 * 1024 * 8816), Some(DataType::Float32)));
    let ar = &r.cpu_ops[1];
    assert_eq!((ar.name.as_str(), ar.kind, ar.meta.in_nelems), ("nccl:all_reduce", Some(OpKind::AllReduce), Some(100)));
    // External id == correlation is never read as a CPU op id (292 would
    // otherwise match the record_param_comms op): the third kernel stays unlinked.
    assert_eq!(
        r.links,
        vec![
            Link { cpu: 0, kernel: 0, via: LinkVia::LaunchNesting },
            Link { cpu: 1, kernel: 1, via: LinkVia::LaunchNesting }
        ]
    );
    assert_eq!(r.kernels[2].cpu_op, None);
    assert_eq!(r.cpu_ops[0].kernels, vec![0]);
    assert!(t.warnings.iter().any(|w| w.contains("distributedInfo.rank")));
}

#[test]
fn field_order_and_type_variants() {
    // args before name and cat, name before cat, string ids and string times.
    let s = r#"{"traceEvents": [
      {"args": {"correlation": 5, "stream": 3, "device": 1}, "name": "ncclDevKernel_SendRecv", "ts": "10.5", "dur": 2, "tid": "stream 3", "pid": 1, "cat": "kernel", "ph": "X"},
      {"name": "record_param_comms", "pid": 9, "tid": "main", "ts": 9, "dur": 1, "cat": "cpu_op", "args": {"External id": 1, "Collective name": "send", "In msg nelems": "64", "dtype": "Float"}},
      {"name": "cuLaunchKernelEx", "cat": "cuda_driver", "pid": 9, "tid": "main", "ts": 9.5, "dur": 0.1, "args": {"correlation": 5}},
      {"ph": "i", "name": "ncclDevKernel_SendRecv", "cat": "kernel", "ts": 20, "pid": 1, "tid": 3}
    ], "traceName": "x"}"#;
    let t = read(s).unwrap();
    let r = &t.ranks[0];
    assert_eq!(r.kernels.len(), 1, "instant events are not kernels");
    assert_eq!((r.kernels[0].start_ns, r.kernels[0].stream, r.kernels[0].device), (10_500, 3, Some(1)));
    assert_eq!(r.cpu_ops[0].meta.in_nelems, Some(64));
    assert_eq!(r.links, vec![Link { cpu: 0, kernel: 0, via: LinkVia::LaunchNesting }]);
}

#[test]
fn gzip_and_truncation() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(OLD_STYLE.as_bytes()).unwrap();
    let bytes = gz.finish().unwrap();
    let t = read_kineto(&bytes[..], "x.json.gz", &TraceOptions::default()).unwrap();
    assert_eq!(t.n_kernels(), 3);
    assert!(t.warnings.iter().all(|w| !w.contains("ends early")));
    // Cut inside the last kernel event: the first two kernels survive, with a warning.
    let cut = OLD_STYLE.rfind("ncclKernel_AllReduce").unwrap();
    let t = read(&OLD_STYLE[..cut]).unwrap();
    assert_eq!(t.n_kernels(), 2);
    assert!(t.warnings.iter().any(|w| w.contains("ends early")), "{:?}", t.warnings);
    // A truncated gzip stream behaves the same.
    let t = read_kineto(&bytes[..bytes.len() * 9 / 10], "x.json.gz", &TraceOptions::default()).unwrap();
    assert!(t.n_kernels() >= 1 && t.warnings.iter().any(|w| w.contains("ends early")), "{:?}", t.warnings);
}

#[test]
fn loud_failures() {
    let no_nccl = r#"{"traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "ampere_sgemm", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {}},
      {"ph": "X", "cat": "kernel", "name": "void multimem_all_reduce_kernel<float>", "pid": 0, "tid": 7, "ts": 3, "dur": 1, "args": {}}]}"#;
    let e = read(no_nccl).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, TraceError::NoNcclKernels { .. }), "{msg}");
    assert!(msg.contains("test.json") && msg.contains("2 GPU kernels") && msg.contains("1 non-NCCL"), "{msg}");
    let opts = TraceOptions { allow_no_kernels: true, ..Default::default() };
    let t = read_kineto(no_nccl.as_bytes(), "t", &opts).unwrap();
    assert!(t.warnings.iter().any(|w| w.contains("no NCCL kernels")));
    assert!(matches!(read(r#"{"schemaVersion": 1}"#), Err(TraceError::NotATrace { .. })));
    assert!(matches!(read("{\"traceEvents\": [}"), Err(TraceError::Json { .. })));
    assert!(matches!(read("hello"), Err(TraceError::Json { .. })));
    assert!(matches!(read(""), Err(TraceError::Json { .. })));
}

#[test]
fn op_table_from_two_ranks() {
    let traces: Vec<KernelTrace> = (0..2).map(|r| read(&new_style(r)).unwrap()).collect();
    let (t, notes) = to_op_table(&traces);
    assert_eq!((notes.ops, notes.cpu_calls_skipped, notes.kernels_without_kind), (2, 2, 0));
    assert_eq!(t.devices.len(), 2);
    let ranks: Vec<_> = t.devices.iter().map(|d| d.global_rank).collect();
    assert_eq!(ranks, vec![Some(0), Some(1)]);
    for (d, ops) in t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        assert_eq!(ops.len(), 1);
        let op = &ops[0];
        assert_eq!(op.dev.ix(), d);
        assert_eq!(t.comms[op.comm.ix()].device, Some(op.dev));
        assert_eq!((op.kind, op.count, op.dtype, op.bytes), (OpKind::AllReduce, 1024, DataType::Bfloat16, 2048));
        assert_eq!((op.algo, op.proto, op.redop), (Some(Algorithm::Ring), Some(Protocol::Ll), Some(RedOp::Sum)));
        assert_eq!((op.seq, op.comm_seq, op.line), (5, 0, 1));
        assert_eq!(op.gpu.unwrap().start_ns, 1_000_000_000_000 + 110_000);
        assert_eq!(op.cpu_ts_ns, Some(1_000_000_000_000 + 100_500));
        assert_eq!(op.kernel.as_ref().unwrap().correlation_id, 900);
        assert_eq!(t.comms[op.comm.ix()].rank, Some(d as u32));
    }
    // The process group is one logical communicator of both ranks.
    let pg = t.logical.iter().find(|l| l.members.len() == 2 && t.comms[l.members[0].ix()].n_ops > 0).unwrap();
    assert_eq!(pg.nranks, 2);
}

#[test]
fn op_table_kernel_only_rows() {
    let t = read(OLD_STYLE).unwrap();
    let (table, notes) = to_op_table(std::slice::from_ref(&t));
    // Two CPU calls with their kernels; the third kernel has neither a CPU
    // call nor a launch record (launched before the capture): no operation.
    assert_eq!((notes.ops, notes.kernels_unlaunched), (2, 1));
    assert!(notes.warnings.iter().any(|w| w.contains("1 NCCL kernels have no launch record")), "{:?}", notes.warnings);
    let ops = &table.per_rank[0].to_vec();
    assert_eq!(ops.iter().map(|o| o.kind).collect::<Vec<_>>(), vec![OpKind::AllToAll, OpKind::AllReduce]);
    assert_eq!((ops[0].count, ops[0].bytes), (8 * 1024 * 8816, 8 * 1024 * 8816 * 4));

    // With its launch recorded (outside any collective call) it is an
    // operation whose size the trace does not give: unknown, never 0 B.
    let launched = OLD_STYLE.replacen(
        "\n  {\"ph\": \"X\", \"cat\": \"kernel\"",
        "\n  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 5, \"tid\": 11, \
         \"ts\": 1661203462900000, \"dur\": 5, \"args\": {\"correlation\": 292}},\n  {\"ph\": \"X\", \"cat\": \"kernel\"",
        1,
    );
    let t = read(&launched).unwrap();
    let (table, notes) = to_op_table(std::slice::from_ref(&t));
    assert_eq!((notes.ops, notes.kernels_unlaunched, notes.ops_size_unknown), (3, 0, 1));
    let ops = &table.per_rank[0].to_vec();
    assert_eq!(ops[2].kind, OpKind::AllReduce);
    assert_eq!(ops[2].size(), None);
    assert!(matches!(ops[2].dtype, DataType::Unknown(_)));
    // No process-group metadata, one stream, a world of 8 (distributedInfo
    // or not): all three share one handle.
    assert!(ops.iter().all(|o| o.comm == ops[0].comm));
    assert_eq!(ops.iter().map(|o| o.comm_seq).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(ops.iter().map(|o| o.line).collect::<Vec<_>>(), vec![1, 2, 3]);
}

/// Non-NCCL GPU activity: kernels, copies and fills kept as 24-byte records
/// with interned names, classes and launch lags (launch calls and other
/// runtime calls); GPU annotations and other devices left out; a name
/// written before its category still counts.
#[test]
fn compute_activity_is_kept_compactly() {
    let extra = r#"
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 77, "tid": 78, "ts": 205.0, "dur": 2.0, "args": {"correlation": 901}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 77, "tid": 78, "ts": 215.0, "dur": 2.0, "args": {"correlation": 902}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 9, "ts": 220.0, "dur": 4.0, "args": {"device": 0, "stream": 9, "correlation": 902}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 9, "ts": 230.0, "dur": 1.5, "args": {"device": 0, "stream": 9}},
  {"name": "ampere_sgemm", "ph": "X", "pid": 0, "tid": 8, "ts": 240.0, "dur": 2.0, "cat": "kernel", "args": {"stream": 8, "correlation": 903}},
  {"ph": "X", "cat": "kernel", "name": "ampere_sgemm", "pid": 1, "tid": 8, "ts": 250.0, "dur": 2.0, "args": {"device": 1, "stream": 8}},
  {"ph": "X", "cat": "cpu_op", "name": "ampere_sgemm", "pid": 77, "tid": 78, "ts": 260.0, "dur": 2.0, "args": {"stream": 0}},"#;
    let doc = new_style(0).replacen("\"traceEvents\": [", &format!("\"traceEvents\": [{extra}"), 1);
    let t = read(&doc).unwrap();
    let r = &t.ranks[0];
    let got: Vec<(i64, u32, Option<i64>, u32, &str, KernelClass)> = r
        .compute
        .iter()
        .map(|k| {
            let n = &r.compute_names[k.name as usize];
            (k.start_ns, k.dur_ns, k.launch_ns(), k.stream, n.name.as_str(), n.class)
        })
        .collect();
    use KernelClass::*;
    let multimem = "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 8, 16>";
    assert_eq!(got, vec![
        (200_000, 1_000, None, 7, multimem, OtherComm),
        (210_000, 1_000, Some(205_000), 8, "ampere_sgemm", Computation),
        (220_000, 4_000, Some(215_000), 9, "Memcpy DtoD (Device -> Device)", Memory),
        (230_000, 1_500, None, 9, "Memset (Device)", Memory),
        (240_000, 2_000, None, 8, "ampere_sgemm", Computation),
    ]);
    assert_eq!(r.compute_names.len(), 4);
    assert_eq!(std::mem::size_of::<ComputeKernel>(), 24);
    assert!(t.warnings.iter().any(|w| w.starts_with("1 GPU activities ran on another device")), "{:?}", t.warnings);
    // Kernel launches are still counted as before; the copy's call is not one.
    assert_eq!(t.stats.launches, 2);
    assert_eq!(t.stats.other_comm_kernels.len(), 1);
}

#[test]
fn malformed_events_are_skipped_and_counted() {
    let k = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
    let good = format!(
        r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": 10, "dur": 2, "args": {{"stream": 7, "correlation": 1}}}}"#
    );
    let events = [
        good.clone(),
        // Each of these alone used to reject the file or vanish without a trace.
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": 20, "dur": 2, "args": null}}"#),
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": 20, "dur": 2, "args": "x"}}"#),
        r#"{"ph": "X", "cat": "kernel", "name": true, "pid": 0, "tid": 7, "ts": 21, "dur": 2}"#.to_string(),
        r#"{"ph": "X", "cat": "kernel", "name": [1, 2], "pid": 0, "tid": 7, "ts": 21, "dur": 2}"#.to_string(),
        r#"{"ph": "X", "cat": ["kernel"], "name": "a", "pid": 0, "tid": 7, "ts": 21, "dur": 2}"#.to_string(),
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": "1.x", "dur": 2}}"#),
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": -1, "dur": 2}}"#),
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": 30, "dur": "long"}}"#),
        r#"{"ph": "X", "cat": "kernel", "name": "ampere_sgemm", "pid": 0, "tid": 8, "dur": 2}"#.to_string(),
        r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 8, "ts": null, "args": {"correlation": 1}}"#
            .to_string(),
        // Not kept, so a missing time does not matter; metadata has none.
        r#"{"ph": "M", "name": "thread_name", "pid": 0, "tid": 8, "args": {"name": "stream 8"}}"#.to_string(),
        r#"{"ph": "f", "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": 7, "id": 1}"#.to_string(),
        "[]".to_string(),
        good.replace("\"ts\": 10", "\"ts\": 40"),
    ];
    let doc = format!(r#"{{"distributedInfo": {{"rank": 0}}, "traceEvents": [{}]}}"#, events.join(",\n"));
    let t = read(&doc).unwrap();
    let r = &t.ranks[0];
    assert_eq!(r.kernels.iter().map(|k| k.start_ns).collect::<Vec<_>>(), vec![10_000, 40_000]);
    assert!(r.compute.is_empty());
    let s = &t.stats.skipped;
    assert_eq!(s.total, 11, "{s:?}");
    let by: std::collections::HashMap<&str, u64> = s.by_reason.iter().map(|(r, n)| (r.as_str(), *n)).collect();
    assert_eq!(by["with args not an object"], 2);
    assert_eq!(by["with a name that is not a string"], 2);
    assert_eq!(by["with cat not a string"], 1);
    assert_eq!(by["with ts missing, negative or not a time"], 4);
    assert_eq!(by["with dur negative or not a time"], 1);
    assert_eq!(by["that are not objects"], 1);
    assert_eq!(s.first.as_deref(), Some(format!("traceEvents[1] \"{k}\": args not an object").as_str()));
    assert!(t.warnings[0].starts_with("skipped 11 malformed events ("), "{:?}", t.warnings);
    assert_eq!(t.stats.events, 15);
    // A clean trace says nothing.
    let clean = read(&format!(r#"{{"distributedInfo": {{"rank": 0}}, "traceEvents": [{good}]}}"#)).unwrap();
    assert_eq!(clean.stats.skipped, Skipped::default());
    assert!(clean.warnings.iter().all(|w| !w.contains("malformed")));
}

/// PyTorch 2.11's `batch_isend_irecv`: `send` and `recv` calls that launch
/// nothing, then a closing `nccl:coalesced` that launches the one SendRecv
/// kernel (no `External id`); a `wait` with empty ranks; an `all_to_allv`.
const COALESCED: &str = r#"{"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2, "nccl_version": "2.28.9",
     "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]},
  "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 5, "tid": 5, "ts": 100.0, "dur": 10.0,
    "args": {"External id": 21, "Collective name": "send", "In msg nelems": 256, "Out msg nelems": 256, "dtype": "BFloat16",
             "Group size": 2, "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Rank": 1, "Dst Rank": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 5, "tid": 5, "ts": 120.0, "dur": 10.0,
    "args": {"External id": 23, "Collective name": "recv", "In msg nelems": 256, "Out msg nelems": 256, "dtype": "BFloat16",
             "Group size": 2, "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Rank": 1, "Src Rank": 1}},
  {"ph": "X", "cat": "user_annotation", "name": "nccl:coalesced", "pid": 5, "tid": 5, "ts": 140.0, "dur": 20.0, "args": {"External id": 24}},
  {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 5, "tid": 5, "ts": 145.0, "dur": 5.0, "args": {"correlation": 243}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 16,
    "ts": 150.0, "dur": 40.0, "args": {"device": 0, "stream": 16, "correlation": 243}},
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 5, "tid": 5, "ts": 170.0, "dur": 5.0,
    "args": {"External id": 25, "Collective name": "wait", "dtype": "Byte", "Group size": 1, "Process Group Name": "0", "Process Group Ranks": "[]"}},
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 5, "tid": 5, "ts": 200.0, "dur": 10.0,
    "args": {"External id": 27, "Collective name": "all_to_allv", "In msg nelems": 2048, "Out msg nelems": 2048, "dtype": "Float",
             "Group size": 2, "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Rank": 0}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 7,
    "ts": 220.0, "dur": 30.0, "args": {"device": 0, "stream": 7, "correlation": 274, "External id": 27}}
  ]}"#;

#[test]
fn a_coalesced_exchange_is_one_send_and_one_recv_timed_by_its_kernel() {
    let t = read(COALESCED).unwrap();
    let r = &t.ranks[0];
    // The profiler's own link (launch inside the closing call) is kept.
    assert_eq!(r.links[0], Link { cpu: 2, kernel: 0, via: LinkVia::LaunchNesting });
    assert_eq!((r.cpu_ops[0].kernels.as_slice(), r.cpu_ops[1].kernels.as_slice()), (&[0][..], &[0][..]));
    assert!(r.cpu_ops[2].kernels.is_empty());
    let (table, notes) = to_op_table(std::slice::from_ref(&t));
    let ops = &table.per_rank[0].to_vec();
    assert_eq!(ops.iter().map(|o| o.kind).collect::<Vec<_>>(), vec![OpKind::Send, OpKind::Recv, OpKind::AllToAll]);
    assert_eq!(notes.ops_size_unknown, 0);
    for op in &ops[..2] {
        assert_eq!((op.bytes, op.peer, op.stream), (512, Some(1), Some(16)));
        assert_eq!(op.gpu.map(|g| (g.start_ns, g.end_ns)), Some((150_000, 190_000)));
    }
    // all_to_allv records the whole buffer; the count is per peer, as NCCL's.
    assert_eq!((ops[2].count, ops[2].bytes), (1024, 4096));
    // One communicator: the default group is the world, so no second, empty world handle.
    assert_eq!(table.comms.len(), 1);
    assert_eq!((table.comms[0].nranks, table.comms[0].rank, table.comms[0].n_ops), (Some(2), Some(0), 3));
    assert_eq!(table.devices[0].global_rank, Some(0));
}
