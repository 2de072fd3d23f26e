//! Record-level state of one followed plugin file: what survives between
//! chunks (strings, communicators, threads, API parents, the operations whose
//! kernels have not finished, KernelCh → operation links, per-device GPU clock
//! offsets) and what a chunk's records do to it. Operations leave this state as
//! [`FinishedOp`]s built the way `plugin_out::trace_to_table` builds them, so a
//! followed file ends with the table a whole-file read gives.
//!
//! Completion follows the plugin's own in-flight tracker (`crates/plugin/src/
//! inflight.rs`, reimplemented from its documented rules): an operation is
//! *pending* from its START, *running* from its first KernelCh START, and done
//! when as many KernelChStop states as it has channels arrived, or when an
//! operation of a later plan (kernel launch) of the same handle starts or
//! completes. Copy-engine collectives and communicators whose event mask has no
//! KernelCh are done at their START (there is no kernel evidence to wait for),
//! and so is a p2p to the handle's own rank (NCCL gives it no KernelCh); the
//! operations after such a self p2p keep no GPU span, as in `trace_to_table`
//! (their KernelCh timers belong to earlier works, see `plugin_out_table`).
//! An operation with ProxyOps is done only when they stopped too, and receive
//! ProxyOps that stop long after the kernel did mark the handle's timers as
//! another work's, as in `trace_to_table`.
//!
//! Records of one thread arrive in order, but another thread's chunk may hold a
//! KernelCh before its parent's START, or a KernelChStop before its KernelCh.
//! Such effects wait under the id they need ([`Parked`]); an id is known to be
//! missing for good once its thread (the id's top bits, `thread << 40 |
//! counter`) has started a later counter, and then they are dropped.

use super::{FinishedOp, FollowCounts, InFlightOp};
use crate::gpu_clock::ClockTrack;
use crate::plugin_out::{PluginComm, FLAG_CTX_FOREIGN, FLAG_CTX_NULL, FLAG_PARENT_FOREIGN};
use crate::plugin_out_table::PROXY_AFTER_KERNEL_NS;
use commlens_core::model::{CommIdx, DevIdx, GpuSpan, ProcIdx};
use commlens_core::{Algorithm, CollOp, DataType, OpKind, Protocol};
use std::collections::{HashMap, VecDeque};

use super::records::*;

#[derive(Clone, Copy)]
struct ApiInfo {
    count: u64,
    dtype: u32,
    stream: u64,
    start_ns: u64,
}

struct OpenOp {
    comm: u32,
    thread: u32,
    record: u64,
    ty: u8,
    start_ns: u64,
    api: Option<ApiInfo>,
    func: u32,
    dtype: u32,
    count: u64,
    nccl_seq: u64,
    root: i32,
    peer: i32,
    n_channels: u8,
    algo: u32,
    proto: u32,
    sendbuff: u64,
    recvbuff: u64,
    plan: u64,
    seq: u64,
    p2p_seq: u64,
    coll_ordinal: Option<u64>,
    ch_started: u16,
    ch_stopped: u16,
    gpu_min: u64,
    gpu_max: u64,
    /// Started after a self p2p of its handle: its KernelCh timers are another work's.
    lagged: bool,
    /// ProxyOps started and not stopped; every kernel channel stopped.
    proxy_open: u16,
    kernels_done: bool,
    /// When the proxy saw the last KernelChStop, and the last receive ProxyOp stop.
    kch_seen: u64,
    recv_stop: u64,
}

/// An effect waiting for the START of the id it is filed under.
enum Parked {
    /// A KernelCh START of this operation: CPU time, GPU start timer.
    KchStart(u64, u64),
    /// A KernelChStop of this operation: CPU time, GPU stop timer.
    KchStop(u64, u64),
    /// A state of this KernelCh: CPU time, state, argument.
    State(u64, i32, Option<u64>),
    /// A ProxyOp START of this operation: the ProxyOp's id, is it a send.
    ProxyStart(u64, bool),
    /// The STOP of this ProxyOp: CPU time.
    ProxyStop(u64),
}

#[derive(Default)]
struct Handle {
    next_seq: u64,
    next_coll: u64,
    /// Open operation ids in START order.
    open: VecDeque<u64>,
    /// A self p2p started on this handle.
    lagged: bool,
}

#[derive(Default)]
pub(super) struct State {
    pub strings: HashMap<u32, String>,
    pub comms: Vec<PluginComm>,
    pub threads: HashMap<u32, u32>,
    pub epoch_off: i64,
    pub counts: FollowCounts,
    /// The last record read is END.
    pub ended: bool,
    /// Largest CLOCK_MONOTONIC time in any record.
    pub last_ns: Option<u64>,
    pub out: Vec<FinishedOp>,
    api: HashMap<u64, ApiInfo>,
    api_order: VecDeque<u64>,
    open: HashMap<u64, OpenOp>,
    /// By communicator index.
    handles: HashMap<u32, Handle>,
    /// KernelCh id → (operation id or 0, communicator index).
    kch: HashMap<u64, (u64, u32)>,
    /// Open ProxyOp id → (operation id, is a send).
    proxies: HashMap<u64, (u64, bool)>,
    /// Device key → GPU clock, drift allowed for ([`crate::gpu_clock`]).
    clocks: HashMap<i64, ClockTrack>,
    parked: HashMap<u64, Vec<Parked>>,
    /// Highest counter started per id thread (`id >> 40`).
    max_started: HashMap<u64, u64>,
    p2p_seq: HashMap<(u32, u32), u64>,
    /// Finished, waiting for a string or communicator record still to come.
    unresolved: Vec<(OpenOp, i64)>,
    drops_by_thread: HashMap<u32, u64>,
    end_drops: u64,
}

fn counter(id: u64) -> u64 {
    id & ((1 << 40) - 1)
}

impl State {
    pub fn epoch(&self, mono: u64) -> i64 {
        (mono as i64).wrapping_add(self.epoch_off)
    }

    fn saw(&mut self, t: u64) {
        self.last_ns = Some(self.last_ns.map_or(t, |l| l.max(t)));
    }

    fn started(&self, id: u64) -> bool {
        self.max_started
            .get(&(id >> 40))
            .is_some_and(|&m| counter(id) <= m)
    }

    fn park(&mut self, id: u64, p: Parked) {
        if self.parked.len() >= MAX_PARKED {
            self.counts.forgotten += self.parked.values().map(|v| v.len() as u64).sum::<u64>();
            self.parked.clear();
        }
        self.parked.entry(id).or_default().push(p);
    }

    /// The device a communicator's kernels run on, for the clock offsets.
    fn dev_key(&self, comm: u32) -> Option<i64> {
        let c = self.comms.get(comm.checked_sub(1)? as usize)?;
        Some(c.cuda_dev.map_or(-1 - c.rank as i64, |d| d as i64))
    }

    fn see_offset(&mut self, comm: u32, cpu: u64, gpu: u64) {
        if gpu == 0 {
            return;
        }
        if let Some(k) = self.dev_key(comm) {
            self.clocks.entry(k).and_modify(|c| c.see(cpu, gpu)).or_insert_with(|| ClockTrack::new(cpu, gpu));
        }
    }

    /// Decodes the records of one whole chunk; `at` is its payload's file offset.
    pub fn chunk(&mut self, thread: u32, payload: &[u8], at: u64) -> Result<(), (u64, String)> {
        self.counts.chunks += 1;
        let mut p = 0;
        while p < payload.len() {
            let len = if payload.len() - p >= 4 {
                u16::from_le_bytes([payload[p], payload[p + 1]]) as usize
            } else {
                0
            };
            let here = at + p as u64;
            if len < 4 || p + len > payload.len() {
                return Err((here, format!("record length {len} does not fit its chunk")));
            }
            let (kind, sub) = (payload[p + 2], payload[p + 3]);
            let body = &payload[p + 4..p + len];
            let need = match kind {
                5 => START_COMMON + START_PAYLOAD.get(sub as usize).copied().unwrap_or(0),
                k => RECORD_BODY.get(k as usize).copied().unwrap_or(0),
            };
            if body.len() < need {
                return Err((
                    here,
                    format!("record kind {kind} is too short ({len} bytes)"),
                ));
            }
            if kind == 3 {
                let index = u32::from_le_bytes(body[..4].try_into().expect("length checked"));
                if index as usize != self.comms.len() + 1 {
                    return Err((here, format!("communicator {index} out of order")));
                }
            }
            self.counts.records += 1;
            self.record(thread, kind, sub, Cur(body));
            p += len;
        }
        self.purge_parked(thread as u64);
        self.resolve_pending();
        Ok(())
    }

    fn record(&mut self, thread: u32, kind: u8, sub: u8, mut c: Cur) {
        self.ended = kind == 9;
        match kind {
            1 => {
                let id = c.u32();
                self.strings
                    .insert(id, String::from_utf8_lossy(c.0).into_owned());
            }
            2 => {
                let (idx, tid) = (c.u32(), c.u32());
                self.threads.insert(idx, tid);
            }
            3 => self.comm_init(sub, c),
            // (COMM_INIT order is checked by `chunk`.)
            4 => {
                let (idx, t) = (c.u32(), c.u64());
                self.saw(t);
                if let Some(cm) = idx
                    .checked_sub(1)
                    .and_then(|i| self.comms.get_mut(i as usize))
                {
                    cm.fini_ns = Some(t);
                }
            }
            5 => self.start(thread, sub, c),
            // STOP: for an operation, enqueue done (completion comes from its kernel
            // channels); for a ProxyOp, the proxy finished it.
            6 => {
                let (id, t) = (c.u64(), c.u64());
                self.proxy_stop(id, t);
            }
            7 => {
                let (id, t, state, arg) = (c.u64(), c.u64(), c.i32(), c.u64());
                self.saw(t);
                self.state(id, t, state, (sub == 1).then_some(arg));
            }
            8 => {
                let (th, total) = (c.u32(), c.u64());
                self.drops_by_thread.insert(th, total);
                self.counts.dropped = self.end_drops.max(self.drops_by_thread.values().sum());
            }
            9 => {
                let (t, drops, panics) = (c.u64(), c.u64(), c.u64());
                self.saw(t);
                self.end_drops = self.end_drops.max(drops);
                self.counts.dropped = self.end_drops.max(self.drops_by_thread.values().sum());
                self.counts.panics = self.counts.panics.max(panics);
                // Everything is finalized: what is still open never reported its kernel.
                let ids: Vec<u64> = self
                    .handles
                    .values()
                    .flat_map(|h| h.open.iter().copied())
                    .collect();
                for id in ids {
                    self.finish(id, t);
                }
            }
            _ => self.counts.unknown_records += 1,
        }
    }

    fn comm_init(&mut self, api: u8, mut c: Cur) {
        #[rustfmt::skip]
        let comm = PluginComm { index: c.u32(), api, comm_hash: c.u64(), rank: c.i32(), nranks: c.i32(),
            n_nodes: c.i32(), init_ns: c.u64(), fini_ns: None, cuda_dev: Some(c.i32()).filter(|&d| d >= 0),
            bus_id: Some(c.i64()).filter(|&b| b >= 0), name: c.u32(), mask: c.u32() };
        self.saw(comm.init_ns);
        // `decode` refuses a communicator out of order; the caller checks the count.
        self.comms.push(comm);
    }

    fn start(&mut self, thread: u32, ty: u8, mut c: Cur) {
        let (id, parent, comm, _rank, flags, t) =
            (c.u64(), c.u64(), c.u32(), c.i32(), c.u8(), c.u64());
        self.saw(t);
        let m = self.max_started.entry(id >> 40).or_insert(0);
        *m = (*m).max(counter(id));
        let local = flags & (FLAG_CTX_FOREIGN | FLAG_CTX_NULL) == 0 && comm != 0;
        match ty {
            T_COLL_API | T_P2P_API => {
                let func_count_dtype = (c.u32(), c.u64(), c.u32());
                if ty == T_COLL_API {
                    c.i32();
                }
                let api = ApiInfo {
                    count: func_count_dtype.1,
                    dtype: func_count_dtype.2,
                    stream: c.u64(),
                    start_ns: t,
                };
                if self.api_order.len() >= MAX_API {
                    let old = self.api_order.pop_front().expect("non-empty");
                    self.api.remove(&old);
                }
                self.api.insert(id, api);
                self.api_order.push_back(id);
            }
            T_COLL | T_P2P | T_CE_COLL if !local => self.counts.ops_without_comm += 1,
            T_COLL | T_P2P | T_CE_COLL => self.op_start(id, parent, comm, thread, ty, t, c),
            T_PROXY_OP if flags & FLAG_PARENT_FOREIGN == 0 && parent != 0 => {
                let (_pid, _channel, _peer, _steps, _chunk, is_send) = (c.i32(), c.u8(), c.i32(), c.i32(), c.i32(), c.i32());
                self.proxy_start(id, parent, is_send != 0);
            }
            T_KERNEL_CH => {
                let (_channel, ptimer) = (c.u8(), c.u64());
                if comm != 0 {
                    self.see_offset(comm, t, ptimer);
                }
                let op = if flags & FLAG_PARENT_FOREIGN == 0 {
                    parent
                } else {
                    0
                };
                if self.kch.len() >= MAX_PARKED {
                    // KernelCh events whose stop never came (a lost record): forget them.
                    self.counts.forgotten += self.kch.len() as u64;
                    self.kch.clear();
                }
                self.kch.insert(id, (op, comm));
                if op != 0 {
                    self.kch_effect(op, Parked::KchStart(t, ptimer));
                }
            }
            _ => {}
        }
        if let Some(waiting) = self.parked.remove(&id) {
            for p in waiting {
                match p {
                    Parked::State(t, s, a) => self.state(id, t, s, a),
                    Parked::ProxyStart(proxy, is_send) => self.proxy_start(proxy, id, is_send),
                    Parked::ProxyStop(t) => self.proxy_stop(id, t),
                    e => self.kch_effect(id, e),
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn op_start(
        &mut self,
        id: u64,
        parent: u64,
        comm: u32,
        thread: u32,
        ty: u8,
        t: u64,
        mut c: Cur,
    ) {
        let record = self.counts.records;
        #[rustfmt::skip]
        let mut op = OpenOp { comm, thread, record, ty, start_ns: t, api: self.api.remove(&parent), func: 0, dtype: 0,
            count: 0, nccl_seq: 0, root: -1, peer: -1, n_channels: 0, algo: 0, proto: 0, sendbuff: 0, recvbuff: 0,
            plan: 0, seq: 0, p2p_seq: 0, coll_ordinal: None, ch_started: 0, ch_stopped: 0, gpu_min: u64::MAX, gpu_max: 0,
            lagged: false, proxy_open: 0, kernels_done: false, kch_seen: 0, recv_stop: 0 };
        match ty {
            T_COLL | T_CE_COLL => {
                (op.nccl_seq, op.func, op.sendbuff, op.recvbuff, op.count) =
                    (c.u64(), c.u32(), c.u64(), c.u64(), c.u64());
                (op.root, op.dtype) = (c.i32(), c.u32());
                if ty == T_COLL {
                    (op.n_channels, _) = (c.u8(), c.u8());
                    (op.algo, op.proto, op.plan) = (c.u32(), c.u32(), c.u64());
                }
            }
            _ => {
                (op.func, op.sendbuff, op.dtype, op.count, op.peer) =
                    (c.u32(), c.u64(), c.u32(), c.u64(), c.i32());
                (op.n_channels, op.plan) = (c.u8(), c.u64());
                let s = self.p2p_seq.entry((comm, op.func)).or_default();
                (op.p2p_seq, *s) = (*s, *s + 1);
            }
        }
        let hi = comm as usize - 1;
        let h = self.handles.entry(comm).or_default();
        op.seq = h.next_seq;
        h.next_seq += 1;
        if ty != T_P2P {
            op.coll_ordinal = Some(h.next_coll);
            h.next_coll += 1;
        }
        let no_kernels = self
            .comms
            .get(hi)
            .is_some_and(|c| c.mask & KERNEL_CH_BIT == 0);
        let self_p2p = ty == T_P2P && self.comms.get(hi).is_some_and(|c| c.rank == op.peer);
        h.lagged |= self_p2p;
        op.lagged = h.lagged;
        if ty == T_CE_COLL || no_kernels || self_p2p {
            self.done(op, self.epoch(t));
            return;
        }
        h.open.push_back(id);
        self.open.insert(id, op);
        if h.open.len() > MAX_OPEN {
            let old = h.open[0];
            self.counts.forgotten += 1;
            self.finish(old, t);
        }
    }

    /// A KernelCh START or stop of operation `op`, or parks it until the operation starts.
    fn kch_effect(&mut self, op: u64, e: Parked) {
        let Some(o) = self.open.get_mut(&op) else {
            if !self.started(op) {
                self.park(op, e);
            }
            return;
        };
        match e {
            Parked::KchStart(t, ptimer) => {
                o.ch_started = o.ch_started.saturating_add(1);
                if ptimer != 0 {
                    o.gpu_min = o.gpu_min.min(ptimer);
                }
                if o.ch_started == 1 {
                    self.retire_earlier_plans(op, t);
                }
            }
            Parked::KchStop(t, gpu) => {
                o.ch_stopped = o.ch_stopped.saturating_add(1);
                o.gpu_max = o.gpu_max.max(gpu);
                let all = o.ch_stopped >= (o.n_channels as u16).max(o.ch_started);
                if all {
                    (o.kernels_done, o.kch_seen) = (true, t);
                    let waits = o.proxy_open > 0;
                    self.retire_earlier_plans(op, t);
                    if !waits {
                        self.finish(op, t);
                    }
                }
            }
            _ => {}
        }
    }

    fn state(&mut self, id: u64, t: u64, state: i32, arg: Option<u64>) {
        if state != KERNEL_CH_STOP {
            return;
        }
        match self.kch.remove(&id) {
            Some((op, comm)) => {
                let gpu = arg.unwrap_or(0);
                if comm != 0 {
                    self.see_offset(comm, t, gpu);
                }
                if op != 0 {
                    self.kch_effect(op, Parked::KchStop(t, gpu));
                }
            }
            None if !self.started(id) => self.park(id, Parked::State(t, state, arg)),
            None => {}
        }
    }

    /// A ProxyOp of operation `op` started: the operation is done only when it
    /// stopped too (the plugin's tracker rule: NCCL's KernelCh can carry another
    /// work's timers while the proxy still moves this one's data).
    fn proxy_start(&mut self, proxy: u64, op: u64, is_send: bool) {
        if let Some(o) = self.open.get_mut(&op) {
            o.proxy_open = o.proxy_open.saturating_add(1);
            if self.proxies.len() >= MAX_PARKED {
                self.counts.forgotten += self.proxies.len() as u64;
                self.proxies.clear();
            }
            self.proxies.insert(proxy, (op, is_send));
        } else if !self.started(op) {
            self.park(op, Parked::ProxyStart(proxy, is_send));
        }
    }

    fn proxy_stop(&mut self, proxy: u64, t: u64) {
        let Some((op, is_send)) = self.proxies.remove(&proxy) else {
            if !self.started(proxy) {
                self.park(proxy, Parked::ProxyStop(t));
            }
            return;
        };
        let Some(o) = self.open.get_mut(&op) else { return };
        o.proxy_open = o.proxy_open.saturating_sub(1);
        if !is_send {
            o.recv_stop = o.recv_stop.max(t);
        }
        if o.kernels_done && o.proxy_open == 0 {
            self.finish(op, t);
        }
    }

    /// Stream order: operations of plans before `op`'s on its handle have finished.
    fn retire_earlier_plans(&mut self, op: u64, t: u64) {
        let Some(o) = self.open.get(&op) else { return };
        let (plan, comm) = (o.plan, o.comm);
        if plan == 0 {
            return;
        }
        let mut earlier = Vec::new();
        for &id in &self.handles[&comm].open {
            if id == op {
                break;
            }
            if self
                .open
                .get(&id)
                .is_some_and(|e| e.plan != 0 && e.plan != plan)
            {
                earlier.push(id);
            }
        }
        for id in earlier {
            self.finish(id, t);
        }
    }

    fn finish(&mut self, id: u64, t: u64) {
        let Some(mut op) = self.open.remove(&id) else {
            return;
        };
        // Receives that outlived the kernel: these KernelCh timers, and the handle's
        // from here on, are another work's (as `plugin_out_table::lagged_from`).
        let contradicted = op.kch_seen != 0 && op.recv_stop > op.kch_seen.saturating_add(PROXY_AFTER_KERNEL_NS);
        let h = self
            .handles
            .get_mut(&op.comm)
            .expect("an open operation has its handle");
        if let Some(i) = h.open.iter().position(|&x| x == id) {
            h.open.remove(i);
        }
        if contradicted {
            (h.lagged, op.lagged) = (true, true);
            for later in &h.open {
                if let Some(o) = self.open.get_mut(later).filter(|o| o.record > op.record) {
                    o.lagged = true;
                }
            }
        }
        self.done(op, self.epoch(t));
    }

    fn done(&mut self, op: OpenOp, done_ns: i64) {
        self.unresolved.push((op, done_ns));
    }

    /// Builds the finished operations whose communicator and strings are known.
    fn resolve_pending(&mut self) {
        if self.unresolved.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.unresolved);
        for (o, done_ns) in pending {
            let ci = o.comm as usize - 1;
            let dtype_id = o.api.map_or(o.dtype, |a| a.dtype);
            let known = |s: u32| s == 0 || self.strings.contains_key(&s);
            if ci >= self.comms.len() || !known(o.func) || !known(dtype_id) {
                self.unresolved.push((o, done_ns));
                continue;
            }
            match self.build(&o, done_ns) {
                Some(f) => {
                    self.counts.ops += 1;
                    self.counts.ops_with_gpu += f.op.gpu.is_some() as u64;
                    self.out.push(f);
                }
                None => self.counts.unknown_funcs += 1,
            }
        }
    }

    fn string(&self, id: u32) -> &str {
        self.strings.get(&id).map_or("", String::as_str)
    }

    /// One operation as `trace_to_table` makes it.
    fn build(&self, o: &OpenOp, done_ns: i64) -> Option<FinishedOp> {
        let kind = OpKind::from_name(self.string(o.func).as_bytes())?;
        let (count, dtype, stream, cpu) = match o.api {
            Some(a) => (a.count, a.dtype, Some(a.stream), a.start_ns),
            None => (o.count, o.dtype, None, o.start_ns),
        };
        let dt = DataType::from_name(self.string(dtype)).unwrap_or(DataType::Unknown(-1));
        let mut op = CollOp::new(ProcIdx(0), DevIdx(0), CommIdx(o.comm - 1), kind, count, dt);
        op.comm_seq = o.seq;
        op.tid = self.threads.get(&o.thread).copied().unwrap_or(0);
        op.stream = stream;
        op.cpu_ts_ns = Some(self.epoch(cpu));
        op.line = o.record;
        (op.sendbuff, op.recvbuff) = (o.sendbuff, o.recvbuff);
        match o.ty {
            T_P2P => {
                op.seq = o.p2p_seq;
                op.peer = u32::try_from(o.peer).ok();
                if kind == OpKind::Recv {
                    (op.sendbuff, op.recvbuff) = (0, o.sendbuff);
                }
            }
            ty => {
                op.seq = o.nccl_seq;
                op.root = u32::try_from(o.root).ok().filter(|_| kind.is_rooted());
                if ty == T_COLL {
                    op.algo = Algorithm::from_name(self.string(o.algo).as_bytes());
                    op.proto = Protocol::from_name(self.string(o.proto).as_bytes());
                }
            }
        }
        op.channels = (o.n_channels > 0 && o.ty != T_CE_COLL).then(|| (0, o.n_channels as u16 - 1));
        let clock = self.dev_key(o.comm).and_then(|k| self.clocks.get(&k));
        if let (true, Some(clock)) = (o.gpu_min != u64::MAX && o.gpu_max >= o.gpu_min && !o.lagged, clock) {
            let to_epoch = |g: u64| self.epoch(clock.to_cpu(g));
            op.gpu = Some(GpuSpan {
                start_ns: to_epoch(o.gpu_min),
                end_ns: to_epoch(o.gpu_max),
            });
        }
        Some(FinishedOp {
            op,
            done_ns,
            coll_ordinal: o.coll_ordinal,
        })
    }

    /// Drops parked effects of `thread`'s ids that can no longer start.
    fn purge_parked(&mut self, thread: u64) {
        if self.parked.is_empty() {
            return;
        }
        let Some(&max) = self.max_started.get(&thread) else {
            return;
        };
        let before: usize = self.parked.values().map(Vec::len).sum();
        self.parked
            .retain(|&id, _| id >> 40 != thread || counter(id) > max);
        let after: usize = self.parked.values().map(Vec::len).sum();
        self.counts.forgotten += (before - after) as u64;
    }

    /// Operations started and not finished, in no particular order.
    pub fn in_flight(&self) -> impl Iterator<Item = InFlightOp> + '_ {
        self.open.values().map(|o| InFlightOp {
            comm: o.comm,
            seq: o.seq,
            nccl_seq: (o.ty != T_P2P).then_some(o.nccl_seq),
            kind: OpKind::from_name(self.string(o.func).as_bytes()),
            start_ns: self.epoch(o.api.map_or(o.start_ns, |a| a.start_ns)),
            running: o.ch_started > 0,
            channels_done: o.ch_stopped,
            channels: (o.n_channels as u16).max(o.ch_started),
        })
    }

    pub fn open_count(&self) -> usize {
        self.open.len()
    }
}
