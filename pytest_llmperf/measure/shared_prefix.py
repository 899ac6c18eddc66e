"""Shared-prefix prompts: N prefixes of P tokens, each shared by M requests with its own suffix.

This is the workload a prefix cache is for (a system prompt, few-shot examples or a retrieved
document in front of every question). It follows the draws of vLLM's ``prefix_repetition``
dataset (0.32) so that the same arguments and seed give the same prompts as
``vllm bench serve --dataset-name prefix_repetition``:

- a legacy ``numpy`` generator seeded with the seed draws, per prefix, the prefix's ids and then
  each of its requests' suffix ids, over the whole vocabulary, each part decoded and re-encoded
  until its own length holds (vLLM's ten rounds);
- the requests are grouped by prefix, then shuffled by Python's Mersenne Twister seeded with the
  same seed.

vLLM decodes prefix and suffix together, and the two can merge at the seam (the last prefix
token and the first suffix token become one), which shortens the prompt and changes the last
shared token. With ``exact`` (the default) a request whose whole text does not re-encode to the
prefix's ids followed by exactly ``suffix_len`` more is repaired: its suffix text is cut and
padded a whole character at a time until it does. Requests vLLM got right are unchanged.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import numpy as np

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.tokenizer import Tokenizer
from pytest_llmperf.models import SampleRequest

__all__ = ["shared_prefix_requests"]

log = logging.getLogger(__name__)

# vLLM's decode/re-encode rounds per part.
FIT_ROUNDS = 10

# Filler ids tried when a suffix is repaired; the first few nearly always fit.
REPAIR_CANDIDATES = 512


def _fit(
    tokenizer: Tokenizer, ids: list[int], target: int, draws: np.random.RandomState
) -> list[int]:
    """Ids whose decoded text re-encodes to themselves, ``target`` long when the rounds allow.

    Too short: pad with ids drawn from the same generator; too long: cut. The last round's
    re-encoding is returned even when it missed (vLLM counts that as a mismatch).
    """
    rounds_left = FIT_ROUNDS
    while True:
        ids = tokenizer.encode(tokenizer.decode(ids))
        if rounds_left <= 0 or len(ids) == target:
            return ids
        if len(ids) < target:
            ids.extend(draws.randint(0, tokenizer.vocab_size, size=target - len(ids)).tolist())
        else:
            ids = ids[:target]
        rounds_left -= 1


def _exact_text(
    tokenizer: Tokenizer, head: tuple[str, list[int]], body: str, want: int, fillers: list[int]
) -> str:
    """``head``'s text plus a body such that the whole encodes to head's ids and ``want`` more.

    The body loses leading characters until it no longer merges into the head, trailing ones
    until it is not too long, then gains one token's text at a time (``fillers`` in order,
    each kept only when it adds exactly one id and changes none before it). Whole characters
    only, so the text stays valid; nothing is drawn, so later requests stay vLLM's.
    """
    head_text, head_ids = head
    target = len(head_ids) + want

    def encode(body: str) -> list[int]:
        return tokenizer.encode(head_text + body)

    ids = encode(body)
    while body and ids[: len(head_ids)] != head_ids:
        body = body[1:]
        ids = encode(body)
    while body and len(ids) > target:
        body = body[:-1]
        ids = encode(body)
    special = set(tokenizer.all_special_ids)
    for candidate in fillers[:REPAIR_CANDIDATES]:
        if len(ids) >= target:
            break
        piece = tokenizer.decode([candidate])
        if candidate in special or not piece or "\ufffd" in piece:
            continue
        longer = encode(body + piece)
        if len(longer) == len(ids) + 1 and longer[: len(ids)] == ids:
            body, ids = body + piece, longer
    if len(ids) != target or ids[: len(head_ids)] != head_ids:
        raise ConfigError(
            f"shared-prefix prompts: could not make a part of exactly {want} tokens with this "
            "tokenizer; try another seed, prefix_len or suffix_len"
        )
    return head_text + body


def shared_prefix_requests(
    tokenizer: Tokenizer,
    *,
    num_prompts: int,
    num_prefixes: int,
    prefix_len: int,
    suffix_len: int,
    output_len: int,
    seed: int = 42,
    exact: bool = True,
) -> list[SampleRequest]:
    """``num_prompts`` requests over ``num_prefixes`` prefixes, as vLLM's prefix_repetition.

    ``num_prompts`` must be a multiple of ``num_prefixes`` (vLLM silently sends fewer
    otherwise). Lengths count no special tokens, as in vLLM; ``prompt_len`` is the prompt's
    token count (``prefix_len + suffix_len`` when ``exact``; vLLM's claimed count otherwise).

    :param exact: repair the prompts whose prefix and suffix merge at the seam (see the module
        notes); False gives vLLM's prompts exactly.
    """
    for name, value in (
        ("num_prefixes", num_prefixes),
        ("prefix_len", prefix_len),
        ("suffix_len", suffix_len),
        ("output_len", output_len),
    ):
        if value < 1:
            raise ConfigError(f"shared-prefix prompts: {name} must be at least 1, got {value}")
    if num_prompts < num_prefixes or num_prompts % num_prefixes:
        raise ConfigError(
            f"shared-prefix prompts: num_prompts {num_prompts} must be a multiple of "
            f"num_prefixes {num_prefixes} (each prefix is shared by the same number of "
            "requests); change num_prompts (or the embedded/scaled count) or num_prefixes"
        )
    per_prefix = num_prompts // num_prefixes
    # A private legacy generator: vLLM seeds numpy's global one and draws with randint.
    draws = np.random.RandomState(seed)
    # Ids to pad a repaired part with after its own: the vocabulary in order, a fixed list.
    fillers = list(range(min(REPAIR_CANDIDATES, tokenizer.vocab_size)))
    requests: list[SampleRequest] = []
    repaired = mismatch = 0
    for _ in range(num_prefixes):
        prefix = _fit(tokenizer, _draw(draws, tokenizer, prefix_len), prefix_len, draws)
        prefix_text = tokenizer.decode(prefix)
        exact_prefix = (prefix_text, prefix)
        if exact and len(prefix) != prefix_len:
            text = _exact_text(tokenizer, ("", []), prefix_text, prefix_len, prefix + fillers)
            exact_prefix = (text, tokenizer.encode(text))
            repaired += 1
        for _ in range(per_prefix):
            suffix = _fit(tokenizer, _draw(draws, tokenizer, suffix_len), suffix_len, draws)
            text = tokenizer.decode(prefix + suffix)
            prompt_len = len(prefix) + len(suffix)
            if exact and exact_prefix[1] is not prefix:
                text = exact_prefix[0] + tokenizer.decode(suffix)
            if exact:
                ids = tokenizer.encode(text)
                if ids[:prefix_len] != exact_prefix[1] or len(ids) != prefix_len + suffix_len:
                    body = tokenizer.decode(suffix)
                    text = _exact_text(tokenizer, exact_prefix, body, suffix_len, suffix + fillers)
                    repaired += 1
                prompt_len = prefix_len + suffix_len
            else:
                mismatch += len(tokenizer.encode(text)) - prompt_len
            requests.append(SampleRequest(text, prompt_len, output_len, ignore_eos=True))
    if repaired:
        log.info("shared-prefix prompts: %d part(s) repaired to keep the seam exact", repaired)
    if mismatch:
        log.warning("shared-prefix prompts: %d token(s) off in total after re-encoding", mismatch)
    random.Random(seed).shuffle(requests)
    return requests


def _draw(draws: np.random.RandomState, tokenizer: Tokenizer, length: int) -> list[int]:
    ids: Any = draws.randint(0, tokenizer.vocab_size, size=length)
    return list(ids.tolist())
