//! Side-by-side with SimAI 1.6 analytical on its own reference outputs
//! (`../shared/data/baselines/simai-1.6/outputs/<case>/{command.txt,EndToEnd.csv}`).
//!
//! For every case: the AICB workload is read with the case's `-g` (SimAI-compatible truncation),
//! then (1) SimAI's closed form ([`simai::predict`]) is checked row by row against the case's
//! per-layer `EndToEnd.csv` rows and its summary, and (2) the workload runs through the engine on
//! [`SimaiNetwork`] with the file's compute times; our iteration time (plus SimAI's closed-form
//! pipeline bubble: the AICB program holds one stage, so the engine has no bubble to simulate)
//! and exposed DP / DP_EP / TP / EP communication are printed next to SimAI's and asserted within
//! 5 %.

use commlens_sim::compute::ComputeCost;
use commlens_sim::engine::{self, EngineOptions};
use commlens_sim::simai::{self, EndToEnd, SimaiFlags, SimaiNetwork};
use commlens_workload::aicb::{self, AicbOptions};
use commlens_workload::{Compute, GroupKind};
use std::path::{Path, PathBuf};

/// Compute steps take the time the file states.
struct Stated;
impl ComputeCost for Stated {
    fn time_us(&self, c: &Compute) -> f64 {
        c.time_us.unwrap_or(0.0)
    }
}

fn baselines() -> Option<PathBuf> {
    let dir = commlens_testdata::real_root().join("../baselines/simai-1.6");
    if dir.join("outputs").is_dir() {
        return Some(dir);
    }
    commlens_testdata::skip_unless_ci("SimAI parity", &format!("baselines not found at {}", dir.display()), "put ../shared beside the repository");
    None
}

struct Case {
    name: String,
    flags: SimaiFlags,
    workload: PathBuf,
    simai: EndToEnd,
}

fn cases(root: &Path) -> Vec<Case> {
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(root.join("outputs")).unwrap().map(|e| e.unwrap().path()).collect();
    dirs.sort();
    for d in dirs {
        let cmd = std::fs::read_to_string(d.join("command.txt")).unwrap();
        let flags = SimaiFlags::from_command(&cmd).unwrap_or_else(|| panic!("{}: no -g", d.display()));
        let toks: Vec<&str> = cmd.split_whitespace().collect();
        let w = toks.windows(2).find(|w| w[0] == "-w").map(|w| w[1]).unwrap();
        let text = std::fs::read_to_string(d.join("EndToEnd.csv")).unwrap();
        let simai = EndToEnd::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        out.push(Case {
            name: d.file_name().unwrap().to_string_lossy().into_owned(),
            flags,
            workload: root.join(w),
            simai,
        });
    }
    out
}

fn opts(f: &SimaiFlags) -> AicbOptions {
    AicbOptions { gpus: Some(f.gpus), gpus_per_node: Some(f.gpus_per_server), simai_compat: true }
}

fn pct(ours: f64, theirs: f64) -> f64 {
    if theirs == 0.0 {
        if ours.abs() < 0.5 {
            0.0
        } else {
            100.0
        }
    } else {
        100.0 * (ours - theirs) / theirs
    }
}

/// SimAI's closed form, reimplemented, against every per-layer row and the summary.
#[test]
fn closed_form_matches_every_row() {
    let Some(root) = baselines() else { return };
    let all = cases(&root);
    assert!(all.len() >= 18, "expected the 18 reference cases, found {}", all.len());
    for c in &all {
        let (_, info) = aicb::load_with_info(&c.workload, &opts(&c.flags)).unwrap_or_else(|e| panic!("{e}"));
        let ours = simai::predict(&info, &c.flags, &c.simai.file_name);
        assert_eq!(ours.layers.len(), c.simai.layers.len(), "{}: layer rows", c.name);
        for (i, (a, b)) in ours.layers.iter().zip(&c.simai.layers).enumerate() {
            assert_eq!(a.name, b.name, "{} row {i}", c.name);
            for (what, x, y) in [
                ("fwd", a.fwd_total, b.fwd_total),
                ("wg", a.wg_total, b.wg_total),
                ("ig", a.ig_total, b.ig_total),
                ("fwd compute", a.fwd_compute, b.fwd_compute),
                ("ig compute", a.ig_compute, b.ig_compute),
            ] {
                assert!((x - y).abs() <= 1.0, "{} row {i} ({}) {what}: ours {x:.3} µs, SimAI {y} µs", c.name, a.name);
            }
            for (what, x, y) in
                [("fwd", a.fwd_busbw, b.fwd_busbw), ("wg", a.wg_busbw, b.wg_busbw), ("ig", a.ig_busbw, b.ig_busbw)]
            {
                // SimAI prints busbw from its rounded-down tick count; compare where it is a number.
                if x.is_finite() && y.is_finite() && y > 1.0 {
                    assert!(
                        (x - y).abs() / y < 0.01,
                        "{} row {i} ({}) {what} busbw: ours {x:.2}, SimAI {y}",
                        c.name,
                        a.name
                    );
                }
            }
        }
        for k in [GroupKind::Dp, GroupKind::DpEp, GroupKind::Tp, GroupKind::Ep] {
            assert!((ours.exposed_of(k) - c.simai.exposed_of(k)).abs() <= 1.0, "{} {:?}", c.name, k);
        }
        assert!((ours.bubble - c.simai.bubble).abs() <= 1.0, "{} bubble {} vs {}", c.name, ours.bubble, c.simai.bubble);
        // SimAI prints whole µs.
        assert!((ours.total - c.simai.total).abs() <= 1.0, "{} total {} vs {}", c.name, ours.total, c.simai.total);
        // Our summary written in SimAI's format reads back to the same figures.
        let back = EndToEnd::parse(&ours.summary_csv()).unwrap();
        assert!((back.total - ours.total).abs() <= 0.5 && back.file_name == c.simai.file_name);
    }
}

/// The engine on SimAI's rule, side by side with SimAI, every case within 5 %.
#[test]
fn engine_matches_simai_within_5_percent() {
    let Some(root) = baselines() else { return };
    let all = cases(&root);
    println!(
        "{:<44} {:>11} {:>11} {:>8}  {:>21} {:>21} {:>21} {:>21}",
        "case", "SimAI µs", "ours µs", "err %", "DP simai/ours", "DP_EP simai/ours", "TP simai/ours", "EP simai/ours"
    );
    let mut worst = (0.0f64, String::new());
    for c in &all {
        let (w, info) = aicb::load_with_info(&c.workload, &opts(&c.flags)).unwrap_or_else(|e| panic!("{e}"));
        w.validate().unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let mut net = SimaiNetwork::for_workload(&w, c.flags);
        let run = engine::run(&w, &Stated, &mut net, &EngineOptions { record: false, progress: None })
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let s = &run.summary;
        // SimAI's pipeline bubble is a closed form over the same per-layer times.
        let bubble = simai::predict(&info, &c.flags, &c.name).bubble;
        let ours_total = s.total_us + bubble;
        let err = pct(ours_total, c.simai.total);
        let split = |k: GroupKind| format!("{:.0}/{:.0}", c.simai.exposed_of(k), s.exposed(k));
        println!(
            "{:<44} {:>11.0} {:>11.0} {:>+8.3}  {:>21} {:>21} {:>21} {:>21}",
            c.name,
            c.simai.total,
            ours_total,
            err,
            split(GroupKind::Dp),
            split(GroupKind::DpEp),
            split(GroupKind::Tp),
            split(GroupKind::Ep)
        );
        if err.abs() > worst.0 {
            worst = (err.abs(), c.name.clone());
        }
        assert!(
            err.abs() < 5.0,
            "{}: iteration {ours_total:.0} µs vs SimAI {:.0} µs ({err:+.2} %)",
            c.name,
            c.simai.total
        );
        for k in [GroupKind::Dp, GroupKind::DpEp, GroupKind::Tp, GroupKind::Ep] {
            let (ours, theirs) = (s.exposed(k), c.simai.exposed_of(k));
            assert!(
                (ours - theirs).abs() <= 0.05 * theirs.max(1.0) + 1.0,
                "{}: exposed {} {ours:.0} µs vs SimAI {theirs:.0} µs",
                c.name,
                k.label()
            );
        }
        assert!((s.compute_us - c.simai.compute).abs() <= 0.05 * c.simai.compute + 1.0, "{}: compute", c.name);
    }
    println!("worst: {:.4} % ({})", worst.0, worst.1);
}
