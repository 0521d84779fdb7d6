#!/bin/sh
# cdk.json's app command: runs app.py with the project's virtual environment when it exists, else with
# the python3 on PATH, so `cdk synth` works whether or not the venv is activated. When neither has the
# package installed it says so in one line instead of a Python traceback. The check only finds the
# package (importlib.util.find_spec): importing it would start jsii's Node.js, which app.py starts anyway.
root=$(cd "$(dirname "$0")/.." && pwd)
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
  python=$(command -v python3 || true)
fi
# The package and the libraries it runs on: a half-finished install gets the same one line.
installed='import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ("hyperpod_dpd_cdk", "aws_cdk", "cdk8s", "jsii", "yaml")))'
if [ -z "$python" ] || ! "$python" -c "$installed" >/dev/null 2>&1; then
  echo "error: hyperpod-dpd is not installed: run 'make synth' in $root (it creates .venv), or 'pip install -e .' in your own environment" >&2
  exit 2
fi
exec "$python" "$root/app.py" "$@"
