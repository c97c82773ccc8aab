"""Numbers the page's code types and shows: what an output of a cell may show only as a
setting, and the text the code draws into a figure.

* :func:`typed_by_cell`: per code cell, the numbers it typed for display (as
  :func:`.settings.code_literals` reads them: inside its string literals and as numeric
  literals of a display call), and the numbers held by the names a display call of the cell
  reads (or its last expression shows) when the page binds that name only to text made of
  literals: ``s = "ECE 0.012"`` in one cell and ``Markdown(s)`` in another, ``acc = 0.81``
  and ``print(acc)``, ``rows = [(0.81, 0.92)]`` and ``table(rows, ...)``, ``d = {"ECE":
  0.012}`` and ``HTML(pd.DataFrame(d).to_html())``. A number of a prose-like output that is
  one of them, or a rounding of one (``f"{0.81061:.4f}"`` shows 0.8106; :func:`is_typed`), is
  checked as prose: a setting declared, or a bare number.
* :func:`drawn_problems`: a number drawn into a figure (a title, an axis label, a legend, a
  text or an annotation) from a literal of the code is read by no scan of the page; it is a
  setting the page declares, or refused. Drawn text is read as maths is (labels such as
  ``1 - alpha`` or ``k/(n+1)`` are formulas): a number with a decimal point, a percent sign or
  three digits counts, and a measured number in words.
"""

from __future__ import annotations

import ast

from .settings import DISPLAY_CALLS, _typed_form, bindings, code_literals, parse_code
from .tokenizer import is_math_checked, tokens

#: Calls that keep literals literal (a container, a conversion, a table of them).
_LITERAL_CALLS = frozenset({"DataFrame", "Series", "dict", "list", "tuple", "set", "array",
                            "asarray", "float", "int", "str", "round", "format", "abs",
                            "sorted", "zip", "enumerate", "Markdown", "HTML"})
#: Drawing calls whose text arguments a figure shows, and the keywords that carry text.
TEXT_CALLS = frozenset({"set_title", "title", "suptitle", "set_xlabel", "set_ylabel", "xlabel",
                        "ylabel", "text", "annotate", "figtext", "legend", "set_label",
                        "set_text", "set_xticklabels", "set_yticklabels", "supxlabel",
                        "supylabel", "bar_label"})
_TEXT_KEYWORDS = frozenset({"label", "labels", "title", "s", "text", "xlabel", "ylabel"})
#: What stands in drawn text for a part the code computes.
_COMPUTED = " \u2026 "


def _name(func) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


class _Literals:
    """Which expressions are made of literals only, and their text (names read through the
    page's :func:`.settings.bindings`)."""

    def __init__(self, trees):
        self.bound = bindings(trees)
        self._seen: set[str] = set()

    def numbers(self, node) -> set[str] | None:
        """The typed forms of the numbers of a literal-only expression, or None."""
        text = self.text(node)
        return None if text is None else {_typed_form(t.text) for t in tokens(text)}

    def text(self, node, spec: str = "") -> str | None:
        """What a literal-only expression shows as text (a computed part as an ellipsis);
        None for an expression that is not made of literals and text at all."""
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or node.value is None:
                return str(node.value)
            if isinstance(node.value, (int, float)):
                return format(node.value, spec) if spec else repr(node.value)
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.text(node.operand, spec)
            return None if inner is None else ("-" if isinstance(node.op, ast.USub) else "") + inner
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    inner_spec = self.text(v.format_spec) if v.format_spec is not None else ""
                    part = self.text(v.value, inner_spec or "")
                    parts.append(_COMPUTED if part is None else part)
                else:
                    parts.append(self.text(v) or "")
            return "".join(parts)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            parts = [self.text(e) for e in node.elts]
            return None if any(p is None for p in parts) else " | ".join(parts)
        if isinstance(node, ast.Dict):
            parts = [self.text(e) for e in list(node.keys) + list(node.values)]
            return None if any(p is None for p in parts) else " | ".join(parts)
        if isinstance(node, ast.Call) and _name(node.func) in _LITERAL_CALLS:
            parts = [self.text(a) for a in node.args] + [self.text(k.value) for k in node.keywords]
            return None if any(p is None for p in parts) else " | ".join(parts)
        if isinstance(node, ast.Name):
            values = self.bound.get(node.id, [])
            if not values or node.id in self._seen:
                return None
            self._seen.add(node.id)
            try:
                texts = [self.text(v) for v in values]
            finally:
                self._seen.discard(node.id)
            return None if any(t is None for t in texts) else " | ".join(texts)
        return None


def typed_by_cell(cells: dict[int, str]) -> dict[int, set[str]]:
    """Per code cell (its index -> its source), the numbers it types for display (see the
    module docstring)."""
    trees = {i: parse_code(src) for i, src in cells.items()}
    lits = _Literals([t for t in trees.values() if t is not None])
    out = {}
    for i, src in cells.items():
        typed = set(code_literals([src])[1])
        tree = trees[i]
        if tree is not None:
            shown = [n for n in ast.walk(tree)
                     if isinstance(n, ast.Call) and _name(n.func) in DISPLAY_CALLS]
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                shown.append(tree.body[-1].value)
            for node in shown:
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                        typed |= lits.numbers(sub) or set()
        out[i] = typed
    return out


def is_typed(text: str, typed: set[str]) -> bool:
    """Whether the output token ``text`` is a number of ``typed`` as typed, a rounding of one
    that keeps a decimal or two digits (``0.8106`` of ``0.81061``; not ``1.00`` of ``1``), or
    one shown as a percentage (``81.06%`` of ``0.81061``)."""
    core = _typed_form(text)
    pct = core.endswith("%")
    shown = core.rstrip("%")
    decimals = len(shown.partition(".")[2])
    try:
        value = float(shown)
    except ValueError:
        return core in typed
    if decimals == 0 and not pct and abs(value) < 10:
        return False      # a small count or index: code types these everywhere
    if core in typed:
        return True
    for t in typed:
        try:
            v = float(t.rstrip("%"))
        except ValueError:
            continue
        if f"{v:.{decimals}f}" == shown and float(shown) != v:
            return True       # a rounding of the literal, not the same number padded (1.00)
        if pct and not t.endswith("%") and f"{v * 100:.{decimals}f}" == shown:
            return True       # the literal shown as a percentage
    return False


def drawn_texts(sources: list[str]) -> list[str]:
    """The text the code draws into figures from its literals (titles, labels, legends, texts,
    annotations), computed parts shown as an ellipsis."""
    trees = [t for t in map(parse_code, sources) if t is not None]
    lits = _Literals(trees)
    out = []
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            args = list(node.args) if _name(node.func) in TEXT_CALLS else []
            args += [k.value for k in node.keywords if k.arg in _TEXT_KEYWORDS]
            for a in args:
                text = lits.text(a)
                if text and any(c.isdigit() for c in text):
                    out.append(text)
    return out


def drawn_problems(sources: list[str], phrases: list[str]) -> list[str]:
    """Why each number the code draws into a figure from a literal is not a declared setting
    (see :func:`drawn_texts`)."""
    from .doctree import CHECK
    from .scanner import _Scanner

    out = []
    for text in drawn_texts(sources):
        scanner = _Scanner(phrases, set())
        scanner.pieces([(text, CHECK)], None, "drawn")
        for f in scanner.findings:
            if f.cls == "bare" and (f.kind == "words" or is_math_checked(f.number)):
                out.append(f"the code draws {f.number} into a figure from a literal ({text!r}): "
                           "a number a figure shows is computed, or a setting the page "
                           "declares under `settings:`" + (f" ({f.why})" if f.why else ""))
    return out
