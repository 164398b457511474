"""``python -m offline.catalog [--workdir DIR]``: rebuild the generated entries of
service/catalog/data/models.json from the pinned packages' published configs, and write
docs/catalog/models.md. Deterministic: the same packages give the same files."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from offline.catalog.build import catalogue_document
from offline.catalog.packages import unpacked_packages
from offline.catalog.report import report_markdown

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "service" / "catalog" / "data" / "models.json"
REPORT = ROOT / "docs" / "catalog" / "models.md"
COMMAND = "python -m offline.catalog"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    parser.add_argument(
        "--workdir", type=Path, help="where the packages are unpacked (kept; default: temporary)"
    )
    args = parser.parse_args(argv)
    previous = json.loads(CATALOGUE.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        built = catalogue_document(previous, unpacked_packages(workdir))
    document = built.document
    CATALOGUE.write_text(json.dumps(document, indent=2), "utf-8")
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(
        report_markdown(document["models"], built.left_out, COMMAND), encoding="utf-8"
    )
    print(
        f"{len(document['models'])} models -> {CATALOGUE.relative_to(ROOT)}, "
        f"{REPORT.relative_to(ROOT)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
