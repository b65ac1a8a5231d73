# tr.py TRACE APP: per start-up run: duration, bash's summed Q->D wait, think (C->next Q), and during waits which flows were dispatched (distinct turns)
import sys,collections
ev=[l.rstrip().split(',') for l in open(sys.argv[1]) if l[0].isdigit()]
app=sys.argv[2]
q={};runs=[];cur=None;last=-10**12
for t,e,f,r,s,n,op in ev:
    t=int(t)
    if f==app:
        if e=='Q' and t-last>5e8:
            cur=dict(start=t,wait=0,nreq=0,others=collections.Counter(),switches=0,pending=0,waitsegs=[]); runs.append(cur)
        last=t
        if e=='Q': q[r]=t; cur['pending']+=1; cur['nreq']+=1
        if e=='D':
            w=t-q[r]; cur['wait']+=0; cur['waitsegs'].append(w)
            cur['pending']-=1
        if e=='C': cur['end']=t
    elif cur is not None and cur['pending']>0 and e=='D':
        cur['others'][f]+=int(n)
for i,c in enumerate(runs):
    ws=sorted(c['waitsegs'],reverse=True)
    print(f"run {i}: {(c['end']-c['start'])/1e6:.1f} ms, {c['nreq']} reqs, waits>10ms: {[round(w/1e6,1) for w in ws if w>1e7]}, sum {sum(ws)/1e6:.1f} ms; others' sectors dispatched while bash waited: {sum(c['others'].values())} from {len(c['others'])} flows")
