"""Kernels compiled at their first call (topoplan.core.kernels): a module of kernels imports without Numba; its
first compiled call makes every kernel of the module a Numba dispatcher; the interpreted module gives the same."""

import importlib
import subprocess
import sys

import numpy as np
import pytest

from topoplan.core import deadline
from topoplan.core.kernels import Kernel, interpreted

SOURCE = '''
import numpy as np
from topoplan.core.kernels import kernel

@kernel(cache=False)
def _weight(x):
    return 2.0 * x

@kernel(cache=False)
def total(a):
    s = 0.0
    for v in a:
        s += _weight(v)
    return s

def wrapped(a):
    return total(np.asarray(a, dtype=np.float64)) + 1.0
'''


@pytest.fixture
def kernels_module(tmp_path, monkeypatch):
    (tmp_path / "kernels_example.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("kernels_example", None)
    yield importlib.import_module("kernels_example")
    sys.modules.pop("kernels_example", None)


def test_the_first_compiled_call_makes_every_kernel_a_dispatcher(kernels_module):
    m = kernels_module
    k = m.total
    assert isinstance(k, Kernel) and isinstance(m._weight, Kernel)
    assert not deadline.kernel_loaded(k)
    assert m.wrapped([1, 2, 3]) == 13.0
    assert not isinstance(m.total, Kernel) and not isinstance(m._weight, Kernel)   # dispatchers in the module now
    assert hasattr(m._weight, "signatures") and deadline.kernel_loaded(k) and k.signatures


def test_the_interpreted_module_gives_the_same_without_compiling(kernels_module):
    m = kernels_module
    r = interpreted(m)
    assert r.wrapped([1, 2, 3]) == 13.0
    assert isinstance(m.total, Kernel) and m.total.dispatcher is None     # nothing compiled
    assert r.wrapped.__globals__["total"] is r.total and r.total.__globals__["_weight"] is r._weight
    a = np.arange(5.0)
    assert r.total(a) == m.total(a) == 20.0


def test_a_module_of_kernels_imports_without_numba():
    code = ("import sys, topoplan.problems.placement.refine, topoplan.problems.placement.metis; "
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
