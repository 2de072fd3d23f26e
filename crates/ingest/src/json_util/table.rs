//! The canonical table built from plugin records (part of
//! [`crate::json_util`]): [`TableBuilder`] makes processes, devices,
//! communicator handles and per-rank operations, then `assemble`s them;
//! [`load_files`] and [`load_one`] run a per-file reader over several files
//! (or one) into one table.

use super::{open, PluginError, PluginReport};
use commlens_core::model::{CommIdx, DevIdx, ProcIdx};
use commlens_core::{CollOp, CommMember, Device, OpTable, Process};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A communicator handle as plugin records describe it.
pub(crate) struct HandleInfo {
    pub comm_hash: u64,
    pub rank: Option<u32>,
    pub nranks: Option<u32>,
    pub n_nodes: Option<u32>,
}

/// Builds an [`OpTable`] from plugin records (see the module docs).
///
/// Plugins name no GPU, so devices are inferred: the k-th distinct rank of a
/// communicator seen in a process runs on that process's k-th device. With
/// one GPU per process (torchrun, mpirun) that is exact; a process driving
/// several GPUs (`ncclCommInitAll`, nccl-tests `-g N`) gets one device per
/// rank of its communicators, whose `cuda_dev` is set to that order.
#[derive(Default)]
pub(crate) struct TableBuilder {
    pub t: OpTable,
    keys: Vec<Vec<Option<i64>>>,
    procs: HashMap<(String, u32), ProcIdx>,
    handles: HashMap<(ProcIdx, u64, u32), CommIdx>,
    ranks_seen: HashMap<(ProcIdx, u64), u32>,
    proc_devs: Vec<Vec<DevIdx>>,
    next_seq: Vec<u64>,
}

impl TableBuilder {
    pub fn process(&mut self, host: &str, pid: u32) -> ProcIdx {
        let next = ProcIdx(self.t.processes.len() as u32);
        let p = *self.procs.entry((host.to_string(), pid)).or_insert(next);
        if p == next {
            self.t.processes.push(Process { host: host.to_string(), pid, nccl_version: None });
            self.proc_devs.push(Vec::new());
        }
        p
    }

    /// The handle of `(process, communicator, rank)` and its device.
    pub fn handle(&mut self, proc: ProcIdx, h: &HandleInfo) -> (CommIdx, DevIdx) {
        let key = (proc, h.comm_hash, h.rank.unwrap_or(u32::MAX));
        if let Some(&c) = self.handles.get(&key) {
            let m = &mut self.t.comms[c.ix()];
            m.nranks = m.nranks.or(h.nranks);
            m.n_nodes = m.n_nodes.or(h.n_nodes);
            return (c, m.device.expect("plugin handles always have a device"));
        }
        let slot = self.ranks_seen.entry((proc, h.comm_hash)).or_insert(0);
        let k = *slot as usize;
        *slot += 1;
        while self.proc_devs[proc.ix()].len() <= k {
            let d = DevIdx(self.t.devices.len() as u32);
            let dev = Device { proc, cuda_dev: None, nvml_dev: None, bus_id: None, global_rank: None, local_rank: None };
            self.t.devices.push(dev);
            self.t.per_rank.push(commlens_core::RankOps::new());
            self.keys.push(Vec::new());
            self.proc_devs[proc.ix()].push(d);
        }
        let dev = self.proc_devs[proc.ix()][k];
        // No pointer in plugin output: a stable stand-in, unique per (comm, rank).
        let ptr = h.comm_hash ^ (key.2 as u64).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let (rank, nranks, n_nodes, comm_id) = (h.rank, h.nranks, h.n_nodes, Some(h.comm_hash));
        let m = CommMember { comm_id, rank, nranks, n_nodes, device: Some(dev), init_complete: true, ..CommMember::new(proc, ptr) };
        let c = CommIdx(self.t.comms.len() as u32);
        self.t.comms.push(m);
        self.next_seq.push(0);
        self.handles.insert(key, c);
        (c, dev)
    }

    /// Stores an operation (its `comm`, `dev`, `proc` set by the caller);
    /// numbers it within its handle; `seq == u64::MAX` becomes that number.
    pub fn push(&mut self, mut op: CollOp, time_key: Option<i64>) {
        let n = &mut self.next_seq[op.comm.ix()];
        op.comm_seq = *n;
        if op.seq == u64::MAX {
            op.seq = *n;
        }
        *n += 1;
        self.t.comms[op.comm.ix()].note_op(op.kind);
        self.keys[op.dev.ix()].push(time_key);
        self.t.per_rank[op.dev.ix()].push(op);
    }

    /// Orders each rank's operations by time (when every one has a time,
    /// else source order), then assembles global ranks and logical comms.
    pub fn finish(mut self) -> OpTable {
        for devs in &self.proc_devs {
            if devs.len() > 1 {
                for (k, d) in devs.iter().enumerate() {
                    self.t.devices[d.ix()].cuda_dev = Some(k as u32);
                }
            }
        }
        for (ops, keys) in self.t.per_rank.iter_mut().zip(self.keys) {
            let mut rows: Vec<(Option<i64>, CollOp)> = keys.into_iter().zip(std::mem::take(ops)).collect();
            if rows.iter().all(|r| r.0.is_some()) {
                rows.sort_by_key(|r| (r.0, r.1.line));
            } else {
                rows.sort_by_key(|r| r.1.line);
            }
            ops.extend(rows.into_iter().map(|r| r.1));
        }
        commlens_core::assemble::assemble(&mut self.t);
        self.t
    }
}

/// Reads several files (one per process or thread, as the plugins write
/// them) into one assembled table: `read_one` streams one opened file into
/// the builder and returns its report. Processes are joined by (host, pid).
/// Stops at the first file that fails.
pub(crate) fn load_files(
    paths: &[PathBuf],
    mut read_one: impl FnMut(&Path, Box<dyn Read + Send>, &mut TableBuilder) -> Result<PluginReport, PluginError>,
) -> Result<(OpTable, Vec<PluginReport>), PluginError> {
    let mut b = TableBuilder::default();
    let mut reports = Vec::with_capacity(paths.len());
    for path in paths {
        let report = read_one(path, open(path)?, &mut b)?;
        b.t.sources.push(report.path.clone());
        reports.push(report);
    }
    Ok((b.finish(), reports))
}

/// One file through a reader of several: its table and report.
pub(crate) fn load_one(
    path: &Path,
    load_paths: impl FnOnce(&[PathBuf]) -> Result<(OpTable, Vec<PluginReport>), PluginError>,
) -> Result<(OpTable, PluginReport), PluginError> {
    let (t, mut r) = load_paths(&[path.to_path_buf()])?;
    Ok((t, r.remove(0)))
}
