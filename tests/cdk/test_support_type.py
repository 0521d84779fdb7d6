"""``eks_support_type=STANDARD`` is refused for a Kubernetes version already in EKS extended support."""

from __future__ import annotations

from datetime import date
from typing import Any

import aws_cdk as cdk
import pytest
from cdk import cdk_support

from hyperpod_dpd import SpecError
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import HyperPodDpdStack, SupportType
from hyperpod_dpd_cdk.versions import EKS_SUPPORT_CALENDAR, SUPPORTED_KUBERNETES_VERSIONS, support_type_problems


def test_every_version_the_stack_accepts_has_its_eks_dates() -> None:
    assert set(SUPPORTED_KUBERNETES_VERSIONS) <= set(EKS_SUPPORT_CALENDAR)
    for window in EKS_SUPPORT_CALENDAR.values():
        assert window.end_of_standard < window.end_of_extended


def test_1_34_takes_standard_until_the_day_before_its_end_of_standard_support() -> None:
    assert support_type_problems("1.34", SupportType.STANDARD, today=date(2026, 12, 1)) == []
    (problem,) = support_type_problems("1.34", SupportType.STANDARD, today=date(2026, 12, 2))
    assert problem.field == "eks_support_type" and problem.value == "STANDARD"
    assert "2026-12-02" in problem.message and "standard support" in problem.message
    assert "leave eks_support_type out" in problem.fix


def test_1_33_is_in_extended_support_already() -> None:
    (problem,) = support_type_problems("1.33", SupportType.STANDARD, today=date(2026, 12, 1))
    assert "2026-07-29" in problem.message
    assert support_type_problems("1.33", SupportType.STANDARD, today=date(2026, 7, 28)) == []


def test_extended_is_always_accepted() -> None:
    for version in EKS_SUPPORT_CALENDAR:
        assert support_type_problems(version, SupportType.EXTENDED, today=date(2030, 1, 1)) == []


def test_the_stack_refuses_standard_on_1_33_at_synth(cdk_context: dict[str, Any]) -> None:
    app = cdk.App(context=cdk_context)
    with pytest.raises(SpecError) as error:
        HyperPodDpdStack(app, "Standard", env=cdk.Environment(region=cdk_support.REGION), endpoints=[default_spec()],
                         kubernetes_version="1.33", support_type=SupportType.STANDARD, benchmark=False,
                         observability=False)
    assert [p.field for p in error.value.problems] == ["eks_support_type"]


def test_the_context_key_is_refused_the_same_way(app_module: Any, cdk_context: dict[str, Any]) -> None:
    with pytest.raises(SpecError) as error:
        app_module.build({**cdk_context, "eks_support_type": "standard", "kubernetes_version": "1.33"})
    (problem,) = [p for p in error.value.problems if p.field == "eks_support_type"]
    assert problem.value == "STANDARD" and "2026-07-29" in problem.message
