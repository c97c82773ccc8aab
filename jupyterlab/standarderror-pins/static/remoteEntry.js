// standarderror-pins: a prebuilt JupyterLab 4 extension, written by hand (no build step, no
// dependency). The book quotes a measured number as {pin}`name=0.123`; the book build checks
// it and shows 0.123. In JupyterLab, jupyterlab-myst renders a role it does not know as its
// bare text (<span>name=0.123</span>) and the plain Markdown renderer as "{pin}" followed by
// <code>name=0.123</code>. This plugin rewrites both to the quoted literal, 0.123 (the name
// goes into the tooltip), in every rendered Markdown cell of an open notebook. It only touches
// a rendering that matches a {pin} quote of that cell's own source, never the source itself.
// Installed into the venv by scripts/setup.sh; tested by tests/test_site.py in Chromium.
(function () {
  "use strict";
  var NAME = "standarderror-pins";
  var ROLE = /\{pin\}`([^`]+)`/g;

  // "[page:]name=literal" -> [name, literal], or null when malformed (the build reports those).
  function split(body) {
    var i = body.indexOf("=");
    if (i <= 0) return null;
    var key = body.slice(0, i).trim(), literal = body.slice(i + 1).trim();
    return key && literal ? [key, literal] : null;
  }

  function quotes(source) {
    var found = {}, m;
    ROLE.lastIndex = 0;
    while ((m = ROLE.exec(source)) !== null) {
      var parts = split(m[1]);
      if (parts) found[m[1]] = parts;
    }
    return found;
  }

  function tooltip(parts) {
    return "pinned: " + parts[0] + " (checked by the book build)";
  }

  function rewrite(node, found) {
    // jupyterlab-myst: an unknown role is a bare <span> holding the role's text. React owns
    // that span and its text node, so change the text node's value in place (never replace
    // or remove a node React knows); should React reset it, the next sweep sets it again.
    node.querySelectorAll("span").forEach(function (span) {
      var ours = span.classList.contains("se-pin");
      if (!ours && span.attributes.length !== 0) return;
      var text = span.firstChild;
      if (span.childNodes.length !== 1 || text.nodeType !== Node.TEXT_NODE) return;
      var parts = found[text.nodeValue];
      if (!parts) return;
      text.nodeValue = parts[1];
      span.className = "se-pin";
      span.title = tooltip(parts);
    });
    // The plain Markdown renderer (innerHTML, no React): "{pin}" then <code>name=literal</code>.
    node.querySelectorAll("code").forEach(function (code) {
      var parts = found[code.textContent], before = code.previousSibling;
      if (!parts || !before || before.nodeType !== Node.TEXT_NODE) return;
      if (!/\{pin\}$/.test(before.nodeValue)) return;
      before.nodeValue = before.nodeValue.slice(0, -"{pin}".length);
      var span = document.createElement("span");
      span.className = "se-pin";
      span.title = tooltip(parts);
      span.textContent = parts[1];
      code.replaceWith(span);
    });
  }

  function sweep(app) {
    var widgets = app.shell.widgets("main");
    for (var panel of widgets) {
      var notebook = panel.content;
      if (!notebook || !notebook.widgets) continue;
      notebook.widgets.forEach(function (cell) {
        if (!cell.model || cell.model.type !== "markdown" || !cell.rendered) return;
        var source = cell.model.sharedModel.getSource();
        if (source.indexOf("{pin}") < 0) return;
        rewrite(cell.node, quotes(source));
      });
    }
  }

  var plugin = {
    id: NAME + ":plugin",
    description: "A {pin} quote reads as its number in rendered Markdown cells.",
    autoStart: true,
    activate: function (app) {
      var pending = false;
      var schedule = function () {
        if (pending) return;
        pending = true;
        window.requestAnimationFrame(function () {
          pending = false;
          sweep(app);
        });
      };
      new MutationObserver(schedule).observe(document.body,
        { childList: true, characterData: true, subtree: true });
      schedule();
    }
  };

  var root = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  root[NAME] = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error(NAME + ": no module " + module));
      }
      return Promise.resolve(function () { return { __esModule: true, default: plugin }; });
    }
  };
})();
