"""Outputs for people and launchers: the HTML report of a simulation (:mod:`.report`) and rankfiles,
machinefiles and Slurm host files (:mod:`.export`)."""
