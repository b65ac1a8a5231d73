//! Workload runner on regular files (no root), and with root on a loop
//! device under the kernel's schedulers (skipped with a message otherwise).

use bfq_core::Settings;
use bfq_real::sys::{self, LoopDevice};
use bfq_real::{Backend, Dir, FlowDesc, Pattern, RunConfig};
use std::path::Path;
use std::time::Duration;

fn flows() -> Vec<FlowDesc> {
    let mut a = FlowDesc::reader("seq", Pattern::Seq, 64 << 10);
    a.weight = Some(100);
    a.bytes = Some(2 << 20);
    let mut b = FlowDesc::reader("rand", Pattern::Rand, 4096);
    b.weight = Some(300);
    b.depth = 4;
    b.bytes = Some(1 << 20);
    b.runs = 2;
    let mut c = FlowDesc::reader(
        "replay",
        Pattern::Replay(vec![(0, 4096), (8192, 8192)]),
        4096,
    );
    c.bytes = Some(64 << 10);
    c.think = Duration::from_micros(10);
    vec![a, b, c]
}

/// A `fifo` run of `secs` on a 16 MiB file in `dir`, made by the run.
fn fifo_on_file(dir: &tempfile::TempDir, secs: u64) -> (std::path::PathBuf, RunConfig) {
    on_file(dir, "fifo", Duration::from_secs(secs))
}

/// A run of `sched` for `d` on a 16 MiB file in `dir`, made by the run.
fn on_file(dir: &tempfile::TempDir, sched: &str, d: Duration) -> (std::path::PathBuf, RunConfig) {
    let target = dir.path().join("target.img");
    let mut cfg = RunConfig::new(&target, Backend::parse(sched, Settings::new()), d);
    cfg.create_size = Some(16 << 20);
    (target, cfg)
}

#[test]
fn runs_flows_through_the_engine_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (target, mut cfg) = fifo_on_file(&dir, 30);
    let r = bfq_real::run(&cfg, &flows()).unwrap();
    assert_eq!(r.flows.len(), 3);
    // Byte budgets end the run long before the duration.
    assert_eq!(r.flows[0].bytes, 2 << 20);
    assert_eq!(r.flows[1].bytes, 2 << 20, "two repetitions of 1 MiB");
    assert_eq!(r.flows[2].bytes, 64 << 10);
    assert!(r.flows.iter().all(|f| f.errors == 0));

    // Writes are refused unless allowed.
    let mut w = flows();
    w[0].dir = Dir::Write;
    let e = bfq_real::run(&cfg, &w).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    cfg.allow_writes = true;
    let r = bfq_real::run(&cfg, &w).unwrap();
    assert_eq!(r.flows[0].bytes, 2 << 20);

    // The kernel's schedulers need a block device.
    let cfg = RunConfig::new(
        &target,
        Backend::parse("kernel:bfq", Settings::new()),
        Duration::from_secs(1),
    );
    assert!(bfq_real::run(&cfg, &flows()).is_err());
}

/// A warm-up reader reads through the run's engine before the flows, and
/// is not in the report.
#[test]
fn a_warm_up_reads_before_the_flows_and_stays_out_of_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut cfg) = fifo_on_file(&dir, 30);
    let trace = dir.path().join("trace.csv");
    cfg.trace = Some(trace.clone());
    cfg.warm_up = Some(Duration::from_millis(100));
    let r = bfq_real::run(&cfg, &flows()).unwrap();
    assert_eq!(r.flows.len(), 3);
    assert_eq!(r.flows[0].bytes, 2 << 20);
    let text = std::fs::read_to_string(&trace).unwrap();
    let order: Vec<&str> = text
        .lines()
        .skip(1)
        .filter(|l| l.split(',').nth(1) == Some("D"))
        .map(|l| l.split(',').nth(2).unwrap())
        .collect();
    let warm = order.iter().take_while(|&&f| f == "warm-up").count();
    assert!(warm > 0, "the warm-up reader dispatched first");
    assert!(
        order[warm..].iter().all(|&f| f != "warm-up"),
        "and was done before the flows started"
    );
    // Lengths outside (0, 60 s] are refused.
    cfg.warm_up = Some(Duration::ZERO);
    let e = bfq_real::run(&cfg, &flows()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn kernel_side_by_side_on_a_loop_device() {
    if !sys::is_root() {
        eprintln!("SKIPPED kernel_side_by_side_on_a_loop_device: needs root");
        return;
    }
    if !std::path::Path::new("/dev/loop-control").exists() {
        eprintln!("SKIPPED kernel_side_by_side_on_a_loop_device: no loop devices");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("loop.img");
    bfq_real::create_filled(&img, 32 << 20).unwrap();
    let dev = match LoopDevice::create(&img, 32 << 20, true) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIPPED kernel_side_by_side_on_a_loop_device: {e}");
            return;
        }
    };
    let (_, before) = sys::block_schedulers(dev.path()).unwrap();
    runs_on_each_backend(dev.path());
    runs_nested_kernel_groups(dev.path());
    warm_up_reads_through_the_kernel(dev.path());
    let (_, after) = sys::block_schedulers(dev.path()).unwrap();
    assert_eq!(before, after, "the device's scheduler is restored");
    // No cgroup of ours is left.
    let pid = std::process::id();
    assert!(!std::path::Path::new(&format!("{}/bfq-rs-{pid}-0", sys::BLKIO_V1)).exists());
    assert!(!std::path::Path::new(&format!("{}/bfq-rs-{pid}-g0", sys::BLKIO_V1)).exists());
    one_cgroup_for_all(dev.path());
    // Writes to a device are refused unless allowed.
    let mut w = flows();
    w[0].dir = Dir::Write;
    let cfg = RunConfig::new(
        dev.path(),
        Backend::parse("kernel:none", Settings::new()),
        Duration::from_secs(1),
    );
    assert!(bfq_real::run(&cfg, &w).is_err());
    dev.remove().unwrap();
}

/// A kernel:bfq run of up to 30 s on `dev`.
fn kernel_bfq(dev: &Path) -> RunConfig {
    RunConfig::new(
        dev,
        Backend::parse("kernel:bfq", Settings::new()),
        Duration::from_secs(30),
    )
}

/// The flows run without errors under kernel:bfq, kernel:none and fifo,
/// the first reading its 2 MiB.
fn runs_on_each_backend(dev: &Path) {
    for sched in ["kernel:bfq", "kernel:none", "fifo"] {
        let cfg = RunConfig::new(
            dev,
            Backend::parse(sched, Settings::new()),
            Duration::from_secs(30),
        );
        let r = bfq_real::run(&cfg, &flows()).unwrap_or_else(|e| panic!("{sched}: {e}"));
        assert_eq!(r.flows[0].bytes, 2 << 20, "{sched}");
        assert!(
            r.flows.iter().all(|f| f.errors == 0),
            "{sched}: {:?}",
            r.flows
        );
    }
}

/// Nested groups on the kernel side: cgroups inside cgroups.
fn runs_nested_kernel_groups(dev: &Path) {
    let mut cfg = kernel_bfq(dev);
    cfg.groups = vec![
        bfq_real::GroupDesc {
            name: "/a".into(),
            weight: 300,
            parent: None,
        },
        bfq_real::GroupDesc {
            name: "/a/b".into(),
            weight: 100,
            parent: Some("/a".into()),
        },
    ];
    let mut g = flows();
    g[0].group = Some("/a/b".into());
    g[1].group = Some("/a".into());
    let r = bfq_real::run(&cfg, &g).unwrap();
    assert!(r.flows.iter().all(|f| f.errors == 0), "{:?}", r.flows);
}

/// Sectors read from block device `dev` so far (its `stat`).
fn read_sectors(dev: &Path) -> u64 {
    let name = dev.file_name().unwrap().to_str().unwrap().to_owned();
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    stat.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// A warm-up reads through the device's scheduler before the flows:
/// the device counts more sectors read than the flows' byte budgets.
fn warm_up_reads_through_the_kernel(dev: &Path) {
    let mut cfg = kernel_bfq(dev);
    let budgets: u64 = flows()
        .iter()
        .map(|f| f.bytes.unwrap() * f.runs as u64)
        .sum();
    let without = read_sectors(dev);
    bfq_real::run(&cfg, &flows()).unwrap();
    let flows_only = read_sectors(dev) - without;
    assert!(
        flows_only * 512 <= budgets + (1 << 20),
        "{flows_only} sectors"
    );
    cfg.warm_up = Some(Duration::from_millis(200));
    let with = read_sectors(dev);
    let r = bfq_real::run(&cfg, &flows()).unwrap();
    assert!(r.flows.iter().all(|f| f.errors == 0), "{:?}", r.flows);
    assert!(
        (read_sectors(dev) - with) * 512 > budgets + (1 << 20),
        "the warm-up read through kernel:bfq"
    );
}

/// One cgroup for all: flows of different weights are refused, equal
/// weights run, flows stay where they are.
fn one_cgroup_for_all(dev: &Path) {
    let mut cfg = kernel_bfq(dev);
    cfg.kernel_groups = bfq_real::KernelGroups::One;
    let e = bfq_real::run(&cfg, &flows()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
    let mut same = flows();
    for f in &mut same {
        f.weight = Some(100);
    }
    let r = bfq_real::run(&cfg, &same).unwrap();
    assert!(r.flows.iter().all(|f| f.errors == 0), "{:?}", r.flows);
    assert_eq!(r.flows[0].bytes, 2 << 20);
}

#[test]
fn refuses_mounted_devices() {
    // The root filesystem's device is mounted: always refused.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let Some(src) = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find(|s| s.starts_with("/dev/") && sys::is_block_device(std::path::Path::new(s)))
    else {
        eprintln!("SKIPPED refuses_mounted_devices: no mounted block device");
        return;
    };
    let e = sys::check_not_mounted(std::path::Path::new(src)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy, "{e}");
}

/// Unmounts on drop.
struct Mount(std::path::PathBuf);
impl Drop for Mount {
    fn drop(&mut self) {
        // A closed io_uring ring lets go of its registered file a little
        // later (the kernel tears rings down asynchronously): retry, then
        // detach lazily.
        for _ in 0..100 {
            let ok = std::process::Command::new("umount")
                .arg(&self.0)
                .stderr(std::process::Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn full_filesystem_fails_the_write_with_enospc() {
    if !sys::is_root() {
        eprintln!("SKIPPED full_filesystem_fails_the_write_with_enospc: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "bfq-engine-test"])
        .arg(dir.path())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIPPED full_filesystem_fails_the_write_with_enospc: cannot mount tmpfs");
        return;
    }
    let _m = Mount(dir.path().to_path_buf());
    let path = dir.path().join("f");
    std::fs::write(&path, b"").unwrap();
    let engine = bfq_engine::Engine::builder(&path)
        .writable(true)
        .direct(false)
        .open()
        .unwrap();
    let flow = engine.flow(bfq_engine::FlowOptions::default()).unwrap();
    let mut saw_enospc = false;
    for i in 0..128u64 {
        let (r, _) = flow.write(i * 4096, vec![7u8; 4096]);
        match r {
            Ok(n) => assert_eq!(n, 4096),
            Err(e) => {
                assert!(
                    e.raw_os_error() == Some(libc::ENOSPC)
                        || e.kind() == std::io::ErrorKind::WriteZero,
                    "{e}"
                );
                saw_enospc = true;
                break;
            }
        }
    }
    assert!(saw_enospc, "a 256 KiB filesystem fills up");
    // Reads still work after the failed write.
    let (r, buf) = flow.read(0, vec![0u8; 4096]);
    assert_eq!(r.unwrap(), 4096);
    assert_eq!(buf[0], 7);
    drop(flow);
    drop(engine);
}

#[test]
fn trace_has_queue_dispatch_complete_for_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img");
    let trace = dir.path().join("trace.csv");
    let mut cfg = RunConfig::new(
        &target,
        Backend::parse("fifo", Settings::new()),
        Duration::from_secs(30),
    );
    cfg.create_size = Some(4 << 20);
    cfg.trace = Some(trace.clone());
    let mut f = FlowDesc::reader("reader", Pattern::Seq, 4096);
    f.bytes = Some(100 * 4096);
    let r = bfq_real::run(&cfg, &[f]).unwrap();
    assert_eq!(r.flows[0].ios, 100);
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("t_ns,event,flow,req,sector,sectors,op"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    for ev in ["Q", "D", "C"] {
        assert_eq!(rows.iter().filter(|r| r[1] == ev).count(), 100, "{ev}");
    }
    assert!(rows
        .iter()
        .all(|r| r[2] == "reader" && r[5] == "8" && r[6] == "R"));
}

#[test]
fn flows_stop_at_their_own_end_and_start_after_others() {
    let dir = tempfile::tempdir().unwrap();
    let (_, cfg) = fifo_on_file(&dir, 60);
    let mut a = FlowDesc::reader("a", Pattern::Seq, 64 << 10);
    a.bytes = Some(2 << 20);
    let mut t = FlowDesc::reader("t", Pattern::Rand, 4096);
    t.duration = Some(Duration::from_millis(300));
    let mut s = FlowDesc::reader("s", Pattern::Rand, 4096);
    s.stop = Some(Duration::from_millis(200));
    let mut b = FlowDesc::reader("b", Pattern::Seq, 64 << 10);
    b.after = vec!["a".into(), "t".into()];
    b.bytes = Some(1 << 20);
    // d starts late, and each of its two runs waits only for its own
    // start: the first for the start delay, the second for the gap
    let mut d = FlowDesc::reader("d", Pattern::Rand, 4096);
    d.start = Duration::from_millis(150);
    d.bytes = Some(64 << 10);
    d.runs = 2;
    d.repeat = Duration::from_millis(50);
    let r = bfq_real::run(&cfg, &[a, t, s, b.clone(), d]).unwrap();
    let by = |n: &str| r.flows.iter().find(|f| f.name == n).unwrap();
    assert!(r.flows.iter().all(|f| f.errors == 0 && f.bytes > 0));
    // t and s end by their own ends, recorded as their runs' ends
    let (t, s) = (by("t"), by("s"));
    assert_eq!((t.run_ends_s.len(), s.run_ends_s.len()), (1, 1));
    assert!(t.run_ends_s[0] - t.start_s.unwrap() >= 0.3);
    assert!(s.run_ends_s[0] >= 0.2);
    // b starts once a and t have both ended, and reads its bytes
    let deps_end = by("a").run_ends_s[0].max(t.run_ends_s[0]);
    assert!(by("b").start_s.unwrap() >= deps_end);
    assert_eq!(by("b").bytes, 1 << 20);
    let d = by("d");
    assert_eq!((d.run_starts_s.len(), d.bytes), (2, 128 << 10));
    assert!(d.start_s.unwrap() >= 0.15);
    assert!(d.run_starts_s[1] - d.run_ends_s[0] >= 0.05);
    // the run ends with its last flow, long before its 60 s
    assert!(r.seconds < 30.0);
    // an unknown name is an error
    b.after = vec!["nobody".into()];
    let e = bfq_real::run(&cfg, &[b]).unwrap_err();
    assert!(
        e.to_string()
            .contains("after: no other flow is named nobody"),
        "{e}"
    );
}

#[test]
fn a_loop_device_says_whether_it_bypasses_the_page_cache() {
    if !sys::is_root() || !std::path::Path::new("/dev/loop-control").exists() {
        eprintln!("SKIPPED a_loop_device_says_whether_it_bypasses_the_page_cache: needs root and loop devices");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("dio.img");
    bfq_real::create_filled(&img, 4 << 20).unwrap();
    for direct in [true, false] {
        let dev = match LoopDevice::create(&img, 4 << 20, direct) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("SKIPPED a_loop_device_says_whether_it_bypasses_the_page_cache: {e}");
                return;
            }
        };
        assert_eq!(sys::loop_direct_io(dev.path()), Some(direct));
    }
    // Anything but a loop device: no answer.
    assert_eq!(sys::loop_direct_io(&img), None);
    assert_eq!(sys::loop_direct_io(std::path::Path::new("/dev/null")), None);
}

/// A block device's size bounds its flows' regions; a size to create
/// does not apply to it.
#[test]
fn a_devices_regions_are_checked_against_its_size() {
    let skip = "SKIPPED a_devices_regions_are_checked_against_its_size";
    if !sys::is_root() || !Path::new("/dev/loop-control").exists() {
        eprintln!("{skip}: needs root and loop devices");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("dev.img");
    bfq_real::create_filled(&img, 8 << 20).unwrap();
    let dev = match LoopDevice::create(&img, 8 << 20, true) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{skip}: {e}");
            return;
        }
    };
    assert_eq!(
        bfq_real::target_size(dev.path(), Some(1 << 40)).unwrap(),
        8 << 20
    );
    let mut f = FlowDesc::reader("a", Pattern::Seq, 4096);
    f.region = Some((6 << 20, 4 << 20));
    let cfg = RunConfig::new(
        dev.path(),
        Backend::parse("fifo", Settings::new()),
        Duration::from_secs(1),
    );
    let e = bfq_real::run(&cfg, &[f]).unwrap_err();
    assert!(e.to_string().starts_with("flow a: region"), "{e}");
    dev.remove().unwrap();
}

/// `create_filled` refuses a file its filesystem has no room for, before
/// writing anything (a 4 MiB tmpfs).
#[test]
fn a_file_too_large_for_its_filesystem_is_not_created() {
    let skip = "SKIPPED a_file_too_large_for_its_filesystem_is_not_created";
    if !sys::is_root() {
        eprintln!("{skip}: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "bfq-create-test"])
        .arg(dir.path())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("{skip}: cannot mount tmpfs");
        return;
    }
    let _m = Mount(dir.path().to_path_buf());
    bfq_real::create_filled(&dir.path().join("a"), 3 << 20).unwrap();
    let e = bfq_real::create_filled(&dir.path().join("b"), 3 << 20).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
    assert!(e.to_string().contains("free"), "{e}");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["a"]);
}

/// A loop device of 4096-byte logical blocks (direct I/O) over a filled
/// image of `size` bytes in a temporary directory (returned with it, to
/// keep), or `None` after saying why (`skip`) where it cannot be made.
fn loop_4k(skip: &str, size: u64) -> Option<(tempfile::TempDir, LoopDevice)> {
    if !sys::is_root() || !Path::new("/dev/loop-control").exists() {
        eprintln!("{skip}: needs root and loop devices");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("4k.img");
    bfq_real::create_filled(&img, size).unwrap();
    match LoopDevice::create_with(&img, size, true, 4096) {
        Ok(d) => Some((dir, d)),
        Err(e) => {
            eprintln!("{skip}: {e}");
            None
        }
    }
}

/// On a device of 4096-byte logical blocks (a loop device made with
/// `--sector-size 4096`, as a 4Kn disk), direct I/O in 512-byte units
/// fails with `EINVAL`: such flows are refused before the run starts,
/// naming the flow and the device's block size, on the engine's side and
/// the kernel's; whole blocks run, and buffered runs take any sector.
#[test]
fn flows_not_in_whole_blocks_of_a_4096_byte_device_are_refused() {
    let skip = "SKIPPED flows_not_in_whole_blocks_of_a_4096_byte_device_are_refused";
    let Some((_dir, dev)) = loop_4k(skip, 8 << 20) else {
        return;
    };
    let f = std::fs::File::open(dev.path()).unwrap();
    assert_eq!(bfq_engine::direct_io_block(&f).unwrap(), 4096);
    let reader = |block: u32, region: Option<(u64, u64)>, pattern: Pattern| {
        let mut f = FlowDesc::reader("a", pattern, block);
        f.region = region;
        f.bytes = Some(256 << 10);
        f
    };
    let refused = [
        (reader(512, None, Pattern::Seq), "requests of 512 bytes"),
        (reader(6144, None, Pattern::Rand), "requests of 6144 bytes"),
        (
            reader(4096, Some((512, 1 << 20)), Pattern::Seq),
            "a region starting at byte 512",
        ),
        (
            reader(4096, None, Pattern::Replay(vec![(0, 4096), (4096, 512)])),
            "replayed request 2 (512 bytes at offset 4096)",
        ),
    ];
    for backend in ["fifo", "kernel:none"] {
        let cfg = RunConfig::new(
            dev.path(),
            Backend::parse(backend, Settings::new()),
            Duration::from_secs(10),
        );
        for (flow, what) in &refused {
            let e = bfq_real::run(&cfg, std::slice::from_ref(flow)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
            let want = format!(
                "flow a: {what} on {}, whose logical block size is 4096 bytes",
                dev.path().display()
            );
            assert!(e.to_string().starts_with(&want), "{backend}: {e}");
        }
        let r = bfq_real::run(&cfg, &[reader(4096, None, Pattern::Rand)]).unwrap();
        assert_eq!((r.flows[0].bytes, r.flows[0].errors), (256 << 10, 0));
    }
    let mut cfg = RunConfig::new(
        dev.path(),
        Backend::parse("fifo", Settings::new()),
        Duration::from_secs(10),
    );
    cfg.direct = false;
    let r = bfq_real::run(&cfg, &[reader(512, None, Pattern::Rand)]).unwrap();
    assert_eq!((r.flows[0].bytes, r.flows[0].errors), (256 << 10, 0));
    dev.remove().unwrap();
}

/// A regular file's direct-I/O unit is what its filesystem reports: on
/// an ext4 made on a device of 4096-byte logical blocks, 4096 (a file
/// elsewhere, where the unit is 512, would not tell a unit read from the
/// file from a fixed 512).
#[test]
fn a_file_on_a_4096_byte_device_has_a_4096_byte_direct_io_unit() {
    let skip = "SKIPPED a_file_on_a_4096_byte_device_has_a_4096_byte_direct_io_unit";
    let Some((dir, dev)) = loop_4k(skip, 16 << 20) else {
        return;
    };
    let mkfs = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-b", "4096"])
        .arg(dev.path())
        .status();
    if !mkfs.is_ok_and(|s| s.success()) {
        return eprintln!("{skip}: mkfs.ext4 failed or is missing");
    }
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .arg(dev.path())
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(ok.success(), "mount");
    /// Unmounts on every way out, the failing ones included.
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let unmount = Unmount(&mnt);
    let f = std::fs::File::create(mnt.join("f")).unwrap();
    let unit = bfq_engine::direct_io_block(&f).unwrap();
    drop(f);
    drop(unmount);
    dev.remove().unwrap();
    assert_eq!(unit, 4096);
}

/// The thread-per-core client (`EngineClient::ThreadPerCore`): flows of
/// random 4 KiB direct reads through bfq, their requests tasks on one
/// runtime per CPU. Every flow reads, the reports add up to what the
/// engine completed, and the runtimes reap their own completions: with
/// a ring not bound to its runtime (or bound and not watched), a runtime
/// whose tasks all wait parks in its poller and leaves its completions
/// to the engine's service thread, which then reports most of them (on
/// a 2-CPU machine: 23 018 of 23 376 unbound, 1 212 of 1 235 bound and
/// not watched, 5 of 30 460 as the client runs).
#[test]
fn the_thread_per_core_client_serves_every_flow_from_its_runtimes() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut cfg) = on_file(&dir, "bfq", Duration::from_secs(1));
    cfg.client = bfq_real::EngineClient::ThreadPerCore;
    let flows: Vec<FlowDesc> = [(100, 3), (200, 2), (300, 1)]
        .iter()
        .enumerate()
        .map(|(i, &(w, depth))| {
            let mut f = FlowDesc::reader(&format!("r{i}"), Pattern::Rand, 4096);
            (f.weight, f.depth) = (Some(w), depth);
            f
        })
        .collect();
    let r = bfq_real::run(&cfg, &flows).unwrap();
    for f in &r.flows {
        assert!(f.ios > 0 && f.errors == 0, "{}: {} reads", f.name, f.ios);
        assert_eq!(
            (f.bytes, f.lat.count()),
            (f.ios * 4096, f.ios),
            "{}",
            f.name
        );
    }
    let e = r.engine.unwrap();
    let ios: u64 = r.flows.iter().map(|f| f.ios).sum();
    assert_eq!((e.completed, e.errors), (ios, 0));
    assert!(
        e.service_completions * 4 < e.completed && e.bound_takeovers * 4 < e.completed,
        "the service thread reported {} of {} completions ({} take-overs)",
        e.service_completions,
        e.completed,
        e.bound_takeovers
    );
    // Paced flows, dispatcher mode and kernel:* are refused before the run.
    let mut paced = flows.clone();
    paced[1].think = Duration::from_micros(10);
    let e = bfq_real::run(&cfg, &paced).unwrap_err();
    assert!(e.to_string().contains("flow r1 has think"), "{e}");
    cfg.submit_mode = bfq_engine::SubmitMode::Dispatcher;
    assert!(bfq_real::run(&cfg, &flows).is_err());
}
