"""The version of nblog, written once: ``nblog.__version__`` re-exports it, the write
path records it in ``run.json`` and provenance, and the build reads it from here
(``pyproject.toml``, ``[tool.setuptools.dynamic]``). A leaf: imports nothing."""

__version__ = "0.1.0"
