//! The report's bandwidth section: every timed operation's bus bandwidth
//! against its size, the communicators' link limits, measured baselines
//! (nccl-tests curves) as lines, and a per-kind table that judges each
//! operation against its own communicator's limit and against the baseline
//! at the same size.

use super::html::{legend, median, notes, table, intro, W};
use super::model::Bandwidth;
use super::scale::{fmt_value, group_digits, kind_color, Unit};
use super::svg::{self, Scatter};

pub(super) fn bandwidth(h: &mut String, b: &Bandwidth) {
    let conv = if b.convention.is_empty() { "bus bandwidth" } else { b.convention.as_str() };
    let mut text = format!("One point per operation: {conv} (GB/s) against message size, both axes logarithmic. Dashed lines are the theoretical limits of the slowest link each communicator crosses.");
    if !b.baselines.is_empty() {
        text.push_str(" Dotted curves are the measured baselines (best of out-of-place and in-place per size).");
    }
    intro(h, &text);
    let sc: Vec<Scatter> = b
        .series
        .iter()
        .map(|s| Scatter {
            name: &s.kind,
            color: kind_color(&s.kind),
            points: s.points.iter().map(|p| (p.bytes as f64, p.busbw_gb_s)).collect(),
        })
        .collect();
    let curves: Vec<Scatter> = b
        .baselines
        .iter()
        .map(|c| Scatter {
            name: &c.label,
            color: kind_color(&c.kind),
            points: c.points.iter().map(|p| (p.bytes as f64, p.busbw_gb_s)).collect(),
        })
        .collect();
    legend(h, b.series.iter().map(|s| (s.kind.as_str(), kind_color(&s.kind))));
    let lims: Vec<(String, f64)> = b.limits.iter().map(|l| (l.label.clone(), l.gb_s)).collect();
    h.push_str(&svg::scatter_loglog_with_curves(
        &sc,
        &curves,
        &lims,
        W,
        "message size (bytes, log scale)",
        "bus bandwidth (GB/s, log scale)",
    ));
    let pct = |v: Vec<f64>| -> (String, String) {
        let v: Vec<f64> = v.into_iter().filter(|e| e.is_finite()).collect();
        if v.is_empty() {
            return ("–".into(), "–".into());
        }
        let m = v.iter().copied().fold(0.0, f64::max);
        (format!("{:.0}%", 100.0 * median(v)), format!("{:.0}%", 100.0 * m))
    };
    // Each operation is judged against its own communicator's bottleneck
    // (an NVLink TP group and an inter-node DP group have different
    // ceilings), and against the baseline of its kind at its size.
    let with_baseline = !b.baselines.is_empty();
    let rows: Vec<Vec<String>> = b
        .series
        .iter()
        .filter_map(|s| {
            let v: Vec<f64> = s.points.iter().map(|p| p.busbw_gb_s).filter(|v| v.is_finite() && *v > 0.0).collect();
            if v.is_empty() {
                return None;
            }
            let max = v.iter().copied().fold(0.0, f64::max);
            let (med_eff, max_eff) = pct(s.points.iter().filter_map(|p| p.efficiency).collect());
            let mut row = vec![
                s.kind.clone(),
                group_digits(v.len() as u64),
                fmt_value(median(v), Unit::GbS),
                fmt_value(max, Unit::GbS),
                med_eff,
                max_eff,
            ];
            if with_baseline {
                let vs: Vec<f64> = s.points.iter().filter_map(|p| p.vs_baseline).collect();
                let n = vs.len();
                row.push(pct(vs).0);
                row.push(group_digits(n as u64));
            }
            Some(row)
        })
        .collect();
    let mut headers = vec!["kind", "timed ops>", "median busbw>", "max busbw>", "median of own limit>", "max of own limit>"];
    if with_baseline {
        headers.extend(["median of baseline>", "ops with a baseline>"]);
    }
    table(h, &headers, &rows);
    notes(h, &b.notes);
}
