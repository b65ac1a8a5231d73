//! Thread placement helpers for the engine's own threads and for the
//! servers embedding it: the calling thread's id and its CPU affinity.
//! (The kernel peers of real runs, loop devices, cgroups, I/O priorities
//! and a device's scheduler, live in the `bfq-real` crate.)

use std::io;

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Pins the calling thread, and the threads it starts from now on, to
/// these CPUs (`sched_setaffinity`).
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus {
        if c >= max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {c} is out of range"),
            ));
        }
        // SAFETY: c is within the set.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: valid set of the size given; 0 = the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        let e = io::Error::last_os_error();
        let have = current_cpus().map(|c| format!(" (allowed here: {c:?})"));
        return Err(io::Error::new(
            e.kind(),
            format!(
                "cannot pin to CPUs {cpus:?}: {e}{}",
                have.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn current_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid set of the size given; 0 = the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: every index is within the set.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_is_inherited_and_bad_cpus_are_refused() {
        std::thread::spawn(|| {
            let all = current_cpus().unwrap();
            let first = all[0];
            pin_current_thread(&[first]).unwrap();
            assert_eq!(current_cpus().unwrap(), vec![first]);
            let child = std::thread::spawn(|| current_cpus().unwrap());
            assert_eq!(child.join().unwrap(), vec![first]);
            assert!(pin_current_thread(&[1 << 20]).is_err());
            // No CPU at all: the kernel refuses an empty set.
            assert!(pin_current_thread(&[]).is_err());
            assert_eq!(current_cpus().unwrap(), vec![first]);
        })
        .join()
        .unwrap();
    }
}
