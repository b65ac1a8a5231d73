//! What the builder, `open` and the engine's calls promise at the edges of
//! their ranges (no root needed; no assertion depends on timing).

mod common;

use bfq_engine::{
    block_on, wait_any, AlignedBuf, DeviceInfo, Engine, EngineBuilder, FlowOptions, GroupId,
    ShutdownMode, MAX_QUEUE_DEPTH,
};
use std::io;
use std::path::Path;

/// A read or write on an engine from `Engine::nop()` is an io_uring NOP:
/// it moves no bytes (a read's buffer is left as it was) and reports its
/// full length, as `nop_async` does; none counts as an error.
#[test]
fn reads_and_writes_on_a_nop_engine_report_their_full_length() {
    let engine = Engine::nop().open().unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    let (r, buf) = flow.read(0, AlignedBuf::from_slice(&[7u8; 4096]));
    assert_eq!(r.unwrap(), 4096);
    assert!(buf.iter().all(|&b| b == 7), "a NOP read wrote the buffer");
    let (r, _) = flow.write(1 << 20, vec![1u8; 512]);
    assert_eq!(r.unwrap(), 512);
    let (r, _) = flow.read_async(0, vec![0u8; 100]).wait();
    assert_eq!(r.unwrap(), 100);
    let (r, ()) = flow.nop_async(0, 8).wait();
    assert_eq!(r.unwrap(), 4096);
    drop(flow);
    let stats = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!((stats.completed, stats.errors), (4, 0), "{stats:?}");
}

fn device(queue_depth: u32) -> DeviceInfo {
    DeviceInfo {
        queue_depth,
        queues_internally: true,
        rotational: false,
    }
}

/// The message of `open`'s error, which must be `InvalidInput`.
fn refused(b: EngineBuilder) -> String {
    match b.open() {
        Ok(_) => panic!("opened"),
        Err(e) => {
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
            e.to_string()
        }
    }
}

/// `device_info`'s queue depth is checked as `queue_depth` is, and is the
/// depth the engine runs; given both, they must agree.
#[test]
fn device_infos_queue_depth_is_checked_and_is_the_engines_depth() {
    for depth in [0, MAX_QUEUE_DEPTH + 1, 1_000_000] {
        let e = refused(Engine::nop().device_info(device(depth)));
        assert!(
            e.contains("device_info's queue_depth") && e.contains("1..=4096"),
            "{e}"
        );
    }
    let e = refused(Engine::nop().queue_depth(32).device_info(device(64)));
    assert!(
        e.contains("queue_depth=32") && e.contains("queue_depth=64"),
        "{e}"
    );
    let e = refused(Engine::nop().device_info(device(64)).queue_depth(32));
    assert!(
        e.contains("queue_depth=32") && e.contains("queue_depth=64"),
        "{e}"
    );
    for b in [
        Engine::nop().device_info(device(1)),
        Engine::nop().device_info(device(1)).queue_depth(1),
        Engine::nop().queue_depth(1),
    ] {
        let engine = b.open().unwrap();
        assert_eq!(engine.device_info().queue_depth, 1);
        // One deep: a read of a pipe nobody writes to holds the device,
        // and a second request waits in the scheduler.
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        let (target, _w) = common::pipe();
        let busy = flow.read_file_async(&target, 0, vec![0u8; 1]);
        let nop = flow.nop_async(0, 1);
        while engine.stats().unwrap().in_flight == 0 {
            assert!(!busy.is_done());
        }
        assert!(!nop.is_done());
        let stats = engine.stats().unwrap();
        assert_eq!((stats.in_flight, stats.queued), (1, 1), "{stats:?}");
        drop((busy, nop, flow));
        engine.shutdown(ShutdownMode::Cancel).unwrap();
    }
    let engine = Engine::nop().open().unwrap();
    assert_eq!(engine.device_info().queue_depth, 32);
}

/// `open`'s error for a target it cannot open is the OS's, its code kept;
/// a directory is `EISDIR`, whatever the flags.
#[test]
fn open_errors_keep_the_os_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let e = Engine::builder(&missing).open().err().expect("opened");
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    for (direct, writable) in [(true, false), (false, false), (true, true), (false, true)] {
        let b = Engine::builder(dir.path())
            .direct(direct)
            .writable(writable);
        let e = b.open().err().expect("opened a directory");
        assert_eq!(
            e.raw_os_error(),
            Some(libc::EISDIR),
            "{direct} {writable}: {e}"
        );
        assert!(
            e.to_string().to_lowercase().contains("is a directory"),
            "{e}"
        );
    }
    let d = std::fs::File::open(dir.path()).unwrap();
    let e = Engine::builder_for_file(d).open().err().expect("opened");
    assert_eq!(e.raw_os_error(), Some(libc::EISDIR), "{e}");
    // SAFETY: a plain syscall.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!("skipped: a read-only file opened for writing (root may)");
        return;
    }
    let ro = dir.path().join("ro");
    std::fs::write(&ro, [0u8; 4096]).unwrap();
    let mut perm = std::fs::metadata(&ro).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o444);
    std::fs::set_permissions(&ro, perm).unwrap();
    let e = Engine::builder(&ro).direct(false).writable(true).open();
    let e = e.err().expect("opened a read-only file for writing");
    assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
}

/// `create` opens the target for writing whatever `writable` says, before
/// or after it.
#[test]
fn create_implies_writable_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let builders: [fn(&Path) -> EngineBuilder; 3] = [
        |p| Engine::builder(p).create(1 << 20).writable(false),
        |p| Engine::builder(p).writable(false).create(1 << 20),
        |p| Engine::builder(p).create(1 << 20),
    ];
    for (i, b) in builders.into_iter().enumerate() {
        let path = dir.path().join(format!("f{i}"));
        let engine = b(&path).direct(false).open().unwrap();
        assert_eq!(engine.len(), 1 << 20);
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        let (r, _) = flow.write(0, vec![1u8; 512]);
        assert_eq!(r.unwrap(), 512, "{i}");
    }
}

/// `create` is for a regular file given by path: refused for anything
/// else, never ignored.
#[test]
fn create_is_refused_for_anything_but_a_regular_file_by_path() {
    let e = refused(Engine::builder("/dev/null").direct(false).create(1 << 40));
    assert!(
        e.contains("regular files") && e.contains("/dev/null"),
        "{e}"
    );
    let e = refused(Engine::nop().create(1 << 20));
    assert!(e.contains("by path"), "{e}");
    let f = tempfile::tempfile().unwrap();
    let e = refused(Engine::builder_for_file(f).direct(false).create(1 << 20));
    assert!(e.contains("by path"), "{e}");
}

/// The root group is never removed, and says so; a closed flow keeps its
/// group until its requests are done, and the refusal says so.
#[test]
fn remove_group_says_why_it_refuses() {
    let engine = Engine::nop().scheduler("fifo").open().unwrap();
    let e = engine.remove_group(GroupId::ROOT).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("root group"), "{e}");
    let g = engine.add_group(GroupId::ROOT, 100).unwrap();
    let flow = engine.flow(FlowOptions::weight(100).group(g)).unwrap();
    let (target, mut w) = common::pipe();
    let read = flow.read_file_async(&target, 0, vec![0u8; 1]);
    while engine.stats().unwrap().in_flight == 0 {
        assert!(!read.is_done());
    }
    drop(flow);
    let e = engine.remove_group(g).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("closed flow"), "{e}");
    std::io::Write::write_all(&mut w, b"x").unwrap();
    assert_eq!(read.wait().0.unwrap(), 1);
    engine.remove_group(g).unwrap();
    engine.shutdown(ShutdownMode::Drain).unwrap();
}

/// A `Pending` polled to `Ready` is done with: `is_done` stays true,
/// `wait_any` counts it as done, and `wait` on it panics, as documented.
#[test]
fn wait_after_ready_panics_as_documented() {
    let engine = Engine::nop().open().unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    let mut p = flow.read_async(0, vec![0u8; 8]);
    let (r, _) = block_on(&mut p);
    assert_eq!(r.unwrap(), 8);
    assert!(p.is_done());
    assert_eq!(wait_any([&p]), Some(0));
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.wait()))
        .expect_err("wait returned");
    let msg = e.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(msg.contains("polled to Ready"), "{msg}");
}

/// A request must end below 2^64 bytes: one ending at 2^64 - 1 is served,
/// one ending at 2^64 is refused, and the message says "below".
#[test]
fn a_request_must_end_below_2_pow_64() {
    let engine = Engine::nop().open().unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    let (r, _) = flow.read(u64::MAX - 4096, vec![0u8; 4096]);
    assert_eq!(r.unwrap(), 4096);
    let (r, _) = flow.read(u64::MAX - 4095, vec![0u8; 4096]);
    let e = r.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("below 2^64"), "{e}");
}

/// `nop_async` reports its length: `sectors * 512`, 0 for 0 sectors.
#[test]
fn nop_async_reports_its_length_zero_included() {
    let engine = Engine::nop().open().unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    for (sectors, want) in [(0, 0), (1, 512), (8, 4096)] {
        let (r, ()) = flow.nop_async(0, sectors).wait();
        assert_eq!(r.unwrap(), want, "{sectors} sectors");
    }
}
