import sys
# app alone in its own group beside N greedy seq readers each in own group (ssd)
def gen(app, n, grouped_readers=True, dur="20s", runs=6):
    s = f'name = "{app} start-up in a group beside {n} readers"\nduration = "{dur}"\nseed = 1\n[device]\npreset = "ssd-plextor-m5s"\n[scheduler]\nname = "bfq"\nlow_latency = true\n'
    s += '[[group]]\npath = "/app"\nweight = 100\n'
    for i in range(n):
        if grouped_readers:
            s += f'[[group]]\npath = "/r{i}"\nweight = 100\n'
    s += f'[[flow]]\nname = "{app}"\ngroup = "/app"\npattern = "replay"\nreplay = "/work/main/scenarios/traces/{app}.csv"\nregion = {{ start = "60G", size = "20G" }}\nstart = "5s"\nstart_jitter = "500ms"\nrepeat = "1s"\nruns = {runs}\n'
    for i in range(n):
        g = f'group = "/r{i}"\n' if grouped_readers else ''
        s += f'[[flow]]\nname = "r{i}"\n{g}pattern = "seq"\nregion = {{ start = "{5*i}G", size = "5G" }}\n'
    return s
for app in ["bash","xterm","konsole"]:
    for n in [1,2,5,10]:
        open(f"{app}-{n}.toml","w").write(gen(app,n))
def gen_t(app, n, think="10ms"):
    s = gen(app, n)
    s = s.replace('[[flow]]', f'[[group]]\npath = "/t"\nweight = 100\n[[flow]]\nname = "t"\ngroup = "/t"\npattern = "rand"\nblock = "4k"\nthink = "{think}"\nregion = {{ start = "100G", size = "10G" }}\n[[flow]]', 1)
    return s
for app in ["bash","xterm","konsole"]:
    for n in [1,2,5,10]:
        open(f"{app}-t-{n}.toml","w").write(gen_t(app,n))
