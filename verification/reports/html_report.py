"""report.html: the run for people, one self-contained file beside report.json."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

_env = Environment(loader=PackageLoader("verification.reports", "templates"),
                   autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)


def render_html(report: dict[str, Any]) -> str:
    return _env.get_template("report.html.j2").render(r=report)
