//! Pairs one rank's log queues with its trace streams, so that each stream is
//! aligned on its own (kernels of different streams overlap and reorder on the
//! GPU; records of one queue keep their order on both sides).
//!
//! A log queue is a [`LogEntry::queue_key`] (stream pointer, else communicator);
//! a trace stream is a [`KernelEntry::stream`]. The two name spaces share no
//! identifier, so queues are paired with streams by the cosine similarity of
//! feature profiles: counts per kind class, per (kind, protocol), per (kind,
//! algorithm) and per (reducing kind, datatype). Pairs are taken greedily from
//! the most similar down, one queue per stream; a queue left over (two queues
//! sharing a stream) joins its most similar stream. Pairs below the threshold
//! are not made: their entries stay unmatched.

use crate::entry::{KernelEntry, KernelKind, LogEntry};
use commlens_core::{Algorithm, DataType, OpKind, Protocol};
use std::collections::HashMap;

/// One unit of alignment work: records (in log order) and kernels (by start time).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTask {
    pub kernel_stream: Option<u64>,
    pub log_keys: Vec<u64>,
    pub log_idx: Vec<u32>,
    pub kern_idx: Vec<u32>,
    pub similarity: f32,
}

const CLASSES: usize = 7;
const DIMS: usize = CLASSES * (1 + 4 + 8 + 5);

/// Splits a rank into stream tasks. With `per_stream == false`, or when either
/// side has a single queue, everything is one task.
pub fn plan(
    logs: &[LogEntry],
    kernels: &[KernelEntry],
    per_stream: bool,
    min_similarity: f32,
) -> Vec<StreamTask> {
    let mut queues: Vec<(u64, Vec<u32>)> = Vec::new();
    let mut qpos: HashMap<u64, usize> = HashMap::new();
    for (i, l) in logs.iter().enumerate() {
        let k = l.queue_key();
        let at = *qpos.entry(k).or_insert_with(|| {
            queues.push((k, Vec::new()));
            queues.len() - 1
        });
        queues[at].1.push(i as u32);
    }
    let mut streams: Vec<(u64, Vec<u32>)> = Vec::new();
    let mut spos: HashMap<u64, usize> = HashMap::new();
    for (j, k) in kernels.iter().enumerate() {
        let at = *spos.entry(k.stream).or_insert_with(|| {
            streams.push((k.stream, Vec::new()));
            streams.len() - 1
        });
        streams[at].1.push(j as u32);
    }
    for (_, idx) in &mut streams {
        idx.sort_by_key(|&j| (kernels[j as usize].start_ns, j));
    }
    if !per_stream || queues.len() <= 1 || streams.len() <= 1 {
        let mut kern_idx: Vec<u32> = (0..kernels.len() as u32).collect();
        kern_idx.sort_by_key(|&j| (kernels[j as usize].start_ns, j));
        let kernel_stream = (streams.len() == 1).then(|| streams[0].0);
        return vec![StreamTask {
            kernel_stream,
            log_keys: queues.iter().map(|q| q.0).collect(),
            log_idx: (0..logs.len() as u32).collect(),
            kern_idx,
            similarity: 1.0,
        }];
    }
    let qprof: Vec<[f32; DIMS]> = queues
        .iter()
        .map(|(_, idx)| profile(idx.iter().map(|&i| log_feat(&logs[i as usize]))))
        .collect();
    let sprof: Vec<[f32; DIMS]> = streams
        .iter()
        .map(|(_, idx)| {
            profile(
                idx.iter()
                    .filter_map(|&j| kernel_feat(&kernels[j as usize])),
            )
        })
        .collect();
    let mut cands: Vec<(f32, usize, usize)> = Vec::new();
    for (q, qp) in qprof.iter().enumerate() {
        for (s, sp) in sprof.iter().enumerate() {
            let sim = cosine(qp, sp);
            if sim >= min_similarity {
                cands.push((sim, q, s));
            }
        }
    }
    cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut q_to: Vec<Option<(usize, f32)>> = vec![None; queues.len()];
    let mut s_taken = vec![false; streams.len()];
    for &(sim, q, s) in &cands {
        if q_to[q].is_none() && !s_taken[s] {
            q_to[q] = Some((s, sim));
            s_taken[s] = true;
        }
    }
    for &(sim, q, s) in &cands {
        if q_to[q].is_none() {
            q_to[q] = Some((s, sim));
        }
    }
    let mut tasks: Vec<StreamTask> = streams
        .iter()
        .map(|(id, idx)| StreamTask {
            kernel_stream: Some(*id),
            log_keys: Vec::new(),
            log_idx: Vec::new(),
            kern_idx: idx.clone(),
            similarity: 0.0,
        })
        .collect();
    let mut orphan = StreamTask {
        kernel_stream: None,
        log_keys: Vec::new(),
        log_idx: Vec::new(),
        kern_idx: Vec::new(),
        similarity: 0.0,
    };
    for (q, (key, _)) in queues.iter().enumerate() {
        match q_to[q] {
            Some((s, sim)) => {
                let t = &mut tasks[s];
                t.log_keys.push(*key);
                t.similarity = if t.log_keys.len() == 1 {
                    sim
                } else {
                    t.similarity.min(sim)
                };
            }
            None => orphan.log_keys.push(*key),
        }
    }
    // Records keep log order inside a task even when several queues share it.
    let key_task: HashMap<u64, usize> = tasks
        .iter()
        .enumerate()
        .flat_map(|(t, task)| task.log_keys.iter().map(move |&k| (k, t)))
        .collect();
    for (i, l) in logs.iter().enumerate() {
        match key_task.get(&l.queue_key()) {
            Some(&t) => tasks[t].log_idx.push(i as u32),
            None => orphan.log_idx.push(i as u32),
        }
    }
    if !orphan.log_idx.is_empty() {
        tasks.push(orphan);
    }
    tasks
}

/// Feature buckets of one entry: (kind class, proto, algo, dtype class for reducing kinds).
type Feat = (usize, Option<Protocol>, Option<Algorithm>, Option<DataType>);

fn class(k: OpKind) -> usize {
    match k {
        OpKind::AllReduce => 0,
        OpKind::AllGather => 1,
        OpKind::ReduceScatter => 2,
        OpKind::Broadcast => 3,
        OpKind::Reduce => 4,
        OpKind::Send | OpKind::Recv | OpKind::SendRecv => 5,
        // Grouped point-to-point underneath: SendRecv kernels.
        OpKind::AllToAll | OpKind::Gather | OpKind::Scatter => 5,
    }
}

fn log_feat(l: &LogEntry) -> Feat {
    let dt = super::features::reduces(l.kind)
        .then_some(l.dtype)
        .flatten();
    let p2p = l.kind.is_p2p();
    (
        class(l.kind),
        l.proto.filter(|_| !p2p),
        l.algo.filter(|_| !p2p),
        dt,
    )
}

fn kernel_feat(k: &KernelEntry) -> Option<Feat> {
    let KernelKind::Op(op) = k.kind else {
        return None;
    };
    let dt = super::features::reduces(op).then_some(k.dtype).flatten();
    let p2p = op.is_p2p();
    Some((
        class(op),
        k.proto.filter(|_| !p2p),
        k.algo.filter(|_| !p2p),
        dt,
    ))
}

fn profile(feats: impl Iterator<Item = Feat>) -> [f32; DIMS] {
    let mut v = [0f32; DIMS];
    for (c, proto, algo, dt) in feats {
        v[c] += 1.0;
        if let Some(p) = proto {
            v[CLASSES + c * 4 + p as usize] += 1.0;
        }
        if let Some(a) = algo {
            v[CLASSES * 5 + c * 8 + a as usize] += 1.0;
        }
        if let Some(d) = dt {
            let dc = match d {
                DataType::Float16 => 0,
                DataType::Bfloat16 => 1,
                DataType::Float32 => 2,
                DataType::Float64 => 3,
                _ => 4,
            };
            v[CLASSES * 13 + c * 5 + dc] += 1.0;
        }
    }
    v
}

fn cosine(a: &[f32; DIMS], b: &[f32; DIMS]) -> f32 {
    let (mut ab, mut aa, mut bb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        ab / (aa.sqrt() * bb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_find_their_streams() {
        let mut logs = Vec::new();
        let mut kernels = Vec::new();
        for i in 0..30 {
            let (lk, kk, q, s) = if i % 3 == 0 {
                (OpKind::Send, OpKind::SendRecv, 0xa, 7)
            } else {
                (OpKind::AllGather, OpKind::AllGather, 0xb, 9)
            };
            logs.push(LogEntry {
                stream: Some(q),
                ..LogEntry::of_kind(lk)
            });
            kernels.push(KernelEntry {
                stream: s,
                start_ns: i,
                ..KernelEntry::of_kind(KernelKind::Op(kk))
            });
        }
        let tasks = plan(&logs, &kernels, true, 0.2);
        assert_eq!(tasks.len(), 2);
        for t in &tasks {
            let s = t.kernel_stream.unwrap();
            assert_eq!(t.log_keys, vec![if s == 7 { 0xa } else { 0xb }]);
            assert_eq!(t.log_idx.len(), t.kern_idx.len());
        }
        let one = plan(&logs, &kernels, false, 0.2);
        assert_eq!(
            (one.len(), one[0].log_idx.len(), one[0].kern_idx.len()),
            (1, 30, 30)
        );
    }
}
