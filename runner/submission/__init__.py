"""Submissions: a bundle with a fixed layout and a SHA-256 manifest (`deepbench submit`), a
checker that treats bundles as untrusted input and fails loudly (`deepbench check`), and a
re-run that compares a submission's numbers with fresh ones (`deepbench verify`)."""
