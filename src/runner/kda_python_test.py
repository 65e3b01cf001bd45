#!/usr/bin/env python3
"""Unit tests of kda_python.py's audit hook for JIT-compiling solutions (triton): the compilers it
names may be started, its JIT directory written and the shared objects built there loaded through
ctypes; every other program, file write and library is refused, and without a JIT directory none
at all. An audit hook cannot be removed, so each case runs
in a python3 of its own.

Run: python3 src/runner/kda_python_test.py [path/to/kda_python.py]   (ctest: kda_python_py)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

if len(sys.argv) > 1 and sys.argv[1].endswith(".py"):
    SCRIPT = sys.argv.pop(1)
else:
    SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kda_python.py")

# The child: installs the guard (with or without a JIT directory whose only tool is `true`), then
# tries one action and prints what became of it and what the guard reported.
CHILD = r"""
import ctypes, importlib.util, os, shutil, subprocess, sys, types  # ctypes before the guard, as torch imports it
script, jit_dir, action, target = sys.argv[1:5]  # load_system: argv[5] the symbol
reports = []
sys.modules["_kda_guard"] = types.SimpleNamespace(report=lambda c, w: reports.append(c))
spec = importlib.util.spec_from_file_location("kda_python", script)
kp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kp)
jit = {"dir": jit_dir, "tools": [os.path.realpath(shutil.which("true"))], "libraries": []} if jit_dir != "-" else None
roots = [sys.prefix, sys.base_prefix] + [p for p in sys.path if p]
kp._install_guard(roots, jit)
try:
    if action == "run":
        subprocess.run([target], check=True)
    elif action == "load":
        assert ctypes.CDLL(target).kda_answer() == 42
    elif action == "load_system":
        try:
            lib = ctypes.CDLL(target)
        except PermissionError:
            raise
        except OSError:  # the library is not on this machine: the guard let the load through
            print("absent", ",".join(reports))
            sys.exit(0)
        getattr(lib, sys.argv[5])
    else:
        with open(target, "w") as f:
            f.write("x")
    print("ok", ",".join(reports))
except PermissionError:
    print("refused", ",".join(reports))
"""


def attempt(jit_dir, action, target, *extra):
    out = subprocess.run([sys.executable, "-c", CHILD, SCRIPT, jit_dir or "-", action, target, *extra],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(out.stderr)
    return out.stdout.split()


class JitGuardTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kda_python_test_")
        self.jit = os.path.join(self.tmp, "jit")
        os.makedirs(self.jit)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_a_jit_tool_runs_by_name_on_path(self):
        self.assertEqual(attempt(self.jit, "run", "true"), ["ok"])

    def test_another_program_is_refused_as_a_process_spawn(self):
        self.assertEqual(attempt(self.jit, "run", shutil.which("false")), ["refused", "process_spawn"])

    def test_without_a_jit_directory_no_program_runs(self):
        self.assertEqual(attempt(None, "run", "true"), ["refused", "process_spawn"])

    def test_the_jit_directory_is_writable(self):
        target = os.path.join(self.jit, "cache", "k.cubin")
        os.makedirs(os.path.dirname(target))
        self.assertEqual(attempt(self.jit, "write", target), ["ok"])
        self.assertTrue(os.path.exists(target))

    def test_a_write_beside_the_jit_directory_is_refused(self):
        target = os.path.join(self.tmp, "jit-not", "x")  # a sibling sharing the prefix, not beneath
        os.makedirs(os.path.dirname(target))
        self.assertEqual(attempt(self.jit, "write", target), ["refused", "file_io"])
        self.assertFalse(os.path.exists(target))

    def test_dev_null_is_writable_for_the_jits_compilers(self):
        self.assertEqual(attempt(self.jit, "write", os.devnull), ["ok"])
        self.assertEqual(attempt(None, "write", os.devnull), ["refused", "file_io"])

    def test_without_a_jit_directory_it_is_not_writable(self):
        self.assertEqual(attempt(None, "write", os.path.join(self.jit, "x")), ["refused", "file_io"])

    def shared_object(self, directory):
        """A shared object defining kda_answer() == 42, built with gcc in `directory`."""
        if not shutil.which("gcc"):
            self.skipTest("no gcc to build a shared object")
        os.makedirs(directory, exist_ok=True)
        source = os.path.join(self.tmp, "answer.c")
        with open(source, "w") as f:
            f.write("int kda_answer(void) { return 42; }\n")
        target = os.path.join(directory, "answer.so")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", target, source], check=True, timeout=60)
        return target

    def test_a_library_the_jit_built_in_its_directory_loads_through_ctypes(self):
        self.assertEqual(attempt(self.jit, "load", self.shared_object(os.path.join(self.jit, "cache"))), ["ok"])

    def test_a_library_outside_the_jit_directory_is_refused_as_dynamic_loading(self):
        target = self.shared_object(os.path.join(self.tmp, "jit-not"))
        self.assertEqual(attempt(self.jit, "load", target), ["refused", "dynamic_loading"])

    def test_nvml_loads_by_name_for_its_queries_and_never_for_a_setter(self):
        got = attempt(self.jit, "load_system", "libnvidia-ml.so.1", "nvmlDeviceGetClockInfo")
        self.assertIn(got, (["ok"], ["absent"]))  # allowed; "absent" where the machine has no NVML
        if got == ["ok"]:
            self.assertEqual(attempt(self.jit, "load_system", "libnvidia-ml.so.1", "nvmlDeviceSetApplicationsClocks"),
                             ["refused", "dynamic_loading"])
        self.assertEqual(attempt(None, "load_system", "libnvidia-ml.so.1", "nvmlDeviceGetClockInfo"),
                         ["refused", "dynamic_loading"])
        self.assertEqual(attempt(self.jit, "load_system", "libc.so.6", "system"), ["refused", "dynamic_loading"])

    def test_without_a_jit_directory_no_library_loads_through_ctypes(self):
        target = self.shared_object(self.jit)
        self.assertEqual(attempt(None, "load", target), ["refused", "dynamic_loading"])


class JitEnvironmentTest(unittest.TestCase):
    def test_every_file_of_the_jit_stays_under_its_directory(self):
        import importlib.util

        spec = importlib.util.spec_from_file_location("kda_python", SCRIPT)
        kp = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(kp)
        with tempfile.TemporaryDirectory() as d:
            env = kp._jit_environment(d)
            for name in ("TRITON_CACHE_DIR", "TRITON_HOME", "HOME", "TMPDIR"):
                self.assertTrue(os.path.realpath(env[name]).startswith(os.path.realpath(d)), name)
            self.assertTrue(os.path.isdir(env["TMPDIR"]))
            tools = kp._jit_tools()
            self.assertTrue(all(os.path.isabs(t) for t in tools))
            if shutil.which("gcc"):
                self.assertIn(os.path.realpath(shutil.which("gcc")), tools)


if __name__ == "__main__":
    unittest.main()
