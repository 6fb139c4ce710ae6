"""Many runs at once: parameter sweeps on Dask (:mod:`.sweep`)."""
