"""Sandboxed builds, tests and candidates (bubblewrap, Docker). Imports nothing of the project."""
