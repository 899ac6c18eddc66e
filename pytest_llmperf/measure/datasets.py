"""The prompts of a workload: token-exact random prompts and ShareGPT conversations.

(Shared-prefix prompts live in ``shared_prefix``; ``build_requests`` below picks either.)

Both follow `vllm bench serve` (0.32) draw for draw, so that the same profile and seed send the
same prompts as vLLM's own benchmark and the numbers stay comparable:

- ``random``: a private ``numpy.random.default_rng(seed)`` draws the input lengths, the output
  lengths and one vocabulary offset per request, in that order; a prompt is a run of
  consecutive non-special token ids, decoded and re-encoded until its length is exact.
- ``sharegpt``: conversations with at least two turns, shuffled by Python's Mersenne Twister
  seeded with the seed, walked in that order through vLLM's length filters, and oversampled
  with a freshly seeded generator when the file has too few.
"""

from __future__ import annotations

import codecs
import json
import logging
import math
import os
import random
import string
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_llmperf.atomic import write_atomically
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.profiles import WorkloadProfile
from pytest_llmperf.measure.shared_prefix import shared_prefix_requests
from pytest_llmperf.measure.tokenizer import Tokenizer, load_tokenizer
from pytest_llmperf.models import SampleRequest

__all__ = [
    "Tokenizer",
    "build_requests",
    "load_tokenizer",
    "random_requests",
    "sharegpt_requests",
    "write_synthetic_sharegpt",
]

log = logging.getLogger(__name__)

# How many decode/re-encode rounds a random prompt gets to reach its exact length (vLLM's 10).
FIT_ROUNDS = 10

# Filler ids tried per repaired prompt before giving up; each try re-encodes the prompt, and
# in practice the first one or two fit.
REPAIR_CANDIDATES = 256

# vLLM's ShareGPT filters: both sides at least 4 tokens, prompt at most 1024, sum at most 2048.
SHAREGPT_MIN_LEN = 4
SHAREGPT_MAX_PROMPT_LEN = 1024
SHAREGPT_MAX_TOTAL_LEN = 2048

SHAREGPT_OPTION_HINT = "set it with --llmperf-sharegpt PATH or the ini key llmperf_sharegpt"
SHAREGPT_SOURCE_HINT = (
    "the real file is ShareGPT_V3_unfiltered_cleaned_split.json from the "
    "anon8231489123/ShareGPT_Vicuna_unfiltered dataset on the Hugging Face hub; download it "
    "beforehand, the plugin never downloads anything"
)


# ---------------------------------------------------------------------------------------------
# random


def _range_ratios(range_ratio: float | Mapping[str, float]) -> tuple[float, float]:
    if isinstance(range_ratio, Mapping):
        try:
            ratios = float(range_ratio["input"]), float(range_ratio["output"])
        except KeyError:
            raise ConfigError(
                f"range_ratio as a mapping needs both 'input' and 'output', got "
                f"{sorted(range_ratio)}"
            ) from None
    else:
        ratios = float(range_ratio), float(range_ratio)
    for ratio in ratios:
        if not 0.0 <= ratio < 1.0:
            raise ConfigError(f"range_ratio must be in [0, 1), got {ratio}")
    return ratios


def _fit_to_length(
    tokenizer: Tokenizer, ids: list[int], target: int, rng: np.random.Generator
) -> tuple[str, list[int]]:
    """Text whose re-encoding has ``target`` tokens, and that re-encoding.

    Decoding and re-encoding a run of ids need not give the same ids back (two tokens may merge
    into one, or one split into three), so the text is re-encoded and the ids are cut, or padded
    with ids drawn from the same generator, until the count holds or the rounds run out.
    """
    rounds_left = FIT_ROUNDS
    cut: list[int] | None = None
    while True:
        text = tokenizer.decode(ids)
        ids = tokenizer.encode(text)
        if rounds_left <= 0 or len(ids) == target:
            return text, ids
        if len(ids) < target:
            ids.extend(rng.integers(0, tokenizer.vocab_size, size=target - len(ids)).tolist())
            cut = None
        else:
            if ids[:target] == cut:
                # The same cut as last round: every round left would repeat it without a draw,
                # so the outcome (and the generator's state) is already known.
                return text, ids
            ids = cut = ids[:target]
        rounds_left -= 1


def _repair_length(
    tokenizer: Tokenizer, text: str, target: int, fillers: np.ndarray
) -> tuple[str, list[int]]:
    """Make ``text`` exactly ``target`` tokens long when the fitting rounds could not.

    The rounds can settle on a fixed point one or two tokens off: cutting ids in the middle of
    a multi-byte character leaves invalid bytes, which decode to U+FFFD, which re-encodes as
    three byte tokens. Here the text itself is cut (whole characters, so it stays valid) and
    then padded with the first filler ids that add exactly one token each. Nothing is drawn
    from the generator, so the prompts after this one stay those vLLM makes.
    """
    ids = tokenizer.encode(text)
    while len(ids) > target and text:
        text = text[:-1]
        ids = tokenizer.encode(text)
    for candidate in fillers[:REPAIR_CANDIDATES].tolist():
        if len(ids) == target:
            break
        piece = tokenizer.decode([candidate])
        longer = tokenizer.encode(text + piece)
        if piece and len(longer) == len(ids) + 1:
            text, ids = text + piece, longer
    return text, ids


def random_requests(
    tokenizer: Tokenizer,
    *,
    num_prompts: int,
    input_len: int,
    output_len: int,
    range_ratio: float | Mapping[str, float] = 0.0,
    prefix_len: int = 0,
    seed: int = 42,
    exact: bool = True,
) -> list[SampleRequest]:
    """Synthetic prompts of exact token lengths, as vLLM's ``random`` dataset makes them.

    ``input_len`` counts the special tokens the server adds (BOS, ...), so the prompt text is
    that much shorter; ``prompt_len`` of each request is the count without them.
    ``range_ratio`` r draws lengths uniformly from [floor(L(1-r)), ceil(L(1+r))]; a mapping
    with ``input`` and ``output`` sets the two sides apart.

    :param exact: repair the prompts that vLLM's fitting leaves a token or two off (see
        ``_repair_length``); every other prompt, and the order of draws, is unchanged. False
        gives vLLM's prompts exactly, mismatches included.
    """
    in_ratio, out_ratio = _range_ratios(range_ratio)
    rng = np.random.default_rng(seed)
    base_len = max(0, int(input_len) - tokenizer.num_special_tokens_to_add())
    in_low = math.floor(base_len * (1 - in_ratio))
    in_high = math.ceil(base_len * (1 + in_ratio))
    if prefix_len + in_low < 1:
        raise ConfigError(
            f"input_len {input_len} is too small: after the tokenizer's "
            f"{tokenizer.num_special_tokens_to_add()} special token(s) and range ratio "
            f"{in_ratio}, a prompt could have {prefix_len + in_low} tokens; raise input_len "
            "or prefix_len, or lower range_ratio"
        )
    out_low = max(1, math.floor(output_len * (1 - out_ratio)))
    out_high = max(1, math.ceil(output_len * (1 + out_ratio)))

    # The draw order is part of the contract: vLLM draws all input lengths, then all output
    # lengths, then all offsets, then the prefix, then whatever fitting needs, request by request.
    input_lens = rng.integers(in_low, in_high + 1, size=num_prompts)
    output_lens = rng.integers(out_low, out_high + 1, size=num_prompts)
    offsets = rng.integers(0, tokenizer.vocab_size, size=num_prompts)

    # Special tokens are left out of the body (they would be parsed as control tokens), but the
    # offsets above are drawn over the whole vocabulary, as vLLM does.
    allowed = np.setdiff1d(
        np.arange(tokenizer.vocab_size), np.asarray(tokenizer.all_special_ids, dtype=np.int64)
    )
    prefix: list[int] = []
    if prefix_len > 0:
        drawn = allowed[rng.integers(0, len(allowed), size=prefix_len)].tolist()
        text, prefix = _fit_to_length(tokenizer, drawn, prefix_len, rng)
        if exact and len(prefix) != prefix_len:
            _, prefix = _repair_length(tokenizer, text, prefix_len, allowed)
        if len(prefix) != prefix_len:
            log.warning("random prefix came out %d tokens instead of %d", len(prefix), prefix_len)

    requests: list[SampleRequest] = []
    mismatch = 0
    for i in range(num_prompts):
        length = int(input_lens[i])
        body = allowed[(int(offsets[i]) + i + np.arange(length)) % len(allowed)].tolist()
        target = prefix_len + length
        text, ids = _fit_to_length(tokenizer, prefix + body, target, rng)
        if exact and len(ids) != target:
            # Fillers continue the request's own run of consecutive ids.
            start = int(offsets[i]) + i + length
            fillers = np.roll(allowed, -(start % len(allowed)))
            text, ids = _repair_length(tokenizer, text, target, fillers)
        mismatch += len(ids) - target
        requests.append(
            SampleRequest(
                prompt=text,
                prompt_len=len(ids),
                expected_output_len=int(output_lens[i]),
                ignore_eos=True,
            )
        )
    if mismatch:
        log.warning(
            "random prompts: %d token(s) %s than asked for in total after re-encoding",
            abs(mismatch),
            "more" if mismatch > 0 else "fewer",
        )
    return requests


# ---------------------------------------------------------------------------------------------
# ShareGPT: reading


def _missing_file(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"ShareGPT file {path}: {why}; {SHAREGPT_OPTION_HINT}; {SHAREGPT_SOURCE_HINT}"
    )


def _malformed(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"ShareGPT file {path} is malformed: {why}. Expected a JSON list of "
        '{"id": ..., "conversations": [{"from": "human", "value": ...}, '
        '{"from": "gpt", "value": ...}, ...]} objects, the shape of '
        f"ShareGPT_V3_unfiltered_cleaned_split.json ({SHAREGPT_OPTION_HINT})"
    )


_CHUNK_CHARS = 1 << 20
_JSON_SPACE = " \t\n\r"


def _scan_list(path: Path) -> Iterator[tuple[int, int, Any]]:
    """Each element of the top-level JSON list: (byte offset, byte length, parsed value).

    The file is read in pieces and each element parsed on its own, so memory holds one element
    at a time, not the whole file (the real ShareGPT file is about 650 MB of JSON).
    """
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    with path.open("rb") as raw:
        buf = ""
        pos = 0
        mark, mark_bytes = 0, 0  # buf[mark] sits at byte mark_bytes of the file
        eof = False

        def refill() -> bool:
            nonlocal buf, pos, mark, eof
            if eof:
                return False
            # Grow with the buffer, so one huge element is not re-scanned once per piece.
            data = raw.read(max(_CHUNK_CHARS, len(buf) - mark))
            eof = not data
            try:
                text = utf8.decode(data, final=eof)
            except UnicodeDecodeError as exc:
                raise _malformed(path, f"not UTF-8 ({exc.reason})") from None
            buf, pos, mark = buf[mark:] + text, pos - mark, 0
            return bool(text) or not eof

        def skip_space() -> bool:
            """Move to the next non-space character; False at the end of the file."""
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in _JSON_SPACE:
                    pos += 1
                if pos < len(buf):
                    return True
                if not refill():
                    return False

        if not skip_space() or buf[pos] != "[":
            raise _malformed(path, "the top level is not a JSON list")
        pos += 1
        expect_element = True  # right after '[' or ','
        first = True
        while True:
            if not skip_space():
                raise _malformed(path, "the list is not closed (truncated file?)")
            if buf[pos] == "]" and (first or not expect_element):
                pos += 1
                break
            if not expect_element:
                if buf[pos] != ",":
                    raise _malformed(path, f"expected ',' or ']' at byte {mark_bytes}")
                pos += 1
                expect_element = True
                continue
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                    break
                except json.JSONDecodeError as exc:
                    if not refill():
                        raise _malformed(path, f"invalid JSON ({exc.msg})") from None
            # Separators are ASCII, so characters and bytes agree up to the element.
            offset = mark_bytes + len(buf[mark:pos].encode("utf-8"))
            size = len(buf[pos:end].encode("utf-8"))
            yield offset, size, value
            mark, mark_bytes, pos = end, offset + size, end
            expect_element, first = False, False
        if skip_space():
            raise _malformed(path, "unexpected data after the top-level list")


class _ConversationIndex:
    """Where each usable conversation (two turns or more) lies in the file, in file order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets = array("q")
        self.sizes = array("q")
        self.positions = array("q")  # the entry's index in the file's list, for messages
        for position, (offset, size, entry) in enumerate(_scan_list(path)):
            if not isinstance(entry, dict):
                raise _malformed(path, f"entry {position} is not an object")
            if "conversations" not in entry:
                continue
            turns = entry["conversations"]
            if not isinstance(turns, list):
                raise _malformed(path, f"entry {position}: 'conversations' is not a list")
            if len(turns) >= 2:
                self.offsets.append(offset)
                self.sizes.append(size)
                self.positions.append(position)

    def __len__(self) -> int:
        return len(self.offsets)

    def first_exchange(self, raw: Any, row: int) -> tuple[str, str]:
        """The first two turns' texts (roles are not checked, as in vLLM)."""
        raw.seek(self.offsets[row])
        entry = json.loads(raw.read(self.sizes[row]).decode("utf-8"))
        texts = []
        for turn in entry["conversations"][:2]:
            if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
                raise _malformed(
                    self.path,
                    f"entry {self.positions[row]}: a turn without a string 'value'",
                )
            texts.append(turn["value"])
        return texts[0], texts[1]

    def exchanges(self, raw: Any, row: int) -> list[tuple[str, str]]:
        """Every (question, answer) pair of a conversation, in order; a text that is not a
        string ends the list there."""
        raw.seek(self.offsets[row])
        entry = json.loads(raw.read(self.sizes[row]).decode("utf-8"))
        values = [t.get("value") if isinstance(t, dict) else None for t in entry["conversations"]]
        pairs: list[tuple[str, str]] = []
        for question, answer in zip(values[0::2], values[1::2], strict=False):
            if not isinstance(question, str) or not isinstance(answer, str):
                break
            pairs.append((question, answer))
        return pairs


def sharegpt_conversations(
    path: str | os.PathLike[str],
    tokenizer: Tokenizer,
    *,
    num_conversations: int,
    turns: int,
    seed: int = 0,
    output_len: int | None = None,
) -> list[SampleRequest]:
    """The first ``turns`` exchanges of ShareGPT conversations that have that many, chosen in
    the order of a seeded shuffle, conversation by conversation (for measure/multiturn).

    Each user turn is a request; its answer length is the recorded answer's token count (or
    ``output_len``), and generation may stop at EOS, as in the ``sharegpt`` dataset. A turn
    must fit vLLM's ShareGPT limits on its own (4..1024 tokens, answer at least 4).
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise _missing_file(file, "no such file")
    index = _ConversationIndex(file)
    order = list(range(len(index)))
    random.Random(seed).shuffle(order)
    chosen: list[SampleRequest] = []
    found = 0
    with file.open("rb") as raw:
        for row in order:
            if found == num_conversations:
                break
            pairs = index.exchanges(raw, row)
            if len(pairs) < turns:
                continue
            chat = []
            for question, answer in pairs[:turns]:
                prompt_len = len(tokenizer.encode(question, add_special_tokens=True))
                out_len = output_len or len(tokenizer.encode(answer, add_special_tokens=True))
                if not _acceptable(prompt_len, out_len, fixed_output=output_len is not None):
                    break
                chat.append(SampleRequest(question, prompt_len, out_len, ignore_eos=False))
            if len(chat) == turns:
                chosen.extend(chat)
                found += 1
    if found < num_conversations:
        raise _malformed(
            file,
            f"only {found} conversation(s) have {turns} exchanges within the length limits, "
            f"{num_conversations} are needed; lower turns or num_prompts",
        )
    return chosen


def _acceptable(prompt_len: int, output_len: int, fixed_output: bool) -> bool:
    if prompt_len < SHAREGPT_MIN_LEN or prompt_len > SHAREGPT_MAX_PROMPT_LEN:
        return False
    if not fixed_output and output_len < SHAREGPT_MIN_LEN:
        return False
    # The total limit applies to a fixed output length too (SGLang's older code skipped it).
    return prompt_len + output_len <= SHAREGPT_MAX_TOTAL_LEN


def sharegpt_requests(
    path: str | os.PathLike[str],
    tokenizer: Tokenizer,
    *,
    num_prompts: int,
    seed: int = 0,
    output_len: int | None = None,
) -> list[SampleRequest]:
    """Requests from a ShareGPT JSON file, chosen and ordered as vLLM's ``sharegpt`` dataset.

    Lengths count special tokens (as vLLM does for this dataset); ``output_len`` replaces each
    answer's length and lifts the minimum-output filter. Generation may stop at EOS
    (``ignore_eos`` is False). When fewer than ``num_prompts`` conversations pass the filters,
    random ones are repeated to make up the number.
    """
    file = Path(path).expanduser()
    if not file.exists():
        raise _missing_file(file, "no such file")
    if not file.is_file():
        raise _missing_file(file, "not a file")
    try:
        index = _ConversationIndex(file)
    except OSError as exc:
        raise _missing_file(file, f"cannot read it ({exc.strerror})") from None

    # vLLM seeds the global generator and shuffles the filtered list; a private generator with
    # the same seed makes the same swaps, and the swaps depend on the length alone, so
    # shuffling row numbers gives the same order without holding the entries.
    order = list(range(len(index)))
    random.Random(seed).shuffle(order)

    requests: list[SampleRequest] = []
    with file.open("rb") as raw:
        for row in order:
            if len(requests) >= num_prompts:
                break
            prompt, answer = index.first_exchange(raw, row)
            prompt_len = len(tokenizer.encode(prompt, add_special_tokens=True))
            if output_len is None:
                out_len = len(tokenizer.encode(answer, add_special_tokens=True))
            else:
                out_len = output_len
            if _acceptable(prompt_len, out_len, fixed_output=output_len is not None):
                requests.append(SampleRequest(prompt, prompt_len, out_len, ignore_eos=False))

    if len(requests) < num_prompts:
        if not requests:
            raise _malformed(
                file,
                f"none of its {len(index)} conversation(s) of two turns or more passes the "
                f"length filters (prompt {SHAREGPT_MIN_LEN}..{SHAREGPT_MAX_PROMPT_LEN} tokens, "
                f"answer at least {SHAREGPT_MIN_LEN}, both at most {SHAREGPT_MAX_TOTAL_LEN})",
            )
        # vLLM reseeds the global generator here and picks from the accepted requests only.
        picker = random.Random(seed)
        accepted = list(requests)
        requests.extend(picker.choice(accepted) for _ in range(num_prompts - len(accepted)))
    return requests


# ---------------------------------------------------------------------------------------------
# ShareGPT: a synthetic file for tests and CI

# Sentence counts to draw from: mostly short, a long tail (about 19 tokens a sentence with the
# embedded tokenizer). Tables of integers, not float distributions, so the bytes cannot depend
# on a platform's libm.
_PROMPT_SENTENCES = (1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 8, 10, 13, 17, 24, 32)
_ANSWER_SENTENCES = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 19, 24, 30, 40, 52)
_TINY_PROMPTS = ("Hi", "hello", "ok", "Thanks!", "?")
_TINY_ANSWERS = ("OK.", "Yes.", "Sure!", "No.")
_ID_ALPHABET = string.ascii_letters + string.digits


def _text(rng: random.Random, sentences: list[str], count: int) -> str:
    picked = [rng.choice(sentences) for _ in range(count)]
    # A paragraph break every few sentences, as real conversations have.
    paragraphs = [" ".join(picked[i : i + 4]) for i in range(0, len(picked), 4)]
    return "\n\n".join(paragraphs)


def _conversation(rng: random.Random, sentences: list[str]) -> list[dict[str, str]]:
    def turn(role: str, text: str) -> dict[str, str]:
        return {"from": role, "value": text}

    kind = rng.randrange(100)
    if kind < 2:  # no turns at all: dropped before the shuffle
        return []
    if kind < 5:  # a question nobody answered: dropped before the shuffle
        return [turn("human", _text(rng, sentences, rng.choice(_PROMPT_SENTENCES)))]
    if kind < 8:  # prompt under 4 tokens: filtered
        prompt = rng.choice(_TINY_PROMPTS)
        answer = _text(rng, sentences, rng.choice(_ANSWER_SENTENCES))
    elif kind < 10:  # answer under 4 tokens: filtered unless the output length is fixed
        prompt = _text(rng, sentences, rng.choice(_PROMPT_SENTENCES))
        answer = rng.choice(_TINY_ANSWERS)
    elif kind < 13:  # prompt over 1024 tokens: filtered
        prompt = _text(rng, sentences, rng.randint(60, 80))
        answer = _text(rng, sentences, rng.choice(_ANSWER_SENTENCES))
    elif kind < 16:  # prompt fits, prompt + answer over 2048 tokens: filtered
        prompt = _text(rng, sentences, rng.randint(40, 50))
        answer = _text(rng, sentences, rng.randint(70, 80))
    else:
        prompt = _text(rng, sentences, rng.choice(_PROMPT_SENTENCES))
        answer = _text(rng, sentences, rng.choice(_ANSWER_SENTENCES))
    # A few start with the model's turn, as some real ones do; vLLM ignores the roles.
    first, second = ("gpt", "human") if kind in (16, 17) else ("human", "gpt")
    turns = [turn(first, prompt), turn(second, answer)]
    if rng.randrange(10) < 3:  # follow-up turns, ignored by the sampling
        for _ in range(rng.choice((1, 2))):
            turns.append(turn(first, _text(rng, sentences, rng.choice(_PROMPT_SENTENCES[:8]))))
            turns.append(turn(second, _text(rng, sentences, rng.choice(_ANSWER_SENTENCES[:8]))))
    return turns


def write_synthetic_sharegpt(
    path: str | os.PathLike[str], *, conversations: int = 1200, seed: int = 0
) -> Path:
    """Write a ShareGPT-shaped file made of the packaged corpus; same arguments, same bytes.

    The shape is that of ShareGPT_V3_unfiltered_cleaned_split.json; about 16 % of the entries
    are there to be dropped (no answer, too short, too long).
    """
    from pytest_llmperf.engines.tinymodel import corpus_text

    sentences = [line.strip() for line in corpus_text().splitlines() if line.strip()]
    rng = random.Random(seed)
    entries = []
    for _ in range(conversations):
        ident = "".join(rng.choice(_ID_ALPHABET) for _ in range(7))
        entries.append({"id": f"{ident}_0", "conversations": _conversation(rng, sentences)})
    data = (json.dumps(entries, ensure_ascii=False, indent=2) + "\n").encode("utf-8")

    target = Path(path)
    # Written aside and renamed, so a reader in another process never sees half a file.
    write_atomically(target, data)
    return target


# ---------------------------------------------------------------------------------------------
# dispatch


def build_requests(
    profile: WorkloadProfile,
    tokenizer: Tokenizer,
    *,
    sharegpt_path: str | os.PathLike[str] | None = None,
) -> list[SampleRequest]:
    """The requests of ``profile``, in the order they are to be sent."""
    if profile.dataset == "multi-turn" and profile.user_turns == "sharegpt":
        if sharegpt_path is None:
            raise ConfigError(
                f"profile {profile.name!r} takes its conversations from a ShareGPT file but "
                f"none was given; {SHAREGPT_OPTION_HINT}; {SHAREGPT_SOURCE_HINT}"
            )
        return sharegpt_conversations(
            sharegpt_path,
            tokenizer,
            num_conversations=profile.num_prompts // (profile.turns or 1),
            turns=profile.turns or 1,
            seed=profile.seed,
            output_len=profile.output_len,
        )
    if profile.dataset in ("random", "multi-turn"):
        # multi-turn: the user turns, conversation by conversation (measure/multiturn).
        if profile.input_len is None or profile.output_len is None:
            raise ConfigError(f"profile {profile.name!r}: random needs input_len and output_len")
        return random_requests(
            tokenizer,
            num_prompts=profile.num_prompts,
            input_len=profile.input_len,
            output_len=profile.output_len,
            range_ratio=profile.range_ratio,
            seed=profile.seed,
        )
    if profile.dataset == "sharegpt":
        if sharegpt_path is None:
            raise ConfigError(
                f"profile {profile.name!r} reads a ShareGPT file but none was given; "
                f"{SHAREGPT_OPTION_HINT}; {SHAREGPT_SOURCE_HINT}"
            )
        return sharegpt_requests(
            sharegpt_path,
            tokenizer,
            num_prompts=profile.num_prompts,
            seed=profile.seed,
            output_len=profile.output_len,
        )
    if profile.dataset == "shared-prefix":
        if None in (profile.num_prefixes, profile.prefix_len, profile.suffix_len):
            raise ConfigError(
                f"profile {profile.name!r}: shared-prefix needs num_prefixes, prefix_len and "
                "suffix_len"
            )
        return shared_prefix_requests(
            tokenizer,
            num_prompts=profile.num_prompts,
            num_prefixes=profile.num_prefixes or 0,
            prefix_len=profile.prefix_len or 0,
            suffix_len=profile.suffix_len or 0,
            output_len=profile.output_len or 0,
            seed=profile.seed,
        )
    raise ConfigError(f"profile {profile.name!r}: unknown dataset {profile.dataset!r}")
