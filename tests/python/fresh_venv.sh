#!/usr/bin/env bash
# README "From Python": in a fresh virtual environment, `pip install .` (build dependencies from PyPI), then the
# ten-line quickstart: a correct NumPy attention passes, one without the 1/√d scale fails with its counterexample.
set -euo pipefail
venv="$1"
src="$2"
rm -rf "$venv"
"${ATTNCHECK_PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$src"
cd "$src/examples/python"
"$venv/bin/python" quickstart.py
