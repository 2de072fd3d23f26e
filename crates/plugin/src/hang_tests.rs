//! The hand-written JSON against the reader's serde types, escapes, device
//! grouping and the choice of the global rank.

use super::*;
use commlens_core::inflight::RankInflight;

fn op(seq: u64, start: u64, ch: (u16, u16)) -> Op {
    Op {
        id: seq + 100,
        seq,
        nccl_seq: Some(seq),
        count: 256,
        peer: 1,
        enqueue: 10,
        start,
        ch_total: ch.1,
        ch_stopped: ch.0,
        ..Op::default()
    }
}

fn snap(idx: u32, hash: u64, rank: i32, nranks: i32, dev: Option<i32>) -> Snapshot {
    Snapshot {
        idx,
        comm_hash: hash,
        rank,
        nranks,
        dev,
        name: "TP\"0\"\\\n\u{1}é".into(),
        proxy_steps: false,
        past: vec![Op { end: 30, ..op(0, 20, (1, 1)) }],
        open: vec![op(1, 40, (1, 2)), op(2, 0, (0, 2))],
        forgotten: 0,
    }
}

#[test]
fn renders_the_schema_the_reader_expects() {
    let mut r = RankDump {
        host: "node\"7".into(),
        pid: 12,
        global_rank: Some(3),
        time_ns: 1_700_000_000_000_000_000,
        reason: "signal".into(),
        cuda_dev: Some(3),
        comms: vec![CommDump {
            comm_hash: u64::MAX,
            nranks: 4,
            rank: 1,
            desc: "a\"b\\c\nd\te\u{1f}f\u{7f}ü".into(),
            forgotten_open: 2,
            past: vec![OpDump {
                seq: 6,
                op: "AllReduce".into(),
                bytes: 8,
                enqueue_ns: Some(1),
                start_ns: Some(2),
                end_ns: Some(3),
                ..OpDump::default()
            }],
            current: vec![OpDump {
                seq: 7,
                nccl_seq: Some(3),
                op: "Send".into(),
                peer: Some(2),
                start_ns: Some(4),
                progress: Some((12, 16)),
                ..OpDump::default()
            }],
            pending: vec![],
        }],
    };
    let text = render(&r);
    let d: RankInflight = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        (d.format.as_str(), d.version, d.host.as_str(), d.pid, d.global_rank),
        ("commlens-hang", 1, "node\"7", 12, Some(3))
    );
    assert_eq!((d.time_ns, d.reason.as_str()), (1_700_000_000_000_000_000, "signal"));
    let c = &d.comms[0];
    assert_eq!((c.comm_hash, c.nranks, c.rank, c.desc.as_str()), (u64::MAX, 4, 1, "a\"b\\c\nd\te\u{1f}f\u{7f}ü"));
    assert_eq!((c.past[0].seq, c.past[0].end_ns, c.past[0].peer, c.past[0].progress_done), (6, Some(3), None, None));
    let cur = &c.current[0];
    assert_eq!(
        (cur.op.as_str(), cur.peer, cur.progress_done, cur.progress_total, cur.enqueue_ns),
        ("Send", Some(2), Some(12), Some(16), None)
    );
    assert!(c.pending.is_empty());
    assert!(text.contains("\"nccl_seq\": 3") && text.contains("\"forgotten_open\": 2"));
    r.comms.clear();
    r.global_rank = None;
    let d: RankInflight = serde_json::from_str(&render(&r)).unwrap();
    assert!(d.comms.is_empty() && d.global_rank.is_none());
}

#[test]
fn groups_by_device_and_finds_the_world_rank() {
    let no_env = |_: &str| None;
    // One process, two devices: world (4 ranks) and a TP communicator (2 ranks) on each.
    let snaps = vec![
        snap(1, 0xA, 2, 4, Some(0)),
        snap(2, 0xA, 3, 4, Some(1)),
        snap(3, 0xB, 1, 2, Some(1)),
        snap(4, 0xB, 0, 2, Some(0)),
    ];
    let ranks = build(&snaps, 1_000, 5_000, "timeout", &no_env);
    assert_eq!(ranks.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), vec!["dev0", "dev1"]);
    let (_, d0) = &ranks[0];
    assert_eq!((d0.global_rank, d0.cuda_dev, d0.comms.len(), d0.reason.as_str()), (Some(2), Some(0), 2, "timeout"));
    assert_eq!(d0.comms.iter().map(|c| c.comm_hash).collect::<Vec<_>>(), vec![0xA, 0xB]);
    let c = &d0.comms[0];
    assert_eq!((c.past.len(), c.current.len(), c.pending.len()), (1, 1, 1));
    assert_eq!((c.current[0].seq, c.current[0].start_ns, c.current[0].progress), (1, Some(1_040), Some((1, 2))));
    assert_eq!((c.pending[0].enqueue_ns, c.pending[0].start_ns, c.pending[0].progress), (Some(1_010), None, None));
    assert_eq!((c.past[0].end_ns, c.past[0].progress), (Some(1_030), None));
    assert_eq!(c.current[0].peer, None, "a root only for rooted collectives (func unknown here)");
    assert_eq!(ranks[1].1.global_rank, Some(3));
    // WORLD_SIZE names the world communicator; RANK serves a one-device process without it.
    let env = |k: &str| match k {
        "WORLD_SIZE" => Some("2".to_string()),
        "RANK" => Some("17".to_string()),
        _ => None,
    };
    let r = build(&snaps, 0, 0, "signal", &env);
    assert_eq!((r[0].1.global_rank, r[1].1.global_rank), (Some(0), Some(1)));
    let one = vec![snap(1, 0xC, 5, 8, None)];
    assert_eq!(build(&one, 0, 0, "signal", &env)[0].1.global_rank, Some(17));
    assert_eq!(build(&one, 0, 0, "signal", &no_env)[0].0, "h0");
    // Without devices, the K-th handle of each communicator is on the K-th device.
    let nodev = vec![snap(1, 0xA, 0, 2, None), snap(2, 0xA, 1, 2, None), snap(3, 0xB, 0, 2, None)];
    let r = build(&nodev, 0, 0, "request", &no_env);
    assert_eq!(r.iter().map(|(k, d)| (k.as_str(), d.comms.len())).collect::<Vec<_>>(), vec![("h0", 2), ("h1", 1)]);
}

#[test]
fn datatype_sizes() {
    assert_eq!(dtype_size("ncclFloat32"), 4);
    assert_eq!(dtype_size("ncclBfloat16"), 2);
    assert_eq!(dtype_size("ncclInt8"), 1);
    assert_eq!(dtype_size("ncclUint64"), 8);
    assert_eq!(dtype_size("ncclSomethingNew"), 0);
    let mut s = String::new();
    json_str(&mut s, "\u{0}\u{8}\u{c}");
    assert_eq!(s, "\"\\u0000\\u0008\\u000c\"");
}
