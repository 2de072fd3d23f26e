//! `commlens_ingest::plugin_out` against files built by hand from `FORMAT.md`
//! (not with the plugin's encoder): version and corruption errors name the file
//! and the line or byte offset, truncated tails and unknown records are
//! tolerated, and the table is built the documented way (user count and type
//! from the API parent, GPU span from the KernelCh children with the clock
//! offset calibrated, devices by rank when the CUDA probe found none).

use commlens_core::{DataType, OpKind};
use commlens_ingest::plugin_out::{decode, trace_to_table};
use std::path::Path;
use commlens_testdata::clp::{chunk, comm, rec, start, string, HDR};

#[test]
fn rejects_other_versions_and_other_files() {
    let p = Path::new("x.clp");
    let e = decode(p, b"commlens-plugin v2 host=h\n").unwrap_err().to_string();
    assert!(e.starts_with("x.clp:1: ") && e.contains("\"v2\"") && e.contains("reads v1"), "{e}");
    let e = decode(p, b"hello\n").unwrap_err().to_string();
    assert!(e.starts_with("x.clp:1: ") && e.contains("not a commlens plugin file"), "{e}");
    assert!(decode(p, b"commlens-plugin v1.3 host=h\n").is_ok(), "minor versions are compatible");
}

#[test]
fn names_the_offset_of_corruption_and_tolerates_a_truncated_tail() {
    let p = Path::new("y.clp");
    let mut f = HDR.to_vec();
    f.extend(chunk(0, &[string(1, "AllReduce"), rec(42, 0, &[b"future"])]));
    let good = decode(p, &f).unwrap();
    assert_eq!((good.string(1), good.report.unknown_records, good.report.records), ("AllReduce", 1, 2));
    let mut cut = f.clone();
    cut.extend(&chunk(0, &[rec(6, 0, &[&[0; 16]])])[..20]);
    assert_eq!(decode(p, &cut).unwrap().report.truncated_bytes, 20);
    let mut badm = f.clone();
    badm.extend(b"XXXX\0\0\0\0\0\0\0\0\0\0\0\0");
    let e = decode(p, &badm).unwrap_err().to_string();
    assert!(e.contains(&format!("byte offset {}", f.len())) && e.contains("magic"), "{e}");
    let mut short = HDR.to_vec();
    short.extend(chunk(0, &[rec(6, 0, &[&[0; 8]])]));
    let e = decode(p, &short).unwrap_err().to_string();
    assert!(e.contains(&format!("byte offset {}", HDR.len() + 16)) && e.contains("too short"), "{e}");
}

/// A small valid file: an AllGather with its CollApi parent, two KernelCh children, stops
/// before starts, strings and communicators after their use, a DROPS record.
fn sample_file() -> Vec<u8> {
    let strings = [string(1, "AllGather"), string(2, "ncclFloat32"), string(3, "ncclInt8"), string(4, "RING")];
    let mut cold = strings.to_vec();
    // Two handles of one communicator, no CUDA device known: devices follow the ranks.
    cold.extend([
        comm(1, 0xc0, 1, 2, -1),
        comm(2, 0xc0, 0, 2, -1),
        rec(2, 0, &[&1u32.to_le_bytes(), &4242u32.to_le_bytes()]),
    ]);
    let (t0, gpu0) = (10_000u64, 900_000_000u64);
    #[rustfmt::skip]
    let api = start(9, 11, 0, 1, t0, &[&1u32.to_le_bytes(), &100u64.to_le_bytes(), &2u32.to_le_bytes(),
        &0i32.to_le_bytes(), &0x77u64.to_le_bytes(), &[0], &0u64.to_le_bytes()]);
    #[rustfmt::skip]
    let coll = start(1, 12, 11, 1, t0 + 500, &[&5u64.to_le_bytes(), &1u32.to_le_bytes(), &1u64.to_le_bytes(),
        &2u64.to_le_bytes(), &400u64.to_le_bytes(), &0i32.to_le_bytes(), &3u32.to_le_bytes(), &[2, 8],
        &4u32.to_le_bytes(), &0u32.to_le_bytes(), &0u64.to_le_bytes(), &0u32.to_le_bytes(), &[0], &0u64.to_le_bytes()]);
    // Channel 0 seen 300 ns after its GPU start, channel 1 seen 100 ns after its stop: the tighter wins.
    let k0 = start(6, 13, 12, 1, t0 + 2000, &[&[0], &gpu0.to_le_bytes()]);
    let k1 = start(6, 14, 12, 1, t0 + 2100, &[&[1], &(gpu0 + 50).to_le_bytes()]);
    let stop_state = |id: u64, t: u64, g: u64| {
        rec(7, 1, &[&id.to_le_bytes(), &t.to_le_bytes(), &22i32.to_le_bytes(), &g.to_le_bytes()])
    };
    let s0 = stop_state(13, t0 + 3000, gpu0 + 1000);
    let s1 = stop_state(14, t0 + 2900 + 100, gpu0 + 2900);
    // Stops may come before their starts in the file (another thread's chunk drained first).
    let stops: Vec<Vec<u8>> =
        [11u64, 12, 13, 14].iter().map(|id| rec(6, 0, &[&id.to_le_bytes(), &(t0 + 4000).to_le_bytes()])).collect();
    let mut f = HDR.to_vec();
    f.extend(chunk(2, &stops));
    f.extend(chunk(1, &[api, coll, k0, k1, s0, s1]));
    f.extend(chunk(0, &cold));
    f.extend(chunk(0, &[rec(8, 0, &[&1u32.to_le_bytes(), &3u64.to_le_bytes()])]));
    f
}

#[test]
fn builds_operations_from_api_parents_and_kernel_children() {
    let (t0, f) = (10_000u64, sample_file());
    let mut t = decode(Path::new("z.clp"), &f).unwrap();
    assert_eq!((t.report.starts, t.report.stops, t.report.states, t.report.open_events), (4, 4, 2, 0));
    assert_eq!((t.report.dropped, t.report.clean_end), (3, false));
    let table = trace_to_table(&mut t);
    assert_eq!(table.devices.len(), 2, "two ranks of one communicator are two devices");
    assert_ne!(table.comms[0].device, table.comms[1].device);
    let ops: Vec<_> = table.ops().collect();
    assert_eq!(ops.len(), 1);
    let op = &ops[0];
    assert_eq!((op.kind, op.count, op.dtype, op.bytes), (OpKind::AllGather, 100, DataType::Float32, 400));
    assert_eq!((op.seq, op.channels, op.stream, op.tid, op.line), (5, Some((0, 1)), Some(0x77), 4242, 6));
    // CPU: epoch = mono + (real_ns − mono_ns) of the header, at the API call.
    assert_eq!(op.cpu_ts_ns, Some(1_000_000_000_000 - 1000 + t0 as i64));
    // GPU: offset = min(2000+t0−gpu0, 2100+t0−gpu0−50, 3000+t0−gpu0−1000, 3000+t0−gpu0−2900) = t0+100−gpu0.
    let g = op.gpu.unwrap();
    assert_eq!(g.end_ns - g.start_ns, 2900);
    assert_eq!(g.start_ns, op.cpu_ts_ns.unwrap() + 100);
}

#[test]
fn mutated_and_cut_files_never_panic() {
    let good = sample_file();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut err) = (0, 0);
    for i in 0..3000 {
        let mut f = good.clone();
        for _ in 0..1 + next() % 4 {
            let at = HDR.len() + (next() as usize) % (f.len() - HDR.len());
            f[at] = next() as u8;
        }
        if i % 3 == 0 {
            f.truncate(HDR.len() + (next() as usize) % (f.len() - HDR.len()));
        }
        match decode(Path::new("m.clp"), &f) {
            Ok(mut t) => {
                let table = trace_to_table(&mut t);
                assert!(table.ops().all(|o| o.dev.ix() < table.devices.len()));
                ok += 1;
            }
            Err(e) => {
                assert!(e.to_string().starts_with("m.clp: byte offset "), "{e}");
                err += 1;
            }
        }
    }
    assert!(ok > 0 && err > 0, "both outcomes occur ({ok} ok, {err} errors)");
}
