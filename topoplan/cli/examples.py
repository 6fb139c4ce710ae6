"""Examples shown at the end of every command's ``--help``.

Each is a complete command line that runs as written from any directory (presets and generators
need no files; ``ibnetdiscover.txt`` and ``lft/`` stand for the user's own fabric dumps). Within one
command the lines run in order, and a line may use a file written by an earlier command of this
table (``plan.json`` from ``circuits``, ``place.json`` from ``place``, ``sim.json`` from ``simulate``).
``tests/test_cli_conventions.py`` runs them all, in :data:`ORDER`, in one directory.
"""

from __future__ import annotations

__all__ = ["EXAMPLES", "ORDER", "epilog"]

EXAMPLES: dict[str, list[str]] = {
    "presets": ["topoplan presets"],
    "show": ["topoplan show paper003 --set ocs.nodes_per_switch=4"],
    "traffic": ["topoplan traffic neighbor2d:rows=8,cols=8,bytes=1MB -o matrix.csv",
                "topoplan traffic npb:kernel=cg,class=S,np=16 --trace -o cg-trace.csv"],
    "analyze": ["topoplan analyze -t paper003 -T neighbor2d:rows=16,cols=16,bytes=4MB -p round-robin"],
    "demo": ["topoplan demo"],
    "circuits": ["topoplan circuits -t paper003 -T neighbor2d:rows=16,cols=16,bytes=4MB -m greedy -o plan.json",
                 "topoplan circuits -t paper003 -T matrix.csv -m ilp --time-limit 10s --json"],
    "simulate": ["topoplan simulate -t paper003 -T neighbor2d:rows=16,cols=16,bytes=4MB --circuits plan.json",
                 "topoplan simulate -t paper003 -T cg-trace.csv --network eps --timeline 1ms -o sim.json",
                 "topoplan simulate -t paper003 -T halo-transpose:rows=16,cols=16,bytes=4MB --phases auto "
                 "--timeline 1ms -o sim.json"],
    "phases": ["topoplan phases -t paper003 -T cg-trace.csv -o phases.json",
               "topoplan phases -t paper003 --set ocs.nodes_per_switch=4 -T npb:kernel=mg,class=S,np=64 "
               "--schedule exact --circuit-method greedy --simulate"],
    "place": ["topoplan place -t paper003 -T neighbor2d:rows=16,cols=16,bytes=4MB -m metis -o place.json"],
    "export": ["topoplan export ompi5 -p place.json -o rankfile",
               "topoplan export slurm -p place.json -o hostlist",
               "topoplan export ocs -p plan.json -o ocs.json",
               "topoplan export routes -p plan.json -o routes"],
    "validate": ["topoplan validate plan.json -t paper003",
                 "topoplan validate place.json -t paper003 -T neighbor2d:rows=16,cols=16,bytes=4MB --json"],
    "bcast": ["topoplan bcast -t paper000 -a gen:nodes=32,racks=4,seed=1 --bytes 1KiB -m dft --rankfile bcast.rf "
              "-o bcast.json"],
    "cost": ["topoplan cost", "topoplan cost -t paper001-16x16 --json"],
    "report": ["topoplan report sim.json -o report.html"],
    "sweep": ["topoplan sweep sweep.yaml --dry-run"],
    "compare circuits": ["topoplan compare circuits -t paper003 -T neighbor2d:rows=16,cols=16,bytes=4MB "
                         "--methods greedy,sp,anneal --time-limit 5s"],
    "bound alltoall": ["topoplan bound alltoall -t kcomputer --bytes 32KiB"],
    "topo query": ["topoplan topo query -i ibnetdiscover.txt --lft lft node001:node004"],
    "topo delay": ["topoplan topo delay -i ibnetdiscover.txt --lft lft --hosts hosts.txt --kind hops -o delay.csv"],
    "topo convert": ["topoplan topo convert -i ibnetdiscover.txt -o fabric.yaml"],
    "topo info": ["topoplan topo info -i ibnetdiscover.txt --lft lft"],
    "serve": ["topoplan serve -i ibnetdiscover.txt --lft lft --port 8750"],
    # an MPI run (tests/test_trace_recorder.py runs it on a real program), so not in ORDER
    "trace": ["topoplan trace -o app-trace -np 4 -- ./app --steps 10", "topoplan trace --lib"],
    # root, Open MPI and network namespaces (tests/test_emulate_run.py runs such lines), so not in ORDER
    "emulate": ["topoplan emulate -t paper003 --set switches=2 --set nodes_per_switch=4 --set cores_per_node=1 "
                "--set ocs.nodes_per_switch=1 -T neighbor2d:rows=2,cols=4,bytes=2MB",
                "topoplan emulate --cleanup"],
}

# The order in which the examples can run one after another in one directory (files flow down).
ORDER = ("presets", "show", "traffic", "analyze", "circuits", "simulate", "phases", "place", "export", "validate", "bcast",
         "cost", "report", "sweep", "compare circuits", "bound alltoall", "topo query", "topo delay", "topo convert", "topo info",
         "demo")


def epilog(path: str) -> str | None:
    """The ``Examples:`` block of the command ``path`` (e.g. ``"topo query"``) for its ``--help``.

    Parameters
    ----------
    path : str
        The command's words after ``topoplan``.

    Returns
    -------
    str or None
        Click's ``\\b`` keeps the lines unwrapped; None for a command without examples.

    Examples
    --------
    >>> print(epilog("bound alltoall"))
    \b
    Examples:
      topoplan bound alltoall -t kcomputer --bytes 32KiB
    """
    lines = EXAMPLES.get(path)
    if not lines:
        return None
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
