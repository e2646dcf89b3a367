#!/usr/bin/env python3
"""How often vLLM's n-gram lookup proposes, replayed on a published study's own token data.

`--proposal-rate` (the share of decode steps whose prompt lookup finds a match) moves n-gram's speed-up at a batch
more than anything else: a step without a match verifies one token, a step with one k + 1. The study the speed-up
bench holds n-gram to ("Speculative Decoding: Performance or Illusion?", arXiv 2601.11580; bench/data/
spec_batch_sweeps.jsonl) does not print it, but its simulator repository publishes, for Llama-3.1-8B-Instruct on an
H100, each request's prompt and greedy generation and the n-gram accepted length at every generated position
(SpecDecode-Bench/simulator@2fdccbd data/llama3.1-8B/combined_{cnn,gsm8k,sharegpt,instructcoder}.jsonl, 300
requests each; collected with 20 draft tokens).

This script replays vLLM V1's lookup on those tokens, as vllm/v1/spec_decode/ngram_proposer.py documents it: the
longest suffix of the context of prompt_lookup_min to prompt_lookup_max tokens that occurs earlier in the context,
at its earliest occurrence, proposes the (up to) k tokens that followed it; no such suffix, no proposal. (Written
here from that description, not vLLM's code.) It then

1. finds the lookup setting the study used: for each candidate (min, max), the share of positions whose replayed
   accepted length (20 draft tokens, greedy) equals the file's; and
2. walks each request as the engine decodes it at k = 3, 4 and 5, for the study's lookup, vLLM V1's default (5 / 5),
   the one specsize deploys (2 / 4) and vLLM V0's default minimum of 1 (with a maximum of 4): a step proposes or not
   (the replay), accepts the proposal's leading tokens the greedy generation confirms (for the study's lookup that
   reproduces the file's accepted lengths, step 1), and moves on by the tokens gained. Per dataset: the share of
   steps that proposed, the tokens a proposing step gains, tokens per step.

Run: python3 bench/ngram_replay.py DATA_DIR [--write]   (DATA_DIR holds the four combined_*.jsonl; --write stores
the figures in bench/data/ngram_proposal_rates.json, which bench/accuracy_speedup.py reads)
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "data" / "ngram_proposal_rates.json"
SOURCE = ("https://github.com/SpecDecode-Bench/simulator/tree/2fdccbd61b62be339fb85fd90caf43f5e8392aa6/data/"
          "llama3.1-8B")
DATASETS = {"cnn": "cnn_dailymail", "gsm8k": "gsm8k", "sharegpt": "sharegpt", "instructcoder": "instructcoder"}
SETTINGS = ((1, 5), (2, 5), (3, 5), (4, 5), (5, 5), (3, 3), (2, 4), (3, 4))  # (prompt_lookup_min, _max) tried
DATA_K = 20  # draft tokens the file's accepted lengths were collected with (their cap is 21)
STUDY = (3, 5)  # the study's lookup: the setting whose replay reproduces the file's accepted lengths best
# the lookups walked: the study's; vLLM V1's default (SpeculativeConfig: 5 / 5 when neither is set); the one specsize
# deploys (engines/emit.py: prompt_lookup_min 2, max 4); vLLM V0's default minimum (1) with a maximum of 4
LOOKUPS = (STUDY, (5, 5), (2, 4), (1, 4))


class Context:
    """A token history searchable at C speed: each token as 4 little-endian bytes, so `bytes.find` matches n-grams
    (a hit at an offset not divisible by 4 straddles two tokens and is skipped)."""

    def __init__(self, tokens: list[int]):
        self.tokens = tokens
        self.raw = struct.pack(f"<{len(tokens)}I", *tokens)

    def earliest(self, n: int) -> int | None:
        """The first index at which the context's last n tokens occur, ending before the last token."""
        size = len(self.tokens)
        pattern, start, limit = self.raw[4 * (size - n):], 0, 4 * (size - 1)
        while (hit := self.raw.find(pattern, start, limit)) >= 0:
            if hit % 4 == 0:
                return hit // 4
            start = hit + 1
        return None


def lookup(tokens: list[int], min_n: int, max_n: int, k: int) -> list[int]:
    """vLLM's proposal for this context: the k tokens after the earliest occurrence of its longest suffix n-gram
    (min_n <= n <= max_n); fewer where the context ends first; none without a match."""
    if len(tokens) < min_n:
        return []
    ctx = Context(tokens)
    for n in range(min(max_n, len(tokens) - 1), min_n - 1, -1):
        at = ctx.earliest(n)
        if at is not None:
            return tokens[at + n:at + n + k]
    return []


def accepted(proposal: list[int], generated: list[int], position: int) -> int:
    """How many leading proposed tokens the greedy generation confirms from `position` on."""
    count = 0
    for offset, token in enumerate(proposal):
        if position + offset >= len(generated) or generated[position + offset] != token:
            break
        count += 1
    return count


def load(path: Path) -> list[tuple[list[int], list[int], list[int]]]:
    """(prompt, generation, n-gram accepted length per generated position) per request."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            lengths = row["acc_ngram"]["acc_len"]
            out.append((row["prompt_token_ids"], row["generated_token_ids"],
                        json.loads(lengths) if isinstance(lengths, str) else lengths))
    return out


def agreement(requests, min_n: int, max_n: int) -> tuple[int, int, int]:
    """(positions whose replayed accepted length with DATA_K draft tokens equals the file's, positions, positions
    the replay finds no match at but the file accepts tokens)."""
    same = total = unmatched = 0
    for prompt, generated, lengths in requests:
        for i, length in enumerate(lengths):
            proposal = lookup(prompt + generated[:i], min_n, max_n, DATA_K)
            same += 1 + accepted(proposal, generated, i) == length
            unmatched += not proposal and length > 1
            total += 1
    return same, total, unmatched


def walk(requests, min_n: int, max_n: int, k: int) -> dict:
    """The steps of greedy n-gram decoding at k: the replay says whether a step proposes, the greedy generation how
    many of the proposed tokens it accepts; each step gains those and one more."""
    steps = proposing = gained = 0
    for prompt, generated, lengths in requests:
        i = 0
        while i < len(lengths):
            proposal = lookup(prompt + generated[:i], min_n, max_n, k)
            tokens = 1 + accepted(proposal, generated, i)
            steps, proposing, gained, i = steps + 1, proposing + bool(proposal), gained + tokens, i + tokens
    return {"steps": steps, "proposal_rate": round(proposing / steps, 4),
            "tokens_per_proposal": round(1 + (gained - steps) / proposing, 4),
            "tokens_per_step": round(gained / steps, 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="folder with combined_{cnn,gsm8k,sharegpt,instructcoder}.jsonl")
    parser.add_argument("--write", action="store_true", help=f"store the figures in {OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    missing = [n for n in DATASETS if not (args.data / f"combined_{n}.jsonl").exists()]
    if missing:
        print(f"ngram_replay: {args.data} lacks combined_{missing[0]}.jsonl (get them from {SOURCE})", file=sys.stderr)
        return 2
    data = {name: load(args.data / f"combined_{name}.jsonl") for name in DATASETS}
    print("lookup settings: share of positions whose replayed accepted length (20 draft tokens) is the file's")
    checks: dict = {}
    for min_n, max_n in SETTINGS:
        counts = {name: agreement(reqs[:20], min_n, max_n) for name, reqs in data.items()}  # 20 requests each
        checks[f"{min_n}-{max_n}"] = {DATASETS[n]: f"{s}/{t}" for n, (s, t, _) in counts.items()}
        print(f"  min {min_n} max {max_n}: " + "  ".join(f"{n} {s / t:6.1%}" for n, (s, t, _) in counts.items()))
    whole = {DATASETS[n]: agreement(reqs, 3, 5) for n, reqs in data.items()}
    print("  min 3 max 5 over every request: " + "  ".join(f"{n} {s}/{t} ({s / t:.1%}; no match yet accepted: {u})"
                                                           for n, (s, t, u) in whole.items()))
    rates = []
    print(f"\n{'dataset':14} {'lookup':>6} {'k':>2} {'steps':>7} {'proposal rate':>14} {'tokens/proposal':>16} "
          f"{'tokens/step':>12}")
    for name, reqs in data.items():
        for min_n, max_n in LOOKUPS:
            for k in (3, 4, 5):
                r = {"dataset": DATASETS[name], "lookup": f"{min_n}-{max_n}", "k": k, **walk(reqs, min_n, max_n, k)}
                rates.append(r)
                print(f"{r['dataset']:14} {r['lookup']:>6} {k:>2} {r['steps']:>7} {r['proposal_rate']:>14.3f} "
                      f"{r['tokens_per_proposal']:>16.3f} {r['tokens_per_step']:>12.3f}")
    if args.write:
        record = {
            "schema": "how often vLLM's n-gram lookup proposes on the token data of arXiv 2601.11580 "
                      "(Llama-3.1-8B-Instruct, H100, greedy): per dataset, lookup (prompt_lookup_min-max: the "
                      "study's 3-5, vLLM V1's default 5-5, the 2-4 specsize deploys, vLLM V0's default minimum 1 with "
                      "a maximum of 4) and k, the share of decode steps with a proposal, the tokens a proposing step "
                      "gains (the proposal's leading tokens the greedy generation confirms, and one more) and the "
                      "tokens per step; written by bench/ngram_replay.py --write",
            "source": SOURCE + " (combined_{cnn,gsm8k,sharegpt,instructcoder}.jsonl, 300 requests each)",
            "study_lookup": {"prompt_lookup_min": 3, "prompt_lookup_max": 5,
                       "why": "the setting whose replay reproduces the file's own n-gram accepted lengths best "
                              "(`checked`: 20 requests per dataset; `reproduced`: every request); the others "
                              "reproduce fewer. Where the replay finds no match the file accepts nothing "
                              "(`no_match_yet_accepted`); the rest differ inside long copied spans, where another "
                              "occurrence of the n-gram continued further"},
            "checked": checks,
            "reproduced": {n: f"{s}/{t}" for n, (s, t, _) in whole.items()},
            "no_match_yet_accepted": {n: u for n, (_, _, u) in whole.items()},
            "rates": rates,
        }
        OUT.write_text(json.dumps(record, indent=1) + "\n")
        print(f"\nwrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
