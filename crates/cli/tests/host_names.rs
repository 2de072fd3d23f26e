//! Host names decided by clean evidence, through the binary: a line whose
//! start was lost (`ne:4101:…` beside dozens of `stone:4101:…`) folds into
//! `stone`; it never renames the host the clean lines agree on.

mod common;

#[test]
fn a_garbled_line_does_not_rename_a_host() {
    let dir = common::temp_dir("hosts", "majority");
    let mut s = String::new();
    for (rank, pid) in [(0, 4101), (1, 4102)] {
        s.push_str(&format!(
            "stone:{pid}:{pid} [{rank}] NCCL INFO ncclCommInitRank comm 0x55b6aa64a99{rank} rank {rank} nranks 2 cudaDev {rank} nvmlDev {rank} busId {rank}000 commId 0x1234abcd - Init COMPLETE\n"
        ));
    }
    for op in 0..40 {
        for (rank, pid) in [(0, 4101), (1, 4102)] {
            // The 7th call of rank 0 lost the start of its host name.
            let host = if rank == 0 && op == 6 { "ne" } else { "stone" };
            s.push_str(&format!(
                "{host}:{pid}:{pid} [{rank}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x720000000 recvbuff 0x920000000 count 1024 datatype 7 op 0 root 0 comm 0x55b6aa64a99{rank} [nranks=2] stream 0x55b6a98daaf0\n"
            ));
        }
    }
    let log = dir.join("job.log");
    std::fs::write(&log, s).unwrap();
    let r = common::run_limited(common::commlens_cmd(&["stats", "--format", "json", log.to_str().unwrap()]), 60, "stats");
    assert_eq!(r.code, 0, "{}", r.err);
    let v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    let ranks = v["stats"]["ranks"].as_array().unwrap();
    let hosts: Vec<&str> = ranks.iter().map(|r| r["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["stone", "stone"], "{ranks:?}");
    let ops: Vec<u64> = ranks.iter().map(|r| r["ops"].as_u64().unwrap()).collect();
    assert_eq!(ops, [40, 40], "the garbled line's operation stays with its process");
}
