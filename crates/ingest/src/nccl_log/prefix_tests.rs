//! Tests of the line prefix and the splitting of lines into segments.
use super::*;

/// The head, and per segment (host, pid, tid, dev, level, message, cut).
type Split = (String, Vec<(String, u32, u32, Option<u32>, Level, String, bool)>);

fn split(line: &str) -> Split {
    let mut hosts = KnownHosts::default();
    split_with(&mut hosts, line)
}

fn split_with(hosts: &mut KnownHosts, line: &str) -> Split {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let head = split_line(b, hosts, &mut out);
    let segs = out
        .iter()
        .map(|s| {
            (
                line[s.host.clone()].to_string(),
                s.pid,
                s.tid,
                s.dev,
                s.level,
                line[s.msg.clone()].to_string(),
                s.cut,
            )
        })
        .collect();
    (line[..head].to_string(), segs)
}

#[test]
fn plain_info_line() {
    let (head, s) = split("mew0:64904:64904 [0] NCCL INFO NCCL version 2.27.7+cuda13.0");
    assert_eq!(head, "");
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0, "mew0");
    assert_eq!((s[0].1, s[0].2, s[0].3), (64904, 64904, Some(0)));
    assert_eq!(s[0].4, Level::Info);
    assert_eq!(s[0].5, "NCCL version 2.27.7+cuda13.0");
    assert!(!s[0].6);
}

#[test]
fn call_line_without_dev() {
    let (_, s) = split("gdr116:67599:67599 NCCL CALL ncclGroupEnd()");
    assert_eq!(s[0].3, None);
    assert_eq!(s[0].4, Level::Call);
    assert_eq!(s[0].5, "ncclGroupEnd()");
}

#[test]
fn function_line_and_plugin_prefixes() {
    let (_, s) = split("gdr114:842735:842735 [0] scheduleCollTasksToPlan, 704 NCCL INFO AllGather: 268435456 Bytes");
    assert_eq!(s[0].5, "AllGather: 268435456 Bytes");
    let (_, s) = split(
        "x3005c0s25b1n0:24013:24116 [1] 117.724290 nccl_net_ofi_init:1396 NCCL TRACE NET/OFI Provider cxi",
    );
    assert_eq!(s[0].0, "x3005c0s25b1n0");
    assert_eq!(s[0].4, Level::Trace);
    assert_eq!(s[0].5, "NET/OFI Provider cxi");
}

#[test]
fn timestamp_prefix() {
    let line = "1766081276.802766 csg-rivulet02:1426907:1427588 [2] NCCL INFO AllReduce: opCount 0";
    let mut hosts = KnownHosts::default();
    let mut out = Vec::new();
    let head = split_line(line.as_bytes(), &mut hosts, &mut out);
    assert_eq!(head, 0);
    assert_eq!(out[0].ts_ns, Some(1_766_081_276_802_766_000));
    assert_eq!(&line[out[0].host.clone()], "csg-rivulet02");
}

#[test]
fn timestamp_glued_to_the_host() {
    // NCCL 2.28.9 with NCCL_DEBUG_TIMESTAMP_FORMAT="%s.%6f": no space before the host.
    let line = "1795693065.222017vm:566:566 [0] NCCL INFO AllReduce: opCount 0";
    let mut hosts = KnownHosts::default();
    for _ in 0..2 {
        let mut out = Vec::new();
        let head = split_line(line.as_bytes(), &mut hosts, &mut out);
        assert_eq!((head, out.len()), (0, 1));
        assert_eq!(out[0].ts_ns, Some(1_795_693_065_222_017_000));
        assert_eq!((&line[out[0].host.clone()], out[0].pid, out[0].tid), ("vm", 566, 566));
        assert_eq!(&line[out[0].msg.clone()], "AllReduce: opCount 0");
    }
    let mut out = Vec::new();
    split_line_scan(line.as_bytes(), &mut KnownHosts::default(), &mut out);
    assert_eq!((out[0].ts_ns, &line[out[0].host.clone()]), (Some(1_795_693_065_222_017_000), "vm"));
    // Milliseconds, a host starting with a digit (taken as %6f), a glued stamp after a cut line.
    let (_, s) = split("1795693065.222a100-7:1:1 [0] NCCL INFO x");
    assert_eq!(s[0].0, "a100-7");
    let (_, s) = split("1795693065.2220171node:1:1 [0] NCCL INFO x");
    assert_eq!(s[0].0, "1node");
    let line = "vm:1:1 [0] NCCL INFO AllReduce: opCount 41795693065.222017vm:2:2 [0] NCCL INFO Broadcast: x";
    let mut out = Vec::new();
    split_line(line.as_bytes(), &mut KnownHosts::default(), &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(&line[out[0].msg.clone()], "AllReduce: opCount 4");
    assert_eq!((out[1].ts_ns, &line[out[1].host.clone()]), (Some(1_795_693_065_222_017_000), "vm"));
    // Not a timestamp: nine digits, or nothing left for a host.
    assert_eq!(split("179569306.222017vm:1:1 [0] NCCL INFO x").1[0].0, "179569306.222017vm");
    assert_eq!(split("1795693065.222017:1:1 [0] NCCL INFO x").1[0].0, "1795693065.222017");
}

#[test]
fn interleaved_writers() {
    let line = "stone:2984737:2984737 [2] NCCL INFO Send: opCount 0 comm 0x55f7d902f5e0 [nranks=4] stream stone:2984736:2stone:2984737:2984737 NCCL CALL ncclSend(0,7f1fd2c00000)";
    let mut hosts = KnownHosts::default();
    let (_, s) = split_with(&mut hosts, line);
    assert_eq!(s.len(), 2);
    assert!(s[0].6, "first segment is cut");
    assert_eq!(s[0].5, "Send: opCount 0 comm 0x55f7d902f5e0 [nranks=4] stream stone:2984736:2");
    assert_eq!(s[1].0, "stone", "fused '2stone' resolved to the known host");
    assert_eq!(s[1].4, Level::Call);
    assert!(!s[1].6);
    // Fused host at line start: 'ston' + 'stone'.
    let (head, s) = split_with(&mut hosts, "stonstone:2984737:2984737 [3] NCCL INFO Recv: opCount 5d");
    assert_eq!(head, "ston");
    assert_eq!(s[0].0, "stone");
}

#[test]
fn timestamp_glued_to_a_cut_line() {
    let line = "node00:1:1 [1] NCCL INFO AllReduce: opCount 41766081201.557987 node00:2:2 [3] NCCL INFO Broadcast: x";
    let mut hosts = KnownHosts::default();
    let mut out = Vec::new();
    split_line(line.as_bytes(), &mut hosts, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(&line[out[0].msg.clone()], "AllReduce: opCount 4");
    assert_eq!(out[1].ts_ns, Some(1_766_081_201_557_987_000));
    assert!(has_cut_prefix(b"node00:949993:949993 [2] N"));
    assert!(!has_cut_prefix(b"plain text: 12:30"));
}

#[test]
fn launcher_prefixes_before_the_host() {
    // `srun -l` task labels and bracketed date timestamps stay in the head.
    for (line, head) in [
        ("0: nid001:4242:4242 [0] NCCL INFO AllReduce: opCount 0", "0: "),
        ("12: nid001:4242:4250 NCCL CALL ncclGroupEnd()", "12: "),
        ("[2025-01-15 12:34:56] h1:7:7 [3] NCCL WARN Cuda failure", "[2025-01-15 12:34:56] "),
    ] {
        let (h, s) = split(line);
        assert_eq!(h, head, "{line}");
        assert_eq!(s.len(), 1, "{line}");
        assert!(!s[0].6);
    }
}

#[test]
fn program_output_before_prefix() {
    let (head, s) = split(
        "TimeTest(), common.cu:610,            0             0     float    none      -1gdr114:842735:842735 [0] ncclEnqueueCheck, 2306 NCCL INFO AllGather: opCount 5",
    );
    assert!(head.starts_with("TimeTest()"));
    assert_eq!(s[0].0, "1gdr114", "unknown debris stays on the host until a clean host is known");
    assert_eq!(s[0].5, "AllGather: opCount 5");
}

#[test]
fn not_prefixes() {
    for line in [
        "",
        "# nThread 1 nGpus 2 minBytes 8388608",
        "Sun Nov 22 02:34:52 UTC 2026",
        "mew0:64904:64904 [0] nothing here",
        "host:1:2 [x] NCCL INFO y",
        "35:842735 [0] ncclEnqueueCheck, 2306 NCCL INFO AllGather: opCount 5",
        ":1:2 NCCL INFO",
        "a:1:2",
        "a:1:2 NCCL INFOx",
    ] {
        let (head, s) = split(line);
        assert!(s.is_empty(), "{line}");
        assert_eq!(head, line);
    }
}

/// `candidate_at` reads the digits in the pass that finds their end; it
/// agrees with reading the runs first and parsing them with `dec_u64`.
#[test]
fn candidates_agree_with_a_two_pass_read() {
    fn reference(line: &[u8], colon: usize) -> Option<(usize, usize, u32, u32, usize)> {
        let digits = |from: usize| from + line[from..].iter().take_while(|b| b.is_ascii_digit()).count();
        let pid_end = digits(colon + 1);
        if pid_end == colon + 1 || pid_end >= line.len() || line[pid_end] != b':' {
            return None;
        }
        let tid_end = digits(pid_end + 1);
        if tid_end == pid_end + 1 || tid_end >= line.len() || line[tid_end] != b' ' {
            return None;
        }
        let mut hs = colon;
        while hs > 0 && crate::bytes::is_host_byte(line[hs - 1]) {
            hs -= 1;
        }
        while hs < colon && !crate::bytes::is_host_start(line[hs]) {
            hs += 1;
        }
        if hs == colon {
            return None;
        }
        let pid = dec_u64(&line[colon + 1..pid_end]).and_then(|v| u32::try_from(v).ok())?;
        let tid = dec_u64(&line[pid_end + 1..tid_end]).and_then(|v| u32::try_from(v).ok())?;
        Some((hs, colon, pid, tid, tid_end + 1))
    }
    let alphabet = b"0123456789000000:: a-b.";
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for len in 0..20_000 {
        let line: Vec<u8> = (0..len % 40)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                alphabet[(x % alphabet.len() as u64) as usize]
            })
            .collect();
        for colon in memchr::memchr_iter(b':', &line) {
            let got = candidate_at(&line, colon).map(|c| (c.host_start, c.host_end, c.pid, c.tid, c.after));
            assert_eq!(got, reference(&line, colon), "{:?}", String::from_utf8_lossy(&line));
        }
    }
    let big = b"h:4294967295:00000000004294967295 h:4294967296:1 ";
    assert!(candidate_at(big, 1).is_some_and(|c| c.pid == u32::MAX && c.tid == u32::MAX));
    assert!(candidate_at(big, 35).is_none());
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut hosts = KnownHosts::default();
    let mut out = Vec::new();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let alphabet = b"ab1:: [0]NCCL INFO\x00\xff9.";
    for len in 0..300 {
        let line: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                alphabet[(x % alphabet.len() as u64) as usize]
            })
            .collect();
        let head = split_line(&line, &mut hosts, &mut out);
        assert!(head <= line.len());
        for s in &out {
            assert!(s.msg.start <= s.msg.end && s.msg.end <= line.len());
        }
    }
}

/// Host names with bytes that are not ASCII (valid UTF-8 or not) stay whole,
/// with the shortcuts on and off: `gpu\xe9x` is not cut to `x`.
#[test]
fn non_ascii_host_bytes_stay_in_the_host() {
    for fast in [true, false] {
        for host in [&b"gpu\xe9x"[..], b"cpu\xe9x", b"node\xff1", b"\xffnode", "gpué".as_bytes()] {
            let mut line = host.to_vec();
            line.extend_from_slice(b":100:101 [0] NCCL INFO Init COMPLETE");
            let mut hosts = KnownHosts::with_fast_paths(fast);
            let mut out = Vec::new();
            split_line(&line, &mut hosts, &mut out);
            assert_eq!(out.len(), 1, "{}", String::from_utf8_lossy(&line));
            assert_eq!(&line[out[0].host.clone()], host, "fast {fast}");
            assert_eq!(out[0].pid, 100);
        }
    }
}

#[test]
fn host_strings_are_distinct_and_readable() {
    use crate::bytes::host_string;
    assert_eq!(host_string(b"gpu\xe9x"), "gpu\\xe9x");
    assert_eq!(host_string(b"gpu\xffx"), "gpu\\xffx");
    assert_eq!(host_string("gpué".as_bytes()), "gpué");
    assert_eq!(host_string(b"node-1"), "node-1");
    assert_ne!(host_string(b"gpu\xe9x"), host_string(b"cpu\xe9x"));
}

/// A line with no segment: what the scan noted (`KnownHosts::cut_prefix`)
/// is `has_cut_prefix`'s answer, shortcuts on and off, for random lines
/// dense in colons and digits and for lines with more candidates than the
/// scan considers.
#[test]
fn cut_prefix_noted_by_the_scan_is_has_cut_prefix() {
    let mut x: u64 = 0x2545f4914f6cdd1d;
    let alphabet = b"ab1:: 9-x.";
    let mut lines: Vec<Vec<u8>> = (0..4000)
        .map(|i| {
            (0..i % 120)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect()
        })
        .collect();
    lines.push(b"a:1:1 ".repeat(40));
    lines.push([&b"x".repeat(40)[..], &b"a:1:1 ".repeat(40), b"NCCL INFO hi"].concat());
    lines.push(b"ncclIbAccept(), transport/net_ib.cc:1537, NCCL RDMA server accept".to_vec());
    lines.push(b"stone:2984736:2".to_vec());
    let mut empty = 0;
    for fast in [true, false] {
        let mut hosts = KnownHosts::with_fast_paths(fast);
        let mut out = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            // Each line again right after itself and after a line with a
            // segment (a repeat of a line without one is answered from it).
            for round in 0..3 {
                if round == 2 && i % 2 == 0 {
                    split_line(b"host:1:2 [0] NCCL INFO x", &mut hosts, &mut out);
                }
                let head = split_line(line, &mut hosts, &mut out);
                if out.is_empty() {
                    empty += 1;
                    assert_eq!(head, line.len());
                    assert_eq!(hosts.cut_prefix, has_cut_prefix(line), "{}", String::from_utf8_lossy(line));
                }
            }
        }
    }
    assert!(empty > 3000);
}
