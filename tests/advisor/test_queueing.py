"""The queueing model against textbook queues it reduces to (no AIConfigurator needed)."""

from __future__ import annotations

import math

import pytest

from hyperpod_dpd.advisor.queueing import Stations, closed_loop, open_loop

SERVICE_S = 0.1
TINY_S = 1e-6


def one_server(*, decode_s: float = TINY_S) -> Stations:
    """One prefill lane in front of unbounded decoding of constant step time: an M/G/1 queue."""
    return Stations(prefill_lanes=1, decoders=1, slots=10**6, prefill_s=lambda _load: SERVICE_S,
                    tpot_s=lambda _batch: decode_s)


@pytest.mark.parametrize("load", [0.5, 0.8])
def test_open_loop_with_fixed_service_is_m_d_1(load: float) -> None:
    """Pollaczek-Khinchine for deterministic service: mean wait = rho S / (2 (1 - rho))."""
    outcome = open_loop(one_server(), osl=2, rate=load / SERVICE_S, jitter=0.0, requests=20_000,
                        capacity_per_s=1 / SERVICE_S)
    assert outcome.queue_s == pytest.approx(load * SERVICE_S / (2 * (1 - load)), rel=0.15)  # sampling error


def test_open_loop_with_exponential_service_is_m_m_1() -> None:
    """M/M/1: mean wait rho S / (1 - rho); time in system is exponential with rate mu - lambda (p90 ln 10 / it)."""
    load = 0.7
    outcome = open_loop(one_server(), osl=2, rate=load / SERVICE_S, exponential=True, requests=20_000,
                        capacity_per_s=1 / SERVICE_S)
    assert outcome.queue_s == pytest.approx(load * SERVICE_S / (1 - load), rel=0.12)
    assert outcome.ttft_p90_s == pytest.approx(math.log(10) / ((1 - load) / SERVICE_S), rel=0.12)


def test_queue_grows_towards_capacity_and_saturates_at_it() -> None:
    waits = [open_loop(one_server(), osl=2, rate=r / SERVICE_S, jitter=0.0, capacity_per_s=1 / SERVICE_S).queue_s
             for r in (0.3, 0.6, 0.9)]
    assert waits == sorted(waits) and waits[0] > 0
    beyond = open_loop(one_server(), osl=2, rate=1.0 / SERVICE_S, capacity_per_s=1 / SERVICE_S)
    assert beyond.saturated and math.isnan(beyond.ttft_s)


@pytest.mark.parametrize("clients", [1, 3, 5, 10, 20])
def test_closed_loop_with_fixed_times_is_the_bottleneck_law(clients: int) -> None:
    """C clients, service S, 40 decode steps of 10 ms: throughput min(C / (S + Z), 1 / S)."""
    decode = 0.01
    outcome = closed_loop(one_server(decode_s=decode), osl=41, concurrency=clients, jitter=0.0)
    cycle = SERVICE_S + 41 * decode
    assert outcome.requests_per_s == pytest.approx(min(clients / cycle, 1 / SERVICE_S), rel=0.03)
    # Little's law over the whole loop.
    assert outcome.requests_per_s * outcome.e2e_s == pytest.approx(clients, rel=0.03)


def test_decoder_occupancy_is_what_decodes_not_what_is_in_flight() -> None:
    """F3: past the prefiller's knee, fewer requests decode than are in flight."""
    outcome = closed_loop(one_server(decode_s=0.01), osl=41, concurrency=20, jitter=0.0)
    assert outcome.decoding == pytest.approx(outcome.requests_per_s * 41 * 0.01, rel=0.05)
    assert outcome.decoding < 10


def test_results_are_deterministic() -> None:
    first = closed_loop(one_server(decode_s=0.01), osl=41, concurrency=7)
    assert first == closed_loop(one_server(decode_s=0.01), osl=41, concurrency=7)


def test_time_waiting_for_a_slot_is_counted_once() -> None:
    """Aggregated engines with one slot each: queue + service + decode is the whole end-to-end time."""
    stations = Stations(prefill_lanes=1, decoders=1, slots=1, prefill_s=lambda _load: SERVICE_S,
                        tpot_s=lambda _batch: 0.01, colocated=True)
    outcome = closed_loop(stations, osl=11, concurrency=4, jitter=0.0)
    assert outcome.queue_s + SERVICE_S + 10 * 0.01 == pytest.approx(outcome.e2e_s, rel=1e-6)
    assert outcome.queue_s == pytest.approx(3 * (SERVICE_S + 10 * 0.01), rel=0.01)


def test_the_tpot_p90_is_the_90th_percentile_of_the_requests_step_times() -> None:
    """Each request's step time is drawn uniformly within +-10 % of a constant: its p90 is 1.08 x the mean."""
    outcome = open_loop(one_server(decode_s=0.01), osl=4, rate=0.3 / SERVICE_S, capacity_per_s=1 / SERVICE_S)
    assert outcome.tpot_s == pytest.approx(0.01, rel=0.01)
    assert outcome.tpot_p90_s == pytest.approx(0.01 * 1.08, rel=0.01)  # U(0.9, 1.1) x 0.01 at its 90th percentile
    beyond = open_loop(one_server(), osl=2, rate=1.0 / SERVICE_S, capacity_per_s=1 / SERVICE_S)
    assert math.isnan(beyond.tpot_p90_s)
