//! The engine's clock and idle timer: CLOCK_MONOTONIC in ns and the
//! timerfd the core arms when the scheduler idles (a leaf module, used by
//! the core, the driver and the builder).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// CLOCK_MONOTONIC now, in ns (the clock `Instant` reads). Read a few
/// times per request: inlined into its callers in other modules.
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Arms `timerfd` to fire at `at` ns of CLOCK_MONOTONIC.
pub(crate) fn arm_timerfd(timerfd: RawFd, at: u64) {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at / 1_000_000_000) as libc::time_t,
            tv_nsec: (at % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: valid timerfd and itimerspec.
    unsafe {
        libc::timerfd_settime(
            timerfd,
            libc::TFD_TIMER_ABSTIME,
            &spec,
            std::ptr::null_mut(),
        )
    };
}

/// A non-blocking, close-on-exec timerfd on `CLOCK_MONOTONIC`: the
/// idle timer that wakes the engine's service thread (`Core::set_timer`).
pub(crate) fn monotonic_timerfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall, result checked.
    let tfd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
        )
    };
    if tfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(tfd) })
}
