//! Crate-level tests: the generated text is checked against the truth with plain string
//! matching, independently of the generator's internals.

use crate::{generate, RunConfig, Schedule, Truth};
use std::collections::{BTreeMap, HashMap};

/// Fields of an op line: (tid, op, opCount text, count, datatype, root, comm ptr).
struct OpLine {
    tid: String,
    op: String,
    opcount: String,
    count: u64,
    dtype: u64,
    root: u64,
    comm: String,
}

fn dsize(dt: u64) -> u64 {
    match dt {
        0 | 1 => 1,
        2 | 3 | 7 => 4,
        4 | 5 | 8 => 8,
        6 | 9 => 2,
        _ => panic!("unexpected datatype {dt}"),
    }
}

/// `host:pid:tid` of a line (timestamp skipped).
fn thread_of(line: &str) -> &str {
    let rest = if line.as_bytes()[0].is_ascii_digit() {
        line.split_once(' ').unwrap().1
    } else {
        line
    };
    rest.split_whitespace().next().unwrap()
}

fn parse_op(line: &str) -> Option<OpLine> {
    let (_, msg) = line.split_once(" NCCL INFO ")?;
    let (op, rest) = msg.split_once(": opCount ")?;
    let toks: Vec<&str> = rest.split_whitespace().collect();
    let get = |k: &str| toks.iter().position(|t| *t == k).map(|i| toks[i + 1]);
    Some(OpLine {
        tid: thread_of(line).to_string(),
        op: op.to_string(),
        opcount: toks[0].to_string(),
        count: get("count")?.parse().ok()?,
        dtype: get("datatype")?.parse().ok()?,
        root: get("root")?.parse().ok()?,
        comm: get("comm")?.to_string(),
    })
}

fn ptr_to_comm(truth: &Truth, rank: usize) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for c in &truth.communicators {
        if let Some(i) = c.members.iter().position(|&x| x == rank) {
            m.insert(c.comm_ptrs[i].clone(), c.name.clone());
        }
    }
    m
}

#[test]
fn default_run_shape() {
    let run = generate(&RunConfig::default());
    assert_eq!(run.files.len(), 4);
    assert!(
        run.total_bytes() < 1_000_000,
        "default output is {} bytes",
        run.total_bytes()
    );
    let t = &run.truth;
    assert_eq!(t.world_size, 4);
    for (r, f) in run.files.iter().enumerate() {
        assert_eq!(
            f.name,
            format!("nccl_debug_{}_{}.log", t.ranks[r].host, t.ranks[r].pid)
        );
        assert_eq!(f.contents.lines().count(), t.ranks[r].lines);
        assert_eq!(t.ranks[r].cuda_dev, r);
    }
    let names: Vec<&str> = t.communicators.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["WORLD", "TP0", "TP1", "PP0", "PP1", "EMB0", "EMB1"]);
    assert_eq!(t.comms_of_rank(2), ["WORLD", "TP1", "PP0", "EMB0"]);
    // Thesis eq. 2.7 structure: 4 TP AllReduce per layer and microbatch (+1 embedding on stage 0).
    let cfg = RunConfig::default();
    let m = cfg.num_microbatches * cfg.iterations;
    let tp_bf16 = |rank: usize| -> usize {
        let f = &run.files[rank].contents;
        f.lines()
            .filter_map(parse_op)
            .filter(|o| o.op == "AllReduce" && o.dtype == 9)
            .count()
    };
    // rank 0: first stage; its bf16 AllReduces are TP ones (EMB/grad norm are fp32).
    assert_eq!(tp_bf16(0), m * (4 * cfg.layers_per_stage() + 1));
    assert_eq!(t.op(0, "TP0", "Broadcast").unwrap().lines, 2 * m);
    assert_eq!(t.op(0, "PP0", "Send").unwrap().lines, m);
    assert_eq!(t.op(2, "PP0", "Recv").unwrap().lines, m);
    assert_eq!(t.op(0, "EMB0", "AllReduce").unwrap().lines, cfg.iterations);
    assert!(run.file(&t.ranks[0].file).is_some());
}

#[test]
fn deterministic_for_a_seed() {
    let cfg = RunConfig {
        interleave: true,
        broken_lines: 3,
        ..RunConfig::default()
    };
    let a = generate(&cfg);
    let b = generate(&cfg);
    assert_eq!(a.files, b.files);
    assert_eq!(a.truth, b.truth);
    let c = generate(&RunConfig { seed: 7, ..cfg });
    assert_ne!(a.files[0].contents, c.files[0].contents);
}

#[test]
fn comm_ids_shared_by_members_only() {
    let run = generate(&RunConfig::megatron(2, 2, 2));
    let t = &run.truth;
    let mut ids: Vec<u64> = t.communicators.iter().map(|c| c.comm_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), t.communicators.len());
    for c in &t.communicators {
        assert_eq!(c.comm_id_hex.len(), 18, "{}", c.comm_id_hex);
        for r in 0..t.world_size {
            let text = &run.files[r].contents;
            let starts: Vec<&str> = text
                .lines()
                .filter(|l| l.contains(&format!("commId {} - Init START", c.comm_id_hex)))
                .collect();
            match c.members.iter().position(|&m| m == r) {
                Some(cr) => {
                    assert_eq!(starts.len(), 1, "{} in rank {r}", c.name);
                    let want = format!(
                        "comm {} rank {cr} nranks {} cudaDev",
                        c.comm_ptrs[cr], c.nranks
                    );
                    assert!(starts[0].contains(&want), "{}: {}", want, starts[0]);
                    assert!(text.contains(&format!("commId {} - Init COMPLETE", c.comm_id_hex)));
                }
                None => assert!(starts.is_empty()),
            }
        }
    }
}

#[test]
fn opcount_is_hex_per_comm_and_shared_by_p2p_groups() {
    let run = generate(&RunConfig::default());
    let mut saw_letter = false;
    for f in &run.files {
        let mut last: HashMap<String, (u64, bool)> = HashMap::new();
        for o in f.contents.lines().filter_map(parse_op) {
            let v = u64::from_str_radix(&o.opcount, 16).unwrap();
            assert_eq!(o.opcount, format!("{v:x}"));
            saw_letter |= o.opcount.chars().any(|c| c.is_ascii_alphabetic());
            let p2p = o.op == "Send" || o.op == "Recv";
            match last.get(&o.comm) {
                None => assert_eq!(v, 0),
                Some(&(prev, prev_p2p)) => {
                    if p2p && prev_p2p {
                        assert!(v == prev || v == prev + 1, "{} -> {}", prev, v);
                    } else {
                        assert_eq!(v, prev + 1);
                    }
                }
            }
            last.insert(o.comm.clone(), (v, p2p));
        }
    }
    assert!(saw_letter);
    // Send+Recv of one batched call share the opCount (1F1B steady state on stage 0).
    let f = &run.files[0].contents;
    let ops: Vec<OpLine> = f
        .lines()
        .filter_map(parse_op)
        .filter(|o| o.op == "Send" || o.op == "Recv")
        .collect();
    assert!(ops
        .windows(2)
        .any(|w| w[0].op == "Send" && w[1].op == "Recv" && w[0].opcount == w[1].opcount));
}

#[test]
fn truth_totals_match_text() {
    for cfg in [
        RunConfig::default(),
        RunConfig {
            gpus_per_node: 4,
            ..RunConfig::megatron(2, 2, 2)
        },
        // the variants: SP + ZeRO-1 + virtual stages + EP with both dispatchers
        RunConfig {
            sequence_parallel: true,
            distributed_optimizer: true,
            virtual_stages: 2,
            ep: 2,
            num_experts: 4,
            iterations: 1,
            gpus_per_node: 4,
            ..RunConfig::megatron(2, 2, 2)
        },
        RunConfig {
            ep: 4,
            num_experts: 4,
            moe_dispatcher: crate::MoeDispatcher::AllGather,
            iterations: 1,
            ..RunConfig::megatron(1, 1, 4)
        },
    ] {
        let run = generate(&cfg);
        let t = &run.truth;
        let mut counted: BTreeMap<(usize, String, String), (usize, u64)> = BTreeMap::new();
        for r in 0..t.world_size {
            let text = &run.files[r].contents;
            let names = ptr_to_comm(t, r);
            for o in text.lines().filter_map(parse_op) {
                let e = counted
                    .entry((r, names[&o.comm].clone(), o.op.clone()))
                    .or_default();
                e.0 += 1;
                e.1 += o.count * dsize(o.dtype);
            }
            assert_eq!(text.matches(" Bytes -> Algo ").count(), t.tuning_lines[r]);
        }
        let expected: BTreeMap<(usize, String, String), (usize, u64)> = t
            .ops
            .iter()
            .map(|o| ((o.rank, o.comm.clone(), o.op.clone()), (o.lines, o.bytes)))
            .collect();
        assert_eq!(counted, expected);
        assert!(t.op_lines_of_kind("AllReduce") > 0);
        assert_eq!(
            t.total_op_lines(),
            (0..t.world_size)
                .map(|r| t.op_lines_of_rank(r))
                .sum::<usize>()
        );
    }
}

#[test]
fn tuning_line_follows_its_op_line() {
    let run = generate(&RunConfig::default());
    for f in &run.files {
        let mut last_op: Option<OpLine> = None;
        for line in f.contents.lines() {
            if let Some(o) = parse_op(line) {
                last_op = Some(o);
            } else if let Some((_, msg)) = line.split_once(" NCCL INFO ") {
                if let Some((op, rest)) = msg.split_once(": ") {
                    if let Some((bytes, _)) = rest.split_once(" Bytes -> Algo RING proto ") {
                        let o = last_op.as_ref().expect("op line before tuning line");
                        assert_eq!(o.op, op);
                        assert_eq!(o.tid, thread_of(line));
                        assert_eq!(bytes.parse::<u64>().unwrap(), o.count * dsize(o.dtype));
                        assert!(o.op != "Send" && o.op != "Recv");
                    }
                }
            }
        }
    }
}

#[test]
fn prefixes_threads_and_time() {
    let run = generate(&RunConfig::default());
    for (r, f) in run.files.iter().enumerate() {
        let rt = &run.truth.ranks[r];
        let mut prev_t = 0.0f64;
        let mut op_tids = std::collections::HashSet::new();
        let mut init_tids = std::collections::HashSet::new();
        for line in f.contents.lines() {
            let (ts, rest) = line.split_once(' ').unwrap();
            let (sec, usec) = ts.split_once('.').unwrap();
            assert_eq!(usec.len(), 6);
            let t: f64 = format!("{sec}.{usec}").parse().unwrap();
            assert!(t >= prev_t, "time goes back in rank {r}: {line}");
            prev_t = t;
            let want = format!("{}:{}:", rt.host, rt.pid);
            assert!(rest.starts_with(&want), "{rest}");
            assert!(rest.contains(&format!(" [{}] NCCL INFO ", rt.cuda_dev)));
            let tid = thread_of(line).to_string();
            if line.contains(": opCount ") {
                op_tids.insert(tid);
            } else if line.contains("Init START") {
                init_tids.insert(tid);
            }
        }
        assert_eq!(op_tids.len(), 1);
        assert!(op_tids.contains(&format!("{}:{}:{}", rt.host, rt.pid, rt.pid)));
        assert!(init_tids.iter().all(|t| !op_tids.contains(t)));
        let has_version = f
            .contents
            .contains("NCCL INFO NCCL version 2.27.7+cuda12.8");
        assert_eq!(has_version, rt.local_rank == 0);
        assert!(f
            .contents
            .contains("=== System : maxBw 80.0 totalBw 240.0 ==="));
        assert_eq!(f.contents.matches("=== System :").count(), 1);
    }
    let plain = generate(&RunConfig {
        timestamps: false,
        ..RunConfig::default()
    });
    assert!(plain.files[0].contents.starts_with("node00:"));
}

#[test]
fn send_recv_pair_up() {
    let run = generate(&RunConfig::megatron(1, 4, 1));
    let t = &run.truth;
    // bytes sent from comm rank a to b (root = peer) == bytes b received from a
    let mut sent: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut recv: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for (r, f) in run.files.iter().enumerate() {
        for o in f.contents.lines().filter_map(parse_op) {
            let bytes = o.count * dsize(o.dtype);
            match o.op.as_str() {
                "Send" => *sent.entry((r as u64, o.root)).or_default() += bytes,
                "Recv" => *recv.entry((o.root, r as u64)).or_default() += bytes,
                _ => {}
            }
        }
    }
    assert_eq!(sent, recv);
    assert_eq!(sent.len(), 6); // 3 boundaries, both directions
    let m = (t.ranks.len() - 1) as u64;
    assert!(sent
        .keys()
        .all(|&(a, b)| a.abs_diff(b) == 1 && a <= m && b <= m));
    // middle stages send both ways
    assert_eq!(
        t.op(1, "PP0", "Send").unwrap().lines,
        2 * RunConfig::default().num_microbatches * 2
    );
    let f = &run.files[1].contents;
    assert!(f.contains("Recv: opCount 0 sendbuff (nil) recvbuff 0x"));
    assert!(f.contains("Send: opCount 1 sendbuff (nil) recvbuff 0x"));
}

#[test]
fn interleaved_file_with_broken_lines() {
    let cfg = RunConfig {
        interleave: true,
        broken_lines: 6,
        ..RunConfig::default()
    };
    let run = generate(&cfg);
    let t = &run.truth;
    let c = t.combined.as_ref().unwrap();
    assert_eq!(c.broken.len(), 6);
    let text = &run.file("combined.log").unwrap().contents;
    let lines: Vec<&str> = text.lines().collect();
    let per_file: usize = t.ranks.iter().map(|r| r.lines).sum();
    assert_eq!(lines.len(), c.lines);
    assert_eq!(c.lines, per_file - 6);
    assert_eq!(text.matches(" stream 0x").count(), c.intact_op_lines);
    assert_eq!(c.intact_op_lines, t.total_op_lines() - 6);
    for b in &c.broken {
        let l = lines[b.line];
        assert!(l.starts_with(&b.original[..b.cut_at]));
        assert!(!l.starts_with(&b.original));
        let intruder = &l[b.cut_at..];
        let rt = &t.ranks[b.intruder_rank];
        assert!(intruder.contains(&format!("{}:{}:", rt.host, rt.pid)));
        assert_ne!(b.victim_rank, b.intruder_rank);
        assert!(b.original.contains(": opCount "));
    }
    // lines stay in time order
    let ts: Vec<f64> = lines
        .iter()
        .map(|l| l.split_once(' ').unwrap().0.parse().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn multi_node_three_d_run() {
    let cfg = RunConfig {
        gpus_per_node: 4,
        ..RunConfig::megatron(2, 2, 2)
    };
    let run = generate(&cfg);
    let t = &run.truth;
    assert_eq!(run.files.len(), 8);
    assert_eq!(t.ranks[4].host, "node01");
    assert!(t.comm("DP0").is_some() && t.comm("MP1").is_some());
    assert!(t.op(5, "DP2", "AllReduce").is_some() || t.op(5, "DP3", "AllReduce").is_some());
    let all: String = run.files.iter().map(|f| f.contents.as_str()).collect();
    assert!(all.contains("[send] via NET/IB/0/GDRDMA"));
    assert!(all.contains("[receive] via NET/IB/0/GDRDMA"));
    assert!(all.contains("nNodes 2"));
    assert_eq!(all.matches("NCCL INFO NCCL version").count(), 2);
    // grad norm goes to MP, not WORLD, when dp > 1
    assert_eq!(t.op(0, "MP0", "AllReduce").unwrap().lines, cfg.iterations);
}

#[test]
fn older_nccl_version_forms() {
    let run = generate(&RunConfig {
        nccl_version: "2.20.5".into(),
        cuda_version: "12.4".into(),
        ..RunConfig::default()
    });
    let f = &run.files[0].contents;
    assert!(!f.contains("[nranks="));
    assert!(!f.contains("ncclCommInitRankConfig"));
    assert!(f.contains("NCCL version 2.20.5+cuda12.4"));
    assert!(f.contains("Bootstrap : Using eth0"));
    let connected = f.find("Connected all rings\n").unwrap();
    let complete = f.find("- Init COMPLETE").unwrap();
    assert!(connected < complete);
}

#[test]
fn schedules_and_call_lines() {
    let a = generate(&RunConfig::default());
    let b = generate(&RunConfig {
        schedule: Schedule::AllForwardAllBackward,
        call_lines: true,
        ..RunConfig::default()
    });
    let totals = |t: &Truth| {
        t.ops
            .iter()
            .map(|o| (o.rank, o.comm.clone(), o.op.clone(), o.lines, o.bytes))
            .collect::<Vec<_>>()
    };
    assert_eq!(totals(&a.truth), totals(&b.truth));
    let f = &b.files[0].contents;
    assert!(f.contains(" NCCL CALL ncclGroupStart()"));
    assert!(f.contains(" NCCL CALL ncclAllReduce("));
    assert!(f
        .lines()
        .filter(|l| l.contains("NCCL CALL"))
        .all(|l| !l.contains(" [0] ")));
}

#[test]
fn edge_layouts_generate() {
    let cases = [
        RunConfig::megatron(1, 1, 1),
        RunConfig::megatron(1, 1, 4),
        RunConfig::megatron(4, 1, 1),
        RunConfig {
            gpus_per_node: 1,
            ..RunConfig::default()
        },
        RunConfig {
            gpus_per_node: 3,
            ..RunConfig::default()
        },
        RunConfig {
            num_microbatches: 1,
            ..RunConfig::megatron(1, 4, 1)
        },
        RunConfig {
            iterations: 0,
            interleave: true,
            broken_lines: 10_000,
            ..RunConfig::default()
        },
    ];
    for cfg in cases {
        let run = generate(&cfg);
        let t = &run.truth;
        assert_eq!(run.files.len(), cfg.world() + cfg.interleave as usize);
        assert_eq!(t.comm("WORLD").unwrap().nranks, cfg.world());
        for (r, f) in run.files.iter().take(cfg.world()).enumerate() {
            assert_eq!(
                f.contents.matches(": opCount ").count(),
                t.op_lines_of_rank(r)
            );
            assert_eq!(
                f.contents.matches("Init COMPLETE").count(),
                t.comms_of_rank(r).len()
            );
            assert_eq!(
                f.contents.matches("Destroy COMPLETE").count(),
                t.comms_of_rank(r).len()
            );
        }
        if let Some(c) = &t.combined {
            assert_eq!(c.intact_op_lines + c.broken.len(), t.total_op_lines());
        }
    }
    // pure DP: gradient buckets on DP, no TP/PP/MP communicators
    let cfg = RunConfig::megatron(1, 1, 4);
    let run = generate(&cfg);
    let names: Vec<&str> = run
        .truth
        .communicators
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["WORLD", "DP0"]);
    let buckets = commlens_workload::megatron::params::grad_buckets(&cfg.program_config(), 0);
    assert_eq!(buckets.len(), 2); // ~103M parameters in buckets of >= 40M elements
    let dp = run.truth.op(3, "DP0", "AllReduce").unwrap();
    assert_eq!(dp.lines, 2 * cfg.iterations);
    assert_eq!(
        dp.bytes,
        4 * buckets.iter().sum::<u64>() * cfg.iterations as u64
    );
}

#[test]
fn sequence_parallel_counts_follow_megatron() {
    // TP 2, one stage: per microbatch the batch Broadcasts, the embedding ReduceScatter, per
    // layer 2 AllGather + 2 ReduceScatter forward and 4 + 2 backward, the output layer's
    // AllGather (forward) and AllGather + ReduceScatter (backward), the embedding's AllGather
    // (backward); once per iteration the layer-norm gradient AllReduce.
    let cfg = RunConfig { sequence_parallel: true, ..RunConfig::megatron(2, 1, 1) };
    let t = generate(&cfg).truth;
    let (m, l) = (cfg.num_microbatches * cfg.iterations, cfg.layers_per_stage());
    let lines = |op: &str| t.op(0, "TP0", op).map_or(0, |o| o.lines);
    assert_eq!(lines("AllGather"), m * (6 * l + 3));
    assert_eq!(lines("ReduceScatter"), m * (4 * l + 2));
    assert_eq!(lines("AllReduce"), 3 * m + cfg.iterations);
    // every AllGather/ReduceScatter moves one sequence shard of bf16 activations
    let shard = (cfg.seq_len * cfg.micro_batch * cfg.hidden / cfg.tp * 2) as u64;
    assert_eq!(t.op(0, "TP0", "ReduceScatter").unwrap().bytes, shard * lines("ReduceScatter") as u64);
    assert_eq!(t.comm("TP0").unwrap().strategy, "tp-sp");
}

#[test]
fn all_to_all_sends_to_itself_and_balances() {
    let cfg = RunConfig { ep: 4, num_experts: 8, iterations: 1, ..RunConfig::megatron(1, 1, 4) };
    let run = generate(&cfg);
    let ep = run.truth.comm("EP0").unwrap();
    assert_eq!(ep.strategy, "ep-a2a");
    let (mut sent, mut received) = (0u64, 0u64);
    let mut self_sends = 0;
    for r in 0..4 {
        let ptr = &ep.comm_ptrs[ep.members.iter().position(|&m| m == r).unwrap()];
        for o in run.files[r].contents.lines().filter_map(parse_op).filter(|o| &o.comm == ptr) {
            match o.op.as_str() {
                "Send" => sent += o.count,
                "Recv" => received += o.count,
                _ => continue,
            }
            self_sends += (o.op == "Send" && o.root == r as u64) as usize;
        }
        // a Send/Recv to itself is a local copy: no connection line towards itself
        assert!(!run.files[r].contents.contains(&format!(": {r}[{r}] -> {r}[{r}]")));
    }
    assert_eq!(sent, received);
    assert!(self_sends > 0);
    // tokens routed per all-to-all: seq * mb * topk, times hidden elements, 4 per layer and
    // microbatch over 4 ranks
    let per_a2a = (cfg.seq_len * cfg.micro_batch * cfg.moe_topk * cfg.hidden) as u64;
    assert_eq!(sent, per_a2a * 4 * 4 * (cfg.layers * cfg.num_microbatches) as u64);
}
