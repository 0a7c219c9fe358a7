"""Several harness ranks: the engines that start them (engines.py), the harness process that holds them
(ranked_harness.py), the options and the backend a plan of several ranks runs on (rank_plan.py), and what
a cluster must offer ranks across nodes (cluster_needs.py)."""
