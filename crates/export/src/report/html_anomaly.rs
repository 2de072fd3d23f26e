//! The report's anomaly section: the listed anomalies (time, rule, communicator, kind, size,
//! ranks, observed against expected) and, per history that holds one, a small inline chart
//! of its median duration per iteration with the step change and the anomalies marked.

use super::html::{intro, notes, table};
use super::model::{AnomalySection, AnomalySeries};
use super::scale::{esc, fmt_bytes, fmt_ns, group_digits};
use std::fmt::Write as _;

/// Charts drawn at most (the histories with the most anomalies come first from the caller).
const MAX_CHARTS: usize = 6;
const CW: f64 = 540.0;
const CH: f64 = 150.0;

pub(super) fn anomalies(h: &mut String, a: &AnomalySection) {
    intro(h, &a.intro);
    if a.rows.is_empty() {
        h.push_str(
            r#"<p class="figs">No anomaly: every judged operation stayed within its history.</p>"#,
        );
    } else {
        let rows: Vec<Vec<String>> = a
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.time.clone(),
                    r.rule.clone(),
                    r.comm.clone(),
                    r.kind.clone(),
                    r.bytes.map_or_else(|| "–".into(), |b| fmt_bytes(b as f64)),
                    r.ranks.clone(),
                    r.iteration.map_or_else(|| "–".into(), |i| i.to_string()),
                    fmt_ns(r.observed_ns),
                    fmt_ns(r.expected_ns),
                    if r.expected_ns > 0.0 {
                        format!("{:.2}×", r.observed_ns / r.expected_ns)
                    } else {
                        "–".into()
                    },
                    format!("{:.1}", r.score),
                ]
            })
            .collect();
        table(
            h,
            &[
                "time",
                "rule",
                "communicator",
                "kind",
                "size>",
                "ranks",
                "iteration>",
                "observed>",
                "expected>",
                "ratio>",
                "score>",
            ],
            &rows,
        );
        if a.more > 0 {
            let _ = write!(
                h,
                r#"<p class="figs">… and {} more anomalies (the JSON output of the analysis lists them all).</p>"#,
                group_digits(a.more)
            );
        }
    }
    if !a.series.is_empty() {
        h.push_str(r#"<div class="two">"#);
        for s in a.series.iter().take(MAX_CHARTS) {
            let _ = write!(h, "<figure><figcaption>{}</figcaption>", esc(&s.label));
            h.push_str(&chart(s));
            h.push_str("</figure>");
        }
        h.push_str("</div>");
    }
    notes(h, &a.notes);
}

/// Median duration per iteration as a line; the step change as a dashed rule; iterations
/// holding an anomaly as red dots.
fn chart(s: &AnomalySeries) -> String {
    let (l, r, top, bottom) = (56.0, 10.0, 10.0, 28.0);
    let (w, hgt) = (CW - l - r, CH - top - bottom);
    let first = s.points.first().map_or(0, |p| p.0) as f64;
    let last = s.points.last().map_or(1, |p| p.0).max(first as u32 + 1) as f64;
    let ymax = s.points.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.1;
    let x = |i: f64| l + w * (i - first) / (last - first);
    let y = |v: f64| top + hgt * (1.0 - v / ymax);
    let mut g = String::new();
    let _ = write!(
        g,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {CW} {CH}" role="img" aria-label="{}"><rect x="{l}" y="{top}" width="{w}" height="{hgt}" fill="#f6f7f9"/>"##,
        esc(&s.label)
    );
    for frac in [0.0, 0.5, 1.0] {
        let v = ymax / 1.1 * frac;
        let _ = write!(
            g,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end" fill="#555">{}</text>"##,
            l - 4.0,
            y(v) + 3.0,
            esc(&fmt_ns(v))
        );
    }
    let _ = write!(
        g,
        r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#555">iteration {} – {}</text>"##,
        l + w / 2.0,
        CH - 8.0,
        first as u32,
        last as u32
    );
    if let Some(c) = s.change_at {
        let _ = write!(
            g,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1:.1}" stroke="#e15759" stroke-dasharray="4 3"><title>step change at iteration {c}</title></line>"##,
            x(c as f64),
            top + hgt
        );
    }
    let pts: Vec<String> = s
        .points
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.0 as f64), y(p.1)))
        .collect();
    let _ = write!(
        g,
        r##"<polyline fill="none" stroke="#4e79a7" stroke-width="1.5" points="{}"/>"##,
        pts.join(" ")
    );
    for p in s.points.iter().filter(|p| s.marked.contains(&p.0)) {
        let _ = write!(
            g,
            r##"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="#e15759"><title>iteration {}: median {}</title></circle>"##,
            x(p.0 as f64),
            y(p.1),
            p.0,
            esc(&fmt_ns(p.1))
        );
    }
    g.push_str("</svg>");
    g
}

#[cfg(test)]
mod tests {
    use super::super::model::{AnomalyRow, Report};
    use super::*;

    #[test]
    fn section_lists_rows_more_and_charts() {
        let a = AnomalySection {
            intro: "judged 1,000 operations".into(),
            rows: vec![AnomalyRow {
                time: "+1.500000 s".into(),
                time_ns: 1_500_000_000,
                rule: "slow instance".into(),
                comm: "TP<0>".into(),
                kind: "AllReduce".into(),
                bytes: Some(2 << 20),
                ranks: "0,1".into(),
                iteration: Some(7),
                observed_ns: 300_000.0,
                expected_ns: 100_000.0,
                score: 42.0,
            }],
            more: 3,
            series: vec![AnomalySeries {
                label: "TP<0> AllReduce ≥2 MiB".into(),
                points: vec![(0, 1e5), (7, 3e5), (8, 1e5)],
                change_at: Some(8),
                marked: vec![7],
            }],
            notes: vec!["late arrivals: 2".into()],
        };
        let html = super::super::render_html(&Report {
            anomalies: Some(a),
            ..Report::default()
        });
        assert!(
            html.contains(r#"id="anomalies""#)
                && html.contains("TP&lt;0&gt;")
                && html.contains("3.00×")
        );
        assert!(
            html.contains("… and 3 more anomalies")
                && html.contains("<polyline")
                && html.contains("step change at iteration 8")
        );
        assert!(html.contains("iteration 7: median 300 µs"), "{html}");
        super::super::check::check_markup(&html).unwrap();
        // Absent: the hint names what would provide it.
        let html = super::super::render_html(&Report::default());
        assert!(html
            .contains("Needs operation durations (a GPU trace, plugin output or a simulated run)"));
    }
}
