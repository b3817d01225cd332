"""Benchmark the model adapters against a loopback model server (no network).

Prints one JSON line:
- `adapter_vs_raw_sdk_ratio`: a full authoring call through the adapter (`ModelAgent.author`:
  conversation, effort gating, the SDK call, reading the reply, usage normalization) vs the
  bare SDK call with the same request body and the same SDK client, against the same loopback
  server (tests/model_server.py): the median over rounds of the ratio of two adjacent calls
  (order alternating), robust to a busy machine; the worse of the two providers
  (`..._openai`, `..._anthropic` give each). Target <= 1.15;
- `system_prompt_tokens`: the language card (`kestrel.models.card.language_card()`) in o200k_base
  tokens (quicktok, the `dev`/`bench` extra; a documented proxy otherwise, named in `tokenizer`).
  Target <= 1500;
- `briefing_tokens_default`: the OPEN briefing of the bundled sample day with the default view
  (the first user message of every ordinal), same tokenizer;
- the grammar exported for constrained decoding (`kestrel.lang.dialects`):
  `grammar_chars_llguidance`, `_gbnf`, `_ebnf` (the reply grammar's size in characters);
  `grammar_compile_ms_llguidance` (the median time LLGuidance takes to compile the Lark-subset
  grammar into a matcher, byte-level tokenizer) and `grammar_compile_vs_lark_ratio` (that time
  over lark's LALR compile of `kestrel.lark`, measured in the same run);
  `sampled_documents_parse_rate` (documents sampled from the exported GBNF by seeded random
  derivations that pass Kestrel's syntax stage: must be 1.0) and
  `sampled_documents_typecheck_rate` (the share that also type-check).
Usage: python bench/models.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from kestrel.data import load_sample  # noqa: E402
from kestrel.frame import Ordinal, freeze  # noqa: E402
from kestrel.models.adapter import ModelAgent, ModelConfig  # noqa: E402
from kestrel.models.card import language_card  # noqa: E402
from kestrel.models.effort import gate  # noqa: E402
from kestrel.models.wires import AnthropicMessages, OpenAIChat  # noqa: E402
from kestrel.session.loop import Kernel  # noqa: E402
from kestrel.session.ports import snapshot_ports  # noqa: E402
from kestrel.session.protocol import AuthorRequest  # noqa: E402
from model_server import Canned, serve  # noqa: E402

_PROXY = re.compile(r"\w+|[^\w\s]")
PLAN = "PLAN orb UNTIL 15:45 RISK maxpos 200 maxloss 400\nWHEN last > high(30m): BUY 100 MKT STOP -0.6% TARGET +1.2%"


def counter() -> tuple[str, Callable[[str], int]]:
    try:
        import quicktok  # type: ignore[import-untyped]
    except ImportError:
        return "proxy: word runs + punctuation characters (quicktok not installed)", lambda s: len(_PROXY.findall(s))
    enc = quicktok.get_encoding("o200k_base")
    return "o200k_base (quicktok, exact)", lambda s: len(enc.encode(s))


def default_briefing() -> str:
    data = load_sample()
    s = data.sessions[-1]
    o = Ordinal(0, "OPEN", s.open_ns)
    ports = snapshot_ports(freeze(data, o.time_ns - 300 * 10**9), o)
    return ports.briefing(None, Kernel(ordinal="OPEN", iteration=0, iterations_left=3, tokens_left=8000))


def ratio(provider: str, url: str, briefing: str, rounds: int) -> float:
    model = "gpt-5.1" if provider == "openai" else "claude-haiku-4-5"
    config = ModelConfig(provider, model, base_url=url, timeout_s=30)
    wire = OpenAIChat(config, "k") if provider == "openai" else AnthropicMessages(config, "k")
    agent = ModelAgent(config, wire)
    request = AuthorRequest(ordinal="OPEN", iteration=0, briefing=briefing, effort="medium")
    from kestrel.models.conversation import Message

    body = wire.request(language_card(), (Message("user", briefing),), gate(provider, model, "medium"))
    client = wire.client()  # the same SDK client (connection pool) for both paths

    def raw() -> None:
        if provider == "openai":
            client.chat.completions.create(**body)
        else:
            client.messages.create(**body)

    def adapter() -> None:
        agent.author(request)

    for _ in range(5):  # warm the connection and both code paths
        raw()
        adapter()
    pairs: list[float] = []
    for k in range(rounds):
        t: dict[str, float] = {}
        for label, fn in (("a", adapter), ("r", raw)) if k % 2 else (("r", raw), ("a", adapter)):
            t0 = time.perf_counter()
            fn()
            t[label] = time.perf_counter() - t0
        pairs.append(t["a"] / t["r"])
    return statistics.median(pairs)


def grammar_figures(quick: bool) -> dict[str, object]:
    """The exported grammar's sizes, compile time and sampled documents' parse rates."""
    import random

    from lark import Lark

    from grammar_tools import Sampler, read_bnf, syntax_stage, type_checks
    from kestrel.lang.dialects import DIALECTS, export
    from kestrel.lang.grammar import GRAMMAR, OPTIONS

    out: dict[str, object] = {f"grammar_chars_{d}": len(export(d)) for d in DIALECTS}
    rounds = 5 if quick else 20
    try:
        import llguidance

        from grammar_tools import byte_tokenizer
    except ImportError:
        out["grammar_compile_ms_llguidance"] = None
        out["grammar_compile_vs_lark_ratio"] = None
        out["grammar_compile_note"] = "llguidance not installed (the dev extra)"
    else:
        tok = byte_tokenizer()
        text = export("llguidance")

        def compile_llguidance() -> None:
            llguidance.LLMatcher(tok, llguidance.grammar_from("lark", text), log_level=0)

        def compile_lark() -> None:
            Lark(GRAMMAR, **OPTIONS)

        times: dict[str, list[float]] = {"llg": [], "lark": []}
        for k in range(rounds):
            for label, fn in (("llg", compile_llguidance), ("lark", compile_lark)) if k % 2 else (
                    ("lark", compile_lark), ("llg", compile_llguidance)):
                t0 = time.perf_counter()
                fn()
                times[label].append(time.perf_counter() - t0)
        llg, ref = statistics.median(times["llg"]), statistics.median(times["lark"])
        out["grammar_compile_ms_llguidance"] = round(llg * 1000, 2)
        out["grammar_compile_vs_lark_ratio"] = round(llg / ref, 3)
    n = 500 if quick else 5000
    sampler = Sampler(read_bnf(export("gbnf"), "gbnf"))
    rng = random.Random(27)
    docs = [sampler.sample(rng) for _ in range(n)]
    out["sampled_documents"] = n
    out["sampled_documents_parse_rate"] = round(sum(syntax_stage(d) is None for d in docs) / n, 4)
    out["sampled_documents_typecheck_rate"] = round(sum(type_checks(d) for d in docs) / n, 4)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    args = ap.parse_args()
    import warnings

    warnings.simplefilter("ignore", DeprecationWarning)
    name, count = counter()
    briefing = default_briefing()
    rounds = 40 if args.quick else 200
    with serve(lambda path, body: Canned(PLAN)) as srv:
        r_openai = ratio("openai", srv.openai_url, briefing, rounds)
        r_anthropic = ratio("anthropic", srv.anthropic_url, briefing, rounds)
    print(json.dumps({
        "adapter_vs_raw_sdk_ratio": round(max(r_openai, r_anthropic), 3),
        "adapter_vs_raw_sdk_ratio_openai": round(r_openai, 3),
        "adapter_vs_raw_sdk_ratio_anthropic": round(r_anthropic, 3),
        "system_prompt_tokens": count(language_card()),
        "briefing_tokens_default": count(briefing),
        "tokenizer": name,
        "rounds": rounds,
        **grammar_figures(args.quick),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
