"""Optional features and the extras that install them (``pip install 'topoplan[dask]'``): one table, one message.

The planning core (topologies, traffic, the simulator, the planning methods and their solvers) installs
with topoplan itself. A few features need heavy packages that most users never touch; each is an extra of
the distribution (``pyproject.toml``, ``[project.optional-dependencies]``), and a feature whose extra is
missing stops with one line that names it (the CLI prints ``error: ...`` and exits with status 2):

========  ==================  ==================================================================
extra     module              feature
========  ==================  ==================================================================
dask      dask.distributed    ``topoplan sweep`` on a local or a real Dask cluster
otf2      otf2                reading OTF2 traces (Score-P archives)
kahip     kahip               the KaHIP placement peer (``place -m kahip``)
parquet   pyarrow             Parquet tables of sweeps (``-o results.parquet``)
emulate   pyroute2            the emulated cluster (``topoplan emulate``: namespaces, links, queues)
========  ==================  ==================================================================

``make test`` installs every extra (the ``test`` extra names them all).
"""

from __future__ import annotations

import importlib
import importlib.util

from topoplan.core.errors import TopoplanError

__all__ = ["EXTRAS", "extra_message", "missing_extra", "require"]

# extra -> (module it provides, the feature that needs it)
EXTRAS = {
    "dask": ("dask.distributed", "sweeps on Dask"),
    "otf2": ("otf2", "reading OTF2 traces"),
    "kahip": ("kahip", "the KaHIP placement peer"),
    "parquet": ("pyarrow", "Parquet tables"),
    "emulate": ("pyroute2", "the emulator"),
}


def extra_message(extra: str, feature: str | None = None) -> str:
    """The one-line reason a feature stops without ``extra`` (what :func:`missing_extra` returns when it is missing).

    Examples
    --------
    >>> extra_message("parquet", "output t.parquet: Parquet")
    "output t.parquet: Parquet needs the optional package pyarrow: install topoplan[parquet] (pip install 'topoplan[parquet]')"
    """
    module, what = EXTRAS[extra]
    return (f"{feature or what} needs the optional package {module.split('.')[0]}: install topoplan[{extra}] "
            f"(pip install 'topoplan[{extra}]')")


def missing_extra(extra: str, feature: str | None = None) -> str | None:
    """None when the module of ``extra`` is importable, else the one-line reason naming the extra.

    Parameters
    ----------
    extra : str
        A key of :data:`EXTRAS`.
    feature : str, optional
        What needs it, in the message (default: the table's feature).

    Returns
    -------
    str or None

    Examples
    --------
    >>> sorted(EXTRAS)
    ['dask', 'emulate', 'kahip', 'otf2', 'parquet']
    >>> import importlib.util
    >>> missing_extra("parquet") is None or "topoplan[parquet]" in missing_extra("parquet")
    True
    """
    module = EXTRAS[extra][0]
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:   # the parent package of a dotted module is missing
        found = False
    return None if found else extra_message(extra, feature)


def require(extra: str, feature: str | None = None):
    """Import and return the module of ``extra``; a missing one is a :class:`TopoplanError` naming the extra.

    Parameters
    ----------
    extra : str
        A key of :data:`EXTRAS`.
    feature : str, optional
        What needs it, in the message (e.g. ``"trace.otf2: reading OTF2"``).

    Returns
    -------
    module

    Raises
    ------
    TopoplanError
        ``<feature> needs the optional package <pkg>: install topoplan[<extra>] (pip install ...)``.

    Examples
    --------
    >>> EXTRAS["nothing"] = ("no_such_module_xyz", "a feature nobody has")
    >>> require("nothing")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: a feature nobody has needs the optional package no_such_module_xyz: install topoplan[nothing] (pip install 'topoplan[nothing]')
    >>> del EXTRAS["nothing"]
    """
    module = EXTRAS[extra][0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        if getattr(exc, "name", None) not in (top, module):   # installed, but broken: say so
            raise TopoplanError(f"{feature or EXTRAS[extra][1]}: {module} does not import ({exc}); reinstall "
                                f"topoplan[{extra}]") from None
        raise TopoplanError(extra_message(extra, feature)) from None
