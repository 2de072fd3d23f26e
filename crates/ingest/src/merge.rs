//! Joins tables read from separate files into one, remapping indices.
//!
//! Processes are the same when host and pid agree; devices when their process
//! and CUDA ordinal agree; communicator handles when their process and pointer
//! agree. The returned [`Remap`]s let callers that aggregated per file (the
//! streaming `stats` path) re-key their results.

use commlens_core::model::{CommIdx, DevIdx, ProcIdx};
use commlens_core::OpTable;
use std::collections::HashMap;

/// Old index → new index, per kind, for one input table.
#[derive(Debug, Clone, Default)]
pub struct Remap {
    pub proc: Vec<ProcIdx>,
    pub dev: Vec<DevIdx>,
    pub comm: Vec<CommIdx>,
}

/// Merges tables (their `per_rank` operations included) into one.
pub fn merge_tables(parts: Vec<OpTable>) -> (OpTable, Vec<Remap>) {
    let mut out = OpTable::default();
    let mut procs: HashMap<(String, u32), ProcIdx> = HashMap::new();
    let mut devs: HashMap<(ProcIdx, Option<u32>), DevIdx> = HashMap::new();
    let mut comms: HashMap<(ProcIdx, u64), CommIdx> = HashMap::new();
    let mut remaps = Vec::with_capacity(parts.len());
    for part in parts {
        let mut r = Remap::default();
        out.sources.extend(part.sources);
        for p in part.processes {
            let key = (p.host.clone(), p.pid);
            let idx = *procs.entry(key).or_insert_with(|| {
                out.processes.push(p.clone());
                ProcIdx(out.processes.len() as u32 - 1)
            });
            let merged = &mut out.processes[idx.ix()];
            merged.nccl_version = merged.nccl_version.or(p.nccl_version);
            r.proc.push(idx);
        }
        for mut d in part.devices {
            d.proc = r.proc[d.proc.ix()];
            let key = (d.proc, d.cuda_dev);
            let idx = match devs.get(&key) {
                Some(&i) => {
                    let m = &mut out.devices[i.ix()];
                    m.nvml_dev = m.nvml_dev.or(d.nvml_dev);
                    m.bus_id = m.bus_id.or(d.bus_id);
                    i
                }
                None => {
                    out.devices.push(d);
                    out.per_rank.push(Vec::new());
                    let i = DevIdx(out.devices.len() as u32 - 1);
                    devs.insert(key, i);
                    i
                }
            };
            r.dev.push(idx);
        }
        for mut c in part.comms {
            c.proc = r.proc[c.proc.ix()];
            c.device = c.device.map(|d| r.dev[d.ix()]);
            c.logical = None;
            let key = (c.proc, c.ptr);
            let idx = match comms.get(&key) {
                Some(&i) => {
                    let m = &mut out.comms[i.ix()];
                    if c.n_ops > m.n_ops {
                        m.n_ops = c.n_ops;
                        m.op_seq_hash = c.op_seq_hash;
                    }
                    m.comm_id = m.comm_id.or(c.comm_id);
                    m.nranks = m.nranks.or(c.nranks);
                    m.rank = m.rank.or(c.rank);
                    m.device = m.device.or(c.device);
                    if m.tuning.is_none() {
                        m.tuning = c.tuning.take();
                    }
                    i
                }
                None => {
                    out.comms.push(c);
                    let i = CommIdx(out.comms.len() as u32 - 1);
                    comms.insert(key, i);
                    i
                }
            };
            r.comm.push(idx);
        }
        for t in part.topologies {
            if out.topology_of_host(&t.host).is_none() {
                out.topologies.push(t);
            }
        }
        for ops in part.per_rank {
            for mut op in ops {
                op.proc = r.proc[op.proc.ix()];
                op.dev = r.dev[op.dev.ix()];
                op.comm = r.comm[op.comm.ix()];
                out.per_rank[op.dev.ix()].push(op);
            }
        }
        remaps.push(r);
    }
    (out, remaps)
}
