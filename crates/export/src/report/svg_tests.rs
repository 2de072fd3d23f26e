//! Chart primitives with empty, one and many values, and hostile numbers
//! (NaN, ±inf, zero, negative): the markup must stay well-formed and no
//! attribute may hold a non-finite number.

use super::*;
use crate::report::check::check_markup;

fn ok(svg: &str) {
    check_markup(svg).unwrap_or_else(|e| panic!("{e}\n{}", &svg[..svg.len().min(2000)]));
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
}

fn series(name: &str, values: Vec<f64>) -> Series {
    Series { name: name.into(), color: "#4e79a7".into(), values }
}

fn opts() -> ColumnOpts<'static> {
    ColumnOpts { width: 900.0, height: 300.0, unit: Unit::Bytes, x_title: "rank", y_title: "bytes <sent>", gap: 0.2 }
}

const HOSTILE: [f64; 6] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -5.0, 1e308];

#[test]
fn hbars_cases() {
    ok(&hbars(&[], Unit::Count, 500.0, "none"));
    let one = [HBar { label: "All<Reduce>".into(), value: 7.0, color: "#000".into(), suffix: "100%".into() }];
    let s = hbars(&one, Unit::Count, 500.0, "one");
    ok(&s);
    assert!(s.contains("All&lt;Reduce&gt;") && s.contains("7 100%"));
    let many: Vec<HBar> = HOSTILE
        .iter()
        .chain(&[1.0, 2.0, 3.0])
        .enumerate()
        .map(|(i, v)| HBar { label: format!("k{i}"), value: *v, color: "#123456".into(), suffix: String::new() })
        .collect();
    ok(&hbars(&many, Unit::Bytes, 500.0, "many"));
    let long = [HBar { label: "x".repeat(300), value: 1.0, color: "#000".into(), suffix: String::new() }];
    let s = hbars(&long, Unit::Count, 500.0, "long");
    ok(&s);
    assert!(s.contains("x…") && s.contains(&"x".repeat(300)), "cut label, whole tooltip");
    let all_bad: Vec<HBar> = many.iter().take(5).cloned().collect();
    assert!(hbars(&all_bad, Unit::Bytes, 500.0, "bad").contains("No data"));
}

#[test]
fn columns_cases() {
    ok(&columns(&[], &[], &opts()));
    assert!(columns(&["0".into()], &[series("A", vec![0.0])], &opts()).contains("No data"));
    let s = columns(&["0".into()], &[series("A", vec![1048576.0])], &opts());
    ok(&s);
    assert!(s.contains("<title>0: A 1 MiB</title>") && s.contains("bytes &lt;sent&gt;"));
    let cats: Vec<String> = (0..6).map(|i| i.to_string()).collect();
    let s = columns(&cats, &[series("A", HOSTILE.to_vec()), series("B", vec![1.0; 3])], &opts());
    ok(&s);
    // Many categories are binned into at most MAX_COLUMNS columns, and said so.
    let cats: Vec<String> = (0..2000).map(|i| i.to_string()).collect();
    let s = columns(&cats, &[series("A", (0..2000).map(|i| i as f64).collect())], &opts());
    ok(&s);
    assert!(s.matches("<rect").count() <= MAX_COLUMNS);
    assert!(s.contains("averaged in groups of 4"));
}

#[test]
fn scatter_cases() {
    let lim = vec![("NVLink".to_string(), 370.0), ("bad".to_string(), f64::NAN)];
    ok(&scatter_loglog(&[], &lim, 1000.0, "size", "busbw"));
    let one = Scatter { name: "AllReduce", color: "#4e79a7", points: vec![(1024.0, 10.0)] };
    let s = scatter_loglog(&[one], &lim, 1000.0, "size", "busbw");
    ok(&s);
    assert_eq!(s.matches("<circle").count(), 1);
    assert!(s.contains("NVLink: 370 GB/s") && !s.contains("bad:"));
    let hostile: Vec<(f64, f64)> = HOSTILE.iter().flat_map(|x| HOSTILE.iter().map(move |y| (*x, *y))).collect();
    let s = scatter_loglog(&[Scatter { name: "X", color: "#000", points: hostile }], &[], 1000.0, "size", "busbw");
    ok(&s);
    // Only (1e308, 1e308) can be placed; the rest are counted in a caption.
    assert_eq!(s.matches("<circle").count(), 1);
    assert!(s.contains("35 points with zero size or bandwidth not drawn"));
    let many: Vec<(f64, f64)> = (0..20_000).map(|i| (2f64.powi(i % 30), 1.0 + (i % 97) as f64)).collect();
    let s =
        scatter_loglog(&[Scatter { name: "AllGather", color: "#f28e2b", points: many }], &lim, 1000.0, "size", "busbw");
    ok(&s);
    assert_eq!(s.matches("<circle").count(), MAX_POINTS);
    assert!(s.contains("5,000 of 20,000 points shown"));
    // A tiny value next to a large one must not explode the tick count.
    let s = scatter_loglog(
        &[Scatter { name: "X", color: "#000", points: vec![(4.0, 1e-300), (8.0, 100.0)] }],
        &[],
        1000.0,
        "s",
        "b",
    );
    ok(&s);
    assert!(s.matches("class=\"grid\"").count() < 40);
}

#[test]
fn heatmap_cases() {
    ok(&heatmap(&[], &[], &[], "time (ms)", 1000.0));
    let s = heatmap(&["0".into()], &["1".into()], &[vec![Some(2.5)]], "time (ms)", 1000.0);
    ok(&s);
    assert!(s.contains("rank 0 · iteration 1: 2.5"));
    let rows: Vec<String> = (0..4).map(|i| i.to_string()).collect();
    let cols: Vec<String> = (0..6).map(|i| i.to_string()).collect();
    let vals: Vec<Vec<Option<f64>>> = (0..4).map(|_| HOSTILE.iter().map(|v| Some(*v)).collect()).collect();
    ok(&heatmap(&rows, &cols, &vals, "x", 1000.0));
    let none: Vec<Vec<Option<f64>>> = vec![vec![None; 6]; 4];
    ok(&heatmap(&rows, &cols, &none, "x", 1000.0));
    // Ragged input (short rows) is tolerated.
    ok(&heatmap(&rows, &cols, &[vec![Some(1.0)]], "x", 1000.0));
    let rows: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let cols: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let vals: Vec<Vec<Option<f64>>> = (0..1000).map(|r| (0..1000).map(|c| Some((r * c) as f64)).collect()).collect();
    let s = heatmap(&rows, &cols, &vals, "x", 1000.0);
    ok(&s);
    assert!(s.matches("<rect").count() <= MAX_HEAT_ROWS * MAX_HEAT_COLS + 12);
    assert!(!s.contains("<title>"), "tooltips dropped for large grids");
    assert!(s.contains("averaged into 125 × 200 cells"));
}

#[test]
fn thin_keeps_order_and_bound() {
    let v: Vec<u32> = (0..10).collect();
    assert_eq!(thin(&v, 20), v);
    assert_eq!(thin(&v, 5), [0, 2, 4, 6, 8]);
    assert!(thin(&v, 0).is_empty());
}
