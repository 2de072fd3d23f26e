//! The page as a whole: well-formed for the full sample, an empty report
//! (every section says what would provide it), hostile text and numbers,
//! hint overrides, and bounded size for huge inputs.

use super::*;
use crate::report::check::check_markup;
use crate::report::sample::sample_report;

fn render(r: &Report) -> String {
    let mut buf = Vec::new();
    write_html(r, &mut buf).unwrap();
    let s = String::from_utf8(buf).unwrap();
    check_markup(&s).unwrap_or_else(|e| panic!("{e}"));
    s
}

const HEADINGS: [&str; 11] = [
    "Operation mix",
    "Volume per rank",
    "Message sizes",
    "Bus bandwidth against message size",
    "Communication per iteration",
    "Stragglers",
    "Overlap with compute",
    "Model against observed",
    "Expected from the collective model",
    "Tuning disagreements",
    "Anomalies",
];

#[test]
fn sample_has_every_section_and_chart() {
    let s = render(&sample_report());
    for h in HEADINGS {
        assert!(s.contains(&format!("<h2>{h}</h2>")), "{h}");
    }
    assert!(!s.contains("Not available"));
    // Two op-mix bar charts + volume, sizes, bandwidth, expected, heatmap, stragglers, overlap, anomaly history.
    assert_eq!(s.matches("<svg ").count(), 10);
    assert!(s.contains("agree on <b>12,311 of 12,480</b>"));
    assert!(s.contains("model: tp-0 AllReduce") && s.contains("NVLS/SIMPLE, 24 channels"));
    assert!(s.contains("NVLink 4 (intra-node): 370 GB/s"));
    assert!(s.contains("5,000 of 9,000 points shown"));
    assert!(s.contains("Communicator bottlenecks"));
    // Every histogram bucket is labelled (wide labels are staggered, not skipped).
    for b in &sample_report().size_histogram.unwrap().buckets {
        assert!(s.contains(&format!(">{}</text>", crate::report::scale::esc(b))), "{b}");
    }
    assert!(s.contains(r#"<span class="badge bad">5.25×</span>"#));
    // Offline: no external reference of any kind, no script.
    for bad in ["http://", "https://", "<script", "@import", "url("] {
        let allowed = s.matches("http://www.w3.org/2000/svg").count();
        assert!(bad == "http://" && s.matches(bad).count() == allowed || !s.contains(bad), "{bad}");
    }
    // One color per kind across charts.
    assert!(s.contains(r##"fill="#4e79a7""##) && s.contains(r#"background:#4e79a7"#));
}

#[test]
fn empty_report_explains_every_absent_section() {
    let s = render(&Report::default());
    assert_eq!(s.matches("Not available for these inputs.").count(), 11);
    for k in [SectionKind::OpMix, SectionKind::Bandwidth, SectionKind::Overlap, SectionKind::Model, SectionKind::Expected, SectionKind::Tuning, SectionKind::Anomalies] {
        assert!(s.contains(&*crate::report::scale::esc(default_hint(k))), "{k:?}");
    }
    assert!(s.contains("<title>commlens report</title>"));
    let r = Report { absent_hints: vec![(SectionKind::Overlap, "Run with <--trace>.".into())], ..Report::default() };
    let s = render(&r);
    assert!(s.contains("Run with &lt;--trace&gt;.") && !s.contains(default_hint(SectionKind::Overlap)));
}

#[test]
fn hostile_text_is_escaped() {
    let evil = "<script>alert('x')</script> & \"q\"";
    let r = Report {
        title: evil.into(),
        generated_by: evil.into(),
        inputs: vec![evil.into()],
        summary: vec![Figure { detail: Some(evil.into()), ..Figure::new(evil, evil) }],
        notes: vec![evil.into()],
        op_mix: Some(OpMix {
            rows: vec![OpMixRow { kind: evil.into(), count: 1, bytes: 1 }],
            notes: vec![evil.into()],
        }),
        rank_volume: Some(RankVolume {
            kinds: vec![evil.into()],
            ranks: vec![RankBytes { rank: evil.into(), bytes: vec![5] }],
            notes: vec![],
        }),
        tables: vec![ReportTable {
            title: evil.into(),
            headers: vec![evil.into()],
            right_aligned: vec![],
            rows: vec![vec![format!("\u{1}x\u{1}{evil}")]],
            notes: vec![evil.into()],
        }],
        ..Report::default()
    };
    let s = render(&r);
    assert!(!s.contains("<script"));
    assert!(s.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"));
    assert!(!s.contains("badge x"), "generic cells cannot forge badges");
}

#[test]
fn hostile_numbers_and_shapes() {
    let nan = f64::NAN;
    let r = Report {
        op_mix: Some(OpMix { rows: vec![OpMixRow { kind: "AllReduce".into(), count: 0, bytes: 0 }], notes: vec![] }),
        rank_volume: Some(RankVolume {
            kinds: vec!["A".into(), "B".into()],
            ranks: vec![RankBytes { rank: "0".into(), bytes: vec![] }],
            notes: vec![],
        }),
        size_histogram: Some(SizeHistogram {
            buckets: vec!["a".into(), "b".into()],
            series: vec![KindCounts { kind: "A".into(), counts: vec![u64::MAX] }],
            notes: vec![],
        }),
        bandwidth: Some(Bandwidth {
            series: vec![BandwidthSeries {
                kind: "AllReduce".into(),
                points: vec![
                    BwPoint { bytes: 0, busbw_gb_s: nan, efficiency: Some(nan), vs_baseline: None },
                    BwPoint { bytes: 8, busbw_gb_s: f64::INFINITY, efficiency: Some(f64::INFINITY), vs_baseline: None },
                    BwPoint { bytes: 1 << 20, busbw_gb_s: -1.0, efficiency: None, vs_baseline: None },
                ],
            }],
            limits: vec![Limit { label: "x".into(), gb_s: nan }],
            ..Bandwidth::default()
        }),
        iterations: Some(IterationHeat {
            rows: vec!["0".into(), "1".into()],
            cols: vec!["0".into()],
            values: vec![vec![Some(nan)], vec![Some(f64::NEG_INFINITY), Some(3.0)]],
            ..IterationHeat::default()
        }),
        stragglers: Some(Stragglers {
            instances: 0,
            rows: vec![StragglerRow { rank: "0".into(), times_last: 0, mean_lateness_ns: nan }],
            notes: vec![],
        }),
        overlap: Some(Overlap {
            rows: vec![OverlapRow { rank: "0".into(), comm_ns: 0, overlapped_ns: 7 }],
            notes: vec![],
        }),
        model: Some(ModelTable { rows: vec![ModelRow::default()], notes: vec![] }),
        expected: Some(ExpectedSection {
            rows: vec![
                ExpectedRow { expected_busbw_gb_s: Some(nan), efficiency: Some(nan), ..ExpectedRow::default() },
                ExpectedRow {
                    median_bytes: 0,
                    expected_busbw_gb_s: Some(f64::INFINITY),
                    measured_busbw_gb_s: Some(-1.0),
                    expected_time_us: Some(nan),
                    ..ExpectedRow::default()
                },
            ],
            ..ExpectedSection::default()
        }),
        tuning: Some(TuningSection::default()),
        tables: vec![ReportTable {
            rows: vec![vec![], vec!["a".into(), "b".into(), "c".into()]],
            ..ReportTable::default()
        }],
        ..Report::default()
    };
    let s = render(&r);
    assert!(!s.contains("NaN") && !s.contains("inf\""));
    assert!(s.contains("No data"));
    assert!(s.contains("agree on <b>0 of 0</b> logged choices (–)") && s.contains("No disagreement"));
}

#[test]
fn output_is_bounded_for_huge_inputs() {
    let ranks = 4096;
    let mut r = sample_report();
    let kinds = r.rank_volume.as_ref().unwrap().kinds.clone();
    r.rank_volume = Some(RankVolume {
        kinds: kinds.clone(),
        ranks: (0..ranks)
            .map(|i| RankBytes { rank: i.to_string(), bytes: vec![i as u64 * 1000; kinds.len()] })
            .collect(),
        notes: vec![],
    });
    let bw = r.bandwidth.as_mut().unwrap();
    for s in &mut bw.series {
        s.points =
            (0..300_000u64)
                .map(|i| BwPoint { bytes: 1 + i * 997, busbw_gb_s: 1.0 + (i % 300) as f64, efficiency: None, vs_baseline: None })
                .collect();
    }
    r.iterations = Some(IterationHeat {
        rows: (0..ranks).map(|i| i.to_string()).collect(),
        cols: (0..2000).map(|i| i.to_string()).collect(),
        values: (0..ranks).map(|i| (0..2000).map(|j| Some((i + j) as f64)).collect()).collect(),
        ..IterationHeat::default()
    });
    r.tables[0].rows = vec![vec!["x".into(); 5]; 50_000];
    let s = render(&r);
    assert!(s.len() < 6_000_000, "{} bytes", s.len());
    assert!(s.contains("First 1,000 of 50,000 rows shown."));
    assert!(s.contains("4,096 categories averaged in groups of 8"));
}

/// Each kind is judged against its own communicator's limit: an inter-node
/// kind at 40 of 48 GB/s is at 83 %, not at 11 % of the fastest link.
#[test]
fn bandwidth_table_uses_each_operations_own_limit() {
    let series = |kind: &str, bw: f64, limit: f64| BandwidthSeries {
        kind: kind.into(),
        points: (1..=3).map(|i| BwPoint { bytes: i << 20, busbw_gb_s: bw, efficiency: Some(bw / limit), vs_baseline: None }).collect(),
    };
    let r = Report {
        bandwidth: Some(Bandwidth {
            series: vec![series("AllReduce", 185.0, 370.0), series("AllGather", 40.0, 48.0)],
            limits: vec![Limit { label: "NVLink".into(), gb_s: 370.0 }, Limit { label: "IB".into(), gb_s: 48.0 }],
            ..Bandwidth::default()
        }),
        ..Report::default()
    };
    let page = render(&r);
    let row = |kind: &str| {
        let at = page.find(&format!(r#"<td class="">{kind}</td>"#)).unwrap_or_else(|| panic!("no {kind} row"));
        page[at..at + page[at..].find("</tr>").unwrap()].to_string()
    };
    assert!(row("AllReduce").contains("50%"), "{}", row("AllReduce"));
    assert!(row("AllGather").contains("83%"), "{}", row("AllGather"));
    assert!(!row("AllGather").contains("11%"), "{}", row("AllGather"));
}

/// A measured baseline is drawn as a curve and each kind's operations are
/// compared with it at their size.
#[test]
fn baseline_curves_are_drawn_and_compared() {
    let pt = |bytes: u64, bw: f64, vs: Option<f64>| BwPoint { bytes, busbw_gb_s: bw, efficiency: None, vs_baseline: vs };
    let r = Report {
        bandwidth: Some(Bandwidth {
            series: vec![BandwidthSeries {
                kind: "AllReduce".into(),
                points: vec![pt(1 << 20, 30.0, Some(0.6)), pt(1 << 22, 60.0, Some(0.75)), pt(1 << 24, 90.0, None)],
            }],
            baselines: vec![BaselineCurve {
                label: "nccl-tests AllReduce, 16 ranks".into(),
                kind: "AllReduce".into(),
                points: vec![pt(1 << 20, 50.0, None), pt(1 << 22, 80.0, None)],
            }],
            ..Bandwidth::default()
        }),
        ..Report::default()
    };
    let page = render(&r);
    assert_eq!(page.matches(r#"<polyline class="curve""#).count(), 1);
    assert!(page.contains("nccl-tests AllReduce, 16 ranks"));
    assert!(page.contains("median of baseline"));
    let at = page.find(r#"<td class="">AllReduce</td>"#).unwrap();
    let row = &page[at..at + page[at..].find("</tr>").unwrap()];
    // Median of 0.6 and 0.75 (upper median), 2 ops covered by the curve.
    assert!(row.contains(">75%<") && row.contains(">2<"), "{row}");
    // Without a baseline there is no such column.
    let mut r2 = r.clone();
    r2.bandwidth.as_mut().unwrap().baselines.clear();
    assert!(!render(&r2).contains("median of baseline"));
}
