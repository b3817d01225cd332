"""Pinned ledgers: the engine's output on the example corpus and the bench's workloads, as
hashes computed once from an earlier engine and written here. A change of how the engine runs
must leave every ledger byte-identical on both paths and in segmented runs; a differing hash is
a semantic change.

To re-pin after an intended semantic change: run `pinned_digests()` on the new code and
paste its output below, and say why in the commit."""

from __future__ import annotations

import hashlib

from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.engine import Engine, EngineConfig
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import Plan

from bench.workloads import engine_corpus

CONFIGS = {
    "plain": EngineConfig(maxorders=5000),
    "friction": EngineConfig(maxorders=5000, slippage_ticks=1.0, fee_per_unit=0.005,
                             fee_per_order=1.0, latency_ticks=1, partial_fills=True),
}


def _ledger(plan: Plan, cfg: EngineConfig, day: tuple[SessionSpec, Ticks, float], path: str,
            segments: int) -> bytes:
    session, ticks, tick_size = day
    e = Engine(cfg, session, plan.instrument or "SAMPLE", tick_size)
    e.arm(plan)
    n = len(ticks)
    step = -(-n // segments)
    for a in range(0, n, step):
        e.run(ticks.slice(a, min(n, a + step)), path=path,
              final=False)
    e.finish()
    return e.ledger.to_jsonl()


def pinned_digests() -> dict[str, str]:
    """sha256 (first 16 hex digits) of every plan's ledgers over the two sample sessions, per
    config; the fast path's and the segmented runs' ledgers must equal the reference's."""
    data = generate(SyntheticSpec(sessions=2))
    days = [(s, data.between(s.open_ns, s.close_ns).ticks, data.tick_size) for s in data.sessions]
    out: dict[str, str] = {}
    for name, plan in engine_corpus():
        for cname, cfg in CONFIGS.items():
            h = hashlib.sha256()
            for day in days:
                ref = _ledger(plan, cfg, day, "reference", 1)
                assert _ledger(plan, cfg, day, "auto", 1) == ref, (name, cname, "auto")
                assert _ledger(plan, cfg, day, "reference", 7) == ref, (name, cname, "segmented")
                assert _ledger(plan, cfg, day, "auto", 7) == ref, (name, cname, "auto segmented")
                h.update(ref)
            out[f"{name}/{cname}"] = h.hexdigest()[:16]
    return out


PINNED: dict[str, str] = {
    "atr_breakout.atr_break/plain": "4fcefe92a3d46c05",
    "atr_breakout.atr_break/friction": "b1dd632a219bd0ca",
    "bracket_absolute.levels_long/plain": "cdeb8a808f7adf9e",
    "bracket_absolute.levels_long/friction": "cdeb8a808f7adf9e",
    "ema_cross_short.ema_short/plain": "8d4e1edd4deff59c",
    "ema_cross_short.ema_short/friction": "aec50a329f92dfad",
    "ema_tick_scalp.tick_scalp/plain": "ba7fb677db9c0be1",
    "ema_tick_scalp.tick_scalp/friction": "0ca0065010b516dd",
    "fade_gap_down.gap_down_fade/plain": "756ac2f196d17d07",
    "fade_gap_down.gap_down_fade/friction": "826c3e88a8435d49",
    "fade_gap_up.gap_fade/plain": "913fb65ce8eb59b7",
    "fade_gap_up.gap_fade/friction": "913fb65ce8eb59b7",
    "meanrev_limits.meanrev/plain": "94553571d36c302c",
    "meanrev_limits.meanrev/friction": "32295d2f97586ba4",
    "module_day.morning_orb/plain": "5221014471bb3e87",
    "module_day.morning_orb/friction": "b343399c86f23be3",
    "module_day.afternoon_fade/plain": "255ac5f869b5c387",
    "module_day.afternoon_fade/friction": "255ac5f869b5c387",
    "momentum_chg.momentum/plain": "efeb3ff079b1c377",
    "momentum_chg.momentum/friction": "9c0ad401ff26e3eb",
    "open_drive.open_drive/plain": "b1ef9da6f1a8c7af",
    "open_drive.open_drive/friction": "1b2433e389c3a33a",
    "orb_breakout.orb/plain": "afb18ba1e3ad26ac",
    "orb_breakout.orb/friction": "15414d4ded4798d8",
    "orb_long_only.orb_long/plain": "c19313dfd0340c13",
    "orb_long_only.orb_long/friction": "974956c7f5a72ce7",
    "pinned_instrument.pinned/plain": "a5589df03780fa15",
    "pinned_instrument.pinned/friction": "c802be325986e0f6",
    "profit_lock.profit_lock/plain": "beff495443426254",
    "profit_lock.profit_lock/friction": "aa826a58e6cb8b8b",
    "range_break_retest.retest/plain": "a393e70189612eb8",
    "range_break_retest.retest/friction": "2494a913f2994a95",
    "session_levels.levels_2h/plain": "2a18e7da8842b393",
    "session_levels.levels_2h/friction": "f3e9b77a062034c6",
    "sma_cross_trail.sma_cross/plain": "a7ee29003affa1a6",
    "sma_cross_trail.sma_cross/friction": "ff6a233c55cdb982",
    "spread_guard.spread_guard/plain": "df499816fbfa31bb",
    "spread_guard.spread_guard/friction": "b66d0818fd51b339",
    "ten_rules.full_day/plain": "0ec8fe1064c84d41",
    "ten_rules.full_day/friction": "61f92cd8baced20c",
    "time_exit.time_exits/plain": "1325008aa4326344",
    "time_exit.time_exits/friction": "92ad3d31dd2e52f7",
    "vwap_reclaim.vwap_reclaim/plain": "2296a306174223bc",
    "vwap_reclaim.vwap_reclaim/friction": "9b560914b0df3120",
    "vwap_reversion.vwap_revert/plain": "3724eb01fbe1aca9",
    "vwap_reversion.vwap_revert/friction": "1cac414372ee58e2",
    "all_day/plain": "36e9bc09531b816b",
    "all_day/friction": "3ddfdfeb3a778bd1",
    "rich/plain": "5add9eedf8344097",
    "rich/friction": "5b53d0e6a6e41076",
}


def test_ledgers_are_byte_identical_to_the_pinned_ones() -> None:
    assert pinned_digests() == PINNED
