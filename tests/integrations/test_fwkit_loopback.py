"""The framework tests' launches run where nothing listens beyond loopback."""

from __future__ import annotations

import sys

from fwkit import clean_env, run


def test_launched_commands_see_only_loopback(tmp_path):
    code = "import socket; print(sorted(name for _i, name in socket.if_nameindex()))"
    out = run([sys.executable, "-c", code], tmp_path, clean_env()).stdout
    assert out.strip() == "['lo']"
