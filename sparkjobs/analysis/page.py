"""The analysis report's HTML page: one self-contained page, its header (headline cards,
what a reader must not miss, the sections' links), the sections
(:mod:`sparkjobs.analysis.sections`) and a footer.

Standard library only. The charts are inline SVG (:mod:`sparkjobs.analysis.charts`), so
the page opens from a laptop, a console download or a mail attachment with no network,
fonts or JavaScript. Everything that came from the stream or the bucket goes through
``html.escape``.
"""

from __future__ import annotations

from html import escape

from sparkjobs.analysis import formats as fmt
from sparkjobs.analysis import sections
from sparkjobs.analysis.findings import Analysis

__all__ = ["render_html"]

_CSS = """
:root{--fg:#1d2733;--muted:#5b6875;--panel:#f3f5f7;--line:#d9dee3;--warn:#a4261d;
--warn-bg:#fdecea}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
max-width:1000px;margin:0 auto;padding:24px}
h1{font-size:1.5rem;margin:0 0 4px}
h2{font-size:1.2rem;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:16px 0 4px}
.meta,.note,.empty,footer{color:var(--muted)}
.empty{font-style:italic}
nav a{margin-right:12px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:16px 0}
.card{background:var(--panel);border-radius:6px;padding:8px 12px;min-width:100px}
.card .value{font-size:1.25rem;font-weight:600;font-variant-numeric:tabular-nums}
.card .label{font-size:.8rem;color:var(--muted)}
.card.warn,.alert{background:var(--warn-bg);color:var(--warn)}
.card.warn .label{color:var(--warn)}
.alert{padding:8px 12px;border-radius:6px}
table{border-collapse:collapse;font-size:.9rem;margin:8px 0;width:100%}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
td{overflow-wrap:anywhere}
.num{text-align:right;font-variant-numeric:tabular-nums}
svg.chart{display:block;max-width:100%;height:auto;margin:8px 0}
svg text{font:11px system-ui,sans-serif;fill:#444}
"""


def _card(value: str, label: str, warn: bool = False) -> str:
    css = "card warn" if warn else "card"
    return (
        f'<div class="{css}"><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
    )


def _header(a: Analysis) -> str:
    t = fmt.totals(a)
    removed = t.transport + t.producer + t.sequence
    cards = [
        _card(fmt.count(a.records), "records"),
        _card(fmt.size(a.bytes), "bytes"),
        _card(fmt.count(t.shards), "shards"),
        _card(fmt.count(t.transport), "transport duplicates removed"),
        _card(fmt.count(t.producer), "producer duplicates removed"),
        *([_card(fmt.count(t.sequence), "sequence duplicates removed")] if t.sequence else []),
        _card(fmt.rate(removed, t.input_rows), "duplicate rate"),
        _card(
            fmt.count(a.remaining_duplicates), "remaining duplicates", a.remaining_duplicates > 0
        ),
        _card(fmt.count(t.dead_letters), "dead letters", bool(a.dead_letters)),
        _card(f"{t.bad_files:,} / {t.bad_lines:,}", "bad files / lines", bool(a.bad_inputs)),
    ]
    warnings = fmt.warnings(a, t)
    alert = f'<p class="alert">Attention: {escape("; ".join(warnings))}.</p>' if warnings else ""
    generated = fmt.utc(a.generated_at).strftime("%Y-%m-%d %H:%M:%S UTC")
    links = [("volume", "Volume"), ("duplicates", "Duplicates"), ("lateness", "Lateness")]
    links += [("hot-keys", "Hot keys"), ("gaps", "Sequence gaps"), ("bad-input", "Bad input")]
    links += [("dead-letters", "Dead letters")]
    nav = "".join(f'<a href="#{anchor}">{title}</a>' for anchor, title in links)
    return (
        f"<header><h1>Stream {escape(a.stream)}</h1>"
        f'<p class="meta">window {escape(a.window)} &middot; generated {generated}</p>'
        f'<div class="cards">{"".join(cards)}</div>{alert}<nav>{nav}</nav></header>'
    )


def _footer(a: Analysis) -> str:
    where = (
        f"Parquet tables: <code>{escape(a.tables)}</code>"
        if a.tables
        else "The Parquet tables were not written for this run."
    )
    return f"<footer><p>{where}</p><p>Rendered by kinesis-lander sparkjobs.report.</p></footer>"


def render_html(analysis: Analysis) -> str:
    """The analysis as one self-contained HTML5 page: inline CSS and SVG, no script, no links
    outside the page. Every string from the data is escaped."""
    body = [
        _header(analysis),
        "<main>",
        sections.volume(analysis),
        sections.duplicates(analysis),
        sections.lateness(analysis),
        sections.hot_keys(analysis),
        sections.gaps(analysis),
        sections.bad_input(analysis),
        sections.dead_letters(analysis),
        sections.rescued(analysis),
        "</main>",
        _footer(analysis),
    ]
    title = escape(f"{analysis.stream} {analysis.window}: Kinesis analysis")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
