"""The simulator's modelling choices, as one named, recorded object.

A simulated time means something only together with the model that produced
it. :class:`SimModel` holds every choice that changes a simulated time and
is recorded (``to_dict``) in every result and plan that a simulation scored.

``model`` (the attribute :attr:`SimModel.engine`: the engine that simulates)
    ``"maxmin"`` (default): flows share links max-min fairly (progressive
    filling, re-solved at every start and end; checked against SimGrid);
    EPS switches pipeline packets (store-and-forward of the first MTU only).
    ``"paper"``: the papers' own simulator (000 §4.1, 003 §4.1.4, Table 3):
    every link costs ``alpha + n / beta``, every switch and relay stores and
    forwards whole messages, and contention postpones a message until the
    earlier ones on the same link (or device) are done, first come, first
    served (:mod:`topoplan.sim.paper`). Use it to reproduce the papers' figures.
    ``"fifo"``: first come, first served flows (:mod:`topoplan.sim.fifo`): a
    node sends its messages of up to ``fifo_in_turn_max_B`` one after another,
    and every link serves those that began earlier first (ties share by
    max-min), before larger messages, which share what is left by max-min;
    latencies as ``"maxmin"``. What the emulated cluster measured where
    messages meet; the reference replay only (its rates compiled), for traces
    of up to a million messages.

``relay``
    How an OCS node forwards another node's large message.
    ``"pipelined"`` (default): the relay forwards each chunk of
    ``relay_chunk_B`` bytes as it arrives, so a relayed message is one
    transfer over the concatenated route (source -> relay -> circuit ->
    relay -> destination) that pays one chunk's serialization per relay, as
    a switch pays one MTU. This is what an MPI library does when it forwards
    a large message with a pipelined rendezvous protocol. ``"store-and-
    forward"``: the relay receives the whole message before it sends it on
    (the papers' implementation, 000 §4.1: "it sends the message after
    complete reception"; 003 §4.1.4).

``relay_chunk_B``
    64 KiB by default: the fragment size of Open MPI's pipelined send
    protocol over InfiniBand and Portals (``btl_max_send_size`` = 64 KiB in
    the openib and portals4 BTLs) and this project's eager/rendezvous
    threshold, so every relayed (large) message is at least one chunk.

``fifo_in_turn_max_B``
    Only for ``model="fifo"``: the largest message that goes first come,
    first served. 64 KiB by default: Open MPI's eager limit over TCP
    (``btl_tcp_eager_limit``), whose messages the library writes to the
    socket whole, so a sender's small messages leave one after another;
    a larger message goes in fragments that interleave with other
    messages' (measured on the emulated cluster: three 32 KiB messages
    posted at once arrive one message time apart, three 256 KiB ones
    together). A size above every message's (``1TiB``) has every message
    in turn.

``paper_contention``
    Only for ``model="paper"``: ``"link"`` (default; 000 §4.1 "we take
    contention on each link into account") queues messages per directed
    link; ``"device"`` queues them per receiving device (003 §4.1.4 adds the
    congestion term ``f(x, t)`` at every device x, switch or node, that
    receives the message), so all links into one switch or node share one
    queue.

``paper_tie_seed``
    Only for ``model="paper"``: the order in which messages that reach one
    queue at exactly the same time are served. 0 (default): the order they
    were injected (the engine's flow ids); any other value: a random order
    drawn from that seed (:class:`topoplan.sim.paper.PaperEngine`). The
    papers do not say how they order simultaneous messages, and the order
    moves a bulk-synchronous run's time by several per cent: run a claim
    under a few seeds to see whether it depends on it. Recorded in
    :meth:`SimModel.to_dict` when it is not 0.

Examples
--------
>>> m = SimModel()
>>> m.to_dict()
{'model': 'maxmin', 'relay': 'pipelined', 'relay_chunk_B': 65536.0}
>>> SimModel.from_options(model="paper", relay="store-and-forward").label()
'paper, store-and-forward relays, link contention'
>>> SimModel(relay="cut-through")
Traceback (most recent call last):
...
topoplan.core.errors.TopoplanError: field 'relay': choose one of pipelined, store-and-forward, got 'cut-through'
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from topoplan.core.errors import TopoplanError

__all__ = ["MODELS", "RELAYS", "CONTENTIONS", "DEFAULT_RELAY_CHUNK_B", "DEFAULT_FIFO_IN_TURN_MAX_B", "SimModel"]

MODELS = ("maxmin", "paper", "fifo")
RELAYS = ("pipelined", "store-and-forward")
CONTENTIONS = ("link", "device")
DEFAULT_RELAY_CHUNK_B = 65536.0
DEFAULT_FIFO_IN_TURN_MAX_B = 65536.0


@dataclass(frozen=True)
class SimModel:
    """The network model of a simulation (see the module docstring for each field and its default).

    Documents (:meth:`to_dict`, :meth:`from_options`, :meth:`coerce`) name the engine ``model``, as the
    command line's ``--model`` does; the attribute is ``engine``.

    Parameters
    ----------
    engine : {"maxmin", "paper", "fifo"}, optional
        Max-min fair sharing, the papers' store-and-forward simulator, or first come, first served flows (the
        ``model`` of documents).
    relay : {"pipelined", "store-and-forward"}, optional
        How an OCS node forwards another node's large message.
    relay_chunk_B : float, optional
        Chunk of a pipelined relay, bytes.
    fifo_in_turn_max_B : float, optional
        Only with ``model="fifo"``: the largest message that goes first come, first served.
    paper_contention : {"link", "device"}, optional
        Only with ``model="paper"``: where messages queue.
    paper_tie_seed : int, optional
        Only with ``model="paper"``: 0 serves simultaneous arrivals in injection order, another seed in a
        random order drawn from it.

    Raises
    ------
    TopoplanError
        Naming the field, for a value outside its choices.

    See Also
    --------
    topoplan.sim.run.simulate : takes one as ``model``.

    References
    ----------
    000 section 4.1 and 003 section 4.1.4 (the papers' simulator: ``model="paper"``,
    store-and-forward relays, link or device contention).

    Examples
    --------
    >>> SimModel().label()
    'maxmin, pipelined relays (64 KiB chunks)'
    >>> SimModel.coerce({"model": "paper", "relay": "store-and-forward"}).to_dict()
    {'model': 'paper', 'relay': 'store-and-forward', 'relay_chunk_B': 65536.0, 'paper_contention': 'link'}
    >>> SimModel(paper_contention="device")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'paper_contention': applies to model 'paper' only, not 'maxmin'
    >>> SimModel(engine="paper", paper_tie_seed=3).to_dict()["paper_tie_seed"]
    3
    >>> SimModel(engine="fifo", fifo_in_turn_max_B=2 ** 40).label()
    'fifo (messages up to 1 TiB in turn), pipelined relays (64 KiB chunks)'
    """

    engine: str = "maxmin"
    relay: str = "pipelined"
    relay_chunk_B: float = DEFAULT_RELAY_CHUNK_B
    fifo_in_turn_max_B: float = DEFAULT_FIFO_IN_TURN_MAX_B
    paper_contention: str = "link"
    paper_tie_seed: int = 0

    def __post_init__(self):
        for name, attr, allowed in (("model", "engine", MODELS), ("relay", "relay", RELAYS),
                                    ("paper_contention", "paper_contention", CONTENTIONS)):
            v = getattr(self, attr)
            if v not in allowed:
                raise TopoplanError(f"field '{name}': choose one of {', '.join(allowed)}, got {v!r}")
        if self.engine != "paper" and self.paper_contention != "link":
            raise TopoplanError(f"field 'paper_contention': applies to model 'paper' only, not {self.engine!r}")
        seed = self.paper_tie_seed
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise TopoplanError(f"field 'paper_tie_seed': expected an integer >= 0, got {seed!r}")
        if self.engine != "paper" and seed:
            raise TopoplanError(f"field 'paper_tie_seed': applies to model 'paper' only, not {self.engine!r}")
        object.__setattr__(self, "relay_chunk_B", _bytes_field("relay_chunk_B", self.relay_chunk_B, 1))
        turn = _bytes_field("fifo_in_turn_max_B", self.fifo_in_turn_max_B, 0)
        if self.engine != "fifo" and turn != DEFAULT_FIFO_IN_TURN_MAX_B:
            raise TopoplanError(f"field 'fifo_in_turn_max_B': applies to model 'fifo' only, not {self.engine!r}")
        object.__setattr__(self, "fifo_in_turn_max_B", turn)

    @classmethod
    def from_options(cls, **options) -> "SimModel":
        """Build from keyword options, named as in documents (``model`` for the engine; ``engine`` is taken
        too); ``None`` values take the default, unknown keys are refused.

        Examples
        --------
        >>> SimModel.from_options(relay=None, relay_chunk_B=1048576).relay_chunk_B
        1048576.0
        >>> SimModel.from_options(model="paper").engine
        'paper'
        >>> SimModel.from_options(relays="pipelined")
        Traceback (most recent call last):
        ...
        topoplan.core.errors.TopoplanError: unknown simulator model option 'relays'; known: model, relay, relay_chunk_B, fifo_in_turn_max_B, paper_contention, paper_tie_seed
        """
        known = [_DOC_KEY.get(f.name, f.name) for f in fields(cls)]
        for k in options:
            if k not in known and k not in _DOC_KEY:
                raise TopoplanError(f"unknown simulator model option {k!r}; known: {', '.join(known)}")
        if options.get("model") is not None and options.get("engine") is not None:
            raise TopoplanError("simulator model options: give 'model' or 'engine', not both")
        attrs = {_ATTR.get(k, k): v for k, v in options.items() if v is not None}
        return cls(**attrs)

    @classmethod
    def coerce(cls, value) -> "SimModel":
        """``None`` (the default model), a :class:`SimModel`, or a dict as written by :meth:`to_dict`."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            return cls.from_options(**value)
        raise TopoplanError(f"field 'sim_model': expected a SimModel or a dict, got {type(value).__name__}")

    def to_dict(self) -> dict:
        """The fields that matter for this model (``paper_contention`` only for the paper model,
        ``paper_tie_seed`` when it is not 0, ``fifo_in_turn_max_B`` only for the fifo model, so a document
        written before the field existed reads the same).

        Examples
        --------
        >>> SimModel(engine="fifo").to_dict()
        {'model': 'fifo', 'relay': 'pipelined', 'relay_chunk_B': 65536.0, 'fifo_in_turn_max_B': 65536.0}
        """
        d = {"model": self.engine, "relay": self.relay, "relay_chunk_B": self.relay_chunk_B}
        if self.engine == "fifo":
            d["fifo_in_turn_max_B"] = self.fifo_in_turn_max_B
        if self.engine == "paper":
            d["paper_contention"] = self.paper_contention
            if self.paper_tie_seed:
                d["paper_tie_seed"] = self.paper_tie_seed
        return d

    def label(self) -> str:
        """A short human-readable name, e.g. ``maxmin, pipelined relays (64 KiB chunks)``."""
        relay = f"{self.relay} relays"
        if self.relay == "pipelined":
            relay += f" ({_size(self.relay_chunk_B)} chunks)"
        if self.engine == "paper":
            ties = f", ties by seed {self.paper_tie_seed}" if self.paper_tie_seed else ""
            return f"paper, {relay}, {self.paper_contention} contention{ties}"
        if self.engine == "fifo":
            return f"fifo (messages up to {_size(self.fifo_in_turn_max_B)} in turn), {relay}"
        return f"{self.engine}, {relay}"


# documents name the attribute engine "model" (the key of every recorded sim_model and the CLI's --model)
_DOC_KEY = {"engine": "model"}
_ATTR = {"model": "engine"}


def _bytes_field(name: str, value, least: int) -> float:
    """Field ``name``'s size in bytes as a float: at least ``least`` (0 or 1) and finite."""
    try:
        b = float(value)
    except (TypeError, ValueError):
        raise TopoplanError(f"field '{name}': expected a size in bytes, got {value!r}") from None
    if not least <= b < 2 ** 60:
        bound = "at least 1 byte" if least else "0 bytes or more"
        raise TopoplanError(f"field '{name}': must be {bound} and finite, got {value!r}")
    return b


def _size(b: float) -> str:
    for unit, k in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if b >= k and b % k == 0:
            return f"{b / k:g} {unit}"
    return f"{b:g} B"
