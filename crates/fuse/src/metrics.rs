//! Accuracy of an alignment against ground truth (thesis eqs. 4.17–4.19).
//!
//! Counting is per log record: the unit is the pair (record, kernel). A record
//! the aligner matched to its true kernel is a true positive, one matched to any
//! other kernel a false positive, and one whose true kernel exists but that the
//! aligner left unmatched or matched wrongly a false negative (a wrong match
//! therefore costs both). Many-to-one matches count once per record: a SendRecv
//! kernel fused from a Send and a Recv is two pairs, a 2:1 batched kernel too.
//! Records whose kernel does not exist (dropped kernels, unlogged work) are
//! correct when left unmatched and a false positive when matched.

use crate::align::Alignment;

/// True positives, false positives and false negatives of pair matching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prf {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
}

impl Prf {
    /// `TP/(TP+FP)`; 1 when nothing was predicted.
    pub fn precision(&self) -> f64 {
        if self.tp + self.fp == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fp) as f64
        }
    }

    /// `TP/(TP+FN)`; 1 when there was nothing to find.
    pub fn recall(&self) -> f64 {
        if self.tp + self.fn_ == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fn_) as f64
        }
    }

    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

/// Sums counts (micro-average over ranks or seeds).
impl std::ops::Add for Prf {
    type Output = Prf;

    fn add(self, o: Prf) -> Prf {
        Prf {
            tp: self.tp + o.tp,
            fp: self.fp + o.fp,
            fn_: self.fn_ + o.fn_,
        }
    }
}

/// Scores predicted record→kernel assignments against the truth (same length).
pub fn pair_metrics(predicted: &[Option<u32>], truth: &[Option<u32>]) -> Prf {
    assert_eq!(
        predicted.len(),
        truth.len(),
        "one entry per log record on both sides"
    );
    let mut m = Prf::default();
    for (p, t) in predicted.iter().zip(truth) {
        match (p, t) {
            (Some(a), Some(b)) if a == b => m.tp += 1,
            (Some(_), Some(_)) => {
                m.fp += 1;
                m.fn_ += 1;
            }
            (Some(_), None) => m.fp += 1,
            (None, Some(_)) => m.fn_ += 1,
            (None, None) => {}
        }
    }
    m
}

/// [`pair_metrics`] of an alignment.
pub fn score_alignment(a: &Alignment, truth: &[Option<u32>]) -> Prf {
    pair_metrics(&a.log_to_kernel(truth.len()), truth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_ratios() {
        let truth = [Some(0), Some(0), None, Some(1), Some(2)];
        let pred = [Some(0), None, Some(1), Some(1), Some(3)];
        let m = pair_metrics(&pred, &truth);
        assert_eq!(
            m,
            Prf {
                tp: 2,
                fp: 2,
                fn_: 2
            }
        );
        assert!((m.f1() - 0.5).abs() < 1e-12);
        let none = pair_metrics(&[None], &[None]);
        assert_eq!(
            (none.precision(), none.recall(), none.f1()),
            (1.0, 1.0, 1.0)
        );
        assert_eq!(pair_metrics(&[None], &[Some(1)]).f1(), 0.0);
    }
}
