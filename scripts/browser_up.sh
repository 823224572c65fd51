#!/usr/bin/env bash
# Install what the real-browser tests of `nb report` (tests/report) need: Debian's headless
# Chromium and its WebDriver, and Selenium in the venv (also in the dev extra).
#   bash scripts/browser_up.sh [VENV]      # VENV defaults to .venv
set -euo pipefail
venv="${1:-.venv}"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends chromium chromium-driver \
        || { apt-get update && apt-get install -y --no-install-recommends chromium chromium-driver; }
fi
"$venv/bin/python" -c "import selenium" 2>/dev/null || "$venv/bin/pip" install "selenium>=4.20"
chromium --version
chromedriver --version
