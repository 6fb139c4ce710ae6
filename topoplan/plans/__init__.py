"""Plan documents: what a plan file holds and the rules it must meet, whoever made it.

The simulator, the exports and ``topoplan validate`` read plans through this package, and the planning
problems (:mod:`topoplan.problems`) write them through it: :mod:`.circuits` (circuit plans and their
forwarding tables), :mod:`.schedule` (circuit schedules), :mod:`.validate` (every kind of plan
document) and :mod:`.planfile` (circuit plan files). It imports only :mod:`topoplan.core`.
"""
