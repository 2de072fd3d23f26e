//! Shared by the plugin's integration tests (and `crates/cli/tests/plugin_hang.rs`,
//! which includes this file by path): the cdylib's location, the fake-NCCL C harness
//! compiled with the `cc` crate (with and without AddressSanitizer), fresh output
//! folders and running the harness with a clean plugin environment.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `crates/plugin`, also when this file is compiled into another crate's tests.
pub fn plugin_dir() -> PathBuf {
    let m = Path::new(env!("CARGO_MANIFEST_DIR"));
    if m.join("tests/harness/fake_nccl.c").is_file() {
        m.to_path_buf()
    } else {
        m.join("../plugin")
    }
}

/// The plugin cdylib cargo built for this test (same profile, same target dir).
pub fn plugin_so() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps dir");
    for cand in [
        deps.join("libcommlens_plugin.so"),
        deps.join("../libcommlens_plugin.so"),
    ] {
        if cand.is_file() {
            return cand;
        }
    }
    panic!(
        "libcommlens_plugin.so not found next to {} (cargo builds it with this test)",
        exe.display()
    );
}

pub struct Harness {
    pub asan: PathBuf,
    pub plain: PathBuf,
}

fn compile(out: &Path, name: &str, asan: bool) -> PathBuf {
    let target = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let tool = cc::Build::new()
        .target(&target)
        .host(&target)
        .opt_level(1)
        .debug(true)
        .cargo_metadata(false)
        .try_get_compiler()
        .unwrap_or_else(|e| panic!("no C compiler for the harness: {e}"));
    let src = plugin_dir().join("tests/harness/fake_nccl.c");
    let exe = out.join(name);
    let mut cmd = tool.to_command();
    cmd.args([
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pthread",
        "-rdynamic",
    ]);
    if asan {
        cmd.args(["-fsanitize=address", "-fno-omit-frame-pointer"]);
    }
    cmd.arg(&src).arg("-o").arg(&exe).arg("-ldl");
    let o = cmd.output().expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling the harness failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

pub fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        // One folder per test binary: test runners may run binaries concurrently.
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(concat!(
            "commlens-plugin-harness-",
            env!("CARGO_CRATE_NAME")
        ));
        std::fs::create_dir_all(&out).unwrap();
        Harness {
            asan: compile(&out, "fake_nccl_asan", true),
            plain: compile(&out, "fake_nccl", false),
        }
    })
}

/// A fresh, empty output folder for one run.
pub fn out_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("commlens-plugin-out")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn run(cmd: &mut Command, dir: &Path, env: &[(&str, &str)]) -> Output {
    prepare(cmd, dir, env);
    let o = cmd.output().expect("run the harness");
    assert!(
        o.status.success(),
        "harness failed ({}):\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Sets the plugin's environment for a harness run: output folder `dir`, nothing
/// inherited from the caller's environment, then `env`.
pub fn prepare(cmd: &mut Command, dir: &Path, env: &[(&str, &str)]) {
    cmd.env("COMMLENS_PLUGIN_DIR", dir)
        .env("RUST_BACKTRACE", "0");
    // Nothing from the caller's environment changes what the plugin does or which rank it reports.
    for k in [
        "COMMLENS_PLUGIN_MASK",
        "COMMLENS_PLUGIN_BUF_KB",
        "COMMLENS_PLUGIN_FLUSH_MS",
        "COMMLENS_PLUGIN_CUDA_PROBE",
        "COMMLENS_PLUGIN_TEST_PANIC_STATE",
        "COMMLENS_PLUGIN_HANG_SIGNAL",
        "COMMLENS_PLUGIN_HANG_TIMEOUT_S",
        "COMMLENS_PLUGIN_PROM_DIR",
        "COMMLENS_PLUGIN_PROM_PORT",
        "COMMLENS_PLUGIN_PROM_ADDR",
        "COMMLENS_PLUGIN_PROM_INTERVAL_MS",
        "COMMLENS_PLUGIN_PROM_JOB",
        "COMMLENS_PLUGIN_PROM_MAX_COMMS",
        "COMMLENS_PLUGIN_METRICS_WINDOW",
        "COMMLENS_PLUGIN_SLOW_FRACTION",
        "COMMLENS_PLUGIN_SLOW_WINDOWS",
        "COMMLENS_PLUGIN_SLOW_MIN_BYTES",
        "SLURM_JOB_ID",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "RANK",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
}
