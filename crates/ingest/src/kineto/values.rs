//! Lenient value types for Kineto JSON and the vocabulary of PyTorch's
//! communication metadata.
//!
//! Profiler versions disagree on types (`ts` as integer or fractional µs,
//! `tid` as number or string, `Process Group Ranks` as a string `"[0, 1]"` or
//! an array, `Input Dims` nested one or two levels), so every value read
//! here accepts the plausible spellings and turns a surprising one into
//! "absent" instead of failing the whole file. The string forms are parsed
//! byte by byte.

use commlens_core::{DataType, OpKind};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements visitor arms that turn a value of an unexpected type into
/// "absent" (`absent!(NONE; u64 str seq)`), draining containers.
macro_rules! absent {
    ($none:expr; $($kind:ident)*) => { $( absent!(@one $none; $kind); )* };
    (@one $none:expr; u64) => {
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> { Ok($none) }
    };
    (@one $none:expr; i64) => {
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> { Ok($none) }
    };
    (@one $none:expr; f64) => {
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> { Ok($none) }
    };
    (@one $none:expr; str) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> { Ok($none) }
    };
    (@one $none:expr; bool) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> { Ok($none) }
    };
    (@one $none:expr; unit) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> { Ok($none) }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> { Ok($none) }
    };
    (@one $none:expr; seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            drain_seq(seq).map(|_| $none)
        }
    };
    (@one $none:expr; map) => {
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            drain_map(map).map(|_| $none)
        }
    };
}

/// A non-negative integer written as a number or a decimal string.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Num(pub Option<u64>);

impl Num {
    pub fn u32(self) -> Option<u32> {
        self.0.and_then(|v| u32::try_from(v).ok())
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(u64::try_from(v).ok()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num((v >= 0.0 && v.fract() == 0.0 && v < 1.8e19).then_some(v as u64)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                Ok(Num(crate::bytes::dec_u64(v.trim().as_bytes())))
            }
            absent!(Num(None); bool unit seq map);
        }
        d.deserialize_any(V)
    }
}

/// A time in µs (Chrome trace `ts`/`dur`) converted to ns. Integers are
/// exact; fractional numbers are rounded to the nearest ns (exact for the
/// relative timestamps Kineto writes, ~0.25 µs for fractional epoch µs,
/// which f64 cannot hold); strings are parsed exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Micros(pub Option<i64>);

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Micros;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a time in microseconds")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Micros, E> {
                Ok(Micros(i64::try_from(v).ok().and_then(|v| v.checked_mul(1000))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Micros, E> {
                Ok(Micros(v.checked_mul(1000)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Micros, E> {
                let ns = (v * 1000.0).round();
                Ok(Micros((ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Micros, E> {
                Ok(Micros(micros_str_to_ns(v.trim().as_bytes())))
            }
            absent!(Micros(None); bool unit seq map);
        }
        d.deserialize_any(V)
    }
}

/// `"1694128201429795.123"` → ns, exactly (digits beyond ns are truncated).
pub fn micros_str_to_ns(s: &[u8]) -> Option<i64> {
    let (neg, s) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let (int, frac) = match s.iter().position(|&b| b == b'.') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &b""[..]),
    };
    if int.is_empty() || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let whole = i64::try_from(crate::bytes::dec_u64(int)?).ok()?.checked_mul(1000)?;
    let mut sub = 0i64;
    for k in 0..3 {
        sub = sub * 10 + frac.get(k).map_or(0, |d| (d - b'0') as i64);
    }
    let v = whole.checked_add(sub)?;
    Some(if neg { -v } else { v })
}

/// A `pid`/`tid`: a number, or a string (digits are read as the number,
/// `"stream 7"` as 7, other text hashes to a stable id with the top bit set).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Id(pub u64);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a pid or tid")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                Ok(Id(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id(v as u64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Id, E> {
                Ok(Id(v as u64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id(id_from_str(v.as_bytes())))
            }
            absent!(Id(0); bool unit seq map);
        }
        d.deserialize_any(V)
    }
}

pub fn id_from_str(s: &[u8]) -> u64 {
    let digits_at = s.iter().rposition(|b| !b.is_ascii_digit()).map_or(0, |i| i + 1);
    let (head, digits) = s.split_at(digits_at);
    let head_ok = head.is_empty() || head.eq_ignore_ascii_case(b"stream ") || head.eq_ignore_ascii_case(b"stream");
    match crate::bytes::dec_u64(digits) {
        Some(v) if head_ok => v,
        _ => fnv(s) | 1 << 63,
    }
}

pub fn fnv(s: &[u8]) -> u64 {
    s.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A string; numbers are accepted and printed (`"Process Group Name": 0`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Text(pub Option<String>);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(Some(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text(Some(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
                Ok(Text(Some(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Text, E> {
                Ok(Text(Some(v.to_string())))
            }
            absent!(Text(None); bool unit seq map);
        }
        d.deserialize_any(V)
    }
}

/// Global ranks: `[0, 1]` as an array, or the string `"[0, 1, 2]"`.
/// A list PyTorch shortened with `...` is absent (the size stays known elsewhere).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankList(pub Option<Vec<u32>>);

impl<'de> Deserialize<'de> for RankList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RankList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of ranks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RankList, E> {
                Ok(RankList(parse_rank_list(v.as_bytes())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RankList, A::Error> {
                let mut out = Vec::new();
                let mut ok = true;
                while let Some(n) = seq.next_element::<Num>()? {
                    match n.u32() {
                        Some(r) => out.push(r),
                        None => ok = false,
                    }
                }
                Ok(RankList(ok.then_some(out)))
            }
            absent!(RankList(None); u64 i64 f64 bool unit map);
        }
        d.deserialize_any(V)
    }
}

/// `"[0, 1, 2]"` → ranks; `None` when anything but digits, commas, spaces
/// and the brackets appears (`"[0, 1, ..., 127]"`).
pub fn parse_rank_list(s: &[u8]) -> Option<Vec<u32>> {
    let s = crate::bytes::trim_ascii(s);
    let inner = s.strip_prefix(b"[").and_then(|s| s.strip_suffix(b"]")).unwrap_or(s);
    let mut out = Vec::new();
    for part in inner.split(|&b| b == b',') {
        let part = crate::bytes::trim_ascii(part);
        if part.is_empty() {
            continue;
        }
        out.push(u32::try_from(crate::bytes::dec_u64(part)?).ok()?);
    }
    Some(out)
}

/// `grid`/`block`: up to three dimensions; missing ones are 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dim3(pub Option<[u32; 3]>);

impl<'de> Deserialize<'de> for Dim3 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Dim3;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("[x, y, z]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Dim3, A::Error> {
                let mut out = [1u32; 3];
                let mut i = 0;
                while let Some(n) = seq.next_element::<Num>()? {
                    if i < 3 {
                        out[i] = n.u32().unwrap_or(0);
                    }
                    i += 1;
                }
                Ok(Dim3(Some(out)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dim3, E> {
                Ok(Dim3(u32::try_from(v).ok().map(|x| [x, 1, 1])))
            }
            absent!(Dim3(None); i64 f64 str bool unit map);
        }
        d.deserialize_any(V)
    }
}

/// Element count of the first input of `Input Dims` (`[[8, 1024, 8816]]` →
/// 72220672; a tensor list `[[[2, 3], [4]]]` → 10), computed while parsing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FirstNelems(pub Option<u64>);

/// Nested dims value: a dimension, a tensor shape (product) or a list of
/// shapes (sum of products).
struct Shape(Option<u64>, bool);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("tensor dims")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Shape, E> {
                Ok(Shape(Some(v), true))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Shape, E> {
                Ok(Shape(u64::try_from(v).ok(), true))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                let (mut prod, mut sum, mut dims, mut lists) = (Some(1u64), Some(0u64), 0, 0);
                while let Some(Shape(v, is_dim)) = seq.next_element::<Shape>()? {
                    if is_dim {
                        dims += 1;
                        prod = prod.zip(v).and_then(|(p, v)| p.checked_mul(v));
                    } else {
                        lists += 1;
                        sum = sum.zip(v).and_then(|(s, v)| s.checked_add(v));
                    }
                }
                Ok(match (dims, lists) {
                    (0, 0) => Shape(None, false),
                    (_, 0) => Shape(prod, false),
                    (0, _) => Shape(sum, false),
                    _ => Shape(None, false),
                })
            }
            absent!(Shape(None, false); str f64 bool unit map);
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for FirstNelems {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FirstNelems;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of input dims")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FirstNelems, A::Error> {
                let first = seq.next_element::<Shape>()?;
                drain_seq(seq)?;
                Ok(FirstNelems(first.and_then(|s| if s.1 { None } else { s.0 })))
            }
            absent!(FirstNelems(None); str u64 i64 f64 bool unit map);
        }
        d.deserialize_any(V)
    }
}

/// The first string of `Input type` (`["float"]` → `float`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FirstText(pub Option<String>);

impl<'de> Deserialize<'de> for FirstText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FirstText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of type names")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FirstText, A::Error> {
                let first = seq.next_element::<Text>()?;
                drain_seq(seq)?;
                Ok(FirstText(first.and_then(|t| t.0).filter(|s| !s.is_empty())))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FirstText, E> {
                Ok(FirstText(Some(v.to_string())))
            }
            absent!(FirstText(None); u64 i64 f64 bool unit map);
        }
        d.deserialize_any(V)
    }
}

/// PyTorch collective names (`allreduce`, `_allgather_base`,
/// `reduce_scatter_tensor_coalesced`, `nccl:all_to_all`, `barrier`) → kind.
/// `wait` and unknown words are `None`. A barrier is an all-reduce of one
/// element under NCCL.
pub fn op_kind_from_collective(name: &str) -> Option<OpKind> {
    let name = name.strip_prefix("nccl:").unwrap_or(name);
    let mut buf = [0u8; 48];
    let mut n = 0;
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() && n < buf.len() {
            buf[n] = b.to_ascii_lowercase();
            n += 1;
        }
    }
    let w = &buf[..n];
    const TABLE: [(&[u8], OpKind); 12] = [
        (b"allreduce", OpKind::AllReduce),
        (b"allgather", OpKind::AllGather),
        (b"reducescatter", OpKind::ReduceScatter),
        (b"alltoall", OpKind::AllToAll),
        (b"broadcast", OpKind::Broadcast),
        (b"reduce", OpKind::Reduce),
        (b"gather", OpKind::Gather),
        (b"scatter", OpKind::Scatter),
        (b"sendrecv", OpKind::SendRecv),
        (b"send", OpKind::Send),
        (b"recv", OpKind::Recv),
        (b"barrier", OpKind::AllReduce),
    ];
    TABLE.iter().find(|(p, _)| w.starts_with(p)).map(|&(_, k)| k)
}

/// Kineto datatype spellings (`Float`, `BFloat16`, `Long`, `Byte`,
/// `c10::Half`, `signed char`, `Float8_e4m3fn`) → NCCL datatype.
pub fn dtype_from_kineto(name: &str) -> Option<DataType> {
    if let Some(t) = DataType::from_name(name) {
        return Some(t);
    }
    let lower = name.trim().to_ascii_lowercase();
    Some(match lower.as_str() {
        "signed char" | "int8_t" => DataType::Int8,
        "unsigned char" | "uint8_t" | "bool" => DataType::Uint8,
        "long int" | "int64_t" | "long long" => DataType::Int64,
        "int32_t" => DataType::Int32,
        "c10::float8_e4m3fn" => DataType::Float8E4M3,
        "c10::float8_e5m2" => DataType::Float8E5M2,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn de<T: for<'a> Deserialize<'a>>(s: &str) -> T {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn numbers_and_times() {
        assert_eq!(de::<Num>("42"), Num(Some(42)));
        assert_eq!(de::<Num>("\"42\""), Num(Some(42)));
        assert_eq!(de::<Num>("-1"), Num(None));
        assert_eq!(de::<Num>("[1, 2]"), Num(None));
        assert_eq!(de::<Num>("{\"a\": [1]}"), Num(None));
        assert_eq!(de::<Micros>("1661203462602585"), Micros(Some(1_661_203_462_602_585_000)));
        assert_eq!(de::<Micros>("4458676524670.502"), Micros(Some(4_458_676_524_670_502)));
        assert_eq!(de::<Micros>("92.804"), Micros(Some(92_804)));
        assert_eq!(de::<Micros>("\"1694128201429795.1234\""), Micros(Some(1_694_128_201_429_795_123)));
        assert_eq!(micros_str_to_ns(b"-1.5"), Some(-1500));
        assert_eq!(micros_str_to_ns(b"1.x"), None);
        assert_eq!(micros_str_to_ns(b".5"), None);
    }

    #[test]
    fn ids() {
        assert_eq!(de::<Id>("3126441"), Id(3126441));
        assert_eq!(de::<Id>("\"stream 7\""), Id(7));
        assert_eq!(de::<Id>("\"12\""), Id(12));
        let a = de::<Id>("\"PyTorch Profiler\"");
        assert!(a.0 >> 63 == 1 && a == de::<Id>("\"PyTorch Profiler\""));
    }

    #[test]
    fn rank_lists() {
        assert_eq!(de::<RankList>("\"[0, 1]\""), RankList(Some(vec![0, 1])));
        assert_eq!(de::<RankList>("[4, 5, 6]"), RankList(Some(vec![4, 5, 6])));
        assert_eq!(de::<RankList>("\"[]\""), RankList(Some(vec![])));
        assert_eq!(de::<RankList>("\"[0, 1, ..., 127]\""), RankList(None));
        assert_eq!(de::<RankList>("7"), RankList(None));
    }

    #[test]
    fn dims() {
        assert_eq!(de::<Dim3>("[24, 1, 1]"), Dim3(Some([24, 1, 1])));
        assert_eq!(de::<Dim3>("[8]"), Dim3(Some([8, 1, 1])));
        assert_eq!(de::<FirstNelems>("[[8, 1024, 8816]]"), FirstNelems(Some(8 * 1024 * 8816)));
        assert_eq!(de::<FirstNelems>("[[45310188], [], []]"), FirstNelems(Some(45310188)));
        assert_eq!(de::<FirstNelems>("[[[2, 3], [4]], [1]]"), FirstNelems(Some(10)));
        assert_eq!(de::<FirstNelems>("[[], [], []]"), FirstNelems(None));
        assert_eq!(de::<FirstNelems>("[]"), FirstNelems(None));
        assert_eq!(de::<FirstText>("[\"float\", \"\"]"), FirstText(Some("float".into())));
        assert_eq!(de::<FirstText>("[\"\", \"Scalar\"]"), FirstText(None));
    }

    #[test]
    fn collective_names() {
        use OpKind::*;
        for (name, kind) in [
            ("allreduce", Some(AllReduce)),
            ("nccl:all_reduce", Some(AllReduce)),
            ("allreduce_coalesced", Some(AllReduce)),
            ("_allgather_base", Some(AllGather)),
            ("nccl:_all_gather_base", Some(AllGather)),
            ("allgather_into_tensor_coalesced", Some(AllGather)),
            ("reduce_scatter_tensor_coalesced", Some(ReduceScatter)),
            ("nccl:_reduce_scatter_base", Some(ReduceScatter)),
            ("reduce", Some(Reduce)),
            ("broadcast", Some(Broadcast)),
            ("nccl:all_to_all", Some(AllToAll)),
            ("alltoall_base", Some(AllToAll)),
            ("gather", Some(Gather)),
            ("scatter", Some(Scatter)),
            ("send", Some(Send)),
            ("recv", Some(Recv)),
            ("recvAnySource", Some(Recv)),
            ("barrier", Some(AllReduce)),
            ("wait", None),
            ("", None),
        ] {
            assert_eq!(op_kind_from_collective(name), kind, "{name}");
        }
    }

    #[test]
    fn kineto_dtypes() {
        for (name, t) in [
            ("Float", DataType::Float32),
            ("BFloat16", DataType::Bfloat16),
            ("c10::BFloat16", DataType::Bfloat16),
            ("c10::Half", DataType::Float16),
            ("Long", DataType::Int64),
            ("Byte", DataType::Uint8),
            ("signed char", DataType::Int8),
            ("float", DataType::Float32),
            ("long int", DataType::Int64),
            ("Float8_e4m3fn", DataType::Float8E4M3),
        ] {
            assert_eq!(dtype_from_kineto(name), Some(t), "{name}");
        }
        assert_eq!(dtype_from_kineto("ComplexFloat"), None);
    }
}
