//! PyTorch execution traces (JSON "PyTorch ET", schemas 1.0.x and 1.x-chakra.0.0.4) into a
//! [`RawTrace`]. The trace is a call tree of CPU ops; tasks are its outermost operators (nodes
//! with an `op_schema` and no operator above them), in start order (`rf_id`). A collective is
//! the operator above a `record_param_comms` node (its collective name, process group, sizes
//! and element type come from that node: `attrs` in the new schema, positional `inputs` in the
//! old); `wait` records make the next compute wait for the communication issued so far.
//! Dependencies follow tensor storages (the last task that wrote a storage another reads), and
//! a collective waits for the compute launched before it (the NCCL stream syncs with the
//! current stream). `## process_group:init ##` declares groups.

use super::raw::{
    coll_kind_from_name, compute_kind, dtype_of_width, PgDecl, RawNode, RawTrace, What,
};
use super::torch_args::{all_tensors, as_u32, read_rpc, size_of, what_of_rpc};
use super::ChakraError;
use crate::Phase;
use commlens_core::{DataType, OpKind, RedOp};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

#[derive(Deserialize)]
pub(crate) struct PtAttr {
    #[serde(default)]
    name: String,
    #[serde(default)]
    value: Value,
}

/// One node as either schema writes it.
#[derive(Deserialize)]
pub(crate) struct PtNode {
    id: i64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    parent: Option<i64>,
    #[serde(default)]
    ctrl_deps: Option<Value>,
    #[serde(default)]
    rf_id: Option<i64>,
    #[serde(default)]
    tid: Option<i64>,
    #[serde(default)]
    op_schema: Option<String>,
    #[serde(default)]
    inputs: Option<Value>,
    #[serde(default)]
    input_types: Option<Vec<Value>>,
    #[serde(default)]
    outputs: Option<Value>,
    #[serde(default)]
    output_types: Option<Vec<Value>>,
    #[serde(default)]
    attrs: Option<Vec<PtAttr>>,
}

/// A node normalised across schemas.
pub(super) struct N {
    pub(super) id: i64,
    pub(super) name: String,
    pub(super) parent: Option<i64>,
    pub(super) order: i64,
    pub(super) op: bool,
    pub(super) in_vals: Vec<Value>,
    pub(super) in_types: Vec<String>,
    pub(super) out_vals: Vec<Value>,
    pub(super) out_types: Vec<String>,
    pub(super) attrs: HashMap<String, Value>,
}

fn split_io(v: Option<Value>, types: Option<Vec<Value>>) -> (Vec<Value>, Vec<String>) {
    let strs = |t: Vec<Value>| {
        t.into_iter()
            .map(|x| x.as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    match v {
        Some(Value::Object(mut m)) => {
            let vals = match m.remove("values") {
                Some(Value::Array(a)) => a,
                _ => Vec::new(),
            };
            let ts = match m.remove("types") {
                Some(Value::Array(a)) => strs(a),
                _ => Vec::new(),
            };
            (vals, ts)
        }
        Some(Value::Array(a)) => (a, strs(types.unwrap_or_default())),
        _ => (Vec::new(), Vec::new()),
    }
}

fn normalise(p: PtNode) -> N {
    let mut attrs: HashMap<String, Value> = HashMap::new();
    for a in p.attrs.unwrap_or_default() {
        attrs.insert(a.name, a.value);
    }
    let parent = p.parent.or_else(|| match &p.ctrl_deps {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::Array(a)) => a.first().and_then(|v| v.as_i64()),
        _ => None,
    });
    let rf = p
        .rf_id
        .or_else(|| attrs.get("rf_id").and_then(|v| v.as_i64()));
    let schema = p.op_schema.or_else(|| {
        attrs
            .get("op_schema")
            .and_then(|v| v.as_str().map(str::to_string))
    });
    let op = match &schema {
        Some(s) => !s.is_empty(),
        None => p.name.contains("::") && !p.name.starts_with("##"),
    } && p.name != "record_param_comms";
    let (in_vals, in_types) = split_io(p.inputs, p.input_types);
    let (out_vals, out_types) = split_io(p.outputs, p.output_types);
    let _ = p.tid;
    N {
        id: p.id,
        name: p.name,
        parent: parent.filter(|&q| q != p.id),
        order: rf.unwrap_or(p.id),
        op,
        in_vals,
        in_types,
        out_vals,
        out_types,
        attrs,
    }
}

fn phase_of(name: &str) -> Option<Phase> {
    let l = name.to_ascii_lowercase();
    if l.contains("## forward") {
        Some(Phase::Forward)
    } else if l.contains("## backward") || l.starts_with("autograd::engine") {
        Some(Phase::InputGrad)
    } else if l.contains("## optimizer") || l.starts_with("optimizer.step") {
        Some(Phase::Optimizer)
    } else {
        None
    }
}

enum Item {
    Op(usize),
    Comm { at: usize, what: What },
    Wait,
}

/// Parses the nodes of a PyTorch ET document.
pub(crate) fn from_pytorch(source: &str, nodes: Vec<PtNode>) -> Result<RawTrace, ChakraError> {
    let ns: Vec<N> = nodes.into_iter().map(normalise).collect();
    let mut idx: HashMap<i64, usize> = HashMap::with_capacity(ns.len());
    for (i, n) in ns.iter().enumerate() {
        if idx.insert(n.id, i).is_some() {
            return Err(ChakraError::Graph {
                file: source.to_string(),
                message: format!("node id {} appears twice", n.id),
            });
        }
    }
    let parent = |i: usize| ns[i].parent.and_then(|p| idx.get(&p).copied());
    // Per node: outermost operator at or above it, phase, profiler step; parents first.
    let mut outer: Vec<Option<Option<usize>>> = vec![None; ns.len()];
    let mut phase: Vec<Option<Phase>> = vec![None; ns.len()];
    let mut step: Vec<Option<u32>> = vec![None; ns.len()];
    let mut stamp: Vec<usize> = vec![usize::MAX; ns.len()];
    for start in 0..ns.len() {
        let mut path = Vec::new();
        let mut cur = Some(start);
        while let Some(i) = cur {
            if outer[i].is_some() || stamp[i] == start {
                break;
            }
            stamp[i] = start;
            path.push(i);
            cur = parent(i);
        }
        for &i in path.iter().rev() {
            let p = parent(i).filter(|&p| outer[p].is_some());
            let (po, pp, ps) = p.map_or((None, None, None), |p| {
                (outer[p].flatten(), phase[p], step[p])
            });
            outer[i] = Some(po.or((ns[i].op).then_some(i)));
            phase[i] = phase_of(&ns[i].name).or(pp);
            step[i] = ns[i]
                .name
                .strip_prefix("ProfilerStep#")
                .and_then(|s| s.parse().ok())
                .or(ps);
        }
    }
    let outer: Vec<Option<usize>> = outer.into_iter().map(Option::flatten).collect();
    // Process groups declared up front.
    let mut t = RawTrace {
        source: source.to_string(),
        ..Default::default()
    };
    let mut backend_names: HashMap<i64, String> = HashMap::new();
    for n in ns.iter().filter(|n| n.name.contains("process_group:init")) {
        let Some(text) = n.in_vals.first().and_then(|v| v.as_str()) else {
            continue;
        };
        let Ok(Value::Array(pgs)) = serde_json::from_str::<Value>(text) else {
            t.notes.push(format!(
                "{source}: node {}: process-group list is not JSON",
                n.id
            ));
            continue;
        };
        for pg in pgs {
            let Some(name) = pg.get("pg_name").and_then(|v| {
                v.as_str()
                    .map(str::to_string)
                    .or_else(|| v.as_i64().map(|x| x.to_string()))
            }) else {
                continue;
            };
            if let Some(b) = pg.get("backend_id").and_then(|v| v.as_i64()) {
                backend_names.insert(b, name.clone());
            }
            let ranks = pg
                .get("ranks")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|r| as_u32(Some(r))).collect())
                .unwrap_or_default();
            t.pgs.push(PgDecl {
                name,
                ranks,
                size: as_u32(pg.get("group_size")),
            });
        }
    }
    // Items in start order.
    let mut items: Vec<(i64, Item)> = Vec::new();
    let mut comm_owner: HashMap<usize, What> = HashMap::new();
    let mut ranks_seen: HashMap<u32, usize> = HashMap::new();
    let mut unknown_colls = 0usize;
    for (i, n) in ns.iter().enumerate() {
        if n.name != "record_param_comms" {
            continue;
        }
        let Some(r) = read_rpc(n, &backend_names) else {
            unknown_colls += 1;
            continue;
        };
        if r.coll.eq_ignore_ascii_case("wait") {
            items.push((n.order, Item::Wait));
            continue;
        }
        if let Some(w) = r.world.filter(|&w| w > 0) {
            t.world_hint = Some(t.world_hint.map_or(w, |x| x.max(w)));
        }
        if let (Some(pg), Some((s, st)), Some(w)) = (&r.pg, r.rank_start_stride, r.world) {
            if st > 0
                && w <= super::MAX_WORLD
                && !t.pgs.iter().any(|p| &p.name == pg && !p.ranks.is_empty())
            {
                let ranks = (0..w)
                    .map(|k| s.saturating_add(k.saturating_mul(st)))
                    .collect();
                t.pgs.push(PgDecl {
                    name: pg.clone(),
                    ranks,
                    size: Some(w),
                });
            }
        }
        let Some(what) = what_of_rpc(&r) else {
            unknown_colls += 1;
            continue;
        };
        if let (Some(rk), What::Coll { kind, .. }) = (r.rank, &what) {
            if *kind != OpKind::Broadcast {
                *ranks_seen.entry(rk).or_default() += 1;
            }
        }
        match outer[i] {
            Some(o) => {
                comm_owner.entry(o).or_insert(what);
            }
            None => items.push((n.order, Item::Comm { at: i, what })),
        }
    }
    if unknown_colls > 0 {
        t.notes.push(format!(
            "{source}: {unknown_colls} record_param_comms nodes name no known collective"
        ));
    }
    t.rank_hint = ranks_seen
        .into_iter()
        .max_by_key(|&(r, c)| (c, std::cmp::Reverse(r)))
        .map(|(r, _)| r);
    for (i, n) in ns.iter().enumerate() {
        if outer[i] != Some(i) {
            continue;
        }
        match comm_owner.remove(&i) {
            Some(what) => items.push((n.order, Item::Comm { at: i, what })),
            None => {
                // A c10d collective without its record (older PyTorch): sizes from its tensors.
                let kind = n
                    .name
                    .starts_with("c10d::")
                    .then(|| coll_kind_from_name(&n.name))
                    .flatten();
                match kind.filter(|k| !k.is_p2p()) {
                    Some(kind) => {
                        let (elems, width, dt) = size_of(&n.in_vals, &n.in_types);
                        let dtype = dt
                            .or_else(|| width.and_then(dtype_of_width))
                            .unwrap_or(DataType::Uint8);
                        let red = matches!(
                            kind,
                            OpKind::AllReduce | OpKind::ReduceScatter | OpKind::Reduce
                        );
                        let what = What::Coll {
                            kind,
                            count: elems,
                            dtype,
                            redop: red.then_some(RedOp::Sum),
                            root: 0,
                            sync: false,
                            pg: None,
                        };
                        items.push((n.order, Item::Comm { at: i, what }));
                    }
                    None => items.push((n.order, Item::Op(i))),
                }
            }
        }
    }
    items.sort_by_key(|(o, _)| *o);
    // Tasks with storage-based dependencies.
    let mut writer: HashMap<u64, u64> = HashMap::new();
    let mut last_compute: Option<u64> = None;
    let mut last_comm: Option<u64> = None;
    let mut waiting = false;
    let mut cur_step: Option<u32> = None;
    let mut iter = 0u32;
    for (_, item) in items {
        let at = match &item {
            Item::Op(i) | Item::Comm { at: i, .. } => *i,
            Item::Wait => {
                waiting = true;
                continue;
            }
        };
        if let Some(s) = step[at] {
            if cur_step.is_some_and(|c| c != s) {
                let id = t.nodes.len() as u64;
                t.nodes.push(RawNode {
                    id,
                    name: format!("iteration {iter} end"),
                    data_deps: vec![],
                    ctrl_deps: vec![],
                    what: What::IterEnd { iter },
                    stream_hint: None,
                    phase: Phase::Other,
                });
                iter += 1;
            }
            cur_step = Some(s);
        }
        let n = &ns[at];
        let id = t.nodes.len() as u64;
        let mut deps: Vec<u64> = Vec::new();
        for (storage, _, _) in all_tensors(&n.in_vals) {
            if let Some(&w) = writer.get(&storage) {
                if !deps.contains(&w) {
                    deps.push(w);
                }
            }
        }
        let what = match item {
            Item::Op(_) => {
                if waiting {
                    deps.extend(last_comm);
                    waiting = false;
                }
                last_compute = Some(id);
                What::Compute {
                    kind: compute_kind(&n.name),
                    time_us: None,
                    flops: 0.0,
                    mem_bytes: 0.0,
                }
            }
            Item::Comm { what, .. } => {
                deps.extend(last_compute);
                last_comm = Some(id);
                what
            }
            Item::Wait => unreachable!("handled above"),
        };
        for (storage, _, _) in all_tensors(&n.out_vals) {
            writer.insert(storage, id);
        }
        let ph = match (&what, phase[at]) {
            (What::Coll { .. }, Some(Phase::InputGrad)) => Phase::WeightGrad,
            (_, p) => p.unwrap_or(Phase::Other),
        };
        t.nodes.push(RawNode {
            id,
            name: n.name.clone(),
            data_deps: deps,
            ctrl_deps: vec![],
            what,
            stream_hint: None,
            phase: ph,
        });
    }
    if cur_step.is_some() {
        let id = t.nodes.len() as u64;
        t.nodes.push(RawNode {
            id,
            name: format!("iteration {iter} end"),
            data_deps: vec![],
            ctrl_deps: vec![],
            what: What::IterEnd { iter },
            stream_hint: None,
            phase: Phase::Other,
        });
    }
    for p in &t.pgs {
        if let Some(s) = p.size {
            t.world_hint = Some(t.world_hint.map_or(s, |x| x.max(s)));
        }
    }
    Ok(t)
}
