// pytest-openenv run report: the episode table (sort, filter by outcome and group, search,
// pages), the charts of one group at a time, and one episode on a view of its own (previous /
// next, j / k or the arrow keys, back to the table where it was). Every value from the run reaches the page through textContent,
// never as markup, so a model reply holding <script> or HTML is shown as text.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("openenv-data").textContent);
  var COL = {};
  data.columns.forEach(function (name, i) { COL[name] = i; });
  var rows = data.rows;
  var embedded = {};
  (data.embedded || []).forEach(function (n) { embedded[n] = true; });
  var PAGE = 200;
  var NUMERIC = { seed: 1, reward: 1, turns: 1, tokens_in: 1, tokens_out: 1 };
  var groups = data.groups || [];
  var state = { outcome: "all", group: "all", query: "", sort: "id", dir: 1, page: 0, current: -1, scroll: 0 };
  var haystacks = null;

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = shown(String(text));
    return node;
  }
  // control characters (ANSI escapes, NUL, ...) made visible instead of hidden or obeyed
  function shown(text) {
    return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, function (c) {
      var code = c.charCodeAt(0);
      return String.fromCharCode(code === 0x7f ? 0x2421 : 0x2400 + code);
    });
  }
  function fmt(value) {
    if (typeof value !== "number") return value === null || value === undefined ? "" : String(value);
    return Number.isInteger(value) ? String(value) : value.toPrecision(4).replace(/\.?0+$/, "");
  }
  function anchorOf(row) {
    var id = row[COL.id];
    if (!data.several_tests) return id;
    var test = row[COL.test];
    var cut = test.lastIndexOf("[");
    return id + "@" + (cut > 0 ? test.slice(0, cut) : test);
  }
  // the test function as a line has room for it: file name and function, no parameters
  function testName(test) {
    var cut = test.lastIndexOf("[");
    var fn = cut > 0 ? test.slice(0, cut) : test;
    var slash = fn.lastIndexOf("/", fn.indexOf("::") < 0 ? fn.length : fn.indexOf("::"));
    return slash >= 0 ? fn.slice(slash + 1) : fn;
  }
  function played(r) {
    var policy = r[COL.policy], model = r[COL.model];
    return policy && model ? policy + " / " + model : policy || model;
  }
  function haystack(n) {
    if (!haystacks) haystacks = new Array(rows.length);
    if (haystacks[n] === undefined) {
      var r = rows[n];
      haystacks[n] = [r[COL.id], r[COL.test], r[COL.env], r[COL.policy], r[COL.model], r[COL.outcome],
        r[COL.reason], r[COL.prompt], r[COL.seed]]
        .join("\n").toLowerCase();
    }
    return haystacks[n];
  }

  function selected() {
    var words = state.query.toLowerCase().split(/\s+/).filter(Boolean);
    var out = [];
    for (var n = 0; n < rows.length; n++) {
      if (state.outcome !== "all" && rows[n][COL.outcome] !== state.outcome) continue;
      if (state.group !== "all" && String(rows[n][COL.group]) !== state.group) continue;
      if (words.length) {
        var text = haystack(n);
        var all = true;
        for (var w = 0; w < words.length; w++) if (text.indexOf(words[w]) < 0) { all = false; break; }
        if (!all) continue;
      }
      out.push(n);
    }
    var key = COL[state.sort], dir = state.dir, numeric = NUMERIC[state.sort];
    out.sort(function (a, b) {
      var x = rows[a][key], y = rows[b][key];
      if (numeric) { x = x === null ? -Infinity : x; y = y === null ? -Infinity : y; }
      var c = x < y ? -1 : x > y ? 1 : 0;
      return c * dir || a - b;
    });
    return out;
  }

  function renderTable() {
    var chosen = selected();
    var pages = Math.max(1, Math.ceil(chosen.length / PAGE));
    if (state.page >= pages) state.page = pages - 1;
    var start = state.page * PAGE;
    var body = $("episode-rows");
    var fresh = document.createDocumentFragment();
    chosen.slice(start, start + PAGE).forEach(function (n) {
      var r = rows[n];
      var tr = el("tr");
      tr.dataset.row = n;
      tr.dataset.id = r[COL.id];
      tr.dataset.outcome = r[COL.outcome];
      tr.dataset.group = r[COL.group];
      if (n === state.current) tr.className = "current";
      var idCell = el("td", "mono");
      var link = el("a", null, r[COL.id]);
      link.href = "#" + encodeURIComponent(anchorOf(r)).replace(/%40/g, "@");
      idCell.appendChild(link);
      tr.appendChild(idCell);
      tr.appendChild(el("td", "mono test", testName(r[COL.test])));
      tr.appendChild(el("td", "mono", r[COL.env]));
      tr.appendChild(el("td", "mono", played(r)));
      tr.appendChild(el("td", "num", fmt(r[COL.seed])));
      tr.appendChild(el("td", "outcome " + r[COL.outcome], r[COL.outcome]));
      tr.appendChild(el("td", "num", fmt(r[COL.reward])));
      tr.appendChild(el("td", "num", fmt(r[COL.turns])));
      tr.appendChild(el("td", "num", fmt(r[COL.tokens_in] + r[COL.tokens_out])));
      tr.appendChild(el("td", "reason", r[COL.reason]));
      fresh.appendChild(tr);
    });
    body.replaceChildren(fresh);
    $("shown-count").textContent = chosen.length + " of " + rows.length + " episodes";
    $("page-label").textContent = "page " + (state.page + 1) + " of " + pages;
    $("prev-page").disabled = state.page === 0;
    $("next-page").disabled = state.page >= pages - 1;
    document.querySelectorAll("table.episodes th").forEach(function (th) {
      th.setAttribute("aria-sort", th.dataset.key === state.sort ? (state.dir > 0 ? "ascending" : "descending") : "none");
    });
  }

  function findRow(fragment) {
    var at = fragment.indexOf("@");
    var id = at < 0 ? fragment : fragment.slice(0, at);
    var fn = at < 0 ? null : fragment.slice(at + 1);
    for (var n = 0; n < rows.length; n++) {
      if (rows[n][COL.id] !== id) continue;
      if (fn === null || rows[n][COL.test].indexOf(fn + "[") === 0 || rows[n][COL.test] === fn) return n;
    }
    return -1;
  }

  function loadRecord(n, done) {
    if (data.mode === "served") {
      fetch("api/episode/" + n, { headers: { Accept: "application/json" } })
        .then(function (response) {
          return response.text().then(function (text) {
            if (!response.ok) throw new Error(text || response.statusText);
            return text;
          });
        })
        .then(function (text) { done(JSON.parse(text), null); })
        .catch(function (err) { done(null, String(err && err.message || err)); });
      return;
    }
    var node = embedded[n] ? $("t-" + n) : null;
    if (!node) { done(null, null); return; }
    var record;
    try { record = JSON.parse(node.textContent); } catch (e) { done(null, String(e && e.message || e)); return; }
    done(record, null);
  }

  function text(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "string") return value;
    return JSON.stringify(value, null, 2);
  }
  function pretty(args) {
    if (typeof args === "string") {
      try { return JSON.stringify(JSON.parse(args), null, 2); } catch (e) { return args; }
    }
    return text(args);
  }
  // A tic-tac-toe row (" X | 1 | 2", or "X | 1 | 2") numbers its empty cells: 0 beside O
  // reads as a mark. Here only, an empty cell is shown as "."; the prompt's text stays as sent.
  var BOARD_ROW = /^( ?)([XO0-8]) \| ([XO0-8]) \| ([XO0-8])( ?)$/;
  function boardsShown(content) {
    var changed = false;
    var lines = content.split("\n").map(function (line) {
      var m = BOARD_ROW.exec(line);
      if (!m || !/[0-8]/.test(m[2] + m[3] + m[4])) return line;
      changed = true;
      var cell = function (c) { return /[0-8]/.test(c) ? "." : c; };
      return m[1] + cell(m[2]) + " | " + cell(m[3]) + " | " + cell(m[4]) + m[5];
    });
    return { text: lines.join("\n"), changed: changed };
  }
  function errorFlag(message) {
    var illegal = /not legal|illegal/i.test(message);
    return el("span", illegal ? "flag illegal" : "flag", illegal ? "illegal move" : "tool error");
  }

  // why a row cannot be shown as a conversation (a hand-edited or foreign row), or null
  function unreadable(record) {
    if (!record || typeof record !== "object" || Array.isArray(record)) return "the row is not a JSON object";
    var lists = [["messages", record.messages], ["tool_trace", record.tool_trace]];
    for (var i = 0; i < lists.length; i++) {
      var value = lists[i][1];
      if (value !== undefined && value !== null && !Array.isArray(value)) return lists[i][0] + " is not a list";
    }
    var messages = record.messages || [];
    for (var m = 0; m < messages.length; m++) {
      var message = messages[m];
      if (!message || typeof message !== "object" || Array.isArray(message)) return "messages[" + m + "] is not an object";
      var calls = message.tool_calls;
      if (calls !== undefined && calls !== null && !Array.isArray(calls)) return "messages[" + m + "].tool_calls is not a list";
    }
    return null;
  }

  function renderTranscript(n, record, problem) {
    if (!problem && record) problem = unreadable(record);
    var box = $("transcript");
    var r = rows[n];
    var parts = document.createDocumentFragment();
    parts.appendChild(el("h2", null, "Episode " + r[COL.id]));
    var facts = el("table", "facts");
    [["test", r[COL.test]], ["env", r[COL.env]], ["policy / model", played(r)],
     ["seed", fmt(r[COL.seed])], ["outcome", r[COL.outcome]],
     ["reward", fmt(r[COL.reward])], ["turns", fmt(r[COL.turns])],
     ["tokens", r[COL.tokens_in] + " in / " + r[COL.tokens_out] + " out"]].forEach(function (pair) {
      var tr = el("tr");
      tr.appendChild(el("th", null, pair[0]));
      tr.appendChild(el("td", pair[0] === "outcome" ? "outcome " + r[COL.outcome] : "mono", pair[1]));
      facts.appendChild(tr);
    });
    parts.appendChild(facts);
    if (problem) {
      parts.appendChild(el("p", "banner bad", "This transcript could not be read: " + problem));
    } else if (!record) {
      parts.appendChild(el("p", "missing",
        "This transcript is not embedded in this file (it keeps every failure and error and a " +
        "sample of passes within its size cap). `python -m pytest_openenv view DIR` serves every one."));
    } else {
      try {
        parts.appendChild(verdictBox(record));
        parts.appendChild(conversation(record));
      } catch (e) {
        parts.appendChild(el("p", "banner bad", "This transcript could not be read: " + String(e && e.message || e)));
      }
    }
    box.replaceChildren(parts);
  }

  function verdictBox(record) {
    var box = el("div", "verdict-box");
    var vm = record.verify_metrics || {};
    var extra = record.extra || {};
    var failure = record.failure || {};
    var metrics = record.metrics || {};
    if (typeof metrics.wall_time_s === "number") {
      // the row keeps the episode's totals, not each turn's
      box.appendChild(el("div", "episode-time", "time: " + fmt(metrics.wall_time_s) + " s over " +
        fmt(metrics.turns) + " turn(s); tokens " + fmt(metrics.prompt_tokens || 0) + " in / " +
        fmt(metrics.completion_tokens || 0) + " out"));
    }
    box.appendChild(el("div", null, "verdict: " + (record.passed ? "passed" : "not passed") +
      (vm.outcome ? " (" + vm.outcome + ")" : "") +
      (vm.min_reward !== undefined ? ", pass needs reward >= " + fmt(vm.min_reward) : "")));
    var reason = failure.outcome === "error" ? failure.message : extra.reason || failure.message;
    if (reason && !record.passed) {
      var why = el("pre", "reason");
      why.textContent = shown("failure reason: " + reason);
      box.appendChild(why);
    }
    var judge = record.judge;
    if (judge && typeof judge === "object") box.appendChild(judgeBox(judge));
    return box;
  }

  function judgeBox(judge) {
    // the judge model's verdict beside the env's own (--openenv-judge, the judge fixture)
    var box = el("div", "judge-box");
    var env = judge.env_passed === true ? "passed" : judge.env_passed === false ? "failed" : "stated none";
    var head = judge.error ? "judge " + text(judge.model) + ": no verdict (the item errored)" :
      "judge " + text(judge.model) + ": " + (judge.passed ? "passed" : "failed") +
      ", score " + fmt(judge.score);
    box.appendChild(el("div", "judge-verdict", head + "; the env's own verdict: " + env +
      " (rubric sha256 " + text(judge.rubric_sha256).slice(0, 12) + ")"));
    var why = el("pre", "judge-reasoning");
    why.textContent = shown((judge.error ? "judge error: " + judge.error : "judge reasoning: " + judge.reasoning));
    box.appendChild(why);
    return box;
  }

  function conversation(record) {
    var list = el("div", "messages");
    var trace = record.tool_trace || [];
    var callNumber = 0;
    var resultOf = {};
    (record.messages || []).forEach(function (m) {
      var role = String(m.role || "");
      var item = el("div", "msg " + role.replace(/[^a-z_]/gi, ""));
      var head = el("div", "role", role);
      item.appendChild(head);
      if (role === "tool") {
        var entry = resultOf[m.tool_call_id];
        if (entry && entry.result && entry.result.error) {
          item.className += " tool-error";
          head.appendChild(errorFlag(entry.result.error));
        }
        if (m.name) head.appendChild(el("span", "step-reward", m.name));
      }
      var content = text(m.content);
      if (content) {
        var board = boardsShown(content);
        var pre = el("pre");
        pre.textContent = shown(board.text);
        item.appendChild(pre);
        if (board.changed) item.appendChild(el("div", "board-note",
          "board shown with . for an empty cell (the prompt numbered empty cells by their action id)"));
      }
      (m.tool_calls || []).forEach(function (call) {
        var fn = call.function || {};
        var step = trace[callNumber++] || null;
        if (call.id) resultOf[call.id] = step;
        var box = el("div", "call");
        var title = el("div", null);
        title.appendChild(el("span", "name", "tool call: " + (fn.name || "")));
        if (step && step.result) {
          title.appendChild(el("span", "step-reward", "step reward " + fmt(step.result.reward) +
            (step.result.done ? ", episode over" : "")));
          if (step.result.error) { box.className += " tool-error"; title.appendChild(errorFlag(step.result.error)); }
        }
        box.appendChild(title);
        var args = el("pre");
        args.textContent = shown(pretty(fn.arguments));
        box.appendChild(args);
        item.appendChild(box);
      });
      list.appendChild(item);
    });
    if (!(record.messages || []).length) list.appendChild(el("p", "missing", "no messages (the episode errored before its first turn)"));
    return list;
  }

  var TABLE_PARTS = ["summary", "charts-section", "episodes-section"];
  function showEpisodeView(on) {
    var view = $("episode-view");
    if (on && view.hidden) state.scroll = window.scrollY;  // where the table was
    TABLE_PARTS.forEach(function (id) { var part = $(id); if (part) part.hidden = on; });
    view.hidden = !on;
  }
  function closeEpisode() {
    var wasOpen = !$("episode-view").hidden;
    showEpisodeView(false);
    if (wasOpen) window.scrollTo(0, state.scroll);
  }
  function backToTable() {
    if (location.hash) history.pushState(null, "", location.pathname + location.search);
    closeEpisode();
  }
  // previous / next within the table as filtered and sorted
  function step(by) {
    if (state.current < 0) return;
    var chosen = selected();
    var at = chosen.indexOf(state.current);
    var to = at < 0 ? 0 : at + by;
    if (to < 0 || to >= chosen.length) return;
    location.hash = "#" + encodeURIComponent(anchorOf(rows[chosen[to]])).replace(/%40/g, "@");
  }
  function updateNav() {
    var chosen = selected();
    var at = chosen.indexOf(state.current);
    $("prev-episode").disabled = at <= 0;
    $("next-episode").disabled = at < 0 || at >= chosen.length - 1;
    $("episode-position").textContent = at < 0 ? "" : "episode " + (at + 1) + " of " + chosen.length + " shown in the table";
  }

  function openFromHash() {
    var raw = location.hash.replace(/^#/, ""), fragment;
    // a malformed escape (#%E0%A4%A) names no episode: shown as typed, never thrown
    try { fragment = decodeURIComponent(raw); } catch (e) { fragment = raw; }
    if (!fragment) { closeEpisode(); return; }
    var n = findRow(fragment);
    showEpisodeView(true);
    if (n < 0) {
      $("transcript").replaceChildren(el("p", "banner", "No episode " + fragment + " in this report."));
      return;
    }
    state.current = n;
    var chosen = selected();
    var at = chosen.indexOf(n);
    if (at < 0) {
      state.outcome = "all"; state.group = "all"; state.query = "";
      $("outcome-filter").value = "all"; $("group-filter").value = "all"; $("search").value = "";
      chosen = selected(); at = chosen.indexOf(n);
    }
    state.page = Math.floor(at / PAGE);
    renderTable();
    updateNav();
    loadRecord(n, function (record, problem) {
      if (state.current !== n) return;  // another episode was opened meanwhile
      renderTranscript(n, record, problem);
      window.scrollTo(0, 0);
    });
  }

  groups.forEach(function (g, i) {
    var option = el("option", null, g.label);
    option.value = String(i);
    $("group-filter").appendChild(option);
  });
  if (groups.length < 2) $("group-filter-label").hidden = true;
  $("group-filter").addEventListener("change", function (e) { state.group = e.target.value; state.page = 0; renderTable(); });
  var chartGroup = $("chart-group");
  if (chartGroup) chartGroup.addEventListener("change", function (e) {
    document.querySelectorAll(".charts[data-group]").forEach(function (set) {
      set.hidden = set.dataset.group !== e.target.value;
    });
  });
  $("back-to-table").addEventListener("click", backToTable);
  $("prev-episode").addEventListener("click", function () { step(-1); });
  $("next-episode").addEventListener("click", function () { step(1); });
  document.addEventListener("keydown", function (e) {
    if ($("episode-view").hidden || e.altKey || e.ctrlKey || e.metaKey) return;
    var tag = (e.target && e.target.tagName) || "";
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if (e.key === "j" || e.key === "ArrowRight" || e.key === "ArrowDown") { e.preventDefault(); step(1); }
    else if (e.key === "k" || e.key === "ArrowLeft" || e.key === "ArrowUp") { e.preventDefault(); step(-1); }
    else if (e.key === "Escape" || e.key === "b") { e.preventDefault(); backToTable(); }
  });
  $("outcome-filter").addEventListener("change", function (e) { state.outcome = e.target.value; state.page = 0; renderTable(); });
  $("search").addEventListener("input", function (e) { state.query = e.target.value; state.page = 0; renderTable(); });
  $("prev-page").addEventListener("click", function () { state.page -= 1; renderTable(); });
  $("next-page").addEventListener("click", function () { state.page += 1; renderTable(); });
  document.querySelectorAll("table.episodes th").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = th.dataset.key;
      state.dir = state.sort === key ? -state.dir : 1;
      state.sort = key;
      renderTable();
    });
  });
  window.addEventListener("hashchange", openFromHash);
  renderTable();
  openFromHash();
  document.body.dataset.ready = "1";
})();
