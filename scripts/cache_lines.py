#!/usr/bin/env python3
"""Cache lines a scheduler's request cycle writes, counted under valgrind.

Usage: scripts/cache_lines.py BIN bfq|fifo [REQUESTS] [--cpus alt|random] [--lines]

BIN is a release build of `bfq` with its symbols (target/release/bfq: the
workspace's release profile keeps debug info), position independent
(valgrind on amd64 loads it at LOAD_BASE). The bench loop's own stores are
told apart by their code lying in `Blocking::cycles`, into which the
release build inlines the loop's helpers; the stack by its addresses
(STACK). A build where either does not hold counts no cycle or counts the
loop's stores: the script stops with a message when no cycle was counted.

Runs `BIN bench-core --blocking --random --flows 64 --reuse-ids
--requests REQUESTS --scheduler S` under `valgrind --tool=lackey
--trace-mem=yes` (valgrind on amd64; BIN a release build with symbols) and
cuts the trace into request cycles at each entry into the scheduler's
`complete` (a cycle: the completion, the dispatch after it, the flow's next
request and the dispatches after that). The warm-up's cycles and the last
one are left out, and so are the stack and the stores of the bench loop
itself (its device queue). Per cycle, averaged:

- written: distinct 64-byte lines stored to;
- touched: distinct lines loaded or stored;
- moved: with the cycles on two CPUs (`alt`: in turn, as `bench-core
  --threads 2 --batch 1`; `random`: drawn with a fixed seed, as the
  engine's 64 threads on two CPUs), distinct lines the cycle touches whose
  latest store was made on the other CPU after this one last touched them:
  each a transfer between the CPUs' caches.

With `--lines`, it also lists each line a cycle touches in at least
half of the cycles, in address order: how often it is touched and
written, and the source lines (innermost inlined frame, by addr2line) of
the loads and stores that touch it, most frequent first: which fields a
turn reads from it.

docs/architecture.md, "Lines a request writes, counted", has the figures.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys

LOAD_BASE = 0x108000  # where valgrind (amd64) loads a position-independent binary
STACK = 0x1F00000000  # the main thread's stack under valgrind lies above
TYPES = {"bfq": "bfq_core::bfq::Bfq", "fifo": "bfq_core::fifo::Fifo"}


def symbol(binary, name):
    """(address under valgrind, size) of the function `name`."""
    out = subprocess.run(["nm", "-S", "-C", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[3] == name:
            return int(parts[0], 16) + LOAD_BASE, int(parts[1], 16)
    sys.exit(f"no symbol {name} in {binary}")


def parse():
    p = argparse.ArgumentParser(description="Cache lines a request cycle writes, under valgrind.")
    p.add_argument("binary", help="a release build of bfq with symbols")
    p.add_argument("sched", choices=sorted(TYPES), help="the scheduler")
    p.add_argument("requests", nargs="?", type=int, default=2000, help="requests (default 2000)")
    p.add_argument("--cpus", choices=["alt", "random"], default="alt",
                   help="cycles on two CPUs in turn (alt) or drawn at random")
    p.add_argument("--lines", action="store_true",
                   help="list the lines most cycles touch, with the code touching them")
    a = p.parse_args()
    if not os.path.isfile(a.binary):
        p.error(f"{a.binary}: no such file")
    if a.requests < 1000:
        p.error("requests: at least 1000 (a quarter is warm-up)")
    for tool in ("valgrind", "nm", "addr2line"):
        if shutil.which(tool) is None:
            p.error(f"{tool} not found (Debian: apt-get install valgrind binutils)")
    return a


def main():
    a = parse()
    binary, sched, requests, alternate = a.binary, a.sched, a.requests, a.cpus == "alt"
    marker, _ = symbol(binary, f"<{TYPES[sched]} as bfq_core::scheduler::Scheduler>::complete")
    loop_lo, loop_size = symbol(binary, "bfq::bench_core::Blocking::cycles")
    warm = max(requests // 4, 512)
    rng = random.Random(43)
    cmd = ["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-fd=9", binary,
           "bench-core", "--blocking", "--random", "--flows", "64", "--reuse-ids",
           "--requests", str(requests), "--scheduler", sched]
    proc = subprocess.Popen(["sh", "-c", '"$@" 9>&1 >/dev/null 2>&1', "sh"] + cmd,
                            stdout=subprocess.PIPE, text=True, bufsize=1 << 20)
    seg, cpu, ip = -1, 0, 0
    written, touched, moved = set(), set(), set()
    last_store = {}  # line -> (cycle, cpu) of its latest store
    last_touch = ({}, {})  # per CPU: line -> cycle it last touched the line
    totals = []
    per_line = {}  # line -> [cycles touched, cycles written, {ip: accesses}]
    for line in proc.stdout:
        if line[0] == "I":
            ip = int(line[3:line.index(",")], 16)
            if ip == marker:
                if seg >= warm:
                    totals.append((len(written), len(touched), len(moved)))
                    for ln in touched:
                        entry = per_line.setdefault(ln, [0, 0, {}])
                        entry[0] += 1
                        entry[1] += ln in written
                seg += 1
                cpu = seg & 1 if alternate else rng.getrandbits(1)
                written.clear(), touched.clear(), moved.clear()
            continue
        if seg < 0 or line[0] != " ":
            continue
        comma = line.index(",", 3)
        addr, size = int(line[3:comma], 16), int(line[comma + 1:])
        store = line[1] in "SM"
        if addr >= STACK or (store and loop_lo <= ip < loop_lo + loop_size):
            continue
        for ln in range(addr >> 6, ((addr + size - 1) >> 6) + 1):
            prev = last_store.get(ln)
            if prev and prev[1] != cpu and prev[0] > last_touch[cpu].get(ln, -1):
                moved.add(ln)
            touched.add(ln)
            last_touch[cpu][ln] = seg
            if a.lines and seg >= warm:
                ips = per_line.setdefault(ln, [0, 0, {}])[2]
                ips[ip] = ips.get(ip, 0) + 1
            if store:
                written.add(ln)
                last_store[ln] = (seg, cpu)
    if proc.wait() != 0:
        sys.exit(f"valgrind exited with {proc.returncode}: run the command by hand to see why")
    n = len(totals)
    if n == 0:
        sys.exit("no request cycle counted: is BIN a position-independent release build "
                 "with symbols, loaded at LOAD_BASE under this valgrind?")
    w, t, m = (sum(x[i] for x in totals) / n for i in range(3))
    print(f"{sched}: {n} cycles, per cycle: written {w:.2f} touched {t:.2f} "
          f"moved ({'alt' if alternate else 'random'}) {m:.2f}")
    if a.lines:
        report_lines(binary, per_line, n)


def sources(binary, ips):
    """ip -> "file:line" of the innermost inlined frame, by addr2line."""
    ips = sorted(ips)
    out = subprocess.run(["addr2line", "-a", "-i", "-e", binary] +
                         [hex(ip - LOAD_BASE) for ip in ips],
                         capture_output=True, text=True).stdout.splitlines()
    names, current = {}, None
    for row in out:
        if row.startswith("0x"):
            current = int(row, 16) + LOAD_BASE
        elif current is not None and current not in names:
            path, _, line = row.rpartition(":")
            names[current] = f"{'/'.join(path.split('/')[-2:])}:{line.split()[0]}"
    return names


def report_lines(binary, per_line, cycles):
    """Prints the lines at least half the cycles touch and the code touching them."""
    hot = sorted(ln for ln, e in per_line.items() if e[0] * 2 >= cycles)
    names = sources(binary, {ip for ln in hot for ip in per_line[ln][2]})
    prev = None
    for ln in hot:
        touched, written, ips = per_line[ln]
        by_source = {}
        for ip, count in ips.items():
            name = names.get(ip, hex(ip))
            by_source[name] = by_source.get(name, 0) + count
        top = sorted(by_source.items(), key=lambda kv: -kv[1])
        gap = "" if prev is None else f"+{(ln - prev) * 64}"
        print(f"{ln * 64:#x} {gap:>8} touched {touched / cycles:.2f} written "
              f"{written / cycles:.2f}: " + ", ".join(f"{s} x{c / cycles:.1f}" for s, c in top[:6]))
        prev = ln


if __name__ == "__main__":
    main()
