//! A titled table of strings, rendered as aligned text or as CSV.

use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub align: Vec<Align>,
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table (notes, totals).
    pub notes: Vec<String>,
}

impl Table {
    /// `headers`: names; a trailing `>` right-aligns the column (`"bytes>"`).
    pub fn new(title: &str, headers: &[&str]) -> Table {
        let mut t = Table { title: title.to_string(), ..Table::default() };
        for h in headers {
            match h.strip_suffix('>') {
                Some(name) => {
                    t.headers.push(name.to_string());
                    t.align.push(Align::Right);
                }
                None => {
                    t.headers.push(h.to_string());
                    t.align.push(Align::Left);
                }
            }
        }
        t
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    pub fn note(&mut self, s: impl Into<String>) {
        self.notes.push(s.into());
    }

    /// Aligned text with a title line and a rule under the header.
    pub fn to_text(&self) -> String {
        let n = self.headers.len();
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        if !self.title.is_empty() {
            let _ = writeln!(out, "{}", self.title);
        }
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(n) {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = width[i].saturating_sub(c.chars().count());
                match self.align[i] {
                    Align::Right => {
                        s.extend(std::iter::repeat_n(' ', pad));
                        s.push_str(c);
                    }
                    Align::Left => {
                        s.push_str(c);
                        if i + 1 < n {
                            s.extend(std::iter::repeat_n(' ', pad));
                        }
                    }
                }
            }
            let _ = writeln!(out, "{}", s.trim_end());
        };
        line(&self.headers, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
        }
        out
    }

    /// RFC 4180 CSV: header row then data rows (title and notes are not data).
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let write_row = |cells: &[String], out: &mut String| {
            let quoted: Vec<String> = cells.iter().map(|c| csv_field(c)).collect();
            out.push_str(&quoted.join(","));
            out.push('\n');
        };
        write_row(&self.headers, &mut out);
        for r in &self.rows {
            write_row(r, &mut out);
        }
        out
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `1536` → `1.5 KiB`; exact bytes below 1 KiB.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_alignment() {
        let mut t = Table::new("T", &["name", "n>"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long name".into(), "12345".into()]);
        t.note("note");
        let s = t.to_text();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "T");
        assert_eq!(lines[1], "name           n");
        assert_eq!(lines[2], "---------  -----");
        assert_eq!(lines[3], "a              1");
        assert_eq!(lines[4], "long name  12345");
        assert_eq!(lines[5], "note");
    }

    #[test]
    fn csv_quoting() {
        let mut t = Table::new("T", &["a", "b"]);
        t.row(vec!["x,y".into(), "say \"hi\"".into()]);
        assert_eq!(t.to_csv(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
    }

    #[test]
    fn bytes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(268_435_456), "256 MiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }
}
