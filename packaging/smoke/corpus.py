"""Write the smoke test's small tree: one file of each supported kind, English and Chinese.

    python packaging/smoke/corpus.py DIR
Every file here must end EMBEDDED (dist_test.sh checks `ragd run --once` exits 0). The expected top hit of each
query of QUERIES is printed as JSON for the script to check.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support import docgen, scangen

QUERIES = {
    "giraffes on the savanna": "animals.pdf",
    "电池容量是多少": "battery.docx",
    "release plan for December": "plan.pptx",
    "widget inventory quantity": "stock.xlsx",
    "quarterly budget review moved to Thursday": "minutes.odt",  # LibreOffice's format, read without it
    "ERR_CONN_RESET": "errors.log",
    "袋鼠用什么带孩子": "page.html",  # an English page for a Chinese question (the bundled CC-CEDICT glosses)
    "invoice 4711 paid in full": "scan.png",  # a picture of text: read by OCR
    "walrus ledger seven tusks": "scanned.pdf",  # a PDF of page pictures, no text layer: read by OCR
}


def write(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    docgen.make_pdf(
        root / "animals.pdf", ["Giraffes live on the savanna and eat acacia leaves.", "Zebras too."]
    )
    docgen.make_docx(root / "battery.docx", title="电池", heading="电池规格",
                     paragraphs=["电池容量是五千毫安时。", "The battery capacity is 5000 mAh."])  # fmt: skip
    docgen.make_pptx(root / "plan.pptx", [("Release plan", "Ship ragd in December, then iterate.")])
    docgen.make_xlsx(root / "stock.xlsx", [["widget", "inventory quantity"], ["blue widget", 42]])
    docgen.make_xls(root / "colours.xls", [["colour", "code"], ["blue", 7]])
    docgen.make_odt(root / "minutes.odt", heading="Meeting minutes",
                    paragraphs=["The quarterly budget review moved to Thursday."])  # fmt: skip
    docgen.make_ods(root / "rota.ods", {"Rota": [["day", "who"], ["Monday", "Lin"]]})
    docgen.make_odp(root / "kickoff.odp", [("Kickoff", "Goals for the first sprint")])
    docgen.make_html(root / "page.html", "Kangaroos", "<p>Kangaroos carry their young in a pouch.</p>")
    docgen.write_text(
        root / "notes.md", "# 会议记录\n\n下周讨论索引的性能。\n\n## Next\n\nBenchmark the index.\n"
    )
    docgen.write_text(root / "errors.log", "2026-11-30 client error ERR_CONN_RESET while syncing\n")
    docgen.make_csv(root / "table.csv", [["city", "country"], ["Lyon", "France"]])
    docgen.make_json(root / "data.json", {"service": "ragd", "purpose": "local search"})
    scangen.write_image(root / "scan.png", "Invoice 4711\n\nPaid in full on the first of March.")
    scangen.write_image_pdf(root / "scanned.pdf", ["The walrus ledger", "lists seven tusks in the cellar."])


if __name__ == "__main__":
    write(Path(sys.argv[1]))
    print(json.dumps(QUERIES, ensure_ascii=False))
