"""The engine interface: what a flow engine must do for the simulator, and the engines by name.

An *engine* turns flows (a route of directed links, a start time and a size) into finish times under
one network model. The simulator's reference replay (:class:`topoplan.sim.reference.Replayer`) drives
every engine through this interface alone, so a new network model -- for instance one calibrated on a
real network -- is one class: declare :class:`Engine`, implement its methods, and register it under the
name a :class:`~topoplan.sim.simmodel.SimModel` gives (``@register("name")``; the name must also be
one of :data:`topoplan.sim.simmodel.MODELS`, which documents and the ``--model`` flag accept).

The contract (``tests/test_sim_engines.py`` runs every registered engine through it):

- ``add_flows(route_ptr, route_links, start_s, bytes_)`` takes routes in CSR form (flow ``i`` crosses
  ``route_links[route_ptr[i]:route_ptr[i + 1]]``) and returns the new flows' ids, consecutive from
  ``n_flows``; flows may be added while the simulation runs; bad input is a :class:`TopoplanError`.
- ``next_event_time()`` is the time of the next event (``inf`` when nothing is pending), never earlier
  than ``now``; ``advance_to(t)`` moves the clock to ``t`` without crossing a pending event (an error if
  it would); ``run_until_next_event()`` processes every event within :data:`REL_TOL` (relative) of the
  next event time and returns ``(time, ids of the flows that finished then, sorted)``; ``run()`` runs
  until every flow has finished.
- ``finish_s`` holds the finish time of every flow id (NaN while unfinished); ``link_bytes()`` the bytes
  every link has carried; ``timeline()`` a utilization series ``{"t_s", "dt_s", "util"}`` or None when
  the engine records none; ``n_events`` counts the events processed.
- A flow never finishes before its start plus the latencies of its links, and a flow alone in the
  network finishes at ``start + latencies + bytes / slowest bandwidth`` (its links' own model may add
  per-hop costs on top, as the papers' store-and-forward engine does).
- ``for_network(net, timeline_dt_s=None)`` builds the engine for a
  :class:`~topoplan.sim.network.Network` (its links and the choices of its ``sim_model``), and
  ``add_messages(net, route_ptr, route_links, start_s, bytes_)`` adds the flows of message segments
  routed on that network, with whatever the network adds to a route's latency for this engine (switch
  delays, store-and-forward of the first packet, cut-through relays).

Examples
--------
>>> from topoplan.sim import fifo, maxmin, paper   # the engines register themselves when imported
>>> from topoplan.sim.routes import LinkSet
>>> sorted(ENGINES)
['fifo', 'maxmin', 'paper']
>>> isinstance(ENGINES["paper"](LinkSet([1e9], [0.0], [True])), Engine)
True
"""

from __future__ import annotations

from typing import Callable, ClassVar, Protocol, runtime_checkable

import numpy as np

from topoplan.core.errors import TopoplanError

__all__ = ["REL_TOL", "Engine", "ENGINES", "register", "engine_class"]

REL_TOL = 1e-12
"""Events closer than this (relative to the event time) are one event."""

ENGINES: dict[str, type] = {}
"""The engines by the name a :class:`~topoplan.sim.simmodel.SimModel` gives (filled by :func:`register`)."""


@runtime_checkable
class Engine(Protocol):
    """A flow engine (see the module docstring for the contract every engine meets).

    Engines declare it (``class MyEngine(Engine)``) and implement every method; the reference replay
    calls nothing else.

    Examples
    --------
    >>> from topoplan.sim.maxmin import FlowEngine
    >>> from topoplan.sim.routes import LinkSet
    >>> eng = FlowEngine(LinkSet([1e9], [1e-6], [True]))
    >>> isinstance(eng, Engine), eng.add_flows([0, 1], [0], [0.0], [1e6]).tolist()
    (True, [0])
    >>> eng.run(); round(float(eng.finish_s[0]) * 1e3, 6)
    1.001
    """

    name: ClassVar[str]
    n_events: int

    @classmethod
    def for_network(cls, net, *, timeline_dt_s: float | None = None) -> "Engine":
        """The engine for a network's links and the choices of its ``sim_model``."""
        ...

    @property
    def n_flows(self) -> int:
        """Flows added so far."""
        ...

    @property
    def now(self) -> float:
        """The current time."""
        ...

    @property
    def finish_s(self) -> np.ndarray:
        """Finish time per flow id (NaN while unfinished)."""
        ...

    def add_flows(self, route_ptr, route_links, start_s, bytes_) -> np.ndarray:
        """Add flows; returns their ids (consecutive from ``n_flows``)."""
        ...

    def add_messages(self, net, route_ptr, route_links, start_s, bytes_) -> np.ndarray:
        """Add the flows of message segments routed on ``net`` (the route latency the network adds for this
        engine included); returns their ids."""
        ...

    def next_event_time(self) -> float:
        """Time of the next event (inf when nothing is pending)."""
        ...

    def advance_to(self, t: float) -> None:
        """Move the clock to ``t`` without crossing a pending event."""
        ...

    def run_until_next_event(self) -> tuple[float, np.ndarray]:
        """Process every event at the next event time; ``(time, sorted ids of the flows that finished)``."""
        ...

    def run(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Run until every added flow has finished."""
        ...

    def link_bytes(self) -> np.ndarray:
        """Bytes carried so far per link."""
        ...

    def timeline(self) -> dict | None:
        """Utilization series ``{"t_s", "dt_s", "util"}``, or None when the engine records none."""
        ...


def register(name: str):
    """Class decorator: register an :class:`Engine` under ``name`` (a :data:`topoplan.sim.simmodel.MODELS` entry).

    Parameters
    ----------
    name : str

    Returns
    -------
    callable
        The decorator; it returns the class unchanged.

    Raises
    ------
    TopoplanError
        When another class already has the name.

    Examples
    --------
    >>> from topoplan.sim.maxmin import FlowEngine
    >>> register("maxmin")(FlowEngine) is FlowEngine     # registering the same class again is harmless
    True
    """
    def deco(cls):
        if ENGINES.get(name, cls) is not cls:
            raise TopoplanError(f"engine {name!r} is already registered ({ENGINES[name].__name__})")
        cls.name = name
        ENGINES[name] = cls
        return cls

    return deco


def engine_class(name: str) -> type:
    """The engine registered as ``name`` (the engines of :mod:`topoplan.sim.maxmin` and :mod:`topoplan.sim.paper`
    are registered once those modules are imported, as the replay does).

    Parameters
    ----------
    name : str
        A :attr:`topoplan.sim.simmodel.SimModel.engine`.

    Returns
    -------
    type

    Raises
    ------
    TopoplanError
        Naming the registered engines, for an unknown name.

    Examples
    --------
    >>> from topoplan.sim import fifo, maxmin, paper
    >>> engine_class("paper").__name__
    'PaperEngine'
    >>> engine_class("fluid")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'model': no engine 'fluid'; registered: fifo, maxmin, paper
    """
    if name not in ENGINES:
        raise TopoplanError(f"field 'model': no engine {name!r}; registered: {', '.join(sorted(ENGINES))}")
    return ENGINES[name]
