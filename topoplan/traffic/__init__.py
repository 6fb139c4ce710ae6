"""What the applications send: MPI event traces (:mod:`.trace`), communication matrices (:mod:`.matrix`),
generators (:mod:`.generators`, built with :mod:`.builder` within the limits of :mod:`.limits`), the NPB
skeletons (:mod:`.npb`) and MPICH's collective algorithms (:mod:`.collectives`); traces of the user's own MPI
programs, recorded by topoplan's PMPI library (:mod:`.recorder`, ``topoplan trace``) or read from OTF2 archives
(:mod:`.otf2`). :mod:`.sources` is the door: it resolves every traffic source and reads a run's inputs."""
