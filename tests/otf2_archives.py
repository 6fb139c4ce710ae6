"""OTF2 archives for the tests, written with the ``otf2`` package's own writer (a dependency of topoplan)."""

from pathlib import Path


def two_ranks(path, events):
    """An archive of 2 MPI ranks (ticks of 1 us) whose events ``events(writers, world)`` writes; its anchor file."""
    import otf2
    from otf2.enums import GroupType, Paradigm

    with otf2.writer.open(str(path), timer_resolution=1_000_000) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = [d.location("Master thread", group=d.location_group(f"MPI Rank {r}", system_tree_parent=node))
                for r in range(2)]
        d.group("MPI", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("world", group_type=GroupType.COMM_GROUP,
                                                       paradigm=Paradigm.MPI, members=[0, 1]))
        events([w.event_writer_from_location(x) for x in locs], world)
    return Path(path) / "traces.otf2"


def pingpong(e, world, n=50, nbytes=8):
    """Rank 0 sends ``n`` messages of ``nbytes`` to rank 1 (the events of :func:`two_ranks`)."""
    for i in range(n):
        e[0].mpi_send(10 + 10 * i, 1, world, 5, nbytes)
        e[1].mpi_recv(14 + 10 * i, 0, world, 5, nbytes)


def cut(anchor, name):
    """Cut file ``traces/<name>`` of an archive to half its size (a run killed while writing)."""
    f = Path(anchor).parent / "traces" / name
    f.write_bytes(f.read_bytes()[:f.stat().st_size // 2])
