//! The few operating-system calls the plugin needs, declared by hand instead
//! of pulling in the `libc` crate: clocks, host name, thread id, and the CUDA
//! driver look-up that tells which GPU a communicator runs on.
//!
//! Everything here is Linux (glibc or musl) on an LP64 target.

use std::ffi::{c_char, c_int, c_long, c_void, CStr};
use std::sync::OnceLock;

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

const CLOCK_REALTIME: c_int = 0;
const CLOCK_MONOTONIC: c_int = 1;
const RTLD_LAZY: c_int = 1;
const RTLD_NOLOAD: c_int = 4;

#[cfg(target_arch = "x86_64")]
const SYS_GETTID: c_long = 186;
#[cfg(target_arch = "aarch64")]
const SYS_GETTID: c_long = 178;
#[cfg(target_arch = "powerpc64")]
const SYS_GETTID: c_long = 207;

extern "C" {
    fn clock_gettime(clk: c_int, ts: *mut Timespec) -> c_int;
    fn gethostname(name: *mut c_char, len: usize) -> c_int;
    fn syscall(num: c_long, ...) -> c_long;
    fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

#[inline]
fn now(clk: c_int) -> u64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { clock_gettime(clk, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of every event record.
#[inline]
pub fn mono_ns() -> u64 {
    now(CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` in nanoseconds since the epoch (taken once per session).
pub fn real_ns() -> u64 {
    now(CLOCK_REALTIME)
}

/// The kernel thread id of the calling thread.
pub fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { syscall(SYS_GETTID) as u32 }
}

/// The host name, reduced to characters that are safe in a file name and in
/// the header line.
pub fn hostname() -> String {
    let mut buf = [0 as c_char; 256];
    // SAFETY: the buffer is writable for its length; NUL termination is ensured below.
    let ok = unsafe { gethostname(buf.as_mut_ptr(), buf.len() - 1) } == 0;
    buf[255] = 0;
    let raw = if ok {
        // SAFETY: NUL-terminated above.
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
    } else {
        String::new()
    };
    let clean: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' { c } else { '_' })
        .collect();
    if clean.is_empty() {
        "unknown-host".to_string()
    } else {
        clean
    }
}

/// Reads a NUL-terminated C string of at most `max` bytes (longer ones are cut).
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
pub unsafe fn c_string(p: *const c_char, max: usize) -> Vec<u8> {
    if p.is_null() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < max {
        let b = *p.add(i) as u8;
        if b == 0 {
            break;
        }
        out.push(b);
        i += 1;
    }
    out
}

type CuCtxGetDevice = unsafe extern "C" fn(*mut c_int) -> c_int;
type CuDeviceGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;

const CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: c_int = 33;
const CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: c_int = 34;
const CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: c_int = 50;

struct Cuda {
    ctx_get_device: Option<CuCtxGetDevice>,
    get_attribute: Option<CuDeviceGetAttribute>,
}

fn cuda() -> &'static Cuda {
    static CUDA: OnceLock<Cuda> = OnceLock::new();
    CUDA.get_or_init(|| {
        // The driver is already loaded in any process that runs NCCL; never load it here.
        // SAFETY: dlopen with RTLD_NOLOAD only returns a handle to a library already mapped.
        let lib = unsafe { dlopen(c"libcuda.so.1".as_ptr(), RTLD_LAZY | RTLD_NOLOAD) };
        let find = |name: &CStr| -> *mut c_void {
            // SAFETY: dlsym on a valid handle or RTLD_DEFAULT (NULL) with a NUL-terminated name.
            unsafe {
                let mut p = std::ptr::null_mut();
                if !lib.is_null() {
                    p = dlsym(lib, name.as_ptr());
                }
                if p.is_null() {
                    p = dlsym(std::ptr::null_mut(), name.as_ptr());
                }
                p
            }
        };
        let a = find(c"cuCtxGetDevice");
        let b = find(c"cuDeviceGetAttribute");
        // SAFETY: the symbols have the CUDA driver API signatures declared above.
        unsafe {
            Cuda {
                ctx_get_device: (!a.is_null()).then(|| std::mem::transmute::<*mut c_void, CuCtxGetDevice>(a)),
                get_attribute: (!b.is_null()).then(|| std::mem::transmute::<*mut c_void, CuDeviceGetAttribute>(b)),
            }
        }
    })
}

/// The CUDA device current on the calling thread and its PCI bus id in NCCL's
/// `busId` form (`0000:17:00.0` → `0x17000`). NCCL calls the profiler's `init`
/// on a thread whose current device is the communicator's, so this names the
/// communicator's GPU. `(None, None)` without a CUDA driver or context.
pub fn current_cuda_device() -> (Option<i32>, Option<i64>) {
    let cu = cuda();
    let Some(get_dev) = cu.ctx_get_device else { return (None, None) };
    let mut dev: c_int = -1;
    // SAFETY: cuCtxGetDevice writes one int; a missing context returns an error code.
    if unsafe { get_dev(&mut dev) } != 0 || dev < 0 {
        return (None, None);
    }
    let bus = cu.get_attribute.and_then(|attr| {
        let get = |a: c_int| -> Option<i64> {
            let mut v: c_int = 0;
            // SAFETY: cuDeviceGetAttribute writes one int.
            (unsafe { attr(&mut v, a, dev) } == 0).then_some(v as i64)
        };
        let domain = get(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?;
        let bus = get(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?;
        let device = get(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?;
        Some((domain << 20) | (bus << 12) | (device << 4))
    });
    (Some(dev), bus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_advance_and_differ() {
        let a = mono_ns();
        let b = mono_ns();
        assert!(b >= a);
        // The epoch clock is far ahead of the boot-relative monotonic clock.
        assert!(real_ns() > 1_500_000_000_000_000_000);
        assert!(gettid() > 0);
        assert!(!hostname().is_empty());
    }

    #[test]
    fn c_string_is_bounded() {
        let s = c"AllReduce";
        // SAFETY: a valid C string.
        unsafe {
            assert_eq!(c_string(s.as_ptr(), 64), b"AllReduce");
            assert_eq!(c_string(s.as_ptr(), 3), b"All");
            assert!(c_string(std::ptr::null(), 8).is_empty());
        }
    }
}
