"""Numba kernels that a module defines without importing Numba: compiled at their first compiled call, or run
as their Python originals.

Importing Numba takes 0.3-0.6 CPU seconds and loading a module's compiled kernels from Numba's cache about as
much again, while a small problem runs its kernels interpreted in a tenth of that. A module decorates its
kernels with :func:`kernel` instead of ``numba.njit``; the module then imports without Numba. The first call
of a kernel compiles them (Numba's JIT, or its cache on disk): every kernel of the module becomes its Numba
dispatcher in the module's namespace at once, so that compiled kernels call compiled kernels.
:func:`interpreted` gives the same module with every kernel as its Python original, for a caller that
predicts the interpreter faster than loading the compiled code. Both give the same results.
"""

from __future__ import annotations

import functools
import sys
import types

__all__ = ["Kernel", "kernel", "interpreted"]


class Kernel:
    """A function compiled with ``numba.njit(**options)`` at its first call (see the module).

    Parameters
    ----------
    py_func : function
        The Python original, defined at the top level of its module.
    options : dict
        ``numba.njit``'s options (``cache=True``, ...).

    Examples
    --------
    >>> @kernel(cache=False)
    ... def twice(x):
    ...     return 2 * x
    >>> twice.py_func(3), twice.signatures        # not compiled: Numba not even imported for it
    (6, [])
    """

    def __init__(self, py_func, options: dict):
        self.py_func = py_func
        self.options = dict(options)
        self.dispatcher = None
        functools.update_wrapper(self, py_func)

    def __call__(self, *args):
        return self.compiled()(*args)

    def compiled(self):
        """Numba's dispatcher of this kernel (every kernel of the module made one, in its namespace)."""
        if self.dispatcher is None:
            _compile_module(sys.modules[self.py_func.__module__])
        return self.dispatcher

    @property
    def signatures(self) -> list:
        """The compiled signatures: none before the first compiled call (what ``deadline.kernel_loaded`` reads)."""
        return [] if self.dispatcher is None else self.dispatcher.signatures

    @property
    def _cache(self):
        """Numba's cache of the dispatcher (what ``deadline.kernel_ready`` reads): makes the dispatcher, no code."""
        return self.compiled()._cache

    def __repr__(self) -> str:
        return f"<kernel {self.py_func.__module__}.{self.py_func.__qualname__}>"


def kernel(**options):
    """Decorator: the function as a :class:`Kernel` compiled with ``numba.njit(**options)`` when first called.

    Examples
    --------
    >>> k = kernel(cache=True)(lambda x: x)
    >>> isinstance(k, Kernel), k.options
    (True, {'cache': True})
    """
    def wrap(func):
        return Kernel(func, options)
    return wrap


def _compile_module(module) -> None:
    """Every :class:`Kernel` of ``module`` becomes its Numba dispatcher, in the module's namespace too (before any
    is compiled, so that a kernel calling another finds a dispatcher)."""
    from numba import njit   # imported here: the point of the module (0.3-0.6 CPU s)

    ns = vars(module)
    for name, obj in list(ns.items()):
        if isinstance(obj, Kernel) and obj.dispatcher is None:
            obj.dispatcher = njit(**obj.options)(obj.py_func)
    for name, obj in list(ns.items()):
        if isinstance(obj, Kernel):
            ns[name] = obj.dispatcher


_INTERPRETED: dict = {}


def interpreted(module) -> types.SimpleNamespace:
    """``module``'s functions run by the interpreter: its kernels as their Python originals, and its other
    functions bound to a namespace in which they call those. Made once per module and process.

    Parameters
    ----------
    module : module
        A module whose kernels are :class:`Kernel` (or Numba dispatchers, once compiled).

    Returns
    -------
    types.SimpleNamespace
        Every name of the module; functions defined in it read the namespace's names.

    Examples
    --------
    >>> import types
    >>> m = types.ModuleType("example_kernels")
    >>> exec("from topoplan.core.kernels import kernel\\n"
    ...      "@kernel(cache=False)\\ndef inc(x):\\n    return x + 1\\n"
    ...      "def inc_twice(x):\\n    return inc(inc(x))\\n", vars(m))
    >>> r = interpreted(m)
    >>> r.inc_twice(1), r.inc is m.inc.py_func, r.inc.__globals__ is r.inc_twice.__globals__
    (3, False, True)
    """
    got = _INTERPRETED.get(module.__name__)
    if got is None:
        ns = dict(vars(module))
        for name, obj in vars(module).items():
            py = obj.py_func if isinstance(obj, Kernel) else getattr(obj, "py_func", None)
            if not isinstance(py, types.FunctionType):
                py = obj if isinstance(obj, types.FunctionType) else None
            if py is not None and py.__module__ == module.__name__:
                f = types.FunctionType(py.__code__, ns, name, py.__defaults__, py.__closure__)
                f.__kwdefaults__, f.__doc__ = py.__kwdefaults__, py.__doc__
                ns[name] = f
        got = _INTERPRETED[module.__name__] = types.SimpleNamespace(**ns)
    return got
