"""What the applications send: MPI event traces (:mod:`.trace`), communication matrices and the loader of
every traffic source (:mod:`.matrix`), generators (:mod:`.generators`), the NPB skeletons (:mod:`.npb`) and
MPICH's collective algorithms (:mod:`.collectives`)."""
