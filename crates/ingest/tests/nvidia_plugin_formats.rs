//! NVIDIA's profiler-plugin outputs in ../shared/data/real/plugin-json: the
//! NCCL Inspector's JSON lines and the example plugin's Chrome-trace dumps.
//! Every file is read; golden figures are cross-checked against independent
//! counts made here with plain substring scanning of the raw bytes, so they
//! are not just the reader agreeing with itself. Corrupted and truncated
//! copies check that bad records are counted with their line and good ones kept.

use commlens_core::model::Grouping;
use commlens_core::{DataType, OpKind, OpTable};
use commlens_ingest::example_plugin::{self, TraceOp};
use commlens_ingest::inspector;
use commlens_ingest::json_util::{
    as_u64, parse_lenient, sniff_format, ObjectSplitter, Piece, PluginError, PluginFormat, PluginOptions,
};
use std::path::{Path, PathBuf};

const INSPECTOR_RANKS: [(&str, u32, usize, u64); 4] = [
    ("sugarlxn-inspector-all_reduce_perf-4xRTX4090-rank-pid3297944.jsonl", 0, 1900, 962_053_378_048),
    ("sugarlxn-inspector-all_reduce_perf-4xRTX4090-rank-pid3297945.jsonl", 1, 1889, 962_042_343_424),
    ("sugarlxn-inspector-all_reduce_perf-4xRTX4090-rank-pid3297946.jsonl", 2, 1900, 962_054_750_208),
    ("sugarlxn-inspector-all_reduce_perf-4xRTX4090-rank-pid3297947.jsonl", 3, 1904, 962_051_502_080),
];
const RING_DUMP: &str = "pha-Z-nccl-example-profiler-trace-p2p-ring-4rank-rank0.txt";

fn data_dir() -> Option<PathBuf> {
    commlens_testdata::real_dir("plugin-json")
}

fn count(hay: &[u8], needle: &str) -> usize {
    memchr::memmem::find_iter(hay, needle.as_bytes()).count()
}

/// The unsigned integers that follow every occurrence of `key` in `text`.
fn numbers_after(text: &str, key: &str) -> Vec<u64> {
    text.match_indices(key)
        .map(|(i, _)| {
            let rest = text[i + key.len()..].trim_start();
            let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            rest[..end].parse().unwrap()
        })
        .collect()
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("commlens-nvplugin-{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The table invariants every reader must keep.
fn check_invariants(t: &OpTable) {
    assert_eq!(t.per_rank.len(), t.devices.len());
    for (d, ops) in t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        for op in ops {
            assert_eq!(op.dev.ix(), d);
            assert_eq!(t.comms[op.comm.ix()].device, Some(op.dev));
            assert_eq!(t.devices[d].proc, op.proc);
            match op.dtype.size_bytes() {
                Some(s) => assert_eq!(op.bytes, op.count * s),
                None => assert_eq!(op.bytes, 0),
            }
        }
    }
    for d in &t.devices {
        assert!(d.global_rank.is_some());
    }
}

fn opts() -> PluginOptions {
    PluginOptions::default()
}

/// Per file: loaded as data, or a specific error. Decisions:
/// * the 4 Inspector rank files and the 4-rank example-plugin dump are real
///   plugin output: they load;
/// * the three Inspector README/exporter examples are documentation, but
///   each is one complete, valid v4.0 record (pretty-printed): they load as
///   one operation, which also covers the verbose `event_trace_*` form;
/// * the two example-plugin README excerpts are verbatim plugin output with
///   a `... [ trace truncated for brevity ]` line (and, in master's, a
///   typographic quote): they load, with the cut counted, since tolerating
///   exactly such damage is the reader's job;
/// * the exporter's output log is not plugin output (Python logging lines):
///   both readers reject it with an error naming the file and its first line.
#[test]
fn every_sample_file_loads_or_is_rejected_clearly() {
    let Some(dir) = data_dir() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 11, "the 11 files of SOURCES.md");
    for path in &files {
        let name = path.file_name().unwrap().to_str().unwrap();
        match sniff_format(path).unwrap() {
            Some(PluginFormat::Inspector) => {
                let (t, r) = inspector::load_path(path, &opts()).unwrap_or_else(|e| panic!("{e}"));
                check_invariants(&t);
                assert!(r.ops > 0 && r.ops as usize == t.n_ops(), "{name}");
                assert_eq!(r.skipped(), 0, "{name}: {:?}", r.problems());
                eprintln!("{name}: inspector, {} ops on {} ranks", r.ops, t.devices.len());
            }
            Some(PluginFormat::ExamplePlugin) => {
                let (t, r) = example_plugin::load_path(path, &opts()).unwrap_or_else(|e| panic!("{e}"));
                check_invariants(&t);
                assert!(r.ops > 0 && r.ops as usize == t.n_ops(), "{name}");
                eprintln!("{name}: example plugin, {} ops, problems {:?}", r.ops, r.problems());
            }
            None => {
                assert!(name.ends_with("exporter-output.log"), "{name} was not recognized");
                let e = inspector::load_path(path, &opts()).unwrap_err();
                let msg = e.to_string();
                assert!(matches!(e, PluginError::NotPluginOutput { .. }));
                assert!(msg.contains(name) && msg.contains("no JSON object in 149 line(s)"), "{msg}");
                assert!(msg.contains("line 1: byte 0: expected a JSON object, got `2025-12-22 20:39:24,862"), "{msg}");
                let e = example_plugin::load_path(path, &opts()).unwrap_err();
                assert!(e.to_string().contains("not an NCCL example-profiler-plugin trace"), "{e}");
            }
        }
    }
}

#[test]
fn inspector_four_ranks_golden() {
    let Some(dir) = data_dir() else { return };
    let paths: Vec<PathBuf> = INSPECTOR_RANKS.iter().map(|f| dir.join(f.0)).collect();
    let (t, reports) = inspector::load_paths(&paths, &opts()).unwrap();
    check_invariants(&t);
    assert_eq!((t.processes.len(), t.devices.len(), t.comms.len()), (4, 4, 4));
    // One communicator, found by its hash, whose members are the four ranks.
    assert_eq!(t.logical.len(), 1);
    let l = &t.logical[0];
    assert_eq!((l.comm_id, l.nranks, l.members.len(), l.grouping), (Some(0x0014_1f97_1a04_5e44), 4, 4, Grouping::CommId));
    for ((file, rank, records, byte_sum), r) in INSPECTOR_RANKS.iter().zip(&reports) {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let raw = text.as_bytes();
        // Independent counts over the raw text.
        assert_eq!(count(raw, "\"coll_perf\":"), *records);
        assert_eq!(count(raw, "\"id\":\"0x141f971a045e44\""), *records, "every record names the shared comm hash");
        assert_eq!(count(raw, "\"coll\":\"AllReduce\""), *records);
        assert_eq!(count(raw, "\"coll_algo\":"), 0, "v4.0 logs no algorithm");
        assert_eq!(numbers_after(&text, "\"rank\":"), vec![*rank as u64; *records]);
        let sizes = numbers_after(&text, "\"coll_msg_size_bytes\":");
        let execs = numbers_after(&text, "\"coll_exec_time_us\":");
        let sns = numbers_after(&text, "\"coll_sn\":");
        let dumps = numbers_after(&text, "\"dump_timestamp_us\":");
        assert_eq!(sizes.iter().sum::<u64>(), *byte_sum);

        assert_eq!((r.records, r.ops, r.skipped(), r.lines), (*records as u64, *records as u64, 0, *records as u64));
        assert_eq!((r.gpu_spans, r.gpu_spans_at_dump_time), (*records as u64, *records as u64));
        assert_eq!(r.timing_sources.count_of("kernel_gpu"), *records as u64);
        let c = t.comms.iter().find(|c| c.rank == Some(*rank)).unwrap();
        let d = c.device.unwrap();
        assert_eq!(t.devices[d.ix()].global_rank, Some(*rank), "global rank = Inspector rank");
        assert_eq!(t.processes[c.proc.ix()].host, "stone");
        assert_eq!((c.nranks, c.n_nodes), (Some(4), Some(1)));
        let ops = &t.per_rank[d.ix()].to_vec();
        assert_eq!(ops.len(), *records);
        // Rows in completion order = file order here: sizes, seq, timing match record by record.
        assert_eq!(ops.iter().map(|o| o.bytes).collect::<Vec<_>>(), sizes);
        assert_eq!(ops.iter().map(|o| o.seq).collect::<Vec<_>>(), sns);
        assert!(ops.iter().all(|o| o.kind == OpKind::AllReduce
            && o.dtype == DataType::Uint8
            && o.algo.is_none()
            && o.proto.is_none()));
        for ((o, x), dump) in ops.iter().zip(&execs).zip(&dumps) {
            let g = o.gpu.unwrap();
            assert_eq!((g.end_ns, g.end_ns - g.start_ns), (*dump as i64 * 1000, *x as i64 * 1000));
        }
        assert!(ops.windows(2).all(|w| w[0].gpu.unwrap().end_ns <= w[1].gpu.unwrap().end_ns));
        let mut distinct = sizes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!((distinct.len(), distinct[0], distinct[distinct.len() - 1]), (21, 4096, 4 << 30));
        assert_eq!(*sns.iter().max().unwrap(), 2351);
    }
}

#[test]
fn inspector_readme_examples() {
    let Some(dir) = data_dir() else { return };
    let one = |f: &str| {
        let (t, r) = inspector::load_path(&dir.join(f), &opts()).unwrap();
        assert_eq!((r.records, r.ops, r.skipped()), (1, 1, 0));
        t.per_rank[0].op(0).clone()
    };
    let a = one("nccl-master-inspector-README-coll_perf-example.json");
    assert_eq!((a.kind, a.bytes, a.seq), (OpKind::AllReduce, 17_179_869_184, 1407));
    let g = a.gpu.unwrap();
    assert_eq!((g.end_ns, g.end_ns - g.start_ns), (1_748_030_377_748_202_000, 61_974_000));
    let v = one("nccl-master-inspector-README-coll_perf-verbose-example.json");
    assert_eq!((v.kind, v.bytes, v.channels), (OpKind::ReduceScatter, 2_147_483_648, Some((0, 0))));
    assert_eq!(v.gpu.map(|g| (g.start_ns, g.end_ns)), Some((1_752_867_229_235_181_000, 1_752_867_229_275_811_000)));
    assert_eq!(v.cpu_ts_ns, Some(1_752_867_229_235_059_000));
    let (t, _) = inspector::load_path(
        &dir.join("nccl-master-inspector-exporter-README-expected-32rank-4node-example.json"),
        &opts(),
    )
    .unwrap();
    let c = &t.comms[0];
    assert_eq!((c.rank, c.nranks, c.n_nodes, t.per_rank[0].op(0).bytes), (Some(31), Some(32), Some(4), 65536));
}

/// Operations of the 4-rank ring dump, computed independently from the raw
/// lines: (line, rank, peer, kind, start clocks of the KernelCh lines that
/// follow up to the op's end line).
fn ring_ops_from_text(text: &str) -> Vec<(u64, u64, u64, OpKind, Vec<u64>)> {
    let mut out: Vec<(u64, u64, u64, OpKind, Vec<u64>)> = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        if line.contains("\"cat\": \"P2P\", \"ph\": \"b\"") {
            let kind = if line.starts_with("{\"name\": \"Send\"") { OpKind::Send } else { OpKind::Recv };
            let rank = numbers_after(line, "\"Rank\": ")[0];
            let peer = numbers_after(line, "\"Peer\": ")[0];
            out.push((i as u64 + 1, rank, peer, kind, Vec::new()));
            open = true;
        } else if line.contains("\"cat\": \"P2P\", \"ph\": \"e\"") {
            open = false;
        } else if open && line.contains("\"name\": \"KernelCh\", \"cat\": \"GPU\", \"ph\": \"b\"") {
            out.last_mut().unwrap().4.push(numbers_after(line, "\"StartGpuClk\": ")[0]);
        }
    }
    out
}

#[test]
fn example_plugin_ring_dump_golden() {
    let Some(dir) = data_dir() else { return };
    let path = dir.join(RING_DUMP);
    let text = std::fs::read_to_string(&path).unwrap();
    let raw = text.as_bytes();
    let expected = ring_ops_from_text(&text);
    assert_eq!(expected.len(), 8);
    assert_eq!(count(raw, "\"cat\": \"P2P\", \"ph\": \"b\""), 8);
    assert_eq!(count(raw, "\"name\": \"KernelCh\", \"cat\": \"GPU\", \"ph\": \"b\""), 128);
    assert_eq!(count(raw, "\"StopGpuClk\": 0}"), 128, "no kernel stop clock in this dump (nccl PR #1973)");

    let (t, r) = example_plugin::load_path(&path, &opts()).unwrap();
    check_invariants(&t);
    assert_eq!((r.records, r.ops, r.skipped(), r.empty_objects), (count(raw, "\"cat\": ") as u64, 8, 0, 1));
    assert_eq!(r.repaired_objects as usize, count(raw, "\"Stream\": 0x"), "unquoted values are tolerated");
    assert_eq!((r.gpu_spans, r.gpu_stop_missing, r.unmatched_ends, r.unclosed_ops), (0, 8, 0, 0));
    // One process driving 4 GPUs: 4 devices, one communicator of 4 ranks.
    assert_eq!((t.processes.len(), t.devices.len()), (1, 4));
    assert_eq!(t.processes[0].pid, 3_937_375);
    assert_eq!(t.logical.len(), 1);
    assert_eq!((t.logical[0].comm_id, t.logical[0].members.len()), (Some(12_715_772_615_376_301_750), 4));
    for (d, ops) in t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        let rank = t.comms[ops[0].comm.ix()].rank.unwrap();
        assert_eq!(t.devices[d].global_rank, Some(rank));
        assert_eq!(t.devices[d].cuda_dev, Some(rank), "k-th rank seen in the process = k-th GPU");
        let kinds: Vec<OpKind> = ops.iter().map(|o| o.kind).collect();
        assert_eq!(kinds, [OpKind::Send, OpKind::Recv], "rank {rank}: one Send then one Recv");
        for o in ops {
            let e = expected.iter().find(|e| e.0 == o.line).unwrap();
            assert_eq!((e.1, e.2, e.3), (rank as u64, o.peer.unwrap() as u64, o.kind));
            assert_eq!((o.count, o.dtype, o.bytes), (268_435_456, DataType::Float32, 1 << 30));
            assert_eq!((o.channels, o.gpu), (Some((16, 31)), None));
            assert!(o.cpu_ts_ns.is_some());
        }
        // Ring: Send to rank+1, Recv from rank-1.
        assert_eq!((ops[0].peer, ops[1].peer), (Some((rank + 1) % 4), Some((rank + 3) % 4)));
    }
    // GPU timing: the start clock of every op (earliest of its 16 channels) survives.
    let mut ops: Vec<TraceOp> = Vec::new();
    example_plugin::read_ops(&path, raw, &opts(), &mut |o| ops.push(o)).unwrap();
    for (o, e) in ops.iter().zip(&expected) {
        assert_eq!((o.line, o.kernel_channels as usize), (e.0, e.4.len()));
        assert_eq!(o.gpu_start_ns, Some(*e.4.iter().min().unwrap() as i64));
        assert!(o.gpu_stop_missing && o.gpu_stop_ns.is_none() && o.gpu_span().is_none());
    }
}

#[test]
fn example_plugin_readme_excerpts() {
    let Some(dir) = data_dir() else { return };
    let (t, r) =
        example_plugin::load_path(&dir.join("nccl-master-plugins-profiler-example-README-trace-excerpt.txt"), &opts())
            .unwrap();
    assert_eq!(r.ops, 1);
    // `{“name": …`: the typographic quote shifts the quote parity, so the
    // event never closes; the next event in column 0 shows it was cut.
    assert_eq!(r.malformed.count_of("broken event"), 1, "the line with a typographic quote");
    assert_eq!(r.malformed.count_of("text outside any event"), 1, "the 'trace truncated' line");
    assert!(
        r.problems()
            .iter()
            .any(|p| p.contains("-trace-excerpt.txt:11: broken event: byte 1615: a new object starts in column 0")),
        "{:?}",
        r.problems()
    );
    assert_eq!((r.unmatched_ends, r.unclosed_ops), (1, 1), "its end event was cut out");
    let o = &t.per_rank[0].op(0);
    assert_eq!(
        (o.kind, o.seq, o.bytes, o.algo.unwrap().name(), o.proto.unwrap().name()),
        (OpKind::AllReduce, 0, 1 << 20, "RING", "SIMPLE")
    );
    assert_eq!(o.gpu.map(|g| (g.start_ns, g.end_ns)), Some((1_756_135_989_724_672_000, 1_756_135_989_732_831_232)));

    let (t, r) =
        example_plugin::load_path(&dir.join("nccl-v2.25.1-ext-profiler-example-README-trace-excerpt.txt"), &opts())
            .unwrap();
    assert_eq!((r.ops, r.unmatched_ends, r.unclosed_ops, r.skipped()), (1, 0, 0, 1));
    let o = &t.per_rank[0].op(0);
    assert_eq!((t.comms[0].rank, o.count, o.channels, o.gpu), (Some(1), 32768, Some((0, 1)), None));
    assert_eq!(o.proto.unwrap().name(), "LL");
}

#[test]
fn malformed_lines_are_counted_and_good_records_kept() {
    let Some(dir) = data_dir() else { return };
    let text = std::fs::read_to_string(dir.join(INSPECTOR_RANKS[0].0)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = &lines[5][..lines[5].len() / 2];
    let inserts: [(usize, String); 5] = [
        (3, cut.to_string()),
        (10, "### not json at all".into()),
        (
            500,
            r#"{"header":{"id":"0x1","rank":0},"coll_perf":{"coll":"AllReduce","coll_sn":5,"coll_msg_size_bytes": }}"#
                .into(),
        ),
        (900, r#"{"header":{"id":"0x141f971a045e44","rank":0},"coll_perf":{"coll":"AllReduce","coll_sn":5}}"#.into()),
        (1500, r#"{"header":{"rank":0},"coll_perf":{"coll":"AllReduce","coll_sn":5,"coll_msg_size_bytes":8}}"#.into()),
    ];
    let mut out = String::new();
    let mut bad_lines = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some((_, bad)) = inserts.iter().find(|x| x.0 == i) {
            out.push_str(bad);
            out.push('\n');
            bad_lines.push(out.lines().count() as u64);
        }
        out.push_str(l);
        out.push('\n');
    }
    let path = temp_file("malformed.jsonl", out.as_bytes());
    let (t, r) = inspector::load_path(&path, &opts()).unwrap();
    check_invariants(&t);
    assert_eq!(r.ops as usize, lines.len(), "every good record kept");
    assert_eq!(r.skipped(), 5);
    assert_eq!(r.malformed.count_of("broken object"), 1);
    assert_eq!(r.malformed.count_of("text outside any JSON object"), 1);
    assert_eq!(r.malformed.count_of("invalid JSON"), 1);
    assert_eq!(r.malformed.count_of("missing field"), 2);
    let problems = r.problems();
    for l in &bad_lines {
        assert!(
            problems.iter().any(|p| p.starts_with(&format!("{}:{l}: ", path.display()))),
            "line {l} in {problems:?}"
        );
    }
    assert!(problems.iter().any(|p| p.contains("coll_perf.coll_msg_size_bytes: expected the message size")));
    assert!(problems.iter().any(|p| p.contains("header.id: expected the communicator hash")));

    // The same for the example plugin: a cut event and a stray line.
    let text = std::fs::read_to_string(dir.join(RING_DUMP)).unwrap();
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        if i == 300 {
            out.push_str("garbage\n");
            out.push_str(&l[..20]);
            out.push('\n');
        }
        out.push_str(l);
        out.push('\n');
    }
    let path2 = temp_file("malformed.txt", out.as_bytes());
    let (t, r) = example_plugin::load_path(&path2, &opts()).unwrap();
    assert_eq!(
        (t.n_ops(), r.malformed.count_of("broken event"), r.malformed.count_of("text outside any event")),
        (8, 1, 1)
    );
    let problems = r.problems();
    assert!(
        problems.iter().any(|p| p.starts_with(&format!("{}:301: text outside any event: byte ", path2.display()))),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with(&format!("{}:302: broken event: byte ", path2.display()))),
        "{problems:?}"
    );
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path2);
}

#[test]
fn truncated_files_do_not_panic() {
    let Some(dir) = data_dir() else { return };
    for (name, inspector_format) in [(INSPECTOR_RANKS[1].0, true), (RING_DUMP, false)] {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let step = (bytes.len() / 97).max(1);
        let mut last_ops = 0;
        for end in (0..bytes.len()).step_by(step).chain([bytes.len() - 1]) {
            let part = &bytes[..end];
            let res = if inspector_format {
                inspector::read_records(Path::new(name), part, &opts(), &mut |_| {})
            } else {
                example_plugin::read_ops(Path::new(name), part, &opts(), &mut |_| {})
            };
            match res {
                Ok(r) => {
                    assert!(r.ops >= last_ops, "more input never gives fewer ops");
                    last_ops = r.ops;
                    assert!(r.skipped() <= 1, "at most the cut object: {:?}", r.problems());
                }
                Err(e) => assert!(matches!(e, PluginError::NotPluginOutput { .. }) && end < 2000, "{end}: {e}"),
            }
        }
        // A truncated file still makes a consistent table.
        let path = temp_file("truncated", &bytes[..bytes.len() * 2 / 3]);
        let t = if inspector_format {
            inspector::load_path(&path, &opts()).unwrap().0
        } else {
            example_plugin::load_path(&path, &opts()).unwrap().0
        };
        check_invariants(&t);
        assert!(t.n_ops() > 0);
        let _ = std::fs::remove_file(path);
    }
}

fn pieces(input: &[u8], max: usize) -> Vec<String> {
    let mut sp = ObjectSplitter::new(input, max);
    let mut out = Vec::new();
    while let Some(p) = sp.next_piece().unwrap() {
        out.push(match p {
            Piece::Object { bytes, line, .. } => format!("O{line}:{}", String::from_utf8_lossy(bytes)),
            Piece::Broken { line, .. } => format!("B{line}"),
            Piece::Stray { line, sample, .. } => format!("S{line}:{sample}"),
        });
    }
    out
}

/// The splitter on its own: arrays, JSON lines, pretty-printed objects,
/// strings holding braces, stray text, cut, overlong and truncated objects.
#[test]
fn splitter_finds_objects_and_resyncs() {
    let got = pieces(b"[\n{\"a\": 1},\n{\"b\": {\"c\": \"}\\\"\"}},\n{}]", 1024);
    assert_eq!(got, ["O2:{\"a\": 1}", "O3:{\"b\": {\"c\": \"}\\\"\"}}", "O4:{}"]);
    assert_eq!(pieces(b"{\n  \"x\": {\n    \"y\": 2\n  }\n}\n{\"z\":3}\n", 1024).len(), 2);
    assert_eq!(pieces(b" ... [ cut ]\n{\"a\":1}", 1024), ["S1:... [ cut ]", "O2:{\"a\":1}"]);
    let got = pieces(b"{\"a\": 1, \"b\": \"xy\n{\"a\": 2}\n{\"a\": {\"b\": 3\n{\"a\": 4}\n{\"a\"", 1024);
    assert_eq!(got, ["B1", "O2:{\"a\": 2}", "B3", "O4:{\"a\": 4}", "B5"]);
    let big = format!("{{\"a\": \"{}\"}}\n{{\"b\": 1}}", "x".repeat(5000));
    assert_eq!(pieces(big.as_bytes(), 1000), ["B1", "O2:{\"b\": 1}"]);
    // Objects spanning the splitter's 256 KiB chunks.
    let many: String = (0..40_000).map(|i| format!("{{\"i\": {i}, \"pad\": \"{}\"}},\n", "y".repeat(i % 50))).collect();
    let got = pieces(many.as_bytes(), 1024);
    assert_eq!((got.len(), got[39_999].starts_with("O40000:{\"i\": 39999,")), (40_000, true));
}

#[test]
fn bare_words_are_quoted() {
    let src = br#"{"datatype": ncclFloat32, "Stream": 0x50, "n": -1.5e3, "ok": true, "s": "a \"b\" c"}"#;
    let (v, repaired) = parse_lenient(src, &mut Vec::new()).unwrap();
    assert!(repaired);
    assert_eq!(v["datatype"], "ncclFloat32");
    assert_eq!(as_u64(&v["Stream"]), Some(0x50));
    assert_eq!((v["n"].as_f64(), v["ok"].as_bool(), v["s"].as_str()), (Some(-1500.0), Some(true), Some("a \"b\" c")));
    assert!(!parse_lenient(br#"{"a": 1}"#, &mut Vec::new()).unwrap().1, "strict JSON needs no repair");
    assert!(parse_lenient(b"{\xe2\x80\x9cname\": 1}", &mut Vec::new()).is_err(), "a typographic quote stays an error");
    assert!(parse_lenient(br#"{"a": 01}"#, &mut Vec::new()).unwrap().0["a"] == "01", "not a JSON number: quoted");
}
