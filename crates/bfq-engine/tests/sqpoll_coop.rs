//! `coop_taskrun` leaves a dispatcher's SQPOLL ring as it is: the kernel
//! refuses `COOP_TASKRUN | TASKRUN_FLAG` with `SQPOLL`, and the option is
//! local mode's. Its own test binary: it counts the process's SQPOLL
//! threads.

use bfq_engine::{CoopTaskrun, Engine, FlowOptions, ShutdownMode, SubmitMode};

/// The process's io_uring SQPOLL threads (`iou-sqp-*`).
fn sqpoll_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("comm")).ok())
        .filter(|c| c.starts_with("iou-sqp"))
        .count()
}

/// SQPOLL threads the engine runs with `coop` set.
fn with_coop(coop: bool) -> usize {
    let before = sqpoll_threads();
    let e = Engine::nop()
        .submit_mode(SubmitMode::Dispatcher)
        .sqpoll(100)
        .coop_taskrun(if coop {
            CoopTaskrun::On
        } else {
            CoopTaskrun::Off
        })
        .open()
        .unwrap();
    let f = e.flow(FlowOptions::weight(100)).unwrap();
    for i in 0..10 {
        f.nop_async(i, 1).wait().0.unwrap();
    }
    let n = sqpoll_threads() - before;
    drop(f);
    e.shutdown(ShutdownMode::Drain).unwrap();
    n
}

#[test]
fn coop_taskrun_keeps_the_dispatchers_sqpoll() {
    if with_coop(false) == 0 {
        eprintln!("skipped: no SQPOLL thread here (io_uring SQPOLL unavailable)");
        return;
    }
    assert_eq!(with_coop(true), 1);
}
