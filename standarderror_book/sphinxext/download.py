"""The notebook a reader downloads from a page (the ``.ipynb`` of its download menu), written
for a plain notebook renderer (GitHub's, nbviewer, JupyterLab without the book's extensions).

The executed notebook of the build keeps its code cells and their outputs unchanged, in their
order; only the Markdown is rewritten, from MyST to plain Markdown:

* a first cell says what the notebook is and how to install what it runs on (the repository
  named in ``_config.yml``, ``bash scripts/setup.sh``, then Jupyter);
* a ``{pin}`` quote becomes its quoted number (the value the build checked);
* a directive becomes Markdown: a theorem, lemma, definition or exercise a bold numbered
  heading with its body, a proof ending in a square, an admonition a block quote under its
  title, a labelled equation display maths with its number;
* a figure's caption (MyST-NB's cell metadata, which a plain renderer ignores) follows its
  code cell as a numbered paragraph;
* a role becomes text: ``{cite}`` the author-year citation (a References cell at the end lists
  the works cited), ``{doc}`` the page's title, ``{ref}``, ``{prf:ref}`` and ``{eq}`` the
  section, the numbered block ("Theorem 2") and the equation's number, ``{math}`` inline maths;
  a label target becomes an HTML anchor;
* the solutions follow the exercises: every solution (its prose and its code cells) moves,
  in order, under a "Solutions" heading after the last exercise, where no code cell lies
  between the first solution and the last (the code then runs in the same order).

:func:`plain_notebook` does the rewriting from a :class:`Lookup` (what a label, a page or a
citation key reads as); :func:`sphinx_lookup` builds one from a Sphinx build's environment.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

#: An opening fence of a directive: backticks or colons, ``{name}``, an argument.
_OPEN = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*)$")
_ROLE = re.compile(r"\{(?P<name>[\w:-]+)\}`(?P<body>[^`]*)`")
_TARGET = re.compile(r"^\((?P<label>[\w.:-]+)\)=[ \t]*$")
_EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)

#: Directives of sphinx-proof that are numbered blocks, and the word each is shown with.
PROOF_KINDS = {k: k.capitalize() for k in (
    "theorem", "lemma", "definition", "corollary", "proposition", "conjecture", "axiom",
    "remark", "example", "algorithm", "criterion", "assumption", "observation", "property",
    "notation")}
_ADMONITIONS = {"note", "warning", "tip", "important", "hint", "caution", "attention",
                "danger", "error", "seealso"}


@dataclass
class Lookup:
    """What the build knows that a notebook alone does not.

    ``titles``: docname -> title; ``sections``: label -> section title; ``numbered``: label ->
    (kind word, number, title) of a numbered block (theorem, exercise ...); ``equations``:
    label -> number; ``citations``: key -> (authors in short, year, the full reference);
    ``docname``: the page's own docname (a ``{doc}`` target is relative to it).
    """

    docname: str = ""
    titles: dict = field(default_factory=dict)
    sections: dict = field(default_factory=dict)
    numbered: dict = field(default_factory=dict)
    equations: dict = field(default_factory=dict)
    citations: dict = field(default_factory=dict)
    cited: list = field(default_factory=list)

    def doc_title(self, target: str) -> str:
        import posixpath

        target = target[:-3] if target.endswith(".md") else target
        if target.startswith("/"):
            name = target.lstrip("/")
        else:
            name = posixpath.normpath(posixpath.join(posixpath.dirname(self.docname), target))
        return self.titles.get(name, target)

    def cite(self, keys: list[str], textual: bool) -> str:
        parts = []
        for key in keys:
            if key not in self.cited:
                self.cited.append(key)
            authors, year, _ = self.citations.get(key, (key, "", ""))
            parts.append(f"{authors} ({year})" if textual else f"{authors}, {year}")
        return "; ".join(parts) if textual else "(" + "; ".join(parts) + ")"


# --------------------------------------------------------------------------------------------
# Roles


def _role(m: re.Match, look: Lookup) -> str:
    name, body = m.group("name"), m.group("body")
    explicit = _EXPLICIT.match(body)
    text, target = (explicit.group("text"), explicit.group("target")) if explicit else (None, body)
    if name == "pin":
        return body.partition("=")[2].strip()
    if name in ("cite", "cite:p", "cite:t", "cite:ps", "cite:ts", "cite:ct", "cite:cp"):
        keys = [k.strip() for k in body.split(",") if k.strip()]
        return look.cite(keys, textual=name.startswith("cite:t") or name == "cite:ct")
    if name == "doc":
        return text if text else f"*{look.doc_title(target)}*"
    if name in ("ref", "numref", "prf:ref"):
        if text:
            return text
        if target in look.numbered:
            kind, number, _title = look.numbered[target]
            return f"{kind} {number}".strip()
        return look.sections.get(target, target)
    if name == "eq":
        number = look.equations.get(target)
        return f"({number})" if number is not None else f"({target})"
    if name == "math":
        return f"${body}$"
    if name in ("code", "literal", "kbd", "samp", "file", "command", "program"):
        return f"`{body}`"
    if name == "sub":
        return f"<sub>{body}</sub>"
    if name == "sup":
        return f"<sup>{body}</sup>"
    return text if text else target


def roles(text: str, look: Lookup) -> str:
    """Every role of a Markdown text as plain text, outside inline code and display maths."""
    out, pos = [], 0
    # inline code spans are kept as they are
    for m in re.finditer(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)|\{[\w:-]+\}`[^`]*`", text, re.S):
        out.append(text[pos:m.start()])
        piece = m.group(0)
        role = _ROLE.fullmatch(piece)
        out.append(_role(role, look) if role else piece)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Directives


@dataclass
class Block:
    """A piece of a Markdown cell: plain text (``name`` None) or one directive."""

    text: str
    name: str | None = None
    arg: str = ""
    options: dict = field(default_factory=dict)
    body: str = ""


def split_blocks(text: str) -> list[Block]:
    """A Markdown text cut into plain text and top-level directives (fences of backticks or
    colons: a directive closes at a line of its fence's character at least as long)."""
    lines = text.split("\n")
    blocks: list[Block] = []
    plain: list[str] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if m is None:
            plain.append(lines[i])
            i += 1
            continue
        fence = m.group("fence")
        close = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if plain:
            blocks.append(Block("\n".join(plain)))
            plain = []
        inner = lines[i + 1:j]
        options = {}
        k = 0
        while k < len(inner) and re.match(r"^:[\w-]+:", inner[k]):
            key, _, value = inner[k][1:].partition(":")
            options[key] = value.strip()
            k += 1
        body = "\n".join(inner[k:]).strip("\n")
        blocks.append(Block("\n".join(lines[i:j + 1]), m.group("name"), m.group("arg").strip(),
                            options, body))
        i = j + 1
    if plain:
        blocks.append(Block("\n".join(plain)))
    return blocks


def _anchor(label: str | None) -> str:
    return f'<a id="{label}"></a>\n\n' if label else ""


def _quote(text: str) -> str:
    return "\n".join("> " + line if line.strip() else ">" for line in text.split("\n"))


def render_block(block: Block, look: Lookup) -> str:
    """One block as plain Markdown (a directive's body rendered recursively)."""
    if block.name is None:
        return _plain_text(block.text, look)
    name, label = block.name, block.options.get("label")
    body = markdown(block.body, look) if block.body else ""
    if name.startswith("prf:"):
        kind = name[4:]
        if kind == "proof":
            return f"*Proof.* {body} $\\square$".strip()
        word = PROOF_KINDS.get(kind, kind.capitalize())
        number = look.numbered.get(label, (word, "", ""))[1] if label else ""
        title = roles(block.arg, look)
        head = f"**{word}{' ' + str(number) if number else ''}{f' ({title})' if title else ''}.**"
        return _anchor(label) + f"{head} {body}".strip()
    if name == "exercise":
        number = look.numbered.get(label, ("Exercise", "", ""))[1] if label else ""
        title = roles(block.arg, look)
        head = f"**Exercise{' ' + str(number) if number else ''}{f' ({title})' if title else ''}.**"
        return _anchor(label) + f"{head} {body}".strip()
    if name == "solution-start":
        kind, number, title = look.numbered.get(block.arg, ("Exercise", "", ""))
        what = f"Exercise {number}".strip() + (f" ({title})" if title else "")
        return _anchor(label) + f"**Solution to {what}.**"
    if name == "solution-end":
        return ""
    if name == "admonition" or name in _ADMONITIONS:
        title = roles(block.arg, look) if name == "admonition" else name.capitalize()
        return _anchor(label) + _quote(f"**{title}**\n\n{body}".strip())
    if name == "math":
        number = look.equations.get(label) if label else None
        tag = f"\n\\tag{{{number}}}" if number is not None and "\\tag" not in block.body else ""
        return _anchor(label) + f"$$\n{block.body.strip()}{tag}\n$$"
    if name in ("code-block", "code", "sourcecode"):
        return f"```{block.arg}\n{block.body}\n```"
    return _anchor(label) + body


def _plain_text(text: str, look: Lookup) -> str:
    lines = []
    for line in text.split("\n"):
        target = _TARGET.match(line)
        if target:
            lines.append(f'<a id="{target.group("label")}"></a>')
        elif re.match(r"^%", line):  # a MyST comment
            continue
        else:
            lines.append(line)
    return roles("\n".join(lines), look)


def markdown(text: str, look: Lookup) -> str:
    """A MyST Markdown text as plain Markdown."""
    parts = [render_block(b, look) for b in split_blocks(text)]
    return re.sub(r"\n{3,}", "\n\n", "\n\n".join(p.strip("\n") for p in parts if p.strip()))


# --------------------------------------------------------------------------------------------
# The notebook


def _pieces(nb) -> list[tuple[str, object]]:
    """The notebook as a list of ("code", cell) and ("md", Block) pieces."""
    pieces = []
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown":
            pieces += [("md", b) for b in split_blocks(cell.source)]
        else:
            pieces.append(("code", cell))
    return pieces


def solutions_last(pieces: list) -> list:
    """Every solution (solution-start to solution-end: prose and code) moved, in order, after
    the last exercise, under a "Solutions" heading; unchanged when a code cell outside the
    solutions lies between the first solution and the last (the code must run in order)."""
    starts = [i for i, (kind, p) in enumerate(pieces) if kind == "md" and p.name == "solution-start"]
    if not starts:
        return pieces
    kept, moved, inside, end = [], [], False, None
    for i, (kind, p) in enumerate(pieces):
        if kind == "md" and p.name == "solution-start":
            inside = True
        if inside:
            moved.append((kind, p))
        else:
            kept.append((i, (kind, p)))
        if kind == "md" and p.name == "solution-end":
            inside, end = False, i
    if end is None or inside:
        return pieces
    between = [k for i, (k, p) in kept if starts[0] < i < end and k == "code"]
    if between:
        return pieces
    last_exercise = max((i for i, (k, p) in kept if k == "md" and p.name == "exercise"
                         and i < end), default=end)
    out = []
    for i, piece in kept:
        out.append(piece)
        if i == last_exercise:
            out.append(("md", Block("## Solutions")))
            out += moved
    if last_exercise not in {i for i, _ in kept}:
        out += [("md", Block("## Solutions"))] + moved
    return out


def figure_caption(cell, look: Lookup) -> str:
    """A code cell's figure caption (MyST-NB's ``mystnb.figure`` metadata, which a plain
    renderer does not show) as a Markdown paragraph with its number, or ''."""
    figure = ((cell.get("metadata") or {}).get("mystnb") or {}).get("figure") or {}
    caption = figure.get("caption")
    if not caption:
        return ""
    label = figure.get("name")
    word, number, _ = look.numbered.get(label, ("Fig.", "", "")) if label else ("Fig.", "", "")
    return _anchor(label) + f"**{word}{' ' + number if number else ''}.** {caption}"


def plain_notebook(nb, look: Lookup, first_cell: str):
    """A copy of the executed notebook ``nb`` for a plain renderer (see the module's text):
    code cells and outputs as they are, the Markdown rewritten, ``first_cell`` first."""
    import nbformat

    out = copy.deepcopy(nb)
    cells, pending = [], []

    def flush():
        text = markdown("\n\n".join(b.text for b in pending), look) if pending else ""
        if text.strip():
            cells.append(nbformat.v4.new_markdown_cell(text))
        pending.clear()

    for kind, piece in solutions_last(_pieces(nb)):
        if kind == "code":
            flush()
            cells.append(piece)
            caption = figure_caption(piece, look)
            if caption:
                pending.append(Block(caption))
        else:
            pending.append(piece)
    flush()
    if look.cited:
        refs = [f"- {look.citations[k][2]}" for k in look.cited if k in look.citations]
        if refs:
            cells.append(nbformat.v4.new_markdown_cell("## References\n\n" + "\n".join(refs)))
    out.cells = [nbformat.v4.new_markdown_cell(first_cell)] + cells
    for cell in out.cells:
        cell.pop("id", None)
    out.nbformat, out.nbformat_minor = 4, max(int(out.get("nbformat_minor", 5)), 5)
    for i, cell in enumerate(out.cells):
        cell["id"] = f"cell-{i}"
    return out


def first_cell(book_title: str, page_title: str, repository: str) -> str:
    """The first cell: what the notebook is, and how to install what it runs on."""
    folder = repository.rstrip("/").rsplit("/", 1)[-1] or "standarderror"
    return (
        f"**About this notebook.** *{page_title}*, a page of *{book_title}*, as the book's "
        "build executed it, outputs included. Each number the text quotes is the value the "
        "build computed and checked against the code.\n\n"
        "**To run it**, install the book's package, `standarderror`, from its repository "
        f"({repository}) with Python 3.11 or newer. The setup script makes a virtual "
        "environment with the package at the versions the numbers were measured with (CPU "
        "build of PyTorch, no GPU needed):\n\n"
        "```bash\n"
        f"git clone {repository}\n"
        f"cd {folder}\n"
        "bash scripts/setup.sh        # .venv with standarderror[book,test]\n"
        ".venv/bin/jupyter lab        # then open this notebook and run it from the top\n"
        "```\n\n"
        "In an environment of your own, `pip install -e \".[book]\"` in the clone installs "
        "the same package at the newest versions its ranges allow."
    )


# --------------------------------------------------------------------------------------------
# From a Sphinx build


def _unbrace(text: str) -> str:
    return text.replace("{", "").replace("}", "")


def _authors(persons) -> str:
    last = [_unbrace(" ".join(p.last_names)) for p in persons]
    if not last:
        return ""
    if len(last) == 1:
        return last[0]
    if len(last) == 2:
        return f"{last[0]} and {last[1]}"
    return f"{last[0]} et al."


def _reference(entry) -> str:
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = _unbrace(", ".join(" ".join(p.last_names) + (
        ", " + " ".join(n[0] + "." for n in p.first_names) if p.first_names else "")
        for p in persons))
    fields = entry.fields
    title = fields.get("title", "").replace("{", "").replace("}", "")
    where = fields.get("journal") or fields.get("booktitle") or fields.get("publisher") or ""
    link = fields.get("url") or (f"https://doi.org/{fields['doi']}" if fields.get("doi") else "")
    text = f"{names} ({fields.get('year', '')}). {title}."
    if where:
        text += f" *{where.replace('{', '').replace('}', '')}*."
    if link:
        text += f" <{link}>"
    return text


def citations_from_bib(paths) -> dict:
    """key -> (authors in short, year, full reference) of every entry of the BibTeX files."""
    from pybtex.database import parse_file

    out = {}
    for path in paths:
        for key, entry in parse_file(str(path)).entries.items():
            persons = entry.persons.get("author") or entry.persons.get("editor") or []
            out[key] = (_authors(persons) or key, entry.fields.get("year", ""), _reference(entry))
    return out


def sphinx_lookup(app, docname: str) -> Lookup:
    """The :class:`Lookup` of a page, from a Sphinx build's environment: page titles, section
    labels, numbered blocks (sphinx-proof, sphinx-exercise: Sphinx's figure numbers), equation
    numbers, and the book's BibTeX files."""
    from pathlib import Path

    env = app.env
    look = Lookup(docname=docname)
    look.titles = {doc: title.astext() for doc, title in env.titles.items()}
    std = env.get_domain("std")
    for label, (_doc, _id, title) in std.labels.items():
        look.sections[label] = title
    words = {"exercise": "Exercise", "figure": "Fig.", "table": "Table", "code-block": "Listing"}
    for _doc, kinds in getattr(env, "toc_fignumbers", {}).items():
        for figtype, ids in kinds.items():
            for node_id, numbers in ids.items():
                number = ".".join(str(n) for n in numbers)
                if figtype == "displaymath":
                    look.equations[node_id.removeprefix("equation-")] = number
                else:
                    word = words.get(figtype) or PROOF_KINDS.get(figtype, figtype.capitalize())
                    look.numbered[node_id] = (word, number, "")
    for label, info in getattr(env, "sphinx_exercise_registry", {}).items():
        node = info.get("node")
        if info.get("type") == "exercise" and label in look.numbered and node is not None \
                and len(node):
            title = node[0].astext().strip()
            title = title[len("Exercise"):].strip() if title.startswith("Exercise") else title
            word, number, _ = look.numbered[label]
            look.numbered[label] = (word, number, title)
    for label, entry in env.get_domain("math").data.get("objects", {}).items():
        if label not in look.equations and entry[0] == docname:
            look.equations[label] = entry[1]
    bibfiles = [Path(app.srcdir) / p for p in getattr(app.config, "bibtex_bibfiles", [])]
    look.citations = citations_from_bib([p for p in bibfiles if p.is_file()])
    return look
