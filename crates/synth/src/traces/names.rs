//! Names and launch configurations of the generated kernels, and PyTorch's vocabulary.
//!
//! Owns the NCCL kernel name of an operation by NCCL generation (`ncclDevKernel_*` from 2.19,
//! `ncclKernel_*` before; see `shared/reference/nsys-and-kineto.md` §5 and the real Kineto
//! traces: `ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)` in 2.27.5,
//! `ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)` and
//! `ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)` in 2.17), the protocol and
//! channel count the log's tuning line chose, grid/block/shared memory as observed (block 544
//! for LL all-reduce, 512 for other LL kernels, 640 otherwise; 96 registers), the compute
//! kernels of an A100 Megatron step (cuBLAS `ampere_bf16_s16816gemm…`, CUTLASS, PyTorch
//! elementwise and reduction kernels, the Adam multi-tensor kernel) and the `record_param_comms`
//! metadata words (collective names, dtype names, process-group descriptions).

use crate::sim::tuning_text;

/// Protocol word and channel count of a collective, exactly as the tuning line says.
pub(super) fn tuning(name: &str, bytes: u64, nranks: usize, channels: usize) -> (&'static str, u32) {
    let t = tuning_text(name, bytes, nranks, channels);
    let proto = ["SIMPLE", "LL128", "LL"].into_iter().find(|p| t.contains(&format!("proto {p} "))).unwrap_or("SIMPLE");
    let nc = t.rsplit("={0..").next().and_then(|s| s.trim_end_matches('}').parse::<u32>().ok()).unwrap_or(0) + 1;
    (proto, nc)
}

fn dtype_new(dt: u8) -> &'static str {
    ["i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2"]
        .get(dt as usize)
        .copied()
        .unwrap_or("i8")
}

fn dtype_old(dt: u8) -> &'static str {
    ["int8_t", "uint8_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "half", "float", "double", "__nv_bfloat16"]
        .get(dt as usize)
        .copied()
        .unwrap_or("int8_t")
}

fn redop_word(op: u8, dt: u8) -> &'static str {
    match op {
        1 => "Prod",
        2 => "Max",
        3 => "Min",
        // Average: floating types pre-multiply, integer types divide after the sum.
        4 if matches!(dt, 6..=11) => "PreMulSum",
        4 => "SumPostDiv",
        _ => "Sum",
    }
}

fn reduces(name: &str) -> bool {
    matches!(name, "AllReduce" | "ReduceScatter" | "Reduce")
}

/// Demangled NCCL kernel name of a collective (`name` = log name) or of a Send/Recv group
/// (`name` = `SendRecv`).
pub(super) fn nccl_kernel(new_family: bool, name: &str, dtype: u8, redop: u8, proto: &str) -> String {
    if new_family {
        let args = "(ncclDevKernelArgsStorage<4096ul>)";
        if name == "SendRecv" {
            format!("ncclDevKernel_SendRecv{args}")
        } else if reduces(name) {
            format!("ncclDevKernel_{name}_{}_{}_RING_{proto}{args}", redop_word(redop, dtype), dtype_new(dtype))
        } else {
            format!("ncclDevKernel_{name}_RING_{proto}{args}")
        }
    } else if name == "SendRecv" {
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)".to_string()
    } else if reduces(name) {
        format!("ncclKernel_{name}_RING_{proto}_{}_{}(ncclWorkElem)", redop_word(redop, dtype), dtype_old(dtype))
    } else {
        // Broadcast/AllGather kernels of these releases carry a placeholder Sum/int8_t.
        format!("ncclKernel_{name}_RING_{proto}_Sum_int8_t(ncclWorkElem)")
    }
}

/// The name up to its parameter list (nsys `shortName`).
pub(super) fn short_name(name: &str) -> String {
    let s = name.strip_prefix("void ").unwrap_or(name);
    s.split(['(', '<']).next().unwrap_or(s).to_string()
}

/// (grid, block, static smem, dynamic smem) of an NCCL kernel.
pub(super) fn nccl_launch(new_family: bool, name: &str, proto: &str, channels: u32) -> ([u32; 3], [u32; 3], u32, u32) {
    let threads = match proto {
        "LL" if name == "AllReduce" => 544,
        "LL" => 512,
        _ => 640,
    };
    let (ss, ds) = if new_family { (7104, 82240) } else { (0, 42024) };
    ([channels.max(1), 1, 1], [threads, 1, 1], ss, ds)
}

/// One compute kernel: (demangled name, grid, block, registers).
pub(super) type ComputeKernel = (&'static str, [u32; 3], [u32; 3], u32);

const GEMMS: &[ComputeKernel] = &[
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", [96, 2, 1], [256, 1, 1], 230),
    ("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn", [48, 4, 1], [256, 1, 1], 238),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nt_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nt_align8::Params)",
        [64, 8, 1],
        [128, 1, 1],
        168,
    ),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_nt", [128, 2, 1], [128, 1, 1], 202),
];

const POINTWISE: &[ComputeKernel] = &[
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)",
        [1728, 1, 1],
        [128, 1, 1],
        26,
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
        [1728, 1, 1],
        [128, 1, 1],
        30,
    ),
    (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)",
        [4096, 1, 1],
        [1024, 1, 1],
        40,
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)",
        [108, 1, 1],
        [512, 1, 1],
        32,
    ),
];

const ADAM: ComputeKernel = (
    "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float>(long, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float)",
    [320, 1, 1],
    [512, 1, 1],
    64,
);

const INIT: ComputeKernel = (
    "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl*, at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl*>(at::TensorBase const&, double, double, at::CUDAGeneratorImpl*)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::CUDAGeneratorImpl*, at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl*>(at::TensorBase const&, double, double, at::CUDAGeneratorImpl*)::{lambda()#2}::operator()() const::{lambda(float)#1})::{lambda(int, float4)#1}>(long, at::PhiloxCudaState, at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl*, at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl*>(at::TensorBase const&, double, double, at::CUDAGeneratorImpl*)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::CUDAGeneratorImpl*, at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl*>(at::TensorBase const&, double, double, at::CUDAGeneratorImpl*)::{lambda()#2}::operator()() const::{lambda(float)#1})::{lambda(int, float4)#1})",
    [432, 1, 1],
    [256, 1, 1],
    34,
);

/// The kernels of one compute step and the fraction of the step each takes. Short steps are
/// one pointwise kernel; GEMM-sized steps are GEMM, pointwise, GEMM, pointwise (a linear layer,
/// its activation, the next linear, the bias/residual); start-up steps are CPU work with a few
/// initialisation kernels; the optimizer step is the Adam multi-tensor kernel plus a norm.
pub(super) fn compute_step(dur_us: f64, optimizer: bool, pick: u64) -> Vec<(ComputeKernel, f64)> {
    let g = |i: u64| GEMMS[((pick + i) % GEMMS.len() as u64) as usize];
    let p = |i: u64| POINTWISE[((pick + i) % POINTWISE.len() as u64) as usize];
    if optimizer {
        return vec![(POINTWISE[3], 0.08), (ADAM, 0.8)];
    }
    if dur_us > 20_000.0 {
        return vec![(INIT, 200.0 / dur_us), (INIT, 200.0 / dur_us), (POINTWISE[0], 50.0 / dur_us)];
    }
    if dur_us < 40.0 {
        return vec![(p(0), 0.85)];
    }
    vec![(g(0), 0.46), (p(1), 0.07), (g(1), 0.33), (p(2), 0.08)]
}

/// `record_param_comms` `Collective name` and the `nccl:*` annotation of a log op name.
pub(super) fn collective_words(name: &str) -> (&'static str, &'static str) {
    match name {
        "AllReduce" => ("allreduce", "nccl:all_reduce"),
        "Broadcast" => ("broadcast", "nccl:broadcast"),
        "AllGather" => ("_allgather_base", "nccl:_all_gather_base"),
        "ReduceScatter" => ("_reduce_scatter_base", "nccl:_reduce_scatter_base"),
        "Reduce" => ("reduce", "nccl:reduce"),
        "Send" => ("send", "nccl:send"),
        "Recv" => ("recv", "nccl:recv"),
        _ => ("all_to_all", "nccl:all_to_all"),
    }
}

/// PyTorch's dtype name (`record_param_comms` `dtype`) of an `ncclDataType_t`.
pub(super) fn torch_dtype(dt: u8) -> &'static str {
    ["Char", "Byte", "Int", "UInt32", "Long", "UInt64", "Half", "Float", "Double", "BFloat16"]
        .get(dt as usize)
        .copied()
        .unwrap_or("Byte")
}

/// Process-group description Megatron gives a group kind.
pub(crate) fn pg_desc(label: &str) -> &'static str {
    match label {
        "WORLD" => "default_pg",
        "TP" => "TENSOR_MODEL_PARALLEL_GROUP",
        "PP" => "PIPELINE_MODEL_PARALLEL_GROUP",
        "DP" => "DATA_PARALLEL_GROUP",
        "MP" => "MODEL_PARALLEL_GROUP",
        "EMB" => "EMBEDDING_GROUP",
        "EP" => "EXPERT_MODEL_PARALLEL_GROUP",
        "CP" => "CONTEXT_PARALLEL_GROUP",
        _ => "undefined",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_observed_families() {
        assert_eq!(
            nccl_kernel(true, "AllReduce", 9, 0, "LL"),
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
        assert_eq!(nccl_kernel(true, "Broadcast", 4, 0, "LL"), "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
        assert_eq!(nccl_kernel(false, "AllReduce", 7, 0, "LL"), "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)");
        assert_eq!(nccl_kernel(false, "SendRecv", 9, 0, "SIMPLE"), "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)");
        assert_eq!(short_name("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), "ncclDevKernel_SendRecv");
        assert_eq!(tuning("AllReduce", 8388608, 2, 24), ("SIMPLE", 24));
        assert_eq!(tuning("AllReduce", 4, 4, 8), ("LL", 1));
    }
}
