"""The broker kernel's shortcuts change no output: the envelope a MKT-only fire leaves to
the next step, the interned tick grids, the digit-read exact prices, the Struct orders."""

from __future__ import annotations

import copy
import pickle
import random
import struct
from decimal import Decimal
from fractions import Fraction

import pytest

from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.engine import Engine, EngineConfig
from kestrel.engine import broker as B
from kestrel.engine import native
from kestrel.engine.orders import BrokerOrder, TickGrid, exact_parts
from kestrel.lang import Plan, parse

from bench.workloads import ALL_DAY, RICH


def _calls_and_ledger(text: str, cfg: EngineConfig, path: str,
                      monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[int, ...]], bytes]:
    """The broker calls ((0, i) a step, (1, j, i) a fire) and the ledger of a synthetic day."""
    plan = parse(text)
    assert isinstance(plan, Plan)
    data = generate(SyntheticSpec(sessions=1))
    s = data.sessions[0]
    calls: list[tuple[int, ...]] = []
    step, fire = B.Broker.step, B.Broker.fire

    def counted_step(self: B.Broker, i: int, t: int, b: float, a: float) -> None:
        calls.append((0, i))
        step(self, i, t, b, a)

    def counted_fire(self: B.Broker, j: int, i: int, t: int, b: float, a: float,
                     prices: tuple[float | None, ...]) -> None:
        calls.append((1, j, i))
        fire(self, j, i, t, b, a, prices)

    with monkeypatch.context() as m:
        m.setattr(B.Broker, "step", counted_step)
        m.setattr(B.Broker, "fire", counted_fire)
        e = Engine(cfg, s, "SYN", data.tick_size)
        e.arm(plan)
        e.run(data.between(s.open_ns, s.close_ns).ticks, path=path)
    return calls, e.ledger.to_jsonl()


# the broker's methods are counted by patching its class: compiled, its own calls between
# them do not look the class up (the pure run, KESTREL_PURE=1, checks this)
@pytest.mark.skipif(native.compiled(), reason="patches Broker methods: pure Python only")
@pytest.mark.parametrize("text", [RICH, ALL_DAY], ids=["rich", "all_day"])
@pytest.mark.parametrize("path", ["reference", "fast"])
@pytest.mark.parametrize("latency", [0, 1])
def test_deferred_envelope_steps_at_the_same_ticks(text: str, path: str, latency: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = EngineConfig(maxorders=5000, latency_ticks=latency)
    deferred: list[int] = []
    step_next = B.Broker._step_next

    def counted(self: B.Broker, i: int) -> None:
        deferred.append(i)
        step_next(self, i)

    monkeypatch.setattr(B.Broker, "_step_next", counted)
    got = _calls_and_ledger(text, cfg, path, monkeypatch)
    assert any(c[0] == 1 for c in got[0])
    assert bool(deferred) == (latency == 0)  # the shortcut ran (and only without latency)
    # the same run with the envelope recomputed after every fire, as before the shortcut
    monkeypatch.setattr(B.Broker, "_step_next", B.Broker.refresh_envelope)
    assert _calls_and_ledger(text, cfg, path, monkeypatch) == got


def test_one_grid_per_tick() -> None:
    g = TickGrid(0.01)
    assert TickGrid(0.01) is g and TickGrid(0.25) is not g
    assert pickle.loads(pickle.dumps(g)) is g and copy.deepcopy(g) is g
    assert (g.inv, g.units, g.tick_exact) == (100.0, 200.0, Fraction(1, 100))
    odd = TickGrid(0.3)  # 1/tick not whole: snaps as k * tick
    assert odd.inv == 0.0 and odd.snap(0.31) == 0.3


def test_exact_parts_is_the_shortest_decimal() -> None:
    rnd = random.Random(7)
    xs = [0.0, -0.0, 0.5, -0.5, 100.0, 189.89, 1e-5, 1.5e16, 1e22, 5e-324, 0.1, -3.0]
    for _ in range(20_000):
        xs.append(round(rnd.uniform(-1e5, 1e5), rnd.randint(0, 6)))
        bits = struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0]
        if bits == bits and abs(bits) != float("inf"):
            xs.append(bits)
    for x in xs:
        f = Fraction(Decimal(repr(x)))
        assert exact_parts(x) == (f.numerator, f.denominator), x


def test_broker_orders_compare_by_identity() -> None:
    a = BrokerOrder(1, "p", 0, "entry", 1, 10, "mkt", None, None, 1, 0)
    b = BrokerOrder(1, "p", 0, "entry", 1, 10, "mkt", None, None, 1, 0)
    assert a == a and a != b and len({a, b}) == 2
    assert (a.filled, a.risk, a.remaining) == (0, 0.0, 10)
