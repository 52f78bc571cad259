"""The README's committed pictures (docs/NAME.png) and their series (docs/NAME.json), and the
command that redraws them all:

    python tools/gallery.py docs

Each picture is `attnws ARGV --out FOLDER/NAME.png --json`; its JSON document is written without
the "out" field, so the committed series is what `attnws ARGV --json` prints.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

PICTURES = {
    "default-target-seq": ["plot", "--sweep", "seq"],
    "bert-base-pmha-fp32-sm80-seq": ["plot", "--target", "bert-base-pmha-fp32-sm80", "--sweep", "seq"],
    "bert-large-pmha-fp16-sm80-vs-sm90-seq": [
        "plot", "--target", "bert-large-pmha-fp16-sm90", "--sweep", "seq", "--compare", "sm=80,90",
        "--title", "BERT-large packed encoder: A100 (sm80) against H100 (sm90)"],
    "mha-decoder-kv-cache-fp32-sm80-prefill-seq": [
        "plot", "--target", "mha-decoder-kv-cache-fp32-sm80", "--sweep", "seq", "--at", "past=0"],
    "gqa-split-kv-drop-total-seq": [
        "plot", "--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "2", "--kv-heads", "2", "--head-size", "64",
        "--total-seq", "13000..14000", "--past", "16384", "--max-total-seq", "16384", "--sm", "80", "--sm-count", "108",
        "--env", "ORT_ENABLE_XQA=0", "--env", "ORT_DISABLE_FLASH_DECODE=1", "--sweep", "total-seq",
        "--title", "GroupQueryAttention, ORT issue #32453: one more key, fewer bytes (Flash split-KV, 108 SMs)"],
    "paged-llama-3-8b-bs16-tokens": [
        "plot", "--op", "paged", "--batch", "8", "--seq", "2", "--tokens", "2..16", "--kv-len", "8192", "--heads", "32",
        "--kv-heads", "8", "--head-size", "128", "--block-size", "16", "--max-blocks", "512", "--rotary", "--sm", "80",
        "--sweep", "tokens", "--title", "PagedAttention, Llama-3-8B, 16-token blocks: the route changes as T crosses B = 8"],
}


def regenerate(folder: Path) -> list[Path]:
    """Draw every picture into `folder` and write its series beside it; return the files written."""
    from attnws.cli import run

    written = []
    for name, argv in PICTURES.items():
        picture, data = folder / f"{name}.png", folder / f"{name}.json"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run([*argv, "--out", str(picture), "--json"])
        if code != 0:
            raise SystemExit(f"attnws {' '.join(argv)} exited {code}: {err.getvalue().strip()}")
        document = json.loads(out.getvalue())
        document.pop("out")
        data.write_text(json.dumps(document, indent=2) + "\n")
        written += [picture, data]
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python tools/gallery.py FOLDER (an existing folder, the repository's docs)",
              file=sys.stderr)
        return 2
    for path in regenerate(Path(argv[0])):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
