"""topoplan: planning engine for HPC interconnects (hybrid EPS/OCS networks, placement, Bcast reordering)."""

__version__ = "0.1.0"
