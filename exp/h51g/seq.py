# seq.py TRACE APP RUN: dispatch sequence (flow, sectors, start ms) during start-up run RUN, and bash's queue/complete instants
import sys
ev=[l.rstrip().split(',') for l in open(sys.argv[1]) if l[0].isdigit()]
app,k=sys.argv[2],int(sys.argv[3])
starts=[];last=-10**12
for t,e,f,r,s,n,op in ev:
    if f==app and e=='Q':
        if int(t)-last>5e8: starts.append(int(t))
        last=int(t)
t0=starts[k]; t1=starts[k+1] if k+1<len(starts) else 1e30
segs=[]
for t,e,f,r,s,n,op in ev:
    t=int(t)
    if t<t0-2e8 or t>t1-1e8: continue
    if e=='D':
        if segs and segs[-1][0]==f: segs[-1][1]+=int(n); segs[-1][3]=t
        else: segs.append([f,int(n),t,t])
    if f==app and e in 'QC': segs.append([e+app,0,t,t])
out=[];
for f,n,a,b in segs:
    out.append(f"{f}:{n}@{(a-t0)/1e6:.1f}" if n else f"{f}@{(a-t0)/1e6:.1f}")
print(" ".join(out))
