"""Circuit plans and circuit schedules as one JSON document an OCS controller and an MPI runtime can act on.

``topoplan export ocs -p PLAN -o ocs.json`` (and :func:`export_ocs`) takes a circuit plan
(``topoplan circuits -o``, or any plan with ``circuits``, such as a ``place -m joint`` plan), a
schedule document (``topoplan phases --schedule -o``, or the bare schedule result with its
``schedule`` list) and writes the **OCS document**. A static plan is exported as a one-entry
schedule. The plan is validated first (:func:`topoplan.plans.validate.validate`): an invalid
plan is never exported.

The document (``format`` ``"topoplan-ocs"``, ``version`` 1) is published with a JSON Schema (draft
2020-12), :data:`OCS_SCHEMA` (``topoplan/reporting/schemas/topoplan-ocs-1.schema.json`` in the
installed package; the document's ``schema`` field names it). Every document is checked against it
before it is written (:func:`check_ocs_document`), and so is every document read back
(:func:`schedule_from_ocs`); a controller can check what it is given with any JSON Schema validator::

    {"schema": "topoplan-ocs-1.schema.json", "format": "topoplan-ocs", "version": 1, "kind": "static plan" | "schedule",
     "topology": "paper003", "method": "greedy", "seed": 0, "inputs": {...fingerprints...},
     "threshold_B": 1250.0, "hop_limit": null, "setup_s": 0.01, "blackout": "eps", "n_phases": 2,
     "ports_per_node": 1, "port_numbering": "...", "rules": "host", "forwarding_rules": "...",
     "switch_names": ["S0", ...], "hosts": ["node0000", ...], "host_switch": [0, ...],
     "ocs_nodes": [{"node": 0, "host": "node0000", "switch": "S0", "ports": [0]}, ...],
     "rank_to_node": [...],
     "entries": [{"index": 0, "from_phase": 0, "to_phase": 1, "from_s": 0.0, "first_call": [...],
                  "setup_s": 0.01, "setup_during": "before-run",
                  "cross_connects": [{"a": {"host": "node0002", "node": 2, "port": 2, "node_port": 0},
                                      "b": {"host": "node0019", "node": 19, "port": 7, "node_port": 0}}, ...],
                  "connect": [...], "disconnect": [], "keep": [],
                  "forwarding": {"node0000": {"node0016": "node0003", ...}, ...}}, ...]}

**Entries.** One per schedule entry, in order: it holds from phase ``from_phase`` up to (not
including) ``to_phase``. ``first_call`` (only when the input is a ``phases`` document, which
records it) is, per rank, the number of MPI calls the rank has made before the entry's first
phase starts: a PMPI layer counting calls triggers the entry when its rank reaches that count.
``setup_s`` is the OCS reconfiguration time of the entry (the schedule's ``setup_s``, else the
topology's ``ocs.setup``; 0 when nothing is connected or disconnected); ``setup_during`` says
when it happens: ``before-run`` (entry 0: set up before the application starts), ``wait`` (the
ranks wait ``setup_s`` at the phase boundary), ``surviving`` (the phase runs at once on the
circuits both configurations share, with the tables in ``surviving``, until phase
``surviving.to_phase``, whose per-rank trigger is ``surviving.to_first_call``; the entry's own
``forwarding`` applies from then on) or ``none`` (no change of circuits; the tables may change,
which is free).

**Cross-connects and ports.** A cross-connect joins two OCS ports: ``{"a": end, "b": end}``,
each end ``{"host", "node", "port", "node_port"}``. ``node_port`` is the node's optical port
(``0 .. ports_per_node - 1``); ``port``, the OCS port, is the node's index in the topology's
``ocs.nodes`` times ``ports_per_node`` plus ``node_port``. Plans do not record which port of a
node a circuit uses, so ports are assigned here, deterministically: a circuit kept from the
previous configuration keeps its ports; the previous configuration's other circuits are
disconnected first, freeing their ports; then every new circuit, in the plan's circuit order,
takes the lowest free ``node_port`` at each end. ``connect``, ``disconnect`` and ``keep`` are the
exact differences against the previous configuration (entry 0: against an empty OCS): what the
controller changes; ``cross_connects`` is ``connect`` plus ``keep`` in the plan's order.

**Forwarding rules** (``rules="host"``, default): ``{host: {destination host: next-hop host}}``
for messages of at least ``threshold_B`` bytes between hosts under different switches. At a
host, such a message bound for a destination goes to the next-hop host: the host's circuit
partner (over the OCS) or a host under its own switch (an EPS hop to a relay, which applies its
own rules). A host without a rule for a destination sends over the EPS uplinks; a message
smaller than ``threshold_B`` always does. The rules are the plan's tables (``{node:
{destination switch: next hop}}``) expanded to every host under the destination switch;
``rules="switch"`` keeps them per destination switch (``{host: {switch name: next-hop host}}``,
with ``hosts`` and ``host_switch`` naming each host's switch), which is smaller on large
systems. Host names are the topology's (``host_names()``) or a hostfile's.

**Circuits that change inside a phase** (an entry of the ``solstice`` / ``bvn`` schedulers)
carry ``slots``: one configuration per slot, in order, each with ``index``, ``duration_s``,
``setup_s`` (before the slot; 0 for slot 0, whose set-up is the entry's), its cross-connects,
differences against the previous slot, rules and ``bytes_B`` (``[switch, switch, bytes]``
triples, switch indices into ``switch_names``: what the slot carries). The entry's own
cross-connects are its first slot's, and the next entry's differences are against its last slot.

:func:`schedule_from_ocs` turns an OCS document back into a schedule document that
:func:`topoplan.plans.schedule.validate_schedule` accepts and :mod:`topoplan.sim.schedule`
replays: the document holds everything the replay needs.
"""

from __future__ import annotations

from pathlib import Path

from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write, dumps, read_json
from topoplan.core.topology import check_host_names
from topoplan.plans.planfile import read_document as read_plan_document
from topoplan.plans.schedule import entry_end, static_schedule
from topoplan.plans.validate import validate
from topoplan.traffic.phases import is_first_call

__all__ = ["OCS_FORMAT", "OCS_VERSION", "OCS_SCHEMA", "RULES", "MAX_HOST_RULES", "read_document", "ocs_schema",
           "check_ocs_document", "ocs_document", "render_ocs", "export_ocs", "schedule_from_ocs"]

OCS_FORMAT = "topoplan-ocs"
OCS_VERSION = 1
# The JSON Schema the documents are published with (package data: pyproject.toml's package-data)
OCS_SCHEMA = Path(__file__).resolve().parent / "schemas" / f"{OCS_FORMAT}-{OCS_VERSION}.schema.json"
RULES = ("host", "switch")
# Expanded per-destination-host rules grow as nodes squared: 4,096 nodes already need 16.6 M of them
# (several hundred MB of JSON). Above this many in one document, rules="switch" is required.
MAX_HOST_RULES = 4_000_000

PORT_NUMBERING = ("port = index of the node in the topology's ocs.nodes * ports_per_node + node_port; a circuit "
                  "kept from the previous configuration keeps its ports, a new one takes the lowest free node_port "
                  "at each end, in the plan's circuit order, after the previous configuration's other circuits "
                  "are disconnected")
RULES_TEXT = {
    "host": ("forwarding[host][destination host] = next-hop host, for messages of at least threshold_B bytes "
             "between hosts under different switches; the next hop is the host's circuit partner (over the OCS) "
             "or a host under its own switch (an EPS hop to a relay, which applies its own rules); no rule: the "
             "EPS uplinks"),
    "switch": ("forwarding[host][destination switch name] = next-hop host (a destination host's switch: "
               "host_switch), for messages of at least threshold_B bytes between hosts under different switches; "
               "the next hop is the host's circuit partner (over the OCS) or a host under its own switch (an EPS "
               "hop to a relay, which applies its own rules); no rule: the EPS uplinks"),
}


# -- the schema -------------------------------------------------------------------

_VALIDATOR: list = []


def ocs_schema() -> dict:
    """The JSON Schema of the OCS document (:data:`OCS_SCHEMA`), parsed.

    Returns
    -------
    dict

    Examples
    --------
    >>> s = ocs_schema()
    >>> s["$schema"], s["properties"]["format"]
    ('https://json-schema.org/draft/2020-12/schema', {'const': 'topoplan-ocs'})
    """
    return _validator().schema


def _validator():
    if not _VALIDATOR:
        # imported here: jsonschema (with its referencing library) costs every command ~0.1 s to import, and
        # only the OCS documents need it
        from jsonschema import Draft202012Validator

        schema = read_json(OCS_SCHEMA, "JSON Schema")
        Draft202012Validator.check_schema(schema)
        _VALIDATOR.append(Draft202012Validator(schema))
    return _VALIDATOR[0]


def check_ocs_document(doc, *, where: str = "OCS document") -> None:
    """Check an OCS document against its JSON Schema (:data:`OCS_SCHEMA`), and that it holds only JSON numbers.

    Parameters
    ----------
    doc : dict
        An OCS document, as :func:`ocs_document` makes it or as read from a file.
    where : str, optional
        How errors name the document.

    Raises
    ------
    TopoplanError
        One line naming ``where``, the schema and the first field at fault (a NaN or an infinity, which
        JSON cannot hold, is one).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> doc = ocs_document({"circuits": [[0, 16]], "forwarding": {}}, load_topology("paper003"))
    >>> check_ocs_document(doc)
    >>> doc["entries"][0]["setup_s"] = -0.01
    >>> check_ocs_document(doc, where="ocs.json")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: ocs.json: field 'entries[0].setup_s': -0.01 is less than the minimum of 0 (schema topoplan-ocs-1.schema.json)
    """
    try:
        dumps(doc, indent=None)   # NaN passes a schema's "minimum" (every comparison with it is false)
    except TopoplanError as exc:
        raise TopoplanError(f"{where}: {exc}") from None
    except TypeError as exc:
        raise TopoplanError(f"{where}: {exc}") from None
    from jsonschema.exceptions import best_match

    err = best_match(_validator().iter_errors(doc))
    if err is None:
        return
    field = err.json_path[2:] if err.json_path.startswith("$.") else err.json_path.lstrip("$")
    msg = err.message if len(err.message) <= 160 else err.message[:157] + "..."
    raise TopoplanError(f"{where}: {f'field {field!r}: ' if field else ''}{msg} (schema {OCS_SCHEMA.name})")


# -- reading the input -------------------------------------------------------------

def read_document(path) -> dict:
    """Read a circuit plan or schedule document for the ``ocs`` export, refusing anything else.

    Parameters
    ----------
    path : str or path
        A JSON file (``.json``, or gzip-compressed ``.gz``): a circuit plan (``circuits``), a
        schedule (``schedule``) or a ``topoplan phases --schedule -o`` document (``schedule_result``);
        or a plan archive (``topoplan circuits -o plan.zip``, see :mod:`topoplan.plans.planfile`).

    Returns
    -------
    dict
        The document, not yet validated (see :func:`ocs_document`).

    Raises
    ------
    TopoplanError
        Naming the file, for a missing or malformed file, a placement, a Bcast order, or a
        ``phases`` document without a schedule.

    Examples
    --------
    >>> import json, os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "placement.json")
    >>> with open(path, "w") as fh:
    ...     json.dump({"rank_to_node": [0, 0, 1]}, fh)
    >>> read_document(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../placement.json: field 'circuits': missing: a placement or other plan, ...
    >>> with open(path, "w") as fh:
    ...     json.dump({"circuits": [[0, 16]], "forwarding": {}}, fh)
    >>> read_document(path)["circuits"]
    [[0, 16]]
    """
    path = Path(path)
    if path.suffix not in (".json", ".gz", ".zip"):
        raise TopoplanError(f"{path}: the ocs format exports a circuit plan (JSON or .zip plan archive) or "
                            "schedule JSON (topoplan circuits -o, topoplan phases --schedule -o), not a placement CSV")
    doc = read_plan_document(path, "circuit plan or schedule")   # a plan archive too (circuits -o plan.zip)
    _kind(doc, str(path))
    return doc


def _kind(doc, where: str) -> str:
    """``static plan`` or ``schedule``; refuses documents without either, with a one-line error."""
    if not isinstance(doc, dict):
        raise TopoplanError(f"{where}: expected a JSON object (a circuit plan or a schedule)")
    if "schedule" in doc or isinstance(doc.get("schedule_result"), dict):
        return "schedule"
    if "circuits" in doc:
        return "static plan"
    if "phases" in doc:
        raise TopoplanError(f"{where}: field 'schedule_result': missing: a `topoplan phases` document without a "
                            "schedule (run it with --schedule)")
    raise TopoplanError(f"{where}: field 'circuits': missing: a placement or other plan, not a circuit plan or "
                        "schedule (the ocs format exports `topoplan circuits -o` plans and `topoplan phases "
                        "--schedule -o` schedules)")


def _first_calls(doc: dict, n_phases, where: str) -> list | None:
    """Per phase, each rank's calls before it, from a ``phases`` document (None without one)."""
    phases = doc.get("phases")
    if phases is None:
        return None
    if not isinstance(phases, list) or (n_phases is not None and len(phases) != n_phases):
        raise TopoplanError(f"{where}: field 'phases': expected a list of the schedule's {n_phases} phases, got "
                            f"{len(phases) if isinstance(phases, list) else type(phases).__name__}")
    out, n_ranks = [], doc.get("n_ranks")
    for k, p in enumerate(phases):
        fc = p.get("first_call") if isinstance(p, dict) else None
        if fc is None:
            return None   # phases recorded without their cuts: no triggers to give
        if not is_first_call(fc, n_ranks if isinstance(n_ranks, int) else None):
            raise TopoplanError(f"{where}: field 'phases[{k}].first_call': expected a non-negative call count per "
                                "rank")
        out.append(fc)
    return out


# -- ports ---------------------------------------------------------------------------

def _ocs_ports(index: int, ports_per_node: int) -> list:
    """The OCS ports of the ``index``-th node of the topology's ``ocs.nodes``, by node port (:data:`PORT_NUMBERING`)."""
    return [int(index) * int(ports_per_node) + p for p in range(int(ports_per_node))]


class _Ports:
    """The OCS ports in use, configuration after configuration (see the module docstring)."""

    def __init__(self, ocs_nodes, ports_per_node: int, hosts: list):
        self.index = {int(v): i for i, v in enumerate(ocs_nodes)}
        self.ppn = int(ports_per_node)
        self.hosts = hosts
        self.held: dict = {}       # (u, v) sorted -> (a, b, {node: node_port})
        self.busy: dict = {}       # node -> set of node ports in use

    def end(self, node: int, node_port: int) -> dict:
        return {"host": self.hosts[node], "node": node, "port": _ocs_ports(self.index[node], self.ppn)[node_port],
                "node_port": node_port}

    def xc(self, a: int, b: int, ports: dict) -> dict:
        return {"a": self.end(a, ports[a]), "b": self.end(b, ports[b])}

    def cross_connects(self, circuits) -> list:
        """The cross-connects of circuits held now (e.g. the surviving ones), in the given order."""
        out = []
        for c in circuits:
            a, b = int(c[0]), int(c[1])
            out.append(self.xc(a, b, self.held[(min(a, b), max(a, b))][2]))
        return out

    def step(self, circuits) -> dict:
        """Move to ``circuits``: the cross-connects and the differences against the current configuration."""
        pairs = [(int(c[0]), int(c[1])) for c in circuits]
        keys = [(min(a, b), max(a, b)) for a, b in pairs]
        new = set(keys)
        disconnect = []
        for k, (a, b, ports) in list(self.held.items()):
            if k not in new:
                disconnect.append(self.xc(a, b, ports))
                for v, p in ports.items():
                    self.busy[v].discard(p)
                del self.held[k]
        held, cross, connect, keep = {}, [], [], []
        for (a, b), k in zip(pairs, keys):
            if k in self.held:
                ports = self.held[k][2]
                x = self.xc(a, b, ports)
                keep.append(x)
            else:
                ports = {}
                for v in (a, b):
                    used = self.busy.setdefault(v, set())
                    p = next(i for i in range(self.ppn) if i not in used)   # validated: never more than ppn
                    used.add(p)
                    ports[v] = p
                x = self.xc(a, b, ports)
                connect.append(x)
            held[k] = (a, b, ports)
            cross.append(x)
        self.held = held
        return {"cross_connects": cross, "connect": connect, "disconnect": disconnect, "keep": keep}


# -- forwarding rules ---------------------------------------------------------------------

def _rule_count(fwd: dict, members: list) -> int:
    return sum(len(members[int(s)]) for row in fwd.values() for s in row)


def _rules(fwd: dict, hosts: list, members: list, labels: list, by: str) -> dict:
    """The plan's tables ``{node: {switch: next hop}}`` as per-host rules (module docstring)."""
    out = {}
    for u in sorted(fwd, key=int):
        row = fwd[u]
        r: dict = {}
        for s in sorted(row, key=int):
            h = hosts[int(row[s])]
            if by == "host":
                r.update(dict.fromkeys(members[int(s)], h))
            else:
                r[labels[int(s)]] = h
        if r:
            out[hosts[int(u)]] = r
    return out


# -- the document ------------------------------------------------------------------

def ocs_document(doc: dict, topo, *, hosts: list | None = None, rules: str = "host", where: str = "plan",
                 check_inputs: bool = True) -> dict:
    """The OCS document (module docstring) of a circuit plan or schedule, validated first.

    Parameters
    ----------
    doc : dict
        A circuit plan (``circuits`` + ``forwarding``), a schedule (``schedule``) or a
        ``topoplan phases --schedule`` document (``schedule_result``, and ``phases`` with each
        phase's ``first_call``).
    topo : TreeTopology
        The hybrid topology the plan is for.
    hosts : list of str, optional
        Host name of every node id; default ``topo.host_names()``.
    rules : {"host", "switch"}, optional
        Forwarding rules per destination host (default) or per destination switch.
    where : str, optional
        How errors name the plan (its file).
    check_inputs : bool, optional
        Refuse a plan whose recorded ``inputs`` fingerprint another topology (see
        :func:`topoplan.plans.validate.validate`).

    Returns
    -------
    dict

    Raises
    ------
    TopoplanError
        Naming ``where`` and the field, for an invalid plan or schedule (see
        :func:`topoplan.plans.validate.validate`), a document that is neither, too few or
        invalid host names, an unknown ``rules``, or more than :data:`MAX_HOST_RULES` host rules.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])   # OCS nodes 0, 16, 32, 48
    >>> plan = {"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}, "1": {"1": 0}}}
    >>> d = ocs_document(plan, topo)
    >>> d["kind"], len(d["entries"]), d["entries"][0]["setup_during"]
    ('static plan', 1, 'before-run')
    >>> d["entries"][0]["cross_connects"]
    [{'a': {'host': 'node0000', 'node': 0, 'port': 0, 'node_port': 0},
      'b': {'host': 'node0016', 'node': 16, 'port': 1, 'node_port': 0}}]
    >>> d["entries"][0]["forwarding"]["node0001"]["node0031"]   # any host under switch 1: relay via node 0
    'node0000'
    >>> ocs_document({"circuits": [[0, 16], [0, 32]]}, topo, where="bad.json")   # one optical port per node
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: bad.json: field 'circuits[1]': node 0 has 2 circuits but 1 optical port
    """
    if rules not in RULES:
        raise TopoplanError(f"unknown forwarding rules {rules!r} (rules: {', '.join(RULES)})")
    kind = _kind(doc, where)
    validate(doc, topo, where=where, check_inputs=check_inputs)   # never export an invalid plan
    if kind == "static plan":
        sched = static_schedule(doc)
    else:
        sched = doc if "schedule" in doc else doc["schedule_result"]
    entries = sched["schedule"]
    ends = [int(entry_end(entries, i, sched.get("n_phases"))) for i in range(len(entries))]
    n_phases = ends[-1]
    firsts = _first_calls(doc, n_phases, where) if kind == "schedule" else None
    n = topo.n_nodes
    hosts = list(topo.host_names() if hosts is None else hosts)
    if len(hosts) < n:
        raise TopoplanError(f"{where}: {len(hosts)} host names for {n} nodes")
    hosts = hosts[:n]
    check_host_names(hosts, "hosts")   # written verbatim for a controller: no name a parser could misread
    sw = [int(x) for x in topo.node_switch()]
    labels = topo.switch_labels()
    members: list = [[] for _ in labels]
    for v, s in enumerate(sw):
        members[s].append(hosts[v])
    if rules == "host":
        tables = [e.get("forwarding") or {} for e in entries]
        tables += [(e.get("setup") or {}).get("surviving_forwarding") or {} for e in entries]
        tables += [sl.get("forwarding") or {} for e in entries for sl in (e.get("slots") or [])]
        count = sum(_rule_count(t, members) for t in tables)
        if count > MAX_HOST_RULES:
            raise TopoplanError(f"{where}: {count:,} forwarding rules per destination host (more than "
                                f"{MAX_HOST_RULES:,}); export them per destination switch (--rules switch)")
    setup_s = topo.ocs.setup_s if sched.get("setup_s") is None else sched["setup_s"]
    if isinstance(setup_s, bool) or not isinstance(setup_s, (int, float)) or not 0 <= setup_s < float("inf"):
        raise TopoplanError(f"{where}: field 'setup_s': expected a non-negative time in seconds, got {setup_s!r}")
    setup_s = float(setup_s)
    ports = _Ports(topo.ocs.nodes, topo.ocs.ports_per_node, hosts)
    out_entries = []
    for i, e in enumerate(entries):
        fp, tp = int(e["from_phase"]), ends[i]
        slots = e.get("slots") or []
        diff = ports.step((slots[0].get("circuits") if slots else e.get("circuits")) or [])
        changed = bool(diff["connect"] or diff["disconnect"])
        st = e.get("setup") if isinstance(e.get("setup"), dict) else None
        if i == 0:
            during = "before-run"
        elif st is not None:
            during = st.get("during", "wait")
        else:
            during = "none"
        out = {"index": i, "from_phase": fp, "to_phase": tp}
        if e.get("from_s") is not None:
            out["from_s"] = e["from_s"]
        if firsts is not None:
            out["first_call"] = firsts[fp]
        out.update({"setup_s": setup_s if changed else 0.0, "setup_during": during, **diff,
                    "forwarding": _rules(e.get("forwarding") or {}, hosts, members, labels, rules)})
        if during == "surviving":
            surv = {"cross_connects": ports.cross_connects(st.get("surviving_circuits") or []),
                    "forwarding": _rules(st.get("surviving_forwarding") or {}, hosts, members, labels, rules),
                    "to_phase": fp + 1}
            if firsts is not None and fp + 1 < len(firsts):
                surv["to_first_call"] = firsts[fp + 1]
            out["surviving"] = surv
        if e.get("hop_limit") is not None:
            out["hop_limit"] = e["hop_limit"]
        if e.get("source") is not None:
            out["source"] = e["source"]
        if slots:
            out_slots = []
            for j, sl in enumerate(slots):
                d = diff if j == 0 else ports.step(sl.get("circuits") or [])
                moved = bool(d["connect"] or d["disconnect"])
                o = {"index": j, "duration_s": float(sl["duration_s"]), "setup_s": setup_s if j and moved else 0.0,
                     **d, "forwarding": _rules(sl.get("forwarding") or {}, hosts, members, labels, rules),
                     "bytes_B": [list(t) for t in (sl.get("bytes_B") or [])]}
                if sl.get("hop_limit") is not None:
                    o["hop_limit"] = sl["hop_limit"]
                out_slots.append(o)
            out["slots"] = out_slots
        out_entries.append(out)
    top = doc if kind == "static plan" or "schedule" in doc else doc["schedule_result"]
    result = {"schema": OCS_SCHEMA.name, "format": OCS_FORMAT, "version": OCS_VERSION, "kind": kind,
              "topology": topo.name or doc.get("topology")}
    for k in ("method", "seed", "inputs"):
        if top.get(k) is not None:
            result[k] = top[k]
    thr = sched.get("threshold_B")
    result.update({"threshold_B": float(thr) if thr is not None else float(topo.ocs.bdp_B),
                   "hop_limit": sched.get("hop_limit"), "setup_s": setup_s, "blackout": sched.get("blackout", "eps"),
                   "n_phases": n_phases})
    if firsts is not None and isinstance(doc.get("n_ranks"), int):
        result["n_ranks"] = doc["n_ranks"]
    result.update({"ports_per_node": int(topo.ocs.ports_per_node), "port_numbering": PORT_NUMBERING,
                   "rules": rules, "forwarding_rules": RULES_TEXT[rules], "switch_names": list(labels),
                   "hosts": hosts, "host_switch": sw,
                   "ocs_nodes": [{"node": int(v), "host": hosts[int(v)], "switch": labels[sw[int(v)]],
                                  "ports": _ocs_ports(ports.index[int(v)], ports.ppn)}
                                 for v in topo.ocs.nodes]})
    if sched.get("rank_to_node") is not None:
        result["rank_to_node"] = sched["rank_to_node"]
    result["entries"] = out_entries
    check_ocs_document(result, where=where)   # never hand a controller a document its schema refuses
    return result


def render_ocs(doc: dict, topo, *, hosts: list | None = None, rules: str = "host", where: str = "plan",
               check_inputs: bool = True) -> str:
    """The OCS document as JSON text (one line per table row, :func:`topoplan.core.io.dumps`).

    Parameters
    ----------
    doc, topo, hosts, rules, where, check_inputs
        As for :func:`ocs_document`.

    Returns
    -------
    str

    Raises
    ------
    TopoplanError
        As :func:`ocs_document`.

    Examples
    --------
    >>> import json
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    >>> text = render_ocs({"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}}, topo, rules="switch")
    >>> json.loads(text)["entries"][0]["forwarding"]
    {'node0000': {'S1': 'node0016'}}
    """
    return dumps(ocs_document(doc, topo, hosts=hosts, rules=rules, where=where, check_inputs=check_inputs)) + "\n"


def export_ocs(plan, path, *, topo, hosts: list | None = None, rules: str = "host", check_inputs: bool = True,
               where: str | None = None) -> dict:
    """Validate a circuit plan or schedule and write its OCS document atomically.

    Parameters
    ----------
    plan : dict or str or path
        The document, or its file (read with :func:`read_document`).
    path : str or path
        The file to write (``.gz``: compressed); nothing is written when anything fails.
    topo : TreeTopology
        The hybrid topology the plan is for.
    hosts : list of str, optional
        Host name of every node id; default ``topo.host_names()``.
    rules : {"host", "switch"}, optional
    check_inputs : bool, optional
        As for :func:`ocs_document`.
    where : str, optional
        How errors name the plan; default its file, or ``plan`` for a document.

    Returns
    -------
    dict
        The document written.

    Raises
    ------
    TopoplanError
        As :func:`read_document` and :func:`ocs_document`, or when ``path`` cannot be written.

    Examples
    --------
    >>> import os, tempfile
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1", "ocs.ports_per_node=2"])
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "ocs.json")
    >>> d = export_ocs({"circuits": [[0, 16], [0, 32]], "forwarding": {}}, path, topo=topo)
    >>> [(x["a"]["port"], x["b"]["port"]) for x in d["entries"][0]["cross_connects"]]   # node 0: ports 0 and 1
    [(0, 2), (1, 4)]
    >>> export_ocs({"circuits": [[0, 16], [0, 32], [0, 48]]}, os.path.join(tmp.name, "no.json"), topo=topo)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: plan: field 'circuits[2]': node 0 has 3 circuits but 2 optical ports
    >>> os.path.exists(os.path.join(tmp.name, "no.json"))
    False
    """
    if not isinstance(plan, dict):
        where = where or str(plan)
        plan = read_document(plan)
    where = where or "plan"
    doc = ocs_document(plan, topo, hosts=hosts, rules=rules, where=where, check_inputs=check_inputs)
    atomic_write(path, dumps(doc) + "\n")
    return doc


# -- back to a schedule (for the replay) ----------------------------------------------------

def schedule_from_ocs(doc: dict, *, where: str = "OCS document") -> dict:
    """The schedule document an OCS document describes, for :mod:`topoplan.sim.schedule` and ``validate``.

    Circuits come from each entry's (and slot's) cross-connects, forwarding tables from the rules
    (every destination host under one switch must have the same next hop); ``setup_s``,
    ``blackout``, ``threshold_B``, ``hop_limit`` and ``rank_to_node`` are kept.

    Parameters
    ----------
    doc : dict
        An OCS document (:func:`ocs_document`).
    where : str, optional
        How errors name it.

    Returns
    -------
    dict
        ``{"schedule": [...], "n_phases", "setup_s", ...}`` (see
        :mod:`topoplan.problems.circuits.schedule`); not validated against a topology.

    Raises
    ------
    TopoplanError
        For another format or version, an unknown host, rules that differ within one switch, or a
        cross-connect end whose host or OCS port is not its node's.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    >>> plan = {"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}, "1": {"1": 0}}}
    >>> s = schedule_from_ocs(ocs_document(plan, topo))
    >>> s["schedule"][0]["circuits"], s["schedule"][0]["forwarding"]
    ([[0, 16]], {'0': {'1': 16}, '1': {'1': 0}})
    """
    if not isinstance(doc, dict) or doc.get("format") != OCS_FORMAT or doc.get("version") != OCS_VERSION:
        raise TopoplanError(f"{where}: field 'format': expected {OCS_FORMAT!r} version {OCS_VERSION}")
    check_ocs_document(doc, where=where)
    try:
        return _schedule_from_ocs(doc, where)
    except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
        raise TopoplanError(f"{where}: malformed OCS document ({type(exc).__name__}: {exc})") from None


def _schedule_from_ocs(doc: dict, where: str) -> dict:
    hosts, host_switch, labels = doc["hosts"], doc["host_switch"], doc["switch_names"]
    node_of = {h: i for i, h in enumerate(hosts)}
    switch_of = {name: i for i, name in enumerate(labels)}
    by = doc.get("rules", "host")

    def node(h, field):
        if h not in node_of:
            raise TopoplanError(f"{where}: field '{field}': unknown host {h!r}")
        return node_of[h]

    ppn = int(doc["ports_per_node"])
    ports_of: dict = {}   # OCS node -> its OCS ports, numbered as PORT_NUMBERING says
    for i, o in enumerate(doc["ocs_nodes"]):
        n, want = int(o["node"]), _ocs_ports(i, ppn)
        if not 0 <= n < len(hosts) or o["host"] != hosts[n]:
            raise TopoplanError(f"{where}: field 'ocs_nodes[{i}].host': {o['host']!r} is not the host of node {n}"
                                + (f" ({hosts[n]})" if 0 <= n < len(hosts) else f" ({len(hosts)} hosts)"))
        if list(o["ports"]) != want:
            raise TopoplanError(f"{where}: field 'ocs_nodes[{i}].ports': {o['ports']} for node {n}, but the port "
                                f"numbering gives {want}")
        ports_of[n] = want

    def ends(xcs, field):   # a controller connects the ports: each must be its node's, as the plan's nodes say
        for j, x in enumerate(xcs):
            for side in ("a", "b"):
                end, at = x[side], f"{field}[{j}].{side}"
                n, k = int(end["node"]), int(end["node_port"])
                if n not in ports_of:
                    raise TopoplanError(f"{where}: field '{at}.node': node {n} is not an OCS node of the document")
                if end["host"] != hosts[n]:
                    raise TopoplanError(f"{where}: field '{at}.host': {end['host']!r} is not the host of node {n} "
                                        f"({hosts[n]})")
                if not 0 <= k < ppn or int(end["port"]) != ports_of[n][k]:
                    raise TopoplanError(f"{where}: field '{at}.port': OCS port {end['port']} is not optical port "
                                        f"{k} of node {n}" + (f" (OCS port {ports_of[n][k]})" if 0 <= k < ppn else
                                                              f" ({ppn} per node)"))

    def circuits(xcs, field="cross_connects"):
        ends(xcs, field)
        return [[int(x["a"]["node"]), int(x["b"]["node"])] for x in xcs]

    def tables(rules, field):
        out: dict = {}
        for h, row in rules.items():
            u = node(h, field)
            t: dict = {}
            for dest, nh in row.items():
                if by == "switch":
                    if dest not in switch_of:
                        raise TopoplanError(f"{where}: field '{field}.{h}': unknown switch {dest!r}")
                    s = switch_of[dest]
                else:
                    s = int(host_switch[node(dest, f"{field}.{h}")])
                v = node(nh, f"{field}.{h}")
                if t.get(str(s), v) != v:
                    raise TopoplanError(f"{where}: field '{field}.{h}': two next hops for hosts under switch "
                                        f"{labels[s]}")
                t[str(s)] = v
            out[str(u)] = t
        return out

    entries = []
    for i, e in enumerate(doc["entries"]):
        f = f"entries[{i}]"
        x = {"from_phase": e["from_phase"], "to_phase": e["to_phase"],
             "circuits": circuits(e["cross_connects"], f"{f}.cross_connects"),
             "forwarding": tables(e["forwarding"], f"{f}.forwarding"), "setup": None}
        for key in ("connect", "disconnect", "keep"):
            ends(e[key], f"{f}.{key}")
        if e.get("from_s") is not None:
            x["from_s"] = e["from_s"]
        if e.get("hop_limit") is not None:
            x["hop_limit"] = e["hop_limit"]
        if e["setup_during"] in ("wait", "surviving"):
            x["setup"] = {"changed_circuits": len(e["connect"]) + len(e["disconnect"]),
                          "removed": len(e["disconnect"]), "added": len(e["connect"]), "during": e["setup_during"]}
            if e["setup_during"] == "surviving":
                x["setup"]["surviving_circuits"] = circuits(e["surviving"]["cross_connects"],
                                                            f"{f}.surviving.cross_connects")
                x["setup"]["surviving_forwarding"] = tables(e["surviving"]["forwarding"], f"{f}.surviving")
        if e.get("slots"):
            x["slots"] = []
            for j, sl in enumerate(e["slots"]):
                y = {"circuits": circuits(sl["cross_connects"], f"{f}.slots[{j}].cross_connects"),
                     "forwarding": tables(sl["forwarding"], f"{f}.slots[{j}].forwarding"),
                     "duration_s": sl["duration_s"], "bytes_B": sl.get("bytes_B") or []}
                for key in ("connect", "disconnect", "keep"):
                    ends(sl.get(key) or [], f"{f}.slots[{j}].{key}")
                if sl.get("hop_limit") is not None:
                    y["hop_limit"] = sl["hop_limit"]
                x["slots"].append(y)
        entries.append(x)
    out = {"schedule": entries, "n_phases": doc.get("n_phases"), "setup_s": doc.get("setup_s"),
           "blackout": doc.get("blackout", "eps"), "threshold_B": doc.get("threshold_B"),
           "hop_limit": doc.get("hop_limit")}
    for k in ("rank_to_node", "inputs"):
        if doc.get(k) is not None:
            out[k] = doc[k]
    return out
