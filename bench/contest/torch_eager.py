#!/usr/bin/env python3
"""PyTorch eager latency of the contest kernels' computation on every workload (context for the H200 packs).

For each workload of tasks/contest/<definition>/workloads.jsonl (and holdout.jsonl with --holdout) this builds
fresh inputs on the GPU with the pack's synthetic structure (the same rules as the pack's kda generator, drawn
with torch's RNG: not bit-identical, same distribution), then times the definition's own Python reference
(`reference` in definition.json, executed as is: that is "the computation in PyTorch eager") with CUDA events:
before every call the L2 is flushed by zeroing a buffer of 2 x L2 size, one warm-up call, then the median of
--iters calls. Writes one JSON line per workload: {definition, uuid, axes, torch_eager_ms}.

Each definition has an input builder below, registered in INPUT_BUILDERS; definitions without one are skipped.

Usage (on the GPU machine): python3 bench/contest/torch_eager.py [--tasks tasks/contest] [--out FILE]
       [--definitions NAME ...] [--holdout] [--iters 20]
"""
import argparse
import json
import math
import pathlib
import struct
import sys

import torch

# ---------------------------------------------------------------------------------------------------------------
# Shared harness


def load_safetensors(path, key):
    """Reads one tensor of a safetensors file (stdlib header parse; dtypes used by the packs)."""
    dtypes = {"I32": torch.int32, "I64": torch.int64, "F32": torch.float32, "BF16": torch.bfloat16,
              "F16": torch.float16, "I8": torch.int8, "U8": torch.uint8, "F8_E4M3": torch.float8_e4m3fn}
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    entry = header[key]
    begin, end = entry["data_offsets"]
    raw = bytearray(data[8 + n + begin:8 + n + end])
    return torch.frombuffer(raw, dtype=dtypes[entry["dtype"]]).reshape(entry["shape"]).clone()


def flush_buffer():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.empty(2 * l2, dtype=torch.uint8, device="cuda")


def time_eager(fn, args, iters, flush):
    """Median CUDA-event time (ms) of fn(*args) over `iters` calls, each after an L2 flush; one warm-up call."""
    fn(*args)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        flush.zero_()
        torch.cuda.synchronize()
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def reference_fn(definition):
    scope = {}
    exec(compile(definition["reference"], definition["name"] + ".reference", "exec"), scope)  # noqa: S102
    return scope["run"]


def input_value(pack, spec, name, generated):
    """The workload's explicit value (scalar or safetensors blob) for `name`, else the generated one."""
    kind = spec.get(name, {"type": "random"})
    if kind["type"] == "scalar":
        return kind["value"]
    if kind["type"] == "safetensors":
        return load_safetensors(pack / kind["path"], kind["tensor_key"]).cuda()
    return generated[name]


# ---------------------------------------------------------------------------------------------------------------
# DSA top-k indexer and sparse attention (part A). Structure as in src/contest/dsa_*_gen.h.

PAGE = 64


def pack_indexer_cache(x):
    """x: [P, 64, 128] bf16 keys -> deep_gemm packed int8 cache [P, 64, 1, 132] (fp8 token-major, then scales)."""
    pages = x.shape[0]
    xf = x.float()
    scale = xf.abs().amax(dim=-1).clamp_min(1e-4) / 448.0  # [P, 64]
    fp8 = (xf / scale[..., None]).to(torch.float8_e4m3fn)
    packed = torch.cat([fp8.view(torch.uint8).reshape(pages, PAGE * 128),
                        scale.contiguous().view(torch.uint8).reshape(pages, PAGE * 4)], dim=1)
    return packed.view(torch.int8).reshape(pages, PAGE, 1, 132)


def build_dsa_indexer(axes, gen):
    batch, max_pages, pages = axes["batch_size"], axes["max_num_pages"], axes["num_pages"]
    lens = torch.randint(1, PAGE * max_pages + 1, (batch,), generator=gen)
    full = int(torch.randint(0, batch, (1,), generator=gen))
    lens[full] = int(torch.randint(PAGE * (max_pages - 1) + 1, PAGE * max_pages + 1, (1,), generator=gen))
    perm = torch.randperm(pages, generator=gen)
    table = torch.zeros(batch, max_pages, dtype=torch.int32)
    for b in range(batch):
        used = -(-int(lens[b]) // PAGE)
        row = perm[b * max_pages:b * max_pages + used] if batch * max_pages <= pages else torch.randperm(pages, generator=gen)[:used]
        table[b, :used] = row.to(torch.int32)
    keys = torch.randn(pages, PAGE, 128, device="cuda").to(torch.bfloat16)
    return {
        "q_index_fp8": torch.randn(batch, 64, 128, device="cuda").clamp(-2, 2).to(torch.float8_e4m3fn),
        "k_index_cache_fp8": pack_indexer_cache(keys),
        "weights": torch.randn(batch, 64, device="cuda"),
        "seq_lens": lens.to(torch.int32).cuda(),
        "block_table": table.cuda(),
    }


def build_dsa_sparse_attention(axes, gen):
    tokens, pages = axes["num_tokens"], axes["num_pages"]
    max_ctx = min(32768, PAGE * pages)
    min_ctx = min(2048, max_ctx)
    perm = torch.randperm(pages, generator=gen)
    disjoint = tokens * 512 <= pages
    indices = torch.full((tokens, 2048), -1, dtype=torch.int32)
    for t in range(tokens):
        ctx = int(torch.randint(min_ctx, max_ctx + 1, (1,), generator=gen))
        used = -(-ctx // PAGE)
        table = perm[t * 512:t * 512 + used] if disjoint else torch.randperm(pages, generator=gen)[:used]
        k = min(2048, ctx)
        pos = torch.randperm(ctx, generator=gen)[:k]
        indices[t, :k] = (table[pos // PAGE] * PAGE + pos % PAGE).to(torch.int32)
    return {
        "q_nope": torch.randn(tokens, 16, 512, device="cuda").to(torch.bfloat16),
        "q_pe": torch.randn(tokens, 16, 64, device="cuda").to(torch.bfloat16),
        "ckv_cache": torch.randn(pages, PAGE, 512, device="cuda").to(torch.bfloat16),
        "kpe_cache": torch.randn(pages, PAGE, 64, device="cuda").to(torch.bfloat16),
        "sparse_indices": indices.cuda(),
    }


INPUT_BUILDERS = {
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": build_dsa_indexer,
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": build_dsa_sparse_attention,
}

# ---------------------------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = pathlib.Path(__file__).resolve().parent.parent.parent
    parser.add_argument("--tasks", default=str(root / "tasks/contest"))
    parser.add_argument("--out", default="-")
    parser.add_argument("--definitions", nargs="*", default=None)
    parser.add_argument("--holdout", action="store_true", help="also time holdout.jsonl workloads")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    flush = flush_buffer()
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    for name, build in INPUT_BUILDERS.items():
        if args.definitions and name not in args.definitions:
            continue
        pack = pathlib.Path(args.tasks) / name
        definition = json.loads((pack / "definition.json").read_text())
        run = reference_fn(definition)
        files = ["workloads.jsonl"] + (["holdout.jsonl"] if args.holdout else [])
        for file in files:
            for line in (pack / file).read_text().splitlines():
                workload = json.loads(line)["workload"]
                axes = dict(workload["axes"])
                generated = build(axes, gen)
                call_args = [input_value(pack, workload["inputs"], n, generated) for n in definition["inputs"]]
                ms = time_eager(run, call_args, args.iters, flush)
                record = {"definition": name, "uuid": workload["uuid"], "axes": axes, "torch_eager_ms": round(ms, 4)}
                if file != "workloads.jsonl":
                    record["split"] = "holdout"
                out.write(json.dumps(record) + "\n")
                out.flush()
                del generated, call_args
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
