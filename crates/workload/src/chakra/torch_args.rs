//! The arguments of PyTorch ET nodes: tensors inside input/output values (`[tensor_id,
//! storage_id, offset, numel, itemsize, device]`, in lists at any depth), and what a
//! `record_param_comms` node says about its collective (name, process group, rank, job size,
//! element counts and type) in either schema: `attrs` (1.1) or positional `inputs` (1.0).

use super::pytorch::N;
use super::raw::{coll_kind_from_name, dtype_from_torch, dtype_of_width, What};
use commlens_core::{DataType, OpKind, RedOp};
use serde_json::Value;
use std::collections::HashMap;

/// A tensor value `[tensor_id, storage_id, offset, numel, itemsize(, device)]`.
fn tensor(v: &Value) -> Option<(u64, u64, u64)> {
    let a = v.as_array()?;
    if !(5..=6).contains(&a.len()) || !a[..5].iter().all(|x| x.is_i64() || x.is_u64()) {
        return None;
    }
    if a.len() == 6 && !a[5].is_string() {
        return None;
    }
    Some((a[1].as_u64()?, a[3].as_u64()?, a[4].as_u64()?))
}

/// Every tensor inside a value (lists of tensors, lists of lists), depth-bounded.
fn tensors(v: &Value, depth: u32, out: &mut Vec<(u64, u64, u64)>) {
    if let Some(t) = tensor(v) {
        out.push(t);
    } else if let (Some(a), true) = (v.as_array(), depth < 6) {
        for x in a {
            tensors(x, depth + 1, out);
        }
    }
}

pub(super) fn all_tensors(vals: &[Value]) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for v in vals {
        tensors(v, 0, &mut out);
    }
    out
}

/// Elements, element width and element type of the tensors of some values.
pub(super) fn size_of(vals: &[Value], types: &[String]) -> (u64, Option<u64>, Option<DataType>) {
    let ts = all_tensors(vals);
    let elems = ts.iter().fold(0u64, |a, t| a.saturating_add(t.1));
    let width = ts.first().map(|t| t.2);
    let dtype = types
        .iter()
        .find(|t| t.contains("Tensor"))
        .and_then(|t| dtype_from_torch(t));
    (elems, width, dtype)
}

pub(super) fn as_u32(v: Option<&Value>) -> Option<u32> {
    v.and_then(|v| v.as_i64())
        .and_then(|x| u32::try_from(x).ok())
}

/// What a `record_param_comms` node says.
pub(super) struct Rpc {
    pub(super) coll: String,
    pub(super) pg: Option<String>,
    pub(super) rank: Option<u32>,
    pub(super) world: Option<u32>,
    pub(super) rank_start_stride: Option<(u32, u32)>,
    pub(super) in_elems: u64,
    pub(super) out_elems: u64,
    pub(super) dtype: Option<DataType>,
}

pub(super) fn read_rpc(n: &N, backend_names: &HashMap<i64, String>) -> Option<Rpc> {
    let c = n
        .in_types
        .iter()
        .position(|t| t == "String")
        .or_else(|| n.in_vals.iter().position(Value::is_string))?;
    let coll = n
        .attrs
        .get("collective_name")
        .and_then(|v| v.as_str())
        .unwrap_or(n.in_vals.get(c)?.as_str()?)
        .to_string();
    let pg_val = if c >= 2 { n.in_vals.get(c - 2) } else { None };
    let pg = n
        .attrs
        .get("pg_name")
        .and_then(|v| v.as_str().map(str::to_string))
        .or_else(|| match pg_val {
            Some(Value::Array(a)) => a.first().and_then(|v| v.as_str()).map(str::to_string),
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(x)) => x.as_i64().map(|id| {
                backend_names
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| format!("local:{id}"))
            }),
            _ => None,
        });
    let rank = if c >= 1 {
        as_u32(n.in_vals.get(c - 1))
    } else {
        None
    };
    let len = n.in_vals.len();
    let world = as_u32(n.attrs.get("pg_size")).or(if len > c + 5 {
        as_u32(n.in_vals.get(c + 5))
    } else if len > c + 3 {
        as_u32(n.in_vals.get(c + 3))
    } else {
        None
    });
    let rank_start_stride = match (
        n.attrs.get("global_rank_start"),
        n.attrs.get("global_rank_stride"),
    ) {
        (Some(a), Some(b)) => as_u32(Some(a)).zip(as_u32(Some(b))),
        _ if len > c + 5 => as_u32(n.in_vals.get(c + 3)).zip(as_u32(n.in_vals.get(c + 4))),
        _ => None,
    };
    let tensor_args = c.saturating_sub(3);
    let (ie, iw, it) = size_of(
        &n.in_vals[..tensor_args.min(len)],
        &n.in_types[..tensor_args.min(n.in_types.len())],
    );
    let (oe, ow, ot) = size_of(&n.out_vals, &n.out_types);
    let in_elems = n
        .attrs
        .get("in_msg_nelems")
        .and_then(|v| v.as_u64())
        .unwrap_or(ie);
    let out_elems = n
        .attrs
        .get("out_msg_nelems")
        .and_then(|v| v.as_u64())
        .unwrap_or(oe);
    let dtype = n
        .attrs
        .get("dtype")
        .and_then(|v| v.as_str())
        .and_then(dtype_from_torch)
        .or(it)
        .or(ot)
        .or_else(|| iw.or(ow).and_then(dtype_of_width));
    Some(Rpc {
        coll,
        pg,
        rank,
        world,
        rank_start_stride,
        in_elems,
        out_elems,
        dtype,
    })
}

pub(super) fn what_of_rpc(r: &Rpc) -> Option<What> {
    let name = r.coll.to_ascii_lowercase();
    if name.contains("barrier") {
        return Some(What::Coll {
            kind: OpKind::AllReduce,
            count: 1,
            dtype: DataType::Uint8,
            redop: Some(RedOp::Sum),
            root: 0,
            sync: true,
            pg: r.pg.clone(),
        });
    }
    let kind = coll_kind_from_name(&name)?;
    let dtype = r.dtype.unwrap_or(DataType::Uint8);
    if kind.is_p2p() {
        return Some(What::P2p {
            send: kind == OpKind::Send,
            peer: r.rank.unwrap_or(0),
            count: r.in_elems.max(r.out_elems),
            dtype,
            tag: 0,
            pg: r.pg.clone(),
        });
    }
    let count = match kind {
        OpKind::ReduceScatter if r.out_elems > 0 => r.out_elems,
        _ if r.in_elems > 0 => r.in_elems,
        _ => r.out_elems,
    };
    let red = matches!(
        kind,
        OpKind::AllReduce | OpKind::ReduceScatter | OpKind::Reduce
    );
    Some(What::Coll {
        kind,
        count,
        dtype,
        redop: red.then_some(RedOp::Sum),
        root: if kind == OpKind::Broadcast {
            r.rank.unwrap_or(0)
        } else {
            0
        },
        sync: false,
        pg: r.pg.clone(),
    })
}
