//! Alignment of one rank's log records with its kernels, and the result type
//! both aligners return.
//!
//! * [`needleman_wunsch()`]: the thesis's scorer (eqs. 4.1–4.3), O(n·m) global
//!   alignment of op-name sequences; a reproduction and a baseline.
//! * [`align_rank`] (module [`production`]): the aligner commlens uses: per
//!   stream, every shared feature, many-to-one matches (Send/Recv → SendRecv
//!   fusion, 2:1 batching), timing, a windowed, banded DP whose working memory
//!   does not grow with the sequences.
//!
//! * [`align_run`] (module [`consensus`]): all ranks of a run together; a
//!   kernel a rank's trace lost is located by its peers' kernels of the same
//!   collective (they end together), and stands in for it while the rank is aligned.
//!
//! Internals: [`signature`] (features folded into bytes), [`features`]
//! (emission and transition scores), [`gaps`] (where gaps belong), [`window_dp`]
//! (the windowed dynamic program), [`lag`] (log-to-kernel delay model),
//! [`streams`] (pairing log queues with trace streams).

pub mod consensus;
pub mod features;
pub mod gaps;
pub mod lag;
pub mod needleman_wunsch;
pub mod production;
pub mod signature;
pub mod streams;
pub mod window_dp;

pub use needleman_wunsch::{align_rank_thesis, needleman_wunsch, NwAlignment, NwParams, NwStep};
pub use consensus::{align_run, RankInput};
pub use production::{align_rank, align_ranks, AlignConfig};

/// Most log records one kernel can explain (a fused point-to-point group).
pub const MAX_GROUP: usize = 4;

/// How the log records of a match relate to its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchShape {
    /// One record, one kernel.
    OneToOne,
    /// Two identical collective records, one kernel (rank-dependent 2:1 batching, thesis Tables 4.1/4.2).
    Batched,
    /// Several Send/Recv records of one group, one `SendRecv` kernel.
    FusedP2p,
}

/// One kernel and the log records it executed. Indices are positions in the
/// slices passed to the aligner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    pub kernel: u32,
    logs: [u32; MAX_GROUP],
    n_logs: u8,
    pub shape: MatchShape,
    /// Confidence in [0, 1]: feature agreement, divided by the number of equally
    /// good alternative partners nearby (see [`production`]).
    pub confidence: f32,
}

impl Match {
    /// # Panics
    /// When `logs` is empty or longer than [`MAX_GROUP`].
    pub fn new(kernel: u32, logs: &[u32], shape: MatchShape, confidence: f32) -> Match {
        assert!(
            !logs.is_empty() && logs.len() <= MAX_GROUP,
            "a match holds 1..={MAX_GROUP} logs"
        );
        let mut arr = [0u32; MAX_GROUP];
        arr[..logs.len()].copy_from_slice(logs);
        Match {
            kernel,
            logs: arr,
            n_logs: logs.len() as u8,
            shape,
            confidence,
        }
    }

    /// The log records this kernel explains, in log order.
    pub fn logs(&self) -> &[u32] {
        &self.logs[..self.n_logs as usize]
    }
}

/// What one stream's alignment found (production aligner).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamReport {
    /// Trace stream id; `None` when all kernels were aligned as one sequence.
    pub kernel_stream: Option<u64>,
    /// Log queue keys ([`crate::LogEntry::queue_key`]) aligned against it.
    pub log_keys: Vec<u64>,
    /// Cosine similarity of the feature profiles that paired them (1 when trivially paired).
    pub similarity: f32,
    pub n_logs: usize,
    pub n_kernels: usize,
    pub n_matches: usize,
    pub n_batched: usize,
    pub n_fused: usize,
    /// Whether the stream was judged to batch 2:1 (after the first pass).
    pub batching: bool,
    /// Robust spread of log→kernel delay residuals, when timing was used.
    pub lag_sigma_ns: Option<f64>,
}

/// The alignment of one rank: matches in kernel order, and everything left over.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Alignment {
    pub matches: Vec<Match>,
    /// Log records no kernel explains (dropped kernels, the "+20 AllReduce" records).
    pub unmatched_logs: Vec<u32>,
    /// Kernels no log record explains (dropped log lines, unlogged SendRecv kernels).
    pub unmatched_kernels: Vec<u32>,
    /// Per aligned stream (empty for the thesis-faithful aligner).
    pub streams: Vec<StreamReport>,
}

impl Alignment {
    /// Builds the leftover lists from the matches: every index not matched is unmatched.
    pub fn from_matches(mut matches: Vec<Match>, n_logs: usize, n_kernels: usize) -> Alignment {
        matches.sort_unstable_by_key(|m| m.kernel);
        let mut log_used = vec![false; n_logs];
        let mut kernel_used = vec![false; n_kernels];
        for m in &matches {
            kernel_used[m.kernel as usize] = true;
            for &l in m.logs() {
                log_used[l as usize] = true;
            }
        }
        let unused = |v: Vec<bool>| {
            v.iter()
                .enumerate()
                .filter(|(_, &u)| !u)
                .map(|(i, _)| i as u32)
                .collect::<Vec<u32>>()
        };
        Alignment {
            matches,
            unmatched_logs: unused(log_used),
            unmatched_kernels: unused(kernel_used),
            streams: Vec::new(),
        }
    }

    /// For every log record, the kernel it was matched to.
    pub fn log_to_kernel(&self, n_logs: usize) -> Vec<Option<u32>> {
        let mut out = vec![None; n_logs];
        for m in &self.matches {
            for &l in m.logs() {
                out[l as usize] = Some(m.kernel);
            }
        }
        out
    }

    /// Number of log records matched to some kernel.
    pub fn n_matched_logs(&self) -> usize {
        self.matches.iter().map(|m| m.logs().len()).sum()
    }

    /// Number of matches per shape: (one-to-one, batched, fused).
    pub fn shape_counts(&self) -> (usize, usize, usize) {
        self.matches
            .iter()
            .fold((0, 0, 0), |(a, b, c), m| match m.shape {
                MatchShape::OneToOne => (a + 1, b, c),
                MatchShape::Batched => (a, b + 1, c),
                MatchShape::FusedP2p => (a, b, c + 1),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_are_the_complement() {
        let m = vec![
            Match::new(2, &[3, 4], MatchShape::Batched, 0.9),
            Match::new(0, &[0], MatchShape::OneToOne, 1.0),
        ];
        let a = Alignment::from_matches(m, 6, 4);
        assert_eq!(a.matches[0].kernel, 0);
        assert_eq!(a.unmatched_logs, vec![1, 2, 5]);
        assert_eq!(a.unmatched_kernels, vec![1, 3]);
        assert_eq!(
            a.log_to_kernel(6),
            vec![Some(0), None, None, Some(2), Some(2), None]
        );
        assert_eq!(a.n_matched_logs(), 3);
        assert_eq!(a.shape_counts(), (1, 1, 0));
    }
}
