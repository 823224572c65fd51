"""The write path: ``init``, launch identity, run ids, settings, ``Run``, the writer
thread, the lifecycle (exit, signals, fork), resumed step counters, provenance, console capture.
"""
