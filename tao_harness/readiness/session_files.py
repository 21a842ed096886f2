"""What a session's scripts contain, so that running one is described by its contents, not only its name.

Agents write a script in one call and run it in a later one: `cat <<'EOF' > train.py ... EOF`, then
`python3 train.py`. The run's command says little about the work (`train.py` is a new name every time);
the write said it all (`import torch`, `epochs`, `requests.get`). So each session's writes are
remembered — heredoc bodies that `cat`/`tee` send to a file, and structured writes (`path`/`file_path`
with `file_text`/`content`) — and a later command of the same session that names a written file is
described with the file's words too, marked `src:` so that they match other runs' scripts rather than
writes. The write itself is data, not work (it returns at once), so its body is left out of the words
the write is compared by (`split_writes`); a heredoc fed to a program (`python3 - <<EOF`) stays in.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

# A heredoc that cat/tee copies to a file: `cat <<'EOF' > f.py`, `cat > f.py <<EOF`, `tee f.py <<EOF`.
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_COPIER = re.compile(r"\b(?:cat|tee)\b[^|;&]*<<")
_TARGET = re.compile(r"(?:>>?|\btee\s+(?:-a\s+)?)\s*['\"]?([\w./~-]+)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = re.compile(r"[\w.-]+")
_PATH_KEYS = ("path", "file_path")
_TEXT_KEYS = ("file_text", "content")
_TEXT_CHARS = 2000  # as `neighbors.call_words`: a script's head says what it imports
SOURCE_MARK = "src:"


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def split_writes(command: str) -> tuple[str, dict[str, str]]:
    """(the command without the bodies of the heredocs it writes to files, {file name: body})."""
    kept: list[str] = []
    files: dict[str, str] = {}
    lines = command.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        heredoc, target = _HEREDOC.search(line), _TARGET.search(line)
        if heredoc is None or target is None or _COPIER.search(line) is None:
            continue
        body: list[str] = []
        while index < len(lines) and lines[index].strip() != heredoc.group(2):
            body.append(lines[index])
            index += 1
        files[_basename(target.group(1))] = "\n".join(body)
    return "\n".join(kept), files


def _structured_write(args: Mapping[str, Any] | None) -> dict[str, str]:
    if not args:
        return {}
    path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
    text = next((args[k] for k in _TEXT_KEYS if isinstance(args.get(k), str)), None)
    return {_basename(path): text} if path and text else {}


class SessionFiles:
    """Per session, the marked words of the files it wrote (the most recent sessions and files only)."""

    def __init__(self, max_sessions: int = 1024, max_files: int = 64) -> None:
        self._sessions: OrderedDict[str, OrderedDict[str, frozenset[str]]] = OrderedDict()
        self._max_sessions = max_sessions
        self._max_files = max_files

    def read(self, session: str, command: str | None, args: Mapping[str, Any] | None) -> tuple[str | None, frozenset[str]]:
        """Remember what this call writes. Returns the command without the bodies it writes to files, and
        the marked words of the session's files the command uses (names outside the written bodies and
        the write targets: `cat > f.py <<EOF ... EOF` alone uses none, `... EOF && python f.py` does)."""
        stripped, writes = split_writes(command) if command else (command, {})
        writes.update(_structured_write(args))
        if not session:
            return stripped, frozenset()
        if writes:
            files = self._sessions.setdefault(session, OrderedDict())
            self._sessions.move_to_end(session)
            if len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
            for name, text in writes.items():
                files[name] = frozenset(SOURCE_MARK + w for w in _WORD.findall(text[:_TEXT_CHARS]))
                files.move_to_end(name)
                if len(files) > self._max_files:
                    files.popitem(last=False)
        known = self._sessions.get(session)
        if not known or not stripped:
            return stripped, frozenset()
        used = set(_NAME.findall(_TARGET.sub(" ", stripped)))
        return stripped, frozenset(word for name, words in known.items() if name in used for word in words)
