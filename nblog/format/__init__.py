"""The on-disk contract: frames and record kinds, the media pack, run.json and the
session schema, file names. ``man nb-format`` describes what these modules read and write.
"""
