"""The on-disk contract: frames and record kinds, the media pack, run.json and the
session schema, the file names of a run folder (``_filenames``; ``RUN_JSON`` is public),
how every file is created and replaced (``_filesafety``). ``man nb-format`` describes
what these modules read and write.

An event log is encoded and read back in one place each: ``_format`` encodes and decodes
every record kind and frames them (``columns_layout``: where each column of a COLUMNS
frame lies, for every decoder), ``_walk`` finds the frames again for every reader (the
file header, the frame walk with torn tails kept apart from damage, the session
header), ``_steps`` gives a log's last step from its ends.
"""

from ._filenames import RUN_JSON
from ._format import json_number, number_from_json
from ._names import check_name

__all__ = ["RUN_JSON", "check_name", "json_number", "number_from_json"]
