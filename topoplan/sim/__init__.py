"""Flow-level network simulation and MPI trace replay: the network and its routes (:mod:`.network`), engines
behind one interface (:mod:`.engines`: max-min fair sharing, :mod:`.maxmin`; the papers' model, :mod:`.paper`),
trace replay (:mod:`.replay`) and the plan hand-off (:mod:`.run`)."""
