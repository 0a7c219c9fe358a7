"""A run's flow: the command line parsed once into a `RunRequest` (request.py), the plan it asks for
(new_plan.py, planning.py), the run folder that holds it (run_folder.py, resume_checks.py), the harness
started and supervised to the end of the plan (run.py, supervise.py, local.py), stop signals and the
host's provenance."""
