#!/usr/bin/env python3
"""kda torch oracle: a FlashInfer-Bench definition's Python `reference` as kda's reference runner.

Started by the evaluator like kda-runner (src/runner/runner_main.cc):

    python3 torch_oracle.py --backend cuda|host --role reference

and speaks the same framed protocol (src/eval/protocol.h, frame format in src/proc/frame.h):
commands arrive on fd 3, replies leave on fd 4, the evaluator's arena memfd is fd 5.

    kHello  -> {"pid", "backend": "torch-cuda" | "torch-cpu", "capabilities": []}
    kLoad   {"definition": <path>} (or "library": <path to definition.json>): compiles the
            definition's `reference` source into a fresh module and finds `run`.
    kLayout ArenaLayout JSON: maps fd 5 and makes tensor views of every slot.
    kCall   {"seq", "flush", "upload", "upload_from", "download", "timed", ...}: calls run() on
            the arena's inputs (copied to the device), writes the outputs into the output slots.
    kQuit   -> exit 0.

Only the output slots are ever written; guard bands and inputs are left as they are. Runs trusted
reference code only: it cannot sandbox itself and refuses a load that asks for a sandbox.
Standard library and torch only.
"""

import argparse
import builtins
import ctypes
import gc
import inspect
import json
import linecache
import mmap
import os
import struct
import sys
import time
import traceback
import types

MAGIC = 0x4641444B  # "KDAF"
HEADER = struct.Struct("<IIQ")
MSG_HELLO, MSG_LOAD, MSG_LAYOUT, MSG_CALL, MSG_QUIT, MSG_REPLY = 1, 2, 3, 4, 5, 6
COMMAND_FD, REPLY_FD, ARENA_FD = 3, 4, 5
MAX_FRAME_BYTES = 1 << 30
GUARD_BYTES = 4096  # src/eval/arena.h kGuardBytes
ERROR_TAIL_CHARS = 6000

# FlashInfer-Bench dtype names (src/tensor/dtype.cc) -> (torch attribute, bytes per element).
# float4_e2m1 is packed two per byte and has no unpacked torch dtype: not supported here.
DTYPES = {
    "float32": ("float32", 4),
    "float16": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "float8_e4m3fn": ("float8_e4m3fn", 1),
    "float8_e5m2": ("float8_e5m2", 1),
    "int64": ("int64", 8),
    "int32": ("int32", 4),
    "int16": ("int16", 2),
    "int8": ("int8", 1),
    "uint8": ("uint8", 1),
    "bool": ("bool", 1),
}


class OracleError(Exception):
    """An expected failure whose message is the whole story (no traceback needed)."""


# ---------------------------------------------------------------------------------------------
# Frames

def _read_exact(fd, n):
    chunks = []
    got = 0
    while got < n:
        try:
            b = os.read(fd, n - got)
        except InterruptedError:
            continue
        if not b:
            if got == 0:
                return None
            raise EOFError("peer closed the channel in a frame (%d of %d bytes)" % (got, n))
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_frame(fd):
    """Returns (type, payload bytes), or None when the peer closed the channel between frames."""
    header = _read_exact(fd, HEADER.size)
    if header is None:
        return None
    magic, msg_type, length = HEADER.unpack(header)
    if magic != MAGIC:
        raise ValueError("bad frame magic 0x%08x" % magic)
    if length > MAX_FRAME_BYTES:
        raise ValueError("frame of %d bytes exceeds the limit of %d" % (length, MAX_FRAME_BYTES))
    payload = _read_exact(fd, length) if length else b""
    if payload is None:
        raise EOFError("peer closed the channel in a frame")
    return msg_type, payload


def write_frame(fd, msg_type, payload):
    data = memoryview(HEADER.pack(MAGIC, msg_type, len(payload)) + payload)
    while data:
        try:
            n = os.write(fd, data)
        except InterruptedError:
            continue
        data = data[n:]


def send(msg_type, obj):
    write_frame(REPLY_FD, msg_type, json.dumps(obj, allow_nan=False).encode())


def error_tail(text):
    text = text.rstrip()
    return text if len(text) <= ERROR_TAIL_CHARS else "..." + text[-ERROR_TAIL_CHARS:]


# ---------------------------------------------------------------------------------------------
# The oracle

class Slot:
    __slots__ = ("name", "dtype", "shape", "scalar", "offset", "nbytes")

    def __init__(self, j, arena_size):
        try:
            self.name = str(j["name"])
            self.dtype = str(j["dtype"])
            self.shape = [int(x) for x in j["shape"]]
            self.scalar = bool(j["scalar"])
            self.offset = int(j["offset"])
            self.nbytes = int(j["nbytes"])
        except (KeyError, TypeError, ValueError) as e:
            raise OracleError("layout: bad slot %r: %s" % (j, e))
        if self.dtype not in DTYPES:
            raise OracleError("layout: slot %s has dtype %s, which the torch oracle does not support"
                              % (self.name, self.dtype))
        numel = 1
        for d in self.shape:
            if d < 0:
                raise OracleError("layout: slot %s has a negative dimension" % self.name)
            numel *= d
        if self.nbytes != numel * DTYPES[self.dtype][1]:
            raise OracleError("layout: slot %s: %d bytes for shape %s of %s"
                              % (self.name, self.nbytes, self.shape, self.dtype))
        if self.offset < GUARD_BYTES or self.offset + self.nbytes + GUARD_BYTES > arena_size:
            raise OracleError("layout: slot %s outside the arena" % self.name)


class Oracle:
    def __init__(self, backend):
        self.backend = backend
        self.device = "cuda" if backend == "cuda" else "cpu"
        self.torch = None
        self.run = None
        self.definition_name = ""
        self.def_inputs = []   # definition input names, in definition order
        self.def_outputs = []  # definition output names, in definition order
        self.by_keyword = True
        self.mm = None
        self.layout_inputs = []
        self.layout_outputs = []
        self.in_views = []     # host tensor views of the input slots (None for scalars)
        self.out_views = []    # host tensor views of the output slots
        self.args = None       # the inputs of the last upload: device tensors / Python numbers
        self.first_input_offset = 0
        self.flush_buf = None

    # -- load ---------------------------------------------------------------------------------

    def load(self, msg):
        if msg.get("sandbox"):
            raise OracleError("the torch oracle runs trusted reference code only and cannot sandbox itself "
                              "(the load asked for a sandbox)")
        path = msg.get("definition") or msg.get("library")
        if not path:
            raise OracleError("load: no \"definition\" path")
        try:
            import torch  # noqa: PLC0415 (imported only when a definition is loaded)
        except BaseException as e:  # an import can fail in many ways (ImportError, OSError, ...)
            raise OracleError("torch is not importable: %s: %s (python %s at %s)"
                              % (type(e).__name__, e, sys.version.split()[0], sys.executable))
        self.torch = torch
        try:
            with open(path, "r", encoding="utf-8") as f:
                definition = json.load(f)
        except (OSError, ValueError) as e:
            raise OracleError("%s: cannot read the definition: %s" % (path, e))
        if not isinstance(definition, dict):
            raise OracleError("%s: the definition is not a JSON object" % path)
        source = definition.get("reference")
        if not isinstance(source, str) or not source.strip():
            raise OracleError("%s: field \"reference\": no Python reference source" % path)
        for field in ("inputs", "outputs"):
            if not isinstance(definition.get(field), dict):
                raise OracleError("%s: field \"%s\": missing or not an object" % (path, field))
        for field in ("inputs", "outputs"):
            for name, spec in definition[field].items():
                dtype = spec.get("dtype") if isinstance(spec, dict) else None
                if dtype not in DTYPES:
                    raise OracleError("%s: field \"%s.%s.dtype\": %r is not supported by the torch oracle"
                                      % (path, field, name, dtype))
                if not hasattr(torch, DTYPES[dtype][0]):
                    raise OracleError("%s: %s %s: torch %s has no dtype %s"
                                      % (path, field, name, torch.__version__, dtype))
        self.definition_name = str(definition.get("name", "definition"))
        self.def_inputs = list(definition["inputs"].keys())
        self.def_outputs = list(definition["outputs"].keys())

        if self.device == "cuda":
            if not torch.cuda.is_available():
                raise OracleError("torch %s cannot use CUDA here (torch.cuda.is_available() is False; built for CUDA %s)"
                                  % (torch.__version__, torch.version.cuda))
            torch.cuda.init()
            props = torch.cuda.get_device_properties(0)
            l2 = int(getattr(props, "L2_cache_size", 0) or 0) or (64 << 20)
            self.flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
        # torch's defaults stand (fp32 matmuls without TF32), as FlashInfer-Bench runs its references:
        # no precision switch is touched here.

        filename = "<reference of %s>" % self.definition_name
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module_name = "kda_reference_" + "".join(c if c.isalnum() else "_" for c in self.definition_name)
        module = types.ModuleType(module_name)
        module.__file__ = filename
        module.__dict__["__builtins__"] = builtins
        sys.modules[module_name] = module  # dataclasses and pickling look the module up here
        try:
            code = compile(source, filename, "exec")
            exec(code, module.__dict__)  # noqa: S102 (the pack's trusted reference)
        except BaseException:  # noqa: BLE001
            raise OracleError("%s: the reference does not load:\n%s" % (path, error_tail(traceback.format_exc())))
        run = module.__dict__.get("run")
        if not callable(run):
            raise OracleError("%s: the reference defines no function run(...)" % path)
        # Keyword call when run's parameters carry the definition's input names, positional otherwise
        # (FlashInfer-Bench passes inputs in definition order).
        self.by_keyword = False
        try:
            params = inspect.signature(run).parameters
            var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
            self.by_keyword = var_kw or all(n in params for n in self.def_inputs)
        except (TypeError, ValueError):
            pass
        self.run = run
        info = {"ok": True, "sandbox": {}, "torch": torch.__version__, "definition": self.definition_name,
                "call": "keyword" if self.by_keyword else "positional"}
        if self.device == "cuda":
            info["device"] = torch.cuda.get_device_name(0)
        return info

    # -- layout -------------------------------------------------------------------------------

    def release_arena(self):
        self.args = None
        self.in_views = []
        self.out_views = []
        if self.mm is not None:
            gc.collect()
            try:
                self.mm.close()
            except BufferError:
                pass  # a view is still alive somewhere: the map goes when it does
            self.mm = None

    def slot_view(self, slot):
        torch = self.torch
        dtype = getattr(torch, DTYPES[slot.dtype][0])
        if slot.nbytes == 0:
            return torch.empty(slot.shape, dtype=dtype)
        raw = torch.frombuffer(self.mm, dtype=torch.uint8, count=slot.nbytes, offset=slot.offset)
        return raw.view(dtype).view(slot.shape if slot.shape else [])

    def set_layout(self, msg):
        if self.torch is None:
            raise OracleError("layout before a successful load")
        try:
            size = int(msg["size"])
            raw_inputs, raw_outputs = msg["inputs"], msg["outputs"]
        except (KeyError, TypeError, ValueError):
            raise OracleError("layout: missing fields")
        ins = [Slot(j, size) for j in raw_inputs]
        outs = [Slot(j, size) for j in raw_outputs]
        if [s.name for s in ins] != self.def_inputs:
            raise OracleError("layout: input slots %s are not the definition's inputs %s"
                              % ([s.name for s in ins], self.def_inputs))
        if [s.name for s in outs] != self.def_outputs:
            raise OracleError("layout: output slots %s are not the definition's outputs %s"
                              % ([s.name for s in outs], self.def_outputs))
        self.release_arena()
        self.mm = mmap.mmap(ARENA_FD, size)  # MAP_SHARED, read-write: the evaluator's memfd
        self.layout_inputs, self.layout_outputs = ins, outs
        self.in_views = [self.slot_view(s) for s in ins]
        self.out_views = [self.slot_view(s) for s in outs]
        self.first_input_offset = min((s.offset for s in ins), default=size)
        return {"ok": True}

    # -- call ---------------------------------------------------------------------------------

    def upload_inputs(self):
        args = []
        for slot, view in zip(self.layout_inputs, self.in_views):
            if slot.scalar:
                args.append(view.item())  # 0-d: a Python float / int / bool
            else:
                # A private copy on the target device: run() may do anything to its inputs
                # without touching the arena.
                args.append(view.to(self.device, copy=True))
        self.args = args

    def flush_cache(self):
        if self.flush_buf is not None:
            self.flush_buf.add_(1)  # read + write 2x L2

    def collect_outputs(self, result):
        names = self.def_outputs
        if isinstance(result, dict):
            missing = [n for n in names if n not in result]
            if missing:
                raise OracleError("run() returned a dict without the outputs %s" % missing)
            return [result[n] for n in names]
        if isinstance(result, (tuple, list)):
            values = list(result)
        else:
            values = [result]
        if len(values) != len(names):
            raise OracleError("run() returned %d value(s); the definition has %d output(s) %s"
                              % (len(values), len(names), names))
        return values

    def call(self, msg):
        torch = self.torch
        if self.run is None:
            raise OracleError("call before a successful load")
        if self.mm is None:
            raise OracleError("call before a layout")
        seq = msg.get("seq", 0)
        upload = bool(msg.get("upload", True))
        upload_from = int(msg.get("upload_from", 0) or 0)
        download = bool(msg.get("download", True))
        # upload_from past the inputs means "inputs unchanged": reuse the device copies.
        if self.args is None or (upload and upload_from <= self.first_input_offset):
            self.upload_inputs()
        if msg.get("flush", True):
            self.flush_cache()
        if self.by_keyword:
            call = lambda: self.run(**dict(zip(self.def_inputs, self.args)))  # noqa: E731
        else:
            call = lambda: self.run(*self.args)  # noqa: E731
        with torch.no_grad():
            if self.device == "cuda":
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                result = call()
                stop.record()
                torch.cuda.synchronize()
                elapsed_ns = int(start.elapsed_time(stop) * 1e6)
            else:
                t0 = time.monotonic_ns()
                result = call()
                elapsed_ns = time.monotonic_ns() - t0
        values = self.collect_outputs(result)
        converted = []
        finals = []
        for slot, value in zip(self.layout_outputs, values):
            if not isinstance(value, torch.Tensor):
                raise OracleError("output %s: run() returned %s, not a tensor" % (slot.name, type(value).__name__))
            if list(value.shape) != slot.shape:
                raise OracleError("output %s: shape %s, the definition's is %s"
                                  % (slot.name, list(value.shape), slot.shape))
            want = getattr(torch, DTYPES[slot.dtype][0])
            if value.dtype != want:
                converted.append("%s: %s -> %s" % (slot.name, str(value.dtype).replace("torch.", ""), slot.dtype))
                value = value.to(want)
            finals.append(value)
        if download:
            for view, value in zip(self.out_views, finals):
                view.copy_(value)  # device -> the arena slot, strides handled; nothing else written
            if self.device == "cuda":
                torch.cuda.synchronize()
        extra = {"event_ns" if self.device == "cuda" else "clock_ns": elapsed_ns}
        if converted:
            extra["converted"] = converted
        return {"ok": True, "rc": 0, "elapsed_ns": elapsed_ns, "extra": extra, "seq": seq}


# ---------------------------------------------------------------------------------------------

def die_with_parent():
    """A runner never outlives its evaluator (PR_SET_PDEATHSIG = 1, SIGKILL); best effort."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)
    except Exception:  # noqa: BLE001
        pass


def serve(oracle):
    handlers = {MSG_LOAD: oracle.load, MSG_LAYOUT: oracle.set_layout, MSG_CALL: oracle.call}
    while True:
        try:
            frame = read_frame(COMMAND_FD)
        except (OSError, EOFError, ValueError) as e:
            print("torch_oracle: command channel: %s" % e, file=sys.stderr)
            return 3
        if frame is None:
            return 0
        msg_type, payload = frame
        try:
            msg = json.loads(payload.decode("utf-8")) if payload else {}
            if not isinstance(msg, dict):
                raise ValueError("not an object")
        except (UnicodeDecodeError, ValueError):
            send(MSG_REPLY, {"ok": False, "error": "malformed command"})
            return 3
        if msg_type == MSG_QUIT:
            return 0
        handler = handlers.get(msg_type)
        if handler is None:
            out = {"ok": False, "error": "unknown command type %d" % msg_type}
        else:
            try:
                out = handler(msg)
            except OracleError as e:
                out = {"ok": False, "error": str(e)}
            except Exception:  # noqa: BLE001 (anything run() raises is the reply, never our death)
                out = {"ok": False, "error": error_tail(traceback.format_exc())}
            if msg_type == MSG_CALL and not out.get("ok"):
                out.setdefault("rc", 0)
                out.setdefault("elapsed_ns", 0)
                out.setdefault("seq", msg.get("seq", 0))
        try:
            send(MSG_REPLY, out)
        except OSError as e:
            print("torch_oracle: reply channel: %s" % e, file=sys.stderr)
            return 3


def main(argv):
    die_with_parent()
    parser = argparse.ArgumentParser(prog="torch_oracle.py", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["host", "cuda"], default="host")
    parser.add_argument("--role", default="reference")
    args, _ = parser.parse_known_args(argv)
    oracle = Oracle(args.backend)
    try:
        send(MSG_HELLO, {"pid": os.getpid(), "backend": "torch-" + oracle.device, "capabilities": []})
    except OSError as e:
        print("torch_oracle: cannot say hello on fd %d: %s" % (REPLY_FD, e), file=sys.stderr)
        return 3
    return serve(oracle)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
