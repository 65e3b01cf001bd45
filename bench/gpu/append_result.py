"""Appends one compact JSON line for a `kda eval --json` run: command, exit code, wall time, report."""
import json
import sys
import time

out_dir, rc, start, command = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
try:
    with open(f"{out_dir}/last.json") as f:
        report = json.load(f)
except (OSError, ValueError):
    report = None
with open(f"{out_dir}/last_err.txt", errors="replace") as f:
    err = f.read()[-3000:]
print(json.dumps({"command": command, "rc": rc, "wall_s": round(time.time() - start, 2),
                  "report": report, "stderr_tail": err if rc not in (0, 1) else ""}))
