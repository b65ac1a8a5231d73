//! `bfq loop create FILE SIZE` / `bfq loop remove DEV`: loop devices for
//! running the kernel's schedulers side by side with the engine.

use anyhow::Context;
use bfq_real::sys;
use clap::{Args as ClapArgs, Subcommand};
use std::path::PathBuf;

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: LoopCmd,
}

#[derive(Subcommand)]
pub enum LoopCmd {
    /// Create (or extend) FILE to SIZE (e.g. 1G, 512M) and attach a loop
    /// device of SIZE over it; prints /dev/loopN. A FILE longer than SIZE
    /// is not shrunk: the device covers its first SIZE bytes (said on
    /// stderr). Refused when FILE already has a loop device (named),
    /// unless --again.
    Create {
        /// The backing file (a regular file; created if missing).
        file: PathBuf,
        /// The device's size, at least 1M (e.g. 1G, 512M, 1.5G), a
        /// multiple of --sector-size.
        size: String,
        /// Attach another device even if FILE already has one.
        #[arg(long)]
        again: bool,
        /// Use buffered I/O on the backing file (default: direct I/O).
        #[arg(long)]
        buffered: bool,
        /// Fill the file with data (default: sparse, reads of holes touch
        /// no storage).
        #[arg(long)]
        fill: bool,
        /// The device's logical block size: 512 (default), 1024, 2048 or
        /// 4096 (as a 4Kn disk: direct I/O then needs whole 4096-byte
        /// blocks, and `bfq run` refuses flows that are not).
        #[arg(long, default_value_t = 512, value_parser = sector_size)]
        sector_size: u32,
    },
    /// Detach a loop device (refused if it holds a mounted filesystem).
    Remove {
        /// The device, /dev/loopN.
        dev: PathBuf,
    },
}

/// A loop device's logical block size: 512, 1024, 2048 or 4096.
fn sector_size(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n @ (512 | 1024 | 2048 | 4096)) => Ok(n),
        _ => Err(format!("{s}: expected 512, 1024, 2048 or 4096")),
    }
}

/// A size above zero (`1G`, `512M`, `4KiB`, `1.5G`).
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    crate::args::size(s).map_err(anyhow::Error::msg)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    match a.cmd {
        LoopCmd::Create {
            file,
            size,
            again,
            buffered,
            fill,
            sector_size,
        } => {
            let size = parse_size(&size)?;
            if size < 1 << 20 {
                anyhow::bail!("loop create {}: size must be at least 1M", file.display());
            }
            if size % u64::from(sector_size) != 0 {
                anyhow::bail!(
                    "loop create {}: size {size} bytes is not a multiple of the sector size \
                     {sector_size} (the device would end in a part block)",
                    file.display()
                );
            }
            sys::require_root("bfq loop create")?;
            check_backing(&file, size, again)?;
            let filled = fill && !file.exists();
            if filled {
                bfq_real::create_filled(&file, size)?;
            }
            let dev = sys::LoopDevice::create_with(&file, size, !buffered, sector_size)
                .or_else(|e| {
                    if buffered {
                        Err(e)
                    } else {
                        // Backing filesystems without O_DIRECT: buffered
                        // (said below).
                        sys::LoopDevice::create_with(&file, size, false, sector_size)
                    }
                })
                .inspect_err(|_| {
                    // The file filled here goes too (one made by
                    // create_with is removed by it).
                    if filled {
                        let _ = std::fs::remove_file(&file);
                    }
                })
                .with_context(|| format!("loop create {}", file.display()))?;
            // losetup may also leave the device buffered, with a warning
            // only, when the kernel refuses direct I/O.
            if !buffered && sys::loop_direct_io(dev.path()) == Some(false) {
                eprintln!(
                    "loop create {}: no direct I/O here, {} is buffered: reads may come \
                     from the page cache",
                    file.display(),
                    dev.path().display()
                );
            }
            println!("{}", dev.keep().display());
            Ok(())
        }
        LoopCmd::Remove { dev } => {
            sys::detach_loop(&dev)?;
            Ok(())
        }
    }
}

/// Refuses a `file` that is not a regular file, or already has a loop
/// device (unless `again`), naming it; says when `file` is longer than
/// the device of `size` bytes made over it.
fn check_backing(file: &std::path::Path, size: u64, again: bool) -> anyhow::Result<()> {
    let Ok(meta) = std::fs::metadata(file) else {
        return Ok(());
    };
    let name = file.display();
    if !meta.is_file() {
        anyhow::bail!("loop create {name}: not a regular file");
    }
    let attached = sys::LoopDevice::over(file)?;
    if let Some(dev) = attached.first().filter(|_| !again) {
        anyhow::bail!(
            "loop create {name}: already attached as {} (bfq loop remove {} first, or \
             --again for another device over it)",
            dev.display(),
            dev.display()
        );
    }
    if meta.len() > size {
        eprintln!(
            "loop create {name}: the file is {} bytes; the device covers its first {size} \
             (the file is not shrunk)",
            meta.len()
        );
    }
    Ok(())
}
