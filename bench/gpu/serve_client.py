# The HTTP client of bench/gpu/serve_h100.sh: one task of every workload, then three of one workload, timed end to end.
import json, sys, time, urllib.request
addr = json.load(open(sys.argv[1])); base = addr["url"]; sol = json.load(open(sys.argv[2]))
def call(path, body=None, t=600):
    req = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=t))
defn = sol["definition"]; ws = call(f"/definitions/{defn}/workloads"); out = {"health": call("/health"), "tasks": []}
def run(uuids, label):
    t0 = time.time(); tid = call("/evaluate", {"solution": sol, "workload_uuids": uuids})["task_id"]
    r = call(f"/tasks/{tid}?timeout=590"); wall = time.time() - t0
    st = {}
    for tr in r["traces"] or []: st[tr["evaluation"]["status"]] = st.get(tr["evaluation"]["status"], 0) + 1
    print(label, r["status"], st, f"{wall:.2f}s", flush=True)
    out["tasks"].append({"label": label, "wall_s": wall, "status": r["status"], "statuses": st, "traces": r["traces"], "error": r["error"]})
run([w["uuid"] for w in ws], "all")
for i in range(3): run([ws[0]["uuid"]], f"one_{i}")
json.dump(out, open(sys.argv[3], "w"))
