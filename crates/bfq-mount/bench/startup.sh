#!/usr/bin/env bash
# Start-up time of a real application through `bfq mount` while greedy
# readers run through the same mount (the 2014 report's start-up
# experiment, with a real program): a Python interpreter and its standard
# library are copied into the backing directory; for each scheduler the
# mount is made (keep_cache, so the interpreter can be mapped and run from
# it), N readers (`dd iflag=direct`, 1 MiB, each its own 256 MiB file, in a
# loop) start, and after 3 s the page cache is dropped before each of
# RUNS timed `python3 -c pass` from the mount. Prints each start-up time and
# the readers' aggregate MiB/s over the runs. Schedulers are interleaved.
# Needs root, /dev/fuse. Usage: startup.sh [DIR] [READERS] [RUNS] [SCHEDULERS]
set -euo pipefail
dir=${1:-/var/tmp/bfq-startup}
readers=${2:-10}
runs=${3:-5}
scheds=${4:-"bfq fifo bfq-2010"}
bfq=$(realpath "${BFQ:-target/release/bfq}")
py=$(readlink -f /usr/bin/python3)
ver=$(basename "$py")
mkdir -p "$dir/back/bin" "$dir/back/lib" "$dir/mnt"
[ -x "$dir/back/bin/$ver" ] || cp "$py" "$dir/back/bin/$ver"
[ -d "$dir/back/lib/$ver" ] || cp -a "/usr/lib/$ver" "$dir/back/lib/$ver"
for i in $(seq 1 "$readers"); do
    f="$dir/back/r$i"
    [ -f "$f" ] || { dd if=/dev/zero of="$f" bs=1M count=256 status=none; sync "$f"; }
done
pid=
kids=()
cleanup() {
    for k in "${kids[@]}"; do kill "$k" 2>/dev/null || true; done
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    "$bfq" mount --cleanup "$dir/mnt" >/dev/null 2>&1 || true
}
trap cleanup EXIT
for sched in $scheds; do
    "$bfq" mount "$dir/back" "$dir/mnt" --scheduler "$sched" --stats 1000 > "$dir/stats-$sched.txt" 2>&1 &
    pid=$!
    for _ in $(seq 100); do grep -q " $dir/mnt " /proc/self/mountinfo && break; sleep 0.1; done
    kids=()
    if [ "$readers" -gt 0 ]; then
        for i in $(seq 1 "$readers"); do
            (while :; do dd if="$dir/mnt/r$i" of=/dev/null bs=1M iflag=direct status=none; done) &
            kids+=($!)
        done
    fi
    sleep 3
    kill -USR1 "$pid" # starts the statistics interval
    for r in $(seq 1 "$runs"); do
        sync; echo 3 > /proc/sys/vm/drop_caches
        t0=$(date +%s.%N)
        "$dir/mnt/bin/$ver" -c pass
        t1=$(date +%s.%N)
        echo "$sched readers=$readers run $r: start-up $(echo "$t1 - $t0" | bc) s"
        sleep 1
    done
    kill -USR1 "$pid"; sleep 0.5 # the interval's aggregate: the readers' throughput
    for k in "${kids[@]}"; do kill -STOP "$k" 2>/dev/null || true; pkill -P "$k" 2>/dev/null || true; kill -KILL "$k" 2>/dev/null || true; done
    [ "${#kids[@]}" -eq 0 ] || wait "${kids[@]}" 2>/dev/null || true
    kids=()
    kill "$pid"; wait "$pid" || true; pid=
    echo "$sched readers=$readers: $(grep -E '^[0-9]+ flows' "$dir/stats-$sched.txt" | sed -n 2p)"
done
