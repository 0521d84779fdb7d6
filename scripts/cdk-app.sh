#!/bin/sh
# cdk.json's app command: runs app.py with the project's virtual environment when it exists, else with
# the python3 on PATH, so `cdk synth` works whether or not the venv is activated. When neither has the
# package installed it says so in one line instead of a Python traceback.
root=$(cd "$(dirname "$0")/.." && pwd)
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
  python=$(command -v python3 || true)
fi
if [ -z "$python" ] || ! "$python" -c 'import hyperpod_dpd_cdk' >/dev/null 2>&1; then
  echo "error: hyperpod-dpd is not installed: run 'make synth' in $root (it creates .venv), or 'pip install -e .' in your own environment" >&2
  exit 2
fi
exec "$python" "$root/app.py" "$@"
