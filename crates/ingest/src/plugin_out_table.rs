//! Building the canonical table of one decoded plugin trace: devices (CUDA
//! ordinal, or rank order within a communicator id), communicator handles, one
//! [`CollOp`] per Coll/P2p/CeColl event with its API event's count and type, and
//! GPU spans from the KernelCh timers mapped per device onto the CPU clock.
//!
//! A p2p whose peer is its own rank (NCCL's all-to-all sends to itself) gets no
//! KernelCh, and from its START on the handle's KernelCh timers are not the
//! operations' own: NCCL (2.28) counts the self copy in the kernel's per-channel
//! work counter but not in the host's, so every later KernelCh carries the timers
//! of an earlier work of the channel (spans before the CPU enqueue, a 6 s stall
//! shown as 5 µs). The same happens without a self p2p (8 ranks, NCCL 2.28.9):
//! the giveaway is then a receive ProxyOp that stops long after the kernel
//! said it was done. From the first such operation on, the handle's
//! operations keep no GPU span ([`lagged_from`]; counted in
//! `PluginReport::ops_gpu_desync`). GPU timers are mapped onto the CPU clock
//! with drift allowed for ([`crate::gpu_clock`]).
//! Re-exported as `plugin_out::trace_to_table`.

use crate::gpu_clock::ClockMap;
use crate::plugin_out::{Fields, PluginTrace, FLAG_PARENT_FOREIGN};
use commlens_core::model::{CommIdx, DevIdx, GpuSpan, ProcIdx};
use commlens_core::{Algorithm, CollOp, CommMember, DataType, Device, OpKind, OpTable, Process, Protocol};
use std::collections::{BTreeMap, HashMap};

const T_COLL: u8 = 1;
const T_P2P: u8 = 2;
const T_CE_COLL: u8 = 12;

/// Per device: the GPU → CPU clock map from every KernelCh observation (the CPU
/// time the proxy saw a timer, and the timer), drift allowed for (see [`crate::gpu_clock`]).
fn gpu_clocks(t: &PluginTrace, dev_of_comm: &[usize], n_dev: usize) -> Vec<ClockMap> {
    let mut obs: Vec<Vec<(u64, u64)>> = vec![Vec::new(); n_dev];
    for e in &t.events {
        let Fields::KernelCh { ptimer, .. } = e.fields else { continue };
        let Some(&d) = e.comm.checked_sub(1).and_then(|i| dev_of_comm.get(i as usize)) else { continue };
        obs[d].push((e.start_ns, ptimer));
        if let (Some(g), Some(seen)) = (e.gpu_stop, e.gpu_stop_seen_ns) {
            obs[d].push((seen, g));
        }
    }
    obs.into_iter().map(ClockMap::from_observations).collect()
}

/// How much later than its KernelCh stop an operation's receive ProxyOp may
/// stop before the kernel timers are taken for another work's. Both times are
/// the proxy thread's, so its own delays cancel; on our captures the largest
/// honest gap is 20 ms and the contradicting ones are 6 s.
pub(crate) const PROXY_AFTER_KERNEL_NS: u64 = 100_000_000;

/// Per communicator index: the record number from which its KernelCh timers
/// are not the operations' own (see the module doc): its first self p2p
/// START, or its first operation whose receive ProxyOps stopped more than
/// [`PROXY_AFTER_KERNEL_NS`] after its KernelCh said the kernel had finished
/// (NCCL 2.28.9 on 8 ranks: a 4 KiB all-reduce stalled 6 s on a late rank
/// shows a 4 µs kernel on four of the waiting ranks, while their receive
/// ProxyOps stop 6 s later).
pub(crate) fn lagged_from(t: &PluginTrace) -> HashMap<u32, u64> {
    let mut from: HashMap<u32, u64> = HashMap::new();
    let mut first = |comm: u32, record: u64| {
        let r = from.entry(comm).or_insert(record);
        *r = (*r).min(record);
    };
    // Per operation id: (last KernelCh stop seen, last receive ProxyOp stop).
    let mut seen: HashMap<u64, (u64, u64)> = HashMap::new();
    for e in &t.events {
        match (&e.fields, e.flags & FLAG_PARENT_FOREIGN == 0) {
            (Fields::KernelCh { .. }, true) => {
                if let Some(s) = e.gpu_stop_seen_ns {
                    let v = seen.entry(e.parent).or_default();
                    v.0 = v.0.max(s);
                }
            }
            (Fields::ProxyOp { is_send: false, .. }, true) => {
                if let Some(s) = e.stop_ns {
                    let v = seen.entry(e.parent).or_default();
                    v.1 = v.1.max(s);
                }
            }
            _ => {}
        }
    }
    for e in &t.events {
        match (e.ty, &e.fields) {
            (T_P2P, Fields::P2p { peer, .. }) if t.comm(e.comm).is_some_and(|c| c.rank == *peer) => first(e.comm, e.record),
            (T_COLL | T_P2P, _) => {
                if let Some(&(kernel, proxy)) = seen.get(&e.id) {
                    if kernel != 0 && proxy > kernel.saturating_add(PROXY_AFTER_KERNEL_NS) {
                        first(e.comm, e.record);
                    }
                }
            }
            _ => {}
        }
    }
    from
}

/// The canonical table of one trace (one process): devices, communicator
/// handles, and one [`CollOp`] per Coll/P2p/CeColl event, in record order.
/// Not yet assembled (see [`load_plugin_outputs`](crate::plugin_out::load_plugin_outputs)).
pub fn trace_to_table(t: &mut PluginTrace) -> OpTable {
    let mut table = OpTable { sources: vec![t.path.display().to_string()], ..Default::default() };
    table.processes.push(Process { host: t.header.host.clone(), pid: t.header.pid, nccl_version: None });
    // Devices: the CUDA ordinal the plugin saw at init; without it, handles of one
    // communicator id are on different devices, in rank order.
    let mut slot_of: HashMap<(u64, i32), usize> = HashMap::new();
    let mut by_hash: BTreeMap<u64, Vec<i32>> = BTreeMap::new();
    for c in t.comms.iter().filter(|c| c.cuda_dev.is_none()) {
        by_hash.entry(c.comm_hash).or_default().push(c.rank);
    }
    for (h, mut ranks) in by_hash {
        ranks.sort_unstable();
        for (i, r) in ranks.into_iter().enumerate() {
            slot_of.insert((h, r), i);
        }
    }
    let mut dev_key: HashMap<(bool, i64), usize> = HashMap::new();
    let mut dev_of_comm = Vec::with_capacity(t.comms.len());
    for c in &t.comms {
        let key = match c.cuda_dev {
            Some(d) => (true, d as i64),
            None => (false, slot_of[&(c.comm_hash, c.rank)] as i64),
        };
        let d = *dev_key.entry(key).or_insert_with(|| {
            let (cuda_dev, bus_id) = (c.cuda_dev.map(|d| d as u32), c.bus_id.map(|b| b as u64));
            let proc = ProcIdx(0);
            table.devices.push(Device { proc, cuda_dev, nvml_dev: None, bus_id, global_rank: None, local_rank: None });
            table.devices.len() - 1
        });
        dev_of_comm.push(d);
        let session = u64::from_str_radix(&t.header.session, 16).unwrap_or(0);
        let mut m = CommMember::new(ProcIdx(0), (session << 32) | c.index as u64);
        m.comm_id = Some(c.comm_hash);
        m.nranks = u32::try_from(c.nranks).ok();
        m.rank = u32::try_from(c.rank).ok();
        m.n_nodes = u32::try_from(c.n_nodes).ok();
        m.device = Some(DevIdx(d as u32));
        m.init_complete = true;
        table.comms.push(m);
    }
    table.per_rank = vec![commlens_core::RankOps::new(); table.devices.len()];
    let clocks = gpu_clocks(t, &dev_of_comm, table.devices.len());
    let mut kernels: HashMap<u64, (u64, u64)> = HashMap::new();
    for e in &t.events {
        if let (Fields::KernelCh { ptimer, .. }, false) = (&e.fields, e.flags & FLAG_PARENT_FOREIGN != 0) {
            let k = kernels.entry(e.parent).or_insert((u64::MAX, 0));
            if *ptimer != 0 {
                k.0 = k.0.min(*ptimer);
            }
            k.1 = k.1.max(e.gpu_stop.unwrap_or(0));
        }
    }
    let lagged = lagged_from(t);
    let mut p2p_seq: HashMap<(u32, u32), u64> = HashMap::new();
    let (mut ops, mut with_gpu, mut no_comm, mut unknown, mut desync) = (0, 0, 0, 0, 0);
    for e in &t.events {
        if !matches!(e.ty, T_COLL | T_P2P | T_CE_COLL) {
            continue;
        }
        let Some(ci) = e.comm.checked_sub(1).map(|i| i as usize).filter(|&i| i < t.comms.len()) else {
            no_comm += 1;
            continue;
        };
        let api = t.parent_of(e).map(|p| &p.fields);
        let (func, own_count, own_dtype) = match e.fields {
            Fields::Coll { func, count, dtype, .. } | Fields::CeColl { func, count, dtype, .. } => (func, count, dtype),
            Fields::P2p { func, count, dtype, .. } => (func, count, dtype),
            _ => continue,
        };
        let Some(kind) = OpKind::from_name(t.string(func).as_bytes()) else {
            unknown += 1;
            continue;
        };
        // The API event has the user's count and type (the Coll of AllGather/Broadcast counts bytes).
        let (count, dtype, stream, api_start) = match api {
            Some(Fields::CollApi { count, dtype, stream, .. }) | Some(Fields::P2pApi { count, dtype, stream, .. }) => {
                (*count, *dtype, Some(*stream), t.parent_of(e).map(|p| p.start_ns))
            }
            _ => (own_count, own_dtype, None, None),
        };
        let dt = DataType::from_name(t.string(dtype)).unwrap_or(DataType::Unknown(-1));
        let d = dev_of_comm[ci];
        let cm = &mut table.comms[ci];
        #[rustfmt::skip]
        let mut op = CollOp {
            proc: ProcIdx(0), dev: DevIdx(d as u32), comm: CommIdx(ci as u32), comm_seq: cm.n_ops,
            tid: t.threads.get(&e.thread).copied().unwrap_or(0), seq: 0, kind, count, dtype: dt,
            bytes: dt.size_bytes().map_or(0, |s| s.saturating_mul(count)), redop: None, root: None, peer: None, algo: None,
            proto: None, channels: None, sendbuff: 0, recvbuff: 0, stream,
            cpu_ts_ns: Some(t.epoch_ns(api_start.unwrap_or(e.start_ns))), gpu: None, kernel: None, line: e.record,
            recovered: false,
        };
        cm.note_op(kind);
        let nch = match e.fields {
            Fields::Coll { seq, sendbuff, recvbuff, root, n_channels, algo, proto, .. } => {
                op.seq = seq;
                (op.sendbuff, op.recvbuff) = (sendbuff, recvbuff);
                op.root = u32::try_from(root).ok().filter(|_| kind.is_rooted());
                op.algo = Algorithm::from_name(t.string(algo).as_bytes());
                op.proto = Protocol::from_name(t.string(proto).as_bytes());
                n_channels
            }
            Fields::CeColl { seq, sendbuff, recvbuff, root, .. } => {
                op.seq = seq;
                (op.sendbuff, op.recvbuff) = (sendbuff, recvbuff);
                op.root = u32::try_from(root).ok().filter(|_| kind.is_rooted());
                0
            }
            Fields::P2p { buff, peer, n_channels, .. } => {
                let s = p2p_seq.entry((e.comm, func)).or_default();
                (op.seq, *s) = (*s, *s + 1);
                op.peer = u32::try_from(peer).ok();
                if kind == OpKind::Recv {
                    op.recvbuff = buff
                } else {
                    op.sendbuff = buff
                }
                n_channels
            }
            _ => 0,
        };
        op.channels = (nch > 0).then(|| (0, nch as u16 - 1));
        let own_timers = lagged.get(&e.comm).is_none_or(|&r| e.record < r);
        if !own_timers && kernels.contains_key(&e.id) {
            desync += 1;
        }
        if let (Some(&(g0, g1)), true) = (kernels.get(&e.id), own_timers) {
            if let (true, Some(o)) = (g0 != u64::MAX && g1 >= g0, clocks[d].offset_for(g0)) {
                let to_epoch = |g: u64| t.epoch_ns((g as i64).wrapping_add(o) as u64);
                op.gpu = Some(GpuSpan { start_ns: to_epoch(g0), end_ns: to_epoch(g1) });
                with_gpu += 1;
            }
        }
        ops += 1;
        table.per_rank[d].push(op);
    }
    let r = &mut t.report;
    (r.ops, r.ops_with_gpu, r.ops_without_comm, r.unknown_funcs) = (ops, with_gpu, no_comm, unknown);
    r.ops_gpu_desync = desync;
    table
}
