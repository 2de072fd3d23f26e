//! Reader of the files written by commlens's own NCCL profiler plugin
//! (`crates/plugin`, format `commlens-plugin v1`, specified in
//! `crates/plugin/FORMAT.md`): decodes the chunked binary records into a
//! [`PluginTrace`] (communicators, threads, strings, every event with its stop
//! time and states) and turns the collective, p2p and copy-engine operations
//! into the canonical [`OpTable`] with CPU and GPU times.
//!
//! Written independently of the plugin's encoder (same spec, no shared code),
//! so the round-trip tests check both sides. Unknown major versions are
//! rejected naming the file and line 1; corrupt chunks and records name the
//! byte offset; a truncated last chunk (a process killed mid-write) is counted,
//! not an error.

use crate::error::IngestError;
use crate::inputs::expand_inputs;
use crate::merge::merge_tables;
use commlens_core::model::{CommIdx, DevIdx, GpuSpan, ProcIdx};
use commlens_core::{Algorithm, CollOp, CommMember, DataType, Device, OpKind, OpTable, Process, Protocol};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// First word of the header line.
pub const MAGIC: &str = "commlens-plugin";
/// The major format version this reader understands.
pub const FORMAT_MAJOR: u32 = 1;

/// Event-type names by bit index (`ncclProfile*`).
pub const EVENT_NAMES: [&str; 16] = [
    "Group",
    "Coll",
    "P2p",
    "ProxyOp",
    "ProxyStep",
    "ProxyCtrl",
    "KernelCh",
    "NetPlugin",
    "GroupApi",
    "CollApi",
    "P2pApi",
    "KernelLaunch",
    "CeColl",
    "CeSync",
    "CeBatch",
    "KernelPhase",
];
const T_COLL: u8 = 1;
const T_P2P: u8 = 2;
const T_CE_COLL: u8 = 12;
const KERNEL_CH_STOP: i32 = 22;
/// START flag bits.
pub const FLAG_PARENT_FOREIGN: u8 = 1;
pub const FLAG_CTX_FOREIGN: u8 = 2;
pub const FLAG_CTX_NULL: u8 = 4;

/// True when `head` (the first bytes of a file) starts a commlens plugin file.
pub fn is_plugin_output(head: &[u8]) -> bool {
    head.starts_with(b"commlens-plugin ")
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PluginHeader {
    pub version: String,
    pub host: String,
    pub pid: u32,
    pub session: String,
    /// `CLOCK_MONOTONIC` and `CLOCK_REALTIME` read together at session start.
    pub mono_ns: u64,
    pub real_ns: u64,
    pub fields: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PluginComm {
    pub index: u32,
    pub api: u8,
    pub comm_hash: u64,
    pub rank: i32,
    pub nranks: i32,
    pub n_nodes: i32,
    pub init_ns: u64,
    pub fini_ns: Option<u64>,
    pub cuda_dev: Option<i32>,
    pub bus_id: Option<i64>,
    pub name: u32,
    pub mask: u32,
}

/// Type-specific descriptor fields. String fields are ids ([`PluginTrace::string`]).
#[rustfmt::skip]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Fields {
    None,
    GroupApi { graph_captured: bool, depth: i32 },
    CollApi { func: u32, count: u64, dtype: u32, root: i32, stream: u64, graph_captured: bool, user_tag: u64 },
    P2pApi { func: u32, count: u64, dtype: u32, stream: u64, graph_captured: bool, user_tag: u64 },
    KernelLaunch { stream: u64 },
    Coll { seq: u64, func: u32, sendbuff: u64, recvbuff: u64, count: u64, root: i32, dtype: u32, n_channels: u8,
           n_warps: u8, algo: u32, proto: u32, parent_group: u64, kernel_variant: u32, is_sym: bool, user_tag: u64 },
    P2p { func: u32, buff: u64, dtype: u32, count: u64, peer: i32, n_channels: u8, parent_group: u64, user_tag: u64 },
    ProxyOp { pid: i32, channel: u8, peer: i32, n_steps: i32, chunk_size: i32, is_send: bool },
    ProxyStep { step: i32 },
    KernelCh { channel: u8, ptimer: u64 },
    /// `net_kind` 1 = IB (`a` device, `b` qpNum, `c` opcode), 2 = socket (`a` fd, `b` op), 0 = not decoded.
    NetPlugin { id: i64, data: u64, net_kind: u8, net_type: u8, a: i32, b: i32, c: i32, length: u64 },
    CeColl { seq: u64, func: u32, sendbuff: u64, recvbuff: u64, count: u64, root: i32, dtype: u32, sync_strategy: u32,
             intra_batch_sync: bool, batch_size: u32, num_batches: u32, ce_seq: u32, stream: u64, user_tag: u64 },
    CeSync { is_complete: bool, nranks: i32 },
    CeBatch { num_ops: i32, total_bytes: u64, use_intra_sync: bool },
    KernelPhase { channel: u8, phase_id: u8, phase_name: u32, ptimer: u64 },
}

#[derive(Debug, Clone, Serialize)]
pub struct PluginEvent {
    /// The handle value NCCL saw (unique in the file).
    pub id: u64,
    /// Parent handle; another process's when `flags & FLAG_PARENT_FOREIGN`.
    pub parent: u64,
    /// Communicator index (1, 2, …; 0 when NULL or foreign).
    pub comm: u32,
    pub rank: i32,
    pub flags: u8,
    /// Event-type bit index (0 = Group … 15 = KernelPhase; others are future types).
    pub ty: u8,
    /// Emitting thread index (see [`PluginTrace::threads`]).
    pub thread: u32,
    /// 1-based record number of the START record in the file.
    pub record: u64,
    pub start_ns: u64,
    pub stop_ns: Option<u64>,
    /// GPU stop timer from `KernelChStop`/`KernelPhaseStop`, and when that state was recorded.
    pub gpu_stop: Option<u64>,
    pub gpu_stop_seen_ns: Option<u64>,
    pub n_states: u32,
    pub fields: Fields,
}

#[derive(Debug, Clone, Serialize)]
pub struct PluginState {
    pub id: u64,
    pub t_ns: u64,
    pub state: i32,
    pub arg: Option<u64>,
}

/// What reading one plugin file found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PluginReport {
    pub path: String,
    pub format: String,
    pub bytes: u64,
    pub chunks: u64,
    pub records: u64,
    pub starts: u64,
    pub stops: u64,
    pub states: u64,
    pub events_by_type: BTreeMap<String, u64>,
    pub comms: u64,
    pub threads: u64,
    /// Records a full thread buffer dropped (from DROPS and END records).
    pub dropped: u64,
    pub panics: u64,
    /// The last record is END (the last communicator was finalized or the process exited).
    pub clean_end: bool,
    pub truncated_bytes: u64,
    pub unknown_records: u64,
    pub orphan_stops: u64,
    pub orphan_states: u64,
    /// Started, never stopped (in flight when the file was written).
    pub open_events: u64,
    pub foreign_events: u64,
    pub ops: u64,
    pub ops_with_gpu: u64,
    pub ops_without_comm: u64,
    pub unknown_funcs: u64,
}

#[derive(Debug, Clone, Default)]
pub struct PluginTrace {
    pub path: PathBuf,
    pub header: PluginHeader,
    pub strings: HashMap<u32, String>,
    pub comms: Vec<PluginComm>,
    /// Thread index → OS thread id.
    pub threads: HashMap<u32, u32>,
    /// Events in START-record order.
    pub events: Vec<PluginEvent>,
    pub states: Vec<PluginState>,
    /// Event id → position in `events`.
    pub index: HashMap<u64, usize>,
    pub report: PluginReport,
}

impl PluginTrace {
    pub fn string(&self, id: u32) -> &str {
        self.strings.get(&id).map_or("", String::as_str)
    }
    pub fn comm(&self, index: u32) -> Option<&PluginComm> {
        index.checked_sub(1).and_then(|i| self.comms.get(i as usize)).filter(|c| c.index == index)
    }
    pub fn parent_of(&self, e: &PluginEvent) -> Option<&PluginEvent> {
        if e.flags & FLAG_PARENT_FOREIGN != 0 || e.parent == 0 {
            return None;
        }
        self.index.get(&e.parent).map(|&i| &self.events[i])
    }
    /// `CLOCK_MONOTONIC` ns → epoch ns, with the pair read at session start.
    pub fn epoch_ns(&self, mono: u64) -> i64 {
        (mono as i64).wrapping_add((self.header.real_ns as i64).wrapping_sub(self.header.mono_ns as i64))
    }
}

/// A format error on the header line (`line` 1) or at a byte offset.
fn bad(path: &Path, line: Option<u64>, at: Option<usize>, msg: String) -> IngestError {
    let what = match at {
        Some(off) => format!("byte offset {off}: {msg}"),
        None => msg,
    };
    IngestError::Format { path: path.to_path_buf(), line, what }
}

/// Little-endian cursor over one record; `None` past its end.
struct Cur<'a>(&'a [u8]);
macro_rules! getters {
    ($($name:ident: $t:ty),*) => {$(
        fn $name(&mut self) -> Option<$t> {
            let (a, rest) = self.0.split_first_chunk()?;
            self.0 = rest;
            Some(<$t>::from_le_bytes(*a))
        }
    )*};
}
impl Cur<'_> {
    getters!(u8: u8, u32: u32, i32: i32, u64: u64, i64: i64);
    fn b(&mut self) -> Option<bool> {
        self.u8().map(|v| v != 0)
    }
}

fn parse_header(path: &Path, bytes: &[u8]) -> Result<(PluginHeader, usize), IngestError> {
    let end = bytes.iter().take(8192).position(|&b| b == b'\n');
    let line = String::from_utf8_lossy(&bytes[..end.unwrap_or(bytes.len().min(80))]).into_owned();
    let mut words = line.split(' ');
    if words.next() != Some(MAGIC) {
        return Err(bad(path, Some(1), None, format!("not a commlens plugin file (starts with {:?})", line)));
    }
    let version = words.next().unwrap_or("").to_string();
    let major = version.strip_prefix('v').and_then(|v| v.split('.').next()).and_then(|m| m.parse::<u32>().ok());
    if major != Some(FORMAT_MAJOR) {
        let msg = format!("commlens-plugin format {version:?} is not supported (this reader reads v{FORMAT_MAJOR})");
        return Err(bad(path, Some(1), None, msg));
    }
    let Some(end) = end else { return Err(bad(path, Some(1), None, "header line has no end".into())) };
    let mut h = PluginHeader { version, ..Default::default() };
    for kv in words {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "host" => h.host = v.to_string(),
            "pid" => h.pid = v.parse().unwrap_or(0),
            "session" => h.session = v.to_string(),
            "mono_ns" => h.mono_ns = v.parse().unwrap_or(0),
            "real_ns" => h.real_ns = v.parse().unwrap_or(0),
            _ => {}
        }
        h.fields.push((k.to_string(), v.to_string()));
    }
    Ok((h, end + 1))
}

fn start_fields(ty: u8, c: &mut Cur) -> Option<Fields> {
    Some(match ty {
        8 => Fields::GroupApi { graph_captured: c.b()?, depth: c.i32()? },
        #[rustfmt::skip]
        9 => Fields::CollApi { func: c.u32()?, count: c.u64()?, dtype: c.u32()?, root: c.i32()?, stream: c.u64()?,
                               graph_captured: c.b()?, user_tag: c.u64()? },
        #[rustfmt::skip]
        10 => Fields::P2pApi { func: c.u32()?, count: c.u64()?, dtype: c.u32()?, stream: c.u64()?, graph_captured: c.b()?,
                               user_tag: c.u64()? },
        11 => Fields::KernelLaunch { stream: c.u64()? },
        #[rustfmt::skip]
        1 => Fields::Coll { seq: c.u64()?, func: c.u32()?, sendbuff: c.u64()?, recvbuff: c.u64()?, count: c.u64()?,
                            root: c.i32()?, dtype: c.u32()?, n_channels: c.u8()?, n_warps: c.u8()?, algo: c.u32()?,
                            proto: c.u32()?, parent_group: c.u64()?, kernel_variant: c.u32()?, is_sym: c.b()?,
                            user_tag: c.u64()? },
        #[rustfmt::skip]
        2 => Fields::P2p { func: c.u32()?, buff: c.u64()?, dtype: c.u32()?, count: c.u64()?, peer: c.i32()?,
                           n_channels: c.u8()?, parent_group: c.u64()?, user_tag: c.u64()? },
        #[rustfmt::skip]
        3 => Fields::ProxyOp { pid: c.i32()?, channel: c.u8()?, peer: c.i32()?, n_steps: c.i32()?, chunk_size: c.i32()?,
                               is_send: c.i32()? != 0 },
        4 => Fields::ProxyStep { step: c.i32()? },
        6 => Fields::KernelCh { channel: c.u8()?, ptimer: c.u64()? },
        #[rustfmt::skip]
        7 => Fields::NetPlugin { id: c.i64()?, data: c.u64()?, net_kind: c.u8()?, net_type: c.u8()?, a: c.i32()?,
                                 b: c.i32()?, c: c.i32()?, length: c.u64()? },
        #[rustfmt::skip]
        12 => Fields::CeColl { seq: c.u64()?, func: c.u32()?, sendbuff: c.u64()?, recvbuff: c.u64()?, count: c.u64()?,
                               root: c.i32()?, dtype: c.u32()?, sync_strategy: c.u32()?, intra_batch_sync: c.b()?,
                               batch_size: c.u32()?, num_batches: c.u32()?, ce_seq: c.u32()?, stream: c.u64()?,
                               user_tag: c.u64()? },
        13 => Fields::CeSync { is_complete: c.b()?, nranks: c.i32()? },
        14 => Fields::CeBatch { num_ops: c.i32()?, total_bytes: c.u64()?, use_intra_sync: c.b()? },
        15 => Fields::KernelPhase { channel: c.u8()?, phase_id: c.u8()?, phase_name: c.u32()?, ptimer: c.u64()? },
        _ => Fields::None,
    })
}

/// Decodes one plugin file held in memory.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<PluginTrace, IngestError> {
    let (header, mut off) = parse_header(path, bytes)?;
    let mut t = PluginTrace { path: path.to_path_buf(), header, ..Default::default() };
    let r = &mut t.report;
    r.path = path.display().to_string();
    r.format = t.header.version.clone();
    r.bytes = bytes.len() as u64;
    let mut stops: HashMap<u64, u64> = HashMap::new();
    let mut drops_by_thread: HashMap<u32, u64> = HashMap::new();
    let mut end_drops = 0;
    let mut last_kind = 0;
    while off < bytes.len() {
        let rest = &bytes[off..];
        if rest.len() < 16 || rest.len() < 16 + u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize {
            if rest.len() >= 4 && &rest[..4] != b"CHNK" {
                return Err(bad(path, None, Some(off), "bad chunk magic (expected \"CHNK\")".into()));
            }
            t.report.truncated_bytes = rest.len() as u64;
            break;
        }
        if &rest[..4] != b"CHNK" {
            return Err(bad(path, None, Some(off), "bad chunk magic (expected \"CHNK\")".into()));
        }
        let thread = u32::from_le_bytes(rest[4..8].try_into().unwrap());
        let len = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        let mut p = 16;
        t.report.chunks += 1;
        while p < 16 + len {
            let at = off + p;
            let rec_len = if 16 + len - p >= 4 { u16::from_le_bytes([rest[p], rest[p + 1]]) as usize } else { 0 };
            if rec_len < 4 || p + rec_len > 16 + len {
                return Err(bad(path, None, Some(at), format!("record length {rec_len} does not fit its chunk")));
            }
            let (kind, sub) = (rest[p + 2], rest[p + 3]);
            let mut c = Cur(&rest[p + 4..p + rec_len]);
            t.report.records += 1;
            let record = t.report.records;
            let malformed = || bad(path, None, Some(at), format!("record kind {kind} is too short ({rec_len} bytes)"));
            last_kind = kind;
            match kind {
                1 => {
                    let id = c.u32().ok_or_else(malformed)?;
                    t.strings.insert(id, String::from_utf8_lossy(c.0).into_owned());
                }
                2 => {
                    let (idx, tid) = (c.u32().ok_or_else(malformed)?, c.u32().ok_or_else(malformed)?);
                    t.threads.insert(idx, tid);
                }
                3 => {
                    #[rustfmt::skip]
                    let comm = (|| Some(PluginComm { index: c.u32()?, api: sub, comm_hash: c.u64()?, rank: c.i32()?,
                        nranks: c.i32()?, n_nodes: c.i32()?, init_ns: c.u64()?, fini_ns: None,
                        cuda_dev: Some(c.i32()?).filter(|&d| d >= 0), bus_id: Some(c.i64()?).filter(|&b| b >= 0),
                        name: c.u32()?, mask: c.u32()? }))().ok_or_else(malformed)?;
                    if comm.index as usize != t.comms.len() + 1 {
                        return Err(bad(path, None, Some(at), format!("communicator {} out of order", comm.index)));
                    }
                    t.comms.push(comm);
                }
                4 => {
                    let (idx, ts) = (c.u32().ok_or_else(malformed)?, c.u64().ok_or_else(malformed)?);
                    if let Some(cm) = idx.checked_sub(1).and_then(|i| t.comms.get_mut(i as usize)) {
                        cm.fini_ns = Some(ts);
                    }
                }
                5 => {
                    #[rustfmt::skip]
                    let ev = (|| Some(PluginEvent { id: c.u64()?, parent: c.u64()?, comm: c.u32()?, rank: c.i32()?,
                        flags: c.u8()?, ty: sub, thread, record, start_ns: c.u64()?, stop_ns: None, gpu_stop: None, gpu_stop_seen_ns: None,
                        n_states: 0, fields: start_fields(sub, &mut c)? }))().ok_or_else(malformed)?;
                    t.report.starts += 1;
                    let name = EVENT_NAMES.get(sub as usize).map_or_else(|| format!("type{sub}"), |s| s.to_string());
                    *t.report.events_by_type.entry(name).or_default() += 1;
                    if ev.flags & (FLAG_CTX_FOREIGN | FLAG_PARENT_FOREIGN) != 0 {
                        t.report.foreign_events += 1;
                    }
                    t.index.insert(ev.id, t.events.len());
                    t.events.push(ev);
                }
                6 => {
                    let (id, ts) = (c.u64().ok_or_else(malformed)?, c.u64().ok_or_else(malformed)?);
                    t.report.stops += 1;
                    stops.insert(id, ts);
                }
                7 => {
                    #[rustfmt::skip]
                    let s = (|| Some(PluginState { id: c.u64()?, t_ns: c.u64()?, state: c.i32()?,
                        arg: Some(c.u64()?).filter(|_| sub == 1) }))().ok_or_else(malformed)?;
                    t.report.states += 1;
                    t.states.push(s);
                }
                8 => {
                    let (th, total) = (c.u32().ok_or_else(malformed)?, c.u64().ok_or_else(malformed)?);
                    drops_by_thread.insert(th, total);
                }
                9 => {
                    let (_, d, panics) = (c.u64(), c.u64().ok_or_else(malformed)?, c.u64().ok_or_else(malformed)?);
                    end_drops = end_drops.max(d);
                    t.report.panics = t.report.panics.max(panics);
                }
                _ => t.report.unknown_records += 1,
            }
            p += rec_len;
        }
        off += 16 + len;
    }
    for (id, ts) in stops {
        match t.index.get(&id) {
            Some(&i) => t.events[i].stop_ns = Some(ts),
            None => t.report.orphan_stops += 1,
        }
    }
    for s in &t.states {
        match t.index.get(&s.id) {
            Some(&i) => {
                let e = &mut t.events[i];
                e.n_states += 1;
                if s.state == KERNEL_CH_STOP || s.state == 31 {
                    e.gpu_stop = s.arg.filter(|&v| v != 0);
                    e.gpu_stop_seen_ns = Some(s.t_ns);
                }
            }
            None => t.report.orphan_states += 1,
        }
    }
    let r = &mut t.report;
    r.dropped = end_drops.max(drops_by_thread.values().sum());
    r.clean_end = last_kind == 9 && r.truncated_bytes == 0;
    r.comms = t.comms.len() as u64;
    r.threads = t.threads.len() as u64;
    r.open_events = t.events.iter().filter(|e| e.stop_ns.is_none()).count() as u64;
    Ok(t)
}

/// Reads and decodes one plugin file.
pub fn read_trace(path: &Path) -> Result<PluginTrace, IngestError> {
    let bytes = std::fs::read(path).map_err(|e| IngestError::Io { path: path.to_path_buf(), source: e })?;
    decode(path, &bytes)
}

/// Per device: min over KernelCh observations of (CPU time seen − GPU timer), the
/// offset that maps the GPU globaltimer onto `CLOCK_MONOTONIC` (the proxy sees a
/// timer value only after the GPU wrote it, so the smallest difference is the tightest).
fn gpu_offsets(t: &PluginTrace, dev_of_comm: &[usize], n_dev: usize) -> Vec<Option<i64>> {
    let mut off: Vec<Option<i64>> = vec![None; n_dev];
    for e in &t.events {
        let Fields::KernelCh { ptimer, .. } = e.fields else { continue };
        let Some(&d) = e.comm.checked_sub(1).and_then(|i| dev_of_comm.get(i as usize)) else { continue };
        let mut see = |cpu: u64, gpu: u64| {
            if gpu != 0 {
                let v = (cpu as i64).wrapping_sub(gpu as i64);
                off[d] = Some(off[d].map_or(v, |o| o.min(v)));
            }
        };
        see(e.start_ns, ptimer);
        if let (Some(g), Some(seen)) = (e.gpu_stop, e.gpu_stop_seen_ns) {
            see(seen, g);
        }
    }
    off
}

/// The canonical table of one trace (one process): devices, communicator
/// handles, and one [`CollOp`] per Coll/P2p/CeColl event, in record order.
/// Not yet assembled (see [`load_plugin_outputs`]).
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
    table.per_rank = vec![Vec::new(); table.devices.len()];
    let offsets = gpu_offsets(t, &dev_of_comm, table.devices.len());
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
    let mut p2p_seq: HashMap<(u32, u32), u64> = HashMap::new();
    let (mut ops, mut with_gpu, mut no_comm, mut unknown) = (0, 0, 0, 0);
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
        if let (Some(&(g0, g1)), Some(o)) = (kernels.get(&e.id), offsets[d]) {
            if g0 != u64::MAX && g1 >= g0 {
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
    table
}

/// Reads plugin files and folders of them into one assembled table, with one
/// report per file. Files in folders that are not plugin output are skipped;
/// a named one is an error.
pub fn load_plugin_outputs(paths: &[PathBuf]) -> Result<(OpTable, Vec<PluginReport>), IngestError> {
    let files: Vec<(PathBuf, bool)> = expand_inputs(paths)?;
    let results: Vec<Result<Option<(OpTable, PluginReport)>, IngestError>> = files
        .par_iter()
        .map(|(path, explicit)| {
            let bytes = std::fs::read(path).map_err(|e| IngestError::Io { path: path.clone(), source: e })?;
            if !explicit && !is_plugin_output(&bytes) {
                return Ok(None);
            }
            let mut t = decode(path, &bytes)?;
            let table = trace_to_table(&mut t);
            Ok(Some((table, t.report)))
        })
        .collect();
    let (mut parts, mut reports) = (Vec::new(), Vec::new());
    for r in results {
        if let Some((t, rep)) = r? {
            parts.push(t);
            reports.push(rep);
        }
    }
    if parts.is_empty() {
        return Err(IngestError::NoInputs { paths: paths.to_vec() });
    }
    let (mut table, _) = merge_tables(parts);
    commlens_core::assemble::assemble(&mut table);
    Ok((table, reports))
}
