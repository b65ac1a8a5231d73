# lat.py SCEN SCHED SEED [k=v..]: each flow's max/p99 request latency (ms), app start-up max, aggregate
import json,subprocess,sys
B="/work/wt-h51g/target/release/bfq"
sc,sched,seed=sys.argv[1:4]
cmd=[B,"sim",sc,"--scheduler",sched,"--seed",seed,"-q","--json","-"]
for s in sys.argv[4:]: cmd+=["--set",s]
d=json.loads(subprocess.run(cmd,capture_output=True,text=True,check=True).stdout)
out=[]
for f in d['flows']:
    if f['name'] in ('bash','xterm','konsole'): out.append(f"{f['name']} smax {max(f['run_times_s'] or [99]):.3f}")
    elif f['name'] in ('r0','seq','t','t10','r5'): out.append(f"{f['name']} p99 {f['latency_ms']['p99']:.1f} max {f['latency_ms']['max']:.1f}")
print(sc,sched,seed," ".join(sys.argv[4:]),"|"," ; ".join(out),f"| {d['aggregate_mib_s']:.0f} MiB/s",flush=True)
