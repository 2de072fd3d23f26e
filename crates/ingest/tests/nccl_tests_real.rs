//! Every real nccl-tests output in `../shared/data/real/nccl-tests` read
//! into benchmark runs; figures checked against the files (row counts and
//! averages as `grep` finds them, the collective each file names).

use commlens_core::OpKind;
use commlens_ingest::nccl_tests::{looks_like_nccl_tests, read_nccl_tests, BenchFile};

fn read(name: &str) -> Option<BenchFile> {
    let dir = commlens_testdata::real_dir("nccl-tests")?;
    Some(read_nccl_tests(&dir.join(name)).unwrap_or_else(|e| panic!("{e}")))
}

/// (runs, collective and how it was named, ranks, hosts, rows, avg busbw, peak busbw)
fn summary(f: &BenchFile) -> Vec<(Option<OpKind>, Option<&'static str>, u32, usize, usize, Option<f64>, f64)> {
    f.runs
        .iter()
        .map(|r| (r.kind, r.kind_from, r.ranks, r.hosts.len(), r.rows.len(), r.avg_busbw_gb_s, r.peak_busbw_gb_s()))
        .collect()
}

#[test]
fn every_file_reads_with_no_malformed_rows() {
    let Some(dir) = commlens_testdata::real_dir("nccl-tests") else { return };
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let head = std::fs::read(&p).unwrap();
        assert!(looks_like_nccl_tests(&head[..head.len().min(16 << 10)]), "{}", p.display());
        let f = read_nccl_tests(&p).unwrap_or_else(|e| panic!("{e}"));
        assert!(f.malformed.is_empty(), "{}: {:?}", p.display(), f.malformed);
        for r in &f.runs {
            assert!(r.kind.is_some(), "{}: collective not found", p.display());
            // Sizes ascend within a run (nccl-tests steps up), busbw never exceeds 1 TB/s.
            assert!(r.rows.windows(2).all(|w| w[0].bytes <= w[1].bytes), "{}", p.display());
            assert!(r.peak_busbw_gb_s() > 0.0 && r.peak_busbw_gb_s() < 1000.0, "{}", p.display());
        }
        n += 1;
    }
    assert_eq!(n, 7);
}

/// Row counts and peaks match an independent `awk` over the files (rows of
/// 11+ fields starting with two integers; the larger busbw column);
/// averages are the files' own `Avg bus bandwidth` lines.
#[test]
fn golden_figures() {
    use OpKind::*;
    let cases: [(&str, Vec<(Option<OpKind>, Option<&str>, u32, usize, usize, Option<f64>, f64)>); 7] = [
        (
            "abci2.0-inter_anode-job08-64xA100SXM4-8node-nccl2.8.4-oldformat.txt",
            // No name anywhere: busbw/algbw = 2·63/64 with a reduction → AllReduce.
            vec![(Some(AllReduce), Some("bus factor"), 64, 8, 24, Some(4.11476), 16.24)],
        ),
        (
            "boeschf-alps-all_reduce_perf-16xGH200-4node-nccl2.23.4-aws-ofi-1.13.0.out",
            vec![(Some(AllReduce), Some("command"), 16, 4, 30, Some(25.8822), 92.5)],
        ),
        (
            "lessizzmore-create-a3mega-ztan-NCCL-test-result-16xH100-2node.md",
            vec![(Some(AllReduce), Some("command"), 16, 2, 31, Some(70.742), 338.82)],
        ),
        (
            "superbenchmark-tests-data-nccl_allreduce-8xA100SXM4-oldformat.log",
            vec![(Some(AllReduce), Some("file name"), 8, 1, 34, Some(68.4048), 235.26)],
        ),
        (
            "superbenchmark-tests-data-nccl_alltoall.log",
            vec![(Some(AllToAll), Some("file name"), 8, 1, 34, Some(58.6481), 226.16)],
        ),
        (
            "superbenchmark-tests-data-nccl_reduce.log",
            vec![(Some(Reduce), Some("file name"), 8, 1, 34, Some(65.018), 231.28)],
        ),
        (
            "xxrjun-nccl-tests-cluster-pairs-N2_G8-H100-cnode4-008_cnode4-011.log",
            vec![
                (Some(AllToAll), Some("header"), 16, 2, 10, Some(9.61188), 15.75),
                (Some(SendRecv), Some("header"), 16, 2, 10, Some(19.5856), 24.94),
            ],
        ),
    ];
    for (name, want) in cases {
        let Some(f) = read(name) else { return };
        assert_eq!(summary(&f), want, "{name}");
    }
    // The old layout's alltoall leaves redop empty; reduce has a root column.
    let f = read("superbenchmark-tests-data-nccl_alltoall.log").unwrap();
    assert!(f.runs[0].rows.iter().all(|r| r.redop.is_none() && r.root.is_none()));
    let f = read("superbenchmark-tests-data-nccl_reduce.log").unwrap();
    assert!(f.runs[0].rows.iter().all(|r| r.redop.as_deref() == Some("sum") && r.root == Some(0)));
    // GPU models from the device lines.
    let f = read("boeschf-alps-all_reduce_perf-16xGH200-4node-nccl2.23.4-aws-ofi-1.13.0.out").unwrap();
    assert_eq!(f.runs[0].gpu_models, vec!["NVIDIA GH200 120GB".to_string()]);
}

/// nccl-tests print their tables into the same file as NCCL's debug lines:
/// the logs in `nccl-logs` that hold tables give them too.
#[test]
fn tables_inside_nccl_debug_logs() {
    let Some(dir) = commlens_testdata::real_dir("nccl-logs") else { return };
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let has_table =
            text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>().windows(3).any(|w| w == ["size", "count", "type"]));
        match read_nccl_tests(&p) {
            Ok(f) => {
                assert!(has_table, "{}", p.display());
                // The 2-node trace run was interrupted (^C) in the middle of its last row.
                assert!(
                    f.malformed.len() <= 1 && f.malformed.iter().all(|m| m.1.starts_with("row never completed")),
                    "{}: {:?}",
                    p.display(),
                    f.malformed
                );
                println!("{}: {:?}", p.file_name().unwrap().to_string_lossy(), summary(&f));
            }
            Err(e) => assert!(!has_table, "{e}"),
        }
    }
}
