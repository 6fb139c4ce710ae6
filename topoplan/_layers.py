"""The package's layers, written down once: which rooms may import which, and the imports that wait inside a
function, each with its reason. ``tests/test_import_graph.py`` checks every import of the package against it
(top-level ones and those inside functions alike); nothing imports this module.

A *room* is a subpackage of ``topoplan`` (``topoplan.sim``) or a module at its top (``topoplan.warmup``).
A module may import the modules of its own room and of the rooms of lower layers, never those of its own
layer's other rooms or of a higher layer; the module graph has no cycle.

An import of a project module inside a function is an exception, allowed only where :data:`LAZY` lists it:
for a named optional dependency, or for a start-up cost measured here (``topoplan --help`` imports every
command module, so what a command module imports at its top every listing pays).
"""

from __future__ import annotations

__all__ = ["LAYERS", "ONLY_FROM", "LAZY"]

#: Lowest first. Rooms on one line are side by side: neither imports the other.
LAYERS = (
    ("core", "instances"),      # topology, placement, units, I/O, errors, CSV tables, memory; the presets (data)
    ("traffic",),               # traces, matrices, generators, collectives, the door for inputs
    ("plans",),                 # plan documents and their validation
    ("sim",),                   # the simulator
    ("analysis", "fabric"),     # analyses that need no planning; InfiniBand readers and the route service
    ("formulations",),          # exact models and solver back-ends (see ONLY_FROM)
    ("problems",),              # the planning problems
    ("reporting", "batch"),     # reports and exports; sweeps
    ("emulate",),               # the emulated cluster: real MPI runs on namespaces
    ("cli",),                   # the command line
    ("warmup", "__main__", "_layers"),  # install-time warm-up, `python -m topoplan`, this table
)

#: Rooms that only the listed rooms may import (besides themselves).
ONLY_FROM = {"formulations": ("problems", "warmup")}   # warmup compiles the groups model's kernels

#: ``(importer, imported)`` -> reason: the imports of project modules allowed inside functions. Names are
#: patterns (``fnmatch``); the importer is a module, the imported a module or a package.
LAZY = {
    ("topoplan.cli.commands.*", "topoplan.*"):
        "start-up: `topoplan --help` imports every command module to list it; a "
        "command imports the library it runs when it runs. Registering every command (what `--help` does) "
        "takes 0.33 s of CPU; with the 36 library modules the commands import inside their functions loaded "
        "too, 2.25 s (pandas, SciPy, PuLP, OR-Tools, Numba, Dask, matplotlib...; median of 7 processes on the "
        "2-core machine)",
    ("topoplan.cli.main", "topoplan.core.io"):
        "start-up: `topoplan --version` answers before the application is built; the output check that needs "
        "the I/O module (JSON, gzip, temporary files: 12-30 ms of a 60 ms process) runs only in a command",
    ("topoplan.warmup", "topoplan.*"):
        "start-up: the warm-up runs its groups in separate processes, each importing only what its groups "
        "compile (Numba, solvers, the simulator)",
    ("topoplan.sim._engine", "topoplan.sim._loop"):
        "optional dependency and start-up: the loop is Numba code (importing Numba and loading its cache costs "
        "a process about 0.6 s); the ahead-of-time build serves without it when current",
    ("topoplan.problems.circuits._sharing", "topoplan.problems.circuits._sharing_jit"):
        "start-up: the tables' compiled traffic pass is Numba code (0.5 s to import and 1 s to load the kernel, "
        "measured at 16,384 nodes); the ahead-of-time build serves without it when current",
    ("topoplan.problems.placement.exact", "topoplan.formulations.placement_groups"):
        "start-up: the groups model's search is Numba code (0.3-0.8 CPU s, measured); most placements (several "
        "cores a node, large switches) never use it",
    ("topoplan.formulations.placement_groups", "topoplan.formulations.backends.highs"):
        "start-up: only the pair relaxation runs on HiGHS; importing highspy is left to the calls that need it",
    ("topoplan.problems.placement.exact", "topoplan.formulations.placement_pricing"):
        "start-up: the priced groups model's pricing is Numba code, as the groups model's search; only identical "
        "large switches use it",
    ("topoplan.formulations.placement_pricing", "topoplan.formulations.backends.highs"):
        "start-up: the master runs on HiGHS; importing highspy is left to the call that needs it",
    ("topoplan.sim.fifo", "topoplan.sim._fifo_fill"):
        "optional dependency and start-up: the fifo model's rates are Numba code (importing Numba costs a "
        "process about 0.6 s), imported when a fifo engine first solves",
    ("topoplan.sim.maxmin", "topoplan.sim._flows"):
        "optional dependency: the 'numba' solver's kernels, imported when that solver is chosen",
    ("topoplan.sim.maxmin", "topoplan.sim._loop"):
        "optional dependency and start-up: compiled_ready asks Numba whether the loop is cached only when the "
        "ahead-of-time build is not current (importing Numba costs a process about 0.6 s)",
}
