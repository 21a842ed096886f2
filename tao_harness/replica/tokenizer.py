"""A deterministic stand-in for a BPE tokenizer (tiktoken's encodings cannot be loaded offline here).

The text is split into GPT-style pieces — an optional leading space plus a run of letters, up to three
digits, a run of punctuation, or whitespace — and pieces longer than `MAX_PIECE_CHARS` are cut into
`CHUNK_CHARS`-character chunks, which puts English prose and code at roughly 4 characters per token,
close to cl100k on the same text. Each piece maps to a stable id (CRC-32 of its UTF-8 bytes folded into
`VOCAB_SIZE`), so equal text always yields equal ids in every process: that is what the emulated prefix
cache needs. Ids below `FIRST_TEXT_ID` are reserved for the chat template's special tokens.

Because the pieces concatenate back to the input, `pieces()` doubles as the detokenizer for streaming.
"""

from __future__ import annotations

import re
import zlib

FIRST_TEXT_ID = 256
VOCAB_SIZE = 100_000
MAX_PIECE_CHARS = 6
CHUNK_CHARS = 4

_PIECE = re.compile(r" ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|_+|\s+")


def pieces(text: str) -> list[str]:
    """The token pieces of `text`, in order; `"".join(pieces(t)) == t`."""
    out: list[str] = []
    for match in _PIECE.finditer(text):
        piece = match.group()
        if len(piece) <= MAX_PIECE_CHARS:
            out.append(piece)
        else:
            out.extend(piece[i : i + CHUNK_CHARS] for i in range(0, len(piece), CHUNK_CHARS))
    return out


def piece_id(piece: str) -> int:
    """The stable token id of one piece."""
    return FIRST_TEXT_ID + zlib.crc32(piece.encode("utf-8")) % VOCAB_SIZE


def encode(text: str) -> list[int]:
    """Token ids of `text`."""
    return [piece_id(piece) for piece in pieces(text)]


def count(text: str) -> int:
    """Number of tokens in `text`."""
    return len(pieces(text))


class Vocabulary:
    """The pieces behind the ids a server has handed out, so `/detokenize` can map them back.

    Ids are hashes of their pieces and cannot be inverted; a server remembers the pieces of the text it
    tokenized for clients (bounded: the oldest are forgotten first).
    """

    def __init__(self, max_pieces: int = 200_000) -> None:
        self.max_pieces = max_pieces
        self._pieces: dict[int, str] = {}

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, remembering their pieces."""
        ids = []
        for piece in pieces(text):
            token = piece_id(piece)
            self._pieces.pop(token, None)
            self._pieces[token] = piece
            ids.append(token)
        while len(self._pieces) > self.max_pieces:
            del self._pieces[next(iter(self._pieces))]
        return ids

    def decode(self, ids: list[int]) -> str:
        """The text of `ids` (reserved ids spelled `<|special_N|>`); KeyError naming the first text id
        this vocabulary never handed out."""
        return "".join(f"<|special_{t}|>" if 0 <= t < FIRST_TEXT_ID else self._pieces[t] for t in ids)
