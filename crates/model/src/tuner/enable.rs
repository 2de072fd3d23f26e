//! Which algorithms and protocols a communicator may use: NCCL's default
//! LL128 rules, NVLS/CollNet/PAT support, and the user's `NCCL_ALGO` and
//! `NCCL_PROTO` lists (global or per function).

use commlens_core::{Algorithm, LinkKind, OpKind, Protocol};

use super::tables::{Epoch, N_ALGOS, N_PROTOS};
use super::{CommShape, Graph, TuneInput, TuneTable, ALGOS, FUNCS, PROTOS};

/// Parses an `NCCL_ALGO`/`NCCL_PROTO` list for one function: `a,b` enables only
/// those, `^a,b` disables those; `func:list;func:list` per function (2.24+).
pub(super) fn parse_enable_list<T: Copy + PartialEq>(
    spec: &str,
    func: OpKind,
    all: &[T],
    name_of: impl Fn(&[u8]) -> Option<T>,
) -> Vec<bool> {
    let mut chosen = spec;
    if spec.contains(':') {
        chosen = "";
        for part in spec.split(';') {
            if let Some((f, list)) = part.split_once(':') {
                let f = f.trim();
                if OpKind::from_name(f.as_bytes()) == Some(func) || f.eq_ignore_ascii_case(func.name()) {
                    chosen = list;
                }
            } else if chosen.is_empty() {
                chosen = part;
            }
        }
        if chosen.is_empty() {
            return vec![true; all.len()];
        }
    }
    let (negate, list) = match chosen.trim().strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, chosen.trim()),
    };
    let mut on = vec![negate; all.len()];
    for tok in list.split(',') {
        if let Some(x) = name_of(tok.trim().as_bytes()) {
            if let Some(i) = all.iter().position(|&a| a == x) {
                on[i] = !negate;
            }
        }
    }
    on
}

/// Protocol/algorithm enables: LL128 only where NCCL trusts it, NVLS/CollNet
/// only where supported, and the user's `NCCL_ALGO`/`NCCL_PROTO`.
pub(super) fn apply_enables(t: &mut TuneTable, input: &TuneInput, epoch: Epoch) {
    let s = &input.shape;
    for (f, &func) in FUNCS.iter().enumerate() {
        let algo_on = input
            .env
            .algo
            .as_deref()
            .map(|spec| parse_enable_list(spec, func, &ALGOS, Algorithm::from_name))
            .unwrap_or_else(|| vec![true; N_ALGOS]);
        let proto_on = input
            .env
            .proto
            .as_deref()
            .map(|spec| parse_enable_list(spec, func, &PROTOS, Protocol::from_name))
            .unwrap_or_else(|| vec![true; N_PROTOS]);
        for a in 0..N_ALGOS {
            let algo = ALGOS[a];
            let mut disable = !algo_on[a];
            if algo == Algorithm::NvlsTree && t.nnodes == 1 {
                disable = true;
            }
            let nvls_off = input.env.nvls_enable == Some(false) || !s.nvls_support;
            if matches!(algo, Algorithm::Nvls | Algorithm::NvlsTree) && nvls_off {
                disable = true;
            }
            if !s.collnet_support
                && (matches!(algo, Algorithm::CollNetDirect | Algorithm::CollNetChain)
                    || (algo == Algorithm::Nvls && t.nnodes > 1))
            {
                disable = true;
            }
            if s.nvs_count == 0 && algo == Algorithm::CollNetDirect {
                disable = true;
            }
            if algo == Algorithm::Pat && t.nnodes != t.nranks {
                // PAT runs with one GPU per node only.
                disable = true;
            }
            for p in 0..N_PROTOS {
                let mut on = proto_on[p];
                if p == 1 && input.env.proto.is_none() {
                    on = ll128_default(epoch, input.graphs[a].as_ref(), s, func, algo);
                }
                if !on || disable {
                    t.bw[f][a][p] = 0.0;
                }
            }
        }
    }
}

/// LL128 is on by default only on tested hardware: NVLink (or NVLink-bridged)
/// intra-node paths, one GPU generation of sm70/80/90/100, network paths close to the GPU.
fn ll128_default(epoch: Epoch, g: Option<&Graph>, s: &CommShape, func: OpKind, algo: Algorithm) -> bool {
    let Some(g) = g else { return false };
    if epoch == Epoch::Legacy {
        return g.type_inter <= LinkKind::Pxb
            && g.type_intra <= LinkKind::Nvl
            && s.min_sm == s.max_sm
            && (s.min_sm == 70 || s.min_sm == 80);
    }
    let inter_ok = g.type_inter <= LinkKind::Pxb || (s.min_sm >= 90 && g.type_inter <= LinkKind::Pxn);
    let _ = (func, algo);
    inter_ok
        && g.type_intra <= LinkKind::Nvb
        && s.min_sm == s.max_sm
        && match s.min_sm {
            70 | 80 | 90 => true,
            100 => epoch == Epoch::Modern,
            _ => false,
        }
}

