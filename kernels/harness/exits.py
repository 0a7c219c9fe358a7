"""The harness's exit statuses, shared with the host's supervisor (runner/supervise.py), which
reads them to tell a kernel's crash from a harness that could not start or could not write."""

EXIT_BACKEND_UNAVAILABLE = 3  # the backend cannot load on this machine
EXIT_WRITE_FAILED = 74  # a result or the run record could not be written (sysexits' EX_IOERR): disk full ...
EXIT_LOCKED = 75  # another harness is writing to the same results folder (sysexits' EX_TEMPFAIL)
EXIT_INTERRUPTED = 130  # SIGINT, SIGTERM or SIGHUP: stopped after writing the run record
