//! Compute/communication overlap of one rank's GPU activity, with the
//! definitions of HolisticTraceAnalysis (HTA) so the figures can be compared:
//!
//! * **communication time**: the length of the union of the communication
//!   kernels' intervals (all streams merged);
//! * **overlap**: the time during which at least one communication kernel
//!   and at least one computation kernel run, as a share of communication
//!   time (HTA `get_comm_comp_overlap`, "percentage of communication time
//!   overlapped with computation"); memory and other activities do not count
//!   on either side;
//! * **exposed communication**: communication time not overlapped, in total
//!   and per iteration (e.g. per `ProfilerStep`);
//! * **kernel breakdown**: time in each exclusive combination of the
//!   COMPUTATION / COMMUNICATION / MEMORY classes (HTA
//!   `get_gpu_kernel_breakdown` with memory kernels, "COMPUTATION overlapping
//!   COMMUNICATION", …), summed durations and counts per class and per name;
//! * **temporal breakdown**: first start to last end of all GPU activity,
//!   idle time (no activity at all), computation time, the rest (HTA
//!   `get_temporal_breakdown`).
//!
//! The input is a stream of [`Span`]s the caller builds from its trace model
//! (the analysis crate does not depend on the readers). One sweep does it
//! all: each span becomes a start and an end event (16 bytes each, in one
//! vector), the events are sorted (O(n log n)), and a running count per class
//! gives the set of active classes between consecutive event times; the time
//! in each set is accumulated, and cumulative snapshots taken at iteration
//! boundaries give the per-iteration figures by subtraction. Counting active
//! spans per class is the same as HTA's merging of each class's intervals
//! before its sweep, without building the merged lists. Nothing is allocated
//! per kernel beyond the event vector and a per-name accumulator.

use serde::Serialize;

/// What a GPU activity is, for the overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Class {
    Computation,
    Communication,
    Memory,
    /// Counted in the temporal span and idle time only (HTA's OTHER: syncs).
    Other,
}

impl Class {
    /// Bit in a set of active classes; the first three follow HTA's order
    /// (COMPUTATION = 1, COMMUNICATION = 2, MEMORY = 4) so labels match.
    pub const fn bit(self) -> usize {
        match self {
            Class::Computation => 1,
            Class::Communication => 2,
            Class::Memory => 4,
            Class::Other => 8,
        }
    }

    pub const fn index(self) -> usize {
        match self {
            Class::Computation => 0,
            Class::Communication => 1,
            Class::Memory => 2,
            Class::Other => 3,
        }
    }

    pub const ALL: [Class; 4] = [Class::Computation, Class::Communication, Class::Memory, Class::Other];

    /// HTA's name of the kernel type.
    pub const fn label(self) -> &'static str {
        match self {
            Class::Computation => "COMPUTATION",
            Class::Communication => "COMMUNICATION",
            Class::Memory => "MEMORY",
            Class::Other => "OTHER",
        }
    }
}

/// One GPU activity interval. `name` is the caller's id (dense from 0) for
/// the per-name breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start_ns: i64,
    pub end_ns: i64,
    pub name: u32,
    pub class: Class,
}

/// Per-class (or per-name) summed durations, not merged: what a kernel table shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub count: u64,
    pub sum_ns: i64,
    pub max_ns: i64,
}

impl Totals {
    fn add(&mut self, d: i64) {
        self.count += 1;
        self.sum_ns += d;
        self.max_ns = self.max_ns.max(d);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NameTotals {
    pub name: u32,
    pub class: Class,
    pub totals: Totals,
}

/// Figures of one iteration `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct IterationOverlap {
    pub start_ns: i64,
    pub end_ns: i64,
    /// Communication time inside the iteration.
    pub comm_ns: i64,
    pub overlap_ns: i64,
    /// `comm_ns - overlap_ns`: communication nothing hides.
    pub exposed_comm_ns: i64,
    pub compute_ns: i64,
    /// Time with no GPU activity at all inside the iteration.
    pub idle_ns: i64,
}

/// Everything about one rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OverlapReport {
    /// Union of the communication intervals.
    pub comm_ns: i64,
    /// Union of the computation intervals.
    pub compute_ns: i64,
    /// Time with both communication and computation running.
    pub overlap_ns: i64,
    /// `comm_ns - overlap_ns`.
    pub exposed_comm_ns: i64,
    /// `100 × overlap / comm`; `None` without communication (HTA gives NaN).
    pub overlap_pct: Option<f64>,
    /// First start of any activity (0 when there is none).
    pub first_ns: i64,
    /// `last end − first start` over all activity (HTA's `kernel_time`).
    pub span_ns: i64,
    /// Time inside the span with nothing running (HTA's `idle_time`).
    pub idle_ns: i64,
    /// `span − compute − idle` (HTA's `non_compute_time`).
    pub non_compute_ns: i64,
    /// Time per exact set of active classes, indexed by the OR of
    /// [`Class::bit`]; index 0 is idle time inside the span.
    pub by_set_ns: [i64; 16],
    /// Summed durations per class, indexed by [`Class::index`].
    pub by_class: [Totals; 4],
    /// Summed durations per name, longest first.
    pub by_name: Vec<NameTotals>,
    /// Per iteration, in the order given.
    pub iterations: Vec<IterationOverlap>,
    /// Spans with `end < start`, left out.
    pub negative_spans: u64,
}

impl OverlapReport {
    /// HTA's kernel-type breakdown (COMPUTATION, COMMUNICATION, MEMORY and
    /// their "X overlapping Y" combinations; OTHER activity ignored): label
    /// and time, in HTA's bit order, non-zero entries only.
    pub fn kernel_type_breakdown(&self) -> Vec<(String, i64)> {
        let mut out = Vec::new();
        for set in 1..8usize {
            let ns: i64 = (0..2).map(|other| self.by_set_ns[set | (other << 3)]).sum();
            if ns > 0 {
                out.push((set_label(set), ns));
            }
        }
        out
    }
}

/// HTA's label for a set of active classes: the class names joined by
/// " overlapping ", lowest bit first.
pub fn set_label(set: usize) -> String {
    let names: Vec<&str> = Class::ALL.iter().filter(|c| set & c.bit() != 0).map(|c| c.label()).collect();
    names.join(" overlapping ")
}

/// An endpoint: time and what happens (see [`Event::op`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    t: i64,
    /// `0..4`: a span of class index `op` starts; `4..8`: one of class
    /// `op − 4` ends; `8 + i`: iteration boundary `i` (a snapshot).
    op: u32,
}

const MARK: u32 = 8;

/// Runs the sweep over one rank's spans (any order) with optional iteration
/// ranges (`[start, end)`, any order, may overlap).
pub fn comm_comp_overlap<I: IntoIterator<Item = Span>>(spans: I, iterations: Option<&[(i64, i64)]>) -> OverlapReport {
    let spans = spans.into_iter();
    let iters = iterations.unwrap_or(&[]);
    let mut events: Vec<Event> = Vec::with_capacity(2 * spans.size_hint().0 + 2 * iters.len());
    let mut rep = OverlapReport::default();
    let mut by_name: Vec<Option<NameTotals>> = Vec::new();
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for s in spans {
        if s.end_ns < s.start_ns {
            rep.negative_spans += 1;
            continue;
        }
        let d = s.end_ns - s.start_ns;
        rep.by_class[s.class.index()].add(d);
        let i = s.name as usize;
        if i >= by_name.len() {
            by_name.resize(i + 1, None);
        }
        by_name[i].get_or_insert(NameTotals { name: s.name, class: s.class, totals: Totals::default() }).totals.add(d);
        if d > 0 {
            first = first.min(s.start_ns);
            last = last.max(s.end_ns);
            let c = s.class.index() as u32;
            events.push(Event { t: s.start_ns, op: c });
            events.push(Event { t: s.end_ns, op: 4 + c });
        }
    }
    for (i, &(a, b)) in iters.iter().enumerate() {
        events.push(Event { t: a, op: MARK + 2 * i as u32 });
        events.push(Event { t: b.max(a), op: MARK + 2 * i as u32 + 1 });
    }
    events.sort_unstable();

    // Cumulative time per set up to the current event; snapshots per mark.
    // Time is clamped to [first start, last end] of the activity, so the
    // empty set inside it is idle time and nothing outside it counts.
    let (lo, hi) = (first, last.max(first));
    let clamp = |t: i64| t.clamp(lo, hi);
    let mut cum = [0i64; 16];
    let mut snaps: Vec<[i64; 16]> = vec![[0; 16]; 2 * iters.len()];
    let mut active = [0u32; 4];
    let mut set = 0usize;
    let mut prev = lo;
    for e in &events {
        let t = clamp(e.t);
        cum[set] += t - prev;
        prev = t;
        match e.op {
            op @ 0..=3 => {
                active[op as usize] += 1;
                set |= Class::ALL[op as usize].bit();
            }
            op @ 4..=7 => {
                let c = (op - 4) as usize;
                active[c] -= 1;
                if active[c] == 0 {
                    set &= !Class::ALL[c].bit();
                }
            }
            op => snaps[(op - MARK) as usize] = cum,
        }
    }
    rep.by_set_ns = cum;
    let comm = Class::Communication.bit();
    let comp = Class::Computation.bit();
    let sum_where = |c: &[i64; 16], f: &dyn Fn(usize) -> bool| -> i64 { (0..16).filter(|&s| f(s)).map(|s| c[s]).sum() };
    rep.comm_ns = sum_where(&cum, &|s| s & comm != 0);
    rep.compute_ns = sum_where(&cum, &|s| s & comp != 0);
    rep.overlap_ns = sum_where(&cum, &|s| s & comm != 0 && s & comp != 0);
    rep.exposed_comm_ns = rep.comm_ns - rep.overlap_ns;
    rep.overlap_pct = (rep.comm_ns > 0).then(|| 100.0 * rep.overlap_ns as f64 / rep.comm_ns as f64);
    if hi > lo {
        rep.first_ns = lo;
        rep.span_ns = hi - lo;
    }
    rep.idle_ns = cum[0];
    rep.non_compute_ns = rep.span_ns - rep.compute_ns - rep.idle_ns;
    rep.iterations = iters
        .iter()
        .enumerate()
        .map(|(i, &(a, b))| {
            let (s0, s1) = (&snaps[2 * i], &snaps[2 * i + 1]);
            let d: [i64; 16] = std::array::from_fn(|k| s1[k] - s0[k]);
            let comm_ns = sum_where(&d, &|s| s & comm != 0);
            let overlap_ns = sum_where(&d, &|s| s & comm != 0 && s & comp != 0);
            IterationOverlap {
                start_ns: a,
                end_ns: b,
                comm_ns,
                overlap_ns,
                exposed_comm_ns: comm_ns - overlap_ns,
                compute_ns: sum_where(&d, &|s| s & comp != 0),
                idle_ns: d[0],
            }
        })
        .collect();
    rep.by_name = by_name.into_iter().flatten().collect();
    rep.by_name.sort_by_key(|n| (std::cmp::Reverse(n.totals.sum_ns), n.name));
    rep
}

#[cfg(test)]
#[path = "overlap_tests.rs"]
mod tests;
