"""Loaded by every worker process of a sweep's local Dask cluster (its ``preload``): the worker ignores SIGINT.

Ctrl-C at a terminal reaches every process of the foreground group. The sweep's own process stops the sweep,
writes the finished cells and closes the cluster; a worker that took the signal too printed a
KeyboardInterrupt traceback as it died.
"""

import signal

__all__ = ["dask_setup"]


def dask_setup(worker) -> None:
    """Dask's preload hook, run in the worker process as it starts: SIGINT is ignored from then on.

    Examples
    --------
    >>> import signal
    >>> old = signal.getsignal(signal.SIGINT)
    >>> dask_setup(None)
    >>> signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    True
    >>> _ = signal.signal(signal.SIGINT, old)
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
