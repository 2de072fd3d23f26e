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
//!
//! This module owns the format constants, the decoded types ([`PluginTrace`] and
//! its parts, [`PluginReport`]) and the file-level entry points ([`read_trace`],
//! [`load_plugin_outputs`]). The byte-level decoding ([`decode`]) lives in
//! `plugin_out_decode`, the table building ([`trace_to_table`]) in
//! `plugin_out_table`; both are re-exported here.

use crate::error::IngestError;
use crate::inputs::expand_inputs;
use crate::merge::merge_tables;
use commlens_core::OpTable;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub use crate::plugin_out_decode::decode;
pub use crate::plugin_out_table::trace_to_table;

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
    /// Operations whose KernelCh timers NCCL took from an earlier work (after a self p2p
    /// on their communicator, or after an operation whose receive ProxyOps outlived its
    /// kernel; see `plugin_out_table`): left without a GPU span.
    pub ops_gpu_desync: u64,
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

/// Reads and decodes one plugin file.
pub fn read_trace(path: &Path) -> Result<PluginTrace, IngestError> {
    let bytes = std::fs::read(path).map_err(|e| IngestError::Io { path: path.to_path_buf(), source: e })?;
    decode(path, &bytes)
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
