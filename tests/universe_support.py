"""The StockBench universe file and an equal-weight buy-and-hold computed from its raw rows with
pandas alone (no Kestrel code), the independent reference the report and sweep tests compare to."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped]  # exchange-calendars' own dependency

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"


def raw_bars(path: Path) -> pd.DataFrame:
    df = pd.read_parquet(path)
    df["day"] = pd.to_datetime(df["date"]).dt.date
    return df.sort_values(["symbol", "day"])


def our_equal_weight(df: pd.DataFrame, capital: float, first: dt.date, last: dt.date
                      ) -> tuple[dict[str, int], float, dict[dt.date, float]]:
    """Equal-weight buy-and-hold from the raw rows: each symbol buys floor(capital / N / open)
    shares at the open of its first row in the window; equity at each date's close is the cash
    left plus every holding at its last close on or before that date."""
    w = df[(df["day"] >= first) & (df["day"] <= last)]
    symbols = sorted(df["symbol"].unique())
    share = capital / len(symbols)
    qty: dict[str, int] = {}
    bought: dict[str, tuple[dt.date, float]] = {}  # the day it bought, what it paid
    for sym in symbols:
        rows = w[w["symbol"] == sym]
        if rows.empty:
            qty[sym] = 0
            continue
        price = float(rows.iloc[0]["open"])
        qty[sym] = math.floor(share / price)
        bought[sym] = (rows.iloc[0]["day"], qty[sym] * price)
    left = round(capital - sum(paid for _, paid in bought.values()), 2)
    closes = w.pivot(index="day", columns="symbol", values="close").sort_index().ffill()
    equity = {d: round(capital - sum(paid for day, paid in bought.values() if day <= d)
                       + sum(qty[s] * float(closes.loc[d, s]) for s in bought if bought[s][0] <= d), 2)
              for d in closes.index}
    return qty, left, equity
