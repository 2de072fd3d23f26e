//! The HTML report in a real browser: the sample report (every section
//! filled) is written to a temporary file and rendered by headless Chromium.
//! The screenshot must be a PNG of the window size with real content (dark
//! text pixels, the AllReduce color of the bars), and the DOM Chromium built
//! must hold every section heading and the chart `<svg>` elements.
//!
//! Without Chromium the test prints "skipped" — except under `CI=true`,
//! where a missing browser is a failure (CI installs Debian's `chromium`).

use commlens_export::report::{sample::sample_report, write_html};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 3000;

fn chromium() -> Option<PathBuf> {
    let fixed = Path::new("/usr/bin/chromium");
    if fixed.exists() {
        return Some(fixed.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n))).find(|p| p.is_file())
}

/// Flags that keep headless Chromium off the network and quiet in a container.
fn browser(exe: &Path, profile: &Path) -> Command {
    let mut c = Command::new(exe);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null());
    c
}

/// Runs with a deadline (a wedged browser must fail the test, not hang CI).
fn run(mut c: Command, secs: u64) -> (bool, String) {
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start chromium");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status.success(), reader.join().unwrap())
}

fn temp_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let d = std::env::temp_dir().join(format!("commlens-report-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(exe) = chromium() else {
        commlens_testdata::skip_unless_ci("HTML report in a browser", "chromium not installed", "apt-get install chromium");
        return;
    };
    let dir = temp_dir();
    let html = dir.join("report.html");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&html).unwrap());
    write_html(&sample_report(), &mut f).unwrap();
    drop(f);
    let url = format!("file://{}", html.display());

    let shot = dir.join("shot.png");
    let mut c = browser(&exe, &dir.join("profile-shot"));
    c.arg(format!("--screenshot={}", shot.display())).arg(format!("--window-size={WIDTH},{HEIGHT}")).arg(&url);
    let (ok, _) = run(c, 120);
    assert!(ok && shot.exists(), "no screenshot written");
    let png = std::fs::read(&shot).unwrap();
    let img = decode_png(&png);
    assert_eq!((img.width, img.height), (WIDTH, HEIGHT));
    let (mut dark, mut allreduce) = (0usize, 0usize);
    for p in img.rgb.chunks_exact(3) {
        let luma = (p[0] as u32 * 299 + p[1] as u32 * 587 + p[2] as u32 * 114) / 1000;
        dark += (luma < 120) as usize;
        allreduce += (p == [0x4e, 0x79, 0xa7]) as usize;
    }
    let total = (WIDTH * HEIGHT) as usize;
    // Text alone darkens well over 0.2% of a page; a blank or error page does not.
    assert!(dark > total / 500, "page looks blank: {dark} dark pixels");
    // Bars in the AllReduce color prove the inline SVG was drawn.
    assert!(allreduce > 2_000, "only {allreduce} AllReduce-colored pixels");

    let mut c = browser(&exe, &dir.join("profile-dom"));
    c.arg("--dump-dom").arg(&url);
    let (ok, dom) = run(c, 120);
    assert!(ok, "--dump-dom failed");
    for h in [
        "Operation mix",
        "Volume per rank",
        "Message sizes",
        "Bus bandwidth against message size",
        "Communication per iteration",
        "Stragglers",
        "Overlap with compute",
        "Model against observed",
        "Expected from the collective model",
        "Tuning disagreements",
        "Anomalies",
        "Communicator bottlenecks",
    ] {
        assert!(dom.contains(&format!("<h2>{h}</h2>")), "DOM lacks heading {h}");
    }
    assert!(dom.matches("<svg").count() >= 8, "DOM has {} svg elements", dom.matches("<svg").count());
    assert!(dom.contains("<circle"), "scatter points missing from the DOM");
    let _ = std::fs::remove_dir_all(&dir);
}

struct Image {
    width: u32,
    height: u32,
    /// 8-bit RGB, row-major.
    rgb: Vec<u8>,
}

/// Minimal PNG decoder for what Chromium writes: 8-bit RGB or RGBA,
/// non-interlaced; checks the signature and IHDR by hand, inflates IDAT with
/// flate2 and undoes the five row filters.
fn decode_png(b: &[u8]) -> Image {
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    assert_eq!(&b[12..16], b"IHDR");
    let (width, height, depth, color, interlace) = (be(16), be(20), b[24], b[25], b[28]);
    assert_eq!((depth, interlace), (8, 0), "unexpected PNG layout");
    let bpp = match color {
        2 => 3,
        6 => 4,
        c => panic!("unexpected PNG color type {c}"),
    };
    let mut idat = Vec::new();
    let mut i = 8;
    while i + 8 <= b.len() {
        let len = be(i) as usize;
        let kind = &b[i + 4..i + 8];
        if kind == b"IDAT" {
            idat.extend_from_slice(&b[i + 8..i + 8 + len]);
        }
        i += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..]).read_to_end(&mut raw).expect("IDAT inflates");
    let stride = width as usize * bpp;
    assert_eq!(raw.len(), height as usize * (stride + 1), "IDAT size");
    let mut prev = vec![0u8; stride];
    let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
    for row in raw.chunks_exact(stride + 1) {
        let (filter, data) = (row[0], &row[1..]);
        let mut cur = vec![0u8; stride];
        for x in 0..stride {
            let a = if x >= bpp { cur[x - bpp] as i16 } else { 0 };
            let up = prev[x] as i16;
            let c = if x >= bpp { prev[x - bpp] as i16 } else { 0 };
            let pred = match filter {
                0 => 0,
                1 => a,
                2 => up,
                3 => (a + up) / 2,
                4 => {
                    let p = a + up - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - up).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        up
                    } else {
                        c
                    }
                }
                f => panic!("bad PNG filter {f}"),
            };
            cur[x] = data[x].wrapping_add(pred as u8);
        }
        for px in cur.chunks_exact(bpp) {
            rgb.extend_from_slice(&px[..3]);
        }
        prev = cur;
    }
    Image { width, height, rgb }
}
