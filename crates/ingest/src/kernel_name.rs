//! NCCL kernel names → operation, reduction op, datatype, algorithm and
//! protocol, for every reader of GPU traces (Kineto, Nsight Systems).
//!
//! Three generations of names exist:
//!
//! * `ncclDevKernel_<Coll>_<Op>_<type>_<ALGO>_<PROTO>` (NCCL ≥ 2.19), e.g.
//!   `ncclDevKernel_AllReduce_Sum_f32_RING_LL`, plus the untyped
//!   `ncclDevKernel_AllGather_RING_LL`, `ncclDevKernel_SendRecv` and
//!   `ncclDevKernel_Generic` (any collective: the kind comes from elsewhere);
//! * `ncclKernel_<Coll>_<ALGO>_<PROTO>_<Op>_<type>`, optionally followed by a
//!   parameter list, e.g. `ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)`;
//! * (unverified, NCCL ≤ 2.7) `nccl<Coll><Algo><Proto>Kernel_<op>_<type>`,
//!   e.g. `ncclAllReduceRingLLKernel_sum_f32`.
//!
//! Field order differs between generations and the thesis even quotes a mixed
//! form (`ncclDevKernel_AllReduce_RING_LL_Sum_int8`), so after the collective
//! every `_`-separated field is recognised by what it is, not where it is.
//! Matching is case-insensitive (`F16`, `f16`), longest spelling first
//! (`LL128` before `LL`, `int8_t` before `int8`), and only at field
//! boundaries. Unknown fields are counted, never guessed. Parsing works on
//! bytes and allocates nothing.

use commlens_core::{Algorithm, DataType, OpKind, Protocol, RedOp};
use serde::Serialize;

/// Which naming generation a kernel name belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum KernelFamily {
    /// `ncclDevKernel_…` (NCCL ≥ 2.19).
    DevKernel,
    /// `ncclKernel_…` (NCCL 2.8–2.18).
    Kernel,
    /// `ncclAllReduceRingLLKernel_…` (older; unverified spelling).
    Legacy,
}

/// What an NCCL kernel name says. Fields the name does not carry are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KernelName {
    pub family: KernelFamily,
    /// `None` for `Generic` kernels and unknown collective words.
    pub kind: Option<OpKind>,
    /// `ncclDevKernel_Generic`: runs whatever work NCCL queued.
    pub generic: bool,
    pub redop: Option<RedOp>,
    /// The type the kernel is specialised for (`SendRecv`/`Broadcast` kernels
    /// of older releases carry a placeholder `int8_t`).
    pub dtype: Option<DataType>,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    /// Fields that matched nothing (numbers such as `Generic_1` excluded).
    pub unknown_fields: u8,
}

#[derive(Clone, Copy)]
enum Field {
    Algo(Algorithm),
    Proto(Protocol),
    Red(RedOp),
    /// `copy` of the legacy names: a known word without a reduction.
    NoRed,
    Type(DataType),
}

/// Every field spelling, longest first within a prefix family (the scan
/// tries them in order and requires a boundary after the match).
const FIELDS: &[(&[u8], Field)] = {
    use Algorithm as A;
    use DataType as D;
    use Field::*;
    &[
        (b"COLLNET_DIRECT", Algo(A::CollNetDirect)),
        (b"COLLNET_CHAIN", Algo(A::CollNetChain)),
        (b"COLLNETDIRECT", Algo(A::CollNetDirect)),
        (b"COLLNETCHAIN", Algo(A::CollNetChain)),
        (b"COLLNET", Algo(A::CollNetDirect)),
        (b"NVLS_TREE", Algo(A::NvlsTree)),
        (b"NVLSTREE", Algo(A::NvlsTree)),
        (b"NVLS", Algo(A::Nvls)),
        (b"RING", Algo(A::Ring)),
        (b"TREE", Algo(A::Tree)),
        (b"PAT", Algo(A::Pat)),
        (b"LL128", Proto(Protocol::Ll128)),
        (b"LL", Proto(Protocol::Ll)),
        (b"SIMPLE", Proto(Protocol::Simple)),
        (b"PreMulSum", Red(RedOp::Avg)),
        (b"SumPostDiv", Red(RedOp::Avg)),
        (b"Sum", Red(RedOp::Sum)),
        (b"Prod", Red(RedOp::Prod)),
        (b"Max", Red(RedOp::Max)),
        (b"Min", Red(RedOp::Min)),
        (b"Avg", Red(RedOp::Avg)),
        (b"copy", NoRed),
        (b"__nv_bfloat16", Type(D::Bfloat16)),
        (b"__nv_fp8_e4m3", Type(D::Float8E4M3)),
        (b"__nv_fp8_e5m2", Type(D::Float8E5M2)),
        (b"bfloat16", Type(D::Bfloat16)),
        (b"bf16", Type(D::Bfloat16)),
        (b"fp8_e4m3", Type(D::Float8E4M3)),
        (b"fp8_e5m2", Type(D::Float8E5M2)),
        (b"f8e4m3", Type(D::Float8E4M3)),
        (b"f8e5m2", Type(D::Float8E5M2)),
        (b"uint8_t", Type(D::Uint8)),
        (b"uint32_t", Type(D::Uint32)),
        (b"uint64_t", Type(D::Uint64)),
        (b"int8_t", Type(D::Int8)),
        (b"int32_t", Type(D::Int32)),
        (b"int64_t", Type(D::Int64)),
        (b"uint8", Type(D::Uint8)),
        (b"uint32", Type(D::Uint32)),
        (b"uint64", Type(D::Uint64)),
        (b"int8", Type(D::Int8)),
        (b"int32", Type(D::Int32)),
        (b"int64", Type(D::Int64)),
        (b"float16", Type(D::Float16)),
        (b"float32", Type(D::Float32)),
        (b"float64", Type(D::Float64)),
        (b"float", Type(D::Float32)),
        (b"double", Type(D::Float64)),
        (b"half", Type(D::Float16)),
        (b"fp16", Type(D::Float16)),
        (b"fp32", Type(D::Float32)),
        (b"fp64", Type(D::Float64)),
        (b"f16", Type(D::Float16)),
        (b"f32", Type(D::Float32)),
        (b"f64", Type(D::Float64)),
        (b"u8", Type(D::Uint8)),
        (b"u32", Type(D::Uint32)),
        (b"u64", Type(D::Uint64)),
        (b"i8", Type(D::Int8)),
        (b"i32", Type(D::Int32)),
        (b"i64", Type(D::Int64)),
    ]
};

/// Collective words of the legacy form, longest first (`ReduceScatter`
/// before `Reduce`, `SendRecv` before `Send`).
const LEGACY_OPS: &[(&[u8], OpKind)] = &[
    (b"ReduceScatter", OpKind::ReduceScatter),
    (b"AllReduce", OpKind::AllReduce),
    (b"AllGather", OpKind::AllGather),
    (b"Broadcast", OpKind::Broadcast),
    (b"SendRecv", OpKind::SendRecv),
    (b"Reduce", OpKind::Reduce),
    (b"Send", OpKind::Send),
    (b"Recv", OpKind::Recv),
];

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

fn starts_with_ci(s: &[u8], p: &[u8]) -> bool {
    s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p)
}

/// The name up to its parameter list or template arguments.
fn body_end(s: &[u8]) -> usize {
    s.iter().position(|&b| matches!(b, b'(' | b'<' | b' ')).unwrap_or(s.len())
}

/// Whether `name` is an NCCL kernel of any generation.
pub fn is_nccl_kernel(name: &[u8]) -> bool {
    parse(name).is_some()
}

/// Parses an NCCL kernel name (demangled or short). `None` when the name is
/// not an NCCL kernel at all; a name of the right family with unknown fields
/// still parses (with `unknown_fields > 0`).
pub fn parse(name: &[u8]) -> Option<KernelName> {
    if let Some(i) = find(name, b"ncclDevKernel_") {
        let rest = &name[i + b"ncclDevKernel_".len()..];
        return Some(parse_fields(KernelFamily::DevKernel, &rest[..body_end(rest)]));
    }
    if let Some(i) = find(name, b"ncclKernel_") {
        let rest = &name[i + b"ncclKernel_".len()..];
        return Some(parse_fields(KernelFamily::Kernel, &rest[..body_end(rest)]));
    }
    parse_legacy(name)
}

fn empty(family: KernelFamily) -> KernelName {
    KernelName {
        family,
        kind: None,
        generic: false,
        redop: None,
        dtype: None,
        algo: None,
        proto: None,
        unknown_fields: 0,
    }
}

/// `<Coll>_<field>_<field>…` of the two underscore generations.
fn parse_fields(family: KernelFamily, body: &[u8]) -> KernelName {
    let mut k = empty(family);
    let coll_end = body.iter().position(|&b| b == b'_').unwrap_or(body.len());
    let coll = &body[..coll_end];
    if coll == b"Generic" {
        k.generic = true;
    } else {
        k.kind = OpKind::from_name(coll);
        if k.kind.is_none() {
            k.unknown_fields += 1;
        }
    }
    scan_fields(&mut k, body.get(coll_end + 1..).unwrap_or(&[]));
    k
}

/// Recognises `_`-separated fields in any order.
fn scan_fields(k: &mut KernelName, mut s: &[u8]) {
    while !s.is_empty() {
        let matched = FIELDS.iter().find(|(p, _)| starts_with_ci(s, p) && (s.len() == p.len() || s[p.len()] == b'_'));
        let used = match matched {
            Some((p, f)) => {
                match *f {
                    Field::Algo(a) => k.algo = Some(a),
                    Field::Proto(p) => k.proto = Some(p),
                    Field::Red(r) => k.redop = Some(r),
                    Field::NoRed => {}
                    Field::Type(t) => k.dtype = Some(t),
                }
                p.len()
            }
            None => {
                let end = s.iter().position(|&b| b == b'_').unwrap_or(s.len());
                if end > 0 && !s[..end].iter().all(u8::is_ascii_digit) {
                    k.unknown_fields = k.unknown_fields.saturating_add(1);
                }
                end
            }
        };
        s = s.get(used + 1..).unwrap_or(&[]);
    }
}

/// `ncclAllReduceRingLLKernel_sum_f32`: collective, algorithm and protocol
/// glued before `Kernel`, then `_op_type`.
fn parse_legacy(name: &[u8]) -> Option<KernelName> {
    let start = find(name, b"nccl")?;
    let s = &name[start + 4..];
    let (word, kind) = LEGACY_OPS.iter().find(|(w, _)| s.starts_with(w))?;
    let mut rest = &s[word.len()..];
    let kpos = find(rest, b"Kernel")?;
    let mut k = empty(KernelFamily::Legacy);
    k.kind = Some(*kind);
    let mut glued = &rest[..kpos];
    for (w, a) in [(&b"CollNet"[..], Algorithm::CollNetDirect), (b"Ring", Algorithm::Ring), (b"Tree", Algorithm::Tree)]
    {
        if let Some(r) = glued.strip_prefix(w) {
            k.algo = Some(a);
            glued = r;
            break;
        }
    }
    for (w, p) in [(&b"LL128"[..], Protocol::Ll128), (b"LL", Protocol::Ll), (b"Simple", Protocol::Simple)] {
        if let Some(r) = glued.strip_prefix(w) {
            k.proto = Some(p);
            glued = r;
            break;
        }
    }
    if !glued.is_empty() {
        return None;
    }
    rest = &rest[kpos + b"Kernel".len()..];
    let rest = &rest[..body_end(rest)];
    match rest.strip_prefix(b"_") {
        Some(fields) => scan_fields(&mut k, fields),
        None if rest.is_empty() => {}
        None => return None,
    }
    Some(k)
}

/// Kernels that communicate but are not NCCL's: symmetric-memory
/// `multimem_all_reduce`, custom all-reduce kernels of inference engines.
/// Counted so that a trace whose collectives bypass NCCL says so.
pub fn is_other_comm_kernel(name: &[u8], scratch: &mut Vec<u8>) -> bool {
    const WORDS: [&[u8]; 10] = [
        b"multimem",
        b"all_reduce",
        b"allreduce",
        b"all_gather",
        b"allgather",
        b"reduce_scatter",
        b"reducescatter",
        b"alltoall",
        b"all_to_all",
        b"cross_device_reduce",
    ];
    scratch.clear();
    scratch.extend(name.iter().map(u8::to_ascii_lowercase));
    WORDS.iter().any(|w| find(scratch, w).is_some()) && parse(name).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> KernelName {
        parse(s.as_bytes()).unwrap_or_else(|| panic!("not parsed: {s}"))
    }

    /// `kind redop dtype algo proto`, `-` where absent.
    fn show(k: &KernelName) -> String {
        fn o<T>(v: Option<T>, f: fn(T) -> &'static str) -> &'static str {
            v.map_or("-", f)
        }
        let f = [o(k.kind, OpKind::name), o(k.redop, RedOp::name), o(k.dtype, DataType::name)];
        format!("{} {} {} {} {}", f[0], f[1], f[2], o(k.algo, Algorithm::name), o(k.proto, Protocol::name))
    }

    fn check(rows: &[(&str, &str)], family: KernelFamily) {
        for &(name, want) in rows {
            let k = p(name);
            assert_eq!((k.family, show(&k).as_str()), (family, want), "{name}");
            assert!(!k.generic, "{name}");
            assert_eq!(k.unknown_fields, name.contains("MinMax") as u8, "{name}");
        }
    }

    #[test]
    fn dev_kernel_forms() {
        #[rustfmt::skip]
        let rows = [
            ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "AllReduce sum float32 RING LL"),
            ("ncclDevKernel_AllReduce_Sum_F16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", "AllReduce sum float16 RING LL"),
            ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "AllGather - - RING LL"),
            ("ncclDevKernel_AllReduce_RING_LL_Sum_int8", "AllReduce sum int8 RING LL"),
            ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128", "ReduceScatter sum bfloat16 RING LL128"),
            ("ncclDevKernel_AllReduce_Sum_bf16_NVLS_TREE_SIMPLE", "AllReduce sum bfloat16 NVLS_TREE SIMPLE"),
            ("ncclDevKernel_AllReduce_Sum_f32_NVLS_SIMPLE", "AllReduce sum float32 NVLS SIMPLE"),
            ("ncclDevKernel_AllReduce_MinMax_u8_TREE_LL", "AllReduce - uint8 TREE LL"),
            ("ncclDevKernel_AllReduce_PreMulSum_f16_COLLNET_DIRECT_SIMPLE", "AllReduce avg float16 COLLNET_DIRECT SIMPLE"),
            ("ncclDevKernel_AllReduce_Sum_f64_COLLNET_CHAIN_SIMPLE", "AllReduce sum float64 COLLNET_CHAIN SIMPLE"),
            ("ncclDevKernel_ReduceScatter_Sum_f8e4m3_PAT_SIMPLE", "ReduceScatter sum float8e4m3 PAT SIMPLE"),
            ("ncclDevKernel_AllGather_Sum_f8e5m2_PAT_SIMPLE", "AllGather sum float8e5m2 PAT SIMPLE"),
            ("ncclDevKernel_AllGather_PAT_SIMPLE", "AllGather - - PAT SIMPLE"),
            ("ncclDevKernel_Broadcast_RING_LL", "Broadcast - - RING LL"),
            ("ncclDevKernel_Reduce_Prod_i64_RING_LL", "Reduce prod int64 RING LL"),
            ("ncclDevKernel_Reduce_Min_i32_RING_LL", "Reduce min int32 RING LL"),
            ("ncclDevKernel_AllReduce_Sum_u64_RING_SIMPLE", "AllReduce sum uint64 RING SIMPLE"),
            ("ncclDevKernel_SendRecv", "SendRecv - - - -"),
            ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "SendRecv - - - -"),
            ("void ncclDevKernel_AllReduce_Max_u32_TREE_LL128(ncclDevKernelArgsStorage<4096ul>)", "AllReduce max uint32 TREE LL128"),
        ];
        check(&rows, KernelFamily::DevKernel);
    }

    #[test]
    fn kernel_forms() {
        #[rustfmt::skip]
        let rows = [
            ("ncclKernel_AllReduce_RING_LL_Sum_float", "AllReduce sum float32 RING LL"),
            ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "AllReduce sum float32 RING LL"),
            ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "AllReduce sum float32 RING LL"),
            ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "Broadcast sum int8 RING LL"),
            ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "SendRecv sum int8 RING SIMPLE"),
            ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "SendRecv sum int8 RING SIMPLE"),
            ("ncclKernel_AllReduce_TREE_LL128_Prod_half", "AllReduce prod float16 TREE LL128"),
            ("ncclKernel_ReduceScatter_RING_SIMPLE_Sum___nv_bfloat16", "ReduceScatter sum bfloat16 RING SIMPLE"),
            ("ncclKernel_AllGather_RING_LL_Sum_uint64_t", "AllGather sum uint64 RING LL"),
            ("ncclKernel_AllReduce_COLLNET_SIMPLE_SumPostDiv_double", "AllReduce avg float64 COLLNET_DIRECT SIMPLE"),
            ("ncclKernel_Reduce_RING_LL_Min_int32_t", "Reduce min int32 RING LL"),
            ("ncclKernel_AllReduce_RING_LL128_Max_uint8_t", "AllReduce max uint8 RING LL128"),
            ("ncclKernel_AllReduce_TREE_SIMPLE_Sum_int64_t", "AllReduce sum int64 TREE SIMPLE"),
            ("ncclKernel_AllReduce_RING_LL_Sum_uint32_t", "AllReduce sum uint32 RING LL"),
            ("ncclKernel_AllReduce_RING_LL_Sum___nv_fp8_e4m3", "AllReduce sum float8e4m3 RING LL"),
        ];
        check(&rows, KernelFamily::Kernel);
    }

    #[test]
    fn legacy_forms() {
        #[rustfmt::skip]
        let rows = [
            ("ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)", "AllReduce sum float32 RING LL"),
            ("ncclBroadcastRingLLKernel_copy_i8", "Broadcast - int8 RING LL"),
            ("ncclReduceScatterTreeLL128Kernel_max_f16", "ReduceScatter max float16 TREE LL128"),
            ("ncclAllGatherRingKernel_copy_u8", "AllGather - uint8 RING -"),
        ];
        check(&rows, KernelFamily::Legacy);
    }

    #[test]
    fn generic_and_numbered() {
        for name in [
            "ncclDevKernel_Generic",
            "ncclDevKernel_Generic_1",
            "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
        ] {
            let k = p(name);
            assert!(k.generic && k.kind.is_none() && k.unknown_fields == 0, "{name}");
        }
    }

    #[test]
    fn unknown_fields_are_counted_not_guessed() {
        let k = p("ncclDevKernel_AllReduce_Sum_f33_RING_LL256");
        assert_eq!((k.dtype, k.proto, k.unknown_fields), (None, None, 2));
        let k = p("ncclDevKernel_Frobnicate_Sum_f32");
        assert_eq!((k.kind, k.redop, k.dtype, k.unknown_fields), (None, Some(RedOp::Sum), Some(DataType::Float32), 1));
        // Boundaries: `float16` is not `float` + junk, `LL128` is not `LL` + junk.
        let k = p("ncclKernel_AllReduce_RING_LL128_Sum_float16");
        assert_eq!((k.proto, k.dtype), (Some(Protocol::Ll128), Some(DataType::Float16)));
        // Empty and degenerate bodies.
        assert_eq!(p("ncclKernel_").kind, None);
        assert_eq!(p("ncclDevKernel__").unknown_fields, 1);
    }

    #[test]
    fn non_nccl_names() {
        for name in [
            "",
            "nccl",
            "ampere_sgemm_128x64_nn",
            "void at::native::vectorized_elementwise_kernel<4>",
            "ncclAllReduce", // an API name, not a kernel
            "ncclFooKernel_sum_f32",
            "ncclAllReduceWeirdKernel_sum_f32",
            "ncclAllReduceRingLLKernelX",
        ] {
            assert!(parse(name.as_bytes()).is_none(), "{name}");
        }
    }

    #[test]
    fn other_comm_kernels() {
        let mut s = Vec::new();
        assert!(is_other_comm_kernel(
            b"void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 8, 16>",
            &mut s
        ));
        assert!(is_other_comm_kernel(b"void vllm::cross_device_reduce_1stage<half, 8>", &mut s));
        assert!(!is_other_comm_kernel(b"ncclDevKernel_AllReduce_Sum_f32_RING_LL", &mut s));
        assert!(!is_other_comm_kernel(b"ampere_sgemm_128x64_nn", &mut s));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let alphabet = b"ncclDevKernel_AllReduce_Sum_f32_RING_LL(<_ \xff";
        for _ in 0..5000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 48) as usize;
            let bytes: Vec<u8> =
                (0..len).map(|i| alphabet[((seed >> (i % 50)) as usize + i) % alphabet.len()]).collect();
            let _ = parse(&bytes);
        }
    }
}
