"""Analyses that need no planning: inter-switch traffic (:mod:`.switches`, the papers' tables), link loads and
the congestion bound (:mod:`.linkload`), all-to-all on mesh/torus and its bound (:mod:`.alltoall`, paper 004)
and the cost/power model (:mod:`.cost`, paper 003 §5)."""
