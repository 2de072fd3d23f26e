//! Anomalies through the binary: a generated run with one injected slow collective instance
//! (`RunConfig::slowdowns`), captured as Kineto traces, and the same run without it.
//! `commlens report` lists the instance with its ranks and time (stdout and the HTML
//! section); `commlens diff clean injected` counts it as a figure and lists it as new; the
//! clean run reports none.

mod common;

use commlens_synth::{generate_traces, GeneratedTraces, RunConfig, TraceConfig};
use common::{commlens_cmd, run_limited, temp_dir};
use std::path::{Path, PathBuf};

const SLOWDOWN: &str = "comm:tp rank:4 iter:5 op:3 factor:4";

fn write_run(dir: &Path, slowdowns: &[&str]) -> GeneratedTraces {
    let cfg = RunConfig {
        iterations: 10,
        slowdowns: slowdowns.iter().map(|s| s.parse().unwrap()).collect(),
        ..RunConfig::megatron(2, 2, 2)
    };
    let g = generate_traces(&cfg, &TraceConfig::default()).unwrap();
    g.write_kineto(dir, false).unwrap();
    g
}

/// The instance's earliest member kernel start (epoch ns), from the generator's mapping.
fn injected_start(g: &GeneratedTraces) -> i64 {
    let inj = &g.run.truth.injected;
    assert_eq!(inj.len(), 1, "{inj:?}");
    g.truth
        .kernels
        .iter()
        .flatten()
        .filter(|k| {
            k.ops
                .iter()
                .any(|o| o.comm == inj[0].comm && o.op_count == inj[0].opcount)
        })
        .map(|k| k.start_ns)
        .min()
        .expect("the injected instance has kernels")
}

#[test]
fn report_and_diff_show_the_injected_slow_instance() {
    let root = temp_dir("anomalies", "e2e");
    let (clean, slow): (PathBuf, PathBuf) = (root.join("clean"), root.join("injected"));
    write_run(&clean, &[]);
    let g = write_run(&slow, &[SLOWDOWN]);
    let inj = g.run.truth.injected[0].clone();
    let start = injected_start(&g);
    // The time column: UTC date and time with µs (2025-12-18 18:0x:yy.uuuuuu UTC).
    let micros = format!(".{:06} UTC", (start % 1_000_000_000) / 1000);

    let html = root.join("report.html");
    let r = run_limited(
        commlens_cmd(&[
            "report",
            slow.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ]),
        120,
        "report",
    );
    assert_eq!(r.code, 0, "{}", r.err);
    println!("{}", r.out);
    let rows: Vec<&str> = r
        .out
        .lines()
        .filter(|l| l.contains("slow instance"))
        .collect();
    assert_eq!(rows.len(), 1, "one anomaly listed: {}", r.out);
    let ranks = format!("{}-{}", inj.members[0], inj.members[1]);
    assert!(
        rows[0].starts_with("2025-12-18 ") && rows[0].contains(&micros),
        "time of the instance ({micros}): {}",
        rows[0]
    );
    assert!(
        rows[0].contains(&ranks) && rows[0].contains(&inj.kind),
        "ranks {ranks} and kind {}: {}",
        inj.kind,
        rows[0]
    );
    assert!(
        r.out
            .contains("Anomalies (operations far from their own history)")
            && r.out.contains("were judged")
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let section = &page[page.find(r#"id="anomalies""#).expect("anomaly section")..];
    assert!(
        section.contains("slow instance")
            && section.contains(&ranks)
            && section.contains("<polyline"),
        "HTML section lists it with a chart"
    );

    let r = run_limited(
        commlens_cmd(&[
            "report",
            clean.to_str().unwrap(),
            "-o",
            root.join("clean.html").to_str().unwrap(),
        ]),
        120,
        "report clean",
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(
        !r.out.contains("slow instance") && r.out.contains("no anomaly"),
        "{}",
        r.out
    );

    let r = run_limited(
        commlens_cmd(&["diff", clean.to_str().unwrap(), slow.to_str().unwrap()]),
        180,
        "diff",
    );
    println!("{}", r.out);
    let figure = r
        .out
        .lines()
        .find(|l| l.starts_with("anomalies: slow instances"))
        .expect("anomaly figure");
    assert!(
        figure.contains("0.00") && figure.contains("1.00") && figure.contains("changed"),
        "{figure}"
    );
    let new = &r.out[r.out.find("New anomalies in").expect("new anomalies table")..];
    let row = new
        .lines()
        .find(|l| l.contains("slow instance"))
        .expect("the injected instance is new");
    assert!(row.contains(&micros) && row.contains(&ranks), "{row}");

    // The same list in JSON: the injected instance, whole, with its ranks and time.
    let r = run_limited(
        commlens_cmd(&[
            "diff",
            clean.to_str().unwrap(),
            slow.to_str().unwrap(),
            "--format",
            "json",
        ]),
        180,
        "diff json",
    );
    let v: serde_json::Value = serde_json::from_str(&r.out).expect("diff --format json is JSON");
    let new = v["new_anomalies"].as_array().expect("new_anomalies list");
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(
        new[0]["rule"],
        serde_json::json!("SlowInstance"),
        "{:?}",
        new[0]
    );
    let t = new[0]["time_ns"].as_i64().expect("time_ns");
    assert!(
        (t - start).abs() < 1000,
        "time {t} vs the injected kernel's {start}"
    );
    let json_ranks: Vec<u64> = new[0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.as_u64())
        .collect();
    assert_eq!(
        json_ranks.first().copied(),
        Some(inj.members[0] as u64),
        "{json_ranks:?}"
    );
    assert!(
        v["rows"].is_array() && v["a"].is_string(),
        "the diff's own fields stay: {v}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}
