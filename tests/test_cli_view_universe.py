"""`kestrel view --data UNIVERSE`: the briefing an agent of a universe run reads, rendered from
the command line. Differential: the text equals the briefing a real run (`run_portfolio`, the
library) sends its agent at the same ordinal (the default view, a view the agent asks for, a
checkpoint, the CLOSE cadence, blind mode); bad input is one line and exit 2 (flags, data,
dates) or 1 (a view the universe refuses); a single-symbol view is unchanged."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import ClassVar, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.data.news import load_news
from kestrel.data.universe import load_universe
from kestrel.market.portfolio import PortfolioBounds
from kestrel.session.options import SessionOptions
from kestrel.session.portfolio import DEFAULT_CAPITAL, run_portfolio
from kestrel.session.protocol import AgentReply, AuthorRequest

from cli_helpers import run_cli
from cli_universe_support import long_csv, session_dates

DEFAULT_VIEW = "VIEW default: watchlist, portfolio(10), events BUDGET 1200"
ASKED = "VIEW look: quote(BBB), bars(AAA, 1d, 5), watchlist"


class Recorder:
    """An iterative agent that answers with `replies` in turn (then PASS) and keeps every
    briefing it is sent."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.briefings: list[tuple[str, int, str]] = []

    @property
    def agent_id(self) -> str:
        return "recorder"

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        self.briefings.append((request.ordinal, request.iteration, request.briefing))
        return AgentReply(self.replies.pop(0) if self.replies else "PASS")


def _run(data: Path, date: str, agent: Recorder, capital: float = DEFAULT_CAPITAL,
         options: SessionOptions = SessionOptions()) -> None:
    universe = load_universe(data).universe
    run_portfolio(universe, agent, PortfolioBounds(capital=capital), options, date=dt.date.fromisoformat(date))


def _without_budget(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if not ln.startswith("BUDGET ")]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return long_csv(tmp_path / "u.csv")


def test_the_default_view_is_the_runs_first_briefing(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    date = session_dates(data)[7]
    agent = Recorder()
    _run(data, date, agent)
    ordinal, iteration, first = agent.briefings[0]
    assert (ordinal, iteration) == ("OPEN", 0)
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--date", date, DEFAULT_VIEW)
    assert code == 0, err
    assert out == first
    assert "WATCHLIST 3" in out and "PORTFOLIO USD cash 100000.00" in out


def test_a_view_asked_for_is_what_the_agent_reads_after_asking(data: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    date = session_dates(data)[-1]  # --date not given: the universe's last session
    agent = Recorder(ASKED)
    _run(data, date, agent, capital=25_000.0)
    (_, _, first), (_, iteration, after) = agent.briefings[:2]
    assert iteration == 1
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--capital", "25000", ASKED)
    assert code == 0, err
    assert _without_budget(out) == _without_budget(after)  # the same view; the run spent one request
    budget = [ln for ln in out.splitlines() if ln.startswith("BUDGET ")]
    assert budget == [ln for ln in first.splitlines() if ln.startswith("BUDGET ")]  # the first ask's
    assert "QUOTE BBB" in out and "BARS AAA 1d last 5" in out and "capital 25000" in out


def test_a_checkpoint_and_the_close_cadence(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    date = session_dates(data)[5]
    agent = Recorder()
    _run(data, date, agent, options=SessionOptions(checkpoints=("11:00",)))
    at = [b for o, i, b in agent.briefings if o == "11:00" and i == 0]
    assert len(at) == 1
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--date", date, "--at", "11:00", DEFAULT_VIEW)
    assert code == 0, err
    assert out == at[0]

    closing = Recorder()
    _run(data, date, closing, options=SessionOptions(cadence="close"))
    assert closing.briefings[0][0] == "CLOSE"
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--date", date, "--cadence", "close", DEFAULT_VIEW)
    assert code == 0, err
    assert out == closing.briefings[0][2]
    opening = run_cli(capsys, "view", "--data", str(data), "--date", date, DEFAULT_VIEW)[1]
    assert opening != out  # the CLOSE sees the day's bar, the OPEN does not


def test_blind_shows_aliases_and_refuses_a_real_symbol(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    date = session_dates(data)[6]
    agent = Recorder()
    _run(data, date, agent, options=SessionOptions(blind=True))
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--date", date, "--blind", DEFAULT_VIEW)
    assert code == 0, err
    assert out == agent.briefings[0][2]
    for real in ("AAA", "BBB", "CCC", date, "2024"):
        assert real not in out
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--date", date, "--blind", "VIEW v: quote(SYM1)")
    assert code == 0, err
    assert "QUOTE SYM1" in out and "AAA" not in out
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--blind", "VIEW v: quote(AAA)")
    assert code == 1 and out == ""
    assert err.strip().splitlines()[-1] == ("kestrel view: invalid VIEW v: quote: no symbol 'AAA' in this session; "
                                            "symbols: SYM1, SYM2, SYM3")


def test_no_kernel_prints_the_view_alone(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, full, _ = run_cli(capsys, "view", "--data", str(data), ASKED)
    assert code == 0
    code, bare, err = run_cli(capsys, "view", "--data", str(data), "--no-kernel", ASKED)
    assert code == 0, err
    assert not bare.startswith("CLOCK") and bare.startswith("QUOTE BBB")
    assert full.endswith(bare)


def test_symbols_narrow_the_universe(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--symbols", "AAA,CCC", "VIEW v: watchlist")
    assert code == 0, err
    rows = out.split("WATCHLIST 2", 1)[1].splitlines()[2:4]
    assert [r.split()[0] for r in rows] == ["AAA", "CCC"]


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["VIEW v: quote(ZZZ)"], 1, "invalid VIEW v: quote: no symbol 'ZZZ' in this session; symbols: AAA, BBB, CCC"),
    (["VIEW v: quote"], 1, "invalid VIEW v: quote: name the symbol in a universe session: quote(AAA); "
                           "or view one symbol of the data alone with --symbol AAA"),
    (["--date", "2023-01-03", "VIEW v: watchlist"], 2, "no session on 2023-01-03 in the universe"),
    (["--at", "20:00", "VIEW v: watchlist"], 2, "--at 20:00 is outside the last session"),
    (["--cadence", "close", "--at", "11:00", "VIEW v: watchlist"], 2, "drop --at"),
    (["--symbols", "AAA,ZZZ", "VIEW v: watchlist"], 2, "ZZZ"),
    (["--max-open", "0", "VIEW v: watchlist"], 2, "max_open must be >= 1"),
    (["VIEW v: watchlist, nosuch"], 1, "nosuch"),
])
def test_bad_input_is_one_line(data: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int,
                               message: str) -> None:
    got, out, err = run_cli(capsys, "view", "--data", str(data), *argv)
    assert got == code and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("kestrel view: ") and message in last, err
    assert "Traceback" not in err


def test_the_stockbench_universe(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
    code, out, err = run_cli(capsys, "view", "--data", str(path), "--date", "2025-02-20",
                             "VIEW v: watchlist, quote(AAPL), bars(AAPL, 1d, 20), portfolio")
    assert code == 0, err
    assert out.startswith("CLOCK 20 symbols #0 OPEN") and "WATCHLIST 20" in out and "QUOTE AAPL" in out
    assert "2025-02-20" in out and "02-20 " not in out.split("BARS", 1)[1]  # the day's own bar is after the cutoff


def test_news_is_the_runs_cut_at_the_cutoff(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    date = session_dates(data)[3]
    assert date == "2024-03-06"  # EST: the OPEN's cutoff 09:25 is 14:25 UTC
    news = tmp_path / "news.jsonl"
    news.write_text("".join(json.dumps(r) + "\n" for r in [
        {"published_utc": f"{date}T14:24:00Z", "symbol": "AAA", "source": "Wire", "title": "AAA before the cutoff"},
        {"published_utc": f"{date}T14:26:00Z", "symbol": "BBB", "source": "Wire", "title": "BBB after the cutoff"},
    ]))
    asked = "VIEW n: news(5), watchlist"
    agent = Recorder(asked)
    _run(data, date, agent, options=SessionOptions(news=load_news(news).feed))
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--date", date, "--news", str(news), asked)
    assert code == 0, err
    assert _without_budget(out) == _without_budget(agent.briefings[1][2])
    assert "AAA before the cutoff" in out and "after the cutoff" not in out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(day=st.integers(0, 11), members=st.sets(st.sampled_from(("AAA", "BBB", "CCC")), min_size=1),
       cadence=st.sampled_from(("open", "close")), blind=st.booleans(), capital=st.sampled_from((5_000.0, 1e6)))
def test_any_session_and_selection_is_the_runs_first_briefing(
        data: Path, capsys: pytest.CaptureFixture[str], day: int, members: set[str], cadence: Literal["open", "close"],
        blind: bool,
        capital: float) -> None:
    date = session_dates(data)[day]
    symbols = sorted(members)
    agent = Recorder()
    universe = load_universe(data, symbols=symbols).universe
    run_portfolio(universe, agent, PortfolioBounds(capital=capital), SessionOptions(cadence=cadence, blind=blind),
                  date=dt.date.fromisoformat(date))
    flags = ["--blind"] if blind else []
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--symbols", ",".join(symbols), "--date", date,
                             "--cadence", cadence, "--capital", f"{capital:g}", *flags, DEFAULT_VIEW)
    assert code == 0, err
    assert out == agent.briefings[0][2]


def test_the_minute_universe_at_a_checkpoint(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"
    agent = Recorder()
    run_portfolio(load_universe(path).universe, agent, PortfolioBounds(capital=DEFAULT_CAPITAL),
                  SessionOptions(checkpoints=("10:30",)), date=dt.date(2013, 10, 8))
    (at,) = [b for o, i, b in agent.briefings if o == "10:30"]
    code, out, err = run_cli(capsys, "view", "--data", str(path), "--date", "2013-10-08", "--at", "10:30", DEFAULT_VIEW)
    assert code == 0, err
    assert out == at and out.startswith("CLOCK 4 symbols #1 10:30 cutoff 10:25:00 session 2013-10-08")


def test_each_members_pane_names_its_member(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two members' panes of one kind are told apart by their headers, blind or not."""
    data = long_csv(tmp_path / "u.csv")
    view = "VIEW v: bars(AAA, 1d, 3), bars(BBB, 1d, 3), levels(AAA), stats(BBB), tape(AAA, 2), position(BBB)"
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--no-kernel", view)
    assert code == 0, err
    heads = [ln.split(" ", 2)[:2] for ln in out.splitlines() if ln.split(" ", 1)[0] in
             ("BARS", "LEVELS", "STATS", "TAPE", "POSITION")]
    assert heads == [["BARS", "AAA"], ["BARS", "BBB"], ["LEVELS", "AAA"], ["STATS", "BBB"], ["TAPE", "AAA"],
                     ["POSITION", "BBB"]], out
