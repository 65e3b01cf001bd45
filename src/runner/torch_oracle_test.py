#!/usr/bin/env python3
"""Unit tests of torch_oracle.py's torch-free parts (frames, slot checks, output collection).

Run: python3 src/runner/torch_oracle_test.py [path/to/torch_oracle.py]   (ctest: torch_oracle_py)
"""
import importlib.util
import os
import struct
import sys
import unittest

if len(sys.argv) > 1 and sys.argv[1].endswith(".py"):
    SCRIPT = sys.argv.pop(1)
else:
    SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_oracle.py")
spec = importlib.util.spec_from_file_location("torch_oracle", SCRIPT)
oracle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(oracle)


def slot(**over):
    j = {"name": "x", "dtype": "float32", "shape": [4, 8], "scalar": False, "offset": 4096, "nbytes": 128}
    j.update(over)
    return j


class FrameTest(unittest.TestCase):
    def test_round_trip_and_eof(self):
        r, w = os.pipe()
        try:
            oracle.write_frame(w, 4, b'{"seq": 1}')
            oracle.write_frame(w, 5, b"")
            os.close(w)
            w = -1
            self.assertEqual(oracle.read_frame(r), (4, b'{"seq": 1}'))
            self.assertEqual(oracle.read_frame(r), (5, b""))
            self.assertIsNone(oracle.read_frame(r))  # closed between frames: a clean end
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)

    def test_header_is_the_cpp_format(self):
        # u32 magic "KDAF", u32 type, u64 length, little-endian (src/proc/frame.h).
        r, w = os.pipe()
        try:
            oracle.write_frame(w, 6, b"{}")
            self.assertEqual(os.read(r, 18), b"KDAF" + struct.pack("<IQ", 6, 2) + b"{}")
        finally:
            os.close(r)
            os.close(w)

    def test_bad_magic_and_cut_frame_are_errors(self):
        r, w = os.pipe()
        os.write(w, b"XXXX" + struct.pack("<IQ", 1, 0))
        os.close(w)
        with self.assertRaises(ValueError):
            oracle.read_frame(r)
        os.close(r)
        r, w = os.pipe()
        os.write(w, b"KDAF" + struct.pack("<IQ", 1, 10) + b"abc")
        os.close(w)
        with self.assertRaises(EOFError):
            oracle.read_frame(r)
        os.close(r)


class SlotTest(unittest.TestCase):
    def test_valid(self):
        s = oracle.Slot(slot(), 8192 + 4096)
        self.assertEqual((s.name, s.dtype, s.shape, s.offset, s.nbytes), ("x", "float32", [4, 8], 4096, 128))
        self.assertEqual(oracle.Slot(slot(dtype="bfloat16", nbytes=64), 12288).nbytes, 64)
        self.assertEqual(oracle.Slot(slot(shape=[], scalar=True, nbytes=4), 12288).shape, [])

    def test_refusals(self):
        cases = [
            (slot(dtype="float4_e2m1"), "does not support"),
            (slot(nbytes=100), "bytes for shape"),
            (slot(offset=100), "outside the arena"),
            (slot(offset=8192), "outside the arena"),  # the trailing guard band would pass the end
            (slot(shape=[-1, 8]), "negative"),
            ({"name": "x"}, "bad slot"),
        ]
        for j, message in cases:
            with self.assertRaises(oracle.OracleError, msg=str(j)) as cm:
                oracle.Slot(j, 12288)
            self.assertIn(message, str(cm.exception))

    def test_every_dtype_name_has_a_size(self):
        for name, (attr, size) in oracle.DTYPES.items():
            self.assertIn(size, (1, 2, 4, 8), name)


class CollectOutputsTest(unittest.TestCase):
    def setUp(self):
        self.o = oracle.Oracle("host")
        self.o.def_outputs = ["y", "z"]

    def test_tuple_list_and_dict(self):
        self.assertEqual(self.o.collect_outputs((1, 2)), [1, 2])
        self.assertEqual(self.o.collect_outputs([1, 2]), [1, 2])
        self.assertEqual(self.o.collect_outputs({"z": 2, "y": 1}), [1, 2])

    def test_wrong_counts(self):
        with self.assertRaises(oracle.OracleError) as cm:
            self.o.collect_outputs(1)
        self.assertIn("returned 1 value(s); the definition has 2 output(s)", str(cm.exception))
        with self.assertRaises(oracle.OracleError):
            self.o.collect_outputs({"y": 1})

    def test_single_output(self):
        self.o.def_outputs = ["y"]
        self.assertEqual(self.o.collect_outputs(7), [7])
        self.assertEqual(self.o.collect_outputs((7,)), [7])


class RefusalTest(unittest.TestCase):
    def test_no_load_without_a_definition_or_with_a_sandbox(self):
        o = oracle.Oracle("host")
        with self.assertRaises(oracle.OracleError) as cm:
            o.load({"sandbox": True, "definition": "/x.json"})
        self.assertIn("cannot sandbox itself", str(cm.exception))
        with self.assertRaises(oracle.OracleError) as cm:
            o.load({})
        self.assertIn("no \"definition\"", str(cm.exception))
        with self.assertRaises(oracle.OracleError) as cm:
            o.call({"seq": 1})
        self.assertIn("before a successful load", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
