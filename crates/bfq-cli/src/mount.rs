//! `bfq mount BACKING_DIR MOUNTPOINT`: serves BACKING_DIR over FUSE with
//! its file I/O scheduled by a bfq-rs scheduler (docs/mount.md).

use anyhow::{bail, Context, Result};
use bfq_mount::stats::StatsView;
use bfq_mount::{MountConfig, Policy};
use clap::Args as ClapArgs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(ClapArgs)]
pub struct Args {
    /// Directory whose files are served.
    pub backing: Option<PathBuf>,
    /// Empty directory to mount on.
    pub mountpoint: Option<PathBuf>,
    /// Scheduler (`bfq schedulers`).
    #[arg(long, default_value = "bfq")]
    pub scheduler: String,
    /// Scheduler setting key=value (repeatable).
    #[arg(long = "set")]
    pub set: Vec<String>,
    /// Policy file (TOML): weights, classes and groups by cgroup, uid or
    /// executable.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// No page cache in the mount (FUSE direct I/O): every read reaches
    /// the scheduler. Default: the mount keeps its page cache.
    #[arg(long)]
    pub direct: bool,
    /// Open backing files without O_DIRECT (through the backing
    /// filesystem's page cache).
    #[arg(long)]
    pub buffered_backing: bool,
    /// Mount even if MOUNTPOINT is not empty or is already a bfq mount
    /// (the new mount covers it until it is unmounted).
    #[arg(long)]
    pub nonempty: bool,
    /// FUSE worker threads (requests served at once), 1..=256.
    #[arg(long, default_value_t = 16)]
    pub threads: usize,
    /// Requests on the device at once, 1..=4096.
    #[arg(long, default_value_t = 32)]
    pub depth: u32,
    /// Print each group's and flow's throughput, share and latency every
    /// this many seconds (also on SIGUSR1, and once at unmount).
    #[arg(long, value_name = "SECONDS")]
    pub stats: Option<f64>,
    /// Unmount the bfq mounts whose server is gone (killed, crashed) at
    /// MOUNTPOINT, or everywhere if none is given, and exit. Mounts still
    /// served are left.
    #[arg(long)]
    pub cleanup: bool,
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigset operations on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Waits up to `timeout` for one of the blocked signals.
fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> Option<i32> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid set and timespec; no siginfo wanted.
    let s = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (s > 0).then_some(s)
}

fn parse_settings(set: &[String]) -> Result<Vec<(String, String)>> {
    set.iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .with_context(|| format!("--set {kv:?}: expected key=value"))
        })
        .collect()
}

pub fn run(a: Args) -> Result<()> {
    if a.cleanup {
        return cleanup(&a);
    }
    let (cfg, interval) = config(a)?;
    // Block the signals before any thread starts, so they all inherit the
    // mask and the signals come to sigtimedwait below.
    let set = signal_set();
    // SAFETY: valid set.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let mounted = bfq_mount::mount(&cfg).with_context(|| {
        format!(
            "mounting {} on {}",
            cfg.backing.display(),
            cfg.mountpoint.display()
        )
    })?;
    eprintln!(
        "bfq mount: {} on {} (scheduler {}, {}); Ctrl-C or SIGTERM unmounts",
        cfg.backing.display(),
        mounted.mountpoint().display(),
        cfg.scheduler,
        if cfg.direct_io {
            "no page cache in the mount"
        } else {
            "keep_cache"
        },
    );
    let mut view = StatsView::default();
    let why = serve(&mounted, &set, interval, &mut view);
    print!("{}", view.render(mounted.table()));
    eprintln!(
        "bfq mount: {why}: unmounting {}",
        mounted.mountpoint().display()
    );
    mounted.unmount().context("unmounting")?;
    Ok(())
}

/// `--cleanup`: unmounts the dead bfq mounts at MOUNTPOINT (or BACKING_DIR,
/// as the one path given), or everywhere, says what it unmounted and what
/// it left; an error if MOUNTPOINT was given and something is left there.
fn cleanup(a: &Args) -> Result<()> {
    let target = a.mountpoint.as_deref().or(a.backing.as_deref());
    let done = bfq_mount::cleanup(target)?;
    for p in &done.unmounted {
        println!("unmounted {}", p.display());
    }
    for (p, why) in &done.left {
        println!("left {}: {why}", p.display());
    }
    if done.unmounted.is_empty() && done.left.is_empty() {
        println!("no bfq mounts");
    }
    // The last one left is the top of a stack.
    if let (Some(_), Some((p, why))) = (target, done.left.last()) {
        bail!("{}: {why}", p.display());
    }
    Ok(())
}

/// The mount's configuration from the options, and the `--stats`
/// interval (0.1..=3600 s).
fn config(a: Args) -> Result<(MountConfig, Option<Duration>)> {
    let (Some(backing), Some(mountpoint)) = (a.backing, a.mountpoint) else {
        bail!("usage: bfq mount BACKING_DIR MOUNTPOINT (or bfq mount --cleanup [MOUNTPOINT])");
    };
    let mut cfg = MountConfig::new(backing, mountpoint);
    cfg.scheduler = a.scheduler;
    cfg.settings = parse_settings(&a.set)?;
    crate::args::check_scheduler(
        &cfg.scheduler,
        &bfq_core::Settings::from_pairs(cfg.settings.iter().cloned()),
    )?;
    if let Some(p) = &a.policy {
        cfg.policy = Policy::load(p).map_err(anyhow::Error::msg)?;
    }
    cfg.direct_io = a.direct;
    cfg.backing_direct = !a.buffered_backing;
    cfg.nonempty = a.nonempty;
    cfg.threads = a.threads;
    cfg.queue_depth = a.depth;
    let interval = match a.stats {
        Some(s) if !(0.1..=3600.0).contains(&s) => bail!("--stats {s}: must be 0.1..=3600 seconds"),
        s => s.map(Duration::from_secs_f64),
    };
    Ok((cfg, interval))
}

/// Serves until a signal or an unmount from outside, printing the
/// statistics every `interval` and on SIGUSR1; returns why it stopped.
fn serve(
    mounted: &bfq_mount::Mounted,
    set: &libc::sigset_t,
    interval: Option<Duration>,
    view: &mut StatsView,
) -> &'static str {
    let mut next = interval.map(|i| Instant::now() + i);
    loop {
        if !mounted.is_running() {
            return "unmounted from outside";
        }
        match wait_signal(set, Duration::from_millis(200)) {
            Some(libc::SIGUSR1) => print!("{}", view.render(mounted.table())),
            Some(libc::SIGINT) => return "SIGINT",
            Some(libc::SIGTERM) => return "SIGTERM",
            Some(libc::SIGHUP) => return "SIGHUP",
            _ => {}
        }
        if let (Some(t), Some(i)) = (next, interval) {
            if Instant::now() >= t {
                print!("{}", view.render(mounted.table()));
                next = Some(t + i);
            }
        }
    }
}
