"""Write an endpoint's alert rules and dashboard to a folder, for users with their own Prometheus and Grafana."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hyperpod_dpd.observability.alerts import rules_yaml
from hyperpod_dpd.spec import DpdSpec


def file_stem(spec: DpdSpec) -> str:
    """``<namespace>-<name>``, the same stem ``synth`` gives the endpoint's manifest."""
    return f"{spec.namespace}-{spec.name}"


def write_observability(specs: Iterable[DpdSpec], out_dir: Path) -> list[Path]:
    """``<stem>.rules.yaml`` (a Prometheus rule file) and ``<stem>.dashboard.json`` (Grafana) per spec.

    Raises :class:`~hyperpod_dpd.observability.dashboard.MissingExtra` without the ``observability`` extra
    (before writing anything) and ``OSError`` when the folder is not writable.
    """
    from hyperpod_dpd.observability.dashboard import dashboard_json  # noqa: PLC0415 - optional dependency

    rendered: list[tuple[Path, str]] = []
    for spec in specs:
        stem = file_stem(spec)
        rendered.append((out_dir / f"{stem}.rules.yaml", rules_yaml(spec)))
        rendered.append((out_dir / f"{stem}.dashboard.json", dashboard_json(spec)))
    out_dir.mkdir(parents=True, exist_ok=True)
    for path, text in rendered:
        path.write_text(text, encoding="utf-8")
    return [path for path, _ in rendered]
