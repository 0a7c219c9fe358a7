"""Running a plan: the run command, the harness locally, in a container or as ranks, the run folder, images."""
