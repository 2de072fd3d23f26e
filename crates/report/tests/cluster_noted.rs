//! The run's cluster from the hardware lines the loader noted
//! (`run_cluster_noted`) is the cluster from reading every input again
//! (`run_cluster`): on the real logs (with topology XML files among them),
//! on each real log alone, on logs with nccl-tests outputs (which the loader
//! does not note) and on a folder where one log is a copy of another.

use commlens_ingest::load_any::load_any_noting;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_report::expected::{run_cluster, run_cluster_noted};
use std::path::PathBuf;

fn same_cluster(inputs: &[PathBuf]) -> bool {
    let Ok(loaded) = load_any_noting(inputs, &ReadOptions::default(), true) else { return false };
    let noted = loaded.noted.as_ref().expect("noted lines asked for");
    let again = run_cluster(inputs, &loaded.table);
    let from_noted = run_cluster_noted(inputs, &loaded.table, Some(noted));
    assert_eq!(from_noted, again, "{inputs:?}");
    !noted.is_empty()
}

#[test]
fn noted_lines_give_the_cluster_reading_again_gives() {
    let Some(logs) = commlens_testdata::real_dir("nccl-logs") else { return };
    assert!(same_cluster(std::slice::from_ref(&logs)));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&logs).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let noted = files.iter().filter(|f| same_cluster(std::slice::from_ref(*f))).count();
    assert!(noted >= 5, "{noted} of {} real logs read", files.len());
    if let Some(tests) = commlens_testdata::real_dir("nccl-tests") {
        assert!(same_cluster(&[logs.clone(), tests]));
    }
    // A copy is read once by the loader (not noted), and read again here.
    let dir = std::env::temp_dir().join(format!("commlens-cluster-noted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = files.iter().find(|f| f.extension().is_some_and(|x| x == "log")).unwrap();
    std::fs::copy(log, dir.join("a.log")).unwrap();
    std::fs::copy(log, dir.join("b.log")).unwrap();
    assert!(same_cluster(std::slice::from_ref(&dir)));
    std::fs::remove_dir_all(&dir).unwrap();
}
