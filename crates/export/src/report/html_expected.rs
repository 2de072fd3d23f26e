//! The report's collective-model sections: what the model expects of each
//! communicator × kind × size (time, bus bandwidth, NCCL's choice) beside
//! what was measured, and NCCL's logged tuning choices against the model's.

use super::html::{intro, legend, notes, table, MAX_TABLE_ROWS, W};
use super::model::{ExpectedRow, ExpectedSection, TuningSection};
use super::scale::{esc, fmt_bytes, fmt_value, group_digits, kind_color, Unit};
use super::svg::{self, Scatter};
use std::fmt::Write as _;

/// Model curves drawn at most (the largest rows' communicators and kinds).
const MAX_CURVES: usize = 8;

/// A choice mix for a cell: a lone choice without its `100%`, `–` when empty.
fn choice(mix: &str) -> String {
    match mix.strip_suffix(" 100%") {
        _ if mix.is_empty() => "–".into(),
        Some(one) if !one.contains('%') => one.to_string(),
        _ => mix.to_string(),
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.filter(|x| x.is_finite()).map_or_else(|| "–".into(), f)
}

/// Efficiency against the model as a badge: green within 0.8–1.25×, amber
/// within 0.5–2×, red further off.
fn eff_badge(e: Option<f64>) -> String {
    match e.filter(|x| x.is_finite()) {
        Some(x) => {
            let class = if (0.8..=1.25).contains(&x) {
                "good"
            } else if (0.5..=2.0).contains(&x) {
                "warn"
            } else {
                "bad"
            };
            format!("\u{1}{class}\u{1}{:.0}%", 100.0 * x)
        }
        None => "–".into(),
    }
}

fn shown(h: &mut String, n: usize) {
    if n > MAX_TABLE_ROWS {
        let _ = write!(
            h,
            r#"<p class="figs">First {} of {} rows shown.</p>"#,
            group_digits(MAX_TABLE_ROWS as u64),
            group_digits(n as u64)
        );
    }
}

pub(super) fn expected(h: &mut String, e: &ExpectedSection) {
    intro(h, "What the collective model expects each operation to take on its own communicator: NCCL's tuner re-implemented (algorithm, protocol, channels) with its time model bounded by the cluster's links, at the operation's kind and size (nccl-tests convention). Model time and busbw are the medians of the row's expectations; measured ÷ model is the median of each timed operation's measured bus bandwidth over its expected one (green within 0.8–1.25×, amber within 0.5–2×).");
    let _ = write!(h, r#"<p class="figs">Cluster: <b>{}</b> · tuner input: {}</p>"#, esc(&e.cluster), esc(&e.tuner_input));
    notes(h, &e.provenance);
    chart(h, &e.rows);
    // The tuner input gets a column only when it differs between rows.
    let per_row_input = e.rows.iter().any(|r| r.tuner_input != e.rows[0].tuner_input);
    let rows: Vec<Vec<String>> = e
        .rows
        .iter()
        .take(MAX_TABLE_ROWS)
        .map(|r| {
            let mut row = vec![
                r.comm.clone(),
                r.kind.clone(),
                format!("{}+", fmt_bytes(r.lo_bytes as f64)).replace(' ', "\u{a0}"),
                group_digits(r.ops),
                group_digits(r.timed),
                opt(r.expected_time_us, |v| fmt_value(v * 1e3, Unit::Ns)),
                opt(r.expected_busbw_gb_s, |v| fmt_value(v, Unit::GbS)),
                opt(r.measured_busbw_gb_s, |v| fmt_value(v, Unit::GbS)),
                eff_badge(r.efficiency),
                choice(&r.logged_choice),
                choice(&r.model_choice),
            ];
            if per_row_input {
                row.push(r.tuner_input.clone());
            }
            row
        })
        .collect();
    let mut headers = vec![
        "communicator",
        "kind",
        "size",
        "ops>",
        "timed>",
        "model time>",
        "model busbw>",
        "measured busbw>",
        "measured ÷ model>",
        "NCCL logged",
        "model picks",
    ];
    if per_row_input {
        headers.push("tuner input");
    }
    h.push_str(r#"<div class="wide">"#);
    table(h, &headers, &rows);
    h.push_str("</div>");
    shown(h, e.rows.len());
    notes(h, &e.notes);
}

/// Expected bus bandwidth per communicator and kind as curves over size,
/// measured medians as points; nothing when no row has an expectation.
fn chart(h: &mut String, rows: &[ExpectedRow]) {
    // Groups in order of first appearance, found through an index (one row
    // per communicator and size: a 100,000-rank job has hundreds of thousands).
    let mut groups: Vec<(String, &str, Vec<&ExpectedRow>)> = Vec::new();
    let mut group_of: std::collections::HashMap<(&str, &str), usize> = std::collections::HashMap::new();
    for r in rows.iter().filter(|r| r.expected_busbw_gb_s.is_some_and(|v| v > 0.0)) {
        match group_of.entry((r.comm.as_str(), r.kind.as_str())) {
            std::collections::hash_map::Entry::Occupied(e) => groups[*e.get()].2.push(r),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(groups.len());
                groups.push((r.comm.clone(), &r.kind, vec![r]));
            }
        }
    }
    if groups.is_empty() {
        return;
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.2.iter().map(|r| r.ops).sum::<u64>()));
    let left_out = groups.len().saturating_sub(MAX_CURVES);
    groups.truncate(MAX_CURVES);
    let names: Vec<String> = groups.iter().map(|g| format!("model: {} {}", g.0, g.1)).collect();
    let curves: Vec<Scatter> = groups
        .iter()
        .zip(&names)
        .map(|(g, n)| Scatter {
            name: n,
            color: kind_color(g.1),
            points: g.2.iter().map(|r| (r.median_bytes as f64, r.expected_busbw_gb_s.unwrap_or(0.0))).collect(),
        })
        .collect();
    let mut kinds: Vec<&str> = groups.iter().map(|g| g.1).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let measured: Vec<Scatter> = kinds
        .iter()
        .map(|k| Scatter {
            name: k,
            color: kind_color(k),
            points: groups
                .iter()
                .filter(|g| g.1 == *k)
                .flat_map(|g| g.2.iter().filter_map(|r| Some((r.median_bytes as f64, r.measured_busbw_gb_s?))))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    legend(h, kinds.iter().map(|k| (*k, kind_color(k))));
    h.push_str(&svg::scatter_loglog_styled(
        &measured,
        &curves,
        "model",
        &[],
        W,
        "message size (bytes as logged, log scale)",
        "bus bandwidth (GB/s, log scale)",
    ));
    let mut caption = "Dashed curves: the model's expected bus bandwidth per communicator and kind; points: measured medians of the same rows.".to_string();
    if left_out > 0 {
        let _ = write!(caption, " {left_out} smaller communicator/kind curves not drawn.");
    }
    let _ = write!(h, r#"<p class="figs">{}</p>"#, esc(&caption));
}

pub(super) fn tuning(h: &mut String, t: &TuningSection) {
    intro(h, "NCCL's own choice for each operation (its `Bytes -> Algo … proto … channel{Lo..Hi}` lines) against the model's tuner on the same communicator and size. Disagreements are grouped by communicator, kind and size.");
    let pct = |a: u64, b: u64| if b > 0 { format!("{:.1}%", 100.0 * a as f64 / b as f64) } else { "–".into() };
    let _ = write!(
        h,
        r#"<p class="figs">Algorithm and protocol agree on <b>{} of {}</b> logged choices ({}) · channel counts agree on {} of {} ({})</p>"#,
        group_digits(t.agree),
        group_digits(t.compared),
        pct(t.agree, t.compared),
        group_digits(t.channels_agree),
        group_digits(t.channels_compared),
        pct(t.channels_agree, t.channels_compared)
    );
    if t.rows.is_empty() {
        h.push_str(r#"<p class="figs">No disagreement: the model picks what NCCL picked for every compared operation.</p>"#);
    } else {
        let rows: Vec<Vec<String>> = t
            .rows
            .iter()
            .take(MAX_TABLE_ROWS)
            .map(|r| {
                vec![
                    r.comm.clone(),
                    r.kind.clone(),
                    fmt_bytes(r.bytes as f64),
                    group_digits(r.count),
                    r.logged.clone(),
                    r.model.clone(),
                    r.differs.clone(),
                ]
            })
            .collect();
        table(h, &["communicator", "kind", "size>", "operations>", "NCCL (logged)", "model", "differs in"], &rows);
        shown(h, t.rows.len());
    }
    notes(h, &t.notes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per communicator and size for 30,000 communicators (a large
    /// job's data-parallel groups): the chart draws the busiest curves and
    /// says how many it left out. Checks the shape that used to search the
    /// groups once per row (rows × groups).
    #[test]
    fn many_communicators_chart_the_busiest_and_count_the_rest() {
        const COMMS: usize = 30_000;
        let row = |c: usize, size: u64| ExpectedRow {
            comm: format!("dp{c}"),
            kind: "AllReduce".into(),
            lo_bytes: size,
            median_bytes: size,
            // The last communicators are the busiest.
            ops: c as u64,
            timed: 0,
            expected_time_us: None,
            expected_busbw_gb_s: Some(10.0 + size as f64 / 1e6),
            measured_busbw_gb_s: None,
            efficiency: None,
            logged_choice: String::new(),
            model_choice: String::new(),
            tuner_input: String::new(),
        };
        let rows: Vec<ExpectedRow> = [1u64 << 20, 1 << 24].iter().flat_map(|&s| (0..COMMS).map(move |c| row(c, s))).collect();
        let mut h = String::new();
        chart(&mut h, &rows);
        assert!(h.contains(&format!(" {} smaller communicator/kind curves not drawn.", COMMS - MAX_CURVES)), "{h}");
        for c in COMMS - MAX_CURVES..COMMS {
            assert!(h.contains(&format!("model: dp{c} AllReduce")), "dp{c}");
        }
        assert!(!h.contains(&format!("model: dp{} AllReduce", COMMS - MAX_CURVES - 1)));
    }
}
