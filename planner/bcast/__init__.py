"""Topology- and speed-aware MPI_Bcast rank reordering (paper 002): ``topoplan bcast``."""

from planner.bcast.problem import METHODS, BcastProblem, solve

__all__ = ["METHODS", "BcastProblem", "solve"]
