//! Every real Kineto trace in ../shared/data/real/kineto loads, with golden
//! figures per file: rank, world size, NCCL kernels by kind, CPU-side
//! collectives and CPU op ↔ kernel pairs. Kernel and `record_param_comms`
//! counts are also checked against plain substring counts of the
//! decompressed JSON, and the pair counts were computed independently (from
//! the traces' `ac2g` flow events rather than their launch calls). The
//! 8-rank tar.gz is unpacked with a small tar reader into a temp folder and
//! read back as plain `.json` files.

use commlens_core::{DataType, OpKind};
use commlens_ingest::kineto::{self, KernelTrace, LinkVia, TraceOptions};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

fn kineto_dir() -> Option<PathBuf> {
    commlens_testdata::real_dir("kineto")
}

fn decompressed(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut out).unwrap();
        out
    } else {
        raw
    }
}

fn count(hay: &[u8], needle: &str) -> usize {
    memchr::memmem::find_iter(hay, needle.as_bytes()).count()
}

/// Unpacks the regular files of a (gzipped) ustar/GNU tar into `dest`.
fn untar(archive: &Path, dest: &Path) -> Vec<PathBuf> {
    let data = decompressed(archive);
    let mut out = Vec::new();
    let (mut pos, mut long_name) = (0usize, None::<String>);
    while pos + 512 <= data.len() {
        let h = &data[pos..pos + 512];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let field = |a: usize, b: usize| {
            let f = &h[a..b];
            String::from_utf8_lossy(&f[..f.iter().position(|&c| c == 0).unwrap_or(f.len())]).into_owned()
        };
        let size = usize::from_str_radix(field(124, 136).trim(), 8).unwrap();
        let body = &data[pos + 512..pos + 512 + size];
        let mut name = field(0, 100);
        if &h[257..262] == b"ustar" && h[345] != 0 {
            name = format!("{}/{name}", field(345, 500));
        }
        match h[156] {
            b'L' => long_name = Some(String::from_utf8_lossy(body).trim_end_matches('\0').to_string()),
            b'0' | 0 => {
                let name = long_name.take().unwrap_or(name);
                let file = dest.join(Path::new(&name).file_name().unwrap());
                std::fs::write(&file, body).unwrap();
                out.push(file);
            }
            _ => long_name = None,
        }
        pos += 512 + size.div_ceil(512) * 512;
    }
    out.sort();
    out
}

struct Golden {
    file: &'static str,
    rank: Option<u32>,
    world: Option<u32>,
    kernels: &'static [(OpKind, usize)],
    cpu_ops: usize,
    pairs: usize,
    via: LinkVia,
}

const GOLDEN: &[Golden] = &[
    Golden {
        file: "hta-nccl_parser_config-nccl_data-rank0of2-A100-nccl2.17.1.json.gz",
        rank: Some(0),
        world: Some(2),
        kernels: &[(OpKind::AllReduce, 15), (OpKind::Broadcast, 6)],
        cpu_ops: 27,
        pairs: 21,
        via: LinkVia::ExternalId,
    },
    Golden {
        file: "hta-trace_diff-control-rank3of8-A100.json.gz",
        rank: Some(3),
        world: Some(8),
        kernels: &[(OpKind::AllReduce, 18), (OpKind::SendRecv, 42)],
        cpu_ops: 102,
        pairs: 60,
        via: LinkVia::LaunchNesting,
    },
    Golden {
        file: "hta-trace_diff-test-rank1of2-V100.json.gz",
        rank: Some(1),
        world: Some(2),
        kernels: &[(OpKind::AllReduce, 21), (OpKind::SendRecv, 43)],
        cpu_ops: 102,
        pairs: 60,
        via: LinkVia::LaunchNesting,
    },
    Golden {
        file: "hta-trace_filter-sampled_rank-0-of128.json.gz",
        rank: Some(0),
        world: Some(128),
        kernels: &[(OpKind::SendRecv, 10)],
        cpu_ops: 10,
        pairs: 10,
        via: LinkVia::LaunchNesting,
    },
    Golden {
        file: "tracelens-b200-eager_trace-rank0of8-nccl2.27.5.json.gz",
        rank: Some(0),
        world: Some(8),
        kernels: &[(OpKind::AllGather, 1)],
        cpu_ops: 1,
        pairs: 1,
        via: LinkVia::ExternalId,
    },
];

fn kinds(t: &KernelTrace) -> Vec<(OpKind, usize)> {
    let mut m: BTreeMap<OpKind, usize> = BTreeMap::new();
    for k in &t.ranks[0].kernels {
        *m.entry(k.parsed.kind.expect("every real kernel name has a kind")).or_default() += 1;
    }
    m.into_iter().collect()
}

/// Checks shared by every real trace; returns the number of pairs.
fn check_common(path: &Path, t: &KernelTrace) -> usize {
    let bytes = decompressed(path);
    let r = &t.ranks[0];
    assert_eq!(t.ranks.len(), 1);
    assert_eq!(r.kernels.len(), count(&bytes, "ncclKernel_") + count(&bytes, "ncclDevKernel_"), "{}", path.display());
    let rpc = count(&bytes, "\"record_param_comms\"");
    assert!(r.cpu_ops.iter().filter(|o| o.name == "record_param_comms").count() == rpc);
    assert!(r.kernels.windows(2).all(|w| w[0].start_ns <= w[1].start_ns), "kernels in start order");
    assert!(r.cpu_ops.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns), "CPU ops in start order");
    for k in &r.kernels {
        assert!(k.end_ns >= k.start_ns && k.grid[0] > 0 && k.block[0] > 0 && k.registers > 0, "{k:?}");
        assert!(k.correlation.is_some(), "{k:?}");
    }
    let pairs = r.correlation_pairs();
    for &(c, k) in &pairs {
        let (op, kern) = (&r.cpu_ops[c], &r.kernels[k]);
        assert_eq!(kern.cpu_op, Some(c as u32));
        assert!(op.kernels.contains(&(k as u32)));
        let l = kern.launch.unwrap();
        // The launch happened inside the CPU op, on its thread, before the kernel ran.
        assert!(l.tid == op.tid && op.ts_ns <= l.ts_ns + 1000 && l.ts_ns <= op.ts_ns + op.dur_ns + 1000);
        assert!(l.ts_ns <= kern.start_ns);
    }
    let (table, notes) = kineto::to_op_table(std::slice::from_ref(t));
    assert_eq!(table.n_ops() as u64, notes.ops);
    assert_eq!(notes.kernels_without_kind, 0);
    for op in table.ops() {
        assert_eq!(table.comms[op.comm.ix()].device, Some(op.dev));
        if let Some(size) = op.dtype.size_bytes() {
            assert_eq!(op.bytes, op.count * size);
        }
        assert!(op.gpu.is_some() || op.kernel.is_none());
    }
    eprintln!(
        "{}: rank {:?}/{:?} device {:?}, {} NCCL kernels {:?}, {} CPU-side ops ({} with a kind), {} pairs, {} table rows, warnings {:?}",
        path.file_name().unwrap().to_string_lossy(),
        r.rank,
        t.world_size,
        r.device,
        r.kernels.len(),
        kinds(t),
        r.cpu_ops.len(),
        r.cpu_ops.iter().filter(|o| o.kind.is_some()).count(),
        pairs.len(),
        notes.ops,
        t.warnings
    );
    pairs.len()
}

#[test]
fn every_single_rank_trace_loads_with_golden_figures() {
    let Some(dir) = kineto_dir() else { return };
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".tar.gz") {
            continue;
        }
        let t = kineto::load_kineto(&path).unwrap_or_else(|e| panic!("{e}"));
        let pairs = check_common(&path, &t);
        let g = GOLDEN.iter().find(|g| g.file == name).unwrap_or_else(|| panic!("no golden figures for {name}"));
        let r = &t.ranks[0];
        assert_eq!((r.rank, t.world_size), (g.rank, g.world), "{name}");
        assert_eq!(kinds(&t), g.kernels.to_vec(), "{name}");
        assert_eq!((r.cpu_ops.len(), pairs), (g.cpu_ops, g.pairs), "{name}");
        assert!(r.links.iter().all(|l| l.via == g.via), "{name}");
        seen += 1;
    }
    assert_eq!(seen, GOLDEN.len());
}

#[test]
fn newer_kineto_metadata_b200() {
    let Some(dir) = kineto_dir() else { return };
    let t = kineto::load_kineto(&dir.join("tracelens-b200-eager_trace-rank0of8-nccl2.27.5.json.gz")).unwrap();
    assert_eq!(t.nccl_version.map(|v| v.to_string()).as_deref(), Some("2.27.5"));
    // distributedInfo says pg_count 71 but lists 15 groups in pg_config.
    assert_eq!(t.process_groups.len(), 15);
    assert_eq!(t.base_time_ns, 1_767_189_312_000_000_000);
    let r = &t.ranks[0];
    assert_eq!(r.gpu_name.as_deref(), Some("NVIDIA B200"));
    let k = &r.kernels[0];
    assert_eq!(k.name, "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    assert_eq!(
        (k.stream, k.correlation, k.external_id, k.grid, k.block),
        (7, Some(15270), Some(4802), [11, 1, 1], [512, 1, 1])
    );
    assert_eq!((k.shared_mem_bytes, k.registers), (103808, 96));
    let op = &r.cpu_ops[0];
    assert_eq!((op.kind, op.meta.in_nelems, op.meta.out_nelems), (Some(OpKind::AllGather), Some(25136), Some(201088)));
    assert_eq!(
        (op.meta.dtype, op.meta.pg_name.as_deref(), op.meta.rank),
        (Some(DataType::Bfloat16), Some("3"), Some(0))
    );
    // 73 symmetric-memory all-reduce kernels are not NCCL's: counted and shown.
    assert_eq!(t.stats.other_comm_kernels.iter().map(|(_, n)| n).sum::<u64>(), 73);
    assert!(t.warnings.iter().any(|w| w.contains("73 communication kernels")), "{:?}", t.warnings);
    let (table, _) = kineto::to_op_table(std::slice::from_ref(&t));
    let op = &table.per_rank[0].op(0);
    assert_eq!((op.kind, op.count, op.bytes), (OpKind::AllGather, 25136, 50272));
    let comm = &table.comms[op.comm.ix()];
    assert_eq!((comm.nranks, comm.rank), (Some(8), Some(0)));
    assert_eq!(op.gpu.unwrap().start_ns, 1_767_189_312_000_000_000 + 1_365_627_949_863_953);
}

#[test]
fn eight_rank_dlrm_set_from_tar() {
    let Some(dir) = kineto_dir() else { return };
    let tmp = std::env::temp_dir().join(format!("commlens-kineto-real-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let files = untar(&dir.join("param-dlrm_kineto-8rank-V100-worker0-7.tar.gz"), &tmp);
    assert_eq!(files.len(), 8);
    let traces: Vec<KernelTrace> = files
        .iter()
        .map(|f| kineto::load_kineto_with(f, &TraceOptions::default()).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    for (i, (f, t)) in files.iter().zip(&traces).enumerate() {
        assert_eq!(check_common(f, t), 8);
        let r = &t.ranks[0];
        assert_eq!((r.rank, t.world_size, r.device), (Some(i as u32), Some(8), Some(i as u32)));
        assert_eq!(kinds(t), vec![(OpKind::AllReduce, 3), (OpKind::SendRecv, 5)]);
        assert_eq!(r.cpu_ops.len(), 13);
        assert!(r.links.iter().all(|l| l.via == LinkVia::LaunchNesting));
    }
    let (table, notes) = kineto::to_op_table(&traces);
    std::fs::remove_dir_all(&tmp).ok();
    assert_eq!(notes.ops, 64);
    let ranks: Vec<_> = table.devices.iter().map(|d| d.global_rank.unwrap()).collect();
    assert_eq!(ranks, (0..8).collect::<Vec<_>>(), "global ranks from distributedInfo");
    // Without process-group metadata, each rank's stream handle runs the
    // same op sequence: one logical communicator of all 8 ranks.
    let busy: Vec<_> = table.logical.iter().filter(|l| table.comms[l.members[0].ix()].n_ops > 0).collect();
    assert_eq!(busy.len(), 1);
    assert_eq!(busy[0].members.len(), 8);
    for ops in &table.per_rank {
        let k: Vec<_> = ops.iter().map(|o| o.kind).collect();
        assert_eq!(k.iter().filter(|&&k| k == OpKind::AllToAll).count(), 5);
        assert_eq!(k.iter().filter(|&&k| k == OpKind::AllReduce).count(), 3);
        // float, long int and int inputs (`Input type` of the nccl:* ops).
        assert!(ops.iter().all(|o| o.kernel.is_some() && o.dtype.size_bytes().is_some() && o.count > 0));
        assert_eq!(ops.iter().filter(|o| o.dtype == DataType::Float32).count(), 5);
    }
}
