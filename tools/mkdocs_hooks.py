"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

The docstrings follow kazoo's Sphinx style (``:class:`ConsumerConfig```); mkdocstrings renders
their roles as text, ``:class:`` before the code span. Here each role becomes its code span,
linked to the object's entry when the page has one (``#zkconsumer.ConsumerConfig``).
"""

from __future__ import annotations

import re
from typing import Any

#: A Sphinx role as mkdocstrings renders it: the role's name, then the target as code.
_ROLE = re.compile(r":(?:class|meth|attr|func|data|exc|mod|obj):<code>(~?)([\w.]+)</code>")


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML with the Sphinx roles of its docstrings turned into code spans."""
    ids = set(re.findall(r'id="(zkconsumer[\w.]*)"', html))

    def code(match: re.Match[str]) -> str:
        tilde, target = match.groups()
        shown = target.rsplit(".", 1)[-1] if tilde else target
        anchor = f"zkconsumer.{target.rsplit('.', 1)[-1]}"
        if anchor in ids:
            return f'<a href="#{anchor}"><code>{shown}</code></a>'
        return f"<code>{shown}</code>"

    return _ROLE.sub(code, html)
