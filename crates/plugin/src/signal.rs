//! The hang-dump signal (`COMMLENS_PLUGIN_HANG_SIGNAL`, default `SIGUSR1`).
//!
//! The handler only sets an atomic flag, which the background writer polls
//! ([`crate::hang::poll`]), and then calls the handler that was installed
//! before ours (not `SIG_DFL`/`SIG_IGN`: for `SIGUSR1` the default would end
//! the process). Nothing else runs in signal context: no lock, no allocation,
//! no I/O. The handler is installed when the writer starts (first init of a
//! session) and the previous one is restored when the session ends (last
//! finalize, exit or unload), so no handler points into an unloaded image;
//! a handler someone installed over ours is left alone.
//!
//! `struct sigaction` is declared by hand (glibc and musl, LP64: handler,
//! 128-byte mask, flags, restorer = 152 bytes).

use crate::session::lock;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;

const SA_SIGINFO: c_int = 4;
const SA_ONSTACK: c_int = 0x0800_0000;
const SA_RESTART: c_int = 0x1000_0000;
/// `SIG_DFL` = 0, `SIG_IGN` = 1, `SIG_ERR` = -1: not handlers to call.
const NOT_A_HANDLER: [usize; 3] = [0, 1, usize::MAX];

#[repr(C)]
#[derive(Clone, Copy)]
struct SigAction {
    handler: usize,
    mask: [u64; 16],
    flags: c_int,
    restorer: usize,
}
const _: () = assert!(std::mem::size_of::<SigAction>() == 152);

extern "C" {
    fn sigaction(sig: c_int, act: *const SigAction, old: *mut SigAction) -> c_int;
}

/// Set by the handler, cleared by the writer that services it.
static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The signal our handler is installed for (0: none).
static INSTALLED: AtomicI32 = AtomicI32::new(0);
static OLD_HANDLER: AtomicUsize = AtomicUsize::new(0);
static OLD_FLAGS: AtomicI32 = AtomicI32::new(0);
static OLD_ACTION: Mutex<Option<SigAction>> = Mutex::new(None);

type InfoHandler = extern "C" fn(c_int, *mut c_void, *mut c_void);
type PlainHandler = extern "C" fn(c_int);

extern "C" fn on_signal(sig: c_int, info: *mut c_void, ctx: *mut c_void) {
    REQUESTED.store(true, Ordering::Release);
    let h = OLD_HANDLER.load(Ordering::Acquire);
    if NOT_A_HANDLER.contains(&h) {
        return;
    }
    // SAFETY: `h` is the handler the kernel would have called, with the calling
    // convention its SA_SIGINFO flag says.
    unsafe {
        if OLD_FLAGS.load(Ordering::Acquire) & SA_SIGINFO != 0 {
            std::mem::transmute::<usize, InfoHandler>(h)(sig, info, ctx);
        } else {
            std::mem::transmute::<usize, PlainHandler>(h)(sig);
        }
    }
}

fn ours() -> usize {
    on_signal as InfoHandler as usize
}

/// Installs the handler for `sig` (no-op for 0 or when already installed).
pub fn install(sig: c_int) {
    if sig <= 0 || INSTALLED.load(Ordering::Acquire) != 0 {
        return;
    }
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut old: SigAction = unsafe { std::mem::zeroed() };
    // SAFETY: query only.
    if unsafe { sigaction(sig, std::ptr::null(), &mut old) } != 0 {
        return;
    }
    if old.handler != ours() {
        // Published before ours can run, so the first signal already chains.
        OLD_FLAGS.store(old.flags, Ordering::Release);
        OLD_HANDLER.store(old.handler, Ordering::Release);
        *lock(&OLD_ACTION) = Some(old);
        let act =
            SigAction { handler: ours(), mask: [0; 16], flags: SA_SIGINFO | SA_RESTART | SA_ONSTACK, restorer: 0 };
        // SAFETY: a valid action whose handler is async-signal-safe.
        if unsafe { sigaction(sig, &act, std::ptr::null_mut()) } != 0 {
            return;
        }
    }
    INSTALLED.store(sig, Ordering::Release);
}

/// Restores the previous handler if ours is still the one installed.
pub fn uninstall() {
    let sig = INSTALLED.swap(0, Ordering::AcqRel);
    if sig == 0 {
        return;
    }
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut cur: SigAction = unsafe { std::mem::zeroed() };
    // SAFETY: query only.
    if unsafe { sigaction(sig, std::ptr::null(), &mut cur) } != 0 || cur.handler != ours() {
        return;
    }
    if let Some(old) = lock(&OLD_ACTION).take() {
        // SAFETY: the action that was installed before ours.
        unsafe { sigaction(sig, &old, std::ptr::null_mut()) };
    }
}

/// Whether the signal arrived since the last call (clears the flag).
pub fn take_request() -> bool {
    REQUESTED.swap(false, Ordering::AcqRel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    extern "C" {
        fn raise(sig: c_int) -> c_int;
    }
    static CHAINED: AtomicU32 = AtomicU32::new(0);
    extern "C" fn previous(_: c_int) {
        CHAINED.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn flags_chains_and_restores() {
        const SIGUSR2: c_int = 12;
        let prev = SigAction { handler: previous as PlainHandler as usize, mask: [0; 16], flags: 0, restorer: 0 };
        // SAFETY: installing a plain, async-signal-safe handler; raising delivers synchronously.
        unsafe {
            assert_eq!(sigaction(SIGUSR2, &prev, std::ptr::null_mut()), 0);
            install(SIGUSR2);
            install(SIGUSR2); // idempotent
            assert_eq!(raise(SIGUSR2), 0);
        }
        assert!(take_request(), "the handler set the flag");
        assert!(!take_request());
        assert_eq!(CHAINED.load(Ordering::SeqCst), 1, "the previous handler ran too");
        uninstall();
        // SAFETY: the previous handler is back in place.
        unsafe { assert_eq!(raise(SIGUSR2), 0) };
        assert!(!take_request(), "our handler is gone");
        assert_eq!(CHAINED.load(Ordering::SeqCst), 2);
        let mut cur: SigAction = unsafe { std::mem::zeroed() };
        // SAFETY: query only.
        unsafe { sigaction(SIGUSR2, std::ptr::null(), &mut cur) };
        assert_eq!(cur.handler, prev.handler);
    }
}
