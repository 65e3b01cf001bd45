#!/usr/bin/env python3
"""GDN prefill beside public implementations, on the pack's workloads (the GPU machine, torch with CUDA).

For each workload (default: the pack's dev workloads from task.toml; --uuids to choose) this builds fresh inputs
with the pack's synthetic structure (bench/contest/torch_eager.py's builder: unit-norm q/k, warmed or zero
states, sequence lengths as in gdn_gen.h) and times, with CUDA events after a 2 x L2 flush, one warm-up call
and the median of --iters calls:
  * eager: the definition's own Python reference executed as is (PyTorch eager, a loop over tokens);
  * fla: flash-linear-attention's chunk_gated_delta_rule (Triton, from a checkout given with --fla, not part
    of kda) called with the contest's layout (state_v_first: the k-last state is FLA's V-first), GVA heads
    and cu_seqlens; the gates are computed inside the timed call, as the contest's kernels must, fused into
    FLA's kernel when its version supports use_gate_in_kernel (recorded as "fla_gates").
FLA is also timed on the device side (torch.profiler, CUPTI: first kernel start to last kernel end, and
the kernels' summed durations), since a Python-level call is host-bound at these sizes.
Each FLA result is checked against the eager reference of the same inputs (worst absolute error of the output
and of the final state), so a number for a wrong computation cannot pass unnoticed.
torch.compile is not run: the reference is a Python loop over tokens, which compile would unroll T times.
Writes one JSON line per workload: {uuid, axes, eager_ms, fla_ms, fla_gpu_span_ms,
fla_gpu_kernels_ms, fla_gates, fla_err_output, fla_err_state}.

Usage: python3 bench/contest/prefill_compare.py --fla deps/fla [--uuids U ...] [--iters 5] [--budget-s 20]
"""
import argparse
import json
import pathlib
import re
import sys
import tomllib
import types

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch_eager  # noqa: E402

PACK = "gdn_prefill_qk4_v8_d128_k_last"


def import_fla(root):
    """chunk_gated_delta_rule from a flash-linear-attention checkout, without running fla/__init__.py and
    fla/ops/__init__.py (which import every model and layer, and their dependencies)."""
    init = (pathlib.Path(root) / "fla/__init__.py").read_text()
    version = re.search(r'__version__ = "([^"]+)"', init)
    for name, sub in (("fla", "fla"), ("fla.ops", "fla/ops")):
        mod = types.ModuleType(name)
        mod.__path__ = [str(pathlib.Path(root) / sub)]
        mod.__version__ = version.group(1) if version else "0"  # fla.utils reads fla.__version__
        sys.modules[name] = mod
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    return chunk_gated_delta_rule


def fla_call(fn, x, fused):
    q, k, v = x["q"][None], x["k"][None], x["v"][None]
    common = dict(scale=x["scale"], initial_state=x["state"], output_final_state=True, state_v_first=True,
                  cu_seqlens=x["cu_seqlens"], cu_seqlens_cpu=x["cu_cpu"])
    if fused:
        return fn(q, k, v, x["a"][None], x["b"][None], use_gate_in_kernel=True, A_log=x["A_log"],
                  dt_bias=x["dt_bias"], use_beta_sigmoid_in_kernel=True, **common)
    log_g = -torch.exp(x["A_log"]) * torch.nn.functional.softplus(x["a"].float() + x["dt_bias"], beta=1.0,
                                                                 threshold=20.0)
    beta = torch.sigmoid(x["b"].float())
    return fn(q, k, v, log_g[None], beta[None], **common)


def gpu_times(fn, calls=3):
    """Median over `calls` of the device-side time of one call under torch.profiler (CUPTI): the span from
    the first kernel's start to the last kernel's end (what kda's evaluator reports) and the sum of the
    kernels' durations; free of the host time a Python-level call adds between kernels."""
    from torch.profiler import ProfilerActivity, profile
    spans, sums = [], []
    for _ in range(calls):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        if not kernels:
            return None, None
        spans.append((max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels)) / 1e3)
        sums.append(sum(e.time_range.end - e.time_range.start for e in kernels) / 1e3)
    return sorted(spans)[len(spans) // 2], sorted(sums)[len(sums) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = pathlib.Path(__file__).resolve().parent.parent.parent
    parser.add_argument("--tasks", default=str(root / "tasks/contest"))
    parser.add_argument("--uuids", nargs="*", default=None, help="workload uuids (default: the pack's dev set)")
    parser.add_argument("--fla", default=None, help="flash-linear-attention checkout (the directory holding fla/)")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=20.0, help="per-workload budget of the eager reference")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", default="-")
    args = parser.parse_args()
    pack = pathlib.Path(args.tasks) / PACK
    definition = json.loads((pack / "definition.json").read_text())
    uuids = args.uuids or tomllib.loads((pack / "task.toml").read_text())["evaluation"]["dev_workloads"]
    workloads = {}
    for file in ("workloads.jsonl", "holdout.jsonl"):
        for line in (pack / file).read_text().splitlines():
            w = json.loads(line)["workload"]
            workloads[w["uuid"]] = w
    missing = [u for u in uuids if u not in workloads]
    if missing:
        sys.exit(f"prefill_compare: no workload {missing[0]} in {pack}/workloads.jsonl or holdout.jsonl")
    eager = torch_eager.reference_fn(definition)
    fla, fused, fla_error = None, True, None
    if args.fla:
        try:
            fla = import_fla(args.fla)
        except Exception as e:  # recorded, not fatal: the eager column still runs
            fla_error = f"import: {type(e).__name__}: {e}"
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    flush = torch_eager.flush_buffer()
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    for uuid in uuids:
        w = workloads[uuid]
        axes = dict(w["axes"])
        x = torch_eager.build_gdn_prefill(axes, gen)
        x["scale"] = torch_eager.input_value(pack, w["inputs"], "scale", {"scale": 0.08838834764831843})
        call_args = [torch_eager.input_value(pack, w["inputs"], n, x) for n in definition["inputs"]]
        record = {"uuid": uuid, "axes": axes}
        ref_out, ref_state = eager(*call_args)
        ms, iters = torch_eager.time_eager(eager, call_args, args.iters, flush, args.budget_s)
        record["eager_ms"] = round(ms, 4)
        if iters != args.iters:
            record["eager_iters"] = iters
        if fla is not None and fla_error is None:
            x["cu_cpu"] = x["cu_seqlens"].cpu()
            try:
                try:
                    o, ht = fla_call(fla, x, fused)
                except TypeError:  # a version without the fused gates
                    fused = False
                    o, ht = fla_call(fla, x, fused)
                record["fla_gates"] = "in kernel" if fused else "torch, inside the timed call"
                record["fla_err_output"] = float((o[0].float() - ref_out.float()).abs().max())
                record["fla_err_state"] = float((ht.float() - ref_state.float()).abs().max())
                ms, _ = torch_eager.time_eager(lambda: fla_call(fla, x, fused), [], args.iters, flush)
                record["fla_ms"] = round(ms, 4)
                span, total = gpu_times(lambda: fla_call(fla, x, fused))
                if span is not None:
                    record["fla_gpu_span_ms"], record["fla_gpu_kernels_ms"] = round(span, 4), round(total, 4)
            except Exception as e:
                fla_error = f"call: {type(e).__name__}: {str(e)[:300]}"
        if fla_error:
            record["fla_error"] = fla_error
        out.write(json.dumps(record) + "\n")
        out.flush()
        del x, call_args, ref_out, ref_state
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
