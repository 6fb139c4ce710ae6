"""The data model every part of topoplan shares: topologies (:mod:`.topology`, read by :mod:`.topology_io`),
placements (:mod:`.placement`), units (:mod:`.units`), atomic file I/O (:mod:`.io`), strict CSV tables
(:mod:`.csvtable`), the memory left (:mod:`.memory`) and the one error type (:mod:`.errors`). It imports
nothing else of topoplan."""
