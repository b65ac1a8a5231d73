//! Parameters of the flash device model (the model itself: bfq-sim's
//! `device::flash`).

use bfq_core::{Time, SECTOR_BYTES};
use serde::Serialize;

/// Parameters of a flash device; each may be overridden in `[device]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlashParams {
    /// Capacity in bytes.
    pub capacity: u64,
    /// Channels.
    pub channels: u32,
    /// Dies per channel.
    pub dies: u32,
    /// Flash page size in bytes.
    pub page_size: u64,
    /// Page read latency (array to register, plus channel transfer), ns.
    pub read_latency: Time,
    /// Page program latency, ns.
    pub program_latency: Time,
    /// Controller time per command, ns (serialised).
    pub cmd_overhead: Time,
    /// Host interface rate, MB/s (10^6).
    pub bus_rate: f64,
    /// Commands the device queues internally (host queue depth).
    pub queue_depth: u32,
    /// Bytes of written data the device buffers before programming them
    /// (a write completes once buffered; when the buffer is full, once
    /// enough of it has been programmed). At least one page per unit.
    pub write_buffer: u64,
    /// The flash translation layer appends written data to open pages in
    /// arrival order and programs each full page on the next unit in turn,
    /// whatever the data's addresses (a page-mapping FTL's log), so four
    /// random 4 KiB writes cost one 16 KiB program. `false`: each write
    /// programs the pages its addresses map to, a page per 4 KiB write.
    pub coalesce_writes: bool,
    /// The device says it is rotational (as a virtio disk does by default,
    /// and a loop device over it), whatever its medium. Only what the
    /// scheduler is told changes.
    pub reports_rotational: bool,
}

impl FlashParams {
    /// Checks ranges; returns the first problem as `(field, why)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let chk = |f: &'static str, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err((f, "must be positive".to_string()))
            }
        };
        chk("capacity", self.capacity >= 1 << 20)?;
        chk("channels", self.channels > 0)?;
        chk("dies", self.dies > 0)?;
        chk("page_size", self.page_size >= SECTOR_BYTES)?;
        chk("bus_rate", self.bus_rate > 0.0)?;
        chk("queue_depth", self.queue_depth > 0)?;
        let stripe = self
            .page_size
            .saturating_mul(u64::from(self.channels) * u64::from(self.dies));
        if self.write_buffer < stripe {
            return Err((
                "write_buffer",
                format!("must hold at least one page per unit ({stripe} bytes)"),
            ));
        }
        Ok(())
    }
}
