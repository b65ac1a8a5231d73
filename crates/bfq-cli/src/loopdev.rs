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
    /// device over it; prints /dev/loopN.
    Create {
        file: PathBuf,
        size: String,
        /// Use buffered I/O on the backing file (default: direct I/O).
        #[arg(long)]
        buffered: bool,
        /// Fill the file with data (default: sparse, reads of holes touch
        /// no storage).
        #[arg(long)]
        fill: bool,
    },
    /// Detach a loop device (refused if it holds a mounted filesystem).
    Remove { dev: PathBuf },
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
            buffered,
            fill,
        } => {
            let size = parse_size(&size)?;
            if size < 1 << 20 {
                anyhow::bail!("loop create {}: size must be at least 1M", file.display());
            }
            sys::require_root("bfq loop create")?;
            if fill && !file.exists() {
                bfq_real::create_filled(&file, size)?;
            }
            let dev = sys::LoopDevice::create(&file, size, !buffered)
                .or_else(|e| {
                    if buffered {
                        Err(e)
                    } else {
                        // Backing filesystems without O_DIRECT: buffered
                        // (said below).
                        sys::LoopDevice::create(&file, size, false)
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
