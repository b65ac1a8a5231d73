//! What several of the engine's test files share.

use bfq_engine::FileTarget;
use std::os::fd::FromRawFd;

/// A pipe: its read end as a request target (a read completes only once
/// the test writes the write end), and the write end.
pub fn pipe() -> (FileTarget, std::fs::File) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fresh descriptors we own.
    let (r, w) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    (FileTarget::new(r, 0), w)
}
