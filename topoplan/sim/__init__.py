"""Flow-level network simulation (max-min fair sharing) and MPI trace replay."""
