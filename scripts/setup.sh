#!/usr/bin/env bash
# Installs ember and its test tools. torch comes first and pinned: on CPU machines the
# local CPU build of 2.13.0 satisfies it, so pip never reaches for a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q "torch==2.13.0" || python3 -c "import torch" # a GPU box brings its own torch
python3 -m pip install -q -e ".[test]"
# Graph drawings (SVG) need graphviz's `dot`.
if ! command -v dot >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -q graphviz >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q graphviz >/dev/null 2>&1; }) \
    || echo "setup: graphviz not installed; SVG drawing tests will be skipped"
fi
