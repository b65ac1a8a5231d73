# usage: m.py SCEN SCHED SEED [k=v ...] -> n runs, mean, max start-up (s), aggregate MiB/s
import json,subprocess,sys
B="/work/wt-h51g/target/release/bfq"
sc,sched,seed=sys.argv[1:4]
cmd=[B,"sim",sc,"--scheduler",sched,"--seed",seed,"-q","--json","-"]
for s in sys.argv[4:]: cmd+=["--set",s]
d=json.loads(subprocess.run(cmd,capture_output=True,text=True,check=True).stdout)
app=[f for f in d['flows'] if f['name'] in ('bash','xterm','konsole')][0]
rt=app['run_times_s']
print(sc,sched,seed," ".join(sys.argv[4:]),f"n{len(rt)} mean {sum(rt)/max(1,len(rt)):.3f} max {max(rt) if rt else float('nan'):.3f} agg {d['aggregate_mib_s']:.0f}",flush=True)
