#!/usr/bin/env bash
# Issue 46: the CUDA adversarial suite and evaluator fixtures after the Session refactor (38ff410), each
# fixture's outcome checked against its expected.json (bench/gpu/check_expected.py).
nvidia-smi --query-gpu=name,driver_version --format=csv
git log -1 --format='%h %s' 2>/dev/null | cut -c1-80
BUDGET=440 bash bench/gpu/run_h200.sh hacks fixtures
