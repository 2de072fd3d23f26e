//! The report model: plain, serde-serializable data that the HTML renderer
//! draws. It owns *what* a report says, not how it is computed (analyses fill
//! it) nor how it looks ([`super::html`] draws it).
//!
//! Every section is an `Option`: an absent section is rendered as a box that
//! names the input that would provide it, never silently dropped, so a reader
//! of a log-only report learns that a GPU trace would add the bandwidth chart.
//!
//! Conventions: operation kinds are the names `commlens_core::OpKind::name`
//! prints (`AllReduce`, `Send`, …), so colors stay consistent across charts;
//! units are in field names (`_bytes`, `_ns`, `_gb_s`); numbers that may be
//! unknown are `Option` rather than NaN, because JSON has no NaN.

use serde::{Deserialize, Serialize};

/// A whole report: header, key figures and the fixed list of sections.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub title: String,
    /// Tool and version line, e.g. `commlens 0.1.0`.
    pub generated_by: String,
    /// Input paths or descriptions, in the order given.
    pub inputs: Vec<String>,
    /// Key figures shown as tiles at the top (ranks, operations, bytes, …).
    pub summary: Vec<Figure>,
    /// Free-form remarks shown under the summary (reader warnings, caveats).
    pub notes: Vec<String>,
    pub op_mix: Option<OpMix>,
    pub rank_volume: Option<RankVolume>,
    pub size_histogram: Option<SizeHistogram>,
    pub bandwidth: Option<Bandwidth>,
    pub iterations: Option<IterationHeat>,
    pub stragglers: Option<Stragglers>,
    pub overlap: Option<Overlap>,
    pub model: Option<ModelTable>,
    /// Expected time and bus bandwidth from the collective model, per
    /// communicator × kind × size, beside the measured figures.
    #[serde(default)]
    pub expected: Option<ExpectedSection>,
    /// NCCL's logged algorithm/protocol choices against the model's tuner.
    #[serde(default)]
    pub tuning: Option<TuningSection>,
    /// Operations and collective instances that departed from their own history.
    #[serde(default)]
    pub anomalies: Option<AnomalySection>,
    /// A layout plan (`commlens plan --html`): ranking and memory per GPU. Shown first when
    /// present; a report with a plan does not list the trace sections it lacks.
    #[serde(default)]
    pub plan: Option<PlanSection>,
    /// Further tables (bottlenecks, classification, …), shown after the charts.
    pub tables: Vec<ReportTable>,
    /// Overrides of the built-in "what would provide this" text of absent
    /// sections, e.g. `(SectionKind::Overlap, "run with --trace to add it")`.
    pub absent_hints: Vec<(SectionKind, String)>,
}

/// One key figure tile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub label: String,
    pub value: String,
    /// Small print under the value (e.g. "across 3 communicators").
    pub detail: Option<String>,
}

impl Figure {
    pub fn new(label: impl Into<String>, value: impl Into<String>) -> Figure {
        Figure { label: label.into(), value: value.into(), detail: None }
    }
}

/// The optional sections, to name one in [`Report::absent_hints`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SectionKind {
    OpMix,
    RankVolume,
    SizeHistogram,
    Bandwidth,
    Iterations,
    Stragglers,
    Overlap,
    Model,
    Expected,
    Tuning,
    Anomalies,
}

/// Operation mix: how many operations and bytes per kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OpMix {
    pub rows: Vec<OpMixRow>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpMixRow {
    /// Operation kind name (`AllReduce`, …).
    pub kind: String,
    pub count: u64,
    pub bytes: u64,
}

/// Bytes per rank, split by kind (stacked bars).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RankVolume {
    /// Stack order of the kinds; `RankBytes::bytes` is aligned with it.
    pub kinds: Vec<String>,
    pub ranks: Vec<RankBytes>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankBytes {
    /// Rank label, e.g. `0` or `node3:gpu5`.
    pub rank: String,
    /// Bytes per kind, aligned with [`RankVolume::kinds`] (missing = 0).
    pub bytes: Vec<u64>,
}

/// Message-size histogram: operation counts per size bucket and kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SizeHistogram {
    /// One label per bucket, e.g. `≤1 KiB`, `1–4 KiB`.
    pub buckets: Vec<String>,
    /// Per kind, counts aligned with `buckets` (missing = 0).
    pub series: Vec<KindCounts>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindCounts {
    pub kind: String,
    pub counts: Vec<u64>,
}

/// Bus bandwidth against message size, with theoretical limits.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Bandwidth {
    /// One series per kind; the renderer downsamples beyond 5,000 points.
    pub series: Vec<BandwidthSeries>,
    /// Horizontal limit lines (e.g. `NVLink bottleneck` at 370 GB/s).
    pub limits: Vec<Limit>,
    /// How busbw was computed, e.g. `nccl-tests bus bandwidth`.
    pub convention: String,
    pub notes: Vec<String>,
    /// Measured reference curves (nccl-tests runs on the same machines),
    /// drawn as lines; points compare with them through `vs_baseline`.
    #[serde(default)]
    pub baselines: Vec<BaselineCurve>,
}

/// One benchmark curve: the best bus bandwidth per message size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineCurve {
    /// Legend text, e.g. `nccl-tests AllReduce, 16 ranks`.
    pub label: String,
    /// The operation kind it measures (its series color).
    pub kind: String,
    pub points: Vec<BwPoint>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BandwidthSeries {
    pub kind: String,
    pub points: Vec<BwPoint>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BwPoint {
    /// Message size in bytes (log x axis: zero is not drawn).
    pub bytes: u64,
    /// Bus bandwidth in GB/s (log y axis: zero and non-finite are not drawn).
    pub busbw_gb_s: f64,
    /// Bus bandwidth over the theoretical bus bandwidth of the operation's own
    /// communicator (its bottleneck link), when that is known.
    #[serde(default)]
    pub efficiency: Option<f64>,
    /// Bus bandwidth over the baseline curve of the same kind at the same
    /// size (interpolated), when one covers it.
    #[serde(default)]
    pub vs_baseline: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub label: String,
    pub gb_s: f64,
}

/// A rank × iteration heatmap (communication time or bytes per iteration).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IterationHeat {
    /// Row labels (ranks).
    pub rows: Vec<String>,
    /// Column labels (iterations).
    pub cols: Vec<String>,
    /// `values[row][col]`; `None` = no data for that cell.
    pub values: Vec<Vec<Option<f64>>>,
    /// What a value is, with its unit, e.g. `communication time (ms)`.
    pub value_label: String,
    pub notes: Vec<String>,
}

/// Which ranks arrive last at collectives, and by how much.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Stragglers {
    /// Number of collective instances compared.
    pub instances: u64,
    pub rows: Vec<StragglerRow>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StragglerRow {
    pub rank: String,
    /// How many instances this rank joined last.
    pub times_last: u64,
    /// Mean delay of this rank's arrival after the first arrival, in ns.
    pub mean_lateness_ns: f64,
}

/// How much of each rank's communication overlaps compute.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Overlap {
    pub rows: Vec<OverlapRow>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OverlapRow {
    pub rank: String,
    /// Total communication kernel time, in ns.
    pub comm_ns: u64,
    /// Part of `comm_ns` during which compute ran concurrently, in ns.
    pub overlapped_ns: u64,
}

impl OverlapRow {
    /// Communication time not hidden behind compute.
    pub fn exposed_ns(&self) -> u64 {
        self.comm_ns.saturating_sub(self.overlapped_ns)
    }

    /// Overlapped fraction of communication time (`None` when there was none).
    pub fn overlapped_share(&self) -> Option<f64> {
        (self.comm_ns > 0).then(|| self.overlapped_ns.min(self.comm_ns) as f64 / self.comm_ns as f64)
    }
}

/// Expected (from the parallel layout and model shape) against observed bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ModelTable {
    pub rows: Vec<ModelRow>,
    /// Assumptions behind the theory column (dtype, sequence length, …).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRow {
    /// Parallelism group, e.g. `TP (size 8)`.
    pub parallelism: String,
    /// Operation kind, or empty for all kinds of the group.
    pub kind: String,
    pub theory_bytes: Option<u64>,
    pub observed_bytes: Option<u64>,
}

impl ModelRow {
    /// observed / theory; `None` when either is unknown or theory is zero.
    pub fn ratio(&self) -> Option<f64> {
        match (self.theory_bytes, self.observed_bytes) {
            (Some(t), Some(o)) if t > 0 => Some(o as f64 / t as f64),
            _ => None,
        }
    }
}

/// What the collective model expects of the run's operations.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExpectedSection {
    /// Name of the cluster the model ran on (e.g. `from run.log`, `dgx-h100`).
    pub cluster: String,
    /// Where the cluster's facts came from (first lines of its provenance).
    pub provenance: Vec<String>,
    /// What the tuner ran on, e.g. `NCCL's logged search graphs (2 of 2 handles)`.
    pub tuner_input: String,
    pub rows: Vec<ExpectedRow>,
    pub notes: Vec<String>,
}

/// One communicator × kind × power-of-two size bucket.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExpectedRow {
    /// Communicator name (logical communicator, or a handle).
    pub comm: String,
    pub kind: String,
    /// Lower edge of the size bucket (bytes as logged, count × datatype size).
    pub lo_bytes: u64,
    /// Median logged size of the row's operations (the chart's x).
    pub median_bytes: u64,
    pub ops: u64,
    /// Operations with a GPU span.
    pub timed: u64,
    /// Medians over the row's operations.
    pub expected_time_us: Option<f64>,
    pub expected_busbw_gb_s: Option<f64>,
    pub measured_busbw_gb_s: Option<f64>,
    /// Median of measured / expected bus bandwidth (fraction).
    pub efficiency: Option<f64>,
    /// NCCL's logged algorithm/protocol mix, e.g. `RING/SIMPLE 100%`; empty when not logged.
    pub logged_choice: String,
    /// The model's algorithm/protocol mix over the same operations.
    pub model_choice: String,
    /// `logged graphs` or `emulated search`.
    pub tuner_input: String,
}

/// NCCL's logged tuning choices (`Bytes -> Algo` lines) against the model's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TuningSection {
    /// Operations with a logged algorithm and protocol that the model also tuned.
    pub compared: u64,
    /// Of those, operations whose algorithm and protocol the model picked too.
    pub agree: u64,
    /// Compared operations with a logged channel range.
    pub channels_compared: u64,
    pub channels_agree: u64,
    /// Disagreements grouped by communicator, kind, size and the two choices.
    pub rows: Vec<TuningRow>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TuningRow {
    pub comm: String,
    pub kind: String,
    /// Bytes as logged (count × datatype size).
    pub bytes: u64,
    /// NCCL's choice, e.g. `RING/SIMPLE, 24 channels`.
    pub logged: String,
    pub model: String,
    /// What differs: `algorithm`, `protocol`, `channels`, joined by `, `.
    pub differs: String,
    pub count: u64,
}

/// Anomalies after the fact (`commlens_analyze::anomaly`): the listed ones, how many more,
/// and the per-iteration medians of the histories that hold them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AnomalySection {
    /// One sentence: what was judged and by which rule.
    pub intro: String,
    pub rows: Vec<AnomalyRow>,
    /// Anomalies found beyond `rows`.
    pub more: u64,
    pub series: Vec<AnomalySeries>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnomalyRow {
    /// When, as shown (e.g. `+12.345678 s`), and in trace/epoch ns.
    pub time: String,
    pub time_ns: i64,
    /// `slow instance`, `slow operation`, `step change`.
    pub rule: String,
    pub comm: String,
    pub kind: String,
    /// Logged bytes (`None` unknown or a whole size bucket).
    pub bytes: Option<u64>,
    pub ranks: String,
    pub iteration: Option<u32>,
    pub observed_ns: f64,
    pub expected_ns: f64,
    pub score: f64,
}

/// Median duration per iteration of one history (communicator × kind × size bucket).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnomalySeries {
    pub label: String,
    /// (iteration, median ns).
    pub points: Vec<(u32, f64)>,
    /// First iteration of a step change, drawn as a marker.
    pub change_at: Option<u32>,
    /// Iterations holding a listed anomaly.
    pub marked: Vec<u32>,
}

/// The planner's ranking of parallel layouts (`commlens plan`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanSection {
    /// One sentence: model, cluster, GPUs, batch, how many layouts fit.
    pub intro: String,
    /// Per ranked layout (best first): its memory per GPU by component, bytes.
    pub memory: Vec<StackedBar>,
    /// GPU memory, bytes (drawn as the limit in the caption).
    pub capacity_bytes: f64,
    /// Per ranked layout: where the iteration goes (compute, bubble, each parallelism), ns.
    pub time: Vec<StackedBar>,
    pub ranking: ReportTable,
    pub notes: Vec<String>,
}

/// One column of a stacked chart: a label and named parts, drawn bottom-up in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StackedBar {
    pub label: String,
    pub parts: Vec<(String, f64)>,
}

/// A generic table of strings (what [`crate::Table`] holds, serializable).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportTable {
    pub title: String,
    pub headers: Vec<String>,
    /// Per column: right-aligned (numbers). Shorter than `headers` = left.
    pub right_aligned: Vec<bool>,
    pub rows: Vec<Vec<String>>,
    pub notes: Vec<String>,
}

impl From<&crate::Table> for ReportTable {
    fn from(t: &crate::Table) -> ReportTable {
        ReportTable {
            title: t.title.clone(),
            headers: t.headers.clone(),
            right_aligned: t.align.iter().map(|a| *a == crate::Align::Right).collect(),
            rows: t.rows.clone(),
            notes: t.notes.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_values() {
        let r = OverlapRow { rank: "0".into(), comm_ns: 100, overlapped_ns: 150 };
        assert_eq!(r.exposed_ns(), 0);
        assert_eq!(r.overlapped_share(), Some(1.0));
        assert_eq!(OverlapRow::default().overlapped_share(), None);
        let m = ModelRow { theory_bytes: Some(200), observed_bytes: Some(300), ..ModelRow::default() };
        assert_eq!(m.ratio(), Some(1.5));
        assert_eq!(ModelRow { theory_bytes: Some(0), observed_bytes: Some(3), ..ModelRow::default() }.ratio(), None);
    }

    #[test]
    fn json_roundtrip_and_table_conversion() {
        let mut t = crate::Table::new("T", &["name", "n>"]);
        t.row(vec!["a".into(), "1".into()]);
        let rep = Report {
            title: "x".into(),
            tables: vec![ReportTable::from(&t)],
            absent_hints: vec![(SectionKind::Overlap, "add a trace".into())],
            ..Report::default()
        };
        assert_eq!(rep.tables[0].right_aligned, [false, true]);
        let s = serde_json::to_string(&rep).unwrap();
        let back: Report = serde_json::from_str(&s).unwrap();
        assert_eq!(back.tables, rep.tables);
        assert_eq!(back.absent_hints, rep.absent_hints);
    }
}
