"""One self-contained HTML page with its PNGs and its data as JSON: the page ``bench`` and ``advise --trace`` write.

Below both (``bench --report-dir``'s figures and ``advise --trace --report-dir``'s emulated day): the figures are
drawn from the data the page embeds as JSON (``<script id="figure-data">``), so what a figure shows can be read back
(:func:`read_embedded`) and checked. Nothing is fetched: the SVGs are inline. The output is deterministic (no dates
in the files, a fixed SVG hash salt). matplotlib comes with the ``bench`` extra; without it the page holds the
numbers and names the extra.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_dpd.errors import install_extra

BENCH_EXTRA = "bench"
HTML_FILE = "report.html"
JSON_FILE = "report.json"
SVG_SALT = "hyperpod-dpd-bench"
VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'


def _save(figure: Any, kind: str) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=kind, metadata={"Date": None} if kind == "svg" else {"Software": None})
    return buffer.getvalue()


def _svg(figure: Any) -> str:
    text = _save(figure, "svg").decode("utf-8")
    return text[text.index("<svg"):]


@dataclass(frozen=True, kw_only=True)
class PageBody:
    """A page's own HTML instead of its text in a ``<pre>``: a banner above the figures, sections below them, and
    the style they need."""

    banner: str
    sections: str
    style: str


def _page(title: str, text: str, data: Mapping[str, Any], pictures: Sequence[tuple[str, str | None]],
          note: str | None, *, notes: Sequence[str] = (), body_html: PageBody | None = None) -> str:
    embedded = json.dumps(data, sort_keys=True).replace("</", "<\\/")
    body = "\n".join(f"<figure>{svg}" + (f"<figcaption>{html.escape(caption)}</figcaption>" if caption else "")
                     + "</figure>" for svg, caption in pictures)
    style = body_html.style if body_html is not None else \
        "body{font-family:sans-serif;margin:1.5em}pre{font-size:12px;overflow-x:auto}"
    return "\n".join([
        "<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        *([VIEWPORT] if body_html is not None else []),
        f"<title>{html.escape(title)}</title>",
        f"<style>{style}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        *([body_html.banner] if body_html is not None else []),
        *([f"<p><strong>{html.escape(note)}</strong></p>"] if note else []),
        *(f"<p>{html.escape(each)}</p>" for each in notes),
        f"<div class=\"figures\">{body}</div>" if body_html is not None else body,
        body_html.sections if body_html is not None else f"<pre>{html.escape(text)}</pre>",
        f"<script type=\"application/json\" id=\"figure-data\">{embedded}</script>", "</body></html>", ""])


def write_page(folder: Path, *, title: str, text: str, data: Mapping[str, Any], document: Mapping[str, Any],
               draw: Callable[[Mapping[str, Any]], list[tuple[str, Any]]],
               captions: Mapping[str, str | None] | None = None, notes: Sequence[str] = (),
               body_html: PageBody | None = None) -> list[Path]:
    """``report.html`` (its SVGs inline, ``data`` embedded), ``report.json`` (``document`` and ``data``) and, with
    matplotlib, one PNG per ``(file name, figure)`` that ``draw(data)`` returns; without it the page says so.

    :param captions: by file name, the text under that figure. :default: - none
    :param notes: paragraphs at the top of the page, with or without pictures. :default: - none
    :param body_html: the page's own banner and sections in place of ``text``. :default: - ``text`` in a ``<pre>``
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / JSON_FILE]
    written[0].write_text(json.dumps({**document, "figures": data}, indent=2) + "\n", encoding="utf-8")
    try:
        from matplotlib import rc_context  # noqa: PLC0415 - the bench extra's
    except ImportError:
        note: str | None = f"no pictures: they need matplotlib ({install_extra(BENCH_EXTRA)})"
        pictures: list[tuple[str, str | None]] = []
    else:
        note, pictures = None, []
        # A fixed hash salt makes the SVG's ids the same on every run; text as paths needs no font on the reader's side.
        with rc_context({"svg.hashsalt": SVG_SALT, "svg.fonttype": "path", "font.size": 9.0}):
            for name, figure in draw(data):
                pictures.append((_svg(figure), (captions or {}).get(name)))
                (folder / name).write_bytes(_save(figure, "png"))
                written.append(folder / name)
    page = folder / HTML_FILE
    page.write_text(_page(title, text, data, pictures, note, notes=notes, body_html=body_html), encoding="utf-8")
    return [page, *written]




def read_embedded(page: str) -> dict[str, Any]:
    """The figure data a page embeds (what :func:`write_page` drew its figures from)."""
    start = page.index('<script type="application/json" id="figure-data">')
    text = page[page.index(">", start) + 1:page.index("</script>", start)]
    data: dict[str, Any] = json.loads(text.replace("<\\/", "</"))
    return data
