//! Chakra ET protobuf decoding: the varint32-length-prefixed record stream of a `.et` file
//! (one `GlobalMetadata`, then `Node`s of `ChakraProtoMsg`), decoded by a small hand-written
//! wire-format reader into [`EtNode`]s. Only the fields the workload needs are kept; unknown
//! fields are skipped by wire type. Every malformed byte is an error naming the record and its
//! byte offset, never a panic.

use super::ChakraError;

/// A decoded attribute value (`AttributeProto`'s oneof, scalars only; lists are kept as
/// [`AttrVal::List`] without their values).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AttrVal {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    List,
}

impl AttrVal {
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            AttrVal::Int(v) => Some(*v),
            AttrVal::Bool(b) => Some(*b as i64),
            AttrVal::Float(f) if f.is_finite() => Some(*f as i64),
            AttrVal::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            AttrVal::Bool(b) => Some(*b),
            AttrVal::Int(v) => Some(*v != 0),
            AttrVal::Str(s) => match s.as_str() {
                "true" | "True" | "1" => Some(true),
                "false" | "False" | "0" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<String> {
        match self {
            AttrVal::Str(s) => Some(s.clone()),
            AttrVal::Int(v) => Some(v.to_string()),
            _ => None,
        }
    }
}

/// One `Node` record.
#[derive(Debug, Clone, Default)]
pub(crate) struct EtNode {
    pub id: u64,
    pub name: String,
    /// `NodeType` as its integer.
    pub node_type: u64,
    pub ctrl_deps: Vec<u64>,
    pub data_deps: Vec<u64>,
    pub start_time_micros: Option<u64>,
    pub duration_micros: Option<u64>,
    pub attrs: Vec<(String, AttrVal)>,
}

impl EtNode {
    pub fn attr(&self, name: &str) -> Option<&AttrVal> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// A decoded file: the metadata record (when the file starts with one) and the nodes.
#[derive(Debug, Default)]
pub(crate) struct EtFile {
    pub version: Option<String>,
    pub meta_attrs: Vec<(String, AttrVal)>,
    pub nodes: Vec<EtNode>,
}

/// Cursor over one message's bytes.
struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
}

/// Why a message could not be read (turned into a [`ChakraError`] with file and record).
type WireErr = String;

impl<'a> Rd<'a> {
    fn new(b: &'a [u8]) -> Self {
        Rd { b, pos: 0 }
    }
    fn done(&self) -> bool {
        self.pos >= self.b.len()
    }
    fn varint(&mut self) -> Result<u64, WireErr> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.b.get(self.pos) else {
                return Err(format!("varint cut at byte {} of the message", self.pos));
            };
            self.pos += 1;
            if i == 9 && byte > 1 {
                return Err(format!(
                    "varint longer than 64 bits at byte {}",
                    self.pos - 1
                ));
            }
            v |= ((byte & 0x7f) as u64) << (7 * i);
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err(format!("varint longer than 10 bytes at byte {}", self.pos))
    }
    fn take(&mut self, n: u64) -> Result<&'a [u8], WireErr> {
        let left = self.b.len() - self.pos;
        if n > left as u64 {
            return Err(format!(
                "field of {n} bytes at byte {} runs past the message end ({left} left)",
                self.pos
            ));
        }
        let s = &self.b[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
    /// Next (field number, wire type).
    fn key(&mut self) -> Result<(u64, u8), WireErr> {
        let k = self.varint()?;
        let field = k >> 3;
        let wt = (k & 7) as u8;
        if field == 0 {
            return Err(format!("field number 0 at byte {}", self.pos));
        }
        Ok((field, wt))
    }
    fn skip(&mut self, wt: u8) -> Result<(), WireErr> {
        match wt {
            0 => self.varint().map(|_| ()),
            1 => self.take(8).map(|_| ()),
            2 => {
                let n = self.varint()?;
                self.take(n).map(|_| ())
            }
            5 => self.take(4).map(|_| ()),
            other => Err(format!(
                "unsupported wire type {other} at byte {}",
                self.pos
            )),
        }
    }
}

fn fixed64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))
}
fn fixed32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().unwrap_or([0; 4]))
}
fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Repeated uint64 field, packed (wire type 2) or not (wire type 0).
fn repeated_u64(rd: &mut Rd, wt: u8, out: &mut Vec<u64>) -> Result<(), WireErr> {
    match wt {
        0 => out.push(rd.varint()?),
        2 => {
            let n = rd.varint()?;
            let mut sub = Rd::new(rd.take(n)?);
            while !sub.done() {
                out.push(sub.varint()?);
            }
        }
        other => return Err(format!("dependency list with wire type {other}")),
    }
    Ok(())
}

fn attr(b: &[u8]) -> Result<(String, AttrVal), WireErr> {
    let mut rd = Rd::new(b);
    let mut name = String::new();
    let mut val = AttrVal::List;
    while !rd.done() {
        let (f, wt) = rd.key()?;
        match (f, wt) {
            (1, 2) => {
                let n = rd.varint()?;
                name = String::from_utf8_lossy(rd.take(n)?).into_owned();
            }
            (7 | 9, 0) => val = AttrVal::Int(rd.varint()? as i64),
            (11 | 13, 0) => val = AttrVal::Int(rd.varint()? as i64),
            (15 | 17, 0) => val = AttrVal::Int(zigzag(rd.varint()?)),
            (27, 0) => val = AttrVal::Bool(rd.varint()? != 0),
            (3, 1) => val = AttrVal::Float(f64::from_bits(fixed64(rd.take(8)?))),
            (5, 5) => val = AttrVal::Float(f32::from_bits(fixed32(rd.take(4)?)) as f64),
            (19, 5) => val = AttrVal::Int(fixed32(rd.take(4)?) as i64),
            (23, 5) => val = AttrVal::Int(fixed32(rd.take(4)?) as i32 as i64),
            (21 | 25, 1) => val = AttrVal::Int(fixed64(rd.take(8)?) as i64),
            (29, 2) => {
                let n = rd.varint()?;
                val = AttrVal::Str(String::from_utf8_lossy(rd.take(n)?).into_owned());
            }
            (_, wt) => {
                rd.skip(wt)?;
                if f != 2 {
                    val = AttrVal::List;
                }
            }
        }
    }
    Ok((name, val))
}

fn node(b: &[u8]) -> Result<EtNode, WireErr> {
    let mut rd = Rd::new(b);
    let mut n = EtNode::default();
    while !rd.done() {
        let (f, wt) = rd.key()?;
        match (f, wt) {
            (1, 0) => n.id = rd.varint()?,
            (2, 2) => {
                let len = rd.varint()?;
                n.name = String::from_utf8_lossy(rd.take(len)?).into_owned();
            }
            (3, 0) => n.node_type = rd.varint()?,
            (4, _) => repeated_u64(&mut rd, wt, &mut n.ctrl_deps)?,
            (5, _) => repeated_u64(&mut rd, wt, &mut n.data_deps)?,
            (6, 0) => n.start_time_micros = Some(rd.varint()?),
            (7, 0) => n.duration_micros = Some(rd.varint()?),
            (10, 2) => {
                let len = rd.varint()?;
                n.attrs.push(attr(rd.take(len)?)?);
            }
            (1 | 3 | 6 | 7, _) | (2 | 10, _) => {
                return Err(format!("field {f} has wire type {wt}, not the schema's"));
            }
            (_, wt) => rd.skip(wt)?,
        }
    }
    Ok(n)
}

/// Whether a message reads as `GlobalMetadata` (field 1 a string, field 2 messages, nothing
/// else) rather than a `Node` (field 1 a varint id).
fn metadata(b: &[u8]) -> Option<(String, Vec<(String, AttrVal)>)> {
    let mut rd = Rd::new(b);
    let mut version = String::new();
    let mut attrs = Vec::new();
    while !rd.done() {
        let (f, wt) = rd.key().ok()?;
        match (f, wt) {
            (1, 2) => {
                let n = rd.varint().ok()?;
                version = String::from_utf8(rd.take(n).ok()?.to_vec()).ok()?;
            }
            (2, 2) => {
                let n = rd.varint().ok()?;
                attrs.push(attr(rd.take(n).ok()?).ok()?);
            }
            _ => return None,
        }
    }
    Some((version, attrs))
}

/// Decodes a whole `.et` file. `file` names it in errors.
pub(crate) fn parse_et(file: &str, bytes: &[u8]) -> Result<EtFile, ChakraError> {
    if bytes.is_empty() {
        return Err(ChakraError::format(
            file,
            "byte 0",
            "a Chakra ET record stream, found an empty file",
        ));
    }
    let mut out = EtFile::default();
    let mut rd = Rd::new(bytes);
    let mut record = 0usize;
    while !rd.done() {
        let at = rd.pos;
        let len = rd.varint().map_err(|e| {
            ChakraError::format(
                file,
                format!("record {record} (byte {at})"),
                format!("a varint32 record length ({e})"),
            )
        })?;
        if len > u32::MAX as u64 {
            return Err(ChakraError::format(
                file,
                format!("record {record} (byte {at})"),
                format!("a varint32 record length, found {len}"),
            ));
        }
        let body = rd.take(len).map_err(|_| {
            ChakraError::format(
                file,
                format!("record {record} (byte {at})"),
                format!(
                    "{len} bytes of record, but only {} remain (file truncated?)",
                    bytes.len() - rd.pos
                ),
            )
        })?;
        if record == 0 {
            if let Some((version, attrs)) = metadata(body) {
                out.version = Some(version);
                out.meta_attrs = attrs;
                record += 1;
                continue;
            }
        }
        let n = node(body).map_err(|e| {
            ChakraError::format(
                file,
                format!("record {record} (byte {at})"),
                format!("a ChakraProtoMsg.Node: {e}"),
            )
        })?;
        out.nodes.push(n);
        record += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn varints_and_packed_deps() {
        // Node{id=300, type=4, ctrl_deps packed [1, 2], data_deps unpacked 7}
        let mut m = vec![0x08];
        vint(300, &mut m);
        m.extend([0x18, 4, 0x22, 2, 1, 2, 0x28, 7]);
        let n = node(&m).unwrap();
        assert_eq!(
            (n.id, n.node_type, n.ctrl_deps.clone(), n.data_deps.clone()),
            (300, 4, vec![1, 2], vec![7])
        );
        assert_eq!(zigzag(3), -2);
        assert!(Rd::new(&[0xff; 11]).varint().is_err());
    }
}
