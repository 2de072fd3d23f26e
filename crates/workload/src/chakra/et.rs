//! Chakra graph formats into [`RawTrace`]: the protobuf `.et` nodes (from `proto`) and the
//! JSON form of the same graph (`{"workload_graph": [{"Id", "Name", "NodeType", "ctrlDeps",
//! "data_deps", "runtime", "is_cpu_op"}]}`). Node types map to tasks: COMP → compute,
//! COMM_COLL → collective, COMM_SEND/RECV → point-to-point, the rest pass their dependencies
//! through. When a trace holds both sides of the host/device split, the CPU-side nodes pass
//! through too (the GPU kernels are the work).

use super::proto::{AttrVal, EtFile, EtNode};
use super::raw::{
    coll_kind_from_chakra, coll_kind_from_name, compute_kind, redop_from_name, RawNode, RawTrace,
    What,
};
use super::ChakraError;
use crate::Phase;
use commlens_core::{DataType, OpKind, RedOp};
use serde::Deserialize;

const METADATA: u64 = 1;
const MEM_LOAD: u64 = 2;
const MEM_STORE: u64 = 3;
const COMP: u64 = 4;
const SEND: u64 = 5;
const RECV: u64 = 6;
const COLL: u64 = 7;

/// The fields of one graph node both encodings share.
struct GraphNode<'a> {
    id: u64,
    name: &'a str,
    node_type: u64,
    is_cpu_op: Option<bool>,
    duration_us: Option<f64>,
    attr: &'a dyn Fn(&str) -> Option<AttrVal>,
}

#[derive(Default)]
struct Counts {
    skipped_cpu: usize,
    skipped_other: usize,
    no_size: usize,
    no_kind: usize,
    no_peer: usize,
}

fn reduction(kind: OpKind, name: &str) -> Option<RedOp> {
    matches!(
        kind,
        OpKind::AllReduce | OpKind::ReduceScatter | OpKind::Reduce
    )
    .then(|| redop_from_name(name).unwrap_or(RedOp::Sum))
}

fn what_of(n: &GraphNode, gpu_side: bool, c: &mut Counts) -> What {
    if gpu_side && n.is_cpu_op == Some(true) && matches!(n.node_type, COMP | SEND | RECV | COLL) {
        c.skipped_cpu += 1;
        return What::Skip;
    }
    let int = |k: &str| (n.attr)(k).and_then(|v| v.as_i64());
    let pg = (n.attr)("pg_name")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty());
    match n.node_type {
        COMP => What::Compute {
            kind: compute_kind(n.name),
            time_us: n.duration_us,
            flops: int("num_ops").unwrap_or(0).max(0) as f64,
            mem_bytes: int("tensor_size").unwrap_or(0).max(0) as f64,
        },
        COLL => {
            let kind = int("comm_type")
                .and_then(coll_kind_from_chakra)
                .or_else(|| coll_kind_from_name(n.name));
            let Some(kind) = kind.filter(|k| !k.is_p2p()) else {
                c.no_kind += 1;
                return What::Skip;
            };
            let bytes = int("comm_size").filter(|&b| b >= 0);
            if bytes.is_none() {
                c.no_size += 1;
            }
            What::Coll {
                kind,
                count: bytes.unwrap_or(0) as u64,
                dtype: DataType::Uint8,
                redop: reduction(kind, n.name),
                root: int("root").unwrap_or(0).max(0) as u32,
                sync: int("comm_type") == Some(9),
                pg,
            }
        }
        SEND | RECV => {
            let send = n.node_type == SEND;
            let peer = int(if send { "comm_dst" } else { "comm_src" })
                .filter(|&p| p >= 0 && p <= u32::MAX as i64);
            let Some(peer) = peer else {
                c.no_peer += 1;
                return What::Skip;
            };
            let bytes = int("comm_size").filter(|&b| b >= 0);
            if bytes.is_none() {
                c.no_size += 1;
            }
            What::P2p {
                send,
                peer: peer as u32,
                count: bytes.unwrap_or(0) as u64,
                dtype: DataType::Uint8,
                tag: int("comm_tag").unwrap_or(0) as u64,
                pg,
            }
        }
        METADATA | MEM_LOAD | MEM_STORE => What::Skip,
        _ => {
            c.skipped_other += 1;
            What::Skip
        }
    }
}

fn finish_notes(t: &mut RawTrace, c: &Counts) {
    if c.skipped_cpu > 0 {
        t.notes.push(format!(
            "{}: {} CPU-side nodes passed through (the trace holds their GPU kernels)",
            t.source, c.skipped_cpu
        ));
    }
    if c.skipped_other > 0 {
        t.notes.push(format!(
            "{}: {} nodes of unknown type passed through",
            t.source, c.skipped_other
        ));
    }
    if c.no_size > 0 {
        t.notes.push(format!(
            "{}: {} communication nodes state no comm_size (0 bytes assumed)",
            t.source, c.no_size
        ));
    }
    if c.no_kind > 0 {
        t.notes.push(format!(
            "{}: {} COMM_COLL nodes name no collective (passed through)",
            t.source, c.no_kind
        ));
    }
    if c.no_peer > 0 {
        t.notes.push(format!(
            "{}: {} send/recv nodes name no peer (passed through)",
            t.source, c.no_peer
        ));
    }
}

fn stream_hint(n: &EtNode) -> Option<i64> {
    n.attr("stream").and_then(|v| v.as_i64()).or_else(|| {
        (n.attr("is_cpu_op").and_then(|v| v.as_bool()) == Some(false))
            .then(|| n.attr("tid").and_then(|v| v.as_i64()))
            .flatten()
    })
}

/// A decoded `.et` file as a raw trace.
pub(crate) fn from_et(source: &str, f: EtFile) -> RawTrace {
    let mut t = RawTrace {
        source: source.to_string(),
        ..Default::default()
    };
    let meta_int = |k: &str| {
        f.meta_attrs
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.as_i64())
    };
    t.rank_hint = meta_int("rank").and_then(|r| u32::try_from(r).ok());
    t.world_hint = meta_int("world_size")
        .and_then(|r| u32::try_from(r).ok())
        .filter(|&w| w > 0);
    let gpu_side = f
        .nodes
        .iter()
        .any(|n| n.attr("is_cpu_op").and_then(|v| v.as_bool()) == Some(false));
    // proto3 leaves a zero out: in a timed trace a missing duration is 0 µs.
    let timed = f.nodes.iter().any(|n| n.duration_micros.is_some());
    let mut c = Counts::default();
    for n in &f.nodes {
        let attr = |k: &str| n.attr(k).cloned();
        let g = GraphNode {
            id: n.id,
            name: &n.name,
            node_type: n.node_type,
            is_cpu_op: n.attr("is_cpu_op").and_then(|v| v.as_bool()),
            duration_us: n.duration_micros.or(timed.then_some(0)).map(|d| d as f64),
            attr: &attr,
        };
        let what = what_of(&g, gpu_side, &mut c);
        t.nodes.push(RawNode {
            id: g.id,
            name: n.name.clone(),
            data_deps: n.data_deps.clone(),
            ctrl_deps: n.ctrl_deps.clone(),
            what,
            stream_hint: stream_hint(n),
            phase: Phase::Other,
        });
    }
    finish_notes(&mut t, &c);
    t
}

/// `ctrlDeps` is a list in some files and a number in others.
#[derive(Deserialize)]
#[serde(untagged)]
enum IdOrList {
    One(u64),
    Many(Vec<u64>),
}

impl IdOrList {
    fn into_vec(self) -> Vec<u64> {
        match self {
            IdOrList::One(v) => vec![v],
            IdOrList::Many(v) => v,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct WgNode {
    #[serde(rename = "Id")]
    id: u64,
    #[serde(rename = "Name", default)]
    name: String,
    #[serde(rename = "NodeType")]
    node_type: u64,
    #[serde(rename = "ctrlDeps", alias = "ctrl_deps", default)]
    ctrl_deps: Option<IdOrList>,
    #[serde(rename = "data_deps", alias = "dataDeps", default)]
    data_deps: Option<IdOrList>,
    #[serde(default)]
    runtime: Option<f64>,
    #[serde(default)]
    is_cpu_op: Option<bool>,
    #[serde(default)]
    comm_type: Option<i64>,
    #[serde(default)]
    comm_size: Option<i64>,
    #[serde(default)]
    comm_src: Option<i64>,
    #[serde(default)]
    comm_dst: Option<i64>,
    #[serde(default)]
    comm_tag: Option<i64>,
    #[serde(default)]
    pg_name: Option<String>,
}

/// The JSON `workload_graph` form as a raw trace.
pub(crate) fn from_workload_graph(
    source: &str,
    nodes: Vec<WgNode>,
) -> Result<RawTrace, ChakraError> {
    let mut t = RawTrace {
        source: source.to_string(),
        ..Default::default()
    };
    let gpu_side = nodes.iter().any(|n| n.is_cpu_op == Some(false));
    let timed = nodes.iter().any(|n| n.runtime.is_some());
    let mut c = Counts::default();
    for n in nodes {
        let attr = |k: &str| -> Option<AttrVal> {
            let i = |v: Option<i64>| v.map(AttrVal::Int);
            match k {
                "comm_type" => i(n.comm_type),
                "comm_size" => i(n.comm_size),
                "comm_src" => i(n.comm_src),
                "comm_dst" => i(n.comm_dst),
                "comm_tag" => i(n.comm_tag),
                "pg_name" => n.pg_name.clone().map(AttrVal::Str),
                _ => None,
            }
        };
        let g = GraphNode {
            id: n.id,
            name: &n.name,
            node_type: n.node_type,
            is_cpu_op: n.is_cpu_op,
            duration_us: n
                .runtime
                .filter(|r| r.is_finite() && *r >= 0.0)
                .or(timed.then_some(0.0)),
            attr: &attr,
        };
        let what = what_of(&g, gpu_side, &mut c);
        t.nodes.push(RawNode {
            id: n.id,
            name: n.name.clone(),
            data_deps: n.data_deps.map(IdOrList::into_vec).unwrap_or_default(),
            ctrl_deps: n.ctrl_deps.map(IdOrList::into_vec).unwrap_or_default(),
            what,
            stream_hint: None,
            phase: Phase::Other,
        });
    }
    finish_notes(&mut t, &c);
    Ok(t)
}
