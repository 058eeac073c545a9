"""Errors of the improver package."""


class ImproverError(Exception):
    """A user-facing improver failure (bad task file, spent seal, ...)."""
