//! The `nccl_tests` entry of `stats --format json`, written straight to the
//! output: every object's keys in sorted order, as the `serde_json::Value`
//! tree the document used to hold wrote them (a `Value` map sorts its keys),
//! without building that tree. On the 400 MB bench log (742 processes, each
//! copy with its tables) building, writing and dropping it was about a tenth
//! of `stats`' instructions, all on one core after the parallel read.
//!
//! The keys are listed by hand: `sorted_json_is_the_value_json` (below) holds
//! them to the `Value` text on real files, so a field added to the result
//! types and not here fails it.

use commlens_ingest::nccl_tests::{BenchFile, BenchRow, BenchRun, BenchTiming};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// nccl-tests results, keys sorted.
pub struct SortedBench<'a>(pub &'a [BenchFile]);

impl Serialize for SortedBench<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        each(s, self.0, File)
    }
}

/// A slice as a JSON array, each element through `wrap`.
fn each<'a, T: 'a, W: Serialize + 'a, S: Serializer>(s: S, xs: &'a [T], wrap: impl Fn(&'a T) -> W) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(xs.len()))?;
    for x in xs {
        seq.serialize_element(&wrap(x))?;
    }
    seq.end()
}

struct File<'a>(&'a BenchFile);
struct Run<'a>(&'a BenchRun);
struct Row<'a>(&'a BenchRow);
struct Timing<'a>(&'a BenchTiming);
struct Runs<'a>(&'a [BenchRun]);
struct Rows<'a>(&'a [BenchRow]);

impl Serialize for File<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("malformed", &f.malformed)?;
        m.serialize_entry("path", &f.path)?;
        m.serialize_entry("runs", &Runs(&f.runs))?;
        m.end()
    }
}

impl Serialize for Runs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        each(s, self.0, Run)
    }
}

impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        each(s, self.0, Row)
    }
}

impl Serialize for Run<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_map(Some(10))?;
        m.serialize_entry("avg_busbw_gb_s", &r.avg_busbw_gb_s)?;
        m.serialize_entry("gpu_models", &r.gpu_models)?;
        m.serialize_entry("gpus_per_host", &r.gpus_per_host)?;
        m.serialize_entry("gpus_per_thread", &r.gpus_per_thread)?;
        m.serialize_entry("header_line", &r.header_line)?;
        m.serialize_entry("hosts", &r.hosts)?;
        m.serialize_entry("kind", &r.kind)?;
        m.serialize_entry("kind_from", &r.kind_from)?;
        m.serialize_entry("ranks", &r.ranks)?;
        m.serialize_entry("rows", &Rows(&r.rows))?;
        m.end()
    }
}

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_map(Some(8))?;
        m.serialize_entry("bytes", &r.bytes)?;
        m.serialize_entry("count", &r.count)?;
        m.serialize_entry("dtype", &r.dtype)?;
        m.serialize_entry("in_place", &Timing(&r.in_place))?;
        m.serialize_entry("line", &r.line)?;
        m.serialize_entry("out_of_place", &Timing(&r.out_of_place))?;
        m.serialize_entry("redop", &r.redop)?;
        m.serialize_entry("root", &r.root)?;
        m.end()
    }
}

impl Serialize for Timing<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("algbw_gb_s", &t.algbw_gb_s)?;
        m.serialize_entry("busbw_gb_s", &t.busbw_gb_s)?;
        m.serialize_entry("errors", &t.errors)?;
        m.serialize_entry("time_us", &t.time_us)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::SortedBench;
    use commlens_ingest::nccl_tests::read_nccl_tests;

    /// Every real nccl-tests output (and every real NCCL log holding tables):
    /// the sorted writer gives the text the `Value` tree gave, pretty and compact.
    #[test]
    fn sorted_json_is_the_value_json() {
        let mut files = Vec::new();
        for sub in ["nccl-tests", "nccl-logs"] {
            let Some(dir) = commlens_testdata::real_dir(sub) else { continue };
            let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
            paths.sort();
            files.extend(paths.iter().filter_map(|p| read_nccl_tests(p).ok()));
        }
        // Hand-made odd values too: N/A errors, no redop, a root, no average, no kind.
        let mut odd = files.first().cloned().unwrap_or_else(|| commlens_ingest::nccl_tests::BenchFile {
            path: "x".into(),
            runs: Vec::new(),
            malformed: Vec::new(),
        });
        odd.malformed.push((7, "12 34 \"quoted\" \u{e9}".into()));
        if let Some(r) = odd.runs.first_mut() {
            r.avg_busbw_gb_s = None;
            r.kind = None;
            r.kind_from = None;
            if let Some(row) = r.rows.first_mut() {
                row.redop = None;
                row.root = Some(-1);
                row.in_place.errors = None;
                row.out_of_place.time_us = 1e-7;
                row.out_of_place.busbw_gb_s = 123456789.5;
            }
        }
        files.push(odd);
        assert!(files.len() >= 2);
        for f in &files {
            let one = std::slice::from_ref(f);
            let value = serde_json::to_value(one).unwrap();
            assert_eq!(serde_json::to_string_pretty(&SortedBench(one)).unwrap(), serde_json::to_string_pretty(&value).unwrap(), "{}", f.path);
            assert_eq!(serde_json::to_string(&SortedBench(one)).unwrap(), serde_json::to_string(&value).unwrap(), "{}", f.path);
        }
        let all = serde_json::to_value(&files).unwrap();
        assert_eq!(serde_json::to_string_pretty(&SortedBench(&files)).unwrap(), serde_json::to_string_pretty(&all).unwrap());
        assert_eq!(serde_json::to_string_pretty(&SortedBench(&[])).unwrap(), "[]");
    }
}
