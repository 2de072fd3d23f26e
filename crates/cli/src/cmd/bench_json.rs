//! The `nccl_tests` entry of `stats --format json`, written by hand into a
//! buffer ([`write`], through [`super::json_text::Text`]): every object's
//! keys in sorted order, as the `serde_json::Value` tree the document used to
//! hold wrote them (a `Value` map sorts its keys), without building that tree
//! and without `serde_json`'s serializer. On the 400 MB bench log (203 runs,
//! 4,258 rows) the serializer took about 26 M instructions, half of them
//! escaping keys, all on one core after the parallel read; the buffer is now
//! written on a thread of its own beside the stats tables (`stats.rs`).
//!
//! The keys are listed by hand: `sorted_json_is_the_value_json` (below) holds
//! them to the `Value` text on real files, so a field added to the result
//! types and not here fails it.

use super::json_text::Text;
use commlens_ingest::nccl_tests::{BenchFile, BenchRow, BenchRun, BenchTiming};

/// nccl-tests results as a pretty JSON array, keys sorted, starting `depth`
/// containers deep in the document.
pub fn write(files: &[BenchFile], depth: usize) -> Vec<u8> {
    // About 300 bytes a row.
    let rows: usize = files.iter().flat_map(|f| &f.runs).map(|r| r.rows.len()).sum();
    let mut t = Text::at(depth, 4096 + 320 * rows);
    t.array(files, file);
    t.buf
}

fn file(t: &mut Text, f: &BenchFile) {
    t.open(b'{');
    t.key(true, "malformed");
    t.array(&f.malformed, |t, (line, text)| {
        t.open(b'[');
        t.line(true);
        t.u64(*line);
        t.line(false);
        t.str(text);
        t.close(b']', false);
    });
    t.key(false, "path");
    t.str(&f.path);
    t.key(false, "runs");
    t.array(&f.runs, run);
    t.close(b'}', false);
}

fn run(t: &mut Text, r: &BenchRun) {
    t.open(b'{');
    t.key(true, "avg_busbw_gb_s");
    t.opt(r.avg_busbw_gb_s, Text::f64);
    t.key(false, "gpu_models");
    t.array(&r.gpu_models, |t, m| t.str(m));
    t.key(false, "gpus_per_host");
    t.array(&r.gpus_per_host, |t, n| t.u64(u64::from(*n)));
    t.key(false, "gpus_per_thread");
    t.u64(u64::from(r.gpus_per_thread));
    t.key(false, "header_line");
    t.u64(r.header_line);
    t.key(false, "hosts");
    t.array(&r.hosts, |t, h| t.str(h));
    t.key(false, "kind");
    // As serde names the variant (one per run: the serializer is cheap enough).
    t.serde(&r.kind).expect("an operation kind is a plain string");
    t.key(false, "kind_from");
    t.opt(r.kind_from, Text::str);
    t.key(false, "ranks");
    t.u64(u64::from(r.ranks));
    t.key(false, "rows");
    t.array(&r.rows, row);
    t.close(b'}', false);
}

fn row(t: &mut Text, r: &BenchRow) {
    t.open(b'{');
    t.key(true, "bytes");
    t.u64(r.bytes);
    t.key(false, "count");
    t.u64(r.count);
    t.key(false, "dtype");
    t.str(&r.dtype);
    t.key(false, "in_place");
    timing(t, &r.in_place);
    t.key(false, "line");
    t.u64(r.line);
    t.key(false, "out_of_place");
    timing(t, &r.out_of_place);
    t.key(false, "redop");
    t.opt(r.redop.as_deref(), Text::str);
    t.key(false, "root");
    t.opt(r.root, Text::i64);
    t.close(b'}', false);
}

fn timing(t: &mut Text, x: &BenchTiming) {
    t.open(b'{');
    t.key(true, "algbw_gb_s");
    t.f64(x.algbw_gb_s);
    t.key(false, "busbw_gb_s");
    t.f64(x.busbw_gb_s);
    t.key(false, "errors");
    t.opt(x.errors, Text::f64);
    t.key(false, "time_us");
    t.f64(x.time_us);
    t.close(b'}', false);
}

#[cfg(test)]
mod tests {
    use super::write;
    use commlens_ingest::nccl_tests::read_nccl_tests;

    /// Every real nccl-tests output (and every real NCCL log holding tables):
    /// the hand writer gives the pretty text the `Value` tree gave.
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
            assert_eq!(text(one, 0), serde_json::to_string_pretty(&value).unwrap(), "{}", f.path);
        }
        // The whole list, also as it sits inside the document (one level deep).
        let all = serde_json::to_value(&files).unwrap();
        assert_eq!(text(&files, 0), serde_json::to_string_pretty(&all).unwrap());
        let doc = serde_json::to_string_pretty(&serde_json::json!({ "nccl_tests": all })).unwrap();
        assert_eq!(format!("{{\n  \"nccl_tests\": {}\n}}", text(&files, 1)), doc);
        assert_eq!(text(&[], 0), "[]");
    }

    fn text(files: &[commlens_ingest::nccl_tests::BenchFile], depth: usize) -> String {
        String::from_utf8(write(files, depth)).unwrap()
    }
}
