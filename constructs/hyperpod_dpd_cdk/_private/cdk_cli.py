"""The oldest CDK CLI that reads the cloud assembly this aws-cdk-lib writes, and a check against the running one.

An older CLI fails only after the synth, with "Cloud assembly schema version mismatch"; the app checks
first and names the fix. The minimum comes from the library itself (``Manifest.cli_version()``), so
bumping ``aws-cdk-lib`` moves it.
"""

from __future__ import annotations

from collections.abc import Mapping

# The variable the CDK CLI sets for the app it runs.
CLI_VERSION_ENV = "CDK_CLI_VERSION"


def minimum_cli_version() -> str:
    from aws_cdk import cloud_assembly_schema  # noqa: PLC0415 - starts jsii

    return str(cloud_assembly_schema.Manifest.cli_version())


def cli_too_old(environ: Mapping[str, str], minimum: str) -> str | None:
    """A one-line message when the CLI running the app is older than ``minimum``, else ``None``."""
    running = environ.get(CLI_VERSION_ENV)
    if not running or _parts(running) >= _parts(minimum):
        return None
    return (f"the CDK CLI {running} cannot read what aws-cdk-lib writes; it needs CDK CLI {minimum} or newer. "
            f"Fix: npm install -g aws-cdk@latest (or run npx aws-cdk@latest ...)")


def _parts(version: str) -> tuple[int, ...]:
    numbers = []
    for part in version.split("+", maxsplit=1)[0].split("-", maxsplit=1)[0].split("."):
        numbers.append(int(part) if part.isdigit() else 0)
    return tuple(numbers)
