"""Running a plan, in three parts by job: `running/` (the `deepbench-run` command: its typed request, the
plan, the run folder, supervision, signals, provenance, the local harness), `images/` (the platforms'
images built, locked, archived, and the container that runs the harness in one), and `ranks/` (the
engines that start several harness ranks, and what a cluster must offer them)."""
