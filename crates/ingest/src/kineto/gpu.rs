//! Non-NCCL GPU activity in the streaming pass ([`super::stream`]): the
//! stack-only `args` of a kernel, copy or fill, its 32-byte record before
//! launch lookup, and the name interning that copies a name once per
//! distinct name.

use super::trace::{sat_u32, ComputeNames};
use super::values::Num;
use crate::kernel_name;
use serde::Deserialize;

/// The `args` of a non-NCCL GPU activity: three numbers, parsed on the stack.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GpuArgs {
    pub correlation: Num,
    pub stream: Num,
    pub device: Num,
}

/// A non-NCCL GPU activity before its launch is looked up (32 bytes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawCompute {
    pub ts_ns: i64,
    /// `u64::MAX` when absent.
    pub correlation: u64,
    pub dur_ns: u32,
    pub stream: u32,
    pub name: u32,
    /// `u32::MAX` when absent.
    pub device: u32,
}

/// Interns a GPU activity name, remembering whether it is a non-NCCL
/// communication kernel (decided once per distinct name).
pub(crate) fn intern_gpu(v: &str, names: &mut ComputeNames, other: &mut Vec<bool>, scratch: &mut Vec<u8>) -> u32 {
    let id = names.intern(v);
    if id as usize == other.len() {
        other.push(kernel_name::is_other_comm_kernel(v.as_bytes(), scratch));
    }
    id
}

pub(crate) fn raw_compute(ts_ns: i64, dur_ns: i64, name: u32, a: &GpuArgs, tid: u64) -> RawCompute {
    RawCompute {
        ts_ns,
        correlation: a.correlation.0.unwrap_or(u64::MAX),
        dur_ns: sat_u32(dur_ns),
        // Kineto puts the stream in `tid` too; `args.stream` wins.
        stream: a.stream.0.unwrap_or(tid) as u32,
        name,
        device: a.device.u32().unwrap_or(u32::MAX),
    }
}
