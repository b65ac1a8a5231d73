//! [`PerThread`] counts the calling thread's allocations and bytes only.

use bfq_alloc_count::PerThread;

#[global_allocator]
static A: PerThread = PerThread;

#[test]
fn counts_the_calling_threads_allocations_only() {
    let (n0, live0) = (PerThread::allocations(), PerThread::live_bytes());
    let other = std::thread::spawn(|| {
        let v = vec![0u8; 1 << 20];
        (v.len(), PerThread::allocations())
    });
    let (len, theirs) = other.join().unwrap();
    assert_eq!(len, 1 << 20);
    assert!(theirs >= 1);
    let held = Box::new([7u8; 512]);
    assert!(PerThread::allocations() > n0);
    assert!(PerThread::live_bytes() - live0 >= 512);
    assert!(
        PerThread::live_bytes() - live0 < 1 << 20,
        "another thread's bytes counted"
    );
    drop(held);
}
