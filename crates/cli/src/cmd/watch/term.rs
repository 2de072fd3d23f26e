//! The terminal side of `commlens watch`, with plain POSIX calls (no screen
//! library): SIGINT/SIGTERM caught into a flag so the loop can restore the
//! terminal before it exits; keys read one at a time while waiting (stdin in
//! non-canonical, no-echo mode, Ctrl-C still a signal; restored on drop, also
//! when unwinding); a redraw that homes the cursor, rewrites each line and
//! clears what is left, so it works over ssh on any ANSI terminal without the
//! alternate screen.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Turns SIGINT and SIGTERM into [`interrupted`] instead of an abrupt exit.
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe);
        // the sigaction struct is fully initialised before the call.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Columns and rows of the terminal on standard output.
pub fn size() -> Option<(usize, usize)> {
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we own.
    unsafe {
        let mut w: libc::winsize = std::mem::zeroed();
        (libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut w) == 0 && w.ws_col > 0)
            .then_some((w.ws_col as usize, w.ws_row as usize))
    }
}

/// The live screen: keys from a terminal on stdin, the cursor hidden; both
/// restored on drop.
pub struct Screen {
    saved: Option<libc::termios>,
}

impl Screen {
    pub fn enter(keys: bool) -> Screen {
        let mut saved = None;
        if keys {
            // SAFETY: tcgetattr fills the struct we own; tcsetattr reads it.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                if libc::tcgetattr(libc::STDIN_FILENO, &mut t) == 0 {
                    let old = t;
                    t.c_lflag &= !(libc::ICANON | libc::ECHO);
                    t.c_cc[libc::VMIN] = 0;
                    t.c_cc[libc::VTIME] = 0;
                    if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t) == 0 {
                        saved = Some(old);
                    }
                }
            }
        }
        print!("\x1b[?25l");
        let _ = std::io::stdout().flush();
        Screen { saved }
    }

    /// Redraws the screen with `text`, each line cut to the width, at most the height.
    pub fn draw(&self, text: &str) {
        let (cols, rows) = size().unwrap_or((80, 24));
        let mut out = String::from("\x1b[H");
        for line in text.lines().take(rows.saturating_sub(1).max(1)) {
            out.extend(line.chars().take(cols));
            // The terminal's output processing (left on) turns \n into \r\n.
            out.push_str("\x1b[K\n");
        }
        out.push_str("\x1b[J");
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(out.as_bytes()).and_then(|_| o.flush());
    }

    /// Waits up to `d`; true when the user asked to quit (`q`, Ctrl-C, SIGTERM).
    pub fn wait(&self, d: Duration) -> bool {
        wait_for_quit(d, self.saved.is_some())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if let Some(t) = self.saved {
            // SAFETY: restores the attributes read in `enter`.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t);
            }
        }
        print!("\x1b[?25h");
        let _ = std::io::stdout().flush();
    }
}

/// Waits up to `d`, reading keys from stdin when `keys`; true on `q`, Ctrl-C or SIGTERM.
pub fn wait_for_quit(d: Duration, keys: bool) -> bool {
    let until = Instant::now() + d;
    loop {
        if interrupted() {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        // Short slices: a signal sets the flag without waking a plain sleep.
        let slice = left.min(Duration::from_millis(50));
        if !keys {
            std::thread::sleep(slice);
            continue;
        }
        let mut fd = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own; read into a buffer we own.
        let ready = unsafe { libc::poll(&mut fd, 1, slice.as_millis() as libc::c_int) };
        if ready > 0 && fd.revents & libc::POLLIN != 0 {
            let mut buf = [0u8; 16];
            let n = unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0
                && buf[..n as usize]
                    .iter()
                    .any(|&b| b == b'q' || b == b'Q' || b == 3)
            {
                return true;
            }
            if n == 0 {
                // End of input: no more keys, keep waiting by the clock.
                std::thread::sleep(left.min(Duration::from_millis(50)));
            }
        }
    }
}
