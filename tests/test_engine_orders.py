"""The order book's building blocks: one tick grid per tick size, exact prices read from
their digits, working orders compared by identity."""

from __future__ import annotations

import copy
import pickle
import random
import struct
from decimal import Decimal
from fractions import Fraction

from kestrel.engine.orders import BrokerOrder, TickGrid, exact_parts


def test_one_grid_per_tick() -> None:
    g = TickGrid(0.01)
    assert TickGrid(0.01) is g and TickGrid(0.25) is not g
    assert pickle.loads(pickle.dumps(g)) is g and copy.deepcopy(g) is g
    assert (g.inv, g.half_ticks_per_point, g.tick_exact) == (100.0, 200.0, Fraction(1, 100))
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
