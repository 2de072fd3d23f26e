//! Host-timed compute tasks: their CPU spans, and which collectives they wait for.
//!
//! Spans ([`task_spans`]): a linked task runs from its op's start to the next linked op's
//! start, but ends early at a communication call in between: the collective is issued when
//! the CPU calls it, and the CPU time from the call on (its launch, the ops after it) belongs
//! to the next task. Ending the span at the next op instead issued every collective up to
//! ~110 µs late (rank 7's `nccl:all_to_all` and the `aten::to` after it) and left that much
//! too little CPU work between it and the next call.
//!
//! Waits ([`cpu_runs_ahead`]):
//! With host time ([`super::AttachOptions::host_time`]) a compute task is a span of the CPU
//! timeline. The CPU does not wait for an asynchronous collective: it enqueues the kernels
//! that read the result and goes on; only the GPU waits. It waits where it called something
//! that drains the GPU's queue (a stream, device or event synchronize, a copy to the host),
//! and then for every collective whose result the queued GPU work consumed. The Kineto
//! traces of the PARAM DLRM job show it: rank 0 blocks 1078 µs in a `cudaStreamSynchronize`
//! and 880 µs in a device-to-host `cudaMemcpyAsync` after two all-to-alls that wait for the
//! last rank, while the CPU work between each all-to-all call and that copy (~196 µs) runs
//! during the wait. Keeping the graph's data dependencies on the CPU timeline put that work
//! after the collective's end, on every rank, and erased the arrival skew it causes on the
//! last rank (~165 µs at the next all-to-all).
//!
//! So a host-timed compute task keeps its dependencies on collectives only when a
//! synchronising call started inside its span; it then waits for every collective that a
//! compute task up to it depended on (stream order: the queued GPU work waits for them),
//! the latest per stream. Other compute tasks lose their dependencies on collectives (they
//! keep program order on their own stream). Collectives keep theirs: a call is issued when
//! the CPU reaches it.

use crate::{Program, Stream, Work};

/// (task, CPU start, CPU end) of each linked task. `by_start`: (op start, task) sorted by
/// start; `calls`: sorted starts of the communication calls; `last_end`: the last op's end.
pub(super) fn task_spans(by_start: &[(f64, usize)], calls: &[f64], last_end: f64) -> Vec<(usize, f64, f64)> {
    // Each span starts at its op, or at the first call since the previous linked op.
    let starts: Vec<f64> = by_start
        .iter()
        .enumerate()
        .map(|(i, &(ts, _))| {
            let prev = if i == 0 { f64::NEG_INFINITY } else { by_start[i - 1].0 };
            let c = calls.partition_point(|&c| c <= prev);
            calls.get(c).copied().filter(|&c| c < ts).unwrap_or(ts)
        })
        .collect();
    (0..by_start.len()).map(|i| (by_start[i].1, starts[i], starts.get(i + 1).copied().unwrap_or(last_end).max(starts[i]))).collect()
}

/// Time in `[a, b)` covered by the sorted, possibly nested or overlapping `spans`.
pub(super) fn covered(spans: &[(f64, f64)], a: f64, b: f64) -> f64 {
    let hi = spans.partition_point(|s| s.0 < b);
    let mut cover = 0.0;
    let mut reach = a;
    for &(s, e) in &spans[..hi] {
        let (s, e) = (s.max(reach), e.min(b));
        if e > s {
            cover += e - s;
            reach = e;
        }
    }
    cover
}

/// Rewrites the dependencies of `p`'s compute tasks as above. `spans`: (task, CPU start,
/// CPU end) of the tasks linked to a Kineto op; `syncs`: sorted starts of synchronising calls.
pub(super) fn cpu_runs_ahead(p: &mut Program, spans: &[(usize, f64, f64)], syncs: &[f64]) {
    let mut sync = vec![false; p.tasks.len()];
    for &(ti, a, b) in spans {
        let i = syncs.partition_point(|&s| s < a);
        sync[ti] = syncs.get(i).is_some_and(|&s| s < b);
    }
    // Latest collective per stream that the GPU work queued so far waits for.
    let mut pending: Vec<(Stream, u32)> = Vec::new();
    for ti in 0..p.tasks.len() {
        if !matches!(p.tasks[ti].work, Work::Compute(_)) || p.tasks[ti].stream != Stream::Compute {
            continue;
        }
        let deps = std::mem::take(&mut p.tasks[ti].deps);
        let mut keep = Vec::new();
        for d in deps {
            let dt = &p.tasks[d as usize];
            if !matches!(dt.work, Work::Coll(_) | Work::P2p { .. }) {
                keep.push(d);
                continue;
            }
            match pending.iter_mut().find(|x| x.0 == dt.stream) {
                Some(x) => x.1 = x.1.max(d),
                None => pending.push((dt.stream, d)),
            }
        }
        if sync[ti] {
            keep.extend(pending.iter().map(|x| x.1));
            keep.sort_unstable();
            keep.dedup();
        }
        p.tasks[ti].deps = keep;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CollCall, Compute, ComputeKind, GroupKind, Phase, Task};
    use commlens_core::OpKind;

    fn compute(deps: Vec<u32>) -> Task {
        Task {
            stream: Stream::Compute,
            deps,
            phase: Phase::Other,
            work: Work::Compute(Compute { name: "op".into(), kind: ComputeKind::Other, flops: 0.0, mem_bytes: 0.0, time_us: Some(1.0) }),
        }
    }

    fn coll(deps: Vec<u32>) -> Task {
        let mut c = CollCall::grad_norm(GroupKind::World);
        c.kind = OpKind::AllToAll;
        c.sync = false;
        Task { stream: Stream::Comm(0), deps, phase: Phase::Other, work: Work::Coll(c) }
    }

    /// Two ops with a call between: the first ends at the call, the second starts there.
    #[test]
    fn spans_end_at_the_call_between_two_ops() {
        let spans = task_spans(&[(0.0, 3), (100.0, 5), (150.0, 6)], &[40.0, 60.0], 170.0);
        assert_eq!(spans, [(3, 0.0, 40.0), (5, 40.0, 150.0), (6, 150.0, 170.0)]);
    }

    /// Task 2 reads collective 1's result without blocking: it runs on; task 4 holds a
    /// synchronising call: it waits for collective 1 (task 2's) and 3 (its own), the latest
    /// of the stream standing for both.
    #[test]
    fn only_synchronising_tasks_wait_for_collectives() {
        let mut p = Program { tasks: vec![compute(vec![]), coll(vec![0]), compute(vec![1]), coll(vec![2]), compute(vec![3]), compute(vec![])] };
        let spans = [(0, 0.0, 10.0), (2, 10.0, 20.0), (4, 20.0, 30.0), (5, 30.0, 40.0)];
        cpu_runs_ahead(&mut p, &spans, &[25.0]);
        let deps: Vec<Vec<u32>> = p.tasks.iter().map(|t| t.deps.clone()).collect();
        assert_eq!(deps, [vec![], vec![0], vec![], vec![2], vec![3], vec![]]);
    }
}
