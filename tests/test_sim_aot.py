"""The ahead-of-time event loop (``topoplan.sim._engine``): same results as the JIT, never stale, never fed wrong types.

``make install`` builds it (``topoplan.warmup``), so on CI it must be current; elsewhere a build
made before an edit of one of its sources (``topoplan.sim._sources.SOURCES``) is stale and the comparison is skipped (the stale
detection itself is always tested).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from topoplan.core.aot import arg_spec
from topoplan.problems.circuits import _sharing
from topoplan.sim import _engine
from topoplan.sim.maxmin import REL_TOL
from topoplan.sim.program import no_state
from topoplan.sim.routes import LinkSet, routes_to_csr


def current_or_skip(module, what: str) -> None:
    """Skip (fail on CI, where make install builds it) unless ``module``'s ahead-of-time build is current."""
    status = module.aot_status()
    if status != "current":
        if os.environ.get("CI"):
            pytest.fail(f"ahead-of-time {what} is {status} on CI: make install should have built it")
        pytest.skip(f"ahead-of-time {what} {status} (python -m {module.__name__} rebuilds it)")


def _aot_or_skip():
    current_or_skip(_engine, "engine")
    return _engine.EXTENSION.built()


def _random_flows(seed, n=400, hosts=12):
    rng = np.random.default_rng(seed)
    n_links = 2 * hosts + 2
    links = LinkSet(rng.choice([1e9, 2.5e9], n_links), np.full(n_links, 1e-6), np.ones(n_links, bool))
    routes = []
    for _ in range(n):
        a, b = rng.choice(hosts, 2, replace=False)
        mid = [2 * hosts] if a < hosts // 2 <= b else ([2 * hosts + 1] if b < hosts // 2 <= a else [])
        routes.append([2 * a, *mid, 2 * b + 1])
    ptr, rl = routes_to_csr(routes)
    start = rng.uniform(0, 0.01, n)
    size = np.floor(np.exp(rng.uniform(np.log(1e3), np.log(1e8), n)))
    return links, ptr, rl, start, size


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aot_equals_jit_bit_for_bit_on_flows(seed):
    aot, _ = _aot_or_skip()
    from topoplan.sim._loop import run_core as jit

    args = _engine.flow_args(*_random_flows(seed), REL_TOL)
    a, b = aot(*args), jit(*args)
    assert a[4] == b[4] > 0                                   # events
    np.testing.assert_array_equal(a[7], b[7])                 # every finish time, to the bit


def test_aot_equals_jit_on_a_replay():
    aot, spec = _aot_or_skip()
    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology
    from topoplan.traffic.sources import load_source
    from topoplan.sim._loop import run_core as jit
    from topoplan.sim.network import build_network
    from topoplan.sim.compiler import compile_program

    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    trace, _ = load_source("npb:kernel=cg,class=S,np=16,iters=2")
    net = build_network(topo)
    pg = compile_program(trace, net, sequential(16, topo))
    args = (pg["prog"], pg["route"], np.where(net.shared, net.bw_Bps, np.inf), pg["eager_B"], REL_TOL,
            np.zeros(0, np.int64), np.zeros(0), np.zeros(0), pg["stream"], 1e-4, 1000, np.zeros(0, np.int64),
            np.zeros(17, np.int64), np.zeros(0, np.int64), no_state())
    assert arg_spec(args) == spec          # the replay's arguments have the build's types
    a, b = aot(*args), jit(*args)
    np.testing.assert_array_equal(a[0], b[0])   # every rank's finish
    assert a[4] == b[4]
    assert a[9] > 1 and a[8].shape == b[8].shape   # a timeline sampled (1e-4 s intervals)
    np.testing.assert_array_equal(a[8], b[8])


def test_stale_build_is_not_used(monkeypatch):
    monkeypatch.setattr(_engine, "sources_sha256", lambda: "0" * 64)
    monkeypatch.setattr(_engine.EXTENSION, "_built", None)
    assert _engine.aot_status() in ("stale", "missing")
    assert _engine.EXTENSION.built() is None
    links, ptr, rl, start, size = _random_flows(3, n=50)
    finish, events, _ = _engine.run_flows(links, ptr, rl, start, size, REL_TOL)   # the JIT serves
    assert np.isfinite(finish).all() and events > 0


@pytest.mark.parametrize("change", ["float32", "strided", "readonly", "int32 scalar"])
def test_arguments_of_other_types_go_to_the_jit(change):
    """The build does not check types (a float32 array would crash it): run_core must route them away."""
    aot, spec = _aot_or_skip()
    links, ptr, rl, start, size = _random_flows(4, n=60)
    args = list(_engine.flow_args(links, ptr, rl, start, size, REL_TOL))
    want = aot(*args)[7]
    if change == "float32":
        args[7] = args[7].astype(np.float32)      # sizes (rounded: compared loosely below)
    elif change == "strided":
        args[6] = np.repeat(args[6], 2)[::2]
    elif change == "readonly":
        args[6] = args[6].copy()
        args[6].flags.writeable = False
    else:
        args[3] = np.int32(0)                      # eager threshold
    assert arg_spec(tuple(args)) != spec
    got = _engine.run_core(*args)[7]              # no crash: the JIT ran it
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_small_flow_run_does_not_import_numba(tmp_path):
    """What makes ``topoplan simulate --flows`` start fast: with a current build, no Numba at all."""
    _aot_or_skip()
    doc = {"hosts": ["A", "B"], "routes": [{"src": "A", "dst": "B", "links": [{"name": "L", "dir": "up"}]}],
           "links": [{"name": "L", "bandwidth_Bps": 1e9, "latency_s": 1e-6, "sharing": "shared"}],
           "flows": [{"id": "f", "src": "A", "dst": "B", "bytes": 1e9, "start_s": 0}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    code = ("import sys, json; from topoplan.sim.flowfile import run_scenario; "
            f"r = run_scenario({str(path)!r}); print(json.dumps([r['makespan_s'], 'numba' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    makespan, numba_loaded = json.loads(out.stdout)
    assert makespan == pytest.approx(1.000001, rel=1e-12)
    assert numba_loaded is False


@pytest.mark.parametrize("n", [0, 1])
def test_a_scenario_without_flows_has_the_builds_argument_types(n):
    """No flows made the routes' latencies int64 (bincount of nothing): the build refused them, and an empty
    ``simulate --flows`` scenario waited seconds for Numba's JIT (minutes when it compiled)."""
    links, ptr, rl, start, size = _random_flows(0, n=max(n, 1))
    if n == 0:
        ptr, rl, start, size = routes_to_csr([]) + (np.zeros(0), np.zeros(0))
    empty = _engine.flow_args(links, ptr, rl, start, size, REL_TOL)
    assert arg_spec(empty) == arg_spec(_engine.flow_args(*_random_flows(1), REL_TOL))


@pytest.mark.parametrize("module, what", [(_engine, "engine"), (_sharing, "traffic pass")])
def test_a_failed_build_says_so_and_leaves_the_build_as_it_was(module, what, monkeypatch):
    """No compiler (or a read-only tree): make install goes on, the JIT serves; nothing is half-replaced
    (the simulator's event loop and the forwarding tables' traffic pass: one build, topoplan.core.aot)."""
    pycc = pytest.importorskip("numba.pycc")

    def no_compiler(self):
        raise OSError("no C compiler found")

    before = module.aot_status()
    files = sorted(p.name for p in module.HERE.glob(f"{module.AOT_NAME}*"))
    monkeypatch.setattr(pycc.CC, "compile", no_compiler)
    msg = module.build()
    assert msg == f"ahead-of-time {what} not built (OSError: no C compiler found); the Numba JIT serves"
    assert module.aot_status() == before
    assert sorted(p.name for p in module.HERE.glob(f"{module.AOT_NAME}*")) == files
    assert not list(module.HERE.glob(".aot-*"))      # the temporary directory is gone


def test_the_makefile_rebuilds_from_the_sources_the_build_is_stamped_with():
    """`make install` rebuilds the extension when a file of SOURCES changes: its list is the build's."""
    makefile = (_engine.HERE.parents[1] / "Makefile").read_text()
    line = next(x for x in makefile.splitlines() if x.startswith("AOT_SOURCES :="))
    listed = line.split(",", 1)[1].rstrip(")").split()
    assert tuple(listed) == _engine.SOURCES
    assert all((_engine.HERE / name).is_file() for name in _engine.SOURCES)


def test_every_cached_kernel_of_the_loop_is_stamped_with_all_the_sources(monkeypatch):
    """Numba would reuse a cached loop after an edit of a kernel in another file (it stamps a function with its
    own file only): the compiled simulator's functions carry the stamp of every file of SOURCES instead, so an
    edit of any of them recompiles all of them."""
    pytest.importorskip("numba")
    from topoplan.sim import _flows, _jit, _loop, _sources

    compiled = [f for mod in (_flows, _loop) for f in vars(mod).values() if hasattr(f, "_cache")
                and getattr(f, "__module__", "") == mod.__name__]
    assert len(compiled) > 50
    for f in compiled:
        locator = f._cache._impl.locator
        assert isinstance(locator, _jit._SourcesLocator), f.__name__
        assert locator.get_source_stamp() == _engine.sources_sha256()
    # another file's edit changes the stamp of every function
    stamp = compiled[0]._cache._impl.locator.get_source_stamp()
    monkeypatch.setattr(_sources, "sources_sha256", lambda: "0" * 64)
    _jit._sources_stamp.cache_clear()
    assert compiled[0]._cache._impl.locator.get_source_stamp() != stamp
    _jit._sources_stamp.cache_clear()


def _twice(x):
    return 2.0 * x


def test_a_build_leaves_nothing_in_the_temporary_directory(tmp_path, monkeypatch):
    """pycc's check of the C compiler leaves directories with temp.c and temp.cxx in the system's temporary
    directory (numba/pycc/platform.py removes the file object, not its path): a build makes them in its own
    directory, which it removes."""
    import tempfile

    from numba.pycc import platform

    from topoplan.core.aot import build_extension

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    platform.external_compiler_works.cache_clear()    # the check runs once a process: here, in this build
    out = tmp_path / "ext"
    out.mkdir()
    name = build_extension("_leak_aot", {"twice": (_twice, (np.float64(1.0),))}, out, out / "x.json", {})
    assert name.startswith("_leak_aot") and (out / name).is_file()
    assert sorted(p.name for p in scratch.iterdir()) == []
    assert tempfile.tempdir == str(scratch)
