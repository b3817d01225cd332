"""Parsing an HTML report to check it is self-contained and offline (shared by the report
and sweep tests)."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """Collects tags, attributes, inline CSS and text of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.css: list[str] = []
        self.text: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "style":
            self.css.append(data)
        else:
            self.text.append(data)


def parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    p.close()
    return p


def assert_offline(html: str) -> Page:
    page = parse(html)
    assert not {"script", "link", "img", "iframe", "object", "embed", "base", "image", "use"} & set(page.tags)
    for key, value in page.attrs:
        assert not key.startswith("on"), key  # no event handlers
        low = value.lower()
        assert "//" not in low and "javascript:" not in low and "data:" not in low, (key, value)
        assert key not in ("src", "href", "xlink:href", "action"), key
    css = " ".join(page.css).lower()
    assert "url(" not in css and "@import" not in css
    assert "http:" not in html and "https:" not in html
    return page


__all__ = ["Page", "assert_offline", "parse"]
