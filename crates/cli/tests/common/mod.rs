//! Support shared by the binary tests that feed commlens hostile or unusual
//! inputs: unique temporary folders, and running the binary with its output
//! captured and a time limit (a hang must fail the test, not the suite).

#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A fresh folder under the system temp dir, unique per process, test and call.
pub fn temp_dir(prefix: &str, tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "commlens-{prefix}-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What a run of the binary gave: exit code (128 + signal when killed by one),
/// standard output and error, wall time.
pub struct Run {
    pub code: i32,
    pub out: String,
    pub err: String,
    pub secs: f64,
}

/// Spawns `cmd` with stdin closed and stderr captured (stdout captured unless
/// the caller set it), and waits at most `limit_s` seconds.
pub fn run_limited(mut cmd: Command, limit_s: u64, what: &str) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut se = child.stderr.take().unwrap();
    let mut so = child.stdout.take();
    let out = std::thread::spawn(move || {
        let mut o = Vec::new();
        if let Some(so) = so.as_mut() {
            let _ = so.read_to_end(&mut o);
        }
        String::from_utf8_lossy(&o).into_owned()
    });
    let err = std::thread::spawn(move || {
        let mut e = Vec::new();
        let _ = se.read_to_end(&mut e);
        String::from_utf8_lossy(&e).into_owned()
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(limit_s) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish in {limit_s} s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let secs = t0.elapsed().as_secs_f64();
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Run {
        code,
        out: out.join().unwrap(),
        err: err.join().unwrap(),
        secs,
    }
}

/// The commlens binary with `args`, stdout piped.
pub fn commlens_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_commlens"));
    c.args(args).stdout(Stdio::piped());
    c
}
