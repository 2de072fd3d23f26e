//! The `extern "C"` callbacks behind the exported function tables: `init`,
//! `startEvent`, `stopEvent`, `recordEventState`, `finalize` for API v4 – v7.
//!
//! Each callback is wrapped in [`guard`] (a panic becomes `ncclInternalError`,
//! never an unwind into NCCL). `startEvent` reads only the descriptor member
//! that the event type selects, decides whether the context and parent are
//! this process's (PXN: a ProxyOp whose `pid` differs carries another
//! process's context and parent, which are recorded as numbers and never
//! dereferenced), and appends one START record. `stopEvent` and
//! `recordEventState` append STOP/STATE records keyed by the handle value;
//! `eStateArgs` may be NULL. Starts of a local context that matter to the
//! in-flight view (Coll, P2p, CeColl, KernelCh, ProxyOp, ProxyStep) and
//! KernelChStop states also update it ([`crate::inflight`]), and so do the stops of
//! the ProxyOps the in-flight view asked to be told about (lagged handles).
//!
//! # Safety
//! The `unsafe extern "C"` functions are called by NCCL under the profiler ABI:
//! every pointer argument is NULL or valid for the duration of the call, and a
//! descriptor's union member matches its `type`. NULL pointers are checked here.

#![allow(clippy::missing_safety_doc)]

use crate::abi::*;
use crate::config::config;
use crate::inflight::{self, Hook, Task};
use crate::record::{flag, kind, Enc};
use crate::session::{self, with_local, Local, PANICS};
use crate::sys;
use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

/// Runs a callback body; a panic is caught, counted and reported as `ncclInternalError`.
#[inline]
pub fn guard(f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            PANICS.fetch_add(1, Ordering::Relaxed);
            NCCL_INTERNAL_ERROR
        }
    }
}

#[inline]
fn bit_index(t: u64) -> u8 {
    if t.is_power_of_two() {
        t.trailing_zeros() as u8
    } else {
        255
    }
}

// ---- init / finalize ------------------------------------------------------------

#[allow(clippy::too_many_arguments)]
unsafe fn init_common(
    api: u8,
    valid: u64,
    context: *mut *mut c_void,
    comm_hash: u64,
    mask: *mut c_int,
    name: *const c_char,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
    logfn: LogFn,
) -> c_int {
    if context.is_null() {
        return NCCL_INVALID_ARGUMENT;
    }
    let m = (config().mask & valid) as u32;
    match session::init_comm(api, comm_hash, name, n_nodes, nranks, rank, logfn, m) {
        Some(ctx) => {
            *context = ctx;
            if !mask.is_null() {
                *mask = m as c_int;
            }
            NCCL_SUCCESS
        }
        None => {
            *context = std::ptr::null_mut();
            NCCL_SYSTEM_ERROR
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn init_v4(
    context: *mut *mut c_void,
    mask: *mut c_int,
    name: *const c_char,
    comm_hash: u64,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
    logfn: LogFn,
) -> c_int {
    guard(|| init_common(4, ev::ALL_V4, context, comm_hash, mask, name, n_nodes, nranks, rank, logfn))
}

macro_rules! init_v5_like {
    ($fn:ident, $api:expr, $valid:expr) => {
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $fn(
            context: *mut *mut c_void,
            comm_id: u64,
            mask: *mut c_int,
            name: *const c_char,
            n_nodes: c_int,
            nranks: c_int,
            rank: c_int,
            logfn: LogFn,
        ) -> c_int {
            guard(|| init_common($api, $valid, context, comm_id, mask, name, n_nodes, nranks, rank, logfn))
        }
    };
}
init_v5_like!(init_v5, 5, ev::ALL_V5);
init_v5_like!(init_v6, 6, ev::ALL_V6);
init_v5_like!(init_v7, 7, ev::ALL_V7);

pub unsafe extern "C" fn finalize(context: *mut c_void) -> c_int {
    guard(|| {
        session::finalize_comm(context);
        NCCL_SUCCESS
    })
}

// ---- stop / record ----------------------------------------------------------------

pub unsafe extern "C" fn stop(handle: *mut c_void) -> c_int {
    guard(|| {
        if handle.is_null() {
            return NCCL_SUCCESS;
        }
        let t = sys::mono_ns();
        with_local(|l| {
            let mut e = Enc::new(kind::STOP, 0);
            e.u64(handle as u64).u64(t);
            l.push(e.finish());
            if let Some((comm, op)) = l.pxo_take(handle as u64) {
                inflight::on_proxy_op_stop(comm, op, t);
            }
        });
        NCCL_SUCCESS
    })
}

pub unsafe extern "C" fn record(handle: *mut c_void, st: c_int, args: *mut StateArgs) -> c_int {
    guard(|| {
        if config().panic_state == Some(st) {
            panic!("commlens-plugin test hook: panic in recordEventState (state {st})");
        }
        if handle.is_null() {
            return NCCL_SUCCESS;
        }
        let t = sys::mono_ns();
        let arg = if args.is_null() {
            None
        } else {
            let a = &*args;
            match st {
                state::PROXY_STEP_SEND_GPU_WAIT..=state::PROXY_STEP_RECV_GPU_WAIT
                | state::PROXY_STEP_SEND_PEER_WAIT_V4 => Some(a.trans_size as u64),
                state::PROXY_CTRL_IDLE..=state::PROXY_CTRL_APPEND_END => Some(a.appended_proxy_ops as i64 as u64),
                state::NET_PLUGIN_UPDATE => Some(a.net_plugin_data as u64),
                state::KERNEL_CH_STOP | state::KERNEL_PHASE_STOP => Some(a.p_timer),
                state::PROXY_OP_IN_PROGRESS_V4
                | state::GROUP_START_API_STOP
                | state::GROUP_END_API_START
                | state::CE_COLL_START..=state::CE_BATCH_COMPLETE => None,
                // A state this plugin does not know: keep the union's raw 8 bytes.
                _ => Some(a.p_timer),
            }
        };
        with_local(|l| {
            let mut e = Enc::new(kind::STATE, arg.is_some() as u8);
            e.u64(handle as u64).u64(t).i32(st).u64(arg.unwrap_or(0));
            l.push(e.finish());
            if st == state::KERNEL_CH_STOP {
                if let Some((comm, op)) = l.kch_take(handle as u64) {
                    inflight::on_kernel_ch_stop(comm, op, t, arg.unwrap_or(0));
                }
            }
        });
        NCCL_SUCCESS
    })
}

// ---- start ------------------------------------------------------------------------

/// Context/parent provenance of an event: `(comm, parent, flags)`.
#[inline]
fn provenance(ty: u64, ctx: *mut c_void, parent: *mut c_void, proxy_pid: Option<i32>) -> (u32, u64, u8) {
    let (mut comm, mut flags) = session::decode_ctx(ctx);
    if ty == ev::PROXY_OP && proxy_pid.is_some_and(|p| p != session::pid()) {
        flags |= flag::CTX_FOREIGN | flag::PARENT_FOREIGN;
        flags &= !flag::CTX_NULL;
        comm = 0;
    } else if flags & flag::CTX_FOREIGN != 0 && ty != ev::PROXY_STEP && ty != ev::NET_PLUGIN {
        // ProxyStep/NetPlugin parents are this plugin's own handles; others follow the context.
        flags |= flag::PARENT_FOREIGN;
    }
    (comm, parent as u64, flags)
}

/// Appends a START record, updates the in-flight view (local contexts only)
/// and hands out the handle.
#[inline]
unsafe fn emit_start(
    handle: *mut *mut c_void,
    ty: u64,
    (comm, parent, flags): (u32, u64, u8),
    rank: c_int,
    payload: impl FnOnce(&mut Enc, &mut Local) -> Hook,
) -> c_int {
    let t = sys::mono_ns();
    let id = with_local(|l| {
        let id = l.new_id();
        let mut e = Enc::new(kind::START, bit_index(ty));
        e.u64(id).u64(parent).u32(comm).i32(rank).u8(flags).u64(t);
        let hook = payload(&mut e, l);
        l.push(e.finish());
        if flags == 0 && comm != 0 {
            if let Some(op) = inflight::on_start(&hook, comm, id, parent, t) {
                if !matches!(hook, Hook::ProxyOp { .. }) {
                    l.kch_insert(id, comm, op);
                } else if !l.pxo_insert(id, comm, op) {
                    // Its stop would not be seen: do not let the operation wait for it.
                    inflight::on_proxy_op_stop(comm, op, t);
                }
            }
        }
        id
    });
    *handle = id.map_or(std::ptr::null_mut(), |id| id as *mut c_void);
    NCCL_SUCCESS
}

fn enc_group_api(e: &mut Enc, g: &GroupApi) -> Hook {
    e.u8(g.graph_captured).i32(g.group_depth);
    Hook::None
}

fn enc_coll_api(e: &mut Enc, l: &mut Local, c: &CollApiV5, tag: u64) -> Hook {
    e.u32(l.intern(c.func)).u64(c.count as u64).u32(l.intern(c.datatype)).i32(c.root);
    e.u64(c.stream as u64).u8(c.graph_captured).u64(tag);
    Hook::None
}

fn enc_p2p_api(e: &mut Enc, l: &mut Local, c: &P2pApiV5, tag: u64) -> Hook {
    e.u32(l.intern(c.func)).u64(c.count as u64).u32(l.intern(c.datatype));
    e.u64(c.stream as u64).u8(c.graph_captured).u64(tag);
    Hook::None
}

/// `plan`: the Group event of the task's kernel launch (v4: its parent; v5+: `parentGroup`).
#[allow(clippy::too_many_arguments)]
fn enc_coll(
    e: &mut Enc,
    l: &mut Local,
    c: &CollV4,
    parent_group: u64,
    variant: *const c_char,
    sym: u8,
    tag: u64,
    plan: u64,
) -> Hook {
    let (func, dtype) = (l.intern(c.func), l.intern(c.datatype));
    e.u64(c.seq_number).u32(func).u64(c.send_buff as u64).u64(c.recv_buff as u64);
    e.u64(c.count as u64).i32(c.root).u32(dtype).u8(c.n_channels).u8(c.n_warps);
    e.u32(l.intern(c.algo)).u32(l.intern(c.proto)).u64(parent_group).u32(l.intern(variant)).u8(sym).u64(tag);
    #[rustfmt::skip]
    let task = Task {
        p2p: false, nccl_seq: Some(c.seq_number), func, dtype, count: c.count as u64, peer: c.root,
        n_channels: c.n_channels, plan,
    };
    Hook::Task(task)
}

fn enc_p2p(e: &mut Enc, l: &mut Local, p: &P2pV4, parent_group: u64, tag: u64, plan: u64) -> Hook {
    let (func, dtype) = (l.intern(p.func), l.intern(p.datatype));
    e.u32(func).u64(p.buff as u64).u32(dtype).u64(p.count as u64);
    e.i32(p.peer).u8(p.n_channels).u64(parent_group).u64(tag);
    #[rustfmt::skip]
    let task = Task {
        p2p: true, nccl_seq: None, func, dtype, count: p.count as u64, peer: p.peer, n_channels: p.n_channels, plan,
    };
    Hook::Task(task)
}

fn enc_proxy_op(e: &mut Enc, p: &ProxyOp) -> Hook {
    e.i32(p.pid).u8(p.channel_id).i32(p.peer).i32(p.n_steps).i32(p.chunk_size).i32(p.is_send);
    Hook::ProxyOp { n_steps: p.n_steps }
}

fn enc_proxy_step(e: &mut Enc, p: &crate::abi::ProxyStep) -> Hook {
    e.i32(p.step);
    Hook::ProxyStep
}

fn enc_kernel_ch(e: &mut Enc, k: &KernelCh) -> Hook {
    e.u8(k.channel_id).u64(k.p_timer);
    Hook::KernelCh { p_timer: k.p_timer }
}

/// NetPlugin: id and data pointer value, plus the IB/socket v1 descriptor fields
/// when `id` names one (the net plugin's own, live descriptor).
unsafe fn enc_net(e: &mut Enc, n: &NetPlugin) -> Hook {
    e.i64(n.id).u64(n.data as u64);
    let (ver, ty) = (n.id & 0xffff, n.id & !0xffff);
    if !n.data.is_null() && ver == 1 && ty == NET_TYPE_IB {
        let d = &*(n.data as *const NetIbDescrV1);
        e.u8(1).u8(d.type_).i32(d.qp.device).i32(d.qp.qp_num).i32(d.qp.opcode).u64(d.qp.length as u64);
    } else if !n.data.is_null() && ver == 1 && ty == NET_TYPE_SOCK {
        let d = &*(n.data as *const NetSockDescrV1);
        e.u8(2).u8(d.type_).i32(d.sock.fd).i32(d.sock.op).i32(0).u64(d.sock.length as u64);
    } else {
        e.u8(0).u8(0).i32(0).i32(0).i32(0).u64(0);
    }
    Hook::None
}

fn enc_ce_coll(e: &mut Enc, l: &mut Local, c: &CeCollV6, tag: u64) -> Hook {
    e.u64(c.seq_number).u32(l.intern(c.func)).u64(c.send_buff as u64).u64(c.recv_buff as u64);
    e.u64(c.count as u64).i32(c.root).u32(l.intern(c.datatype)).u32(l.intern(c.sync_strategy));
    e.u8(c.intra_batch_sync).u32(c.batch_size).u32(c.num_batches).u32(c.ce_seq_num).u64(c.stream as u64).u64(tag);
    Hook::CeColl
}

fn enc_ce_sync(e: &mut Enc, c: &CeCollSync) -> Hook {
    e.u8(c.is_complete).i32(c.n_ranks);
    Hook::None
}

fn enc_ce_batch(e: &mut Enc, c: &CeCollBatch) -> Hook {
    e.i32(c.num_ops).u64(c.total_bytes as u64).u8(c.use_intra_sync);
    Hook::None
}

fn enc_kernel_phase(e: &mut Enc, l: &mut Local, k: &KernelPhase) -> Hook {
    e.u8(k.channel_id).u8(k.phase_id).u32(l.intern(k.phase_name)).u64(k.p_timer);
    Hook::None
}

pub unsafe extern "C" fn start_v4(ctx: *mut c_void, handle: *mut *mut c_void, d: *mut DescrV4) -> c_int {
    guard(|| {
        if d.is_null() || handle.is_null() {
            return NCCL_INVALID_ARGUMENT;
        }
        let d = &*d;
        let ty = d.type_ as u64;
        let pid = if ty == ev::PROXY_OP { Some(d.u.proxy_op.pid) } else { None };
        let prov = provenance(ty, ctx, d.parent_obj, pid);
        // v4 parents task events to their Group: the plan.
        let plan = d.parent_obj as u64;
        emit_start(handle, ty, prov, d.rank, |e, l| match ty {
            ev::COLL => enc_coll(e, l, &d.u.coll, 0, std::ptr::null(), 0, 0, plan),
            ev::P2P => enc_p2p(e, l, &d.u.p2p, 0, 0, plan),
            ev::PROXY_OP => enc_proxy_op(e, &d.u.proxy_op),
            ev::PROXY_STEP => enc_proxy_step(e, &d.u.proxy_step),
            ev::KERNEL_CH => enc_kernel_ch(e, &d.u.kernel_ch),
            ev::NET_PLUGIN => enc_net(e, &d.u.net_plugin),
            _ => Hook::None,
        })
    })
}

/// The members v5, v6 and v7 share with v5's layout.
unsafe fn enc_v5_member(e: &mut Enc, l: &mut Local, ty: u64, u: &DescrUnionV5) -> Hook {
    match ty {
        ev::GROUP_API => enc_group_api(e, &u.group_api),
        ev::COLL_API => enc_coll_api(e, l, &u.coll_api, 0),
        ev::P2P_API => enc_p2p_api(e, l, &u.p2p_api, 0),
        ev::KERNEL_LAUNCH => {
            e.u64(u.kernel_launch.stream as u64);
            Hook::None
        }
        ev::COLL => {
            let g = u.coll.parent_group as u64;
            enc_coll(e, l, &u.coll.base, g, std::ptr::null(), 0, 0, g)
        }
        ev::P2P => enc_p2p(e, l, &u.p2p.base, u.p2p.parent_group as u64, 0, u.p2p.parent_group as u64),
        ev::PROXY_OP => enc_proxy_op(e, &u.proxy_op),
        ev::PROXY_STEP => enc_proxy_step(e, &u.proxy_step),
        ev::KERNEL_CH => enc_kernel_ch(e, &u.kernel_ch),
        ev::NET_PLUGIN => enc_net(e, &u.net_plugin),
        _ => Hook::None,
    }
}

pub unsafe extern "C" fn start_v5(ctx: *mut c_void, handle: *mut *mut c_void, d: *mut DescrV5) -> c_int {
    guard(|| {
        if d.is_null() || handle.is_null() {
            return NCCL_INVALID_ARGUMENT;
        }
        let d = &*d;
        let pid = if d.type_ == ev::PROXY_OP { Some(d.u.proxy_op.pid) } else { None };
        let prov = provenance(d.type_, ctx, d.parent_obj, pid);
        emit_start(handle, d.type_, prov, d.rank, |e, l| enc_v5_member(e, l, d.type_, &d.u))
    })
}

pub unsafe extern "C" fn start_v6(ctx: *mut c_void, handle: *mut *mut c_void, d: *mut DescrV6) -> c_int {
    guard(|| {
        if d.is_null() || handle.is_null() {
            return NCCL_INVALID_ARGUMENT;
        }
        let d = &*d;
        let pid = if d.type_ == ev::PROXY_OP { Some(d.u.v5.proxy_op.pid) } else { None };
        let prov = provenance(d.type_, ctx, d.parent_obj, pid);
        emit_start(handle, d.type_, prov, d.rank, |e, l| match d.type_ {
            ev::CE_COLL => enc_ce_coll(e, l, &d.u.ce_coll, 0),
            ev::CE_SYNC => enc_ce_sync(e, &d.u.ce_coll_sync),
            ev::CE_BATCH => enc_ce_batch(e, &d.u.ce_coll_batch),
            ty => enc_v5_member(e, l, ty, &d.u.v5),
        })
    })
}

pub unsafe extern "C" fn start_v7(ctx: *mut c_void, handle: *mut *mut c_void, d: *mut DescrV7) -> c_int {
    guard(|| {
        if d.is_null() || handle.is_null() {
            return NCCL_INVALID_ARGUMENT;
        }
        let d = &*d;
        let u = &d.u;
        let pid = if d.type_ == ev::PROXY_OP { Some(u.proxy_op.pid) } else { None };
        let prov = provenance(d.type_, ctx, d.parent_obj, pid);
        emit_start(handle, d.type_, prov, d.rank, |e, l| match d.type_ {
            ev::GROUP_API => enc_group_api(e, &u.group_api),
            ev::COLL_API => enc_coll_api(e, l, &u.coll_api.base, u.coll_api.user_tag),
            ev::P2P_API => enc_p2p_api(e, l, &u.p2p_api.base, u.p2p_api.user_tag),
            ev::KERNEL_LAUNCH => {
                e.u64(u.kernel_launch.stream as u64);
                Hook::None
            }
            ev::COLL => {
                let c = &u.coll;
                let g = c.base.parent_group as u64;
                enc_coll(e, l, &c.base.base, g, c.kernel_variant, c.is_sym_coll, c.user_tag, g)
            }
            ev::P2P => {
                let g = u.p2p.base.parent_group as u64;
                enc_p2p(e, l, &u.p2p.base.base, g, u.p2p.user_tag, g)
            }
            ev::PROXY_OP => enc_proxy_op(e, &u.proxy_op),
            ev::PROXY_STEP => enc_proxy_step(e, &u.proxy_step),
            ev::KERNEL_CH => enc_kernel_ch(e, &u.kernel_ch),
            ev::NET_PLUGIN => enc_net(e, &u.net_plugin),
            ev::CE_COLL => enc_ce_coll(e, l, &u.ce_coll.base, u.ce_coll.user_tag),
            ev::CE_SYNC => enc_ce_sync(e, &u.ce_coll_sync),
            ev::CE_BATCH => enc_ce_batch(e, &u.ce_coll_batch),
            ev::KERNEL_PHASE => enc_kernel_phase(e, l, &u.kernel_phase),
            _ => Hook::None,
        })
    })
}
