"""The synthetic traces have the statistics they are built for; each tolerance says where it comes from.

The traces are seeded, so each test is deterministic; the tolerances are what the statistics allow for *any* seed
(about 4 standard deviations), so a change of seed or of the generator's draw order does not break them.
"""

from __future__ import annotations

import math
import re
import statistics

import pytest

from hyperpod_dpd.errors import UsageError
from hyperpod_dpd.traces import ArrivalKind, Lengths, LengthShape, PrefixGroups, Trace, at_rate, generate, summarise


@pytest.fixture(scope="session")
def day() -> Trace:
    """One day of diurnal traffic at 1 request/s, peak/trough 3: ~86,000 requests, ~0.4 s of CPU to make."""
    return generate(ArrivalKind.DIURNAL, rate_per_s=1.0, duration_s=86_400, seed=11, peak_to_trough=3.0)


def _gaps(trace: Trace) -> list[float]:
    return [b.at_s - a.at_s for a, b in zip(trace.requests, trace.requests[1:], strict=False)]


def _in(trace: Trace, start: float, end: float) -> int:
    return sum(1 for r in trace.requests if start <= r.at_s < end)


def test_poisson_holds_its_rate_and_its_gaps_vary_as_exponential_ones() -> None:
    trace = generate("poisson", rate_per_s=5.0, duration_s=2000, seed=1)
    expected = 5.0 * 2000
    assert abs(len(trace.requests) - expected) < 4 * math.sqrt(expected)  # a Poisson count: sd = sqrt(mean)
    gaps = _gaps(trace)
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert cv == pytest.approx(1.0, abs=0.05)  # sd of an exponential CV estimate ~ 1/sqrt(n) = 0.01; 5 sd
    assert trace.requests[0].at_s == 0.0 and trace.block_tokens is None


def test_diurnal_peaks_at_noon_with_its_peak_to_trough_ratio(day: Trace) -> None:
    half, omega, amplitude = 1800.0, 2 * math.pi / 86_400, (3 - 1) / (3 + 1)
    wave = 2 * amplitude * math.sin(omega * half) / omega  # the sinusoid's integral over the hour around a peak
    expected = (2 * half + wave) / (2 * half - wave)  # 2.989: an hour's count, not the instant's ratio 3
    # (the trace is shifted so its first arrival is at 0: by its first gap, a fraction of a second of a day)
    peak = _in(day, 43_200 - half, 43_200 + half)
    trough = _in(day, 0, half) + _in(day, 86_400 - half, 86_400)
    # Counts of ~5,400 and ~1,800: the ratio's relative sd is sqrt(1/5400 + 1/1800) = 2.7 %; 12 % is over 4 sd.
    assert peak / trough == pytest.approx(expected, rel=0.12)
    total = 1.0 * 86_400
    assert abs(len(day.requests) - total) < 4 * math.sqrt(total)  # the day's mean rate is the asked rate
    busiest = summarise(day, window_s=3600).peak.start_s
    assert 9 * 3600 <= busiest <= 14 * 3600  # the busiest hour is one of those around noon (the peak at 12:00)


def test_bursty_gaps_vary_more_than_poisson_at_the_same_mean_rate() -> None:
    trace = generate("bursty", rate_per_s=4.0, duration_s=5000, seed=2, burst_cv=3.0)
    gaps = _gaps(trace)
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    # Gamma gaps of shape 1/9 have excess kurtosis 54: the CV estimate over 20,000 gaps has a relative sd of
    # sqrt(56 / 20000) / 2 = 2.6 %; 12 % is over 4 sd.
    assert cv == pytest.approx(3.0, rel=0.12)
    expected = 4.0 * 5000
    assert abs(len(trace.requests) - expected) < 4 * 3.0 * math.sqrt(expected)  # a renewal count: sd = cv sqrt(n)
    steady = summarise(generate("poisson", rate_per_s=4.0, duration_s=5000, seed=2), window_s=60)
    bursty = summarise(trace, window_s=60)
    # What bursts do to the sizing figure: a minute's count has sd sqrt(240) x cv instead of sqrt(240), so its p99
    # (mean + 2.33 sd) is ~347 instead of ~276 requests: 1.26x. 1.15x leaves room for the estimate of a p99.
    assert bursty.p99_arrivals_per_s > 1.15 * steady.p99_arrivals_per_s


def test_shared_prefix_reuse_is_the_share_designed() -> None:
    groups = PrefixGroups(groups=6, shared_blocks=3)
    trace = generate("shared-prefix", rate_per_s=2.0, duration_s=600, seed=4, prefix=groups,
                     input_tokens=Lengths(mean=4 * 512), output_tokens=Lengths(mean=10))
    requests = len(trace.requests)
    used = len({r.prefix_blocks[0] for r in trace.requests})
    assert all(len(r.prefix_blocks) == 4 for r in trace.requests)
    assert summarise(trace).prefix_reuse == pytest.approx((requests - used) * 3 / (4 * requests), abs=1e-12)
    assert used == 6 and trace.block_tokens == 512
    others = [b for r in trace.requests for b in r.prefix_blocks[3:]]
    assert len(others) == len(set(others))  # the blocks after the shared prefix are the request's own


def test_shared_prefix_defaults_to_eight_groups_and_other_kinds_take_groups_too() -> None:
    shared = generate("shared-prefix", duration_s=300, seed=5, input_tokens=Lengths(mean=2048))
    assert len({r.prefix_blocks[:2] for r in shared.requests}) == 8
    bursty = generate("bursty", duration_s=300, seed=5, prefix=PrefixGroups(groups=2, shared_blocks=1))
    assert len({r.prefix_blocks[0] for r in bursty.requests if r.input_tokens >= 512}) == 2  # a full block shared


def test_a_prompt_shorter_than_the_shared_blocks_shares_only_its_full_blocks() -> None:
    """A partial last block is the request's own: aiperf gives a hash one size (prompt.py:660-669)."""
    trace = generate("shared-prefix", rate_per_s=3, duration_s=300, seed=1, input_tokens=Lengths(mean=700),
                     prefix=PrefixGroups(groups=2, shared_blocks=3))
    group_ids = set(range(2 * 3))
    for request in trace.requests:  # 700 tokens: one full block (a group's), one of 188 tokens (its own)
        assert len(request.prefix_blocks) == 2 and request.prefix_blocks[0] in group_ids
        assert request.prefix_blocks[1] not in group_ids
    tail = [r.prefix_blocks[1] for r in trace.requests]
    assert len(tail) == len(set(tail))


def test_lognormal_lengths_have_the_asked_mean() -> None:
    trace = generate("poisson", rate_per_s=10, duration_s=1000, seed=6,
                     input_tokens=Lengths(mean=1024, shape=LengthShape.LOGNORMAL, sigma=1.0),
                     output_tokens=Lengths(mean=64))
    lengths = [r.input_tokens for r in trace.requests]
    # A lognormal of sigma 1 has sd = mean sqrt(e - 1) = 1.31 mean: the mean of 10,000 draws has a relative sd of
    # 1.3 %; 6 % is over 4 sd (the cap at 30x the mean cuts a 5e-5 tail: no measurable bias).
    assert statistics.fmean(lengths) == pytest.approx(1024, rel=0.06)
    assert statistics.median(lengths) < 1024 * 0.7  # a long right tail: the median is exp(mu) = mean / e^0.5
    assert {r.output_tokens for r in trace.requests} == {64}


def test_the_same_seed_makes_the_same_trace_and_another_seed_another() -> None:
    one = generate("diurnal", duration_s=600, seed=9)
    assert one == generate("diurnal", duration_s=600, seed=9)
    assert one.requests != generate("diurnal", duration_s=600, seed=10).requests
    assert one.source == "synthetic diurnal trace (2 requests/s for 600 s, seed 9)"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "steady"}, "'steady' is no kind of synthetic trace; give one of poisson, diurnal, bursty"),
    ({"kind": "poisson", "rate_per_s": 0.0}, "rate_per_s: must be a finite number above 0"),
    ({"kind": "poisson", "duration_s": math.inf}, "duration_s: must be a finite number above 0"),
    ({"kind": "bursty", "burst_cv": 1.0}, "burst_cv: must be above 1"),
    ({"kind": "diurnal", "peak_to_trough": 0.5}, "peak_to_trough: must be at least 1"),
    ({"kind": "poisson", "rate_per_s": 1e6, "duration_s": 86_400}, "over 5,000,000; lower the rate"),
    ({"kind": "shared-prefix", "input_tokens": Lengths(mean=2 * 10**6)}, "hold over 20,000,000 prefix hashes"),
    ({"kind": "poisson", "rate_per_s": 1e-306, "duration_s": 1e307}, "duration_s: 1e\\+307 s is over ten years"),
    ({"kind": "poisson", "rate_per_s": 1e-9, "duration_s": 1e10}, "is over ten years"),
    ({"kind": "poisson", "rate_per_s": 1e-300}, "drew no request \\(the mean is 3.6e-297\\); raise the rate"),
    ({"kind": "poisson", "rate_per_s": 1e300}, "1e\\+300 requests/s for 3.6e\\+03 s is 3.6e\\+303 requests, over"),
])
def test_parameters_out_of_range_are_refused(kwargs: dict[str, object], message: str) -> None:
    kind = kwargs.pop("kind")
    with pytest.raises(UsageError, match=message if "\\" in message else re.escape(message)):
        generate(kind, **kwargs)  # type: ignore[arg-type]


def test_length_and_prefix_parameters_out_of_range_are_refused() -> None:
    with pytest.raises(UsageError, match="a mean \\(and a cap\\) of 1 to 10,000,000 tokens"):
        Lengths(mean=0)
    with pytest.raises(UsageError, match="no model reads a longer prompt"):
        Lengths(mean=10**400)
    with pytest.raises(UsageError, match="the cap 10 is below the mean 20"):
        Lengths(mean=20, cap=10)
    with pytest.raises(UsageError, match="1 to 100,000 groups of 1 to 19,531 shared blocks are needed"):
        PrefixGroups(groups=0)
    with pytest.raises(UsageError, match="got 8 groups of 100000"):
        PrefixGroups(shared_blocks=100_000)


def test_a_huge_peak_time_keeps_the_diurnal_shape() -> None:
    """peak_at is taken within one period first: 1e308 + t would keep no phase in a float."""
    period = 86_400.0
    far = 1e12 * period + period / 4  # a quarter period, a whole number of days later
    near = generate("diurnal", rate_per_s=0.5, duration_s=period, seed=3, peak_at_s=period / 4)
    assert generate("diurnal", rate_per_s=0.5, duration_s=period, seed=3, peak_at_s=far).requests == near.requests
    huge = generate("diurnal", rate_per_s=0.5, duration_s=period, seed=3, peak_at_s=1e308)
    quarters = [_in(huge, q * period / 4, (q + 1) * period / 4) for q in range(4)]
    assert max(quarters) > 1.3 * min(quarters)  # peak/trough 3: the busiest quarter holds ~2x the quietest


def test_a_trace_at_a_given_rate_follows_its_shape() -> None:
    # 1/s for the first half hour, 5/s for the second: counts are Poisson, so each half lies within 4 standard
    # deviations (sqrt of the mean) of 1,800 and 9,000 (a chance of about 6e-5 each of a false failure); arrivals
    # are moved so the first is at 0, which shifts the boundary by the first gap, about 1 s (a few requests)
    trace = at_rate(lambda t: 1.0 if t < 1800 else 5.0, peak=5.0, duration_s=3600, seed=3,
                    input_tokens=Lengths(mean=4096), output_tokens=Lengths(mean=7))
    low = sum(1 for r in trace.requests if r.at_s < 1800)
    high = len(trace.requests) - low
    assert trace.requests[0].at_s == 0 and {r.input_tokens for r in trace.requests} == {4096}
    assert abs(low - 1800) < 4 * math.sqrt(1800) and abs(high - 9000) < 4 * math.sqrt(9000)
    assert at_rate(lambda _t: 2.0, peak=2.0, duration_s=600, seed=1) == at_rate(
        lambda _t: 2.0, peak=2.0, duration_s=600, seed=1)


@pytest.mark.parametrize("kwargs", [{"peak": 0.0, "duration_s": 60.0}, {"peak": math.nan, "duration_s": 60.0},
                                    {"peak": 1.0, "duration_s": math.inf}, {"peak": 1e9, "duration_s": 1e9}])
def test_a_trace_at_a_given_rate_refuses_what_it_cannot_draw(kwargs: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        at_rate(lambda _t: 1.0, seed=0, **kwargs)
