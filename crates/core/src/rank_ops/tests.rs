//! Round trips through [`RankOps`]: every field of every operation reads back
//! as pushed, the awkward ones (stored whole) included.

use super::*;
use crate::enums::{Algorithm, DataType, OpKind, Protocol, RedOp};

fn op(i: u64) -> CollOp {
    CollOp {
        comm_seq: i,
        seq: i,
        tid: 77,
        line: 10 + i,
        sendbuff: 0x7f00 + (i % 3) * 0x100,
        recvbuff: 0x7f00 + (i % 3) * 0x100,
        stream: Some(0x55),
        cpu_ts_ns: Some(1_700_000_000_000_000_000 + i as i64),
        redop: Some(RedOp::Sum),
        algo: Some(Algorithm::Ring),
        proto: Some(Protocol::Simple),
        channels: Some((0, 23)),
        ..CollOp::new(ProcIdx(2), DevIdx(3), CommIdx(i as u32 % 2), OpKind::AllReduce, 1024 + i, DataType::Bfloat16)
    }
}

fn awkward() -> Vec<CollOp> {
    let k = Arc::new(KernelInfo { name: "ncclDevKernel_AllReduce".into(), grid: [1, 2, 3], block: [4, 5, 6], shared_mem_bytes: 7, registers: 8, correlation_id: 9 });
    vec![
        CollOp { seq: u32::MAX as u64 + 1, ..op(1) },
        CollOp { comm_seq: u64::MAX, ..op(2) },
        CollOp { line: 1 << 40, ..op(3) },
        CollOp { bytes: 5, ..op(4) },
        CollOp { proc: ProcIdx(9), ..op(5) },
        CollOp { dev: DevIdx(9), ..op(6) },
        CollOp { root: Some(1), peer: Some(2), ..op(7) },
        CollOp { channels: Some((0, 64)), ..op(8) },
        CollOp { cpu_ts_ns: Some(i64::MIN), ..op(9) },
        CollOp { cpu_ts_ns: None, gpu: Some(GpuSpan { start_ns: 5, end_ns: 9 }), kernel: Some(k.clone()), ..op(10) },
        CollOp { kernel: Some(k), tid: 0, stream: None, ..op(11) },
        CollOp { dtype: DataType::Unknown(42), bytes: 0, redop: Some(RedOp::User(6)), ..op(12) },
        CollOp { redop: Some(RedOp::Unknown(-3)), root: Some(u32::MAX), ..op(13) },
        CollOp { kind: OpKind::Send, peer: Some(0), redop: None, algo: None, proto: None, channels: None, recovered: true, ..op(14) },
        CollOp { tid: 0, stream: None, ..CollOp::new(ProcIdx(2), DevIdx(3), CommIdx(0), OpKind::Recv, 0, DataType::Unknown(-1)) },
    ]
}

#[test]
fn every_operation_reads_back_as_pushed() {
    let ops: Vec<CollOp> = (0..50).map(op).chain(awkward()).chain((50..60).map(op)).collect();
    let r = RankOps::from(ops.clone());
    assert_eq!(r.len(), ops.len());
    for (i, o) in ops.iter().enumerate() {
        assert_eq!(&r.op(i), o, "op {i}");
    }
    assert_eq!(r.to_vec(), ops);
    assert_eq!(r.iter().rev().collect::<Vec<_>>(), ops.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(r.iter().len(), ops.len());
    // 9 awkward operations do not fit a row; the rest share 3 buffer pairs.
    assert_eq!(r.n_full(), 9);
    assert_eq!(r.bufs.len(), 3 + 1);
}

#[test]
fn serde_is_the_json_of_a_vec() {
    let ops: Vec<CollOp> = (0..5).map(op).chain(awkward()).collect();
    let r = RankOps::from(ops.clone());
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(json, serde_json::to_string(&ops).unwrap());
    assert_eq!(serde_json::from_str::<RankOps>(&json).unwrap(), r);
}

#[test]
fn set_update_sort_retain_remap() {
    let mut r: RankOps = (0..10).map(op).collect();
    r.update(3, |o| o.gpu = Some(GpuSpan { start_ns: 1, end_ns: 2 }));
    assert_eq!(r.op(3).gpu, Some(GpuSpan { start_ns: 1, end_ns: 2 }));
    r.set(4, CollOp { seq: 1 << 40, ..op(4) });
    assert_eq!(r.op(4).seq, 1 << 40);
    r.sort_by_key(|o| std::cmp::Reverse(o.line));
    assert_eq!(r.first().unwrap().line, 19);
    r.retain(|o| o.line % 2 == 0);
    assert_eq!(r.iter().map(|o| o.line).collect::<Vec<_>>(), vec![18, 16, 14, 12, 10]);
    r.remap(|p| ProcIdx(p.0 + 1), |d| DevIdx(d.0 + 1), |c| CommIdx(c.0 + 5));
    assert!(r.iter().all(|o| o.proc == ProcIdx(3) && o.dev == DevIdx(4) && o.comm.0 >= 5));
    assert_eq!(r.op(2).seq, 1 << 40, "op 4 (line 14) kept its wide seq");
}

#[test]
fn shared_buffers_keep_rows_near_48_bytes() {
    let mut r: RankOps = (0..300).map(op).collect();
    r.shrink_to_fit();
    let per_op = r.heap_bytes() as f64 / r.len() as f64;
    assert!(per_op < 50.0, "{per_op}");
}

#[test]
fn gpu_counts_match_a_scan_of_every_operation() {
    let scan = |r: &RankOps| (r.iter().filter(|o| o.gpu.is_some()).count(), r.iter().any(|o| o.gpu.is_some()));
    let mut r: RankOps = (0..10).map(op).collect();
    assert_eq!((r.count_gpu(), r.any_gpu()), (0, false));
    r.update(3, |o| o.gpu = Some(GpuSpan { start_ns: 1, end_ns: 2 }));
    assert_eq!((r.count_gpu(), r.any_gpu()), scan(&r));
    assert_eq!(r.count_gpu(), 1);
    // The span's extra stays behind when the operation loses it.
    r.update(3, |o| o.gpu = None);
    assert_eq!((r.count_gpu(), r.any_gpu()), (0, false));
    // Operations stored whole, with and without spans.
    let mut w: RankOps = (0..5).map(op).chain(awkward()).collect();
    assert_eq!((w.count_gpu(), w.any_gpu()), scan(&w));
    w.push(CollOp { proc: ProcIdx(9), gpu: Some(GpuSpan { start_ns: 3, end_ns: 4 }), ..op(7) });
    assert_eq!((w.count_gpu(), w.any_gpu()), scan(&w));
    assert!(w.any_gpu());
}
