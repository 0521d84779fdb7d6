"""Values and steps that wait for synthesis, so that parts added after construction render as if given at first."""

from __future__ import annotations

from collections.abc import Callable

import jsii
from aws_cdk import AspectPriority, Aspects, IAspect, IStableListProducer, IStableStringProducer, Lazy
from constructs import IConstruct


@jsii.implements(IAspect)
class _AtSynthesis:
    """Runs ``callback`` once, when synthesis first visits the construct the aspect is added to."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback: Callable[[], None] | None = callback

    def visit(self, node: IConstruct) -> None:
        del node
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()


def at_synthesis(scope: IConstruct, callback: Callable[[], None]) -> None:
    """Call ``callback`` once at synthesis, before any token is resolved and before the mutating aspects
    (an ``iam.Role`` freezes its policy statements in one, when it splits a large policy)."""
    Aspects.of(scope).add(_AtSynthesis(callback), priority=AspectPriority.MUTATING - 1)


@jsii.implements(IStableStringProducer)
class _String:
    def __init__(self, produce: Callable[[], str]) -> None:
        self._produce = produce

    def produce(self) -> str:
        return self._produce()


@jsii.implements(IStableListProducer)
class _List:
    def __init__(self, produce: Callable[[], list[str]]) -> None:
        self._produce = produce

    def produce(self) -> list[str]:
        return self._produce()


def late_string(produce: Callable[[], str]) -> str:
    """A string token whose value ``produce`` gives at synthesis."""
    return Lazy.string(_String(produce))


def late_list(produce: Callable[[], list[str]]) -> list[str]:
    """A list token whose value ``produce`` gives at synthesis."""
    return Lazy.list(_List(produce))
