//! `kernel:*` flows as processes of their own. cgroup v2's io controller
//! puts whole processes in a cgroup, so a flow with a weight of its own
//! needs a process of its own: the run starts its own binary once per flow
//! with the hidden subcommand [`SUBCOMMAND`], which calls [`serve`]. The
//! `bfq` binary has it; another program running `kernel:*` flows as
//! processes must call [`serve`] when started with [`SUBCOMMAND`].
//!
//! The protocol, one line each way on the child's stdin and stdout:
//! the parent writes the flow's [`KernelJob`] as JSON; the child sets its
//! I/O priority and opens the device; the parent moves the child into its
//! cgroup and, once every child is placed (and, for a flow with `after`,
//! once the children of the flows it follows have exited), writes
//! `go NS` (ns since the run's start, so that start delays, `stop` and the
//! series count from one instant); the child submits until its end and
//! writes its [`FlowReport`] as JSON. SIGINT/SIGTERM reach the children
//! (the parent forwards SIGTERM), which stop as flow threads do and
//! report.

use crate::kernel::KernelJob;
use crate::pace::{Ends, Gate};
use crate::report::FlowReport;
use crate::sys;
use std::io::{self, BufRead, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The hidden subcommand of the `bfq` binary that runs one flow.
pub const SUBCOMMAND: &str = "kernel-flow";

fn bad(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// The child's side: reads its job on `input`, opens the device, waits for
/// `go NS`, submits, and writes its report on `output`.
pub fn serve(mut input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    let _signals = sys::catch_forwarded_interrupts();
    // A run killed outright (SIGKILL) leaves no flow process behind: the
    // child gets SIGTERM when its parent dies (the thread that started it
    // waits for it), and stops as on an interrupt.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } == 1 {
        return Err(io::Error::other(format!("{SUBCOMMAND}: the run has ended")));
    }
    let mut line = String::new();
    input.read_line(&mut line)?;
    let job: KernelJob =
        serde_json::from_str(&line).map_err(|e| bad(format!("{SUBCOMMAND}: the job: {e}")))?;
    let file = job.open()?;
    line.clear();
    input.read_line(&mut line)?;
    let ns: u64 = line
        .trim()
        .strip_prefix("go ")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| bad(format!("{SUBCOMMAND}: expected 'go NS', got {line:?}")))?;
    let now = Instant::now();
    let start = now.checked_sub(Duration::from_nanos(ns)).unwrap_or(now);
    let stop = Arc::new(AtomicBool::new(false));
    let watch = sys::watch_interrupts(stop.clone());
    // The flows it follows have ended: the parent said go after them.
    let gate = Gate {
        ends: Ends::new(1),
        deps: Vec::new(),
    };
    let report = job.submit(&file, &stop, start, gate);
    drop(watch);
    let text = serde_json::to_string(&report?).map_err(|e| bad(e.to_string()))?;
    writeln!(output, "{text}")?;
    output.flush()
}

/// One flow's process, as the parent sees it.
struct Proc {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    out: Option<JoinHandle<io::Result<String>>>,
    started: bool,
    exited: Option<std::process::ExitStatus>,
}

/// Starts `exe SUBCOMMAND` for `job` and hands it the job.
fn spawn(exe: &std::path::Path, job: &KernelJob) -> io::Result<Proc> {
    let mut child = Command::new(exe)
        .arg(SUBCOMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", exe.display())))?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");
    // The report may exceed a pipe's buffer: read it while the child runs.
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let text = serde_json::to_string(job).map_err(|e| bad(e.to_string()))?;
    writeln!(stdin, "{text}")?;
    Ok(Proc {
        name: job.desc.name.clone(),
        child,
        stdin: Some(stdin),
        out: Some(out),
        started: false,
        exited: None,
    })
}

/// Runs each job in a process of its own, placed in its cgroup, the
/// flows with `deps` released when those have exited. Returns the run's
/// start and each flow's report (or why it has none), in job order.
pub(crate) fn run_processes(
    jobs: Vec<KernelJob>,
    cgroups: &[Option<Arc<sys::Cgroup>>],
    deps: Vec<Vec<usize>>,
    stop: &AtomicBool,
) -> io::Result<(Instant, Vec<io::Result<FlowReport>>)> {
    let exe = std::env::current_exe()?;
    let mut procs: Vec<Proc> = Vec::with_capacity(jobs.len());
    let placed = jobs.iter().zip(cgroups).try_for_each(|(job, cg)| {
        let p = spawn(&exe, job)?;
        let pid = p.child.id() as i32;
        procs.push(p);
        cg.as_ref().map_or(Ok(()), |cg| cg.add_thread(pid))
    });
    let t0 = Instant::now();
    if let Err(e) = placed {
        stop.store(true, Ordering::SeqCst);
        supervise(&mut procs, &deps, stop, t0);
        return Err(e);
    }
    supervise(&mut procs, &deps, stop, t0);
    Ok((t0, procs.iter_mut().map(collect).collect()))
}

/// Releases the children (each once those it follows have exited) and
/// waits for all; on `stop` the running ones get SIGTERM and the waiting
/// ones their stdin closed (they exit without running).
fn supervise(procs: &mut [Proc], deps: &[Vec<usize>], stop: &AtomicBool, t0: Instant) {
    let mut signalled = false;
    loop {
        for p in procs.iter_mut().filter(|p| p.exited.is_none()) {
            p.exited = p.child.try_wait().ok().flatten();
        }
        let stopping = stop.load(Ordering::SeqCst);
        for i in 0..procs.len() {
            let ready = deps[i].iter().all(|&k| procs[k].exited.is_some());
            let p = &mut procs[i];
            if p.started || p.exited.is_some() {
                continue;
            }
            if stopping {
                p.stdin = None;
            } else if ready {
                let go = format!("go {}\n", t0.elapsed().as_nanos());
                if let Some(w) = p.stdin.as_mut() {
                    let _ = w.write_all(go.as_bytes()).and_then(|_| w.flush());
                }
                p.stdin = None;
                p.started = true;
            }
        }
        if stopping && !signalled {
            signalled = true;
            for p in procs.iter().filter(|p| p.exited.is_none()) {
                // SAFETY: kill of our own child by pid.
                unsafe { libc::kill(p.child.id() as i32, libc::SIGTERM) };
            }
        }
        if procs.iter().all(|p| p.exited.is_some()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A child's report, or why there is none.
fn collect(p: &mut Proc) -> io::Result<FlowReport> {
    let out = p.out.take().map(|h| h.join());
    let text = match out {
        Some(Ok(Ok(s))) => s,
        _ => String::new(),
    };
    let status = p.exited.map(|s| s.to_string()).unwrap_or_default();
    if !p.exited.is_some_and(|s| s.success()) {
        return Err(io::Error::other(format!(
            "flow {}: its process ended with {status}",
            p.name
        )));
    }
    serde_json::from_str(text.trim()).map_err(|e| {
        bad(format!(
            "flow {}: its process's report: {e} (does this program serve `{SUBCOMMAND}`?)",
            p.name
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::{FlowDesc, OnOff, Pattern};
    use bfq_core::{IoClass, IoPrio};
    use std::path::PathBuf;

    #[test]
    fn a_job_and_a_report_cross_the_pipe_unchanged() {
        let mut d = FlowDesc::reader("r", Pattern::Replay(vec![(0, 4096), (8192, 512)]), 4096);
        d.prio = IoPrio {
            class: IoClass::Idle,
            level: 6,
        };
        d.on_off = Some(OnOff {
            on_bytes: (1, 2),
            off: (Duration::from_millis(1), Duration::from_millis(3)),
        });
        d.after = vec!["a".into()];
        d.stop = Some(Duration::from_secs(2));
        let job = KernelJob {
            desc: d,
            index: 3,
            region: (4096, 1 << 20),
            target: PathBuf::from("/dev/loop9"),
            direct: true,
            writable: false,
            duration: Duration::from_secs(5),
            interval: Duration::from_millis(100),
            client: crate::desc::KernelClient::Pread,
        };
        let back: KernelJob = serde_json::from_str(&serde_json::to_string(&job).unwrap()).unwrap();
        assert_eq!(back.desc, job.desc);
        assert_eq!(back.client, job.client);
        assert_eq!(
            (back.index, back.region, back.duration),
            (3, (4096, 1 << 20), job.duration)
        );
        let e = serde_json::from_str::<KernelJob>(
            &serde_json::to_string(&job)
                .unwrap()
                .replace("\"prio\":[2,6]", "\"prio\":[7,6]"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("I/O class 7"), "{e}");
        let r = FlowReport {
            name: "r".into(),
            lat: [1, 2, 3].into_iter().collect(),
            start_s: Some(0.5),
            run_ends_s: vec![1.5],
            first_error: Some("EIO".into()),
            ..Default::default()
        };
        let back: FlowReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_child_without_go_runs_nothing_and_says_why() {
        let job = "{\"bogus\":1}\n";
        let e = serve(job.as_bytes(), Vec::new()).unwrap_err();
        assert!(e.to_string().contains("kernel-flow: the job"), "{e}");
    }
}
