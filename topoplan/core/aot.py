"""Numba functions built ahead of time: extension modules that import in a millisecond, without Numba.

A Numba function cached on disk still costs a process its import of Numba and the set-up of Numba's
compiler before the first call: 0.6-1.2 s of CPU, however small the work. ``make install`` therefore
compiles the few functions that large planning and simulation runs call every time into extension
modules (Numba's ``pycc``), each with a stamp file: the SHA-256 of the sources it was built from and the
argument types it was built for. A caller runs the extension only while the stamp matches its sources and
the arguments have those types (:func:`arg_spec`), and Numba's JIT otherwise, so a stale build never
runs and a wrong dtype never reaches code that does not check it. Both are compiled from the same code
by the same compiler: their results are identical to the bit.

Each build is an :class:`Extension`: its stamp, its status, the build itself and the choice between it and
the JIT. Users: the simulator's event loop (:mod:`topoplan.sim._engine`) and the forwarding tables'
traffic pass (:mod:`topoplan.problems.circuits._sharing`).

"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

__all__ = ["Extension", "arg_spec", "files_sha256", "stamp_state", "build_extension"]


def arg_spec(x):
    """The argument types as plain data, as Numba would type them (None: a kind a build never takes).

    Arrays must be C-contiguous, aligned and writeable (what a build's signature assumes); Python ints and
    floats are typed as Numba types them (int64, float64).

    Examples
    --------
    >>> arg_spec((np.zeros(3), 2, 1.5, True, np.zeros((2, 2), dtype=np.int64)[:, 0]))   # a strided view: None
    [['array', '<f8', 1], '<i8', '<f8', 'bool', None]
    """
    if isinstance(x, tuple):
        return [arg_spec(v) for v in x]
    if isinstance(x, np.ndarray):
        if not (x.flags.c_contiguous and x.flags.aligned and x.flags.writeable):
            return None
        return ["array", x.dtype.str, x.ndim]
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, int):
        return "<i8"
    if isinstance(x, float):
        return "<f8"
    if isinstance(x, np.generic):
        return x.dtype.str
    return None


def files_sha256(paths) -> str:
    """SHA-256 over the files' names and bytes, in the order given.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.TemporaryDirectory()
    >>> a, b = Path(d.name) / "a.py", Path(d.name) / "b.py"
    >>> _ = a.write_text("x = 1"), b.write_text("y = 2")
    >>> files_sha256([a, b]) == files_sha256([a, b]) != files_sha256([b, a])
    True
    >>> len(files_sha256([a]))
    64
    >>> d.cleanup()
    """
    h = hashlib.sha256()
    for p in paths:
        p = Path(p)
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def stamp_state(stamp_path: Path, sha: str, module: str) -> tuple[str, dict | None]:
    """``("current", stamp)`` when the build's stamp names ``sha`` and ``module`` imports, else ``("missing" |
    "stale" | "broken", None)`` (no stamp; built from other sources; an extension for another Python or NumPy).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.TemporaryDirectory()
    >>> stamp = Path(d.name) / "x.json"
    >>> stamp_state(stamp, "ab", "json")
    ('missing', None)
    >>> _ = stamp.write_text('{"sources_sha256": "ab"}')
    >>> stamp_state(stamp, "cd", "json")
    ('stale', None)
    >>> stamp_state(stamp, "ab", "json")                       # any importable module stands for the extension
    ('current', {'sources_sha256': 'ab'})
    >>> stamp_state(stamp, "ab", "topoplan.no_such_extension")
    ('broken', None)
    >>> d.cleanup()
    """
    try:
        stamp = json.loads(Path(stamp_path).read_text())
    except (OSError, ValueError):
        return "missing", None
    if stamp.get("sources_sha256") != sha:
        return "stale", None
    try:
        importlib.import_module(module)
    except Exception:
        return "broken", None
    return "current", stamp


def build_extension(name: str, exports: dict, directory: Path, stamp_path: Path, stamp: dict) -> str | None:
    """Compile ``exports`` (``{exported name: (Python function, example arguments)}``) with Numba's ``pycc``
    into the extension ``name`` in ``directory`` and write ``stamp`` (plus each export's :func:`arg_spec`) to
    ``stamp_path``; returns the extension's file name.

    Everything is written to a temporary directory first and moved into place together, the stamp last, so a
    failed build (no C compiler, a read-only tree) leaves the previous build as it was. Raises what ``pycc``
    raises; ``RuntimeError`` when it wrote no single extension.

    Examples
    --------
    A build runs a C compiler for seconds (``make install`` makes topoplan's two); one that cannot write its
    directory fails before compiling and leaves nothing:

    >>> import tempfile
    >>> d = tempfile.TemporaryDirectory()
    >>> gone = Path(d.name) / "gone"
    >>> build_extension("_x_aot", {}, gone, gone / "x.json", {})
    Traceback (most recent call last):
    ...
    FileNotFoundError: [Errno 2] No such file or directory: '...gone/.aot-...'
    >>> list(Path(d.name).iterdir())
    []
    >>> d.cleanup()
    """
    import warnings

    import numba

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # pycc is pending deprecation in Numba, with no replacement yet
        from numba.pycc import CC

    directory = Path(directory)
    # the argument types alone: pycc infers the return type (the functions called are compiled through their
    # dispatchers, which cache them for the JIT too)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".aot-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # pycc's check of the C compiler leaves two directories (temp.c, temp.cxx and their objects) in the system's
        # temporary directory at every build (numba/pycc/platform.py removes the file object, not its path): they
        # are made in this build's directory instead, which is removed (the build runs alone in its process)
        saved, tempfile.tempdir = tempfile.tempdir, tmp
        try:
            cc = CC(name)
            cc.output_dir = tmp
            cc.verbose = False
            for export, (func, args) in exports.items():
                cc.export(export, tuple(numba.typeof(a) for a in args))(func)
            cc.compile()
        finally:
            tempfile.tempdir = saved
        built = [p for p in Path(tmp).iterdir() if p.name.startswith(name) and p.suffix in (".so", ".pyd")]
        if len(built) != 1:
            raise RuntimeError(f"pycc wrote {[p.name for p in Path(tmp).iterdir()]}")
        for old in directory.glob(f"{name}*"):
            old.unlink()
        shutil.move(str(built[0]), directory / built[0].name)
        doc = dict(stamp, numba=numba.__version__, args={k: arg_spec(tuple(a)) for k, (_, a) in exports.items()})
        staged = Path(tmp) / "stamp.json"
        staged.write_text(json.dumps(doc) + "\n")
        os.replace(staged, stamp_path)
    return built[0].name


class Extension:
    """One Numba function built ahead of time into an extension module, and the choice its callers make
    between the build and Numba's JIT.

    Parameters
    ----------
    package : str
        The package the extension is a module of (``topoplan.sim``).
    directory : path
        Where it and its stamp are written (the package's directory).
    name : str
        The extension module's name (``_engine_aot``); its stamp is ``<name>.json`` beside it.
    export : str
        The function it exports.
    sources_sha256 : callable
        ``() -> str``: the SHA-256 of the sources it is compiled from now (:func:`files_sha256`); a build
        stamped with another is stale and never runs.
    what : str
        What it is, for the build's status line (``engine``).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.TemporaryDirectory()
    >>> ext = Extension("topoplan", d.name, "_x_aot", "f", lambda: "ab", "example")
    >>> ext.status(), ext.built(), ext.takes((1, 2.0))       # not built: the callers run the JIT
    ('missing', None, None)
    >>> d.cleanup()
    """

    def __init__(self, package: str, directory, name: str, export: str, sources_sha256: Callable[[], str],
                 what: str):
        self.package, self.directory, self.name, self.export, self.what = (package, Path(directory), name, export,
                                                                           what)
        self.stamp = self.directory / f"{name}.json"
        self.sources_sha256 = sources_sha256
        self._built = None   # (function, argument types) of the current build, False when none; None: not read

    @property
    def module(self) -> str:
        """The extension's module name."""
        return f"{self.package}.{self.name}"

    def state(self) -> tuple[str, dict | None]:
        """The build's status (see :meth:`status`) and, when current, its stamp (:func:`stamp_state`)."""
        return stamp_state(self.stamp, self.sources_sha256(), self.module)

    def status(self) -> str:
        """``"current"``, ``"stale"`` (built from other sources), ``"missing"`` or ``"broken"`` (does not
        import)."""
        return self.state()[0]

    def built(self):
        """``(function, argument types)`` of the current build, or None; read once (:meth:`forget` reads it
        again)."""
        if self._built is None:
            status, stamp = self.state()
            args = (stamp or {}).get("args")
            ok = status == "current" and isinstance(args, dict) and self.export in args
            self._built = (getattr(sys.modules[self.module], self.export), args[self.export]) if ok else False
        return self._built or None

    def forget(self) -> None:
        """Read the build again at the next call (after a build, or a test's change of the sources)."""
        self._built = None

    def takes(self, args: tuple):
        """The build's function when it is current and ``args`` have its types (:func:`arg_spec`), else None:
        the caller runs the JIT, which specializes for any types (the build checks none: a wrong dtype would
        crash the process)."""
        b = self.built()
        return b[0] if b is not None and arg_spec(args) == b[1] else None

    def build(self, function: Callable, args: tuple) -> str:
        """Compile ``function()`` (the Numba dispatcher's Python function, imported only here) for the types of
        ``args`` (:func:`build_extension`); returns a status line. A failure (no C compiler, a read-only tree,
        no ``pycc``) leaves the previous build as it was and says that the JIT serves."""
        try:
            import numba  # noqa: F401  (the build needs it; the callers do not)
            from numba.pycc import CC  # noqa: F401
        except ImportError as e:   # pragma: no cover - pycc left Numba in a later release
            return f"ahead-of-time {self.what} not built ({e}); the Numba JIT serves"
        try:   # no C compiler, a read-only package directory...: the JIT serves, only start-up is slower
            name = build_extension(self.name, {self.export: (function(), args)}, self.directory, self.stamp,
                                   {"sources_sha256": self.sources_sha256()})
        except Exception as e:
            return f"ahead-of-time {self.what} not built ({type(e).__name__}: {e}); the Numba JIT serves"
        self.forget()
        return f"ahead-of-time {self.what} built: {name} ({self.status()})"
