"""What the applications send: MPI event traces (:mod:`.trace`), communication matrices and the loader of
every traffic source (:mod:`.matrix`), generators (:mod:`.generators`), the NPB skeletons (:mod:`.npb`) and
MPICH's collective algorithms (:mod:`.collectives`); traces of the user's own MPI programs, recorded by
topoplan's PMPI library (:mod:`.recorder`, ``topoplan trace``) or read from OTF2 archives (:mod:`.otf2`)."""
