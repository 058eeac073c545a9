"""Public benchmarks as agentd tasks: BFCL (bfcl.py) and τ²-bench (tau2.py, its domains
run as worlds by tau2world.py), read from their installed packages (packages.py), and
their authors' own scorers beside agentd's checks (agreement.py)."""
