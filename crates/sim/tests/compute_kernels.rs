//! Kernel tables from the real traces in `../shared/data/real`: counts and medians against an
//! independent reading (serde_json over the raw Kineto events), the tar.gz reader against GNU
//! tar, and an nsys export.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

use commlens_sim::compute::KernelTable;

/// Every `cat == "kernel"` event's (name, dur µs), read without commlens.
fn raw_kernels(path: &PathBuf) -> HashMap<String, Vec<f64>> {
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap()).read_to_string(&mut text).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out: HashMap<String, Vec<f64>> = HashMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        if e["cat"] == "kernel" {
            let name = e["name"].as_str().unwrap().to_string();
            out.entry(name).or_default().push(e["dur"].as_f64().unwrap());
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

#[test]
fn kineto_counts_match_an_independent_reading() {
    let Some(dir) = commlens_testdata::real_dir("kineto") else { return };
    for file in ["hta-trace_diff-control-rank3of8-A100.json.gz", "tracelens-b200-eager_trace-rank0of8-nccl2.27.5.json.gz"] {
        let path = dir.join(file);
        let table = KernelTable::from_traces(std::slice::from_ref(&path)).unwrap();
        let raw = raw_kernels(&path);
        assert!(!table.is_empty(), "{file}");
        // Every name the table holds has exactly the raw count and median.
        for (name, stat) in table.iter() {
            let durs = raw.get(name).unwrap_or_else(|| panic!("{file}: {name} not among raw kernels"));
            assert_eq!(stat.count as usize, durs.len(), "{file}: {name}");
            let m = median(durs.clone());
            assert!((stat.median_us - m).abs() <= 1e-3 + 1e-6 * m, "{file}: {name}: {} vs {m}", stat.median_us);
        }
        // What the table leaves out are NCCL and other communication kernels only.
        let left: Vec<&String> = raw.keys().filter(|n| table.iter().all(|(t, _)| t != n.as_str())).collect();
        for n in &left {
            let l = n.to_ascii_lowercase();
            assert!(l.contains("nccl") || l.contains("all_reduce") || l.contains("allreduce") || l.contains("multimem") || l.contains("sync"), "{file}: {n} dropped");
        }
        let raw_total: usize = raw.values().map(Vec::len).sum();
        println!(
            "{file}: {} compute kernels in {} names (GPU {:?}); {} raw kernel events, {} names left out as communication",
            table.samples(),
            table.len(),
            table.gpu,
            raw_total,
            left.len()
        );
    }
    let t = KernelTable::from_traces(&[dir.join("hta-trace_diff-control-rank3of8-A100.json.gz")]).unwrap();
    assert_eq!(t.samples(), 8568 - nccl_events(&dir.join("hta-trace_diff-control-rank3of8-A100.json.gz")));
    assert_eq!(commlens_model::gpu::gpu_by_name(t.gpu.as_deref().unwrap()).unwrap().name, "A100");
}

fn nccl_events(path: &PathBuf) -> u64 {
    raw_kernels(path).iter().filter(|(n, _)| n.starts_with("nccl")).map(|(_, v)| v.len() as u64).sum()
}

#[test]
fn tar_archive_reads_like_gnu_tar() {
    let Some(dir) = commlens_testdata::real_dir("kineto") else { return };
    let tar = dir.join("param-dlrm_kineto-8rank-V100-worker0-7.tar.gz");
    let ours = KernelTable::from_traces(std::slice::from_ref(&tar)).unwrap();
    let tmp = std::env::temp_dir().join(format!("commlens-sim-tar-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let ok = std::process::Command::new("tar").arg("xzf").arg(&tar).arg("-C").arg(&tmp).status().is_ok_and(|s| s.success());
    if !ok {
        commlens_testdata::skip("kernel table vs unpacked archive", "no tar program to unpack with");
        return;
    }
    let theirs = KernelTable::from_traces(std::slice::from_ref(&tmp)).unwrap();
    std::fs::remove_dir_all(&tmp).ok();
    assert!(ours.samples() > 0);
    assert_eq!(ours.samples(), theirs.samples());
    assert_eq!(ours.len(), theirs.len());
    for (name, s) in ours.iter() {
        assert_eq!(Some(s), theirs.lookup(name), "{name}");
    }
    println!("DLRM 8 ranks (tar.gz): {} compute kernels in {} names, GPU {:?}", ours.samples(), ours.len(), ours.gpu);
}

#[test]
fn nsys_export_gives_kernels() {
    let Some(dir) = commlens_testdata::real_dir("nsys") else { return };
    let path = dir.join("GindaChen-nsys-ai-fastvideo-wan2.1-torchrun-2xH100-sendrecv-derived-300ms-window.sqlite");
    let t = KernelTable::from_traces(std::slice::from_ref(&path)).unwrap();
    // Independent count with the sqlite3 shell when present: kernel rows whose name is not NCCL's.
    let sql = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName WHERE s.value NOT LIKE 'nccl%';";
    if let Ok(out) = std::process::Command::new("sqlite3").arg(&path).arg(sql).output() {
        if out.status.success() {
            let n: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
            println!("nsys: {} compute kernels in {} names; sqlite3 counts {n} non-NCCL kernel rows", t.samples(), t.len());
            assert!(t.samples() <= n && t.samples() * 100 >= n * 95, "{} of {n}", t.samples());
            return;
        }
    }
    assert!(t.samples() > 0);
}
