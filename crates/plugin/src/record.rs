//! The on-disk format, writer side: header line, chunk framing, record kinds
//! and the fixed-buffer record encoder. `FORMAT.md` is the specification;
//! `commlens_ingest::plugin_out` is the independent reader.
//!
//! A record is `u16 len | u8 kind | u8 sub | fields…`, little-endian, `len`
//! counting the whole record. Records are built on the stack ([`Enc`]) and then
//! copied into the thread's ring in one piece.

/// First word of the header line.
pub const MAGIC: &str = "commlens-plugin";
/// Format version written in the header line (`commlens-plugin v1 …`).
pub const VERSION: &str = "v1";
/// Chunk header: `"CHNK" | u32 thread | u32 payload_len | u32 reserved`.
pub const CHUNK_MAGIC: [u8; 4] = *b"CHNK";
pub const CHUNK_HEADER_LEN: usize = 16;
/// Longest record the encoder builds (a v7 Coll start is 112 bytes).
pub const MAX_RECORD: usize = 160;
/// Longest string stored (longer C strings are cut).
pub const MAX_STRING: usize = 255;

/// Record kinds (the `kind` byte).
pub mod kind {
    /// `u32 id | bytes`: interned string (function, datatype, algorithm, … names).
    pub const STRING: u8 = 1;
    /// `u32 thread | u32 os_tid`: a thread that emitted events.
    pub const THREAD: u8 = 2;
    /// sub = API version; `u32 comm | u64 comm_hash | i32 rank | i32 nranks | i32 nnodes | u64 t |
    /// i32 cuda_dev | i64 bus_id | u32 name | u32 mask`.
    pub const COMM_INIT: u8 = 3;
    /// `u32 comm | u64 t`.
    pub const COMM_FINI: u8 = 4;
    /// sub = event-type bit index; `u64 id | u64 parent | u32 comm | i32 rank | u8 flags | u64 t | payload`.
    pub const START: u8 = 5;
    /// `u64 id | u64 t`.
    pub const STOP: u8 = 6;
    /// sub = 1 when args were given; `u64 id | u64 t | i32 state | u64 arg`.
    pub const STATE: u8 = 7;
    /// `u32 thread | u64 total`: records dropped so far by a full thread buffer.
    pub const DROPS: u8 = 8;
    /// `u64 t | u64 total_drops | u64 panics`: written when the last communicator is finalized and at exit.
    pub const END: u8 = 9;
}

/// Bits of the START `flags` byte.
pub mod flag {
    /// `parent` is another process's handle (PXN): kept as a number, never dereferenced.
    pub const PARENT_FOREIGN: u8 = 1;
    /// The context belongs to another process (PXN) or is not one of ours; `comm` is 0.
    pub const CTX_FOREIGN: u8 = 2;
    /// NCCL passed a NULL context; `comm` is 0.
    pub const CTX_NULL: u8 = 4;
}

/// A record under construction, on the stack.
pub struct Enc {
    buf: [u8; MAX_RECORD],
    n: usize,
}

impl Enc {
    #[inline]
    pub fn new(kind: u8, sub: u8) -> Enc {
        let mut buf = [0u8; MAX_RECORD];
        buf[2] = kind;
        buf[3] = sub;
        Enc { buf, n: 4 }
    }

    #[inline]
    fn put<const N: usize>(&mut self, b: [u8; N]) {
        self.buf[self.n..self.n + N].copy_from_slice(&b);
        self.n += N;
    }

    #[inline]
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.put([v]);
        self
    }
    #[inline]
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.put(v.to_le_bytes());
        self
    }
    #[inline]
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.put(v.to_le_bytes());
        self
    }
    #[inline]
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.put(v.to_le_bytes());
        self
    }
    #[inline]
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.put(v.to_le_bytes());
        self
    }

    /// Appends raw bytes (cut to what still fits).
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        let k = b.len().min(MAX_RECORD - self.n);
        self.buf[self.n..self.n + k].copy_from_slice(&b[..k]);
        self.n += k;
        self
    }

    /// The finished record with its length written in.
    #[inline]
    pub fn finish(&mut self) -> &[u8] {
        let n = self.n as u16;
        self.buf[..2].copy_from_slice(&n.to_le_bytes());
        &self.buf[..self.n]
    }
}

/// The header line (without the newline): `commlens-plugin v1 key=value …`.
pub fn header_line(fields: &[(&str, String)]) -> String {
    let mut s = format!("{MAGIC} {VERSION}");
    for (k, v) in fields {
        s.push(' ');
        s.push_str(k);
        s.push('=');
        s.push_str(v);
    }
    s
}

/// Chunk header bytes.
pub fn chunk_header(thread: u32, payload_len: u32) -> [u8; CHUNK_HEADER_LEN] {
    let mut h = [0u8; CHUNK_HEADER_LEN];
    h[..4].copy_from_slice(&CHUNK_MAGIC);
    h[4..8].copy_from_slice(&thread.to_le_bytes());
    h[8..12].copy_from_slice(&payload_len.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_little_endian_with_length() {
        let mut e = Enc::new(kind::STOP, 0);
        e.u64(0x0102_0304_0506_0708).u64(7);
        let r = e.finish();
        assert_eq!(r.len(), 20);
        assert_eq!(&r[..4], &[20, 0, kind::STOP, 0]);
        assert_eq!(&r[4..12], &[8, 7, 6, 5, 4, 3, 2, 1]);
    }

    #[test]
    fn header_and_chunk() {
        let h = header_line(&[("pid", "12".into()), ("host", "n1".into())]);
        assert_eq!(h, "commlens-plugin v1 pid=12 host=n1");
        let c = chunk_header(3, 0x100);
        assert_eq!(&c[..4], b"CHNK");
        assert_eq!(u32::from_le_bytes(c[4..8].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(c[8..12].try_into().unwrap()), 0x100);
    }
}
