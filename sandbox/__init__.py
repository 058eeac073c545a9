"""Sandboxed builds, tests and candidates (bubblewrap, Docker). Imports nothing of the project.

runner.py      the interface: Request, Limits, Result, the Runner and Process protocols
running.py     what every runner's started program shares (capped outputs, wall time)
bubblewrap.py  the bubblewrap runner;  container.py, image.py, reaper.py  the Docker runner
seccomp.py     the system calls refused, as BPF for bwrap and a profile for Docker
python.py      running the Python agentd runs on inside a sandbox
choose.py      a runner by name or from a [sandbox] section;  escapes.py  the escape probes
"""
