#!/usr/bin/env python3
"""Offline checks of ferroce's documentation; exit status 1 on any problem.

* Every relative link in README.md and docs/src/**/*.md names a file that
  exists, and its #anchor a heading of that file, with anchors made from
  headings as mdBook 0.4 makes them: the heading's text without markup,
  lowercased, whitespace to '-', every character but letters, digits, '_'
  and '-' dropped, and '-1', '-2', ... appended to repeats within a page.
* docs/src/SUMMARY.md lists every chapter file under docs/src and names no
  file that is missing.
* No file under crates/, scripts/, docs/src/ or README.md speaks of the
  tracker (the word "issue" or "session" followed by a number): the
  documents describe the software, and its history belongs to the commit
  log.

Standard library only, no network. Run from anywhere:
`python3 scripts/check-docs.py`.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "src"
SUMMARY = DOCS / "SUMMARY.md"

# Where the history check looks, and which files it reads there.
HISTORY_DIRS = ["crates", "scripts", "docs/src", "fuzz"]
TEXT_SUFFIXES = {".rs", ".toml", ".md", ".c", ".h", ".sh", ".py", ".txt", ".map"}
SKIP_DIRS = {"target", "book", ".git", "corpus", "artifacts"}
HISTORY = re.compile(r"\b(issue|session)s?\s+#?\d+", re.IGNORECASE)
# In the documents only: tracker items ("item 4") as well.
HISTORY_DOCS = re.compile(r"\bitems?\s+\d+\b", re.IGNORECASE)

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the target ends at whitespace or ')'.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HTML_TAG = re.compile(r"<[^>]+>")
INLINE_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def prose_lines(text):
    """Yields (line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def heading_text(raw):
    """A heading's text as mdBook renders it, without markup."""
    text = INLINE_LINK.sub(r"\1", raw)
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), text)
    text = HTML_TAG.sub("", text)
    text = text.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    # Emphasis markers are markup, not text.
    text = re.sub(r"(\*\*|__|\*|_)(?=\S)(.+?)(?<=\S)\1", r"\2", text)
    return text


def normalize_id(text):
    out = []
    for ch in text:
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        seen = {}
        ids = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            m = HEADING.match(line)
            if not m:
                continue
            base = normalize_id(heading_text(m.group(2)))
            count = seen.get(base, 0)
            seen[base] = count + 1
            ids.add(base if count == 0 else f"{base}-{count}")
        _anchor_cache[path] = ids
    return _anchor_cache[path]


def links(path):
    """Yields (line number, target) for every link outside code."""
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        line = CODE_SPAN.sub("", line)
        for m in LINK.finditer(line):
            yield number, m.group(1)


def rel(path):
    return path.relative_to(ROOT)


def check_links(files, problems):
    for path in files:
        for number, target in links(path):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # http:, https:, mailto: ... are not checked offline
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else (path.parent / file_part).resolve()
            where = f"{rel(path)}:{number}: link {target!r}"
            if not dest.exists():
                problems.append(f"{where}: no file {dest}")
                continue
            if anchor:
                if dest.suffix != ".md":
                    problems.append(f"{where}: an anchor into a file that is not Markdown")
                elif anchor not in anchors(dest):
                    problems.append(f"{where}: no heading with the anchor #{anchor} in {rel(dest)}")


def check_summary(problems):
    if not SUMMARY.exists():
        problems.append(f"{rel(SUMMARY)}: missing")
        return
    listed = set()
    for number, target in links(SUMMARY):
        file_part = target.partition("#")[0]
        if not file_part:
            continue
        dest = (SUMMARY.parent / file_part).resolve()
        listed.add(dest)
        if not dest.exists():
            problems.append(f"{rel(SUMMARY)}:{number}: names {file_part}, which does not exist")
    for path in sorted(DOCS.rglob("*.md")):
        if path != SUMMARY and path.resolve() not in listed:
            problems.append(f"{rel(path)}: not listed in {rel(SUMMARY)}")


def text_files():
    yield ROOT / "README.md"
    for top in HISTORY_DIRS:
        base = ROOT / top
        if not base.exists():
            continue
        for path in sorted(base.rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if path.is_file() and path.suffix in TEXT_SUFFIXES and not parts & SKIP_DIRS:
                yield path


def check_history(problems):
    for path in text_files():
        is_doc = path.name == "README.md" or DOCS in path.parents
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.split("\n"), 1):
            found = HISTORY.search(line) or (is_doc and HISTORY_DOCS.search(line))
            if found:
                problems.append(f"{rel(path)}:{number}: speaks of the project's history: {found.group(0)!r}")


def main():
    problems = []
    md_files = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    check_links([p for p in md_files if p.exists()], problems)
    check_summary(problems)
    check_history(problems)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-docs: {len(md_files)} documents, links, anchors, SUMMARY and history all fine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
