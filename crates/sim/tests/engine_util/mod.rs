//! Test support for the engine, analytical and output tests: a workload builder, a compute
//! cost that takes the stated time, a network with a fixed time per operation, clusters.
#![allow(dead_code)]

use commlens_core::{DataType, OpKind, RedOp};
use commlens_model::tuner::NcclEnv;
use commlens_model::{presets::preset, Cluster};
use commlens_sim::analytical::AnalyticalNetwork;
use commlens_sim::compute::ComputeCost;
use commlens_sim::network::{NetOp, NetOpId, Network};
use commlens_workload::*;

/// Takes the time the step states (0 when none).
pub struct Stated;
impl ComputeCost for Stated {
    fn time_us(&self, c: &Compute) -> f64 {
        c.time_us.unwrap_or(0.0)
    }
}

/// Every operation takes `time_us`, whatever else is in flight; keeps what it was given.
pub struct FixedNet {
    pub time_us: f64,
    pub flights: Vec<(NetOpId, f64)>,
    pub started: Vec<(f64, NetOp)>,
}
impl FixedNet {
    pub fn new(time_us: f64) -> FixedNet {
        FixedNet { time_us, flights: Vec::new(), started: Vec::new() }
    }
}
impl Network for FixedNet {
    fn start(&mut self, now_us: f64, op: NetOp) {
        self.flights.push((op.id, now_us + self.time_us));
        self.started.push((now_us, op));
    }
    fn next_completion(&self) -> Option<f64> {
        self.flights.iter().map(|f| f.1).min_by(f64::total_cmp)
    }
    fn advance(&mut self, to_us: f64) -> Vec<NetOpId> {
        let done: Vec<NetOpId> = self.flights.iter().filter(|f| f.1 <= to_us).map(|f| f.0).collect();
        self.flights.retain(|f| f.1 > to_us);
        done
    }
}

pub fn cluster(nodes: u32) -> Cluster {
    preset("dgx-h100").expect("preset").with_nodes(nodes)
}

pub fn analytical(nodes: u32) -> AnalyticalNetwork {
    AnalyticalNetwork::new(&cluster(nodes), commlens_model::predict::DEFAULT_VERSION, NcclEnv::default())
}

pub fn compute(name: &str, us: f64) -> Task {
    Task {
        stream: Stream::Compute,
        deps: vec![],
        phase: Phase::Forward,
        work: Work::Compute(Compute { name: name.into(), kind: ComputeKind::Gemm, flops: 0.0, mem_bytes: 0.0, time_us: Some(us) }),
    }
}

pub fn coll(kind: OpKind, g: GroupKind, bytes: u64) -> Task {
    Task {
        stream: Stream::Compute,
        deps: vec![],
        phase: Phase::Forward,
        work: Work::Coll(CollCall {
            group: GroupSel::of(g),
            kind,
            count: bytes / 2,
            dtype: DataType::Bfloat16,
            redop: matches!(kind, OpKind::AllReduce | OpKind::ReduceScatter | OpKind::Reduce).then_some(RedOp::Sum),
            root: 0,
            sync: false,
            tag: 0,
        }),
    }
}

pub fn on(mut t: Task, stream: Stream, deps: &[u32]) -> Task {
    t.stream = stream;
    t.deps = deps.to_vec();
    t
}

pub fn p2p(g: GroupKind, calls: &[(bool, Peer, u64)]) -> Task {
    Task {
        stream: Stream::Compute,
        deps: vec![],
        phase: Phase::Forward,
        work: Work::P2p {
            group: GroupSel::of(g),
            calls: calls.iter().map(|&(send, peer, bytes)| P2pCall { send, peer, count: bytes / 2, dtype: DataType::Bfloat16, tag: 0 }).collect(),
        },
    }
}

pub fn iter_end(iter: u32) -> Task {
    Task { stream: Stream::Compute, deps: vec![], phase: Phase::Other, work: Work::IterationEnd { iter } }
}

/// A workload from programs, each rank's program index, and groups (membership derived).
pub fn workload(world: u32, programs: Vec<Program>, rank_program: Vec<u32>, groups: Vec<(GroupKind, Vec<Vec<u32>>)>) -> Workload {
    let mut w = Workload {
        name: "test".into(),
        origin: Origin::Measured,
        world,
        gpus_per_node: Some(8),
        iterations: 1,
        groups: Vec::new(),
        programs,
        rank_program,
        membership: vec![Vec::new(); world as usize],
        representative: Vec::new(),
        notes: Vec::new(),
    };
    for (kind, sets) in groups {
        for (i, ranks) in sets.into_iter().enumerate() {
            let id = GroupId(w.groups.len() as u32);
            for &r in &ranks {
                w.membership[r as usize].push(id);
            }
            w.groups.push(Group { kind, tag: 0, name: format!("{}{i}", kind.label().to_lowercase()), ranks });
        }
    }
    w
}

pub fn prog(tasks: Vec<Task>) -> Program {
    Program { tasks }
}

/// Stage `s` of a 1F1B pipeline of `p` stages and `m` micro-batches (Megatron's order:
/// warm-up forwards, steady one-forward-one-backward with batched send/recv, cool-down),
/// forward `f` µs, backward `b` µs, activations of `bytes`.
pub fn one_f_one_b(s: u32, p: u32, m: u32, f: f64, b: f64, bytes: u64) -> Vec<Task> {
    let (first, last) = (s == 0, s == p - 1);
    let warm = (p - s - 1).min(m);
    let steady = m - warm;
    let mut t = Vec::new();
    let recv_fwd = |t: &mut Vec<Task>| if !first { t.push(p2p(GroupKind::Pp, &[(false, Peer::Prev, bytes)])) };
    let send_fwd = |t: &mut Vec<Task>| if !last { t.push(p2p(GroupKind::Pp, &[(true, Peer::Next, bytes)])) };
    let recv_bwd = |t: &mut Vec<Task>| if !last { t.push(p2p(GroupKind::Pp, &[(false, Peer::Next, bytes)])) };
    let send_bwd = |t: &mut Vec<Task>| if !first { t.push(p2p(GroupKind::Pp, &[(true, Peer::Prev, bytes)])) };
    for _ in 0..warm {
        recv_fwd(&mut t);
        t.push(compute("fwd", f));
        send_fwd(&mut t);
    }
    if steady > 0 {
        recv_fwd(&mut t);
    }
    for i in 0..steady {
        t.push(compute("fwd", f));
        if !last {
            t.push(p2p(GroupKind::Pp, &[(true, Peer::Next, bytes), (false, Peer::Next, bytes)]));
        }
        let mut bw = compute("bwd", b);
        bw.phase = Phase::InputGrad;
        t.push(bw);
        if i == steady - 1 {
            send_bwd(&mut t);
        } else if !first {
            t.push(p2p(GroupKind::Pp, &[(true, Peer::Prev, bytes), (false, Peer::Prev, bytes)]));
        }
    }
    for _ in 0..warm {
        recv_bwd(&mut t);
        let mut bw = compute("bwd", b);
        bw.phase = Phase::InputGrad;
        t.push(bw);
        send_bwd(&mut t);
    }
    t
}
