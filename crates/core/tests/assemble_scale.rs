//! Assembly of a 20,000-rank job: a world communicator with a `commId` (one
//! handle whose init line was lost, adopted by size), and 10,000 TP pairs
//! that logged no `commId` and run identical operations (one op-sequence
//! bucket split by rank). These are the shapes that were quadratic in handles
//! (every member compared with every handle already grouped, every bucket
//! scanned per handle); the grouping must be the one the rules give.

use commlens_core::assemble::assemble;
use commlens_core::model::{CommMember, Device, DevIdx, Grouping, Process, ProcIdx};
use commlens_core::{OpKind, OpTable};

const WORLD: u32 = 20_000;
const PER_HOST: u32 = 8;
/// The process whose world handle lost its init line (no `commId`, no rank).
const LOST: u32 = 12_345;

fn job() -> OpTable {
    let mut t = OpTable::default();
    for i in 0..WORLD {
        let (p, d) = (ProcIdx(i), DevIdx(i));
        t.processes.push(Process { host: format!("node{:05}", i / PER_HOST), pid: 1000 + i, nccl_version: None });
        t.devices.push(Device {
            proc: p,
            cuda_dev: Some(i % PER_HOST),
            nvml_dev: None,
            bus_id: Some(0x1000 * u64::from(1 + i % PER_HOST)),
            global_rank: None,
            local_rank: None,
        });
        let mut w = CommMember::new(p, 0xa000 + u64::from(i));
        w.nranks = Some(WORLD);
        w.device = Some(d);
        if i != LOST {
            w.comm_id = Some(0xfeed);
            w.rank = Some(i);
        }
        t.comms.push(w);
        let mut tp = CommMember::new(p, 0xb000 + u64::from(i));
        tp.nranks = Some(2);
        tp.rank = Some(i % 2);
        tp.device = Some(d);
        for _ in 0..3 {
            tp.note_op(OpKind::AllReduce);
        }
        t.comms.push(tp);
    }
    t
}

#[test]
fn twenty_thousand_ranks_group_as_the_rules_say() {
    let mut t = job();
    assemble(&mut t);
    // One world (the lost handle adopted), 10,000 TP pairs.
    assert_eq!(t.logical.len(), 1 + (WORLD / 2) as usize);
    let world: Vec<_> = t.logical.iter().filter(|l| l.comm_id == Some(0xfeed)).collect();
    assert_eq!(world.len(), 1);
    assert_eq!(world[0].members.len(), WORLD as usize);
    assert_eq!(world[0].grouping, Grouping::CommId);
    // Global ranks from the world's init lines; the lost one takes the rank nobody claimed.
    for (i, d) in t.devices.iter().enumerate() {
        assert_eq!(d.global_rank, Some(i as u32), "device {i}");
    }
    // Each TP pair is two consecutive processes, rank 0 then rank 1: the first group
    // with room and without the rank, never two handles of one rank together.
    let mut pairs = 0;
    for l in t.logical.iter().filter(|l| l.grouping == Grouping::OpSequence) {
        let procs: Vec<u32> = l.members.iter().map(|m| t.comms[m.ix()].proc.0).collect();
        assert_eq!(procs.len(), 2, "{procs:?}");
        assert_eq!(procs[0] % 2, 0);
        assert_eq!(procs[1], procs[0] + 1);
        pairs += 1;
    }
    assert_eq!(pairs, WORLD / 2);
}
