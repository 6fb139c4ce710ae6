"""Parameter sweeps on Dask: instances x methods x parameters -> plan, simulate, one table.

A sweep is a YAML file::

    name: circuits-vs-ocs-size
    output: results/circuits.csv        # relative to this file; .parquet writes Parquet (needs pyarrow); not "-"
    problem: circuits                   # default problem of the methods
    instances:
      - name: neighbor
        topology: paper003
        set: [kind=hybrid]              # topology overrides (--set)
        traffic: neighbor2d:rows=16,cols=16,bytes=4MB,iters=5
        placement: sequential           # sequential, round-robin, a placement file or a list of node ids
        options: {threshold_B: 1250}    # problem builder options of this instance
    methods: [sp, three-step, {name: ilp, label: ilp-highs, options: {solver: highs}}]
    parameters:                         # grid (lists) or fixed values
      seed: [0, 1]
      time_limit: 60
      set.ocs.nodes_per_switch: [1, 2, 4, 8]   # 'set.' = a topology override
      problem.hop_limit: [1, 2]         # 'problem.' = an option of the problem builder
      restarts: [1, 4]                  # anything else = a method option
      sim.relay: [pipelined, store-and-forward]   # 'sim.' = a simulator model option
    simulate: true                      # score every plan in the simulator
    sim_model: {model: maxmin}          # the simulator's model (topoplan.sim.simmodel.SimModel fields); default maxmin,
                                        # pipelined relays; 'sim.' parameters override it per cell
    score: mypkg.scoring:score          # optional hook: extra columns per cell
    cell: mypkg.cells:run               # optional: replace the whole cell

Every problem is built the same way: its module's ``build(topology, traffic,
placement=None, **options)`` (:data:`PROBLEMS`; a dotted module path names
any other module with ``build`` and ``solve``) gets the instance's topology,
its traffic and placement (None when the instance gives none: a problem
whose builder has a default for ``traffic``, such as ``bcast``, whose
traffic is the Bcast itself, needs none, and its placement, the allocation,
is a list of node ids), and the instance's ``options`` with the ``problem.``
parameters. Builder options and method options are checked against the
builder's and the method's signatures before any cell runs.

Every cell (instance x method x parameter combination) has a key, the hash
of everything that defines it; finished cells are kept in the output table
and not recomputed when the sweep runs again (failed cells are retried).
Cells run as Dask tasks: on a :class:`dask.distributed.LocalCluster` by
default or on any scheduler (``tcp://host:8786``; with dask-jobqueue a
Slurm cluster). The problem modules are imported lazily on the workers.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from topoplan.core.csvtable import read_csv_table, row_line
from topoplan.core.errors import TopoplanError
from topoplan.core.extras import extra_message, missing_extra, require
from topoplan.core.fingerprint import fingerprint_trace
from topoplan.core.io import atomic_write, is_stdout, read_text
from topoplan.core.topology_io import load_topology, strict_yaml
from topoplan.plans.planfile import plan_file_document
from topoplan.plans.validate import check_recorded_inputs
from topoplan.problems.result import MAX_TIME_LIMIT_S, declared_options
from topoplan.sim.network import circuit_threshold_B
from topoplan.sim.replay import bulk_trace
from topoplan.sim.run import simulate_plan
from topoplan.sim.simmodel import SimModel
from topoplan.sim.steps import source_steps
from topoplan.traffic import generators
from topoplan.traffic.sources import load_inputs, load_source

__all__ = ["KEY_VERSION", "BASE_COLUMNS", "RESERVED_PARAMS", "PROBLEMS", "SIMULATORS", "INSTANCE_KEYS",
           "METHOD_KEYS", "SweepConfig", "load_config", "parse_config", "check_config", "cell_key",
           "expand_cells", "resolve", "problem_module", "split_params", "cell_model", "run_cell",
           "simulate_plan_cell", "cached_steps", "execute", "table_format", "read_table", "write_table", "table_lock",
           "SweepOutcome", "make_client", "run_sweep"]

KEY_VERSION = 2  # 2: cells name their simulator model (the default relay became pipelined)
BASE_COLUMNS = ("key", "instance", "problem", "method", "status", "objective", "bound", "gap", "plan_wall_s",
                "makespan_s", "score", "cell_wall_s", "worker", "error")
RESERVED_PARAMS = ("seed", "time_limit")


# The planning problems, by name: each module has ``build(topology, traffic, placement=None, **options)``,
# ``solve(problem, method, ...)`` and ``METHODS`` (modules are imported only when a cell needs them).
PROBLEMS: dict[str, str] = {
    "circuits": "topoplan.problems.circuits",
    "placement": "topoplan.problems.placement",
    "bcast": "topoplan.problems.bcast",
}


@dataclass
class SweepConfig:
    """A parsed sweep file (see the module docstring).

    Parameters
    ----------
    name : str
    instances, methods : list of dict
        Normalized entries (every instance and method a dict with its ``name``).
    parameters : dict of str to list
        Every parameter as a list of its grid values.
    output : pathlib.Path
        The table, relative paths resolved against ``base``.
    problem : str, optional
        Default problem of the methods.
    base : str, optional
        Directory of the sweep file.
    simulate : bool, optional
    score, cell : str, optional
        ``module:function`` hooks.
    source : str, optional
        Names the file in messages.
    sim_model : dict, optional

    Build one with :func:`load_config` or :func:`parse_config`.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> doc = {"name": "demo", "output": "demo.csv", "problem": "circuits",
    ...        "instances": [{"name": "n", "topology": "paper003", "set": ["ocs.nodes_per_switch=2"],
    ...                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB"}],
    ...        "methods": ["none", "three-step"], "parameters": {"seed": 0}}
    >>> cfg = parse_config(doc, "demo.yaml", base=Path(tmp.name))
    >>> cfg.name, [m["name"] for m in cfg.methods], cfg.parameters, cfg.output.name
    ('demo', ['none', 'three-step'], {'seed': [0]}, 'demo.csv')
    """

    name: str
    instances: list[dict]
    methods: list[dict]
    parameters: dict[str, list]
    output: Path
    problem: str | None = None
    base: str | None = None       # directory of the sweep file: relative instance files are found there
    simulate: bool = True
    score: str | None = None
    cell: str | None = None
    source: str = "sweep"
    sim_model: dict | None = None


# -- configuration ---------------------------------------------------------------------

def load_config(path, output=None) -> SweepConfig:
    """Read and check a sweep YAML file; ``output`` overrides its ``output``.

    Parameters
    ----------
    path : str or path
    output : str or path, optional

    Returns
    -------
    SweepConfig

    Raises
    ------
    TopoplanError
        For a missing file, malformed YAML (naming the line) or a bad field.

    Examples
    --------
    >>> cfg = load_config("tests/data/sweep_cheap.yaml", output="/tmp/x.csv")
    >>> cfg.name, len(cfg.instances), cfg.parameters
    ('cheap', 2, {'a': [1, 2, 3], 'seed': [0, 1]})
    """
    path = Path(path)
    # the strict reader of every YAML input: duplicate keys, alias bombs and YAML 1.1 numbers are refused
    doc = strict_yaml(read_text(path, "sweep config"), path)
    # an absolute base: the cells run on Dask workers, whose working directory may be any other
    cfg = parse_config(doc, str(path), base=path.absolute().parent)
    if output is not None:
        if is_stdout(output):
            raise TopoplanError(f"output -: {TABLE_NOT_STDOUT}")
        cfg.output = Path(output)
    return cfg


#: Why a sweep's table cannot go to standard output (``output: "-"``; ``-o -`` is refused the same way).
TABLE_NOT_STDOUT = ("a sweep table (read back to resume the sweep) cannot go to standard output; give a file "
                    "name")


def parse_config(doc, where: str = "sweep", base: Path | None = None) -> SweepConfig:
    """Check a sweep document (dict); errors name the file and field.

    Parameters
    ----------
    doc : dict
    where : str, optional
        Names the document in messages.
    base : pathlib.Path, optional
        Directory relative paths are resolved against.

    Returns
    -------
    SweepConfig

    Raises
    ------
    TopoplanError

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> doc = {"name": "demo", "output": "demo.csv", "problem": "circuits",
    ...        "instances": [{"name": "n", "topology": "paper003", "set": ["ocs.nodes_per_switch=2"],
    ...                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB"}],
    ...        "methods": ["none", "three-step"], "parameters": {"seed": 0}}
    >>> cfg = parse_config(doc, "demo.yaml", base=Path(tmp.name))
    >>> cfg.output == Path(tmp.name) / "demo.csv"
    True
    >>> parse_config({**doc, "method": ["sp"]}, "demo.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: demo.yaml: field 'method': unknown key (...)
    """
    if not isinstance(doc, dict):
        raise TopoplanError(f"{where}: expected a mapping with instances, methods and parameters")
    known = {"name", "output", "problem", "instances", "methods", "parameters", "simulate", "score", "cell",
             "description", "sim_model"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise TopoplanError(f"{where}: field '{unknown[0]}': unknown key (known: {', '.join(sorted(known))})")
    for key, kind in (("name", "a string"), ("output", "a file name"), ("problem", "a problem name"),
                      ("description", "a string")):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise TopoplanError(f"{where}: field '{key}': expected {kind}, got {doc[key]!r}")
    if not isinstance(doc.get("simulate", True), bool):
        raise TopoplanError(f"{where}: field 'simulate': expected true or false, got {doc['simulate']!r}")
    name = str(doc.get("name") or Path(where).stem)
    insts = doc.get("instances")
    if not isinstance(insts, list) or not insts:
        raise TopoplanError(f"{where}: field 'instances': expected a non-empty list")
    instances = []
    for i, inst in enumerate(insts):
        f = f"{where}: field 'instances[{i}]"
        if not isinstance(inst, dict):
            raise TopoplanError(f"{f}': expected a mapping")
        inst = dict(inst)
        inst.setdefault("name", f"instance{i}")
        if not _is_name(inst["name"]):
            raise TopoplanError(f"{f}.name': expected a string, got {inst['name']!r}")
        if inst.get("options") is not None and not isinstance(inst["options"], dict):
            raise TopoplanError(f"{f}.options': expected a mapping of problem builder options")
        sets = inst.get("set", [])
        if isinstance(sets, str):
            sets = [sets]
        if not isinstance(sets, list) or not all(isinstance(s, str) and "=" in s for s in sets):
            raise TopoplanError(f"{f}.set': expected a list of dotted.key=value strings")
        inst["set"] = sets
        if doc.get("cell") is None:
            if not isinstance(inst.get("topology"), str):
                raise TopoplanError(f"{f}.topology': missing (a preset or file name)")
            if "traffic" in inst and not isinstance(inst["traffic"], str):
                raise TopoplanError(f"{f}.traffic': expected a traffic spec or file name")
            pl = inst.get("placement")
            if pl is not None and not isinstance(pl, str) and not (
                    isinstance(pl, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in pl)):
                raise TopoplanError(f"{f}.placement': expected sequential, round-robin, a placement file or a "
                                    f"list of node ids")
        instances.append(inst)
    names = [i["name"] for i in instances]
    if len(set(names)) != len(names):
        raise TopoplanError(f"{where}: field 'instances': duplicate name {_first_dup(names)!r}")
    raw_methods = doc.get("methods")
    if not isinstance(raw_methods, list) or not raw_methods:
        raise TopoplanError(f"{where}: field 'methods': expected a non-empty list")
    methods = []
    for i, m in enumerate(raw_methods):
        f = f"{where}: field 'methods[{i}]"
        if isinstance(m, str):
            m = {"name": m}
        if not isinstance(m, dict) or not isinstance(m.get("name"), str):
            raise TopoplanError(f"{f}': expected a method name or {{name, problem, options, label}}")
        m = dict(m)
        if not isinstance(m.setdefault("options", {}), dict):
            raise TopoplanError(f"{f}.options': expected a mapping")
        m.setdefault("label", m["name"])
        m.setdefault("problem", doc.get("problem"))
        if not _is_name(m["label"]):
            raise TopoplanError(f"{f}.label': expected a string, got {m['label']!r}")
        if m["problem"] is not None and not isinstance(m["problem"], str):
            raise TopoplanError(f"{f}.problem': expected a problem name, got {m['problem']!r}")
        if m["problem"] is None and doc.get("cell") is None:
            raise TopoplanError(f"{f}.problem': no problem for method {m['name']!r} (set 'problem' at the top)")
        methods.append(m)
    labels = [(m["problem"], m["label"]) for m in methods]
    if len(set(labels)) != len(labels):
        raise TopoplanError(f"{where}: field 'methods': two methods labelled {_first_dup(labels)[1]!r}; "
                            f"give them distinct 'label's")
    params = doc.get("parameters") or {}
    if not isinstance(params, dict):
        raise TopoplanError(f"{where}: field 'parameters': expected a mapping of name: value or [values]")
    grid = {}
    for k, v in params.items():
        vals = v if isinstance(v, list) else [v]
        if not vals:
            raise TopoplanError(f"{where}: field 'parameters.{k}': empty list")
        seen = [json.dumps(x, sort_keys=True, default=str) for x in vals]   # as cell_key sees them
        if len(set(seen)) != len(seen):   # the same cell twice: two rows with one key in the table
            raise TopoplanError(f"{where}: field 'parameters.{k}': value {vals[seen.index(_first_dup(seen))]!r} "
                                f"given twice")
        grid[str(k)] = vals
    sim_model = doc.get("sim_model") or {}
    if not isinstance(sim_model, dict):
        raise TopoplanError(f"{where}: field 'sim_model': expected a mapping of simulator model options")

    sim_keys = {k[4:]: v for k, v in grid.items() if k.startswith("sim.")}
    try:
        SimModel.from_options(**sim_model)
        for combo in itertools.product(*sim_keys.values()):
            SimModel.from_options(**{**sim_model, **dict(zip(sim_keys, combo))})
    except TopoplanError as exc:
        raise TopoplanError(f"{where}: field 'sim_model' or a 'sim.' parameter: {exc}") from None
    for hook in ("score", "cell"):
        h = doc.get(hook)
        if h is not None and (not isinstance(h, str) or ":" not in h):
            raise TopoplanError(f"{where}: field '{hook}': expected 'module:function'")
    out = doc.get("output") or f"{Path(where).stem}.csv"
    if is_stdout(out):   # '-' is standard output everywhere else; never a file named '-' beside the config
        raise TopoplanError(f"{where}: field 'output': '-': {TABLE_NOT_STDOUT}")
    out = Path(out)
    if not out.is_absolute() and base is not None:
        out = base / out
    return SweepConfig(name=name, instances=instances, methods=methods, parameters=grid, output=out,
                       problem=doc.get("problem"), base=str(base) if base is not None else None, simulate=bool(doc.get("simulate", True)),
                       score=doc.get("score"), cell=doc.get("cell"), source=where, sim_model=dict(sim_model))


INSTANCE_KEYS = ("name", "topology", "traffic", "set", "placement", "options")
METHOD_KEYS = ("name", "label", "problem", "options")


def check_config(cfg: SweepConfig, *, any_inputs: bool = False, warn: Callable[[str], None] | None = None) -> None:
    """Catch, before any cell runs, the mistakes that would fail every cell of a row or column:
    unknown keys, presets, topology overrides, traffic specs, problems and methods, and bad seeds or
    time limits; and a placement file made for other inputs than its instance's (the topology of every
    ``set.`` combination, the traffic: its recorded fingerprints), as the commands refuse one given with
    ``-p``. Raises :class:`TopoplanError` naming the sweep file and field.

    Only the default cell is checked this deeply; a custom ``cell:`` hook gets its fields as given.

    Parameters
    ----------
    cfg : SweepConfig
    any_inputs : bool, optional
        Use a placement file made for other inputs (``topoplan sweep --any-inputs``); its seed is still checked.
    warn : callable, optional
        Told (one line) of a placement file that records no inputs, used unchecked.

    Raises
    ------
    TopoplanError

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> doc = {"name": "demo", "output": "demo.csv", "problem": "circuits",
    ...        "instances": [{"name": "n", "topology": "paper003", "set": ["ocs.nodes_per_switch=2"],
    ...                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB"}],
    ...        "methods": ["none", "three-step"], "parameters": {"seed": 0}}
    >>> cfg = parse_config(doc, "demo.yaml", base=Path(tmp.name))
    >>> check_config(cfg)
    >>> cfg.methods[1]["options"] = {"max_step": 5}
    >>> check_config(cfg)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: demo.yaml: ...unknown option 'max_step'...
    """
    import math

    where = cfg.source
    for k, vals in cfg.parameters.items():
        for v in vals:
            if k == "seed" and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise TopoplanError(f"{where}: field 'parameters.seed': {v!r} is not a non-negative integer")
            if k == "time_limit" and v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                                        or not 0 < v <= MAX_TIME_LIMIT_S or math.isnan(v)):
                raise TopoplanError(f"{where}: field 'parameters.time_limit': {v!r} is not a positive number of "
                                    f"seconds up to {MAX_TIME_LIMIT_S:g}")
    if cfg.cell:
        return

    _, _, grid_prob, grid_opts = split_params({k: None for k in cfg.parameters})
    builders = {}
    for i, m in enumerate(cfg.methods):
        f = f"{where}: field 'methods[{i}]"
        extra = sorted(set(m) - set(METHOD_KEYS))
        if extra:
            raise TopoplanError(f"{f}.{extra[0]}': unknown key (known: {', '.join(METHOD_KEYS)})")
        try:
            mod, builders[m["problem"]] = problem_module(m["problem"])
        except TopoplanError as exc:   # named by the file and the field it came from, as every other field is
            field_ = "problem" if m["problem"] == cfg.problem else f"methods[{i}].problem"
            raise TopoplanError(f"{where}: field '{field_}': {exc}") from None
        known = getattr(mod, "METHODS", None)
        if known is not None and m["name"] not in known:
            raise TopoplanError(f"{f}.name': unknown {m['problem']} method {m['name']!r} "
                                f"(methods: {', '.join(known)})")
        declared = _declared(known[m["name"]]) if known is not None else None
        if declared is not None:   # a mistyped option would otherwise fail (or be ignored) in every cell
            for key in m["options"]:
                _check_option(key, declared, f"{f}.options.{key}'", f"{m['problem']} method {m['name']!r}")
            for key in grid_opts:
                _check_option(key, declared, f"{where}: field 'parameters.{key}'",
                              f"{m['problem']} method {m['name']!r}")
    set_params = {k[4:]: v for k, v in cfg.parameters.items() if k.startswith("set.")}
    for i, inst in enumerate(cfg.instances):
        f = f"{where}: field 'instances[{i}]"
        extra = sorted(set(inst) - set(INSTANCE_KEYS))
        if extra:
            raise TopoplanError(f"{f}.{extra[0]}': unknown key (known: {', '.join(INSTANCE_KEYS)})")
        for problem, build in builders.items():
            declared = _declared(build, skip=("topology", "traffic", "placement"))
            if declared is not None:
                for key in inst.get("options") or {}:
                    _check_option(key, declared, f"{f}.options.{key}'", f"the {problem} problem builder")
                for key in grid_prob:
                    _check_option(key, declared, f"{where}: field 'parameters.problem.{key}'",
                                  f"the {problem} problem builder")
            if inst.get("traffic") is None and _required(build, "traffic"):
                raise TopoplanError(f"{f}.traffic': missing: a {problem} problem needs traffic (a generator spec "
                                    f"or a file)")
        topo_spec = _local(inst["topology"], cfg.base)
        try:
            load_topology(topo_spec, inst["set"])
            for key, vals in set_params.items():
                for v in vals:
                    load_topology(topo_spec, inst["set"] + [f"{key}={_yaml_value(v)}"])
        except TopoplanError as exc:
            raise TopoplanError(f"{f}.topology': {exc}") from None
        if inst.get("traffic") is None:
            if isinstance(inst.get("placement"), str):
                raise TopoplanError(f"{f}.placement': a placement spec needs traffic; without traffic give the "
                                    f"placement as a list of node ids")
            continue
        traffic = _local(inst["traffic"], cfg.base)
        if generators.is_spec(traffic):
            try:
                generators.parse_spec(traffic)  # cheap next to the cells, and catches np=-1 once, not per cell
            except TopoplanError as exc:
                raise TopoplanError(f"{f}.traffic': {exc}") from None
        elif not Path(traffic).exists():
            raise TopoplanError(f"{f}.traffic': {traffic!r} is neither a file nor a generator spec "
                                f"(generators: {', '.join(generators.GENERATORS)})")
        pl = inst.get("placement", "sequential")
        if isinstance(pl, str) and pl not in ("sequential", "round-robin"):
            if not Path(_local(pl, cfg.base)).is_file():
                raise TopoplanError(f"{f}.placement': {pl!r} is not sequential, round-robin or a placement file")
            _check_placement_file(f"{f}.placement'", inst, topo_spec, traffic, set_params, cfg.base,
                                  any_inputs=any_inputs, warn=warn)


def _check_placement_file(field_: str, inst: dict, topo_spec: str, traffic: str, set_params: dict, base, *,
                          any_inputs: bool, warn) -> None:
    """Refuse an instance's placement file made for other inputs than the instance's (``field_`` names the sweep
    file and field): its topology under every combination of the ``set.`` parameters, and its traffic (read
    only when the file records its inputs)."""
    spec = inst["placement"]
    try:
        doc = plan_file_document(_local(spec, base))
    except TopoplanError as exc:
        raise TopoplanError(f"{field_}: {exc}") from None
    if doc is None:   # a placement CSV: read (and checked for ranks and cores) by the cells
        return
    loaded = []

    def traffic_():
        if not loaded:
            loaded.append(load_source(traffic)[1])
        return loaded[0]

    for combo in itertools.product(*set_params.values()):
        sets = [f"{k}={_yaml_value(v)}" for k, v in zip(set_params, combo)]
        at = f" (in the cells with {', '.join('set.' + x for x in sets)})" if sets else ""
        if not check_recorded_inputs(doc, f"{field_}: {spec}{at}", name=f"{field_}: {spec}", any_inputs=any_inputs,
                                     topology=load_topology(topo_spec, inst["set"] + sets), traffic=traffic_):
            if warn is not None:
                warn(f"{field_}: {spec} records no inputs: not checked against the topology and traffic")
            return
        if any_inputs:   # (the seed is checked once)
            return


def _is_name(x) -> bool:
    """A name of an instance or label of a method: a string, or a number YAML read from an unquoted one."""
    return isinstance(x, (str, int)) and not isinstance(x, bool)


def _first_dup(items):
    seen = set()
    for x in items:
        if x in seen:
            return x
        seen.add(x)
    return None


def cell_key(cell: dict) -> str:
    """Stable hash of what defines a cell (instance, method, parameters, hooks).

    Parameters
    ----------
    cell : dict
        A cell of :func:`expand_cells` (its ``key`` is ignored).

    Returns
    -------
    str
        16 hex digits.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> doc = {"name": "demo", "output": "demo.csv", "problem": "circuits",
    ...        "instances": [{"name": "n", "topology": "paper003", "set": ["ocs.nodes_per_switch=2"],
    ...                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB"}],
    ...        "methods": ["none", "three-step"], "parameters": {"seed": 0}}
    >>> cfg = parse_config(doc, "demo.yaml", base=Path(tmp.name))
    >>> cells = expand_cells(cfg)
    >>> cell_key(cells[0]) == cells[0]["key"], cells[0]["key"] != cells[1]["key"], len(cells[0]["key"])
    (True, True, 16)
    """
    ident = {"v": KEY_VERSION, "instance": cell["instance"], "method": cell["method"], "params": cell["params"],
             "simulate": cell["simulate"], "score": cell["score"], "cell": cell["cell"],
             "sim_model": cell.get("sim_model") or {}}
    raw = json.dumps(ident, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(raw.encode("utf-8")).hexdigest()[:16]


def expand_cells(cfg: SweepConfig) -> list[dict]:
    """All cells of the grid, each with its ``key``.

    Parameters
    ----------
    cfg : SweepConfig

    Returns
    -------
    list of dict
        Instances x methods x parameter combinations, in that nesting order.

    Examples
    --------
    >>> cfg = parse_config({"instances": [{"name": "a"}], "methods": ["m1", "m2"],
    ...                     "parameters": {"seed": [0, 1]}, "cell": "mod:fn"})
    >>> [(c["method"]["name"], c["params"]["seed"]) for c in expand_cells(cfg)]
    [('m1', 0), ('m1', 1), ('m2', 0), ('m2', 1)]
    """
    names = list(cfg.parameters)
    combos = list(itertools.product(*(cfg.parameters[n] for n in names))) if names else [()]
    cells = []
    for inst in cfg.instances:
        files = _instance_files(inst, cfg.base)
        for meth in cfg.methods:
            for combo in combos:
                cell = {"instance": inst, "method": meth, "params": dict(zip(names, combo)),
                        "simulate": cfg.simulate, "score": cfg.score, "cell": cfg.cell,
                        "sim_model": cfg.sim_model or {}}
                cell["key"] = cell_key(cell)
                # not part of the key (moving the sweep keeps its results): where the files are, found here,
                # before the cell is shipped to a worker that may run in another directory or on another host
                cell["base"] = cfg.base
                cell["files"] = files
                cells.append(cell)
    return cells


def _instance_files(inst: dict, base) -> dict:
    """Absolute paths of the files an instance names (topology, traffic, placement): beside the sweep file
    first, else as given (relative to the working directory); presets and generator specs are not files."""
    out = {}
    for key in ("topology", "traffic", "placement"):
        spec = inst.get(key)
        if isinstance(spec, str) and spec:
            found = _local(spec, base)
            if Path(found).exists():
                out[key] = str(Path(found).absolute())
    return out


# -- one cell -----------------------------------------------------------------------------

def resolve(spec: str) -> Callable:
    """``'package.module:function'`` -> the function (imported now; on a worker, there).

    Parameters
    ----------
    spec : str

    Returns
    -------
    callable

    Raises
    ------
    TopoplanError
        For a malformed spec, a module that cannot be imported or a missing function.

    Examples
    --------
    >>> resolve("topoplan.core.units:parse_size")("4MB")
    4000000.0
    """
    mod, _, attr = spec.partition(":")
    try:
        obj = importlib.import_module(mod)
    except ImportError as exc:
        raise TopoplanError(f"cannot import {mod!r} for {spec!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TopoplanError(f"{mod} has no {attr!r} (from {spec!r})")
        obj = getattr(obj, part)
    return obj


def problem_module(name: str):
    """``(module, build)`` of a planning problem: a name from :data:`PROBLEMS` or a dotted module path.

    Every problem module has ``build(topology, traffic, placement=None, **options)`` and ``solve``.

    Parameters
    ----------
    name : str

    Returns
    -------
    module : module
    build : callable

    Raises
    ------
    TopoplanError
        For an unknown problem or a module without ``build`` and ``solve``.

    Examples
    --------
    >>> module, build = problem_module("placement")
    >>> module.__name__, build.__qualname__
    ('topoplan.problems.placement', 'PlacementProblem.build')
    """
    path = PROBLEMS.get(name, name)
    try:
        mod = importlib.import_module(path)
    except ImportError as exc:
        known = f"not one of {', '.join(PROBLEMS)}, and " if name not in PROBLEMS else ""
        raise TopoplanError(f"problem {name!r}: {known}cannot import module {path} ({exc})") from None
    for attr in ("build", "solve"):
        if not callable(getattr(mod, attr, None)):
            raise TopoplanError(f"problem {name!r}: {path} has no {attr}() (a problem module has "
                                f"build(topology, traffic, placement=None, **options) and solve())")
    return mod, mod.build


def _declared(fn, skip=("time_limit", "seed")) -> tuple[str, ...] | None:
    """The keyword options ``fn`` declares, or None when it takes ``**kwargs`` (then anything goes)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return declared_options(fn, skip=skip)


def _required(fn, name: str) -> bool:
    import inspect

    p = inspect.signature(fn).parameters.get(name)
    return p is not None and p.default is inspect.Parameter.empty


def _check_option(key: str, known, where: str, what: str) -> None:
    if key not in known:
        raise TopoplanError(f"{where}: unknown option {key!r} for {what}; known: {', '.join(known) or '(none)'}")


def split_params(params: dict) -> tuple[list[str], dict, dict, dict]:
    """Parameters -> (topology overrides ``set.*``, {seed, time_limit}, problem options ``problem.*``,
    method options (the rest)); simulator model options ``sim.*`` are taken by :func:`cell_model`.

    Parameters
    ----------
    params : dict
        One cell's parameters.

    Returns
    -------
    overrides : list of str
    solve_options, problem_options, method_options : dict

    Examples
    --------
    >>> split_params({"seed": 1, "set.ocs.nodes_per_switch": 2, "problem.hop_limit": 1, "max_steps": 5,
    ...               "sim.relay": "pipelined"})
    (['ocs.nodes_per_switch=2'], {'seed': 1}, {'hop_limit': 1}, {'max_steps': 5})
    """
    sets = [f"{k[4:]}={_yaml_value(v)}" for k, v in params.items() if k.startswith("set.")]
    common = {k: params[k] for k in RESERVED_PARAMS if k in params}
    prob = {k[8:]: v for k, v in params.items() if k.startswith("problem.")}
    opts = {k: v for k, v in params.items()
            if not k.startswith(("set.", "problem.", "sim.")) and k not in RESERVED_PARAMS}
    return sets, common, prob, opts


def cell_model(cell: dict):
    """The :class:`topoplan.sim.simmodel.SimModel` of a cell: the sweep's ``sim_model`` with its ``sim.*`` parameters.

    Parameters
    ----------
    cell : dict

    Returns
    -------
    SimModel

    Examples
    --------
    >>> cell_model({"sim_model": {"model": "paper"}, "params": {"sim.relay": "store-and-forward"}}).label()
    'paper, store-and-forward relays, link contention'
    """
    over = {k[4:]: v for k, v in cell["params"].items() if k.startswith("sim.")}
    return SimModel.from_options(**{**(cell.get("sim_model") or {}), **over})


def _yaml_value(v) -> str:
    if isinstance(v, (list, dict, bool)) or v is None:
        return json.dumps(v)
    return str(v)


def run_cell(cell: dict) -> dict:
    """The default cell: load the instance, plan with the method, simulate the plan, score it.

    Returns the row (a flat dict): the plan's ``objective``, ``status``,
    ``bound``, ``gap`` and ``plan_wall_s``, its metrics as ``metric.<name>``,
    the simulated ``makespan_s`` (when ``simulate`` and the problem has a
    simulator in :data:`SIMULATORS`) and the score hook's columns; ``score``
    is the makespan (else the objective) unless the hook sets it.

    Parameters
    ----------
    cell : dict
        A cell of :func:`expand_cells`.

    Returns
    -------
    dict

    Raises
    ------
    TopoplanError
        For bad input (:func:`execute` turns it into the ``error`` column).

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> doc = {"name": "demo", "output": "demo.csv", "problem": "circuits",
    ...        "instances": [{"name": "n", "topology": "paper003", "set": ["ocs.nodes_per_switch=2"],
    ...                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB"}],
    ...        "methods": ["none", "three-step"], "parameters": {"seed": 0}}
    >>> cfg = parse_config(doc, "demo.yaml", base=Path(tmp.name))
    >>> row = run_cell(expand_cells(cfg)[1])                  # three-step
    >>> row["status"], round(row["objective"], 4), round(row["makespan_s"], 4), row["metric.circuits_used"]
    ('heuristic', 0.0416, 0.0416, 3)
    """
    inst, meth, params = cell["instance"], cell["method"], cell["params"]
    sets, common, prob_opts, opts = split_params(params)
    base, files = cell.get("base"), cell.get("files") or {}
    mod, build = problem_module(meth["problem"])   # fail fast when the problem module is missing
    spec = inst.get("placement")
    traffic_spec = inst.get("traffic")

    def where(key, given):   # the file found where the sweep started (expand_cells), else looked up here
        return files.get(key) or _local(given, base)

    topo, trace, traffic, placement = load_inputs(where("topology", inst["topology"]), inst["set"] + sets,
                                                  None if traffic_spec is None else where("traffic", traffic_spec),
                                                  where("placement", spec) if isinstance(spec, str) else None)
    if spec is None or isinstance(spec, list):   # none given (the builder's default), or node ids as they are
        placement = spec
    build_opts = {**(inst.get("options") or {}), **prob_opts}
    steps = build_opts.pop("steps", True)
    if not isinstance(steps, bool):
        raise TopoplanError(f"field 'steps': expected true or false, got {steps!r}")
    # on a trace, the methods that follow an application's steps plan on them, as the commands do
    uses = getattr(mod, "uses_steps", None)
    on_steps = steps and trace is not None and uses is not None and uses(meth["name"])
    if on_steps:
        build_opts["steps"] = cached_steps(where("traffic", traffic_spec), trace)
    problem = build(topo, traffic, placement, **build_opts)
    model = cell_model(cell)
    extra = {"sim_model": model} if _accepts(mod.solve, "sim_model") else {}
    if on_steps and _accepts(mod.solve, "trace"):
        extra["trace"] = trace
    res = mod.solve(problem, method=meth["name"], time_limit=common.get("time_limit"), seed=common.get("seed", 0),
                    **extra, **{**meth["options"], **opts})
    row = {"status": res.status, "objective": res.objective, "bound": res.bound, "gap": res.gap,
           "plan_wall_s": res.wall_s}
    for k, v in (res.metrics or {}).items():
        if isinstance(v, (int, float, str, bool)) or v is None:
            row[f"metric.{k}"] = v
    ctx = {"cell": cell, "result": res, "topo": topo, "trace": trace, "traffic": traffic, "placement": placement,
           "model": model}
    sim = SIMULATORS.get(meth["problem"]) if cell["simulate"] else None
    if sim is not None:
        row.update(sim(**ctx))
        row.update({f"sim.{k}": v for k, v in model.to_dict().items()})
    row["score"] = row.get("makespan_s", res.objective)
    if cell["score"]:
        row.update(resolve(cell["score"])(**ctx) or {})
    return row


# The steps of the traces the cells of this process planned on, newest last: the cells of a sweep share their
# instances' traces, and finding a trace's steps takes seconds to a minute (topoplan.sim.steps).
_STEPS: dict = {}
_STEPS_KEPT = 4


def cached_steps(source: str, trace):
    """The steps of ``trace`` (:func:`topoplan.sim.steps.source_steps` of its ``source``), found once per process
    for the same source and trace (the last :data:`_STEPS_KEPT` are kept).

    Parameters
    ----------
    source : str
        The traffic as the instance gives it (a generator spec or a file).
    trace : Trace

    Returns
    -------
    topoplan.sim.steps.Steps or None

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> t = parse_spec("ring:np=4,bytes=1MB,iters=3")
    >>> cached_steps("ring:np=4,bytes=1MB,iters=3", t) is cached_steps("ring:np=4,bytes=1MB,iters=3", t)
    True
    """
    key = (str(source), fingerprint_trace(trace))
    if key not in _STEPS:
        _STEPS[key] = source_steps(str(source), trace)
        while len(_STEPS) > _STEPS_KEPT:
            _STEPS.pop(next(iter(_STEPS)))
    return _STEPS[key]


def _accepts(fn, name: str) -> bool:
    import inspect

    params = inspect.signature(fn).parameters.values()
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def _local(spec: str, base) -> str:
    """A relative file name is looked up beside the sweep file first."""
    if base and spec and not Path(spec).is_absolute() and (Path(base) / spec).exists():
        return str(Path(base) / spec)
    return spec


def _replay_trace(trace, traffic, topo, plan):
    """The trace to replay: the instance's, else its matrix as one bulk phase (with circuits, the small messages
    kept below the threshold the replay uses, the plan's or the OCS bandwidth-delay product, as the planner
    counts them)."""
    if trace is not None:
        return trace
    thr = circuit_threshold_B(topo, plan.get("threshold_B")) if plan.get("circuits") else None
    return bulk_trace(traffic, 1, threshold_B=thr)


def simulate_plan_cell(*, result, topo, trace, traffic, placement, model=None, **_) -> dict:
    """Score a circuit or placement plan: replay the traffic with the plan (:func:`topoplan.sim.run.simulate_plan`).

    Parameters
    ----------
    result : PlanResult
    topo : Topology
    trace : Trace or None
        The instance's trace; None replays the traffic as one bulk phase.
    traffic : Traffic
    placement : Placement or None
    model : SimModel, optional
    **_
        Other cell fields, ignored (hooks get them all).

    Returns
    -------
    dict
        ``makespan_s`` and the simulator's other scalar results.

    Examples
    --------
    >>> from topoplan.problems.circuits import build, solve
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_source
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=2"])
    >>> trace, traffic = load_source("neighbor2d:rows=16,cols=16,bytes=4MB")
    >>> result = solve(build(topo, traffic), "three-step")
    >>> out = simulate_plan_cell(result=result, topo=topo, trace=trace, traffic=traffic, placement=None)
    >>> round(out["makespan_s"], 4)
    0.0416
    """
    plan = result.to_dict()
    given = None if plan.get("rank_to_node") is not None else placement
    res = simulate_plan(topo, _replay_trace(trace, traffic, topo, plan), plan, placement=given, model=model)
    return {"makespan_s": res["makespan_s"], "sim_wall_s": res["wall_s"]}


# Simulation of each problem's plan (problems without one are scored by their objective or a hook).
SIMULATORS: dict[str, Callable] = {"circuits": simulate_plan_cell, "placement": simulate_plan_cell}


def execute(cell: dict) -> dict:
    """Run one cell on a worker and always return a row (errors become the ``error`` column).

    Parameters
    ----------
    cell : dict

    Returns
    -------
    dict
        The row, with ``key``, ``instance``, ``problem``, ``method``, ``param.*``,
        ``cell_wall_s``, ``worker`` and ``error``.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> doc = {"name": "demo", "output": "demo.csv", "problem": "circuits",
    ...        "instances": [{"name": "n", "topology": "paper003", "set": ["ocs.nodes_per_switch=2"],
    ...                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB"}],
    ...        "methods": ["none", "three-step"], "parameters": {"seed": 0}}
    >>> cfg = parse_config(doc, "demo.yaml", base=Path(tmp.name))
    >>> cell = expand_cells(cfg)[0]
    >>> cell["instance"]["topology"] = "nosuch"
    >>> execute(cell)["error"]  # doctest: +ELLIPSIS
    "TopoplanError: unknown topology preset 'nosuch' (presets: ...; or give a file)"
    """
    import socket

    t0 = time.perf_counter()
    row = {"key": cell["key"], "instance": cell["instance"].get("name"), "problem": cell["method"].get("problem"),
           "method": cell["method"]["label"]}
    row.update({f"param.{k}": v for k, v in cell["params"].items()})
    try:
        fn = resolve(cell["cell"]) if cell["cell"] else run_cell
        out = fn(cell)
        if not isinstance(out, dict):
            raise TopoplanError(f"cell function returned {type(out).__name__}, expected a dict")
        row.update(out)
        row["error"] = ""
    except Exception as exc:  # one failed cell must not stop the sweep
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
    row["cell_wall_s"] = time.perf_counter() - t0
    row["worker"] = socket.gethostname()
    return row


# -- the table ----------------------------------------------------------------------------

def table_format(path) -> str:
    """``parquet`` when the output name ends in ``.parquet`` (pyarrow needed), else ``csv``.

    Parameters
    ----------
    path : str or path

    Returns
    -------
    str

    Raises
    ------
    TopoplanError
        For ``.parquet`` without pyarrow.

    Examples
    --------
    >>> table_format("results/run.parquet"), table_format("results/run.csv")
    ('parquet', 'csv')
    """
    path = Path(path)
    if path.suffix.lower() != ".parquet":
        return "csv"
    if not have_parquet():
        raise TopoplanError(f"{extra_message('parquet', f'output {path}: Parquet')}; or name the output .csv")
    return "parquet"


def read_table(path: Path):
    """Finished rows of a previous run (CSV or Parquet, by the name's suffix), or None.

    Parameters
    ----------
    path : pathlib.Path

    Returns
    -------
    pandas.DataFrame or None
        None when the file does not exist.

    Raises
    ------
    TopoplanError
        For a file that cannot be read as a sweep table.

    Examples
    --------
    >>> import pandas as pd, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "t.csv"
    >>> read_table(path) is None
    True
    >>> write_table(pd.DataFrame({"key": ["a"], "score": [1.5]}), path) == [str(path)]
    True
    >>> read_table(path).to_dict("records")
    [{'key': 'a', 'score': 1.5}]
    """
    import pandas as pd

    path = Path(path)
    fmt = table_format(path)
    if not path.is_file():
        return None
    if fmt == "parquet":
        try:
            df = pd.read_parquet(path)
        except Exception as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TopoplanError(f"{path}: cannot read the previous sweep table ({msg}); move it away to start "
                                "over") from None
    else:   # the strict reader, as for every CSV input: an error names the line
        try:
            df = read_csv_table(path, (), "sweep table")
        except TopoplanError as exc:
            raise TopoplanError(f"{exc}; move the previous sweep table away to start over") from None
    if "key" not in df.columns:
        # an unrelated table: a sweep would overwrite it with its own rows
        raise TopoplanError(f"{path}: exists and is not a sweep table (no 'key' column); choose another output "
                            "or move it away")
    keys = df["key"].astype(str)
    again = keys.duplicated(keep="first").to_numpy()
    if again.any():   # a sweep writes a cell once: one of the two rows would silently stand for the cell
        i = int(again.argmax())
        j = int((keys == keys.iloc[i]).to_numpy().argmax())
        at = (f"{path}:{row_line(df, i)}", f"line {row_line(df, j)}") if fmt != "parquet" else \
            (f"{path}: row {i + 1}", f"row {j + 1}")
        raise TopoplanError(f"{at[0]}: field 'key': cell {keys.iloc[i]} is listed twice (first at {at[1]}); "
                            "move the previous sweep table away to start over")
    return df.reset_index(drop=True)


def have_parquet() -> bool:
    return missing_extra("parquet") is None


def _parquet_ready(df):
    """Parquet needs one type per column: object columns of numbers (and gaps) become floats, the
    others strings with gaps as '' (as the CSV reads back)."""
    import pandas as pd

    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_string_dtype(out[c].dtype) and out[c].dtype != object:
            out[c] = out[c].fillna("")     # pandas' str dtype: gaps as '' like the CSV
            continue
        if out[c].dtype != object:
            continue
        col = out[c]
        gap = col.isna()
        num = pd.to_numeric(col[~gap], errors="coerce")
        if len(num) and num.notna().all() and not col[~gap].map(lambda v: isinstance(v, (str, bool))).any():
            out[c] = pd.to_numeric(col, errors="coerce").astype("float64")
        else:
            out[c] = col.map(lambda v: "" if v is None or (isinstance(v, float) and v != v) else str(v))
    return out


def write_table(df, path: Path) -> list[str]:
    """Write the table atomically: Parquet when the name ends in ``.parquet``, else CSV. Returns the files written.

    Parameters
    ----------
    df : pandas.DataFrame
    path : pathlib.Path

    Returns
    -------
    list of str

    Examples
    --------
    >>> import pandas as pd, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "t.csv"
    >>> write_table(pd.DataFrame({"key": ["a"], "score": [1.5]}), path) == [str(path)]
    True
    >>> print(path.read_text(), end="")
    key,score
    a,1.5
    """
    import io as _io

    path = Path(path)
    if table_format(path) == "parquet":
        buf = _io.BytesIO()
        _parquet_ready(df).to_parquet(buf, index=False)
        atomic_write(path, buf.getvalue(), binary=True)
    else:
        sbuf = _io.StringIO()
        df.to_csv(sbuf, index=False)
        atomic_write(path, sbuf.getvalue())
    return [str(path)]


def _order_columns(df, cfg_params):
    params = [f"param.{p}" for p in cfg_params if f"param.{p}" in df.columns]
    first = ["key", "instance", "problem", "method"] + params
    base = [c for c in BASE_COLUMNS if c in df.columns and c not in first]
    rest = sorted(c for c in df.columns if c not in first and c not in base)
    return df[[c for c in first if c in df.columns] + base + rest]


# -- running -------------------------------------------------------------------------------

@dataclass
class SweepOutcome:
    """What :func:`run_sweep` did.

    Parameters
    ----------
    table : pandas.DataFrame
        All rows (previous and new).
    total, skipped, ran, failed : int
        Cells in the grid, kept from an earlier run, run now, failed now.
    files : list of str
        Files written.
    wall_s : float
    errors : dict of str to int, optional
        Why the cells that failed now failed: each error message with the number of cells it ended.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> doc = {"name": "demo", "output": "demo.csv", "problem": "circuits",
    ...        "instances": [{"name": "n", "topology": "paper003", "set": ["ocs.nodes_per_switch=2"],
    ...                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB"}],
    ...        "methods": ["none", "three-step"], "parameters": {"seed": 0}}
    >>> cfg = parse_config(doc, "demo.yaml", base=Path(tmp.name))
    >>> out = run_sweep(cfg, processes=False, workers=1, progress=False)
    >>> out.total, out.ran, out.failed, out.table.shape[0]
    (2, 2, 0, 2)
    >>> run_sweep(cfg, processes=False, workers=1, progress=False).skipped   # finished cells are kept
    2
    """

    table: object            # pandas.DataFrame of all rows (previous and new)
    total: int
    skipped: int
    ran: int
    failed: int
    files: list[str]
    wall_s: float
    errors: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"cells": self.total, "skipped": self.skipped, "ran": self.ran, "failed": self.failed,
                "files": self.files, "wall_s": self.wall_s, "errors": dict(self.errors)}

    def failure_line(self, name: str = "sweep", most: int = 3) -> str:
        """One line saying how many cells failed and why (the commonest reasons first), or '' when none did.

        Examples
        --------
        >>> out = SweepOutcome(table=None, total=4, skipped=0, ran=4, failed=3, files=[], wall_s=1.0,
        ...                    errors={"TopoplanError: no such file 'a.yaml'": 2, "ValueError: x": 1})
        >>> out.failure_line("demo")
        "sweep demo: 3 of 4 cells failed: 2 x TopoplanError: no such file 'a.yaml'; 1 x ValueError: x"
        """
        if not self.failed:
            return ""
        reasons = sorted(self.errors.items(), key=lambda kv: -kv[1])
        text = "; ".join(f"{n} x {msg}" for msg, n in reasons[:most])
        if len(reasons) > most:
            text += f"; and {len(reasons) - most} other reasons (column 'error' of the table)"
        return f"sweep {name}: {self.failed} of {self.ran} cells failed: {text}"


def make_client(scheduler: str | None = None, *, workers: int | None = None, threads_per_worker: int = 1,
                processes: bool = True):
    """A Dask client: on ``scheduler`` (``tcp://host:8786``) or on a new LocalCluster.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler.
    workers : int, optional
        Workers of a new LocalCluster.
    threads_per_worker : int, optional
    processes : bool, optional
        False: threads in this process.

    Returns
    -------
    client : dask.distributed.Client
    cluster : dask.distributed.LocalCluster or None
        Close both when done.

    Examples
    --------
    >>> client, cluster = make_client(workers=1, processes=False)
    >>> client.submit(sum, [1, 2]).result()
    3
    >>> client.close(); cluster.close()
    """
    distributed = require("dask", "topoplan sweep (it runs on Dask)")
    Client, LocalCluster = distributed.Client, distributed.LocalCluster
    if scheduler:
        try:
            return Client(scheduler, timeout="20s"), None
        except (OSError, ValueError, TypeError) as exc:
            raise TopoplanError(f"field 'scheduler': {scheduler}: cannot connect ({exc}); expected an address such as "
                                "tcp://host:8786") from None
    # worker processes ignore SIGINT (topoplan.batch._worker_signals): Ctrl-C is this process's to handle
    extra = {"preload": ["topoplan.batch._worker_signals"]} if processes else {}
    cluster = LocalCluster(n_workers=workers, threads_per_worker=threads_per_worker, processes=processes,
                           dashboard_address=":0", silence_logs=40, **extra)   # any free port: sweeps run side by side
    return Client(cluster), cluster


def run_sweep(cfg: SweepConfig, *, scheduler: str | None = None, workers: int | None = None,
              threads_per_worker: int = 1, processes: bool = True, progress: bool = True, console=None,
              flush_s: float = 5.0, client=None, limit: int | None = None, any_inputs: bool = False,
              warn: Callable[[str], None] | None = None) -> SweepOutcome:
    """Run the cells of ``cfg`` that are not in its output table yet, on Dask, and write the table.

    Parameters
    ----------
    cfg : from :func:`load_config`.
    scheduler : address of a running Dask scheduler; None starts a LocalCluster
        of ``workers`` processes (``processes=False``: threads) with
        ``threads_per_worker`` threads each.
    progress : show a Rich progress bar (on ``console``).
    flush_s : rewrite the table at most this often while cells finish (and at the end),
        so an interrupted sweep keeps its finished cells.
    client : an existing ``dask.distributed.Client`` to use instead.
    limit : run at most this many of the pending cells.
    any_inputs, warn : as :func:`check_config` takes them (a placement file made for other inputs).

    Returns
    -------
    SweepOutcome
        The table has one row per cell in grid order, then any finished rows
        of an earlier grid, which are never dropped.

    Raises
    ------
    TopoplanError
        For a bad config (:func:`check_config`) or an output that cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> doc = {"name": "demo", "output": "demo.csv", "problem": "circuits",
    ...        "instances": [{"name": "n", "topology": "paper003", "set": ["ocs.nodes_per_switch=2"],
    ...                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB"}],
    ...        "methods": ["none", "three-step"], "parameters": {"seed": 0}}
    >>> cfg = parse_config(doc, "demo.yaml", base=Path(tmp.name))
    >>> out = run_sweep(cfg, processes=False, workers=1, progress=False)
    >>> out.table[["method", "status"]].values.tolist()
    [['none', 'heuristic'], ['three-step', 'heuristic']]
    >>> [round(x, 4) for x in out.table["makespan_s"]]
    [0.0512, 0.0416]
    """
    import pandas as pd

    t0 = time.perf_counter()
    table_format(cfg.output)     # fail before any work when the output cannot be written
    check_config(cfg, any_inputs=any_inputs, warn=warn)
    with table_lock(cfg.output):   # a second sweep on the same table would lose the first one's rows
        return _run_locked(cfg, t0, scheduler=scheduler, workers=workers, threads_per_worker=threads_per_worker,
                           processes=processes, progress=progress, console=console, flush_s=flush_s, client=client,
                           limit=limit)


@contextmanager
def table_lock(path):
    """Hold an exclusive lock on a sweep table while a sweep reads and rewrites it.

    The lock is ``flock`` on a hidden file beside the table (``.NAME.lock``, removed at the end);
    a second sweep on the same table fails at once, naming the table, instead of overwriting the
    first one's rows with its own.

    Parameters
    ----------
    path : str or path
        The table.

    Yields
    ------
    None

    Raises
    ------
    TopoplanError
        When another process holds the lock.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> table = Path(tmp.name) / "t.csv"
    >>> with table_lock(table):
    ...     with table_lock(table):               # doctest: +ELLIPSIS
    ...         pass
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../t.csv: another sweep is writing this table (...); wait for it to finish or choose another output
    """
    import fcntl

    path = Path(path)
    lock = path.parent / f".{path.name}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise TopoplanError(f"{path}: cannot lock the table ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = ""
            try:
                holder = os.pread(fd, 32, 0).decode().strip()
            except (OSError, UnicodeDecodeError):
                pass
            os.close(fd)
            raise TopoplanError(f"{path}: another sweep is writing this table (lock {lock.name}"
                                f"{', process ' + holder if holder else ''}); wait for it to finish or choose "
                                "another output") from None
        try:   # the file may have been removed by the previous holder after we opened it: lock the current one
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except OSError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        try:
            os.unlink(lock)
        except OSError:
            pass
        os.close(fd)


def _run_locked(cfg, t0, *, scheduler, workers, threads_per_worker, processes, progress, console, flush_s, client,
                limit) -> SweepOutcome:
    import pandas as pd

    cells = expand_cells(cfg)
    keys = [c["key"] for c in cells]
    prev = read_table(cfg.output)
    done: dict[str, dict] = {}
    kept: dict[str, dict] = {}    # finished rows of cells no longer in the grid: never thrown away
    grid = set(keys)
    if prev is not None and "key" in prev.columns:
        for rec in prev.to_dict("records"):
            err = rec.get("error")
            if isinstance(err, str) and err.strip():
                continue   # failed before: run it again
            (done if str(rec["key"]) in grid else kept)[str(rec["key"])] = rec
    todo = [c for c in cells if c["key"] not in done]
    if limit is not None:
        todo = todo[:max(limit, 0)]
    rows: dict[str, dict] = dict(done)
    failed = 0
    errors: dict[str, int] = {}
    files: list[str] = []

    def flush():
        ordered = [rows[k] for k in keys if k in rows] + list(kept.values())
        df = _order_columns(pd.DataFrame(ordered), cfg.parameters) if ordered else pd.DataFrame(columns=list(BASE_COLUMNS))
        return df, write_table(df, cfg.output)

    if todo:
        own = client is None
        cluster = None
        if own:   # starting Dask takes seconds: say so instead of staying silent
            where = scheduler or f"a local cluster of {workers or 'default'} {'processes' if processes else 'threads'}"
            if progress and console is not None:
                with console.status(f"sweep {cfg.name}: starting Dask ({where}) for {len(todo)} cells..."):
                    client, cluster = make_client(scheduler, workers=workers, threads_per_worker=threads_per_worker,
                                                  processes=processes)
            else:
                client, cluster = make_client(scheduler, workers=workers, threads_per_worker=threads_per_worker,
                                              processes=processes)
        bar = None
        try:
            from dask.distributed import as_completed

            run = hashlib.sha1(f"{time.time_ns()}".encode()).hexdigest()[:8]   # fresh task names per run
            futures = client.map(execute, todo, key=[f"topoplan-cell-{c['key']}-{run}" for c in todo], pure=False)
            if progress:
                from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                           TimeRemainingColumn)

                bar = Progress(TextColumn(f"sweep {cfg.name}"), BarColumn(), MofNCompleteColumn(),
                               TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), TimeRemainingColumn(),
                               console=console, transient=False)
                bar.start()
                task = bar.add_task("cells", total=len(todo), failed=0)
            last = time.perf_counter()
            for fut in as_completed(futures):
                row = fut.result()
                rows[row["key"]] = row
                if row.get("error"):
                    failed += 1
                    errors[row["error"]] = errors.get(row["error"], 0) + 1
                if bar is not None:
                    bar.update(task, advance=1, failed=failed)
                if time.perf_counter() - last >= flush_s:
                    flush()
                    last = time.perf_counter()
        except BaseException:
            if rows:
                flush()   # keep what finished, then let the interruption through
            raise
        finally:
            if bar is not None:
                bar.stop()
            if own:
                client.close()
                if cluster is not None:
                    cluster.close()
    df, files = flush()
    return SweepOutcome(table=df, total=len(cells), skipped=len(done), ran=len(todo), failed=failed, files=files,
                        wall_s=time.perf_counter() - t0, errors=errors)
