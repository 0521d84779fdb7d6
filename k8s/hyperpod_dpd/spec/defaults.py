"""The embedded default spec: the operator's published Llama 3.3 70B example."""

from __future__ import annotations

from importlib.resources import files

from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.loading import parse_spec_text

DEFAULT_SPEC_RESOURCE = "llama-3.3-70b-p5.yaml"


def default_spec_text() -> str:
    return files("hyperpod_dpd.data").joinpath(DEFAULT_SPEC_RESOURCE).read_text(encoding="utf-8")


def default_spec() -> DpdSpec:
    """A fresh copy of the embedded default spec."""
    return parse_spec_text(default_spec_text(), source=f"<embedded {DEFAULT_SPEC_RESOURCE}>")
