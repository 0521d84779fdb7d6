"""synth and plan with SLO autoscaling: resolved before rendering, a clean error without the advisor extra."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from support import field_paths, field_values, fuzz_examples, slo_autoscaled, with_value

from hyperpod_dpd import DpdSpec, dump_spec, dump_spec_yaml
from hyperpod_dpd.cli import main
from hyperpod_dpd.scaling.shape import pin_capacities


def _write(tmp_path: Path, spec: DpdSpec) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(dump_spec_yaml(spec))
    return str(path)


def test_synth_without_the_advisor_extra_names_the_field_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)
    out = tmp_path / "out"
    assert main(["synth", _write(tmp_path, slo_autoscaled()), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "prefill.autoscaling.slo.capacity_tokens_per_s" in err and "needs the advisor extra" in err
    assert "pip install '.[advisor]' in the hyperpod-dpd checkout" in err and "Traceback" not in err
    assert not out.exists()


def test_synth_renders_the_advisors_capacities(tmp_path: Path, resolved: DpdSpec,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["synth", _write(tmp_path, slo_autoscaled()), "--output-dir", str(out)]) == 0
    (written,) = out.iterdir()
    document = next(d for d in yaml.safe_load_all(written.read_text()) if d and d.get("kind") ==
                    "InferenceEndpointConfig")
    triggers = document["spec"]["pdSpec"]["autoScalingSpec"]["decodingAutoScaling"]["prometheusTriggerList"]
    capacity = resolved.decode.autoscaling.slo.capacity_tokens_per_s  # type: ignore[union-attr]
    assert triggers[0]["targetValue"] == int(capacity * 0.9)  # type: ignore[operator]
    capsys.readouterr()


def test_plan_prints_the_compiled_scaling_of_a_pinned_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)  # pinned: no advisor needed
    spec = pin_capacities(slo_autoscaled(decode_max=2), {"prefill": 19000.0, "decode": 2300.0})
    assert main(["plan", _write(tmp_path, spec)]) == 0
    out = capsys.readouterr().out
    assert "SLO autoscaling (as synth renders it):" in out
    assert "prefill: 1..4 replicas; demand 17,100 tokens/s per replica" in out
    assert "decode: 1..1 replicas" in out and "capped at 1" in out and "scale-down window 1260 s" in out


def test_plan_json_holds_the_compiled_scaling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = pin_capacities(slo_autoscaled(), {"prefill": 19000.0, "decode": 2300.0})
    assert main(["plan", _write(tmp_path, spec), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["autoscaling"]
    assert set(found) == {"prefill", "decode"}
    assert [t["signal"] for t in found["decode"]["triggers"]] == ["demand", "queue", "slo_ratio"]


def test_the_cdk_app_pins_capacities_and_names_the_field_without_the_advisor(
        tmp_path: Path, resolved: DpdSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd import SpecError
    from hyperpod_dpd_cdk.app import build

    path = _write(tmp_path, slo_autoscaled())
    _, stack = build({"spec": path}, outdir=str(tmp_path / "cdk.out"))
    # The advisor's capacities, pinned by the construct (as synth pins them) before it renders the chart.
    assert stack.endpoint_specs == (resolved,)
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)
    with pytest.raises(SpecError) as caught:
        build({"spec": path}, outdir=str(tmp_path / "again"))
    fields = [p.field for p in caught.value.problems]
    assert "endpoints[0].prefill.autoscaling.slo.capacity_tokens_per_s" in fields


_PINNED = dump_spec(pin_capacities(slo_autoscaled(), {"prefill": 19000.0, "decode": 2300.0}))
_FIELDS = [p for p in field_paths(_PINNED) if ".autoscaling" in p or p.startswith(("slo", "metrics"))]


@settings(max_examples=fuzz_examples(25))
@given(path=st.sampled_from(_FIELDS), value=field_values)
def test_plan_and_synth_on_any_slo_field_value_end_in_a_documented_status(
        path: str, value: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Without the advisor, so an unpinned capacity takes the error path rather than minutes of simulation.
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(with_value(_PINNED, path, value)))
    for command in (["plan", str(spec)], ["synth", str(spec), "-o", str(tmp_path / "out")]):
        assert main(command) in (0, 2)
        assert "Traceback" not in capsys.readouterr().err
