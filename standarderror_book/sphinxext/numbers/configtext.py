"""Text a reader sees on every page that comes from the book's configuration, not from a page:
the book's title, the author, the copyright line (when shown), the theme's announcement banner
and extra footer, and the ``_toc.yml`` part captions and entry titles. Its numbers obey the
rules of a page's prose (:mod:`.scanner`); only the book-wide settings (``se_settings``, labels
only) can declare them, since no code stands behind them."""

from __future__ import annotations

from .doctree import CHECK, _html_text
from .scanner import Finding, _Scanner


def config_texts(config, site_map=None) -> list[tuple[str, str]]:
    """(where, text) of every configured text a reader sees on the site."""
    out: list[tuple[str, str]] = []

    def add(where, value, html=False):
        if isinstance(value, str) and value.strip():
            out.append((where, _html_text(value) if html else value))

    add("title", getattr(config, "html_title", None))
    add("project", getattr(config, "project", None))
    add("author", getattr(config, "author", None))
    if getattr(config, "html_show_copyright", True):
        add("copyright", getattr(config, "copyright", None))
    options = getattr(config, "html_theme_options", None) or {}
    for key in ("announcement", "extra_footer", "extra_navbar"):
        add(f"html.{key}", options.get(key), html=True)
    if site_map is not None:
        for docname in site_map:
            doc = site_map[docname]
            add(f"_toc.yml entry {docname} title", getattr(doc, "title", None))
            for tree in doc.subtrees:
                add(f"_toc.yml caption under {docname}", tree.caption)
                for item in tree.items:
                    add(f"_toc.yml entry {getattr(item, 'url', item)} title",
                        getattr(item, "title", None))
    return out


def config_findings(config, site_map, phrases: list[str]) -> list[tuple[str, Finding]]:
    """Every number of :func:`config_texts`, classed as on a page (a bare one fails the build)."""
    out = []
    for where, text in config_texts(config, site_map):
        scanner = _Scanner(phrases, set())
        scanner.pieces([(text, CHECK)], None, "prose")
        out += [(where, f) for f in scanner.findings]
    return out
