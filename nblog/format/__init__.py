"""The on-disk contract: frames and record kinds, the media pack, run.json and the
session schema, file names. ``man nb-format`` describes what these modules read and write.
"""

from ._format import json_number, number_from_json
from ._names import check_name

__all__ = ["check_name", "json_number", "number_from_json"]
