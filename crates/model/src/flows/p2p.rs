//! Point-to-point plans: AllToAll and grouped Send/Recv (Gather and Scatter
//! are groups of pairs too).
//!
//! NCCL runs these as grouped sends and receives outside the collective
//! algorithms. AllToAll is scheduled in rounds: in round `i` (1 ≤ i < n)
//! every rank sends to rank `+ i` and receives from rank `− i`; round `i` runs
//! on channel `(i − 1) mod channels`, and its flows carry step `i − 1` (NCCL's
//! issue order) but wait for nothing, since grouped transfers overlap. Network
//! flows whose source is off the destination NIC's rail go through a PXN proxy
//! (PXN was made for exactly this pattern). Each flow is one pair's whole
//! transfer; [`FlowPlan::pieces`] says how many `NCCL_P2P_*_CHUNKSIZE` pieces
//! it is posted as.

use commlens_core::{OpKind, Protocol};

use super::{CollSpec, Deps, FlowPlan, Placement, Route, Sink};
use crate::tuner::NcclEnv;

/// AllToAll: every rank sends `spec.bytes` to every other rank.
pub(super) fn alltoall(spec: &CollSpec, pl: &Placement, env: &NcclEnv) -> FlowPlan {
    let n = pl.nranks;
    let mut plan = FlowPlan::empty(OpKind::AllToAll, None, Protocol::Simple, n, env);
    let ch = spec.n_channels.clamp(1, (n - 1).max(1));
    plan.channels = ch;
    plan.chunks = 1;
    let mut count = 0u64;
    for i in 1..n {
        for r in 0..n {
            count += pl.route(r, (r + i) % n).flows();
        }
    }
    plan.flows.reserve_exact(count as usize);
    let mut sink = Sink { flows: &mut plan.flows };
    for i in 1..n {
        for r in 0..n {
            let route: Route = pl.route(r, (r + i) % n);
            sink.routed(r, route, spec.bytes, i - 1, 0, (i - 1) % ch, Deps::NONE);
        }
    }
    plan.finish()
}

/// Grouped Send/Recv pairs `(src, dst, bytes)`: one flow each (two through a
/// PXN proxy); pair `i` runs on channel `i mod channels`.
pub(super) fn pairs(pairs: &[(u32, u32, u64)], pl: &Placement, n_channels: u32, env: &NcclEnv) -> FlowPlan {
    let mut plan = FlowPlan::empty(OpKind::SendRecv, None, Protocol::Simple, pl.nranks, env);
    let live = || pairs.iter().filter(|&&(s, d, _)| s != d && s < pl.nranks && d < pl.nranks);
    let ch = n_channels.clamp(1, live().count().max(1) as u32);
    plan.channels = ch;
    plan.chunks = 1;
    let count: u64 = live().map(|&(s, d, _)| pl.route(s, d).flows()).sum();
    plan.flows.reserve_exact(count as usize);
    let mut sink = Sink { flows: &mut plan.flows };
    for (i, &(s, d, b)) in live().enumerate() {
        sink.routed(s, pl.route(s, d), b, 0, 0, i as u32 % ch, Deps::NONE);
    }
    plan.finish()
}
