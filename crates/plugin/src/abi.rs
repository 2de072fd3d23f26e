//! The NCCL profiler plugin ABI, hand-written from the byte layouts of
//! `profiler_v4.h` … `profiler_v7.h` (NCCL 2.27 – 2.32): descriptors, the
//! state-argument union, the five-callback function tables, event-type bits,
//! state values and result codes.
//!
//! Every field offset and struct size is checked at compile time against the
//! x86-64/aarch64 (LP64) offsets of the reference (`const _: () = assert!(…)`
//! blocks at the end): a wrong field type or order does not build.
//!
//! Mapping rules: C `bool` is `u8` (a stray value is never UB), `pid_t` is
//! `i32`, `size_t` is `usize`, enums arriving as arguments are `c_int` (a
//! future state value must not be UB), results are `c_int`.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_ulong, c_void};

#[cfg(not(target_pointer_width = "64"))]
compile_error!("commlens-plugin supports LP64 targets only (the NCCL plugin ABI offsets are LP64)");

/// `ncclResult_t` values the plugin returns.
pub const NCCL_SUCCESS: c_int = 0;
pub const NCCL_SYSTEM_ERROR: c_int = 2;
pub const NCCL_INTERNAL_ERROR: c_int = 3;
pub const NCCL_INVALID_ARGUMENT: c_int = 4;

/// Event-type bits (`ncclProfile*`, `nccl_profiler.h`).
pub mod ev {
    pub const GROUP: u64 = 1 << 0;
    pub const COLL: u64 = 1 << 1;
    pub const P2P: u64 = 1 << 2;
    pub const PROXY_OP: u64 = 1 << 3;
    pub const PROXY_STEP: u64 = 1 << 4;
    pub const PROXY_CTRL: u64 = 1 << 5;
    pub const KERNEL_CH: u64 = 1 << 6;
    pub const NET_PLUGIN: u64 = 1 << 7;
    pub const GROUP_API: u64 = 1 << 8;
    pub const COLL_API: u64 = 1 << 9;
    pub const P2P_API: u64 = 1 << 10;
    pub const KERNEL_LAUNCH: u64 = 1 << 11;
    pub const CE_COLL: u64 = 1 << 12;
    pub const CE_SYNC: u64 = 1 << 13;
    pub const CE_BATCH: u64 = 1 << 14;
    pub const KERNEL_PHASE: u64 = 1 << 15;
    /// Bits each API version defines ("all events").
    pub const ALL_V4: u64 = 0xFF;
    pub const ALL_V5: u64 = 0xFFF;
    pub const ALL_V6: u64 = 0x7FFF;
    pub const ALL_V7: u64 = 0xFFFF;
}

/// `ncclProfilerEventState_t` values (one C enum shared by all versions).
pub mod state {
    use std::ffi::c_int;
    pub const PROXY_STEP_SEND_GPU_WAIT: c_int = 8;
    pub const PROXY_STEP_SEND_WAIT: c_int = 9;
    pub const PROXY_STEP_RECV_WAIT: c_int = 10;
    pub const PROXY_STEP_RECV_FLUSH_WAIT: c_int = 11;
    pub const PROXY_STEP_RECV_GPU_WAIT: c_int = 12;
    pub const PROXY_CTRL_IDLE: c_int = 13;
    pub const PROXY_CTRL_APPEND_END: c_int = 18;
    pub const PROXY_OP_IN_PROGRESS_V4: c_int = 19;
    pub const PROXY_STEP_SEND_PEER_WAIT_V4: c_int = 20;
    pub const NET_PLUGIN_UPDATE: c_int = 21;
    pub const KERNEL_CH_STOP: c_int = 22;
    pub const GROUP_START_API_STOP: c_int = 23;
    pub const GROUP_END_API_START: c_int = 24;
    pub const CE_COLL_START: c_int = 25;
    pub const CE_BATCH_COMPLETE: c_int = 30;
    pub const KERNEL_PHASE_STOP: c_int = 31;
}

/// `ncclPid_t` on Linux.
pub type pid_t = i32;

/// `ncclDebugLogger_t`: `(level, flags, file, line, fmt, ...)`.
pub type LogFn = Option<unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...)>;

// ---- union members -------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GroupApi {
    pub graph_captured: u8,
    pub group_depth: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollApiV5 {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub root: c_int,
    pub stream: *mut c_void,
    pub graph_captured: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollApiV7 {
    pub base: CollApiV5,
    pub user_tag: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pApiV5 {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub stream: *mut c_void,
    pub graph_captured: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pApiV7 {
    pub base: P2pApiV5,
    pub user_tag: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelLaunch {
    pub stream: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV4 {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV5 {
    pub base: CollV4,
    pub parent_group: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV7 {
    pub base: CollV5,
    pub kernel_variant: *const c_char,
    pub is_sym_coll: u8,
    pub user_tag: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV4 {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub n_channels: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV5 {
    pub base: P2pV4,
    pub parent_group: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV7 {
    pub base: P2pV5,
    pub user_tag: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOp {
    pub pid: pid_t,
    pub channel_id: u8,
    pub peer: c_int,
    pub n_steps: c_int,
    pub chunk_size: c_int,
    pub is_send: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyStep {
    pub step: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelCh {
    pub channel_id: u8,
    pub p_timer: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetPlugin {
    pub id: i64,
    pub data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollV6 {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub sync_strategy: *const c_char,
    pub intra_batch_sync: u8,
    pub batch_size: u32,
    pub num_batches: u32,
    pub ce_seq_num: u32,
    pub stream: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollV7 {
    pub base: CeCollV6,
    pub user_tag: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollSync {
    pub is_complete: u8,
    pub n_ranks: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollBatch {
    pub num_ops: c_int,
    pub total_bytes: usize,
    pub use_intra_sync: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelPhase {
    pub channel_id: u8,
    pub phase_id: u8,
    pub phase_name: *const c_char,
    pub p_timer: u64,
}

/// Net-plugin descriptors reached through `netPlugin.data` (`net_ib_v1.h`,
/// `net_socket_v1.h`). The low 16 bits of `netPlugin.id` give the version, the
/// bits above the type.
pub const NET_TYPE_IB: i64 = 1 << 16;
pub const NET_TYPE_SOCK: i64 = 2 << 16;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetIbQpV1 {
    pub device: c_int,
    pub wr_id: u64,
    pub opcode: c_int,
    pub qp_num: c_int,
    pub length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetIbDescrV1 {
    pub type_: u8,
    pub qp: NetIbQpV1,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetSockV1 {
    pub fd: c_int,
    pub op: c_int,
    pub length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetSockDescrV1 {
    pub type_: u8,
    pub sock: NetSockV1,
}

// ---- descriptors -----------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrUnionV4 {
    pub coll: CollV4,
    pub p2p: P2pV4,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub kernel_ch: KernelCh,
    pub net_plugin: NetPlugin,
}

/// `ncclProfilerEventDescr_v4_t` (NCCL 2.27): `type` is one byte.
#[repr(C)]
pub struct DescrV4 {
    pub type_: u8,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: DescrUnionV4,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrUnionV5 {
    pub group_api: GroupApi,
    pub coll_api: CollApiV5,
    pub p2p_api: P2pApiV5,
    pub kernel_launch: KernelLaunch,
    pub coll: CollV5,
    pub p2p: P2pV5,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub kernel_ch: KernelCh,
    pub net_plugin: NetPlugin,
}

/// `ncclProfilerEventDescr_v5_t` (NCCL 2.28).
#[repr(C)]
pub struct DescrV5 {
    pub type_: u64,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: DescrUnionV5,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrUnionV6 {
    pub v5: DescrUnionV5,
    pub ce_coll: CeCollV6,
    pub ce_coll_sync: CeCollSync,
    pub ce_coll_batch: CeCollBatch,
}

/// `ncclProfilerEventDescr_v6_t` (NCCL 2.29 – 2.30): v5 plus copy-engine events.
#[repr(C)]
pub struct DescrV6 {
    pub type_: u64,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: DescrUnionV6,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrUnionV7 {
    pub group_api: GroupApi,
    pub coll_api: CollApiV7,
    pub p2p_api: P2pApiV7,
    pub kernel_launch: KernelLaunch,
    pub coll: CollV7,
    pub p2p: P2pV7,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub kernel_ch: KernelCh,
    pub net_plugin: NetPlugin,
    pub ce_coll: CeCollV7,
    pub ce_coll_sync: CeCollSync,
    pub ce_coll_batch: CeCollBatch,
    pub kernel_phase: KernelPhase,
}

/// `ncclProfilerEventDescr_v7_t` (NCCL 2.31 – 2.32): user tags, kernel variant, kernel phases.
#[repr(C)]
pub struct DescrV7 {
    pub type_: u64,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: DescrUnionV7,
}

/// `ncclProfilerEventStateArgs_v4_t` … `_v7_t` (identical in all four).
#[repr(C)]
#[derive(Clone, Copy)]
pub union StateArgs {
    pub trans_size: usize,
    pub appended_proxy_ops: c_int,
    pub net_plugin_data: *mut c_void,
    pub p_timer: u64,
}

// ---- function tables ---------------------------------------------------------

/// v4: `init(ctx, mask, commName, commHash, nNodes, nranks, rank, logfn)`.
pub type InitV4 =
    unsafe extern "C" fn(*mut *mut c_void, *mut c_int, *const c_char, u64, c_int, c_int, c_int, LogFn) -> c_int;
/// v5 – v7: `init(ctx, commId, mask, commName, nNodes, nranks, rank, logfn)`.
pub type InitV5 =
    unsafe extern "C" fn(*mut *mut c_void, u64, *mut c_int, *const c_char, c_int, c_int, c_int, LogFn) -> c_int;
pub type StopFn = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type RecordFn = unsafe extern "C" fn(*mut c_void, c_int, *mut StateArgs) -> c_int;
pub type FinalizeFn = unsafe extern "C" fn(*mut c_void) -> c_int;

macro_rules! profiler_table {
    ($name:ident, $init:ty, $descr:ty) => {
        /// A `ncclProfiler_vN_t`: name plus five callbacks (48 bytes).
        #[repr(C)]
        pub struct $name {
            pub name: *const c_char,
            pub init: Option<$init>,
            pub start_event: Option<unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut $descr) -> c_int>,
            pub stop_event: Option<StopFn>,
            pub record_event_state: Option<RecordFn>,
            pub finalize: Option<FinalizeFn>,
        }
        // SAFETY: the table is immutable and holds a pointer to a static C string and function pointers.
        unsafe impl Sync for $name {}
    };
}
profiler_table!(ProfilerV4, InitV4, DescrV4);
profiler_table!(ProfilerV5, InitV5, DescrV5);
profiler_table!(ProfilerV6, InitV5, DescrV6);
profiler_table!(ProfilerV7, InitV5, DescrV7);

// ---- compile-time layout checks (reference §9.6, LP64) -----------------------

macro_rules! at {
    ($t:ty, $f:ident, $off:expr) => {
        assert!(std::mem::offset_of!($t, $f) == $off)
    };
}
/// Offset of a union member's field inside the descriptor (union starts at 24).
macro_rules! uat {
    ($d:ty, $m:ty, $f:ident, $off:expr) => {
        assert!(std::mem::offset_of!($d, u) + std::mem::offset_of!($m, $f) == $off)
    };
}

const _: () = {
    use std::mem::size_of;
    assert!(size_of::<DescrV4>() == 104);
    assert!(size_of::<DescrV5>() == 112);
    assert!(size_of::<DescrV6>() == 112);
    assert!(size_of::<DescrV7>() == 136);
    assert!(size_of::<StateArgs>() == 8);
    at!(DescrV4, type_, 0);
    at!(DescrV4, parent_obj, 8);
    at!(DescrV4, rank, 16);
    at!(DescrV4, u, 24);
    at!(DescrV5, parent_obj, 8);
    at!(DescrV5, rank, 16);
    at!(DescrV5, u, 24);
    at!(DescrV6, u, 24);
    at!(DescrV7, u, 24);
    // groupApi
    uat!(DescrV5, GroupApi, graph_captured, 24);
    uat!(DescrV5, GroupApi, group_depth, 28);
    // collApi
    uat!(DescrV5, CollApiV5, func, 24);
    uat!(DescrV5, CollApiV5, count, 32);
    uat!(DescrV5, CollApiV5, datatype, 40);
    uat!(DescrV5, CollApiV5, root, 48);
    uat!(DescrV5, CollApiV5, stream, 56);
    uat!(DescrV5, CollApiV5, graph_captured, 64);
    uat!(DescrV7, CollApiV7, user_tag, 72);
    // p2pApi
    uat!(DescrV5, P2pApiV5, func, 24);
    uat!(DescrV5, P2pApiV5, count, 32);
    uat!(DescrV5, P2pApiV5, datatype, 40);
    uat!(DescrV5, P2pApiV5, stream, 48);
    uat!(DescrV5, P2pApiV5, graph_captured, 56);
    uat!(DescrV7, P2pApiV7, user_tag, 64);
    // kernelLaunch
    uat!(DescrV5, KernelLaunch, stream, 24);
    // coll
    uat!(DescrV5, CollV4, seq_number, 24);
    uat!(DescrV5, CollV4, func, 32);
    uat!(DescrV5, CollV4, send_buff, 40);
    uat!(DescrV5, CollV4, recv_buff, 48);
    uat!(DescrV5, CollV4, count, 56);
    uat!(DescrV5, CollV4, root, 64);
    uat!(DescrV5, CollV4, datatype, 72);
    uat!(DescrV5, CollV4, n_channels, 80);
    uat!(DescrV5, CollV4, n_warps, 81);
    uat!(DescrV5, CollV4, algo, 88);
    uat!(DescrV5, CollV4, proto, 96);
    uat!(DescrV5, CollV5, parent_group, 104);
    uat!(DescrV7, CollV7, kernel_variant, 112);
    uat!(DescrV7, CollV7, is_sym_coll, 120);
    uat!(DescrV7, CollV7, user_tag, 128);
    // p2p
    uat!(DescrV5, P2pV4, func, 24);
    uat!(DescrV5, P2pV4, buff, 32);
    uat!(DescrV5, P2pV4, datatype, 40);
    uat!(DescrV5, P2pV4, count, 48);
    uat!(DescrV5, P2pV4, peer, 56);
    uat!(DescrV5, P2pV4, n_channels, 60);
    uat!(DescrV5, P2pV5, parent_group, 64);
    uat!(DescrV7, P2pV7, user_tag, 72);
    // proxyOp, proxyStep, kernelCh, netPlugin
    uat!(DescrV5, ProxyOp, pid, 24);
    uat!(DescrV5, ProxyOp, channel_id, 28);
    uat!(DescrV5, ProxyOp, peer, 32);
    uat!(DescrV5, ProxyOp, n_steps, 36);
    uat!(DescrV5, ProxyOp, chunk_size, 40);
    uat!(DescrV5, ProxyOp, is_send, 44);
    uat!(DescrV5, ProxyStep, step, 24);
    uat!(DescrV5, KernelCh, channel_id, 24);
    uat!(DescrV5, KernelCh, p_timer, 32);
    uat!(DescrV5, NetPlugin, id, 24);
    uat!(DescrV5, NetPlugin, data, 32);
    // v4 shares the same union offsets (the union also starts at 24)
    uat!(DescrV4, CollV4, proto, 96);
    uat!(DescrV4, P2pV4, n_channels, 60);
    uat!(DescrV4, KernelCh, p_timer, 32);
    // ceColl, ceCollSync, ceCollBatch (v6+)
    uat!(DescrV6, CeCollV6, seq_number, 24);
    uat!(DescrV6, CeCollV6, datatype, 72);
    uat!(DescrV6, CeCollV6, sync_strategy, 80);
    uat!(DescrV6, CeCollV6, intra_batch_sync, 88);
    uat!(DescrV6, CeCollV6, batch_size, 92);
    uat!(DescrV6, CeCollV6, num_batches, 96);
    uat!(DescrV6, CeCollV6, ce_seq_num, 100);
    uat!(DescrV6, CeCollV6, stream, 104);
    uat!(DescrV7, CeCollV7, user_tag, 112);
    uat!(DescrV6, CeCollSync, n_ranks, 28);
    uat!(DescrV6, CeCollBatch, total_bytes, 32);
    uat!(DescrV6, CeCollBatch, use_intra_sync, 40);
    // kernelPhase (v7)
    uat!(DescrV7, KernelPhase, channel_id, 24);
    uat!(DescrV7, KernelPhase, phase_id, 25);
    uat!(DescrV7, KernelPhase, phase_name, 32);
    uat!(DescrV7, KernelPhase, p_timer, 40);
    // function tables: name@0 init@8 startEvent@16 stopEvent@24 recordEventState@32 finalize@40
    assert!(size_of::<ProfilerV4>() == 48);
    assert!(size_of::<ProfilerV5>() == 48);
    assert!(size_of::<ProfilerV6>() == 48);
    assert!(size_of::<ProfilerV7>() == 48);
    at!(ProfilerV6, name, 0);
    at!(ProfilerV6, init, 8);
    at!(ProfilerV6, start_event, 16);
    at!(ProfilerV6, stop_event, 24);
    at!(ProfilerV6, record_event_state, 32);
    at!(ProfilerV6, finalize, 40);
    // net-plugin descriptors: type@0, union@8
    assert!(std::mem::offset_of!(NetIbDescrV1, qp) == 8);
    assert!(std::mem::offset_of!(NetIbDescrV1, qp) + std::mem::offset_of!(NetIbQpV1, length) == 32);
    assert!(std::mem::offset_of!(NetSockDescrV1, sock) + std::mem::offset_of!(NetSockV1, length) == 16);
};
