#!/usr/bin/env bash
# The whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pytest tests -n 2 -p no:cacheprovider "$@"
