"""Remake the README's screenshots of `neardup review` (docs/review.png and
docs/review-pair.png): the page of the bundled 2,000-record stream and its truth, made as
the README's walkthrough makes it, opened in headless Chromium (tests/browser/chromium.py:
Debian's chromium and chromium-driver, `bash ops/stack.sh browser`) and saved.

    .venv/bin/python bench/review_screenshot.py [--records R.jsonl.gz --truth T.jsonl.gz]
        [--out docs] [--keep DIR]

The PNGs are quantized to 64 colors (Pillow, which matplotlib brings) to keep them small.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.chromium import chromium  # noqa: E402 - after the path is set

DATA = ROOT / "tests" / "data"


def neardup(work: Path, *args: str) -> None:
    """`python -m detector ARGS` in `work`, so that the page names its files as a user's
    walkthrough would (decisions.jsonl), not by a temporary directory's path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "detector", *args], check=True, cwd=work, env=env)


def small(path: Path) -> int:
    """Quantize a screenshot in place; its size in bytes."""
    from PIL import Image

    with Image.open(path) as image:
        image.convert("RGB").quantize(colors=64).save(path, optimize=True)
    return path.stat().st_size


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=Path, default=DATA / "stream-2k.jsonl.gz")
    p.add_argument("--truth", type=Path, default=DATA / "stream-2k-truth.jsonl.gz")
    p.add_argument("--out", type=Path, default=ROOT / "docs")
    p.add_argument("--keep", type=Path, help="write the decisions and the page here")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for given in (args.records, args.truth):
            (work / given.name).unlink(missing_ok=True)
            (work / given.name).symlink_to(given.resolve())
        records, truth = args.records.name, args.truth.name
        neardup(work, "detect", records, "-o", "decisions.jsonl", "--no-progress")
        neardup(
            work, "review", "decisions.jsonl", records, "--truth", truth, "-o", "review.html",
            "--no-progress",
        )  # fmt: skip
        page = work / "review.html"
        with chromium(1200, 1400) as driver:
            driver.get(page.resolve().as_uri())
            whole = args.out / "review.png"
            driver.save_screenshot(str(whole))
            pair = driver.find_element("css selector", "#threshold-text .below details.pair")
            driver.execute_script("arguments[0].open = true; arguments[0].scrollIntoView()", pair)
            one = args.out / "review-pair.png"
            pair.screenshot(str(one))
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        if errors:
            print(f"the page logged errors: {errors}", file=sys.stderr)
            return 1
    for path in (whole, one):
        print(f"{path}: {small(path):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
