#!/usr/bin/env python3
"""Writes the workload files of the contest task packs (tasks/contest/<definition>/).

Deterministic: re-running this script reproduces the files byte for byte.
workloads.jsonl is the contest's own: one line per row of tasks/contest_axes/<definition>.tsv (the project's copy of
the contest's published axes; its README names the sources), in the TSV's order, with the contest's uuid and its
axis and scalar-input values; scalars the TSV does not list are the definition's constants (GDN scale, DSA
sm_scale). holdout.jsonl is kda's own edge cases (uuid5 of the definition, "holdout" and the index; shapes from a
fixed seed). Inputs the contest captured from real runs stay `{"type": "random"}` here: the pack's structured-input
generator (task.toml [inputs] generator, src/contest/) synthesises them from each evaluation trial's secret seed
(fresh per trial; what a workload pins is a blob). Each kernel family has its own function below; `main()` calls
them all. scripts/check-contest-workloads.py (ctest contest_workloads) checks the result against the TSVs.

Usage: scripts/gen_contest_workloads.py [--root REPO_ROOT]
"""
import argparse
import csv
import json
import math
import pathlib
import random
import struct
import uuid

UUID_NAMESPACE = uuid.UUID("6f0c1f7e-2d4b-5a39-9c1e-4b64a1d0c5e2")


def workload_uuid(definition, split, index):
    """uuid5 of the definition name, split and index: stable across runs and machines (holdout workloads)."""
    return str(uuid.uuid5(UUID_NAMESPACE, f"{definition}/{split}/{index}"))


def line_with_uuid(definition, workload_id, axes, inputs):
    return {
        "definition": definition,
        "workload": {"uuid": workload_id, "axes": axes, "inputs": inputs},
        "solution": None,
        "evaluation": None,
    }


def trace_line(definition, split, index, axes, inputs):
    return line_with_uuid(definition, workload_uuid(definition, split, index), axes, inputs)


def tsv_value(text):
    """An integer when the TSV's text is one, else a float (the TSVs hold only numbers besides the uuid)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def read_contest_axes(root, definition):
    """The rows of tasks/contest_axes/<definition>.tsv in file order: (uuid, {column: number})."""
    with open(root / "tasks/contest_axes" / f"{definition}.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [(r["uuid"], {k: tsv_value(v) for k, v in r.items() if k != "uuid"}) for r in rows]


def pick_dev(lines, targets, key):
    """The first line (file order) whose key(line) is each target, listed in the targets' order."""
    out = []
    for target in targets:
        match = next(l for l in lines if key(l) == target)
        out.append(match["workload"]["uuid"])
    return out


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
    """The contest's 54 workloads (batch_size 1x10, 4x8, 8x7, 16x7, 32x7, 48x7, 64x8)."""
    lines = [line_with_uuid(GDN_DECODE, u, {"batch_size": row["batch_size"]}, gdn_decode_inputs())
             for u, row in read_contest_axes(root, GDN_DECODE)]
    holdout_batches = [2, 3, 12, 40, 80, 128]
    holdout = [trace_line(GDN_DECODE, "holdout", i, {"batch_size": b}, gdn_decode_inputs())
               for i, b in enumerate(holdout_batches)]
    pack = root / "tasks/contest" / GDN_DECODE
    write_jsonl(pack / "workloads.jsonl", lines)
    write_jsonl(pack / "holdout.jsonl", holdout)
    return {GDN_DECODE: dev_subset(lines, lambda l: (l["workload"]["axes"]["batch_size"], l["workload"]["uuid"]))}


def gen_gdn_prefill(root):
    """The contest's 100 workloads: total_seq_len 6..8192, num_seqs 1..57, 16 at T = 8192 with 20..57 sequences.
    The per-sequence lengths are not public: the generator draws them (one long sequence in batches of <= 4,
    log-normal lengths in larger ones; README)."""
    lines = [line_with_uuid(GDN_PREFILL, u,
                            {"total_seq_len": row["total_seq_len"], "num_seqs": row["num_seqs"],
                             "len_cu_seqlens": row["num_seqs"] + 1},
                            gdn_prefill_inputs())
             for u, row in read_contest_axes(root, GDN_PREFILL)]
    # Edge cases (correctness only): T = N = 1; T < N gives N - T empty sequences (new_state must be 0);
    # all sequences of length 1; a mid-size multi-sequence batch; a long single sequence with many short ones.
    holdout_pairs = [(1, 1), (1, 2), (3, 5), (57, 57), (37, 8), (4096, 4), (8192, 24)]
    holdout = [trace_line(GDN_PREFILL, "holdout", i, {"total_seq_len": t, "num_seqs": n, "len_cu_seqlens": n + 1},
                          gdn_prefill_inputs())
               for i, (t, n) in enumerate(holdout_pairs)]
    pack = root / "tasks/contest" / GDN_PREFILL
    write_jsonl(pack / "workloads.jsonl", lines)
    write_jsonl(pack / "holdout.jsonl", holdout)
    # Dev: short single sequences, few-sequence batches up to the longest one-long-sequence case (5709, 2), and
    # three of the 16 T = 8192 batches (the fewest, a middle and the most sequences): README "Dev subset".
    dev_targets = [(6, 1), (49, 1), (341, 2), (1800, 3), (5709, 2), (8192, 20), (8192, 38), (8192, 57)]
    key = lambda l: (l["workload"]["axes"]["total_seq_len"], l["workload"]["axes"]["num_seqs"])
    return {GDN_PREFILL: pick_dev(lines, dev_targets, key)}


def moe_inputs(offset, scaling=2.5):
    inputs = {name: {"type": "random"} for name in (
        "routing_logits", "routing_bias", "hidden_states", "hidden_states_scale", "gemm1_weights",
        "gemm1_weights_scale", "gemm2_weights", "gemm2_weights_scale")}
    inputs["local_expert_offset"] = {"type": "scalar", "value": offset}
    inputs["routed_scaling_factor"] = {"type": "scalar", "value": scaling}
    return inputs


def gen_moe(root):
    """The contest's 19 workloads: seq_len 1, 7, 14, 15, 16, 32, 52..59, 62, 80, 901, 11948, 14107, each with the
    contest's local_expert_offset and routed_scaling_factor."""
    lines = [line_with_uuid(MOE, u, {"seq_len": row["seq_len"]},
                            moe_inputs(row["local_expert_offset"], row["routed_scaling_factor"]))
             for u, row in read_contest_axes(root, MOE)]
    # Edge cases: the lowest and highest offsets at T = 1 and 2, small odd sizes, mid sizes, and a token with no
    # local expert (index 7: its routing keeps groups 1, 3, 5, 6, so offset 64 gets nothing; the output must be
    # written as zeros; see routing_stats.json). That case pins its routing (routing_logits, routing_bias) in a blob
    # that src/contest/moe_test.cc writes (KDA_UPDATE_GOLDEN=1); this script only names it.
    holdout_cases = [(1, 0), (1, 224), (2, 96), (3, 160), (128, 64), (513, 192), (2048, 0), (1, 64)]
    holdout = [trace_line(MOE, "holdout", i, {"seq_len": t}, moe_inputs(o)) for i, (t, o) in enumerate(holdout_cases)]
    pinned = holdout[7]["workload"]
    rel = f"blob/{MOE}_{pinned['uuid']}.safetensors"
    for key in ("routing_logits", "routing_bias"):
        pinned["inputs"][key] = blob_input(rel, key)
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
# DSA top-k indexer and DSA sparse attention (part A)

DSA_INDEXER = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
DSA_ATTENTION = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
INDEXER_NUM_PAGES = 11923
ATTENTION_NUM_PAGES = 8462
ATTENTION_SM_SCALE = 0.1352337788608801  # (1/sqrt(192))·(1+0.1·ln 40)², spec §3.2
PAGE = 64
TOPK = 2048


def write_safetensors_i32(path, tensors):
    """Minimal safetensors writer for int32 tensors: {key: (shape, flat values)} (stdlib only, sorted keys)."""
    header, payload, offset = {}, bytearray(), 0
    for key in sorted(tensors):
        shape, values = tensors[key]
        assert math.prod(shape) == len(values), key
        data = struct.pack(f"<{len(values)}i", *values)
        header[key] = {"dtype": "I32", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        payload += data
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # pad the header to 8 bytes, as the reference writer does
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(payload))


def blob_input(blob_rel, key):
    return {"type": "safetensors", "path": blob_rel, "tensor_key": key}


def indexer_inputs():
    # seq_lens and block_table were captured in the contest; k_index_cache_fp8 needs the packed layout (§2.3).
    # All three come from the pack's generator ("dsa_topk_indexer"); q and weights stay plain random.
    return {name: {"type": "random"}
            for name in ("q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens", "block_table")}


def gen_dsa_indexer(root):
    """The contest's 128 workloads: batch_size 1..31, max_num_pages 1..91 (69 at <= 32), num_pages = 11923.
    seq_lens and block_table are the generator's (one row needs every table slot; README)."""
    lines = [line_with_uuid(DSA_INDEXER, u,
                            {"batch_size": row["batch_size"], "max_num_pages": row["max_num_pages"],
                             "num_pages": row["num_pages"]},
                            indexer_inputs())
             for u, row in read_contest_axes(root, DSA_INDEXER)]

    # Holdout: correctness edge cases (spec §3.1: L = 0, 1, 2048, 2049), the largest shape with every row full,
    # prefix-shared pages, a single page, and the L <= 2048 boundary. Rows given explicitly are safetensors blobs.
    pack = root / "tasks/contest" / DSA_INDEXER
    holdout = []

    def add_holdout(batch, max_pages, rows=None, uuid_key=None):
        index = len(holdout)
        axes = {"batch_size": batch, "max_num_pages": max_pages, "num_pages": INDEXER_NUM_PAGES}
        inputs = indexer_inputs()
        workload_id = workload_uuid(DSA_INDEXER, "holdout", uuid_key or index)
        if rows is not None:
            lens, table = rows
            assert len(lens) == batch and all(len(r) == max_pages for r in table)
            rel = f"blob/{DSA_INDEXER}_{workload_id}.safetensors"
            write_safetensors_i32(pack / rel, {"seq_lens": ([batch], lens),
                                               "block_table": ([batch, max_pages], [v for r in table for v in r])})
            inputs["seq_lens"] = blob_input(rel, "seq_lens")
            inputs["block_table"] = blob_input(rel, "block_table")
        holdout.append(line_with_uuid(DSA_INDEXER, workload_id, axes, inputs))

    hrng = random.Random(20260312)

    def table_rows(lens, max_pages, shared_prefix=0):
        ids = hrng.sample(range(INDEXER_NUM_PAGES), len(lens) * max_pages)
        rows = []
        for r, length in enumerate(lens):
            used = -(-length // PAGE)
            row = ids[r * max_pages:r * max_pages + used]
            if r > 0 and shared_prefix:
                row[:shared_prefix] = rows[0][:shared_prefix]  # prefix sharing: same pages, same order
            rows.append(row + [0] * (max_pages - used))  # trailing slots: page 0 (valid, to be ignored)
        return rows

    edge = [0, 1, 2048, 2049]
    add_holdout(4, 33, (edge, table_rows(edge, 33)))
    full = [91 * PAGE] * 31
    add_holdout(31, 91, (full, table_rows(full, 91)))
    shared = [91 * PAGE, 70 * PAGE + 17]
    add_holdout(2, 91, (shared, table_rows(shared, 91, shared_prefix=40)))
    # Single-page rows at the largest batch ((1, 1) was here until the contest's own (1, 1) became a workload; the
    # new shape has a new uuid, so no trace of the old one is read as this one).
    add_holdout(31, 1, uuid_key="3/31x1")
    add_holdout(3, 32)
    add_holdout(5, 40)
    add_holdout(13, 64)
    write_jsonl(pack / "workloads.jsonl", lines)
    write_jsonl(pack / "holdout.jsonl", holdout)
    key = lambda l: (l["workload"]["axes"]["batch_size"] * l["workload"]["axes"]["max_num_pages"],
                     l["workload"]["uuid"])
    return {DSA_INDEXER: dev_subset(lines, key)}


def attention_inputs():
    inputs = {name: {"type": "random"} for name in ("q_nope", "q_pe", "ckv_cache", "kpe_cache", "sparse_indices")}
    inputs["sm_scale"] = {"type": "scalar", "value": ATTENTION_SM_SCALE}
    return inputs


def gen_dsa_attention(root):
    """The contest's 23 workloads: num_tokens 1x1, 2x8, 6x3, 7x3, 8x8 and num_pages = 8462; sm_scale is the
    definition's constant. sparse_indices come from the generator ("dsa_sparse_attention"): one request per
    token, 2048 valid indices per row."""
    lines = [line_with_uuid(DSA_ATTENTION, u, {"num_tokens": row["num_tokens"], "num_pages": row["num_pages"]},
                            attention_inputs())
             for u, row in read_contest_axes(root, DSA_ATTENTION)]
    # Holdout: -1 padding (short contexts), one valid index, -1 entries between valid ones (the math takes the
    # entries != -1 at any position), tokens of one request (heavy row overlap), and sizes outside the contest's.
    pack = root / "tasks/contest" / DSA_ATTENTION
    hrng = random.Random(20260322)
    holdout = []

    def add_holdout(num_tokens, rows=None):
        index = len(holdout)
        inputs = attention_inputs()
        if rows is not None:
            assert len(rows) == num_tokens and all(len(r) == TOPK for r in rows)
            rel = f"blob/{DSA_ATTENTION}_{workload_uuid(DSA_ATTENTION, 'holdout', index)}.safetensors"
            write_safetensors_i32(pack / rel, {"sparse_indices": ([num_tokens, TOPK], [v for r in rows for v in r])})
            inputs["sparse_indices"] = blob_input(rel, "sparse_indices")
        holdout.append(trace_line(DSA_ATTENTION, "holdout", index,
                                  {"num_tokens": num_tokens, "num_pages": ATTENTION_NUM_PAGES}, inputs))

    def request_rows(context_lens, token_lens=None):
        """One request with context length max(token_lens); each token attends to its own causal prefix."""
        length = max(context_lens)
        pages = hrng.sample(range(ATTENTION_NUM_PAGES), -(-length // PAGE))
        rows = []
        for l_t in context_lens:
            chosen = hrng.sample(range(l_t), min(TOPK, l_t))
            row = [pages[j // PAGE] * PAGE + j % PAGE for j in chosen]
            rows.append(row + [-1] * (TOPK - len(row)))
        return rows

    def separate_rows(context_lens):
        return [request_rows([l])[0] for l in context_lens]

    add_holdout(1, separate_rows([1]))
    add_holdout(3, separate_rows([100, 2047, 2048]))
    interleaved = []
    for l_t in (3000, 700):
        row = request_rows([l_t])[0]
        valid = [v for v in row if v >= 0][:TOPK // 2]
        slots = sorted(hrng.sample(range(TOPK), len(valid)))
        mixed = [-1] * TOPK
        for s, v in zip(slots, valid):
            mixed[s] = v
        interleaved.append(mixed)
    add_holdout(2, interleaved)
    add_holdout(4, request_rows([5000, 5001, 5002, 5003]))
    add_holdout(5)
    add_holdout(16)
    write_jsonl(pack / "workloads.jsonl", lines)
    write_jsonl(pack / "holdout.jsonl", holdout)
    return {DSA_ATTENTION: dev_subset(lines, lambda l: (l["workload"]["axes"]["num_tokens"], l["workload"]["uuid"]))}


def gen_part_a(root):
    dev = {}
    dev.update(gen_dsa_indexer(root))
    dev.update(gen_dsa_attention(root))
    return dev


# ---------------------------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    parser.add_argument("--print-dev", action="store_true", help="print each pack's dev_workloads uuids")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    dev = {}
    dev.update(gen_part_a(root))
    dev.update(gen_part_b(root))
    if args.print_dev:
        for name, uuids in dev.items():
            print(name)
            print("dev_workloads = [" + ", ".join(f'"{u}"' for u in uuids) + "]")


if __name__ == "__main__":
    main()
