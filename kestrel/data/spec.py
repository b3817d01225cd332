"""How to read a market-data file: `LoadSpec` (column mapping, timestamp format, policies)
and the named presets that load every file of the shared data folder."""

from __future__ import annotations

from typing import Literal

import msgspec

from kestrel.market.calendar import SessionKind

Kind = Literal["quotes", "trades", "bars", "quote_bars"]
TsFormat = Literal["iso", "unix_s", "unix_ms", "unix_us", "unix_ns", "histdata"]
CrossedPolicy = Literal["error", "drop", "keep"]
SpikePolicy = Literal["error", "drop", "keep"]
DEFAULT_SPIKE_FACTOR = 2.0  # a one-row +100% / -50% move that reverts; the shared tapes peak at 1.46


class LoadSpec(msgspec.Struct, frozen=True):
    """A column mapping and parsing options.

    - `kind`: quotes (ts, bid, ask[, bid_size, ask_size]), trades (ts, price[, size]), bars
      (ts = bar open, open, high, low, close[, volume]) or quote bars (ts = bar open, bid_open,
      ask_open, and `bid`/`ask` naming the bid and ask closes[, bid_size, ask_size]);
    - `symbols`: the column naming each row's symbol in a long-format file (None: one symbol);
    - column fields name the file's columns; `ts` may list alternatives as "a|b" (the first
      present is used); for a headerless CSV give `names` and refer to those names;
    - `ts_format`: `iso` (ISO-8601, `T` or space, optional fraction, optional `Z`/`±hh:mm`),
      `unix_s|ms|us|ns` (integer or decimal epoch), `histdata` (`YYYYMMDD HHMMSSfff`);
    - `tz`: zone of naive timestamps (e.g. "Etc/GMT+5" for fixed EST); ignored when the
      text carries an offset;
    - `session`: how the ticks are grouped into sessions (utc days, FX 17:00 New York,
      US equity regular hours, CME 17:00–16:00 Chicago);
    - `tick_size`: None infers the greatest common step of the price grid (see
      `infer_tick_size`); a given tick must divide every recorded price;
    - `bar_seconds`: bar length for `bars` (each bar becomes 4 synthetic ticks);
    - `multiplier`, `currency`, `min_qty`, `lot_size`: the instrument (money per price point
      per unit, the quote currency, the smallest order in lots, the lot every quantity is a whole
      number of: 0.0001 for the BTC presets), carried to `MarketData.instrument`;
    - `calendar`: the exchange calendar (an `exchange-calendars` code such as XNYS) whose
      sessions daily bars (every timestamp at midnight) fall in.
    """

    kind: Kind
    ts: str
    ts_format: TsFormat = "iso"
    tz: str = "UTC"
    bid: str | None = None
    ask: str | None = None
    price: str | None = None
    size: str | None = None
    open: str | None = None
    high: str | None = None
    low: str | None = None
    close: str | None = None
    volume: str | None = None
    header: bool = True
    names: tuple[str, ...] = ()
    delimiter: str = ","
    session: SessionKind = "utc"
    symbol: str = "UNKNOWN"
    tick_size: float | None = None
    bar_seconds: int = 60
    description: str = ""
    multiplier: float = 1.0
    currency: str = "USD"
    min_qty: int = 1
    lot_size: float = 1.0
    symbols: str | None = None
    bid_open: str | None = None
    ask_open: str | None = None
    bid_size: str | None = None
    ask_size: str | None = None
    calendar: str = "XNYS"

    def value_columns(self) -> dict[str, str]:
        """Role → file column for the value columns this kind needs (size optional)."""
        roles: dict[Kind, tuple[str, ...]] = {
            "quotes": ("bid", "ask", "bid_size", "ask_size"),
            "trades": ("price", "size"),
            "bars": ("open", "high", "low", "close", "volume"),
            "quote_bars": ("bid_open", "ask_open", "bid", "ask", "bid_size", "ask_size"),
        }
        out: dict[str, str] = {}
        for role in roles[self.kind]:
            col = getattr(self, role)
            if col is not None:
                out[role] = col
        return out



def _lean(description: str) -> LoadSpec:
    return LoadSpec(
        kind="quotes", ts="ts_event|ts_utc", bid="bid", ask="ask", session="fx", symbol="EURUSD",
        description=description,
    )


PRESETS: dict[str, LoadSpec] = {
    "oanda": _lean("QuantConnect Lean OANDA EUR/USD quotes (CSV ts_utc or Parquet ts_event)"),
    "fxcm": _lean("Lean FXCM EUR/USD quotes (Parquet); ~10% crossed quotes: use crossed=drop|keep"),
    "histdata": LoadSpec(
        kind="quotes", ts="ts", ts_format="histdata", tz="Etc/GMT+5", bid="bid", ask="ask",
        header=False, names=("ts", "bid", "ask", "volume"), session="fx", symbol="EURUSD",
        description="HistData ASCII ticks, headerless, EST (UTC-5 all year)",
    ),
    "truefx": LoadSpec(
        kind="quotes", ts="timestamp", bid="bid", ask="ask", session="fx", symbol="USDJPY", currency="JPY",
        description="TrueFX quotes: timestamp (ISO with offset), bid, ask",
    ),
    "binance_bookticker": LoadSpec(
        kind="quotes", ts="local_ts_ns", ts_format="unix_ns", bid="bid_px", ask="ask_px",
        symbol="BTCUSDT", currency="USDT", lot_size=0.0001, description="Binance book ticker (hftbacktest): local_ts_ns, bid_px, ask_px",
    ),
    "binance_trades": LoadSpec(
        kind="trades", ts="local_ts_ns", ts_format="unix_ns", price="price", size="qty",
        symbol="BTCUSDT", currency="USDT", lot_size=0.0001, description="Binance trades (hftbacktest): local_ts_ns, price, qty",
    ),
    "cme_bars": LoadSpec(
        kind="bars", ts="timestamp_utc", open="open", high="high", low="low", close="close",
        volume="volume", session="cme", symbol="6EH4", multiplier=125_000.0, currency="USD",
        description="CME 1-minute bars (Nautilus): timestamp_utc = bar open",
    ),
    "btc_bars": LoadSpec(
        kind="bars", ts="timestamp", open="open", high="high", low="low", close="close",
        volume="volume", symbol="BTCPERP", lot_size=0.0001,
        description="BTC perpetual 1-minute bars (Nautilus): timestamp = bar open, UTC",
    ),
    "freqtrade_trades": LoadSpec(
        kind="trades", ts="timestamp_ms", ts_format="unix_ms", price="price", size="amount",
        symbol="XRPETH", currency="ETH", description="freqtrade trades: timestamp_ms, price, amount",
    ),
    "pyalgotrade_trades": LoadSpec(
        kind="trades", ts="unix_s", ts_format="unix_s", price="price", size="amount",
        symbol="BTCUSD", lot_size=0.0001, description="pyalgotrade Bitstamp trades: unix_s, price, amount",
    ),
}


def preset(name: str) -> LoadSpec:
    """The named preset; KeyError-free: raises ValueError listing the presets."""
    key = name.strip().lower()
    if key not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}")
    return PRESETS[key]
