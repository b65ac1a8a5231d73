#!/usr/bin/env bash
# Overhead of `bfq mount`: a sequential reader (128 KiB) and 4 KiB random
# reads (one job, psync) directly on the backing filesystem (O_DIRECT), and
# through the mount (--direct: no page cache in the mount; backing files
# O_DIRECT) with the scheduler `fifo` (a plain passthrough) and `bfq`.
# Configurations are interleaved, ROUNDS rounds; prints one line per run.
# Needs root, /dev/fuse and fio. Usage: overhead.sh [DIR] [SECONDS] [ROUNDS]
set -euo pipefail
dir=${1:-/var/tmp/bfq-mount-bench}
secs=${2:-5}
rounds=${3:-3}
bfq=${BFQ:-target/release/bfq}
mkdir -p "$dir/back" "$dir/mnt"
[ -f "$dir/back/data" ] || dd if=/dev/urandom of="$dir/back/data" bs=1M count=1024 status=none
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    "$bfq" mount --cleanup "$dir/mnt" >/dev/null 2>&1 || true
}
trap cleanup EXIT
run_fio() { # file rw bs direct
    fio --name=b --filename="$1" --rw="$2" --bs="$3" --direct="$4" --ioengine=psync \
        --runtime="$secs" --time_based --size=1g --output-format=json 2>/dev/null |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["jobs"][0]["read"]; print("%.1f MiB/s %.0f IOPS" % (r["bw"]/1024, r["iops"]))'
}
for round in $(seq 1 "$rounds"); do
    for cfg in direct fifo bfq; do
        if [ "$cfg" = direct ]; then
            file="$dir/back/data"; d=1
        else
            "$bfq" mount "$dir/back" "$dir/mnt" --scheduler "$cfg" --direct >/dev/null 2>&1 &
            pid=$!
            for _ in $(seq 100); do grep -q " $dir/mnt " /proc/self/mountinfo && break; sleep 0.1; done
            file="$dir/mnt/data"; d=0
        fi
        for w in "read 128k" "randread 4k"; do
            set -- $w
            echo "round $round $cfg $1 $2: $(run_fio "$file" "$1" "$2" "$d")"
        done
        if [ -n "$pid" ]; then kill "$pid"; wait "$pid" || true; pid=; fi
    done
done
