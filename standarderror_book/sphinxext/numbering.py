"""Numbers that restart with each page: figures, tables, equations, theorems and exercises are
numbered ``N.1, N.2, ...`` on the N-th page of the book that holds a numbered object, in reading
order. The first such page is the model page (0), so Episode k's objects are ``k.1, k.2, ...``.

Sphinx numbers these objects in one run over the whole book (``env.toc_fignumbers``, filled by
its table-of-contents collector at ``env-get-updated``) unless the table of contents is
``numbered``, which would also number every heading. :func:`per_page` runs after that collector
(a later priority) and renumbers each page's objects, keeping their order on the page; every
reference, caption, equation number and the plain-renderer notebooks read the renumbered table.
"""

from __future__ import annotations


def reading_order(env) -> list[str]:
    """The book's documents in reading order: the root, then its table of contents, depth
    first."""
    seen, order = set(), []

    def walk(doc):
        if doc in seen:
            return
        seen.add(doc)
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(env.config.root_doc)
    return order


def per_page(app, env) -> list[str]:
    """Renumber ``env.toc_fignumbers`` page by page (see the module docstring); returns the
    renumbered documents, which Sphinx then writes again."""
    numbers = getattr(env, "toc_fignumbers", None)
    if not numbers:
        return []
    chapter, changed = 0, []
    for doc in reading_order(env):
        kinds = numbers.get(doc)
        if not kinds or not any(kinds.values()):
            continue
        for figtype, ids in kinds.items():
            ranked = sorted(ids, key=lambda node_id: ids[node_id])
            kinds[figtype] = {node_id: (chapter, n) for n, node_id in enumerate(ranked, 1)}
        changed.append(doc)
        chapter += 1
    return changed
