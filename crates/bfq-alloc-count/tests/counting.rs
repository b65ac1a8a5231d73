//! [`Counting`] counts the process's allocations and the bytes it holds.

use bfq_alloc_count::Counting;

#[global_allocator]
static A: Counting = Counting;

#[test]
fn counts_allocations_and_bytes_held() {
    let (n0, live0) = (Counting::allocations(), Counting::live_bytes());
    let mut v: Vec<u8> = Vec::with_capacity(1000);
    v.push(1);
    assert!(Counting::allocations() > n0);
    assert!(Counting::live_bytes() >= live0 + 1000);
    v.reserve_exact(3000);
    assert!(Counting::allocations() >= n0 + 2);
    assert!(Counting::live_bytes() >= live0 + 3001);
    let held = Counting::live_bytes();
    drop(v);
    assert!(Counting::live_bytes() <= held - 3001, "a free not counted");
}
