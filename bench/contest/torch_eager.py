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
       [--definitions NAME ...] [--holdout] [--iters 20] [--budget-s SECONDS]
"""
import argparse
import json
import math
import pathlib
import random
import struct
import sys
import time

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


def time_eager(fn, args, iters, flush, budget_s=0.0):
    """Median CUDA-event time (ms) of fn(*args) over `iters` calls, each after an L2 flush; one warm-up call.
    With budget_s > 0, a slow computation (warm-up call x iters > budget_s) gets fewer calls, at least 3.
    Returns (median ms, calls timed)."""
    t0 = time.perf_counter()
    fn(*args)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    if budget_s > 0 and first * iters > budget_s:
        iters = max(3, int(budget_s / first))
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
    return times[len(times) // 2], iters


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


# ---------------------------------------------------------------------------------------------------------------
# GDN decode / prefill and MoE (part B). Structure as in src/contest/gdn_gen.h and src/contest/moe_gen.h.

GDN_HEADS_QK, GDN_HEADS_V, GDN_D, GDN_WARMUP = 4, 8, 128, 48


def gdn_params(gen):
    """A_log = ln U[1,16]; dt_bias = softplus^-1(y), y log-uniform in [1e-3, 1e-1] (per value head)."""
    a_log = torch.log(1.0 + 15.0 * torch.rand(GDN_HEADS_V, generator=gen, dtype=torch.float64))
    y = torch.exp(math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * torch.rand(GDN_HEADS_V, generator=gen,
                                                                                   dtype=torch.float64))
    return a_log.float().cuda(), torch.log(torch.expm1(y)).float().cuda()


def gdn_unit_rows(*shape):
    x = torch.randn(*shape, device="cuda", dtype=torch.float64)
    return (x / x.norm(dim=-1, keepdim=True)).to(torch.bfloat16)


def gdn_gates(a_log, dt_bias, a, b):
    g = torch.exp(-torch.exp(a_log) * torch.nn.functional.softplus(a.float() + dt_bias, beta=1.0, threshold=20.0))
    return g, torch.sigmoid(b.float())


def gdn_warm_states(n, a_log, dt_bias):
    """[n, 8, 128, 128] k-last states after GDN_WARMUP steps of the recurrence (unit k, normal v, drawn gates)."""
    state = torch.zeros(n, GDN_HEADS_V, GDN_D, GDN_D, device="cuda")
    for _ in range(GDN_WARMUP):
        k = gdn_unit_rows(n, GDN_HEADS_V, GDN_D).float()
        v = torch.randn(n, GDN_HEADS_V, GDN_D, device="cuda").to(torch.bfloat16).float()
        a = torch.randn(n, GDN_HEADS_V, device="cuda").to(torch.bfloat16)
        b = torch.randn(n, GDN_HEADS_V, device="cuda").to(torch.bfloat16)
        g, beta = gdn_gates(a_log, dt_bias, a, b)
        state = state * g[..., None, None]
        u = torch.einsum("nhrc,nhc->nhr", state, k)
        state = state + (beta[..., None] * (v - u))[..., None] * k[:, :, None, :]
    return state


def gdn_split_sequences(total, num_seqs, rng):
    """cu_seqlens as in gdn_gen.h (version 3): one long sequence plus short ones in batches of <= 4 sequences,
    log-normal lengths in larger ones; empties only when total < num_seqs."""
    lens = [0] * num_seqs
    if total < num_seqs:
        for i in rng.sample(range(num_seqs), total):
            lens[i] = 1
    elif num_seqs == 1:
        lens[0] = total
    elif num_seqs > 4:
        lens = [1] * num_seqs
        extra = total - num_seqs
        pick = rng.randrange(num_seqs)
        w = [math.exp(rng.gauss(0.0, 1.0)) for _ in range(num_seqs)]
        shares = [int(math.floor(extra * x / sum(w))) for x in w]
        lens = [n + s for n, s in zip(lens, shares)]
        lens[pick] += extra - sum(shares)
    else:
        lens = [1] * num_seqs
        extra = total - num_seqs
        long_idx = rng.randrange(num_seqs)
        long_extra = int(math.floor(extra * rng.uniform(0.5, 0.9)))
        rest = extra - long_extra
        w = [0.0 if i == long_idx else rng.uniform(0.05, 1.0) for i in range(num_seqs)]
        given = 0
        for i in range(num_seqs):
            if i != long_idx:
                share = int(math.floor(rest * w[i] / sum(w)))
                lens[i] += share
                given += share
        lens[long_idx] += long_extra + rest - given
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return cu


def build_gdn_decode(axes, gen):
    batch = axes["batch_size"]
    a_log, dt_bias = gdn_params(gen)
    return {
        "q": gdn_unit_rows(batch, 1, GDN_HEADS_QK, GDN_D),
        "k": gdn_unit_rows(batch, 1, GDN_HEADS_QK, GDN_D),
        "v": torch.randn(batch, 1, GDN_HEADS_V, GDN_D, device="cuda").to(torch.bfloat16),
        "state": gdn_warm_states(batch, a_log, dt_bias),
        "A_log": a_log,
        "a": torch.randn(batch, 1, GDN_HEADS_V, device="cuda").to(torch.bfloat16),
        "dt_bias": dt_bias,
        "b": torch.randn(batch, 1, GDN_HEADS_V, device="cuda").to(torch.bfloat16),
    }


def build_gdn_prefill(axes, gen):
    total, num_seqs = axes["total_seq_len"], axes["num_seqs"]
    a_log, dt_bias = gdn_params(gen)
    rng = random.Random(int(torch.randint(0, 2**62, (1,), generator=gen)))
    cu = gdn_split_sequences(total, num_seqs, rng)
    warmed = torch.tensor([rng.randrange(3) != 0 for _ in range(num_seqs)], device="cuda")
    state = gdn_warm_states(num_seqs, a_log, dt_bias) * warmed[:, None, None, None]
    return {
        "q": gdn_unit_rows(total, GDN_HEADS_QK, GDN_D),
        "k": gdn_unit_rows(total, GDN_HEADS_QK, GDN_D),
        "v": torch.randn(total, GDN_HEADS_V, GDN_D, device="cuda").to(torch.bfloat16),
        "state": state,
        "A_log": a_log,
        "a": torch.randn(total, GDN_HEADS_V, device="cuda").to(torch.bfloat16),
        "dt_bias": dt_bias,
        "b": torch.randn(total, GDN_HEADS_V, device="cuda").to(torch.bfloat16),
        "cu_seqlens": torch.tensor(cu, dtype=torch.int64, device="cuda"),
    }


def moe_fp8_randn(*shape):
    """N(0,1) clamped to [-2, 2], then float8_e4m3fn (spec §2.3), built in slices to bound the fp32 temporary."""
    out = torch.empty(*shape, dtype=torch.float8_e4m3fn, device="cuda")
    for i in range(shape[0]):
        out[i] = torch.randn(*shape[1:], device="cuda").clamp_(-2, 2).to(torch.float8_e4m3fn)
    return out


def build_moe(axes, gen):
    t = axes["seq_len"]
    sigma = 1.0 + float(torch.rand(1, generator=gen))
    return {
        "routing_logits": sigma * torch.randn(t, 256, device="cuda"),
        "routing_bias": (torch.rand(256, device="cuda") * 0.04 - 0.02).to(torch.bfloat16),
        "hidden_states": moe_fp8_randn(t, 7168),
        "hidden_states_scale": torch.randn(56, t, device="cuda"),
        "gemm1_weights": moe_fp8_randn(32, 4096, 7168),
        "gemm1_weights_scale": torch.randn(32, 32, 56, device="cuda"),
        "gemm2_weights": moe_fp8_randn(32, 7168, 2048),
        "gemm2_weights_scale": torch.randn(32, 56, 16, device="cuda"),
    }


INPUT_BUILDERS = {
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": build_dsa_indexer,
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": build_dsa_sparse_attention,
    "gdn_decode_qk4_v8_d128_k_last": build_gdn_decode,
    "gdn_prefill_qk4_v8_d128_k_last": build_gdn_prefill,
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": build_moe,
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
    parser.add_argument("--budget-s", type=float, default=0.0,
                        help="per-workload time budget: slow references (GDN prefill's token loop) get fewer calls")
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
                ms, iters = time_eager(run, call_args, args.iters, flush, args.budget_s)
                record = {"definition": name, "uuid": workload["uuid"], "axes": axes, "torch_eager_ms": round(ms, 4)}
                if iters != args.iters:
                    record["iters"] = iters
                if file != "workloads.jsonl":
                    record["split"] = "holdout"
                out.write(json.dumps(record) + "\n")
                out.flush()
                del generated, call_args
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
