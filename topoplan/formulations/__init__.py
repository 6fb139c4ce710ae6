"""Exact models: formulations, and the solver back-ends that solve them.

A formulation builds a model from plain data (arrays and a dataclass the caller fills) and returns it
with a decoder; it imports no planning problem (only :mod:`topoplan.core.errors` and :mod:`topoplan.core.units`;
``tests/test_models_layout.py`` checks). The problem's side -- turning a problem into the data, choosing
a formulation, the incumbents, decoding into a plan -- is in ``topoplan/<problem>/exact.py``.

- :mod:`topoplan.formulations.backends` -- one module per solver (CBC, HiGHS, OR-Tools MILP, CP-SAT, Gurobi) behind
  one ``solve(model, backend, time_limit=..., seed=..., threads=...)``.
- :mod:`topoplan.formulations.circuits_common` -- the circuit formulations' data (``CircuitData``), built model and
  two-objective solve; :mod:`topoplan.formulations.circuits_node` (exact node-level MILP) and
  :mod:`topoplan.formulations.circuits_switch` (aggregated switch-level MILP and its LP relaxation), used by
  :mod:`topoplan.problems.circuits.exact`.
- :mod:`topoplan.formulations.placement_cpsat` -- the CP-SAT placement model and combinatorial cut bounds, used by
  :mod:`topoplan.problems.placement.exact`.
- :mod:`topoplan.formulations.bcast_cpsat` -- the CP-SAT Bcast reordering model, used by :mod:`topoplan.problems.bcast.exact`.
"""
