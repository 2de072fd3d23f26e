//! `commlens watch` in its live terminal mode: stdout and stdin a real
//! terminal (a pseudo-terminal from util-linux's `script`), as over ssh. The
//! screen is redrawn in place (cursor home, lines cleared, cursor hidden),
//! `q` and Ctrl-C quit with status 0, and the cursor is shown again on the
//! way out. The other `watch` tests read its piped snapshots; only this one
//! sees the screen a person sees.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HIDE: &str = "\x1b[?25l";
const HOME: &str = "\x1b[H";
const SHOW: &str = "\x1b[?25h";

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-watch-term-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn have_script() -> bool {
    Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `commlens watch DIR` under a pseudo-terminal, sends `key` once the
/// second frame is on screen, and returns (exit status, everything the
/// terminal showed).
fn watch_then(key: &[u8], tag: &str) -> (Option<i32>, String) {
    let dir = temp_dir(tag);
    // A wide terminal, so the title line is not cut at the default 80 columns.
    let cmd = format!(
        "stty cols 200 rows 40; exec {} watch {} --interval 0.1",
        env!("CARGO_BIN_EXE_commlens"),
        dir.display()
    );
    // -q quiet, -f flush each write, -e the child's exit status, -c the command.
    let mut child = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start script");
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Two frames: the view is live and redrawing before the key arrives.
    while String::from_utf8_lossy(&seen).matches(HOME).count() < 2 {
        assert!(
            Instant::now() < deadline,
            "no second frame within 60 s: {:?}",
            String::from_utf8_lossy(&seen)
        );
        if let Ok(b) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.extend(b);
        }
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(key).unwrap();
    stdin.flush().unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "watch did not quit on {key:?}: {:?}",
                String::from_utf8_lossy(&seen)
            );
        }
        if let Ok(b) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.extend(b);
        }
    };
    drop(stdin);
    while let Ok(b) = rx.recv_timeout(Duration::from_millis(300)) {
        seen.extend(b);
    }
    let _ = std::fs::remove_dir_all(&dir);
    (status.code(), String::from_utf8_lossy(&seen).into_owned())
}

fn check_screen(screen: &str, how: &str) {
    let hide = screen
        .find(HIDE)
        .unwrap_or_else(|| panic!("{how}: cursor never hidden: {screen:?}"));
    let last_home = screen.rfind(HOME).unwrap();
    assert!(
        hide < last_home,
        "{how}: frames drawn after hiding the cursor"
    );
    assert!(
        screen.contains("no commlens plugin file (.clp)"),
        "{how}: the empty folder is waited for, and says so: {screen:?}"
    );
    assert!(
        screen.contains("q quits"),
        "{how}: the live view names its key"
    );
    let show = screen
        .rfind(SHOW)
        .unwrap_or_else(|| panic!("{how}: cursor not restored: {screen:?}"));
    assert!(
        show > last_home,
        "{how}: the cursor is restored after the last frame"
    );
}

#[test]
fn live_view_redraws_in_place_and_quits_cleanly() {
    if !have_script() {
        commlens_testdata::skip_unless_ci(
            "watch live terminal",
            "util-linux `script` (a pseudo-terminal) is not installed",
            "apt-get install bsdutils",
        );
        return;
    }
    let (code, screen) = watch_then(b"q", "q");
    assert_eq!(code, Some(0), "q quits with status 0: {screen:?}");
    check_screen(&screen, "q");

    // Ctrl-C through the terminal: a signal (the view leaves ISIG on), caught, clean exit.
    let (code, screen) = watch_then(b"\x03", "ctrl-c");
    assert_eq!(code, Some(0), "Ctrl-C quits with status 0: {screen:?}");
    check_screen(&screen, "ctrl-c");
}
