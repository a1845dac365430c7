"""Build the text sample bundled as ndlite/data/shakespeare_200k.txt.gz from tiny shakespeare.

    python tools/make_text_sample.py [--source ../shared/data/tinyshakespeare/input.txt]

The first 200,000 characters, cut back to the end of a speech (a blank line), gzipped with
mtime 0 so the output is byte-for-byte reproducible. The plays are in the public domain.
"""

from __future__ import annotations

import argparse
import gzip

from ndlite.data.text import BUNDLED


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="../shared/data/tinyshakespeare/input.txt")
    parser.add_argument("--chars", type=int, default=200_000)
    args = parser.parse_args()
    with open(args.source, encoding="utf-8") as f:
        text = f.read()[:args.chars]
    text = text[:text.rfind("\n\n") + 1]
    BUNDLED.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    print(f"wrote {len(text)} characters to {BUNDLED}")


if __name__ == "__main__":
    main()
