"""Every ONNX Runtime commit cited in the tree is listed in docs/ort-version.md.

A citation is a lowercase hex word of 7 to 40 characters with at least one letter a-f and one
digit, standing alone (not part of a longer word, not after `0x`). The scan covers the Python
sources, tests, bench and tools scripts, README.md and the Markdown under docs/ and tests/; JSON
and ONNX data files are never read. Each citation must be a prefix of a commit listed in a table
of docs/ort-version.md (the readings valid at the pin, or the older readings). The page must also
name the version `attnws.spec.ort_version.ORT_VERSION` pins.
"""

from __future__ import annotations

import re
from pathlib import Path

from attnws.spec.ort_version import ORT_VERSION

ROOT = Path(__file__).resolve().parents[1]
VERSION_DOC = ROOT / "docs" / "ort-version.md"
SCANNED = ("attnws/**/*.py", "tests/**/*.py", "tests/**/*.md", "bench/*.py", "tools/*.py", "README.md",
           "docs/**/*.md")
NOT_SCANNED = {VERSION_DOC.resolve(), Path(__file__).resolve()}

HEX_WORD = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])")


def cited_hashes(line: str) -> list[str]:
    """Return the hex words of a line that read as commit citations."""
    found = []
    for match in HEX_WORD.finditer(line):
        word = match.group(0)
        if line[max(0, match.start() - 2):match.start()].lower() == "0x":
            continue
        if re.search(r"[a-f]", word) and re.search(r"[0-9]", word):
            found.append(word)
    return found


def listed_commits(text: str) -> set[str]:
    """Return the commits listed in the tables (the lines starting with '|') of the version page."""
    return {word for line in text.splitlines() if line.lstrip().startswith("|") for word in cited_hashes(line)}


def unlisted(name: str, text: str, listed: set[str]) -> list[str]:
    """Return 'name:line: hash' for every cited hash that is not a prefix of a listed commit."""
    return [f"{name}:{number}: {word}"
            for number, line in enumerate(text.splitlines(), 1)
            for word in cited_hashes(line)
            if not any(commit.startswith(word) for commit in listed)]


def scanned_files() -> list[Path]:
    files = {path.resolve() for pattern in SCANNED for path in ROOT.glob(pattern) if path.is_file()}
    return sorted(path for path in files if path not in NOT_SCANNED and ".venv" not in path.parts)


def test_every_cited_commit_is_listed():
    listed = listed_commits(VERSION_DOC.read_text())
    problems = [problem for path in scanned_files()
                for problem in unlisted(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"), listed)]
    assert not problems, "commits cited but not listed in docs/ort-version.md:\n" + "\n".join(problems)


def test_the_scan_covers_the_citing_files():
    names = {str(path.relative_to(ROOT)) for path in scanned_files()}
    assert {"attnws/spec/packed/footprint.py", "attnws/spec/mha/footprint.py", "README.md",
            "docs/research/ort-1.31.1-pin.md", "tests/data/ort_golden_cases.md"} <= names
    assert not any(name.endswith((".json", ".onnx")) for name in names)
    assert "docs/ort-version.md" not in names and "tests/test_ort_version.py" not in names


def test_the_page_names_the_pinned_version():
    rows = [line for line in VERSION_DOC.read_text().splitlines() if line.startswith("| pinned version |")]
    assert len(rows) == 1
    assert rows[0].split("|")[2].strip() == ORT_VERSION == "1.31.1"


def test_the_page_lists_full_commits_for_the_pin_readings():
    listed = listed_commits(VERSION_DOC.read_text())
    for commit in ("0125678538f0e5be1bec712951ca99073e84a61b", "008eeb96a1e2e8d5c23519a81a837f52b54d384b",
                   "735e69a396afe7e1bdfbc6b38c1d43eeb68b8484", "12b36ce4c9a380cb4a0e68c405d785057fe16a28"):
        assert commit in listed


def test_an_unlisted_commit_is_reported():
    listed = {"0125678538f0e5be1bec712951ca99073e84a61b", "c34d9b07a010d872d17350b3d055cddba5807157"}
    text = ("read at c34d9b07 and 0125678538f0;\n"
            "new claim: attention_impl.cu @ 5eed1e55badc0ffee0ddba11cafe1234567890ab\n")
    assert unlisted("planted.md", text, listed) == ["planted.md:2: 5eed1e55badc0ffee0ddba11cafe1234567890ab"]
    # a short citation that no listed commit starts with is reported as well
    assert unlisted("planted.py", "# see 012567a", listed) == ["planted.py:1: 012567a"]


def test_non_commit_hex_is_not_a_citation():
    assert cited_hashes("binary address 0x7bc730 and 0X1253160, index id 58208764897") == []
    assert cited_hashes("fp16 bf16 sm80 deadbeef 2026-02-13 ffffffffffff") == []
    assert cited_hashes("word1817f4a8 1817f4a8_suffix 1817f4a8") == ["1817f4a8"]
