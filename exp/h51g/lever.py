#!/usr/bin/env python3
"""lever.py BIN SCEN SEED FLOW.METRIC|total [k=v ...]: the metric under bfq, bfq-kernel, and bfq with each
departure of docs/bfq-settings.md reverted to the kernel's value, one at a time (run under flock);\nADD=1: bfq-kernel with each rule of bfq added, one at a time."""
import sys, json, subprocess, tempfile, os
DEP = [("peak_rate_turn_samples", 0), ("peak_rate_large_seq", 1), ("wr_budget_feedback", 0), ("inject_charge_service", 0),
       ("inject_read_floor", 0), ("inject_share_cap", 0), ("inject_ahead_bound", 0), ("inject_return_lag_bound", 0),
       ("raised_backshift_lag_bound", 0), ("peak_rate_lower_min_request", 0), ("inject_protect_seeky", 0),
       ("inject_protect_deep_seeky", 0), ("async_charge_factor", 3), ("async_charge_asymmetric", 0),
       ("new_flow_charge_service", 0), ("waker_kernel_detection", 1), ("inject_waker_beyond_limit", 1),
       ("inject_limit_counts_all", 1), ("inject_recent_first", 1), ("inject_fair_candidates", 0),
       ("inject_when_idling_boosts", 0), ("inject_kernel_sampling", 1), ("in_time_after_timeout", 0),
       ("timeout_keeps_place", 0), ("timeout_defers_to_idling", 1), ("backshift_push_up", 1), ("lag_anchor", 0),
       ("rotational_probe", 0), ("raised_group_time_charge", 0), ("inject_into_raised_b_max", 0)]
# bfq's values of the same settings (for the "add" direction: bfq-kernel plus one rule)
BFQV = {"peak_rate_turn_samples": 1, "peak_rate_large_seq": 0, "wr_budget_feedback": 1, "async_charge_factor": 10,
        "peak_rate_lower_min_request": 128, "waker_kernel_detection": 0, "inject_waker_beyond_limit": 0,
        "inject_limit_counts_all": 0, "inject_recent_first": 0, "inject_kernel_sampling": 0, "timeout_keeps_place": 1,
        "timeout_defers_to_idling": 0, "backshift_push_up": 0, "rotational_probe": "1ms"}
add = os.environ.get("ADD") == "1"
b, sc, seed, metric = sys.argv[1:5]
extra = sys.argv[5:]
ll = "1" if "low_latency = true" in open(sc).read() else "0"
def run(sched, sets):
    j = tempfile.mktemp(suffix=".json")
    cmd = [b, "sim", sc, "--scheduler", sched, "--seed", seed, "-q", "--json", j, "--set", "low_latency=" + ll]
    for s in sets: cmd += ["--set", s]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    d = json.load(open(j)); os.unlink(j)
    if metric == "total": return d["aggregate_mib_s"]
    f, m = metric.split(".")
    v = [x for x in d["flows"] if x["name"] == f][0]
    return {"p99": v["latency_ms"]["p99"], "max": v["latency_ms"]["max"], "bp99": v["batch_latency_ms"]["p99"],
            "bmax": v["batch_latency_ms"]["max"], "mib": v["throughput_mib_s"],
            "smax": 1000 * max(v["run_times_s"] or [10]), "smean": 1000 * sum(v["run_times_s"]) / max(1, len(v["run_times_s"]))}[m]
print(f"{os.path.basename(sc)} seed {seed} {metric} {' '.join(extra)}")
print(f"  bfq-kernel {run('bfq-kernel', extra):10.1f}")
print(f"  bfq        {run('bfq', extra):10.1f}")
allk = [f"{k}={v}" for k, v in DEP]
print(f"  bfq, all reverted {run('bfq', extra + allk):10.1f}")
for k, v in DEP:
    if add:  # ADD=1: bfq-kernel with this one rule of bfq
        bv = BFQV.get(k, 1)
        print(f"  kernel+{k}={bv:<4} {run('bfq-kernel', extra + [f'{k}={bv}']):10.1f}")
    else:
        print(f"  {k}={v:<4} {run('bfq', extra + [f'{k}={v}']):10.1f}")
