//! The five alignment validation cases of thesis §4.3.1, as op-name sequences
//! ("Nsys" = kernels, "NCCL" = log records), with what the thesis reports.

use crate::entry::{KernelEntry, KernelKind, LogEntry};
use commlens_core::OpKind;
use OpKind::{AllGather as AG, AllReduce as AR, Broadcast as BC, Recv, ReduceScatter as RS, Send};

/// One validation case.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationCase {
    pub name: &'static str,
    pub nsys: Vec<KernelKind>,
    pub nccl: Vec<OpKind>,
    /// The thesis's reported result, for printing.
    pub thesis_result: &'static str,
}

impl ValidationCase {
    /// The case as aligner inputs: kind-only records, kind-only kernels on one
    /// stream with increasing start times, no timestamps.
    pub fn entries(&self) -> (Vec<LogEntry>, Vec<KernelEntry>) {
        let logs = self.nccl.iter().map(|&k| LogEntry::of_kind(k)).collect();
        let kernels = self
            .nsys
            .iter()
            .enumerate()
            .map(|(i, &k)| KernelEntry {
                start_ns: i as i64 * 1000,
                end_ns: i as i64 * 1000 + 500,
                ..KernelEntry::of_kind(k)
            })
            .collect();
        (logs, kernels)
    }
}

fn kernels(ops: &[OpKind]) -> Vec<KernelKind> {
    ops.iter().map(|&o| KernelKind::Op(o)).collect()
}

/// One differing op: two gaps must be preferred to a mismatch.
pub fn asymmetric_penalty() -> ValidationCase {
    ValidationCase {
        name: "asymmetric penalty",
        nsys: kernels(&[AR, AR, BC, AR]),
        nccl: vec![AR, AR, Send, AR],
        thesis_result: "3 matches, 0 mismatches, 2 gaps",
    }
}

/// The kernels must land in the exactly matching second of three similar log segments.
pub fn false_positive_prevention() -> ValidationCase {
    ValidationCase {
        name: "false positive prevention",
        nsys: kernels(&[AR, AR, BC, RS]),
        nccl: vec![AR, AR, AR, RS, AR, AR, BC, RS, AR, BC, AR, RS],
        thesis_result: ">= 75% of matches in segment 2",
    }
}

/// Every log op appears twice in a row.
pub fn consecutive_duplication() -> ValidationCase {
    let nsys = [AR, BC, AG, RS, AR];
    ValidationCase {
        name: "consecutive duplication",
        nsys: kernels(&nsys),
        nccl: nsys.iter().flat_map(|&o| [o, o]).collect(),
        thesis_result: "100% of kernels matched, 0 mismatches, 50% of records skipped",
    }
}

/// Identical sequences with runs.
pub fn sequence_bonus() -> ValidationCase {
    let seq: Vec<OpKind> = [vec![AR; 5], vec![BC], vec![RS; 3]].concat();
    ValidationCase {
        name: "sequence bonus",
        nsys: kernels(&seq),
        nccl: seq,
        thesis_result: "perfect alignment, i = j for all pairs",
    }
}

/// Three log-only ops between AllReduces; one extra AllReduce kernel.
pub fn adaptive_gap_penalty() -> ValidationCase {
    ValidationCase {
        name: "adaptive gap penalty",
        nsys: kernels(&[AR; 5]),
        nccl: vec![AR, BC, Send, Recv, AR, AR, AR],
        thesis_result: "maximum consecutive gap run <= 2",
    }
}

/// All five, in the thesis's order.
pub fn all() -> Vec<ValidationCase> {
    vec![
        asymmetric_penalty(),
        false_positive_prevention(),
        consecutive_duplication(),
        sequence_bonus(),
        adaptive_gap_penalty(),
    ]
}
