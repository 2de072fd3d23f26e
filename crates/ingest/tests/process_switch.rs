//! The reader remembers the last few processes it found (see
//! `LogParser::process_lookup`); with more processes interleaved than it
//! remembers, and hosts that differ only in their last byte or are spelled
//! with invalid UTF-8, every segment must still land in its own process:
//! each process prints its own NCCL version, after lines of the others.

use commlens_ingest::nccl_log::{read_stream, ReadOptions};
use std::path::Path;

#[test]
fn interleaved_processes_keep_their_own_lines() {
    // (host, pid): more than the remembered four, short and 8..16-byte
    // hosts, hosts equal but for the last byte, one host of invalid UTF-8.
    let procs: Vec<(Vec<u8>, u32)> = vec![
        (b"a".to_vec(), 11),
        (b"node-0001".to_vec(), 12),
        (b"node-0002".to_vec(), 13),
        (b"node-0003".to_vec(), 14),
        (b"gpu7".to_vec(), 15),
        (b"h\xffx".to_vec(), 16),
        (b"a-very-long-host-name-01".to_vec(), 17),
        (b"node-0001".to_vec(), 18),
    ];
    for fast in [true, false] {
        let mut log = Vec::new();
        // A deterministic shuffle: runs of one process, switches to any.
        let mut x = 12345u32;
        for round in 0..40 {
            for _ in 0..procs.len() {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                let i = (x >> 16) as usize % procs.len();
                let (host, pid) = &procs[i];
                let tid = 100 + (x >> 8) % 3;
                log.extend_from_slice(host);
                let msg = if round == 20 {
                    format!(":{pid}:{tid} [0] NCCL INFO NCCL version 2.{i}.0+cuda12.2\n")
                } else {
                    format!(":{pid}:{tid} [0] NCCL INFO Bootstrap : Using eth0:10.0.0.{i}<0>\n")
                };
                log.extend_from_slice(msg.as_bytes());
            }
        }
        // Every process prints its version once the others are interleaved.
        for (i, (host, pid)) in procs.iter().enumerate() {
            log.extend_from_slice(host);
            log.extend_from_slice(format!(":{pid}:1 [0] NCCL INFO NCCL version 2.{i}.0+cuda12.2\n").as_bytes());
        }
        let opts = ReadOptions { fast_paths: fast, ..ReadOptions::default() };
        let (table, _) = read_stream(Path::new("switch.log"), &log[..], &opts, &mut |_| {}).unwrap();
        assert_eq!(table.processes.len(), procs.len(), "fast {fast}");
        for p in &table.processes {
            let i = procs.iter().position(|(h, pid)| *pid == p.pid && commlens_ingest::bytes::host_string(h) == p.host);
            let i = i.unwrap_or_else(|| panic!("unexpected process {}:{}", p.host, p.pid));
            let v = p.nccl_version.expect("version");
            assert_eq!((v.major, v.minor, v.patch), (2, i as u16, 0), "{}:{} fast {fast}", p.host, p.pid);
        }
    }
}
