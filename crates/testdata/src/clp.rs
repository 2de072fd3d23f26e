//! Hand-made `.clp` records (the plugin's binary trace format), built from
//! `crates/plugin/FORMAT.md` rather than with the plugin's own encoder, so a
//! reader test checks the documented format and not the writer's idea of it.
//! Used by the plugin reader tests, the live follower's tests and the fuzzer's
//! seeds: one copy of the encoding.

/// A file header: host `h1`, pid 7, session 2, clocks 1 µs apart.
pub const HDR: &[u8] =
    b"commlens-plugin v1 host=h1 pid=7 session=2 mono_ns=1000 real_ns=1000000000000\n";

/// A chunk written by `thread`: `CHNK`, thread, payload length, a zero word, the records.
pub fn chunk(thread: u32, recs: &[Vec<u8>]) -> Vec<u8> {
    let payload: Vec<u8> = recs.concat();
    let mut v = b"CHNK".to_vec();
    v.extend(thread.to_le_bytes());
    v.extend((payload.len() as u32).to_le_bytes());
    v.extend(0u32.to_le_bytes());
    v.extend(payload);
    v
}

/// A record from its kind, sub byte and little-endian fields (length prefix included).
pub fn rec(kind: u8, sub: u8, fields: &[&[u8]]) -> Vec<u8> {
    let body: Vec<u8> = fields.concat();
    let mut v = ((body.len() + 4) as u16).to_le_bytes().to_vec();
    v.extend([kind, sub]);
    v.extend(body);
    v
}

/// A string-table entry.
pub fn string(id: u32, s: &str) -> Vec<u8> {
    rec(1, 0, &[&id.to_le_bytes(), s.as_bytes()])
}

/// A COMM_INIT record under profiler API v6: comm index, hash, rank, size, one node,
/// init time 5000, the CUDA device, no bus id, no name, event mask 0x1f4f.
pub fn comm(index: u32, hash: u64, rank: i32, nranks: i32, dev: i32) -> Vec<u8> {
    #[rustfmt::skip]
    let f: [&[u8]; 10] = [&index.to_le_bytes(), &hash.to_le_bytes(), &rank.to_le_bytes(), &nranks.to_le_bytes(),
        &1i32.to_le_bytes(), &5000u64.to_le_bytes(), &dev.to_le_bytes(), &(-1i64).to_le_bytes(), &0u32.to_le_bytes(),
        &0x1f4fu32.to_le_bytes()];
    rec(3, 6, &f)
}

/// An event START: the common part (id, parent, comm, rank 0, no flags, time) and the
/// event type's payload.
pub fn start(ty: u8, id: u64, parent: u64, comm: u32, t: u64, payload: &[&[u8]]) -> Vec<u8> {
    let (a, b, c, r, fl, tt) = (
        id.to_le_bytes(),
        parent.to_le_bytes(),
        comm.to_le_bytes(),
        0i32.to_le_bytes(),
        [0u8],
        t.to_le_bytes(),
    );
    let mut f: Vec<&[u8]> = vec![&a[..], &b[..], &c[..], &r[..], &fl[..], &tt[..]];
    f.extend(payload);
    rec(5, ty, &f)
}
