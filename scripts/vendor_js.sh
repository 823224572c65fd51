#!/usr/bin/env bash
# Fetch uPlot (the chart library of `nb report`) from the npm registry and copy the files the
# report inlines, with its licence, into nbcli/report/vendor/. The copies are committed: the
# report is built offline and a user's `nb report` never touches the network.
#   bash scripts/vendor_js.sh            # the version pinned below
#   UPLOT_VERSION=1.6.32 bash scripts/vendor_js.sh
set -euo pipefail
version="${UPLOT_VERSION:-1.6.32}"
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="$here/nbcli/report/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "uplot@$version" >/dev/null)
tar -xzf "$work"/uplot-"$version".tgz -C "$work"
mkdir -p "$dest"
cp "$work/package/dist/uPlot.iife.min.js" "$dest/uPlot.iife.min.js"
cp "$work/package/dist/uPlot.min.css" "$dest/uPlot.min.css"
cp "$work/package/LICENSE" "$dest/LICENSE.uPlot"
echo "$version" > "$dest/VERSION.uPlot"
echo "uPlot $version -> $dest"
