"""The pieces every HTML page of ipctrace is made of: its style sheet, escaped text, a table,
an inlined picture. report.py, lab.py and the whole-trace section (activity.py) draw with
them; none of them imports another page's module for these."""

import base64
import dataclasses
import html
from collections.abc import Iterable
from pathlib import Path

PAGE_CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1280px;color:#222;padding:0 16px}
h1{font-size:24px;margin-bottom:4px} h2{font-size:19px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;font-size:13px;margin:8px 0} td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left} th{background:#f5f5f5}
.warn{background:#fff3cd;border:1px solid #e0c060;padding:6px 10px;margin:6px 0}
.muted{color:#777;font-size:13px} img{max-width:100%} pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.bar{display:flex;height:26px;border:1px solid #ccc;margin:4px 0 2px} .bar div{height:100%}
.legend span{display:inline-block;margin-right:12px;font-size:12px} .legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.flame{margin:8px 0 24px}
"""


def esc(x: object) -> str:
    return html.escape(str(x))


@dataclasses.dataclass(frozen=True)
class Picture:
    """A PNG a page inlines: its file name, and its bytes or why it cannot be shown (run/ reads
    and writes the files; plots.py draws the bytes)."""

    name: str
    png: bytes | None = None
    why: str = ""


def picture(p: Picture) -> str:
    """The picture, inlined; one that could not be read is named in its place."""
    if p.png is None:
        return f"<p class=muted>{esc(p.name)} is not shown: {esc(p.why)}</p>"
    data = base64.b64encode(p.png).decode()
    return f'<img alt="{esc(Path(p.name).stem)}" src="data:image/png;base64,{data}">'


def html_table(header: Iterable[object], rows: Iterable[Iterable[object]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
