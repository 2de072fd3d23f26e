//! Scale of anomaly detection: a 16-rank table of 32,768 AllReduce instances per
//! communicator on 4 communicators (2,097,152 operations, 4 sizes) with one slow instance
//! per communicator. Prints the detection time against `stats::Aggregate::from_table` (one
//! pass over the same operations) measured in the same run; asserts only what was found.

use commlens_analyze::anomaly::{detect_anomalies, AnomalyConfig, Rule};
use commlens_analyze::stats::Aggregate;
use commlens_core::model::{CommIdx, DevIdx, Grouping, LogicalComm, LogicalCommIdx, ProcIdx};
use commlens_core::{CollOp, CommMember, DataType, Device, GpuSpan, OpKind, OpTable, Process};
use std::time::Instant;

const RANKS: usize = 16;
const COMMS: usize = 4;
const INSTANCES: usize = 32_768;

fn table() -> OpTable {
    let mut t = OpTable::default();
    for r in 0..RANKS {
        t.processes.push(Process { host: format!("h{}", r / 8), pid: 100 + r as u32, nccl_version: None });
        t.devices.push(Device {
            proc: ProcIdx(r as u32),
            cuda_dev: Some((r % 8) as u32),
            nvml_dev: None,
            bus_id: None,
            global_rank: Some(r as u32),
            local_rank: None,
        });
        t.per_rank.push(commlens_core::RankOps::with_capacity(COMMS * INSTANCES));
    }
    for c in 0..COMMS {
        let mut members = Vec::new();
        for r in 0..RANKS {
            let mut m = CommMember::new(ProcIdx(r as u32), 0x1000 * (c as u64 + 1) + r as u64);
            (m.comm_id, m.nranks, m.rank, m.device, m.logical) =
                (Some(c as u64), Some(RANKS as u32), Some(r as u32), Some(DevIdx(r as u32)), Some(LogicalCommIdx(c as u32)));
            members.push(CommIdx(t.comms.len() as u32));
            t.comms.push(m);
        }
        t.logical.push(LogicalComm { name: format!("c{c}"), comm_id: Some(c as u64), nranks: RANKS as u32, members, grouping: Grouping::CommId });
    }
    for i in 0..INSTANCES {
        for c in 0..COMMS {
            let count = 1u64 << (16 + (i % 4));
            let base = 100_000 * (1 + (i % 4) as i64);
            let slow = i == 1000 + 7 * c;
            let xfer = if slow { 3 * base } else { base + ((i * 7919 + c) % 41) as i64 * base / 1000 };
            let t0 = 1_766_081_200_000_000_000 + (i * COMMS + c) as i64 * 2_000_000;
            for r in 0..RANKS {
                let arrive = ((i * 31 + r * 17) % 23) as i64 * 100;
                let h = CommIdx((c * RANKS + r) as u32);
                t.per_rank[r].push(CollOp {
                    comm_seq: i as u64,
                    gpu: Some(GpuSpan { start_ns: t0 + arrive, end_ns: t0 + 2_300 + xfer }),
                    ..CollOp::new(ProcIdx(r as u32), DevIdx(r as u32), h, OpKind::AllReduce, count, DataType::Bfloat16)
                });
            }
        }
    }
    t
}

#[test]
fn millions_of_operations() {
    let t = table();
    let t0 = Instant::now();
    let agg = Aggregate::from_table(&t);
    let reference = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let rep = detect_anomalies(&t, None, &AnomalyConfig::default());
    let took = t1.elapsed().as_secs_f64();
    println!(
        "{} operations, {} instances judged: detection {:.3} s, one-pass aggregate {:.3} s (ratio {:.1}×), {} threads",
        t.n_ops(),
        rep.judged,
        took,
        reference,
        took / reference,
        rayon::current_num_threads()
    );
    assert_eq!(agg.total().ops as usize, RANKS * COMMS * INSTANCES);
    assert_eq!(rep.judged as usize, COMMS * INSTANCES);
    let found: Vec<(u32, Option<u64>)> = rep.anomalies.iter().map(|a| (a.comm.0, a.instance)).collect();
    assert_eq!(found, (0..COMMS).map(|c| (c as u32, Some(1000 + 7 * c as u64))).collect::<Vec<_>>());
    assert!(rep.anomalies.iter().all(|a| a.rule == Rule::SlowInstance && a.ranks.len() == RANKS));
}
