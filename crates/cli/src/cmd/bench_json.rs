//! The `nccl_tests` entry of `stats --format json`, written by hand into a
//! buffer ([`write`], through [`super::json_text::Text`]): every object's
//! keys in sorted order, as the `serde_json::Value` tree the document used to
//! hold wrote them (a `Value` map sorts its keys), without building that tree
//! and without `serde_json`'s serializer. On the 400 MB bench log (203 runs,
//! 4,258 rows) the serializer took about 26 M instructions, half of them
//! escaping keys, all on one core after the parallel read; the buffer is now
//! written beside the stats tables (`stats.rs`), its runs in pieces that
//! an idle thread can take.
//!
//! The keys are listed by hand: `sorted_json_is_the_value_json` (below) holds
//! them to the `Value` text on real files, so a field added to the result
//! types and not here fails it.

use super::json_text::{Keys, Text};
use commlens_ingest::nccl_tests::{BenchFile, BenchRow, BenchRun, BenchTiming};
use rayon::prelude::*;

/// nccl-tests results as a pretty JSON array, keys sorted, starting `depth`
/// containers deep in the document: its text in pieces, to be written in
/// order (joining them would copy megabytes once more).
pub fn write(files: Vec<BenchFile>, depth: usize) -> Vec<Vec<u8>> {
    let mut t = Text::at(depth, 4096);
    let mut pieces = Vec::new();
    t.open(b'[');
    let empty = files.is_empty();
    for (i, f) in files.into_iter().enumerate() {
        t.line(i == 0);
        file(&mut t, &mut pieces, f);
    }
    t.close(b']', empty);
    pieces.push(t.buf);
    pieces
}

/// Runs written as one piece of text: pieces are written in parallel (a
/// thread that ran out of other work takes some), their runs dropped there
/// too (1.7 M instructions on the 400 MB log), and written out in order.
const RUNS_A_PIECE: usize = 16;

/// The keys of the objects written once a row.
struct RowKeys {
    row: Keys<8>,
    timing: Keys<4>,
}

impl RowKeys {
    fn new() -> RowKeys {
        RowKeys {
            row: Keys::new(["bytes", "count", "dtype", "in_place", "line", "out_of_place", "redop", "root"]),
            timing: Keys::new(["algbw_gb_s", "busbw_gb_s", "errors", "time_us"]),
        }
    }
}

/// A file, its runs' text added to `pieces` (after the text so far).
fn file(t: &mut Text, pieces: &mut Vec<Vec<u8>>, f: BenchFile) {
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
    t.open(b'[');
    let depth = t.depth();
    pieces.push(std::mem::replace(&mut t.buf, Vec::with_capacity(4096)));
    let empty = f.runs.is_empty();
    let runs: Vec<Vec<u8>> = f
        .runs
        .into_par_iter()
        .chunks(RUNS_A_PIECE)
        .enumerate()
        .map(|(i, runs)| {
            // About 600 bytes a row (one level deep in the document).
            let rows: usize = runs.iter().map(|r| r.rows.len()).sum();
            let mut p = Text::at(depth, 2048 * runs.len() + (640 + 64 * depth) * rows);
            let mut keys = RowKeys::new();
            for (j, r) in runs.iter().enumerate() {
                p.line(i == 0 && j == 0);
                run(&mut p, &mut keys, r);
            }
            p.buf
        })
        .collect();
    pieces.extend(runs);
    t.close(b']', empty);
    t.close(b'}', false);
}

fn run(t: &mut Text, keys: &mut RowKeys, r: &BenchRun) {
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
    t.array(&r.rows, |t, x| row(t, keys, x));
    t.close(b'}', false);
}

fn row(t: &mut Text, keys: &mut RowKeys, r: &BenchRow) {
    let k = &mut keys.row;
    t.open(b'{');
    t.key_of(k, 0);
    t.u64(r.bytes);
    t.key_of(k, 1);
    t.u64(r.count);
    t.key_of(k, 2);
    t.str(&r.dtype);
    t.key_of(k, 3);
    timing(t, &mut keys.timing, &r.in_place);
    let k = &mut keys.row;
    t.key_of(k, 4);
    t.u64(r.line);
    t.key_of(k, 5);
    timing(t, &mut keys.timing, &r.out_of_place);
    let k = &mut keys.row;
    t.key_of(k, 6);
    t.opt(r.redop.as_deref(), Text::str);
    t.key_of(k, 7);
    t.opt(r.root, Text::i64);
    t.close(b'}', false);
}

fn timing(t: &mut Text, k: &mut Keys<4>, x: &BenchTiming) {
    t.open(b'{');
    t.key_of(k, 0);
    t.f64(x.algbw_gb_s);
    t.key_of(k, 1);
    t.f64(x.busbw_gb_s);
    t.key_of(k, 2);
    t.opt(x.errors, Text::f64);
    t.key_of(k, 3);
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
        // Runs enough for several pieces (written in parallel, joined).
        let mut many = files[0].clone();
        many.runs = files.iter().flat_map(|f| f.runs.clone()).cycle().take(3 * super::RUNS_A_PIECE + 1).collect();
        files.push(many);
        assert!(files.len() >= 3);
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
        String::from_utf8(write(files.to_vec(), depth).concat()).unwrap()
    }
}
