//! `commlens plan` through the binary: named models and model files, the three formats,
//! `--explain`, `--html`, measured bandwidths, and errors that say what was expected.

mod common;

use common::{commlens_cmd, run_limited, temp_dir};
use std::path::PathBuf;

fn plan(args: &[&str]) -> common::Run {
    run_limited(commlens_cmd(&[&["plan"], args].concat()), 300, "commlens plan")
}

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn json(args: &[&str]) -> serde_json::Value {
    let r = plan(&[args, &["--format", "json"]].concat());
    assert_eq!(r.code, 0, "{}", r.err);
    serde_json::from_str(&r.out).unwrap_or_else(|e| panic!("{e}: {}", r.out))
}

#[test]
fn json_rows_carry_the_layout_by_its_usual_names() {
    let v = json(&["--model", "gpt3-13b", "--cluster", "dgx-h100", "--gpus", "64", "--top", "6"]);
    let rows = v["rows"].as_array().unwrap();
    println!("gpt3-13b on 64 H100: {} of {} layouts fit; top {}:", v["fitting"], v["enumerated"], rows.len());
    assert_eq!(rows.len(), 6);
    let cap = v["capacity_gib"].as_f64().unwrap();
    let mut last = 0.0;
    for (i, r) in rows.iter().enumerate() {
        println!("  #{} {} {:.1} ms MFU {:.1} % bottleneck {}", r["rank"], r["label"].as_str().unwrap(), r["iteration_s"].as_f64().unwrap() * 1e3, r["mfu"].as_f64().unwrap() * 100.0, r["bottleneck"]);
        assert_eq!(r["rank"].as_u64().unwrap(), i as u64 + 1);
        let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("row lacks {k}: {r}"));
        let world = match r["family"].as_str().unwrap() {
            "axonn" => n("gx") * n("gy") * n("gz") * n("gdata"),
            _ => n("tp") * n("pp") * n("dp"),
        };
        assert_eq!(world, 64, "{r}");
        for k in ["vpp", "ep", "mbs", "zero"] {
            n(k);
        }
        assert!(r["sp"].is_boolean());
        assert!(r["memory_gib"].as_f64().unwrap() <= cap);
        let t = r["iteration_s"].as_f64().unwrap();
        assert!(t >= last, "ranked by iteration time");
        last = t;
    }
    assert!(rows.iter().any(|r| r["simulated"].is_object()), "the top rows are re-ranked by the simulator");
}

#[test]
fn csv_text_explain_and_html() {
    let dir = temp_dir("plan", "html");
    let html = dir.join("plan.html");
    let r = plan(&["--model", "llama-7b", "--gpus", "16", "--top", "4", "--format", "csv"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let lines: Vec<&str> = r.out.lines().collect();
    assert!(lines[0].starts_with("rank,model_rank,family,tp,pp,vpp,dp,ep,sp,mbs,zero,gx,gy,gz,gdata"), "{}", lines[0]);
    assert_eq!(lines.len(), 5);
    let r = plan(&["--model", "llama-7b", "--gpus", "16", "--top", "4", "--explain", "2", "--html", html.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    println!("{}", r.out);
    for want in ["rank  layout", "#2 ", "memory per GPU:", "estimate:", "bottleneck:"] {
        assert!(r.out.contains(want), "missing {want:?} in\n{}", r.out);
    }
    // By default the ranking fits 80 columns (two lines per layout); notes are prose.
    let table: Vec<&str> = r.out.lines().skip(1).take_while(|l| !l.starts_with("note:") && !l.starts_with("ranked ")).collect();
    assert_eq!(table.len(), 2 + 2 * 4, "header, key line and two lines per layout:\n{}", r.out);
    assert!(table.iter().all(|l| l.chars().count() <= 80), "wider than 80 columns:\n{}", r.out);
    // --wide: one line per layout with every column.
    let w = plan(&["--model", "llama-7b", "--gpus", "16", "--top", "4", "--wide"]);
    assert_eq!(w.code, 0, "{}", w.err);
    let lines: Vec<&str> = w.out.lines().collect();
    assert!(lines[1].starts_with("rank model  layout") && lines[1].contains("communication ms"), "{}", w.out);
    assert!(lines[2..6].iter().all(|l| l.split_whitespace().count() >= 9), "{}", w.out);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Parallel layout plan") && page.contains("<svg") && page.contains("Memory per GPU"), "plan section with charts");
    assert!(!page.contains("Not available for these inputs"), "a plan page lists no absent trace sections");
}

#[test]
fn model_file_input_finds_its_own_layout() {
    let conf = repo().join("examples/demo-model.conf");
    let v = json(&[conf.to_str().unwrap(), "--gpus", "4", "--top", "30", "--fix", "family=megatron"]);
    let notes: Vec<&str> = v["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    println!("{notes:#?}");
    assert_eq!(v["global_batch"], 4, "the file's batch: 4 micro-batches of 1 on dp 1");
    assert!(notes.iter().any(|n| n.contains("own layout (megatron tp2 pp2 dp1 mbs1) ranks #")), "{notes:?}");
}

#[test]
fn measured_bandwidths_replace_the_model() {
    let Some(dir) = commlens_testdata::real_dir("nccl-tests") else { return };
    let file = dir.join("boeschf-alps-all_reduce_perf-16xGH200-4node-nccl2.23.4-aws-ofi-1.13.0.out");
    if !file.exists() {
        return;
    }
    let args = ["--model", "gpt3-13b", "--cluster", "gh200-slingshot", "--gpus", "64", "--top", "3", "--fix", "family=megatron,tp=4,pp=1"];
    let base = json(&args);
    let meas = json(&[&args[..], &["--measured", file.to_str().unwrap()]].concat());
    let notes: Vec<String> = meas["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
    println!("{notes:#?}");
    assert!(notes.iter().any(|n| n.contains("β_inter") && n.contains("measured")), "{notes:?}");
    let dp = |v: &serde_json::Value| v["rows"][0]["estimate"]["comm"]["dp"].as_f64().unwrap();
    println!("DP communication estimate: model {:.2} ms, measured β_inter {:.2} ms", dp(&base) * 1e3, dp(&meas) * 1e3);
    assert_ne!(dp(&base), dp(&meas), "the inter-node DP term follows the measured β_inter");
}

#[test]
fn errors_say_what_was_expected() {
    let r = plan(&["--model", "gpt5", "--gpus", "8"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("unknown model") && r.err.contains("gpt3-175b"), "{}", r.err);
    let r = plan(&["--model", "gpt3-13b", "--gpus", "8", "--fix", "tq=2"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("unknown degree") && r.err.contains("tp"), "{}", r.err);
    let r = plan(&["--model", "gpt3-175b", "--gpus", "8"]);
    assert_eq!(r.code, 2, "175B does not fit 8 GPUs: {}", r.out);
    assert!(r.err.contains("no layout of gpt3-175b fits"), "{}", r.err);
    let r = plan(&["--model", "gpt3-13b", "--gpus", "64", "--explain", "100000"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("expected a rank from 1 to"), "{}", r.err);
}
