//! The table reader on hand-written outputs: both layouts, empty columns,
//! decorations, several runs, inference of the collective, malformed rows.

use super::*;
use std::io::Write;

fn read(name: &str, text: &str) -> Result<BenchFile, IngestError> {
    let dir = std::env::temp_dir().join(format!("commlens-nccl-tests-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().write_all(text.as_bytes()).unwrap();
    let r = read_nccl_tests(&p);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

const NEW_HEADER: &str = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
const OLD_HEADER: &str = "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n";

fn devices(n: u32, hosts: u32) -> String {
    (0..n)
        .map(|r| format!("#  Rank {r:2} Group  0 Pid {} on host{} device {} [0000:1b:00] NVIDIA H100 80GB HBM3\n", 100 + r, r % hosts, r % 8))
        .collect()
}

#[test]
fn current_layout_with_header_name_devices_and_average() {
    let text = format!(
        "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor)\n# Using devices\n{}{NEW_HEADER}\
         #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n\
                    8             2     float     sum      -1    35.10    0.00    0.00      0    34.00    0.00    0.00      0\n\
             1048576        262144     float     sum      -1    50.00   20.97   39.32      0    49.00   21.40   40.12      0\n\
         # Out of bounds values : 0 OK\n# Avg bus bandwidth    : 19.86\n",
        devices(16, 2)
    );
    let f = read("a.log", &text).unwrap();
    assert_eq!(f.runs.len(), 1);
    let r = &f.runs[0];
    assert_eq!((r.kind, r.kind_from), (Some(OpKind::AllReduce), Some("header")));
    assert_eq!((r.ranks, r.hosts.len()), (16, 2));
    assert_eq!(r.gpu_models, vec!["NVIDIA H100 80GB HBM3".to_string()]);
    assert_eq!(r.rows.len(), 2);
    assert_eq!(r.rows[1].bytes, 1_048_576);
    assert_eq!(r.rows[1].root, Some(-1));
    assert_eq!(r.rows[1].redop.as_deref(), Some("sum"));
    assert_eq!(r.rows[1].in_place.busbw_gb_s, 40.12);
    assert_eq!(r.rows[1].out_of_place.errors, Some(0.0));
    assert_eq!(r.avg_busbw_gb_s, Some(19.86));
    assert_eq!(r.peak_busbw_gb_s(), 40.12);
}

#[test]
fn old_layout_with_an_empty_redop_and_na_errors() {
    let text = format!(
        "# nThread 1 nGpus 8 minBytes 1 maxBytes 8 step: 2(factor)\n{}{OLD_HEADER}\
         \x20       1024           256   float            10.0    0.10    0.09    N/A     9.0    0.11    0.10    N/A\n",
        devices(8, 1)
    );
    let f = read("superbench-nccl_alltoall.log", &text).unwrap();
    let r = &f.runs[0];
    assert_eq!((r.kind, r.kind_from), (Some(OpKind::AllToAll), Some("file name")));
    assert_eq!(r.rows[0].redop, None);
    assert_eq!(r.rows[0].out_of_place.errors, None);
    assert_eq!(r.rows[0].count, 256);
    assert_eq!(r.gpus_per_thread, 8, "nGpus of the nThread line");
}

#[test]
fn srun_labels_markdown_and_command_lines() {
    let rows = "1048576 262144 float sum -1 50.0 20.97 36.70 0 49.0 21.40 37.45 0\n";
    let text = format!(
        "+ srun -l ./all_gather_perf -b 8\n 0: # nThread 1\n{} 0: {NEW_HEADER} 0: {rows}",
        devices(4, 1).lines().map(|l| format!(" 0: {l}\n")).collect::<String>()
    );
    let r = &read("x.out", &text).unwrap().runs[0];
    assert_eq!((r.kind, r.kind_from, r.ranks), (Some(OpKind::AllGather), Some("command"), 4));
    assert_eq!(r.rows.len(), 1);
    let md = format!("> /opt/nccl-tests/build/reduce_scatter_perf -b 8\n```\nnThread 1\nUsing devices\n  Rank  0 Group 0 Pid 1 on h device 0 [0x01] GPU\n{}{NEW_HEADER}{rows}```\n", "");
    let r = &read("x.md", &md).unwrap().runs[0];
    assert_eq!((r.kind, r.ranks), (Some(OpKind::ReduceScatter), 1));
}

#[test]
fn several_runs_and_inference_from_bus_factors() {
    // No names anywhere: AllReduce on 8 ranks has busbw = 1.75 × algbw,
    // ReduceScatter 0.875 ×; AllGather and AllToAll cannot be told apart.
    let row = |f: f64, op: &str| format!("1048576 262144 float {op} -1 50.0 20.00 {:.2} 0 50.0 20.00 {:.2} 0\n", 20.0 * f, 20.0 * f);
    let text = format!(
        "# nThread 1\n{d}{NEW_HEADER}{}# nThread 1\n{d}{NEW_HEADER}{}# nThread 1\n{d}{NEW_HEADER}{}",
        row(1.75, "sum"),
        row(0.875, "sum"),
        row(0.875, "none"),
        d = devices(8, 1)
    );
    let f = read("results.txt", &text).unwrap();
    let kinds: Vec<_> = f.runs.iter().map(|r| (r.kind, r.kind_from)).collect();
    assert_eq!(
        kinds,
        vec![
            (Some(OpKind::AllReduce), Some("bus factor")),
            (Some(OpKind::ReduceScatter), Some("bus factor")),
            (None, None)
        ]
    );
}

#[test]
fn malformed_rows_are_reported_and_good_ones_kept() {
    let text = format!(
        "{NEW_HEADER}1048576 262144 float sum -1 50.0 20.97 36.70 0 49.0 21.40 37.45 0\n\
         2097152 524288 float sum -1 50.0 oops 36.70 0 49.0 21.40 37.45 0\n\
         4194304 1048576 float sum\n\
         8388608 2097152 float sum -1 50.0 20.97 36.70 0 49.0 21.40 37.45 0\n"
    );
    let f = read("m.log", &text).unwrap();
    assert_eq!(f.runs[0].rows.iter().map(|r| r.line).collect::<Vec<_>>(), vec![2, 5]);
    assert_eq!(f.malformed.iter().map(|m| m.0).collect::<Vec<_>>(), vec![3, 4]);
}

#[test]
fn no_table_is_an_error_naming_the_file() {
    let e = read("empty.log", "hello\nworld\n").unwrap_err().to_string();
    assert!(e.contains("empty.log") && e.contains("no nccl-tests result table"), "{e}");
    let e = read("hdr.log", NEW_HEADER).unwrap_err().to_string();
    assert!(e.contains("no nccl-tests result table"), "{e}");
    assert!(looks_like_nccl_tests(format!("x\n 0: {NEW_HEADER}").as_bytes()));
    assert!(!looks_like_nccl_tests(b"host:1:2 [0] NCCL INFO size count type\n"));
}

#[test]
fn garbage_never_panics() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..200 {
        let mut s = String::from(NEW_HEADER);
        for _ in 0..40 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let c = b"0123456789 .-#:>N/Asumfloat\n"[(seed % 28) as usize] as char;
            s.push(c);
        }
        let _ = read(&format!("g{i}.log"), &s);
    }
}

/// A row cut into its three writes by NCCL lines on the same stdout.
#[test]
fn rows_in_pieces_between_nccl_lines() {
    let text = format!(
        "{NEW_HEADER}              8388608       2097152     float     sum      -1mew0:64904:64904 [1] NCCL INFO AllReduce: opCount 0 count 2097152\n         mew0:64904:64904 [0] NCCL INFO AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..23}}\n         10-1-2-3:5:5 [0] NCCL INFO a host that starts with a digit\n             83.33  100.66  100.66      0mew0:64904:64904 [1] NCCL INFO AllReduce: opCount 0\n             80.98  103.59  103.59      0\n             16777216       4194304     float     sum      -1\n         # Avg bus bandwidth    : 102.1\n"
    )
    .replace("\\n", "\n");
    let f = read("pieces.log", &text).unwrap();
    assert_eq!(f.runs[0].rows.len(), 1, "{:?}", f.malformed);
    let r = &f.runs[0].rows[0];
    assert_eq!((r.bytes, r.root, r.line), (8388608, Some(-1), 2));
    assert_eq!((r.out_of_place.time_us, r.in_place.busbw_gb_s), (83.33, 103.59));
    // The unfinished second row is reported where it started.
    assert_eq!(f.malformed.iter().map(|m| m.0).collect::<Vec<_>>(), vec![7]);
}

/// Instrumented builds mark every write with `func(), file:line, `, also
/// in the middle of a row.
#[test]
fn call_site_marks_are_removed() {
    let l = b"TimeTest(), common.cu:610,           64             4     float    none      -1BenchTime(), common.cu:561,     477.8    0.00    0.00      0BenchTime(), common.cu:561,     466.0    0.00    0.00      0TimeTest(), common.cu:613, ";
    let s = strip_call_sites(l);
    let w: Vec<&str> = std::str::from_utf8(&s).unwrap().split_whitespace().collect();
    assert_eq!(w, ["64", "4", "float", "none", "-1", "477.8", "0.00", "0.00", "0", "466.0", "0.00", "0.00", "0"]);
    assert_eq!(&*strip_call_sites(b"run(), common.cu:1084, #  size count"), b"#  size count");
    // Not a mark: left alone.
    assert_eq!(&*strip_call_sites(b"f(), not a site, x"), b"f(), not a site, x");
    assert_eq!(&*strip_call_sites(b"(), a.cu:1, x"), b"(), a.cu:1, x");
}

#[test]
fn lines_passed_over_are_those_the_loop_ignores() {
    use super::may_matter;
    // Kept: rows and pieces of rows, headers, keyword lines, command lines.
    for l in [
        &b"#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong"[..],
        b"## size count type",
        b"8 2 float sum -1 5.1 0.00 0.00 0 5.0 0.00 0.00 0",
        b"#  Rank  0 Group  0 Pid 1 on host device  0 [0x17] NVIDIA A100",
        b"# nThread 1 nGpus 1 minBytes 8 maxBytes 128M step: 2(factor) warmup iters: 5 iters: 20",
        b"# Avg bus bandwidth    : 12.34",
        b"# Collective test starting: all_reduce_perf",
        b"mpirun -np 2 ./build/all_reduce_perf -b 8 -e 128M -f 2",
        "\u{3000}size count".as_bytes(),
    ] {
        assert!(may_matter(l), "{}", String::from_utf8_lossy(l));
    }
    // Passed over: NCCL debug lines, blank and other program output.
    for l in [
        &b"mew0:64904:64904 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7 recvbuff 0x9 count 2 datatype 7"[..],
        b"",
        b"#",
        b"# # size count type",
        b"#  Using devices",
        b"Collective test concluded: all_reduce",
        b"# Out of bounds values : 0 OK",
    ] {
        assert!(!may_matter(l), "{}", String::from_utf8_lossy(l));
    }
}

#[test]
fn one_pass_check_agrees_with_stripping_then_may_matter() {
    use super::{may_matter, passed_over};
    // `passed_over` may say `true` only where the full check says `false`; and
    // it must say `true` of the plain NCCL debug lines (the point of it).
    let lines: [&[u8]; 14] = [
        b"mew0:64904:64904 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7 recvbuff 0x9 count 2 datatype 7",
        b"stone:1:1 NCCL CALL ncclSend(0,7f1f,256,2,0,0,0x55f7,0x55f7)",
        b"TimeTest(), common.cu:610,   64  4  float  sum  -1",
        b"BenchTime(), common.cu:561,  477.8  0.00  0.00  0",
        b"host:1:1 [0] NCCL INFO running all_reduce_perf",
        b" 3: #  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong",
        b"> # Rank  0 Group  0 Pid 1 on host device  0 [0x17] NVIDIA A100",
        b"  12: 8 2 float sum -1 5.1 0.00 0.00 0 5.0 0.00 0.00 0",
        b"",
        b"#",
        b"f(), not a site, x",
        b"x(), a.cu:1, Avg bus bandwidth : 1.0",
        "\u{3000}size count".as_bytes(),
        b"# Out of bounds values : 0 OK",
    ];
    for l in lines {
        let full = may_matter(strip_decoration(&strip_call_sites(l)));
        assert!(!(passed_over(l) && full), "{}", String::from_utf8_lossy(l));
    }
    assert!(passed_over(lines[0]) && passed_over(lines[1]) && passed_over(b"") && passed_over(lines[13]));
}

#[test]
fn marks_are_found_at_every_offset() {
    use super::has_mark;
    for mark in [&b"(), "[..], b"_perf"] {
        for at in 0..40 {
            let mut l = vec![b'x'; at];
            l.extend_from_slice(mark);
            l.extend(std::iter::repeat_n(b'y', 40 - at));
            assert!(has_mark(&l), "{} at {at}", String::from_utf8_lossy(mark));
            // Cut short by the end of the line: no mark.
            assert!(!has_mark(&l[..at + mark.len() - 1]), "{} cut at {at}", String::from_utf8_lossy(mark));
        }
    }
    assert!(!has_mark(b"ncclSend(0,7f1f,256) (nil) NCCL_PROTO _x (),x"));
    assert!(!has_mark(b""));
    // Long lines (the vector search) with decoys before the mark, and cut short.
    let naive = |l: &[u8]| l.windows(4).any(|w| w == b"(), ") || l.windows(5).any(|w| w == b"_perf");
    for mark in [&b"(), "[..], b"_perf", b"(),", b"_per"] {
        for at in 0..120 {
            for decoy in [&b"(nil) ()x () (),x _pe _ "[..], b"", b"()()()()"] {
                let mut l: Vec<u8> = decoy.iter().copied().cycle().take(at).collect();
                l.extend_from_slice(mark);
                l.extend(decoy.iter().copied().cycle().take(at % 37));
                for end in [l.len(), l.len().saturating_sub(1), at + mark.len() / 2] {
                    let l = &l[..end.min(l.len())];
                    assert_eq!(has_mark(l), naive(l), "{}", String::from_utf8_lossy(l));
                }
            }
        }
    }
}

#[test]
fn the_short_check_for_lines_that_start_with_a_letter_is_the_full_one() {
    use super::{may_matter, passed_over};
    // Lines starting with a letter take the short path; the full check on the
    // same lines (every keyword, with and without trailing blanks) agrees.
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for k in super::START_KEYWORDS {
        for tail in [&b""[..], b" ", b"  \r", b"\t", b"x", b" 1 2", b" (), a.cu:1, 3"] {
            lines.push([k, tail].concat());
            lines.push([b"a:", k, tail].concat());
        }
        lines.push(k[..k.len() - 1].to_vec());
    }
    lines.push(b"mew0:64904:64904 [0] NCCL INFO AllReduce: opCount 0 sendbuff (nil)".to_vec());
    lines.push(b"gdr116:1:1 NCCL CALL ncclAllGather(7f,7f,2048,7,0,0,0x5f,0x5f)".to_vec());
    lines.push(b"host:1:1 [0] NCCL INFO running all_reduce_perf ".to_vec());
    // Each keyword starts with its own letter (the short path picks it by that).
    let firsts: std::collections::HashSet<u8> = super::START_KEYWORDS.iter().map(|k| k[0]).collect();
    assert_eq!(firsts.len(), super::START_KEYWORDS.len());
    for l in &lines {
        assert!(l[0].is_ascii_alphabetic());
        let full = may_matter(strip_decoration(&strip_call_sites(l)));
        assert!(!(passed_over(l) && full), "{}", String::from_utf8_lossy(l));
        let start_kept = super::START_KEYWORDS.iter().any(|k| strip_decoration(l).starts_with(k));
        assert_eq!(passed_over(l), !start_kept && !super::has_mark(l), "{}", String::from_utf8_lossy(l));
    }
}
