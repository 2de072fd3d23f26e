//! A log that is nccl-tests output too (the benchmark and NCCL share stdout)
//! has its tables read in the log reader's own pass
//! (`ReadOptions::bench_tables`): read sequentially, and in chunks of every
//! size on all cores, the tables (rows, line numbers, malformed rows, errors)
//! are exactly those `read_nccl_tests` reads from the file on its own. A file
//! the log reader refuses has no result (the caller reads it alone).

use commlens_ingest::inputs::load_listed_with;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::nccl_tests::{read_nccl_tests, BenchFile, BenchTables};
use commlens_ingest::IngestError;
use std::path::Path;
use std::sync::Arc;

/// The tables the log reader found in `p` with chunks of `chunk` bytes (0:
/// sequential), `None` when it did not read the file to its end.
fn folded(p: &Path, chunk: u64) -> Option<Result<BenchFile, IngestError>> {
    let tables = Arc::new(BenchTables::new([p.to_path_buf()]));
    let opts = ReadOptions { chunk_bytes: Some(chunk), bench_tables: Some(tables.clone()), ..ReadOptions::default() };
    let res = load_listed_with(&[(p.to_path_buf(), false)], &opts, false, || (), |_, _| {});
    let got = tables.take(p);
    // A result only for a file the reader read (and kept or skipped by its content after).
    if got.is_some() {
        assert!(res.is_ok(), "{}: tables from a read that failed", p.display());
    }
    got
}

fn same(p: &Path, chunk: u64, got: Result<BenchFile, IngestError>, alone: &Result<BenchFile, IngestError>) {
    match (got, alone) {
        (Ok(a), Ok(b)) => assert_eq!(&a, b, "{} in chunks of {chunk}", p.display()),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{} in chunks of {chunk}", p.display()),
        (a, b) => panic!("{} in chunks of {chunk}: {:?} against {:?}", p.display(), a.map(|f| f.runs.len()), b.as_ref().map(|f| f.runs.len())),
    }
}

#[test]
fn tables_read_in_the_log_pass_are_those_read_alone() {
    let (mut compared, mut with_tables) = (0, 0);
    for sub in ["nccl-logs", "nccl-tests"] {
        let Some(dir) = commlens_testdata::real_dir(sub) else { continue };
        let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        paths.sort();
        for p in paths {
            let alone = read_nccl_tests(&p);
            for chunk in [0u64, 1 << 10, 4 << 10, 64 << 10] {
                if let Some(got) = folded(&p, chunk) {
                    with_tables += usize::from(got.is_ok());
                    same(&p, chunk, got, &alone);
                    compared += 1;
                }
            }
        }
    }
    if compared == 0 {
        eprintln!("note: no shared data folder; nothing compared");
        return;
    }
    // The bench log's four sources, at least, each read four ways.
    assert!(with_tables >= 16, "{with_tables} reads with tables");
}

#[test]
fn a_file_not_listed_is_not_scanned_and_a_refused_one_has_no_result() {
    let dir = std::env::temp_dir().join(format!("commlens-bench-fold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = "# nThread 1 nGpus 1\n#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n\
                 8 2 float sum -1 5.1 0.00 0.00 0 5.0 0.00 0.00 0\n# Avg bus bandwidth    : 0.00\n";
    // nccl-tests output with no NCCL line: the log reader refuses it.
    let plain = dir.join("all_reduce_plain.log");
    std::fs::write(&plain, table).unwrap();
    assert!(folded(&plain, 0).is_none());
    // With NCCL lines: read, with one run and the row's line number.
    let mixed = dir.join("all_reduce_mixed.log");
    let nccl = "host:1:1 [0] NCCL INFO NCCL version 2.20.5+cuda12.2\n";
    std::fs::write(&mixed, format!("{nccl}{table}{nccl}")).unwrap();
    let f = folded(&mixed, 0).expect("read").expect("a table");
    assert_eq!(f, read_nccl_tests(&mixed).unwrap());
    assert_eq!((f.runs.len(), f.runs[0].rows[0].line), (1, 4));
    // Not listed: nothing.
    let tables = Arc::new(BenchTables::new([plain.clone()]));
    let opts = ReadOptions { bench_tables: Some(tables.clone()), ..ReadOptions::default() };
    load_listed_with(&[(mixed.clone(), false)], &opts, false, || (), |_, _| {}).unwrap();
    assert!(tables.take(&mixed).is_none());
    std::fs::remove_dir_all(&dir).ok();
}
