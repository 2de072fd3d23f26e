//! Hostile inputs to the Chakra front end: every one is an error naming the file (and what
//! was expected), never a panic.

use commlens_workload::chakra::{load_bytes, load_path, ChakraError};

fn vint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A length-prefixed record.
fn rec(body: &[u8], out: &mut Vec<u8>) {
    vint(body.len() as u64, out);
    out.extend_from_slice(body);
}

fn meta() -> Vec<u8> {
    let mut m = vec![0x0a, 5];
    m.extend_from_slice(b"0.0.4");
    m
}

/// Node{id, name, type, data_deps}
fn node(id: u64, ty: u64, data_deps: &[u64], ctrl_deps: &[u64]) -> Vec<u8> {
    let mut n = vec![0x08];
    vint(id, &mut n);
    n.extend([0x12, 1, b'n', 0x18]);
    vint(ty, &mut n);
    for &d in data_deps {
        n.push(0x28);
        vint(d, &mut n);
    }
    for &d in ctrl_deps {
        n.push(0x20);
        vint(d, &mut n);
    }
    n
}

fn file(nodes: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Vec::new();
    rec(&meta(), &mut f);
    for n in nodes {
        rec(n, &mut f);
    }
    f
}

fn err(name: &str, bytes: &[u8]) -> String {
    let e = load_bytes(name, bytes).expect_err("must fail");
    let s = e.to_string();
    assert!(s.contains(name), "error names the file: {s}");
    s
}

#[test]
fn good_small_graph_loads() {
    let f = file(&[
        node(1, 4, &[], &[]),
        node(2, 4, &[1], &[]),
        node(3, 4, &[2], &[99]),
    ]);
    let w = load_bytes("ok.0.et", &f).unwrap();
    assert_eq!(w.program_of(0).tasks.len(), 4);
    assert!(w
        .notes
        .iter()
        .any(|n| n.contains("control dependencies name nodes absent")));
}

#[test]
fn empty_garbage_truncated() {
    assert!(err("empty.0.et", b"").contains("empty"));
    let s = err("garbage.0.et", &[0xff; 64]);
    assert!(s.contains("record 0"), "{s}");
    let good = file(&[node(1, 4, &[], &[]), node(2, 7, &[1], &[])]);
    for cut in 1..good.len() {
        let r = load_bytes("cut.0.et", &good[..cut]);
        // Cuts at a record boundary leave a shorter valid file; every other cut is an error.
        if let Err(e) = r {
            assert!(e.to_string().contains("cut.0.et"), "{e}");
        }
    }
    assert!(load_bytes("cut.0.et", &good[..good.len() - 1]).is_err());
    // Random bytes: never a panic.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for len in [1usize, 7, 64, 500, 4096] {
        for _ in 0..50 {
            let b: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let _ = load_bytes("random.0.et", &b);
            let _ = load_bytes("random.json", &b);
        }
    }
}

#[test]
fn huge_length_and_bad_wire_types() {
    let mut f = Vec::new();
    vint(u32::MAX as u64, &mut f);
    f.extend_from_slice(&[0; 16]);
    let s = err("huge.0.et", &f);
    assert!(s.contains("only") && s.contains("remain"), "{s}");
    let mut f = Vec::new();
    vint(1 << 40, &mut f);
    assert!(err("huge64.0.et", &f).contains("varint32"));
    // group wire type (3) inside a node
    let f = file(&[vec![0x08, 1, 0x1b]]);
    assert!(err("wire.0.et", &f).contains("wire type"));
}

#[test]
fn graph_errors() {
    // data-dependency cycle 1 → 2 → 1
    let f = file(&[node(1, 4, &[2], &[]), node(2, 4, &[1], &[])]);
    let s = err("cycle.0.et", &f);
    assert!(s.contains("cycle"), "{s}");
    // dependency on a node the file lacks
    let f = file(&[node(1, 4, &[], &[]), node(2, 4, &[7], &[])]);
    let s = err("missing.0.et", &f);
    assert!(s.contains("node 7"), "{s}");
    // duplicate ids
    let f = file(&[node(1, 4, &[], &[]), node(1, 4, &[], &[])]);
    assert!(err("dup.0.et", &f).contains("twice"));
}

#[test]
fn json_errors() {
    assert!(err("bad.json", b"{\"nodes\": [").contains("line"));
    assert!(err("other.json", b"{\"foo\": 1}").contains("nodes"));
    assert!(err("cycle.json", br#"{"workload_graph":[{"Id":1,"NodeType":4,"data_deps":[2]},{"Id":2,"NodeType":4,"data_deps":[1]}]}"#)
        .contains("cycle"));
    // A PyTorch ET whose parent links loop must still load (cycles in the call tree are cut).
    let w = load_bytes(
        "loop.json",
        br#"{"schema":"1.0.1","nodes":[{"id":1,"name":"a","parent":2,"op_schema":"x"},{"id":2,"name":"b","parent":1,"op_schema":"y"}]}"#,
    )
    .unwrap();
    assert_eq!(w.world, 1);
}

#[test]
fn paths_and_archives() {
    let dir = std::env::temp_dir().join(format!("commlens-chakra-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = load_path(&dir.join("nothing")).unwrap_err();
    assert!(
        matches!(e, ChakraError::Input { .. } | ChakraError::Io { .. }),
        "{e}"
    );
    // an empty folder
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(load_path(&empty)
        .unwrap_err()
        .to_string()
        .contains("no Chakra ET"));
    // a .tar.gz that is not a tar
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &[7u8; 2000]).unwrap();
    let p = dir.join("bad.tar.gz");
    std::fs::write(&p, gz.finish().unwrap()).unwrap();
    let s = load_path(&p).unwrap_err().to_string();
    assert!(s.contains("bad.tar.gz") && s.contains("tar"), "{s}");
    // a truncated gzip
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &file(&[node(1, 4, &[], &[])])).unwrap();
    let b = gz.finish().unwrap();
    let p = dir.join("cut.et.gz");
    std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    assert!(load_path(&p).unwrap_err().to_string().contains("cut.et.gz"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn absurd_job_size_is_refused() {
    let doc = br#"{"schema":"1.1.0-chakra.0.0.4","nodes":[{"id":5,"name":"record_param_comms","ctrl_deps":1,
        "inputs":{"values":[[[1,2,0,4,4,"cuda:0"]],1,["0","default_pg"],0,"allreduce",[],[],0,1,4000000000],
        "shapes":[],"types":["GenericList[Tensor(float)]","Int","Tuple[String,String]","Int","String","GenericList[]","GenericList[]","Int","Int","Int"]},
        "outputs":{"values":[],"shapes":[],"types":[]},"attrs":[]}]}"#;
    let s = err("huge-world.json", doc);
    assert!(s.contains("4000000000"), "{s}");
}
