//! Replay files: the project's CSV (`delay_us,op,sector,sectors,sync`), the
//! MSR Cambridge CSV (SNIA IOTTA block traces: timestamps and response
//! times in 100 ns units, offsets and sizes in bytes), and the
//! seeded generator of the application start-up traces shipped in
//! scenarios/traces/ (2014 BFQ+ report, Section 7.3: bash, xterm, konsole).
//!
//! Replay semantics (docs/scenarios.md): rows are issued in order; a row is
//! issued `delay` after the previous row was issued if that one was
//! asynchronous, or after it completed if it was synchronous. MSR rows are
//! open-loop: each is issued at its own timestamp (relative to the first)
//! and none blocks.

use bfq_core::{Op, Time, SECTOR_BYTES, US};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::fmt::Write as _;

/// One replayed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayRow {
    /// Delay before issuing (see the module documentation), ns.
    pub delay: Time,
    /// Read or write.
    pub op: Op,
    /// First sector, relative to the flow's region.
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u32,
    /// Synchronous request (the replay waits for it).
    pub sync: bool,
}

/// Replay file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayFormat {
    /// `delay_us,op,sector,sectors,sync` (op R/W, sync 1/0).
    Csv,
    /// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    Msr,
}

fn parse_op(s: &str) -> Option<Op> {
    match s.trim().to_ascii_lowercase().as_str() {
        "r" | "read" => Some(Op::Read),
        "w" | "write" => Some(Op::Write),
        _ => None,
    }
}

/// Parses the project CSV. Blank lines, `#` comments and a header line are
/// skipped. Errors name the line.
pub fn parse_csv(text: &str) -> Result<Vec<ReplayRow>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || (i == 0 && l.starts_with("delay")) {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let bad = |why: &str| format!("line {}: {why}: '{l}'", i + 1);
        if f.len() != 5 {
            return Err(bad("expected 5 fields delay_us,op,sector,sectors,sync"));
        }
        let delay: f64 = f[0].parse().map_err(|_| bad("bad delay_us"))?;
        if !(delay.is_finite() && delay >= 0.0) {
            return Err(bad("bad delay_us"));
        }
        let op = parse_op(f[1]).ok_or_else(|| bad("op must be R or W"))?;
        let sector: u64 = f[2].parse().map_err(|_| bad("bad sector"))?;
        let sectors: u32 = f[3].parse().map_err(|_| bad("bad sectors"))?;
        if sectors == 0 {
            return Err(bad("sectors must be > 0"));
        }
        let sync = match f[4] {
            "1" | "true" | "sync" => true,
            "0" | "false" | "async" => false,
            _ => return Err(bad("sync must be 1 or 0")),
        };
        rows.push(ReplayRow {
            delay: (delay * US as f64).round() as Time,
            op,
            sector,
            sectors,
            sync,
        });
    }
    if rows.is_empty() {
        return Err("no requests in file".into());
    }
    Ok(rows)
}

/// Parses an MSR Cambridge trace into open-loop rows (`delay` from the
/// previous row's timestamp; reads sync, writes async; none blocks, see
/// [`ReplayRow`] and the `blocking` flag the caller sets).
pub fn parse_msr(text: &str) -> Result<Vec<ReplayRow>, String> {
    let mut rows = Vec::new();
    let mut prev: Option<u64> = None;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with("Timestamp") {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let bad = |why: &str| format!("line {}: {why}: '{l}'", i + 1);
        if f.len() < 6 {
            return Err(bad(
                "expected Timestamp,Hostname,DiskNumber,Type,Offset,Size,...",
            ));
        }
        let ts: u64 = f[0].parse().map_err(|_| bad("bad Timestamp"))?;
        let op = parse_op(f[3]).ok_or_else(|| bad("Type must be Read or Write"))?;
        let off: u64 = f[4].parse().map_err(|_| bad("bad Offset"))?;
        let size: u64 = f[5].parse().map_err(|_| bad("bad Size"))?;
        let sectors = size.div_ceil(SECTOR_BYTES).max(1);
        let delay = match prev {
            Some(p) => ts.saturating_sub(p) * 100, // 100 ns filetime units
            None => 0,
        };
        prev = Some(ts.max(prev.unwrap_or(0)));
        rows.push(ReplayRow {
            delay,
            op,
            sector: off / SECTOR_BYTES,
            sectors: u32::try_from(sectors).map_err(|_| bad("Size too large"))?,
            sync: op == Op::Read,
        });
    }
    if rows.is_empty() {
        return Err("no requests in file".into());
    }
    Ok(rows)
}

/// Writes rows in the project CSV format (with a header line).
pub fn to_csv(rows: &[ReplayRow]) -> String {
    let mut s = String::from("delay_us,op,sector,sectors,sync\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{}",
            r.delay / US,
            if r.op == Op::Read { "R" } else { "W" },
            r.sector,
            r.sectors,
            u8::from(r.sync)
        );
    }
    s
}

/// Shape of a generated application start-up.
#[derive(Clone, Copy, Debug)]
pub struct StartupShape {
    /// Number of requests.
    pub requests: usize,
    /// Number of distinct files (each a seek away from the previous).
    pub files: usize,
    /// Span of the disk area the files lie in, in sectors.
    pub span: u64,
    /// Fraction of requests issued as asynchronous read-ahead.
    pub async_fraction: f64,
    /// Largest request, sectors (the read-ahead window stops growing there).
    pub max_sectors: u32,
}

/// The shapes of the shipped start-up traces. The 2014 report gives no byte
/// counts; these are assumptions, documented in docs/scenarios.md: bash
/// ~1 MiB in 48 requests (about 0.2 s on an idle disk, the disk time the
/// report mentions), xterm 718 requests (the count of the BFQ authors'
/// trace) ~7 MiB, konsole 1900 requests
/// ~19 MiB (a KDE application loading many libraries).
pub fn startup_shape(app: &str) -> Option<StartupShape> {
    Some(match app {
        "bash" => StartupShape {
            requests: 48,
            files: 12,
            span: 4 << 20, // 2 GiB of sectors
            async_fraction: 0.2,
            max_sectors: 64,
        },
        "xterm" => StartupShape {
            requests: 718,
            files: 90,
            span: 8 << 20,
            async_fraction: 0.3,
            max_sectors: 24,
        },
        "konsole" => StartupShape {
            requests: 1900,
            files: 260,
            span: 16 << 20,
            async_fraction: 0.3,
            max_sectors: 24,
        },
        _ => return None,
    })
}

/// Generates a start-up trace: `files` files at random places in `span`,
/// each read sequentially in requests growing from 8 sectors to
/// `max_sectors` (as the
/// kernel's read-ahead window grows), some issued ahead as async
/// read-ahead, with short CPU think times. Seeded: the same app and seed
/// give the same rows.
pub fn generate_startup(shape: &StartupShape, seed: u64) -> Vec<ReplayRow> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut rows = Vec::with_capacity(shape.requests);
    let per_file = (shape.requests / shape.files.max(1)).max(1);
    let mut left = shape.requests;
    let mut f = 0;
    while left > 0 {
        f += 1;
        let n = if f == shape.files {
            left
        } else {
            rng.gen_range(1..=per_file * 2 - 1).min(left)
        };
        let mut sector = rng.gen_range(0..shape.span) & !7;
        let mut len: u32 = 8;
        for k in 0..n {
            let sync = k == 0 || !rng.gen_bool(shape.async_fraction);
            let think = if k == 0 {
                rng.gen_range(200..3000) // open/mmap of a new file
            } else {
                rng.gen_range(0..400)
            };
            rows.push(ReplayRow {
                delay: think * US,
                op: Op::Read,
                sector,
                sectors: len,
                sync,
            });
            sector += u64::from(len);
            len = (len * 2).min(shape.max_sectors);
        }
        left -= n;
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip() {
        let shape = startup_shape("bash").unwrap();
        let rows = generate_startup(&shape, 7);
        assert_eq!(rows.len(), 48);
        let back = parse_csv(&to_csv(&rows)).unwrap();
        assert_eq!(back, rows);
    }

    #[test]
    fn csv_errors_name_the_line() {
        let e = parse_csv("delay_us,op,sector,sectors,sync\n0,R,0,8,1\n5,X,0,8,1\n").unwrap_err();
        assert!(e.starts_with("line 3: op must be R or W"), "{e}");
    }

    #[test]
    fn msr() {
        let t = "128166372003061629,hm,1,Read,3154152960,4096,3207\n128166372003071629,hm,1,Write,3154157056,8192,100\n";
        let r = parse_msr(t).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].delay, 10_000 * 100);
        assert_eq!(r[1].sectors, 16);
        assert_eq!(r[0].sector, 3154152960 / 512);
        assert!(r[0].sync && !r[1].sync);
    }
}
