"""Plans run for real: an emulated cluster of Linux network namespaces, real MPI on it, measured against the models.

``topoplan emulate`` builds a tree, fat tree or hybrid topology as one network namespace per node and per
switch, with links shaped to the topology's bandwidth and latency (divided and multiplied by a scale),
optical circuits as direct links between OCS nodes, and relays by Linux IP forwarding along the routes
that ``topoplan export routes`` writes from a circuit plan. Real Open MPI programs run on it (the trace
replayer, or the user's own program), launched with the placement's exported machine file, and their
communication time per rank (from the PMPI recorder) is set beside the simulator's predictions.

Modules:

- :mod:`topoplan.emulate.cluster`: the namespaces, links, bridges and queues, their clean-up;
- :mod:`topoplan.emulate.plan`: the one reader of plans (a circuit plan's circuits, ports and route files; a
  Bcast plan's order as the keys of the Bcast library);
- :mod:`topoplan.emulate.launch`: Open MPI on the cluster (the launcher agent, transport settings, CPU idle);
- :mod:`topoplan.emulate.replayer`: the C trace replayer and the idle-wait and Bcast PMPI libraries;
- :mod:`topoplan.emulate.calibrate`: one way, both ways and ring runs against the ideal;
- :mod:`topoplan.emulate.run`: one emulation, measured beside predicted.

Nothing outside the command line imports this package. The netlink library (pyroute2) is the optional
extra ``topoplan[emulate]``; it is imported only by :mod:`topoplan.emulate.cluster`.
"""
