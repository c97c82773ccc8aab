r"""A model behind an OpenAI-compatible ``/v1/completions`` server (llama.cpp's server,
vLLM's, SGLang, TGI, ...), measured through its log-probabilities.

:class:`ServedModel` implements what the three measurements need from the server alone:

* **window rows** (calibration): each window is sent with its last label as one prompt,
  ``echo: true, logprobs: k, max_tokens: 1``. The server returns, for every prompt token,
  its log-probability (``token_logprobs``) and the ``k`` most likely tokens at that
  position (``top_logprobs``); the entry of the one generated token is dropped. The first
  prompt token has no log-probability (``null``): it is context only, never a scored
  target, so a window of ``T`` predictions is sent as ``T + 1`` tokens and every label's
  log-probability is the server's own number, exact. The rest of each row is known only in
  its top ``k`` (:func:`topk_rows`): every other token shares the remaining probability
  equally. What that approximates (the confidence at a temperature other than 1, the
  entropy score, the fitted temperature) is counted in :meth:`ServedModel.info`.
* **option scores** (conformal): each (context, option) pair is one echoed prompt; its
  score is the sum of the option's tokens' ``token_logprobs`` (exact).
* **samples** (spectral): one request per answer, each with its own seed (the server's
  ``n`` is not relied on: llama.cpp's ignores it), the temperature, ``max_tokens`` and stop
  strings; the answer is cut by the same stop rule as the in-process sampler. The draws are
  the server's, not the in-process sampler's.

Tokens are counted by a local tokenizer of the served model (a ``transformers`` tokenizer
directory, loaded with ``trust_remote_code=False``); the server's own tokenisation of every
prompt is checked against it (token count and text), and a mismatch raises.

**Bad input ends before any long work** (:meth:`ServedModel.check`): a base URL that is not
``http(s)``, a server that does not answer, a model name it does not list in ``/v1/models``
(a wrong name may be answered by another model with status 200), a server whose answer to
an echoed prompt lacks ``echo`` or ``logprobs``, or holds a missing or non-finite
log-probability, or tokenises otherwise than the tokenizer: each raises
:class:`ServerError` (a ``ValueError``) with one line. The API key is read from the
environment variable the caller names; it is sent in the ``Authorization`` header only and
never appears in a result, a message or a log.

Requests run ``concurrency`` at a time; a timeout, status 429 or a 5xx status is retried
``retries`` times with exponential backoff.

**Resumable** (``log``): every answered completion request is appended, as one JSON line, to a
results log (``<out>/<task>.requests.jsonl`` from the command line): the SHA-256 of the
request's body (model, prompt, parameters, seed) and the choice the server returned. A rerun
with the same log answers each request it holds from the log without sending it, so a run that
was killed loses only the requests in flight, and a finished run repeats exactly. The log is
data: each line is read as JSON and checked (a 64-hex key and a choice object); a last line cut
by a kill is set aside, any other malformed line is an error.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from standarderror import _checks, _progress
from standarderror.llm.prefix_tree import first_word, one_word

from .base import LanguageModel
from .directory import _one_line, hub_offline
from .hf import HFModel, _tokenizer_errors

#: Stop strings sent with each sample of the one-word rule: characters that end a word and
#: never start the whitespace a context hands to its answer. A sample stopped by one whose
#: answer is then still open is drawn again with the same seed and no stop strings.
STOP = ("\n", ".", ",", ";")
#: The text of the first request, which checks echo, log-probabilities and the tokenizer.
PROBE = "The quality of mercy is not strained; it droppeth as the gentle rain."
#: The largest results log read back (bytes).
MAX_LOG_BYTES = 4 << 30
#: HTTP statuses retried (with timeouts and refused connections).
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class ServerError(ValueError):
    """The server or its answers cannot be measured (one line)."""


def topk_rows(top_ids, top_lp, labels, label_lp, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole float64 log-probability rows (n x vocab) from what a server returns, and the
    probability each row leaves to the tokens it does not name (n,).

    ``top_ids`` / ``top_lp``: per row, the token ids and log-probabilities of its returned
    top entries (lists; an entry that cannot be attributed to one token id is left out);
    ``labels`` / ``label_lp``: each row's label and its exact log-probability. The label's
    value and the top entries are set; the probability left over,
    :math:`1 - \\sum p_{\\text{known}}`, is shared equally by every other token; each row is
    then renormalised in log space. With every entry returned the rows are the server's
    distributions; with ``k`` entries, argmax and the top probability are exact, the
    label's log-probability is exact, and everything that depends on the tail (the
    probabilities at a temperature other than 1, the entropy) is approximate."""
    n = len(labels)
    out, left = np.empty((n, vocab)), np.zeros(n)
    for r in range(n):
        ids = np.asarray(top_ids[r], dtype=np.int64)
        lp = np.asarray(top_lp[r], dtype=float)
        keep = ids != labels[r]
        ids = np.r_[ids[keep], labels[r]]
        lp = np.r_[lp[keep], label_lp[r]]
        known = math.fsum(np.exp(lp))
        left[r] = max(0.0, 1.0 - known)
        others = vocab - ids.size
        row = np.empty(vocab)
        if others > 0:
            rest = max(1.0 - known, 1e-300)
            row.fill(math.log(rest / others))
        row[ids] = lp
        m = row.max()
        out[r] = row - (m + math.log(np.exp(row - m).sum()))
    return out, left


class ServedModel(LanguageModel):
    """A model served by an OpenAI-compatible completions API.

    Parameters
    ----------
    base_url : str
        ``http://host:port`` (or ``https://``), with or without ``/v1``.
    model : str
        The name the server lists in ``/v1/models``.
    tokenizer : path
        A local ``transformers`` tokenizer directory of the served model.
    api_key : str, optional
        Sent as ``Authorization: Bearer``; never recorded.
    top_logprobs : int
        ``k``: the top entries asked for at each position of a window (calibration).
    window : int, optional
        The server's context length; by default the tokenizer's ``model_max_length``.
        Two positions are kept free (a BOS token the server may add, and the one generated
        token every request asks for).
    concurrency, timeout, retries, backoff
        Requests in flight at once; seconds before a request times out; retries of a
        timeout, 429 or 5xx; the first retry's wait in seconds (doubled each time).
    """

    def __init__(self, base_url: str, model: str, *, tokenizer, api_key: str | None = None,
                 top_logprobs: int = 20, window: int | None = None, concurrency: int = 4,
                 timeout: float = 60.0, retries: int = 4, backoff: float = 0.5,
                 log=None, check: bool = True):
        url = urllib.parse.urlsplit(str(base_url))
        if url.scheme not in ("http", "https") or not url.netloc:
            raise ServerError(f"--base-url must be an http:// or https:// URL, got "
                              f"{_one_line(base_url)!r}")
        if url.query or url.fragment or url.username or url.password:
            raise ServerError("--base-url must hold no query, fragment or credentials (pass "
                              "a key with --api-key-env)")
        path = url.path.rstrip("/")
        if path.endswith("/v1"):
            path = path[:-3]
        self.base = f"{url.scheme}://{url.netloc}{path}/v1"
        if not isinstance(model, str) or not model.strip():
            raise ServerError("--model must name the served model")
        self.top_k = _checks.positive_int(top_logprobs, "top_logprobs")
        self.concurrency = _checks.positive_int(concurrency, "concurrency")
        self.retries = int(retries)
        self.timeout, self.backoff = float(timeout), float(backoff)
        self._key = api_key or None
        self._lock = threading.Lock()
        self.stats = {"rows": 0, "dropped_top_entries": 0, "rest_mass_sum": 0.0,
                      "rest_mass_max": 0.0, "requests": 0, "retries": 0, "redrawn": 0,
                      "from_log": 0}
        self._log_path, self._done = None, {}
        if log is not None:
            self._log_path, self._done = _read_log(log)
        self.tokenizer = _load_tokenizer(tokenizer)
        tok = self.tokenizer
        if window is None:
            window = getattr(tok, "model_max_length", None)
            if not window or window > 10 ** 7:
                raise ServerError(f"the tokenizer in {tokenizer} names no context length; "
                                  "pass --window (the server's context length)")
        window = _checks.positive_int(window, "window")
        if window < 4:
            raise ServerError(f"a window of {window} tokens leaves no room to score")
        self._pieces = pieces = [self._piece(i) for i in range(len(tok))]
        counts: dict = {}
        for s in pieces:
            counts[s] = counts.get(s, 0) + 1
        # a piece that is not whole UTF-8 text decodes to U+FFFD here and may decode to the
        # empty string or a shorter text on the server: such strings name no one token
        unsure = {s.replace("\ufffd", "") for s in pieces if "\ufffd" in s} | {
            s for s in pieces if "\ufffd" in s}
        # a special token is never shown as its text (llama.cpp's server shows it as "")
        special = set(getattr(tok, "all_special_ids", ()) or ())
        self._id_of = {s: i for i, s in enumerate(pieces)
                       if counts[s] == 1 and s not in unsure and s and i not in special}
        #: token ids no returned entry can be attributed to (their mass joins the rest)
        self.unnamed = sorted(set(range(len(tok))) - set(self._id_of.values()))
        super().__init__(name=model, tokenizer_name=type(tok).__name__, vocab_size=len(tok),
                         window=window - 2, character_level=False, prefix=[])
        self.label = model
        self.server: dict = {"base_url": self.base}
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency)
        if check:
            self.check()

    # ---- HTTP ----------------------------------------------------------------------------
    def _request(self, method: str, path: str, body=None, *, retry: bool = True,
                 root: bool = False):
        base = self.base[:-3] if root else self.base
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        attempts = 1 + (self.retries if retry else 0)
        wait, last = self.backoff, ""
        for attempt in range(attempts):
            req = urllib.request.Request(base + path, data=data, headers=headers,
                                         method=method)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read(64 << 20)
                    header = resp.headers.get("Server")
                with self._lock:
                    self.stats["requests"] += 1
                    if header:
                        self.server.setdefault("server_header", header)
                try:
                    return json.loads(raw)
                except ValueError:
                    raise ServerError(f"{base}{path} answered with something that is "
                                      "not JSON") from None
            except urllib.error.HTTPError as exc:
                detail = _one_line(exc.read(2000).decode("utf-8", "replace"))[:200]
                last = f"status {exc.code} from {base}{path}: {detail}"
                if exc.code not in RETRY_STATUS:
                    raise ServerError(last) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"{base}{path} did not answer: {_one_line(reason)}"
            if attempt + 1 < attempts:
                with self._lock:
                    self.stats["retries"] += 1
                time.sleep(wait)
                wait *= 2
        raise ServerError(last + (f" (after {attempts} tries)" if attempts > 1 else ""))

    def _complete(self, body: dict, *, retry: bool = True, logged: bool = True) -> dict:
        body = {"model": self.name, **body}
        key = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()
        if logged and key in self._done:
            with self._lock:
                self.stats["from_log"] += 1
            return self._done[key]
        out = self._request("POST", "/completions", body, retry=retry)
        choices = out.get("choices") if isinstance(out, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise ServerError(f"{self.base}/completions answered without choices")
        choice = choices[0]
        if logged and self._log_path is not None:
            line = json.dumps({"key": key, "choice": choice}, allow_nan=True) + "\n"
            with self._lock:
                with open(self._log_path, "a", encoding="utf-8") as f:
                    f.write(line)
                self._done[key] = choice
        return choice

    def _map(self, fn, items, label=None):
        """``fn`` over ``items``, ``concurrency`` at a time, results in order."""
        items = list(items)
        return list(_progress.bar(self._pool.map(fn, items), label, len(items)))

    # ---- checks --------------------------------------------------------------------------
    def check(self) -> None:
        """One request of each kind the measurements send, before any long work: the model
        is listed, an echoed prompt comes back with every log-probability, tokenised as the
        tokenizer does."""
        listing = self._request("GET", "/models", retry=False)
        ids = [m.get("id") for m in (listing.get("data") or []) if isinstance(m, dict)] \
            if isinstance(listing, dict) else []
        if self.name not in ids:
            raise ServerError(f"the server at {self.base} does not serve {self.name!r} "
                              f"(it lists {', '.join(map(repr, ids[:5])) or 'no model'})")
        entry = next(m for m in listing["data"] if m.get("id") == self.name)
        self.server.update({k: entry[k] for k in ("owned_by", "max_model_len") if k in entry})
        try:  # vLLM says its version here; llama.cpp's server does not
            v = self._request("GET", "/version", retry=False, root=True)
            if isinstance(v, dict) and "version" in v:
                self.server["version"] = str(v["version"])[:80]
        except ServerError:
            pass
        ids_ = self.encode(PROBE)
        self._echo(PROBE, ids_, self.top_k, retry=False, logged=False)

    def _echo(self, text: str, ids, k: int, *, retry: bool = True, logged: bool = True):
        """Echo ``text`` (tokenised here as ``ids``): the log-probabilities of tokens
        ``1..len(ids)-1`` and, with ``k``, their top entries."""
        choice = self._complete({"prompt": text, "echo": True, "logprobs": int(k),
                                 "max_tokens": 1, "temperature": 0.0}, retry=retry,
                                logged=logged)
        lp = choice.get("logprobs")
        if not isinstance(lp, dict) or not isinstance(lp.get("token_logprobs"), list):
            raise ServerError(f"{self.base} answered an echoed prompt without log-probabilities"
                              " (it must support echo with logprobs on /v1/completions)")
        tokens, values = lp.get("tokens") or [], lp["token_logprobs"]
        n = len(ids)
        if len(values) < 2 or len(tokens) != len(values):
            raise ServerError(f"{self.base} echoed {len(values)} log-probabilities for a prompt "
                              f"of {n} tokens (it must support echo with logprobs)")
        offsets = lp.get("text_offset")
        # the prompt's n entries, then the generated ones: one, or more where the server
        # completes a character split across tokens (llama-cpp-python does); where there are
        # more, the text offsets must show the first generated entry at the prompt's end
        more = len(values) > n + 1 and isinstance(offsets, list) and len(offsets) == len(
            values) and all(isinstance(o, int) for o in offsets[n - 1:n + 1]) and offsets[
            n - 1] < len(text) <= offsets[n]
        if len(values) != n + 1 and not more:
            raise ServerError(f"the server tokenises a prompt into {len(values) - 1} tokens "
                              f"where the tokenizer has {n}: either the tokenizer is not the "
                              "served model's, or the prompt's text does not encode back to "
                              "its ids (a window cut inside a word of a BPE tokenizer); the "
                              "server takes text, so such ids cannot be sent")
        for i, t in zip(ids, tokens[:n]):  # pieces that are whole text must be equal
            piece = self._pieces[int(i)]
            if "\ufffd" not in piece and piece != t:
                raise ServerError(f"the server reads token {t!r} where the tokenizer has "
                                  f"{piece!r}: the tokenizer is not the served model's")
        got = np.array([np.nan if v is None else v for v in values[1:n]], dtype=float) \
            if all(v is None or isinstance(v, (int, float)) for v in values[1:n]) else None
        if got is None or not np.all(np.isfinite(got)) or np.any(got > 1e-6):
            raise ServerError(f"{self.base} returned a missing or non-finite log-probability "
                              "for a prompt token")
        top = None
        if k:
            top = lp.get("top_logprobs")
            if not isinstance(top, list) or len(top) < n or not all(
                    isinstance(t, dict) for t in top[1:n]):
                raise ServerError(f"{self.base} returned no top log-probabilities")
            top = top[1:n]
        return got, top

    # ---- tokenizer -----------------------------------------------------------------------
    def _piece(self, i: int) -> str:
        with _tokenizer_errors("the tokenizer"):
            return self.tokenizer.decode([i], skip_special_tokens=False,
                                         clean_up_tokenization_spaces=False)

    # the served model's tokenizer, read as HFModel reads its own (the same checks)
    encode = HFModel.encode
    encode_many = HFModel.encode_many
    decode = HFModel.decode
    check_text = HFModel.check_text

    def logits(self, ids, last=None):
        raise NotImplementedError("a served model gives log-probabilities, not logits")

    def window_logprobs(self, ids) -> np.ndarray:
        raise NotImplementedError("a served model scores windows with their labels: "
                                  "labelled_window_logprobs(ids, labels)")

    # ---- what the measurements call -------------------------------------------------------
    def info(self) -> dict:
        s = self.stats
        rows = max(1, s["rows"])
        return {**super().info(), "served": {
            **self.server, "top_logprobs": self.top_k, "concurrency": self.concurrency,
            "requests": s["requests"], "retries": s["retries"],
            "requests_from_log": s["from_log"],
            "approximations": {
                "rows": s["rows"],  # every window row this model object has scored
                "exact": "each label's log-probability (NLL, bits per byte, per-token "
                         "values), the argmax and the top probability at T = 1, option "
                         "scores",
                "approximate": "the rest of each row beyond the top "
                               f"{self.top_k}: its probability shared equally by the other "
                               "tokens; so the table at T != 1, the entropy and margin "
                               "scores, and the fitted temperature",
                "rest_mass_mean": s["rest_mass_sum"] / rows,
                "rest_mass_max": s["rest_mass_max"],
                "top_entries_not_attributed": s["dropped_top_entries"],
                "samples_redrawn_without_stop": s["redrawn"]}}}

    def labelled_window_logprobs(self, ids, labels) -> np.ndarray:
        x = self._windows(ids)
        y = np.asarray(labels, dtype=np.int64)
        b, t = x.shape
        if y.shape != (b, t) or (t > 1 and not np.array_equal(y[:, :-1], x[:, 1:].numpy())):
            raise ValueError("labels must be the windows shifted by one token")
        if t + 1 > self.window:
            raise ValueError(f"windows of {t} tokens and their last label exceed the served "
                             f"window of {self.window}")
        seqs = [np.r_[x[i].numpy(), y[i, -1]] for i in range(b)]

        def one(seq):
            return self._echo(self.decode(seq), seq, self.top_k)

        out = np.empty((b, t, self.vocab_size))
        for i, (label_lp, top) in enumerate(self._map(one, seqs)):
            top_ids, top_lp = [], []
            for entry in top:
                keep = [(self._id_of[s], v) for s, v in entry.items() if s in self._id_of
                        and isinstance(v, (int, float)) and math.isfinite(v)]
                top_ids.append([a for a, _ in keep])
                top_lp.append([v for _, v in keep])
                with self._lock:
                    self.stats["dropped_top_entries"] += len(entry) - len(keep)
            out[i], rest = topk_rows(top_ids, top_lp, y[i], label_lp, self.vocab_size)
            with self._lock:
                self.stats["rows"] += t
                self.stats["rest_mass_sum"] += float(rest.sum())
                self.stats["rest_mass_max"] = max(self.stats["rest_mass_max"], float(rest.max()))
        return out

    def continuation_logprob(self, contexts, continuations) -> dict:
        seqs, starts, conts, truncated, merged = self.scored_pairs(contexts, continuations)

        def one(i):
            seq, start = seqs[i], starts[i]
            if start < 1:
                raise ValueError("an empty context cannot be scored by a served model: its "
                                 "first token has no log-probability")
            values, _ = self._echo(self.decode(seq), seq, 1)
            return float(math.fsum(values[start - 1:]))

        out = np.array(self._map(one, range(len(seqs))), dtype=float)
        return {"logprob": out, "tokens": np.array([len(o) for o in conts]),
                "truncated": int(truncated), "merged": int(merged)}

    def sample(self, contexts, m: int, *, temperature: float = 0.5, max_tokens: int = 16,
               seed: int = 0, greedy: bool = False, stop=one_word, progress=False) -> dict:
        """``m`` answers per context drawn by the server: one request per answer, seeded
        from ``numpy.random.default_rng(seed)`` (the seeds are the same on every run, so the
        server's draws are too), at ``temperature`` with at most ``max_tokens`` tokens, cut
        by ``stop`` on the text after the context's moved whitespace; with the default
        one-word rule the server stops at :data:`STOP`. ``greedy``: one more request at
        temperature 0."""
        fitted = self._sample_prompts(contexts, m, temperature, max_tokens)
        prompts = [self.decode(ids) if cut else c for c, ids, cut, _ in fitted]
        moved = [mv for _, _, _, mv in fitted]
        truncated = sum(cut for _, _, cut, _ in fitted)
        seeds = np.random.default_rng(seed).integers(0, 2 ** 31 - 1, size=(len(prompts), m))
        stops = list(STOP) if stop is one_word else None

        def one(job):
            q, s, t = job
            body = {"prompt": prompts[q], "max_tokens": int(max_tokens),
                    "temperature": float(t), "seed": int(s), "n": 1}
            choice = self._complete({**body, **({"stop": stops} if stops else {})})
            text, reason = choice.get("text"), choice.get("finish_reason")
            if not isinstance(text, str):
                raise ServerError(f"{self.base} returned a sample without text")
            if moved[q] and text.startswith(moved[q]):
                text = text[len(moved[q]):]
            answer = stop(text)
            if answer is None and stops and reason == "stop":
                if text and re.match(r"[A-Za-z']", text):  # a word, ended by a stop string
                    return first_word(text), False
                with self._lock:
                    self.stats["redrawn"] += 1
                choice = self._complete(body)  # the same seed, no stop strings: same draws
                text = choice.get("text") or ""
                if moved[q] and text.startswith(moved[q]):
                    text = text[len(moved[q]):]
                answer = stop(text)
            if answer is None:
                return first_word(text), True
            return answer, False

        jobs = [(q, seeds[q, j], temperature) for q in range(len(prompts)) for j in range(m)]
        done = self._map(one, jobs, progress)
        answers = [[done[q * m + j][0] for j in range(m)] for q in range(len(prompts))]
        out = {"answers": answers, "unterminated": int(sum(u for _, u in done)),
               "truncated": truncated}
        if greedy:
            g = self._map(one, [(q, 0, 0.0) for q in range(len(prompts))])
            out["greedy"] = [a for a, _ in g]
            out["unterminated"] += int(sum(u for _, u in g))
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _load_tokenizer(path):
    """A local ``transformers`` tokenizer directory (no code run, nothing downloaded)."""
    from pathlib import Path

    p = Path(str(path))
    if not p.is_dir():
        raise ServerError(f"--tokenizer {path}: not a directory (the served model's "
                          "tokenizer files)")
    try:
        from transformers import AutoTokenizer

        with hub_offline(True):
            return AutoTokenizer.from_pretrained(str(p), local_files_only=True,
                                                 trust_remote_code=False)
    except ImportError as exc:  # pragma: no cover
        raise RuntimeError("the served backend reads the tokenizer with transformers: "
                           "pip install standarderror[hf]") from exc
    except Exception as exc:
        raise ServerError(f"--tokenizer {path}: transformers could not load it: "
                          f"{type(exc).__name__}: {_one_line(exc)}") from None


def _read_log(path):
    """(path, {key: choice}) of a results log; a missing file is an empty log. A last line
    cut by a kill (no newline, not a whole entry) is removed from the file; any other
    malformed line is an error."""
    from pathlib import Path

    path = Path(str(path))
    done: dict = {}
    if not path.exists():
        return path, done
    raw = _checks.read_regular(path, "the results log", max_bytes=MAX_LOG_BYTES)
    *whole, tail = raw.split(b"\n")
    for n, line in enumerate(whole + [tail], 1):
        if not line.strip():
            continue
        entry = _log_entry(line)
        if entry is None:
            if n == len(whole) + 1:  # cut by a kill: drop it, its request is sent again
                with open(path, "r+b") as f:
                    f.truncate(len(raw) - len(tail))
                break
            raise ServerError(f"the results log {path} has a malformed line {n}: remove the "
                              "log (or that line) to measure again")
        done[entry["key"]] = entry["choice"]
    else:
        if tail.strip():  # a whole last entry without its newline
            with open(path, "ab") as f:
                f.write(b"\n")
    return path, done


def _log_entry(line: bytes) -> dict | None:
    """One line of a results log, checked; ``None`` if it is not one."""
    try:
        entry = json.loads(line.decode("utf-8"))
    except ValueError:
        return None
    if (isinstance(entry, dict) and isinstance(entry.get("key"), str)
            and re.fullmatch(r"[0-9a-f]{64}", entry["key"])
            and isinstance(entry.get("choice"), dict)):
        return entry
    return None


def api_key_from(env: str | None) -> str | None:
    """The key held by the environment variable ``env`` (``None``: no key)."""
    if env is None:
        return None
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env):
        raise ServerError(f"--api-key-env must name an environment variable, got {env!r}")
    key = os.environ.get(env)
    if not key:
        raise ServerError(f"--api-key-env {env}: the variable is not set or empty")
    return key


class TopK(LanguageModel):
    """Another model seen as a server returning ``k`` log-probabilities per position would
    show it: each window row cut to its top ``k`` entries (leaving out the ids in ``drop``:
    tokens a server's string keys cannot name, :attr:`ServedModel.unnamed`) and the label,
    completed by :func:`topk_rows`. Measures what the top-k approximation changes (against
    the whole rows of the same model), without a server."""

    def __init__(self, lm: LanguageModel, k: int, drop=()):
        self.lm, self.k = lm, _checks.positive_int(k, "k")
        self.drop = np.asarray(sorted(drop), dtype=np.int64)  # ids a server cannot name
        super().__init__(name=lm.name, tokenizer_name=lm.tokenizer_name,
                         vocab_size=lm.vocab_size, window=lm.window,
                         character_level=lm.character_level, prefix=list(lm.prefix),
                         parameters=lm.parameters)
        self.label = f"{getattr(lm, 'label', lm.name)} (top {self.k})"
        self.left = []

    def encode(self, text):
        return self.lm.encode(text)

    def encode_many(self, texts):
        return self.lm.encode_many(texts)

    def decode(self, ids):
        return self.lm.decode(ids)

    def check_text(self, text, ids=None):
        return self.lm.check_text(text, ids)

    def labelled_window_logprobs(self, ids, labels):
        full = self.lm.labelled_window_logprobs(ids, labels)
        b, t, v = full.shape
        rows, y = full.reshape(-1, v), np.asarray(labels).reshape(-1)
        ranked = rows.copy()
        ranked[:, self.drop] = -np.inf
        top = np.argsort(-ranked, axis=1, kind="stable")[:, :self.k]
        top = [t[np.isfinite(ranked[i, t])] for i, t in enumerate(top)]
        out, left = topk_rows(top, [rows[i, t] for i, t in enumerate(top)], y,
                              rows[np.arange(y.size), y], v)
        self.left.append(left)
        return out.reshape(b, t, v)
