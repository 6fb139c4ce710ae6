"""Optional features and their extras: a feature whose package is missing stops with one line naming the extra
(exit status 2), and pyproject.toml's extras are the table's."""

import sys
from pathlib import Path

import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.extras import EXTRAS, missing_extra, require

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def without(monkeypatch):
    """Make a module (and its parent package) unimportable for the test, as if it were not installed."""
    def hide(module: str):
        for name in [module, module.split(".")[0]]:
            monkeypatch.setitem(sys.modules, name, None)
    return hide


def _one_line(err: str, extra: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert f"install topoplan[{extra}]" in lines[0] and f"pip install 'topoplan[{extra}]'" in lines[0]


def test_pyproject_extras_are_the_table():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRAS) <= set(extras)
    deps = " ".join(project["dependencies"]).lower()
    assert not [m for m in ("dask", "otf2", "kahip", "pyarrow") if m in deps]   # none is needed by the core
    test = " ".join(extras["test"])
    assert all(e in test for e in EXTRAS)                         # make test installs every extra
    assert project["license"] == "MIT"


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_require_names_the_extra(without, extra):
    without(EXTRAS[extra][0])
    assert f"install topoplan[{extra}]" in missing_extra(extra)
    with pytest.raises(TopoplanError, match=rf"needs the optional package \w+: install topoplan\[{extra}\]"):
        require(extra, "this feature")


def test_otf2_trace_without_otf2(without, run_cli, tmp_path):
    without("otf2")
    (tmp_path / "traces.otf2").write_bytes(b"")
    code, out, err = run_cli("simulate", "-t", "paper003", "-T", tmp_path / "traces.otf2")
    assert code == 2 and out == ""
    _one_line(err, "otf2")
    assert "reading OTF2 traces" in err


def test_kahip_placement_without_kahip(without, run_cli):
    without("kahip")
    code, out, err = run_cli("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "kahip")
    assert code == 2 and out == ""
    _one_line(err, "kahip")


def test_sweep_and_parquet_without_their_extras(without):
    from topoplan.batch.sweep import make_client, table_format

    without("dask.distributed")
    with pytest.raises(TopoplanError, match=r"topoplan sweep \(it runs on Dask\) needs .*install topoplan\[dask\]"):
        make_client(workers=1, processes=False)
    without("pyarrow")
    with pytest.raises(TopoplanError, match=r"output r.parquet: Parquet needs .*install topoplan\[parquet\].*\.csv"):
        table_format("r.parquet")
