//! The API example of docs/engine.md (kept identical to it).

use bfq_engine::{block_on, AlignedBuf, Engine, FlowOptions, IoClass, ShutdownMode};

fn main() -> std::io::Result<()> {
    let engine = Engine::builder("/data/disk.img") // file or block device
        .scheduler("bfq") // registry name; default "fifo"
        .set("slice_idle", "2ms") // scheduler settings, key=value
        .queue_depth(32) // requests on the device at once
        .writable(true) // default read-only
        .open()?; // O_DIRECT unless .direct(false)

    let group = engine.add_group(bfq_engine::GroupId::ROOT, 200)?;
    let tenant = engine.flow(FlowOptions::weight(300).prio(IoClass::Be, 2).group(group))?;

    // Blocking: the buffer always comes back, with the byte count or the OS error.
    let (res, buf) = tenant.write(0, AlignedBuf::from_slice(&[1u8; 4096]));
    let _n: usize = res?;
    // Async: a Future (Waker-based, any runtime; `block_on` here), or
    // `.wait()` to block on it.
    let (res, _buf) = block_on(tenant.read_async(0, buf));
    res?;

    drop(tenant); // closes the flow; in-flight requests finish
    let _stats = engine.shutdown(ShutdownMode::Drain)?; // or DrainFor(d), Cancel; Drop = Cancel
    Ok(())
}
