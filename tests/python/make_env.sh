#!/usr/bin/env bash
# The Python tests' environment: a virtual environment VENV with the test dependencies from PyPI — NumPy, pytest,
# the build backend, and the frameworks in ATTNCHECK_PYTHON_FRAMEWORKS (default: torch jax; CPU wheels) — and the
# attncheck package installed from SRC with `pip install`.
set -euo pipefail
venv="$1"
src="$2"
python="${ATTNCHECK_PYTHON:-python3}"
pip_quiet=(-q --disable-pip-version-check)
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# shellcheck disable=SC2086  # the frameworks are a word list
"$venv/bin/pip" install "${pip_quiet[@]}" numpy pytest scikit-build-core nanobind ${ATTNCHECK_PYTHON_FRAMEWORKS-torch jax}
"$venv/bin/pip" install "${pip_quiet[@]}" --no-build-isolation "$src"
"$venv/bin/python" -c "import attncheck; print('attncheck', attncheck.__version__, 'installed in $venv')"
