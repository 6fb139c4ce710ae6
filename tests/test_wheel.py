"""The distribution as a user gets it: ``python -m build`` makes a wheel that installs only ``topoplan`` (with its
package data: presets, the PMPI recorder's and the emulator's C sources), with an SPDX licence and no
setuptools warning, and runs ``topoplan demo`` from a fresh venv outside the checkout.

The venv gets the wheel alone (``--no-deps``) and reaches the project venv's packages through a path entry (no
download; the checkout itself is not on its path). The demo runs with ``NUMBA_DISABLE_JIT=1`` on a tiny job:
a fresh installation compiles the simulator's kernels on first use (``python -m topoplan.warmup``), which is
minutes of a test's time and says nothing about the packaging.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytest.importorskip("build", reason="the 'build' package is missing (pip install build; the test extra has it)")


def _sources(dest: Path) -> None:
    """The files a release is built from (git's tracked and new files; no caches, venv or build products)."""
    try:
        names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not available to list the checkout's files")
    for name in names:
        if name.startswith(("topoplan/", "pyproject.toml", "README.md", "LICENSE")) and (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """(wheel path, the build's output): built from a copy of the sources, without isolation when this venv's
    setuptools is recent enough (the test extra pins it), else in build's own environment."""
    src = tmp_path_factory.mktemp("src")
    _sources(src)
    out = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out)]
    try:
        import setuptools

        if int(setuptools.__version__.split(".")[0]) >= 77:
            cmd.append("--no-isolation")
    except ImportError:
        pass
    run = subprocess.run(cmd, cwd=src, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (whl,) = out.glob("topoplan-*.whl")
    return whl, run.stdout + run.stderr


def test_the_wheel_holds_topoplan_and_its_data_only(wheel):
    whl, log = wheel
    names = zipfile.ZipFile(whl).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"topoplan"}
    # every file of the package that is not Python source ships (presets, the C sources of the tracer and
    # the emulator's replayer), checked against the checkout's tracked files
    tracked = subprocess.run(["git", "ls-files", "topoplan"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    data = [n for n in tracked if not n.endswith(".py")]
    assert "topoplan/traffic/pmpi/topoplan_pmpi.c" in data and "topoplan/instances/paper003.yaml" in data
    assert set(data) <= set(names), sorted(set(data) - set(names))
    assert not [n for n in names if "__pycache__" in n or n.endswith((".so", ".nbi", ".nbc"))]
    meta = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta
    assert "Provides-Extra: dask" in meta and "Provides-Extra: otf2" in meta and "Provides-Extra: kahip" in meta
    assert "Requires-Dist: dask" not in meta.split("Provides-Extra")[0]     # Dask is an extra, not a dependency
    assert "Warning" not in log and "deprecated" not in log.lower()


def test_the_wheel_installs_and_runs_the_demo_outside_the_checkout(wheel, tmp_path):
    whl, _ = wheel
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    run = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                          "--quiet", str(whl)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    # the project venv's packages as a plain path entry, after the venv's own (its .pth files, among them the
    # editable install of the checkout, are not processed)
    (site / "zz_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", NUMBA_DISABLE_JIT="1")
    where = subprocess.run([str(py), "-c", "import topoplan, importlib.resources as r; print(topoplan.__file__); "
                            "print(r.files('topoplan').joinpath('traffic/pmpi/topoplan_pmpi.c').is_file())"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr[-2000:]
    location, has_c = where.stdout.split()
    assert Path(location).is_relative_to(venv) and has_c == "True"
    demo = subprocess.run([str(venv / "bin" / "topoplan"), "demo", "-T", "ring:np=16,bytes=1MB", "--time-limit", "5"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "EPS only" in demo.stdout and "ilp circuits" in demo.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["venv"]      # the demo writes nothing
