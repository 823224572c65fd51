"""The on-disk contract: frames and record kinds, the media pack, run.json and the
session schema, the file names of a run folder (``_filenames``; ``RUN_JSON`` is public).
``man nb-format`` describes what these modules read and write.
"""

from ._filenames import RUN_JSON
from ._format import json_number, number_from_json
from ._names import check_name

__all__ = ["RUN_JSON", "check_name", "json_number", "number_from_json"]
