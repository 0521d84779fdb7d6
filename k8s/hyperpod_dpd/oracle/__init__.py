"""vLLM's own checks as an oracle: each role's rendered command line run through the worker image's vLLM.

The engine lives in a virtual environment of its own (``make engine`` installs ``.venv-engine`` from
``locks/engine.txt``); :mod:`hyperpod_dpd.oracle.vllm_checks` is the script it runs there, on a CPU, with the
node's GPUs faked from the spec's instance type. ``validate --engine`` and the differential tests use it.
"""

from __future__ import annotations

from hyperpod_dpd.oracle.engine import EngineOracle, EngineUnavailable, Verdict, engine_python
from hyperpod_dpd.oracle.gpus import FakeGpu, fake_gpu
from hyperpod_dpd.oracle.spec_check import RoleVerdict, check_spec_with_engine, config_json_of, engine_verdicts

__all__ = ["EngineOracle", "EngineUnavailable", "FakeGpu", "RoleVerdict", "Verdict", "check_spec_with_engine",
           "config_json_of", "engine_python", "engine_verdicts", "fake_gpu"]
