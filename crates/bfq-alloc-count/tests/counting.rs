//! [`Counting`] counts the process's allocations and the bytes it holds.
//! (Process-wide: the test harness's own threads may allocate meanwhile,
//! so the byte checks leave 64 KiB of room for them.)

use bfq_alloc_count::Counting;

#[global_allocator]
static A: Counting = Counting;

const MIB: i64 = 1 << 20;
const ROOM: i64 = 64 << 10;

#[test]
fn counts_allocations_and_bytes_held() {
    let (n0, live0) = (Counting::allocations(), Counting::live_bytes());
    let mut v: Vec<u8> = Vec::with_capacity(MIB as usize);
    v.push(1);
    assert!(Counting::allocations() > n0);
    assert!(Counting::live_bytes() >= live0 + MIB - ROOM);
    v.reserve_exact(3 * MIB as usize);
    assert!(Counting::allocations() >= n0 + 2);
    assert!(Counting::live_bytes() >= live0 + 3 * MIB - ROOM);
    let held = Counting::live_bytes();
    drop(v);
    assert!(
        Counting::live_bytes() <= held - 3 * MIB + ROOM,
        "a free not counted"
    );
}
