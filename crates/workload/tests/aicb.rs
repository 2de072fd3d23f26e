//! The AICB / SimAI workload reader on every real file and on hostile input.
//!
//! Every file of `../shared/data/real/workloads` and `../shared/data/baselines/simai-1.6/workloads`
//! either parses, with rows, GA, TP and communicated bytes per group kind checked against an
//! independent count of the file's fields, or fails with an error naming the file and the format
//! expected. Hostile inputs (empty, header only, bad numbers, short rows, sizes that do not fit,
//! random cuts and byte flips) give errors, never panics.

use commlens_core::OpKind;
use commlens_workload::aicb::{self, AicbOptions};
use commlens_workload::{GroupKind, GroupSel, Program, Work, Workload};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn dirs() -> Vec<PathBuf> {
    let Some(real) = commlens_testdata::real_dir("workloads") else { return Vec::new() };
    let mut v = vec![real];
    let base = commlens_testdata::real_root().join("../baselines/simai-1.6/workloads");
    if base.is_dir() {
        v.push(base);
    } else if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("SimAI baselines not found at {} (required under CI=true)", base.display());
    }
    v
}

fn is_aicb_text(name: &str) -> bool {
    name.ends_with(".txt")
        && (name.starts_with("aicb-simAI-") || name.starts_with("simai-example-") || name.contains("-g"))
        && !name.contains("aiob")
}

/// Independent reading: header keys by regex-free token scan, rows by whitespace split.
struct Expect {
    rows: usize,
    tp: u32,
    ga: u32,
    /// Bytes per group label as the file states them (whole buffers).
    bytes: BTreeMap<&'static str, u64>,
    comms: usize,
}

fn expect(text: &str) -> Expect {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let toks: Vec<String> = lines[0].split_whitespace().map(|t| t.trim_end_matches(':').to_string()).collect();
    let key = |k: &str| toks.iter().position(|t| t == k).and_then(|i| toks.get(i + 1)).and_then(|v| v.parse().ok());
    let mut bytes = BTreeMap::new();
    let mut comms = 0;
    let rows = &lines[2..];
    for r in rows {
        let f: Vec<&str> = r.split_whitespace().collect();
        for (t, s, default) in [(3, 4, "TP"), (6, 7, "TP"), (9, 10, "DP")] {
            if f[t] == "NONE" {
                continue;
            }
            comms += 1;
            let label = if f[t].ends_with("_DP_EP") {
                "DP_EP"
            } else if f[t].ends_with("_EP") {
                "EP"
            } else {
                default
            };
            *bytes.entry(label).or_insert(0) += f[s].parse::<u64>().unwrap();
        }
    }
    Expect {
        rows: rows.len(),
        tp: key("model_parallel_NPU_group").unwrap_or(1),
        ga: key("ga").unwrap_or(1),
        bytes,
        comms,
    }
}

/// Whole-buffer bytes per group label of the workload's program (AG/RS counts are per rank).
fn program_bytes(w: &Workload) -> (BTreeMap<&'static str, u64>, usize, u64) {
    let mut out = BTreeMap::new();
    let mut n_ops = 0;
    let mut slack = 0;
    for t in &w.program_of(0).tasks {
        if let Work::Coll(c) = &t.work {
            n_ops += 1;
            let n = w.group_of(0, c.group).map_or(1, |g| w.group(g).ranks.len() as u64);
            let whole = match c.kind {
                OpKind::AllGather | OpKind::ReduceScatter => {
                    slack += n;
                    c.bytes() * n
                }
                _ => c.bytes(),
            };
            *out.entry(c.group.kind.label()).or_insert(0) += whole;
        }
    }
    (out, n_ops, slack)
}

fn check_parsed(path: &Path, text: &str, w: &Workload, info: &aicb::AicbInfo) {
    let e = expect(text);
    let what = path.display();
    w.validate().unwrap_or_else(|m| panic!("{what}: {m}"));
    assert_eq!(info.rows.len(), e.rows, "{what}: rows");
    assert_eq!(info.tp, e.tp, "{what}: TP");
    assert_eq!(info.ga, e.ga, "{what}: GA");
    let (got, n_ops, slack) = program_bytes(w);
    assert_eq!(n_ops, e.comms, "{what}: collectives");
    for (k, &v) in &e.bytes {
        let g = got.get(k).copied().unwrap_or(0);
        assert!(g <= v && v - g <= slack, "{what}: {k} bytes {g} vs file {v}");
    }
    assert!(w.representative.iter().enumerate().all(|(r, &p)| p == 0 || p as usize == r), "{what}: representatives");
    let tp0 = w.group_of(0, GroupSel::of(GroupKind::Tp)).unwrap();
    assert_eq!(w.group(tp0).ranks, (0..info.tp).collect::<Vec<_>>(), "{what}: TP group of rank 0");
}

#[test]
fn every_real_file_parses_or_names_the_format() {
    let mut parsed = 0;
    let mut refused = 0;
    for dir in dirs() {
        let mut files: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
        files.sort();
        for path in files {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let plain = aicb::load_with_info(&path, &AicbOptions::default());
            if !is_aicb_text(&name) {
                let e = plain.expect_err(&name);
                let msg = e.to_string();
                assert!(msg.contains(&*path.display().to_string()), "{name}: error names the file: {msg}");
                assert!(msg.contains("AICB/SimAI workload text format"), "{name}: error names the format: {msg}");
                println!("refused {name}: {msg}");
                refused += 1;
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Files without `all_gpus` need a GPU count; SimAI's own runs used 128 and more.
            let (w, info) = match plain {
                Ok(x) => x,
                Err(e) => {
                    assert!(e.to_string().contains("all_gpus"), "{name}: {e}");
                    aicb::load_with_info(&path, &AicbOptions { gpus: Some(128), ..Default::default() })
                        .unwrap_or_else(|e| panic!("{e}"))
                }
            };
            check_parsed(&path, &text, &w, &info);
            println!("parsed {name}: {} rows, {} ranks, notes: {:?}", info.rows.len(), w.world, w.notes);
            parsed += 1;
        }
    }
    if parsed + refused > 0 {
        assert!(parsed >= 6, "expected the AICB/SimAI text files to parse, got {parsed}");
        assert!(refused >= 5, "expected the other formats to be refused, got {refused}");
    }
}

#[test]
fn simai_gpu_counts_that_do_not_divide() {
    let Some(dir) = commlens_testdata::real_dir("workloads") else { return };
    let path = dir.join("simai-example-workload_analytical.txt");
    let strict = aicb::load(&path, &AicbOptions { gpus: Some(128), ..Default::default() }).unwrap_err();
    assert!(strict.to_string().contains("does not divide"), "{strict}");
    assert_eq!(strict.line, 1);
    let compat = AicbOptions { gpus: Some(128), gpus_per_node: Some(8), simai_compat: true };
    let (w, info) = aicb::load_with_info(&path, &compat).unwrap();
    w.validate().unwrap();
    assert_eq!((info.tp, info.pp, info.ep, info.dp, info.dp_ep), (2, 12, 16, 5, 0));
    assert!(w.notes.iter().any(|n| n.contains("truncated")), "{:?}", w.notes);
    assert_eq!(w.representative_of(127), 127, "idle ranks represent themselves");
    assert!(w.program_of(127).tasks.is_empty());
    let ep0 = w.group_of(0, GroupSel::of(GroupKind::Ep)).unwrap();
    assert_eq!(w.group(ep0).ranks.len(), 16);
    // 9216 GPUs divide: no notes about truncation, DP_EP 24.
    let (_, info) = aicb::load_with_info(&path, &AicbOptions::default()).unwrap();
    assert_eq!(
        (info.world, info.dp, info.dp_ep, info.vpp, info.ga, info.pp_comm_bytes),
        (9216, 384, 24, 8, 24, 50331648)
    );
}

#[test]
fn groups_follow_the_layout() {
    let text = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 2 pp: 2 vpp: 1 ga: 1 all_gpus: 16\n2\n\
                a -1 10 ALLTOALL_EP 64 20 ALLREDUCE 1048576 30 ALLGATHER_DP_EP 4096 100\n\
                b -1 10 ALLGATHER 2097152 20 NONE 0 30 REDUCESCATTER 8192 100\n";
    let w = aicb::parse(text, "t", &AicbOptions::default()).unwrap();
    w.validate().unwrap();
    let of = |r: u32, k: GroupKind| w.group(w.group_of(r, GroupSel::of(k)).unwrap()).ranks.clone();
    assert_eq!(of(0, GroupKind::Tp), vec![0, 1]);
    assert_eq!(of(0, GroupKind::Pp), vec![0, 2]);
    assert_eq!(of(0, GroupKind::Dp), vec![0, 4, 8, 12]);
    assert_eq!(of(0, GroupKind::Ep), vec![0, 4]);
    assert_eq!(of(0, GroupKind::DpEp), vec![0, 8]);
    assert_eq!(of(5, GroupKind::Dp), vec![1, 5, 9, 13]);
    // Program: fwd a, fwd b, then b and a backward (ig, wg); phases set.
    let p: &Program = w.program_of(0);
    let names: Vec<String> = p
        .tasks
        .iter()
        .map(|t| match &t.work {
            Work::Compute(c) => c.name.clone(),
            Work::Coll(c) => format!("{:?} {}", c.kind, c.group.kind.label()),
            _ => "end".into(),
        })
        .collect();
    assert_eq!(
        names,
        [
            "a fwd",
            "AllToAll EP",
            "b fwd",
            "AllGather TP",
            "b ig",
            "b wg",
            "ReduceScatter DP",
            "a ig",
            "AllReduce TP",
            "a wg",
            "AllGather DP_EP",
            "end"
        ]
    );
    assert!(p.tasks.iter().all(|t| t.stream == commlens_workload::Stream::Compute));
}

fn parse_err(text: &str) -> aicb::AicbError {
    match aicb::parse(text, "hostile", &AicbOptions { gpus: Some(8), ..Default::default() }) {
        Ok(w) => panic!("accepted: {text:?} → {} ranks", w.world),
        Err(e) => e,
    }
}

#[test]
fn hostile_inputs_are_errors() {
    let h = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8";
    let row = "l -1 1 ALLREDUCE 4096 1 NONE 0 1 NONE 0 1";
    for (text, want_line, want) in [
        ("", 0, "empty"),
        ("   \n\n", 0, "empty"),
        (h, 1, "header only"),
        (&format!("{h}\nx\n{row}"), 2, "number of rows"),
        (&format!("{h}\n1\nl -1 1 ALLREDUCE big 1 NONE 0 1 NONE 0 1"), 3, "fp_comm_size"),
        (&format!("{h}\n1\nl -1 1 ALLREDUCE 4096 1 NONE 0 1 NONE 0"), 3, "12 fields"),
        (&format!("{h}\n1\nl -1 1 ALLSHUFFLE 4096 1 NONE 0 1 NONE 0 1"), 3, "unknown communication type"),
        (&format!("{h}\n3\n{row}"), 0, "declares 3 rows"),
        (&format!("HYBRID model_parallel_NPU_group: 3 all_gpus: 8\n1\n{row}"), 1, "does not divide"),
        (&format!("HYBRID model_parallel_NPU_group: 64 all_gpus: 8\n1\n{row}"), 1, "exceeds"),
        (&format!("HYBRID model_parallel_NPU_group: 0 all_gpus: 8\n1\n{row}"), 1, "is 0"),
        (&format!("HYBRID model_parallel_NPU_group: 2 ep: 3 all_gpus: 8\n1\n{row}"), 1, "EP 3 does not divide"),
        (&format!("HYBRID model_parallel_NPU_group: two\n1\n{row}"), 1, "non-negative integer"),
        (&format!("HYBRID model_parallel_NPU_group:\n1\n{row}"), 1, "has no value"),
        ("comm_type,comm_group,msg_size\nCommType.all_reduce,dp,4096\n", 1, "physical-run"),
    ] {
        let e = parse_err(text);
        assert_eq!(e.line, want_line, "{text:?}: {e}");
        assert!(e.to_string().contains(want), "{text:?}: {e}");
        assert!(e.to_string().starts_with("hostile"), "{e}");
    }
    // all_gpus 0 in the header (no GPU count given), and a 0 GPU count given.
    let e = aicb::parse(&format!("HYBRID all_gpus: 0\n1\n{row}"), "z", &AicbOptions::default()).unwrap_err();
    assert!(e.to_string().contains("all_gpus` is 0"), "{e}");
    let e =
        aicb::parse(&format!("{h}\n1\n{row}"), "z", &AicbOptions { gpus: Some(0), ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("is 0"), "{e}");
    // Absurd GPU counts are refused before anything per rank is allocated.
    let e = aicb::parse(&format!("HYBRID all_gpus: 4000000000\n1\n{row}"), "z", &AicbOptions::default()).unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
    // A huge declared row count with few rows is an error, not an allocation.
    assert!(parse_err(&format!("{h}\n18446744073709551615\n{row}")).to_string().contains("declares"));
}

#[test]
fn short_headers_are_filled_with_notes() {
    let row = "l -1 1000 ALLREDUCE 4096 1 NONE 0 1 ALLGATHER 8192 1";
    let w =
        aicb::parse(&format!("MICRO\n1\n{row}"), "m", &AicbOptions { gpus: Some(16), ..Default::default() }).unwrap();
    assert_eq!(w.world, 16);
    for key in ["model_parallel_NPU_group", "vpp", "ga", "all_gpus"] {
        assert!(w.notes.iter().any(|n| n.contains(key)), "no note for {key}: {:?}", w.notes);
    }
    let w = aicb::parse(&format!("1\n{row}"), "m", &AicbOptions { gpus: Some(4), ..Default::default() }).unwrap();
    assert!(w.notes.iter().any(|n| n.contains("no header")), "{:?}", w.notes);
    // Colons optional, tabs, inline `key:value`, extra rows noted.
    let w = aicb::parse(
        &format!("P\tmodel_parallel_NPU_group 2\tall_gpus:8 pp_comm 64 foo: 3\n1\n{row}\n{row}\n"),
        "m",
        &AicbOptions::default(),
    )
    .unwrap();
    assert_eq!(w.world, 8);
    assert_eq!(w.group(w.group_of(0, GroupSel::of(GroupKind::Tp)).unwrap()).ranks, vec![0, 1]);
    assert!(
        w.notes.iter().any(|n| n.contains("foo")) && w.notes.iter().any(|n| n.contains("ignored")),
        "{:?}",
        w.notes
    );
}

#[test]
fn cut_and_flipped_files_never_panic() {
    let Some(dir) = commlens_testdata::real_dir("workloads") else { return };
    let text = std::fs::read_to_string(
        dir.join("aicb-simAI-model_workload-G13B-M1-C02_GPT13B_megatron_tp8_pp1_mbs1_sp_A100.txt"),
    )
    .unwrap();
    let bytes = text.as_bytes();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let opts = AicbOptions { gpus: Some(64), ..Default::default() };
    for i in 0..400 {
        let mut b = bytes.to_vec();
        if i % 2 == 0 {
            b.truncate((next() % bytes.len() as u64) as usize);
        }
        for _ in 0..(next() % 6) {
            let at = (next() % b.len().max(1) as u64) as usize;
            if at < b.len() {
                let pool = b"0123456789 \t\n:-_AEZ,x";
                b[at] = pool[(next() % pool.len() as u64) as usize];
            }
        }
        let s = String::from_utf8_lossy(&b);
        if let Ok(w) = aicb::parse(&s, "mut", &opts) {
            w.validate().unwrap();
        }
    }
}
