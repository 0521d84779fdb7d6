"""What SLO autoscaling cannot work with is refused with field, value and fix; its fields are fuzzed."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import field_paths, field_values, fuzz_examples, slo_autoscaled, with_value
from support import with_slo_options as _slo

from hyperpod_dpd import DpdSpec, SpecError, check, dump_spec, parse_spec
from hyperpod_dpd.charts.render import check_against_crd
from hyperpod_dpd.scaling import compile_all
from hyperpod_dpd.scaling.shape import pin_capacities, with_stand_in_capacities
from hyperpod_dpd.spec import PrometheusTrigger, SloSpec
from hyperpod_dpd.spec.loading import parse_spec_leniently
from hyperpod_dpd.spec.schema import spec_json_schema
from hyperpod_dpd.validation.run import check_data

BASE = pin_capacities(slo_autoscaled(), {"prefill": 19000.0, "decode": 2300.0})


def _scaling(spec: DpdSpec, role: str = "prefill", **changes: Any) -> DpdSpec:
    cfg = dict(spec.roles())[role]
    assert cfg.autoscaling is not None
    return dataclasses.replace(spec, **{role: dataclasses.replace(
        cfg, autoscaling=dataclasses.replace(cfg.autoscaling, **changes))})


REFUSALS: list[tuple[str, Callable[[DpdSpec], DpdSpec], str]] = [
    ("no slo block", lambda s: dataclasses.replace(s, slo=None), "prefill.autoscaling.slo"),
    ("no ttft target", lambda s: dataclasses.replace(s, slo=SloSpec(tpot_ms=50)), "prefill.autoscaling.slo"),
    ("no tpot target", lambda s: dataclasses.replace(s, slo=SloSpec(ttft_ms=2000)), "decode.autoscaling.slo"),
    ("metrics off", lambda s: dataclasses.replace(s, metrics=dataclasses.replace(s.metrics, enabled=False)),
     "metrics.enabled"),
    ("no workspace", lambda s: dataclasses.replace(s, metrics=dataclasses.replace(s.metrics, amp_workspace_url=None)),
     "metrics.amp_workspace_url"),
    ("not a workspace", lambda s: dataclasses.replace(s, metrics=dataclasses.replace(
        s.metrics, amp_workspace_url="http://prometheus:9090")), "metrics.amp_workspace_url"),
    ("a workspace and a newline", lambda s: dataclasses.replace(s, metrics=dataclasses.replace(
        s.metrics, amp_workspace_url=f"{s.metrics.amp_workspace_url}\n")), "metrics.amp_workspace_url"),
    ("min 0", lambda s: _scaling(s, min_replicas=0), "prefill.autoscaling.min_replicas"),
    ("min above max", lambda s: _scaling(s, min_replicas=5, max_replicas=4), "prefill.autoscaling"),
    ("capacity 0", lambda s: _slo(s, capacity_tokens_per_s=0.0), "prefill.autoscaling.slo.capacity_tokens_per_s"),
    ("capacity nan", lambda s: _slo(s, capacity_tokens_per_s=math.nan),
     "prefill.autoscaling.slo.capacity_tokens_per_s"),
    ("capacity inf", lambda s: _slo(s, "decode", capacity_tokens_per_s=math.inf),
     "decode.autoscaling.slo.capacity_tokens_per_s"),
    ("capacity 1e300", lambda s: _slo(s, capacity_tokens_per_s=1e300), "prefill.autoscaling.slo.capacity_tokens_per_s"),
    ("utilisation 0", lambda s: _slo(s, utilisation=0.0), "prefill.autoscaling.slo.utilisation"),
    ("utilisation above 1", lambda s: _slo(s, utilisation=1.5), "prefill.autoscaling.slo.utilisation"),
    ("start-up negative", lambda s: _slo(s, start_up_seconds=-1.0), "prefill.autoscaling.slo.start_up_seconds"),
    ("start-up nan", lambda s: _slo(s, start_up_seconds=math.nan), "prefill.autoscaling.slo.start_up_seconds"),
    ("start-up inf", lambda s: _slo(s, start_up_seconds=math.inf), "prefill.autoscaling.slo.start_up_seconds"),
    ("prompt below the threshold", lambda s: _slo(s, input_tokens=100), "prefill.autoscaling.slo.input_tokens"),
    ("prompt past max_model_len", lambda s: _slo(s, input_tokens=s.max_model_len),
     "prefill.autoscaling.slo.input_tokens"),
    ("no output", lambda s: _slo(s, output_tokens=0), "prefill.autoscaling.slo.output_tokens"),
    ("no nodes", lambda s: _slo(s, max_nodes=0), "prefill.autoscaling.slo.max_nodes"),
    ("node budget below min", lambda s: _slo(_scaling(s, min_replicas=2, max_replicas=4), max_nodes=1),
     "prefill.autoscaling.slo.max_nodes"),
    ("no dollars", lambda s: _slo(s, max_usd_per_hour=0.0), "prefill.autoscaling.slo.max_usd_per_hour"),
    ("dollars below one node", lambda s: _slo(s, max_usd_per_hour=1.0), "prefill.autoscaling.slo.max_usd_per_hour"),
    ("a written trigger takes a compiled name", lambda s: _scaling(s, triggers=(PrometheusTrigger(
        name="prefill-slo-queue", server_address=s.metrics.amp_workspace_url or "", query="sum(up)",
        target_value=1),)), "prefill.autoscaling.triggers[0].name"),
    ("unknown model, no start-up", lambda s: dataclasses.replace(s, model=dataclasses.replace(
        s.model, name="custom-model", architecture=None)), "prefill.autoscaling.slo.start_up_seconds"),
]


@pytest.mark.parametrize(("mutation", "field"), [(m, f) for _, m, f in REFUSALS], ids=[i for i, _, _ in REFUSALS])
def test_what_cannot_work_is_refused_with_its_field_and_a_fix(mutation: Callable[[DpdSpec], DpdSpec],
                                                              field: str) -> None:
    with pytest.raises(SpecError) as caught:
        check(mutation(BASE))
    found = [p for p in caught.value.problems if p.field == field]
    assert found, [p.render() for p in caught.value.problems]
    assert all(p.fix and p.message for p in found)


def test_the_base_spec_is_accepted() -> None:
    assert check(BASE).spec == BASE


def test_slo_scaling_needs_no_written_trigger() -> None:
    assert BASE.prefill.autoscaling is not None and BASE.prefill.autoscaling.triggers == ()
    without_slo = _scaling(BASE, slo=None)
    with pytest.raises(SpecError, match="autoscaling needs at least one trigger"):
        check(without_slo)


def test_slo_true_is_every_default_and_false_none() -> None:
    data = dump_spec(slo_autoscaled())
    data["prefill"]["autoscaling"]["slo"] = True
    data["decode"]["autoscaling"]["slo"] = False
    spec = parse_spec(data)
    assert spec.prefill.autoscaling is not None and spec.prefill.autoscaling.slo == slo_autoscaled(
    ).prefill.autoscaling.slo  # type: ignore[union-attr]
    assert spec.decode.autoscaling is not None and spec.decode.autoscaling.slo is None
    import jsonschema

    assert list(jsonschema.Draft7Validator(spec_json_schema()).iter_errors(data)) == []


@pytest.mark.parametrize("value", ["yes", 1, 0.5])
def test_slo_neither_a_bool_nor_a_mapping_is_one_problem_naming_true(value: Any) -> None:
    data = dump_spec(slo_autoscaled())
    data["prefill"]["autoscaling"]["slo"] = value
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert [p.field for p in caught.value.problems] == ["prefill.autoscaling.slo"]
    problem = caught.value.problems[0]
    assert "must be true, false or a mapping of options" in problem.message and "slo: true" in problem.fix
    # The rules see it as on, so no "autoscaling needs at least one trigger" follows.
    with pytest.raises(SpecError) as checked:
        check_data(data)
    assert [p.field for p in checked.value.problems] == ["prefill.autoscaling.slo"]


def test_validate_checks_an_unresolved_spec_against_the_crd_with_a_stand_in() -> None:
    spec = slo_autoscaled()
    check_against_crd(spec)  # raises on a CRD violation; the capacity is the advisor's at synth time
    assert with_stand_in_capacities(spec) != spec and with_stand_in_capacities(BASE) is BASE


_DATA = dump_spec(slo_autoscaled())
_SLO_FIELDS = [p for p in field_paths(_DATA) if ".autoscaling" in p or p.startswith(("slo", "metrics"))]


@settings(max_examples=fuzz_examples(60))
@given(path=st.sampled_from(_SLO_FIELDS), value=field_values)
def test_any_value_in_an_slo_autoscaling_field_gives_a_spec_or_the_library_error(path: str, value: Any) -> None:
    data = with_value(_DATA, path, value)
    spec, problems = parse_spec_leniently(data)
    try:
        if spec is None or problems:
            raise SpecError(problems or [])
        checked = check(spec)
        compile_all(with_stand_in_capacities(checked.spec))
    except SpecError as err:
        assert err.problems and all(p.fix for p in err.problems)
