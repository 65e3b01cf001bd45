#!/usr/bin/env python3
"""Writes the workload files of the contest task packs (tasks/contest/<definition>/).

Deterministic: every value comes from a fixed seed, so re-running this script reproduces the files byte for byte.
Axis values and counts follow shared/specs/contest-kernels.md §3. Inputs the contest captured from real runs stay
`{"type": "random"}` here: the pack's structured-input generator (task.toml [inputs] generator, src/contest/)
synthesises them from a seed derived from the workload uuid. Each kernel family has its own function below;
`main()` calls them all.

Usage: scripts/gen_contest_workloads.py [--root REPO_ROOT]
"""
import argparse
import json
import math
import pathlib
import random
import uuid

UUID_NAMESPACE = uuid.UUID("6f0c1f7e-2d4b-5a39-9c1e-4b64a1d0c5e2")


def workload_uuid(definition, split, index):
    """uuid5 of the definition name, split and index: stable across runs and machines."""
    return str(uuid.uuid5(UUID_NAMESPACE, f"{definition}/{split}/{index}"))


def trace_line(definition, split, index, axes, inputs):
    return {
        "definition": definition,
        "workload": {"uuid": workload_uuid(definition, split, index), "axes": axes, "inputs": inputs},
        "solution": None,
        "evaluation": None,
    }


def write_jsonl(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, separators=(", ", ": ")) + "\n")


def dev_subset(lines, key, count=8):
    """`count` uuids spanning the range of key(line): evenly spaced ranks of the sorted list."""
    ordered = sorted(lines, key=key)
    n = len(ordered)
    picks = sorted({round(i * (n - 1) / (count - 1)) for i in range(count)})
    return [ordered[i]["workload"]["uuid"] for i in picks]


# ---------------------------------------------------------------------------------------------------------------
# GDN decode / prefill and MoE (part B)

GDN_DECODE = "gdn_decode_qk4_v8_d128_k_last"
GDN_PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
MOE = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
GDN_SCALE = 0.08838834764831843  # 1/sqrt(128)


def gdn_decode_inputs():
    inputs = {name: {"type": "random"} for name in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b")}
    inputs["scale"] = {"type": "scalar", "value": GDN_SCALE}
    return inputs


def gdn_prefill_inputs():
    inputs = {name: {"type": "random"}
              for name in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens")}
    inputs["scale"] = {"type": "scalar", "value": GDN_SCALE}
    return inputs


def gen_gdn_decode(root):
    """54 workloads: batch_size 1x10, 4x8, 8x7, 16x7, 32x7, 48x7, 64x8 (spec §3.3)."""
    counts = [(1, 10), (4, 8), (8, 7), (16, 7), (32, 7), (48, 7), (64, 8)]
    batches = [b for b, c in counts for _ in range(c)]
    random.Random(20260301).shuffle(batches)
    lines = [trace_line(GDN_DECODE, "main", i, {"batch_size": b}, gdn_decode_inputs())
             for i, b in enumerate(batches)]
    holdout_batches = [2, 3, 12, 40, 80, 128]
    holdout = [trace_line(GDN_DECODE, "holdout", i, {"batch_size": b}, gdn_decode_inputs())
               for i, b in enumerate(holdout_batches)]
    pack = root / "tasks/contest" / GDN_DECODE
    write_jsonl(pack / "workloads.jsonl", lines)
    write_jsonl(pack / "holdout.jsonl", holdout)
    return {GDN_DECODE: dev_subset(lines, lambda l: (l["workload"]["axes"]["batch_size"], l["workload"]["uuid"]))}


def gen_gdn_prefill(root):
    """100 workloads: num_seqs 1x33, 2x28, 3x16, 4x4, 19 others in 5..57 (each at most twice); total_seq_len
    6..8192 with 16 at 8192 (spec §3.4). The generator splits T into N sequences (one long, the rest short)."""
    rng = random.Random(20260302)
    others = [5, 5, 6, 7, 8, 9, 10, 12, 14, 16, 19, 23, 27, 31, 36, 41, 47, 52, 57]
    seqs = [1] * 33 + [2] * 28 + [3] * 16 + [4] * 4 + others
    assert len(seqs) == 100
    # 16 workloads at T = 8192, mostly few sequences (long-context prefill).
    full = set()
    for n, count in ((1, 6), (2, 5), (3, 3), (4, 1), (16, 1)):
        idx = [i for i, s in enumerate(seqs) if s == n and i not in full]
        full.update(idx[:count])
    assert len(full) == 16
    pairs = []
    first_single = seqs.index(1)
    for i, n in enumerate(seqs):
        if i in full:
            t = 8192
        elif i == first_single:
            t = 6  # the contest's smallest total_seq_len
        else:
            lo = max(6, 8 * n)
            t = int(round(math.exp(rng.uniform(math.log(lo), math.log(8191)))))
            t = min(max(t, lo), 8191)
        pairs.append((t, n))
    rng.shuffle(pairs)
    lines = [trace_line(GDN_PREFILL, "main", i, {"total_seq_len": t, "num_seqs": n, "len_cu_seqlens": n + 1},
                        gdn_prefill_inputs())
             for i, (t, n) in enumerate(pairs)]
    # Edge cases (correctness only): T = N = 1; T < N gives N - T empty sequences (new_state must be 0);
    # all sequences of length 1; a mid-size multi-sequence batch; a long single sequence with many short ones.
    holdout_pairs = [(1, 1), (1, 2), (3, 5), (57, 57), (37, 8), (4096, 4), (8192, 24)]
    holdout = [trace_line(GDN_PREFILL, "holdout", i, {"total_seq_len": t, "num_seqs": n, "len_cu_seqlens": n + 1},
                          gdn_prefill_inputs())
               for i, (t, n) in enumerate(holdout_pairs)]
    pack = root / "tasks/contest" / GDN_PREFILL
    write_jsonl(pack / "workloads.jsonl", lines)
    write_jsonl(pack / "holdout.jsonl", holdout)
    key = lambda l: (l["workload"]["axes"]["total_seq_len"], l["workload"]["axes"]["num_seqs"], l["workload"]["uuid"])
    return {GDN_PREFILL: dev_subset(lines, key)}


def moe_inputs(offset):
    inputs = {name: {"type": "random"} for name in (
        "routing_logits", "routing_bias", "hidden_states", "hidden_states_scale", "gemm1_weights",
        "gemm1_weights_scale", "gemm2_weights", "gemm2_weights_scale")}
    inputs["local_expert_offset"] = {"type": "scalar", "value": offset}
    inputs["routed_scaling_factor"] = {"type": "scalar", "value": 2.5}
    return inputs


def gen_moe(root):
    """19 workloads: seq_len 1, 7, 14, 15, 16, 32, 52..59, 62, 80, 901, 11948, 14107 (spec §3.5). The offset
    of T=1 is 32 (known); the others cycle through all eight offsets in a fixed shuffled order."""
    seq_lens = [1, 7, 14, 15, 16, 32] + list(range(52, 60)) + [62, 80, 901, 11948, 14107]
    assert len(seq_lens) == 19
    offsets = [32 * i for i in range(8)]
    random.Random(20260303).shuffle(offsets)
    lines = []
    for i, t in enumerate(seq_lens):
        offset = 32 if t == 1 else offsets[(i - 1) % 8]
        lines.append(trace_line(MOE, "main", i, {"seq_len": t}, moe_inputs(offset)))
    # Edge cases: the lowest and highest offsets at T = 1 and 2, small odd sizes, mid sizes.
    holdout_cases = [(1, 0), (1, 224), (2, 96), (3, 160), (128, 64), (513, 192), (2048, 0)]
    holdout = [trace_line(MOE, "holdout", i, {"seq_len": t}, moe_inputs(o)) for i, (t, o) in enumerate(holdout_cases)]
    pack = root / "tasks/contest" / MOE
    write_jsonl(pack / "workloads.jsonl", lines)
    write_jsonl(pack / "holdout.jsonl", holdout)
    return {MOE: dev_subset(lines, lambda l: (l["workload"]["axes"]["seq_len"], l["workload"]["uuid"]))}


def gen_part_b(root):
    dev = {}
    dev.update(gen_gdn_decode(root))
    dev.update(gen_gdn_prefill(root))
    dev.update(gen_moe(root))
    return dev


# ---------------------------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    parser.add_argument("--print-dev", action="store_true", help="print each pack's dev_workloads uuids")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    dev = {}
    dev.update(gen_part_b(root))
    if args.print_dev:
        for name, uuids in dev.items():
            print(name)
            print("dev_workloads = [" + ", ".join(f'"{u}"' for u in uuids) + "]")


if __name__ == "__main__":
    main()
