//! The follower against the whole-file reader on files built by hand from
//! FORMAT.md: every way of cutting the file into two polls, and byte-by-byte
//! growth, gives the operations `decode` + `trace_to_table` give; records of
//! other threads arriving first (KernelCh before its parent, a stop before its
//! KernelCh); in-flight operations; shrinking and replaced files; errors.

use super::*;
use crate::plugin_out::trace_to_table;
use commlens_core::{CollOp, OpKind};
use std::io::Write;
use commlens_testdata::clp::{chunk, comm, rec, start, string, HDR};

fn coll_api(id: u64, comm: u32, t: u64, func: u32, count: u64, dtype: u32) -> Vec<u8> {
    #[rustfmt::skip]
    let p: [&[u8]; 7] = [&func.to_le_bytes(), &count.to_le_bytes(), &dtype.to_le_bytes(), &0i32.to_le_bytes(),
        &0x77u64.to_le_bytes(), &[0], &0u64.to_le_bytes()];
    start(9, id, 0, comm, t, &p)
}

#[allow(clippy::too_many_arguments)]
fn coll(
    id: u64,
    api: u64,
    comm: u32,
    t: u64,
    seq: u64,
    func: u32,
    count: u64,
    dtype: u32,
    plan: u64,
) -> Vec<u8> {
    #[rustfmt::skip]
    let p: [&[u8]; 14] = [&seq.to_le_bytes(), &func.to_le_bytes(), &1u64.to_le_bytes(), &2u64.to_le_bytes(),
        &count.to_le_bytes(), &0i32.to_le_bytes(), &dtype.to_le_bytes(), &[2, 8], &5u32.to_le_bytes(), &0u32.to_le_bytes(),
        &plan.to_le_bytes(), &0u32.to_le_bytes(), &[0], &0u64.to_le_bytes()];
    start(1, id, api, comm, t, &p)
}

fn kch(id: u64, op: u64, comm: u32, t: u64, ch: u8, gpu: u64) -> Vec<u8> {
    start(6, id, op, comm, t, &[&[ch], &gpu.to_le_bytes()])
}

fn kch_stop(id: u64, t: u64, gpu: u64) -> Vec<u8> {
    rec(
        7,
        1,
        &[
            &id.to_le_bytes(),
            &t.to_le_bytes(),
            &22i32.to_le_bytes(),
            &gpu.to_le_bytes(),
        ],
    )
}

fn end(t: u64) -> Vec<u8> {
    rec(
        9,
        0,
        &[&t.to_le_bytes(), &0u64.to_le_bytes(), &0u64.to_le_bytes()],
    )
}

/// Two ranks of one communicator in one process, `n` AllReduce (and one
/// AllGather whose API count differs from the Coll's) with two channels each,
/// the proxy thread's chunk sometimes before the user thread's, one stop
/// before its KernelCh; the last operation of rank 1 never gets its kernel.
fn job(n: u64, with_end: bool) -> Vec<u8> {
    let mut f = HDR.to_vec();
    let cold = [
        string(1, "AllReduce"),
        string(2, "ncclFloat32"),
        string(3, "RING"),
        string(4, "AllGather"),
        string(5, "SIMPLE"),
        string(6, "ncclInt8"),
        comm(1, 0xc0, 0, 2, 0),
        comm(2, 0xc0, 1, 2, 1),
    ];
    f.extend(chunk(0, &cold));
    let (user, proxy) = (1u64 << 40, 2u64 << 40);
    let (mut u, mut p) = (1u64, 1u64);
    for i in 0..n {
        for r in 0..2u32 {
            let t = 10_000 + i * 50_000 + r as u64 * 700;
            let (api, op) = (user | u, user | (u + 1));
            u += 2;
            let (func, count, cdtype, udtype) = if i == 2 {
                (4, 4000, 6, 2)
            } else {
                (1, 1 << 18, 2, 2)
            };
            let uc = chunk(
                1,
                &[
                    coll_api(
                        api,
                        r + 1,
                        t,
                        func,
                        if i == 2 { 1000 } else { count },
                        udtype,
                    ),
                    coll(op, api, r + 1, t + 100, i, func, count, cdtype, 0x900 + i),
                ],
            );
            let last_open = i + 1 == n && r == 1;
            if last_open {
                f.extend(uc);
                continue;
            }
            let gpu = 7_000_000 + t;
            let (k0, k1) = (proxy | p, proxy | (p + 1));
            p += 2;
            let dur = 20_000 + 3_000 * r as u64 + i * 10;
            let pc = chunk(
                2,
                &[
                    kch(k0, op, r + 1, t + 900, 0, gpu),
                    kch(k1, op, r + 1, t + 950, 1, gpu + 40),
                ],
            );
            let stops = chunk(
                2,
                &[
                    kch_stop(k0, t + dur + 1200, gpu + dur),
                    kch_stop(k1, t + dur + 1300, gpu + dur + 5),
                ],
            );
            match i % 3 {
                0 => [uc, pc, stops].into_iter().for_each(|c| f.extend(c)),
                // The proxy's chunk first: KernelCh before its parent's START.
                1 => [pc, uc, stops].into_iter().for_each(|c| f.extend(c)),
                // A stop in a chunk of another thread before the KernelCh START.
                _ => {
                    f.extend(chunk(3, &[kch_stop(k0, t + dur + 1200, gpu + dur)]));
                    f.extend(uc);
                    f.extend(pc);
                    f.extend(chunk(2, &[kch_stop(k1, t + dur + 1300, gpu + dur + 5)]));
                }
            }
        }
    }
    if with_end {
        f.extend(chunk(0, &[end(10_000 + n * 50_000)]));
    }
    f
}

/// The figures both readers must agree on.
fn key(o: &CollOp) -> String {
    let dur = o.gpu.map(|g| g.end_ns - g.start_ns);
    let (line, comm, kind, count, dtype) = (o.line, o.comm.0, o.kind, o.count, o.dtype.name());
    let (bytes, seq, cpu, ch) = (o.bytes, o.seq, o.cpu_ts_ns, o.channels);
    format!("line {line} comm {comm} {kind} {count}x{dtype}={bytes} seq {seq} cpu {cpu:?} gpu {dur:?} ch {ch:?}")
}

fn whole(bytes: &[u8]) -> Vec<CollOp> {
    let mut t = decode(Path::new("x.clp"), bytes).unwrap();
    let table = trace_to_table(&mut t);
    let mut ops: Vec<CollOp> = table.per_rank.into_iter().flatten().collect();
    ops.sort_by_key(|o| o.line);
    ops
}

struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
fn tmp(name: &str) -> Tmp {
    Tmp(std::env::temp_dir().join(format!("commlens-follow-{}-{name}.clp", std::process::id())))
}

fn append(path: &Path, b: &[u8]) {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(b)
        .unwrap();
}

/// Feeds `bytes` in pieces ending at `cuts`, polling after each.
fn follow(path: &Path, bytes: &[u8], cuts: &[usize]) -> (Follower, Vec<CollOp>) {
    let _ = std::fs::remove_file(path);
    let mut f = Follower::new(path);
    let mut ops = Vec::new();
    let mut at = 0;
    for &c in cuts.iter().chain(std::iter::once(&bytes.len())) {
        append(path, &bytes[at..c]);
        at = c;
        f.poll().unwrap();
        ops.extend(f.take_finished().into_iter().map(|x| x.op));
    }
    ops.sort_by_key(|o| o.line);
    (f, ops)
}

#[test]
fn every_cut_gives_the_whole_file_reading() {
    let bytes = job(5, true);
    let want: Vec<_> = whole(&bytes).iter().map(key).collect();
    assert_eq!(want.len(), 10);
    let timed = want.iter().filter(|k| !k.contains("gpu None")).count();
    assert_eq!(timed, 9, "all but the open one are timed");
    let t = tmp("cuts");
    for cut in 0..=bytes.len() {
        let (f, ops) = follow(&t.0, &bytes, &[cut]);
        assert_eq!(
            ops.iter().map(key).collect::<Vec<_>>(),
            want,
            "cut at {cut}"
        );
        assert!(f.ended() && f.open_count() == 0, "cut at {cut}");
    }
    let (_, ops) = follow(&t.0, &bytes, &(1..bytes.len()).collect::<Vec<_>>());
    assert_eq!(
        ops.iter().map(key).collect::<Vec<_>>(),
        want,
        "byte by byte"
    );
}

#[test]
fn open_operations_are_in_flight_until_their_kernel_ends() {
    let bytes = job(4, false);
    let t = tmp("open");
    let (f, ops) = follow(&t.0, &bytes, &[bytes.len() / 2]);
    assert_eq!(
        ops.len(),
        7,
        "every operation but the last of rank 1 finished"
    );
    assert!(!f.ended());
    let open: Vec<InFlightOp> = f.in_flight().collect();
    assert_eq!(open.len(), 1);
    let o = &open[0];
    assert_eq!(
        (o.comm, o.seq, o.nccl_seq, o.kind, o.running),
        (2, 3, Some(3), Some(OpKind::AllReduce), false)
    );
    // The API call's start, on the epoch clock of the header (real − mono).
    assert_eq!(
        o.start_ns,
        10_000 + 3 * 50_000 + 700 + 1_000_000_000_000 - 1000
    );
    // Its kernel starts: running, not finished; both channels stop: finished.
    let op = (1u64 << 40) | 16;
    append(
        &t.0,
        &chunk(2, &[kch((2 << 40) | 100, op, 2, 400_000, 0, 9_000_000)]),
    );
    let mut f = f;
    f.poll().unwrap();
    assert!(f.in_flight().next().unwrap().running);
    append(
        &t.0,
        &chunk(
            2,
            &[
                kch((2 << 40) | 101, op, 2, 400_010, 1, 9_000_000),
                kch_stop((2 << 40) | 100, 500_000, 9_050_000),
            ],
        ),
    );
    f.poll().unwrap();
    assert_eq!(
        f.in_flight().next().map(|o| (o.channels_done, o.channels)),
        Some((1, 2))
    );
    append(
        &t.0,
        &chunk(2, &[kch_stop((2 << 40) | 101, 500_100, 9_060_000)]),
    );
    f.poll().unwrap();
    let done = f.take_finished();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].op.gpu.map(|g| g.end_ns - g.start_ns), Some(60_000));
    assert_eq!(done[0].done_ns, 500_100 + 1_000_000_000_000 - 1000);
    assert_eq!(f.open_count(), 0);
}

#[test]
fn a_later_plan_retires_operations_whose_kernels_were_not_reported() {
    // Rank 0's op 0 gets no KernelCh at all; op 1 (another plan) starting its kernel retires it.
    let mut b = HDR.to_vec();
    b.extend(chunk(
        0,
        &[
            string(1, "AllReduce"),
            string(2, "ncclFloat32"),
            comm(1, 0xc0, 0, 2, 0),
        ],
    ));
    let u = 1u64 << 40;
    b.extend(chunk(
        1,
        &[
            coll(u | 1, 0, 1, 100, 0, 1, 64, 2, 0xa),
            coll(u | 2, 0, 1, 200, 1, 1, 64, 2, 0xb),
        ],
    ));
    let t = tmp("plans");
    let (mut f, ops) = follow(&t.0, &b, &[]);
    assert!(ops.is_empty() && f.open_count() == 2);
    append(
        &t.0,
        &chunk(2, &[kch((2 << 40) | 1, u | 2, 1, 300, 0, 5000)]),
    );
    f.poll().unwrap();
    let done = f.take_finished();
    assert_eq!(
        done.iter()
            .map(|d| (d.op.comm_seq, d.op.gpu.is_some()))
            .collect::<Vec<_>>(),
        vec![(0, false)]
    );
    assert_eq!(
        f.in_flight()
            .map(|o| (o.seq, o.running))
            .collect::<Vec<_>>(),
        vec![(1, true)]
    );
}

#[test]
fn shrinking_or_replaced_files_are_read_again() {
    let bytes = job(3, true);
    let t = tmp("restart");
    let (mut f, ops) = follow(&t.0, &bytes, &[]);
    assert_eq!(ops.len(), 6);
    assert_eq!(f.poll().unwrap(), Progress::Unchanged);
    // Truncated to a prefix: read again from the start.
    let cut = bytes.len() / 3;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&t.0)
        .unwrap()
        .set_len(cut as u64)
        .unwrap();
    let p = f.poll().unwrap();
    assert!(
        matches!(&p, Progress::Restarted { why, bytes } if why.contains("shrank") && *bytes == cut as u64),
        "{p:?}"
    );
    assert!(!f.ended());
    // Replaced by another file under the same name.
    let other = tmp("restart-new");
    std::fs::write(&other.0, &bytes).unwrap();
    std::fs::rename(&other.0, &t.0).unwrap();
    let p = f.poll().unwrap();
    assert!(
        matches!(&p, Progress::Restarted { why, .. } if why.contains("replaced")),
        "{p:?}"
    );
    assert_eq!(f.take_finished().len(), 6);
    assert!(f.ended());
    std::fs::remove_file(&t.0).unwrap();
    assert_eq!(f.poll().unwrap(), Progress::Gone);
}

#[test]
fn errors_name_the_file_and_offset() {
    let t = tmp("errors");
    let mut b = job(1, false);
    let good = b.len();
    b.extend(b"XXXX\0\0\0\0\0\0\0\0\0\0\0\0");
    let _ = std::fs::remove_file(&t.0);
    append(&t.0, &b);
    let e = Follower::new(&t.0).poll().unwrap_err().to_string();
    assert!(
        e.starts_with(&t.0.display().to_string()) && e.contains(&format!("byte offset {good}")),
        "{e}"
    );
    std::fs::write(&t.0, b"commlens-plugin v9 host=h\n").unwrap();
    let e = Follower::new(&t.0).poll().unwrap_err().to_string();
    assert!(e.contains(":1: ") && e.contains("\"v9\""), "{e}");
    // A header still being written is no error.
    std::fs::write(&t.0, b"commlens-plu").unwrap();
    let mut f = Follower::new(&t.0);
    assert_eq!(f.poll().unwrap(), Progress::Read { bytes: 12 });
    assert!(f.header().is_none());
    std::fs::write(&t.0, b"hello world\n").unwrap();
    let e = Follower::new(&t.0).poll().unwrap_err().to_string();
    assert!(e.contains("not a commlens plugin file"), "{e}");
}

#[test]
fn real_capture_follows_like_the_whole_file() {
    // NCCL 2.28.9 with all-to-all self sends (crates/testdata/captures/h100-nccl2.28.9-tp2dp2):
    // both readers drop the world's KernelCh spans after the first self p2p and time the same
    // operations. (Durations may differ: a later launch's KernelCh start can be read before an
    // earlier one's last KernelChStop, and the follower then closes the earlier one without it.)
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/captures/h100-nccl2.28.9-tp2dp2/plugin");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|x| x == "clp"));
    let bytes = std::fs::read(&files[0]).unwrap();
    let timed = |o: &CollOp| (o.line, o.kind, o.gpu.is_some());
    let want: Vec<_> = whole(&bytes).iter().map(timed).collect();
    assert_eq!((want.len(), want.iter().filter(|k| k.2).count()), (243, 83));
    let t = tmp("real");
    let (f, ops) = follow(&t.0, &bytes, &[bytes.len() / 3, bytes.len() / 2]);
    assert_eq!(ops.iter().map(timed).collect::<Vec<_>>(), want);
    assert!(f.ended() && f.open_count() == 0);
}

#[test]
fn eight_rank_capture_follows_like_the_whole_file() {
    // NCCL 2.28.9, 8 ranks, no self p2p on world (h100-nccl2.28.9-tp2pp2dp2-ep-ts): on
    // ranks 1, 5, 6 and 7 the last world all-reduce's KernelCh says 4 µs while its receive
    // ProxyOp stops 6 s later. Both readers leave it without a GPU span; the follower
    // holds it in flight until that ProxyOp stops.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/captures/h100-nccl2.28.9-tp2pp2dp2-ep-ts/plugin");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|x| x == "clp"));
    files.sort();
    assert_eq!(files.len(), 8);
    let timed = |o: &CollOp| (o.line, o.kind, o.gpu.is_some());
    let mut untimed_last = 0;
    for (i, path) in files.iter().enumerate() {
        let bytes = std::fs::read(path).unwrap();
        let want: Vec<_> = whole(&bytes).iter().map(timed).collect();
        let t = tmp(&format!("eight{i}"));
        let (f, ops) = follow(&t.0, &bytes, &[bytes.len() / 2]);
        assert_eq!(ops.iter().map(timed).collect::<Vec<_>>(), want, "{}", path.display());
        assert!(f.ended() && f.open_count() == 0);
        let last_world = ops.iter().filter(|o| o.comm.0 == 0 && o.kind == OpKind::AllReduce).max_by_key(|o| o.line).unwrap();
        if last_world.gpu.is_none() {
            untimed_last += 1;
            // Done when its receive ProxyOp stopped, 6 s on, not at the 4 µs KernelChStop.
            std::fs::write(&t.0, &bytes).unwrap();
            let mut f = Follower::new(&t.0);
            f.poll().unwrap();
            let done = f.take_finished().into_iter().find(|x| x.op.line == last_world.line).unwrap();
            let waited = (done.done_ns - last_world.cpu_ts_ns.unwrap()) as f64 / 1e9;
            assert!(waited > 5.9, "{}: done {waited:.3} s after its enqueue", path.display());
        }
    }
    assert_eq!(untimed_last, 4, "ranks 1, 5, 6 and 7");
}
