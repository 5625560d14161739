// The HTML report; see html.hpp. The page is built in four parts: the
// head with its policy and styles, the tables and SVG charts computed here
// from the summary, the embedded data (streamed from the store), and the
// script that runs the question explorer over that data.
#include <reports/html.hpp>
#include <reports/probe_html.hpp>

#include <harness/util/escape.hpp>
#include <harness/util/pyjson.hpp>

#include <reports/tables.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace diffeval::reports {

namespace {

constexpr int k_series_colours = 8;
constexpr int k_histogram_bins = 24;

std::string group_name(const analysis::GroupSummary& g) {
    return fmt::format("{}/{}/{}", g.server, g.framing, g.max_tokens);
}

int server_index(const ReportData& data, const std::string& server) {
    const auto& s = data.results.servers;
    return static_cast<int>(std::find(s.begin(), s.end(), server) - s.begin());
}

const char k_head[] =
    R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>diffeval report</title>
<style>
:root { --bg: #ffffff; --fg: #1b1f24; --muted: #59636e; --line: #d1d9e0; --panel: #f6f8fa;
  --think: #fff8c5; --mark: #ffd33d; --good: #1a7f37; --bad: #cf222e;
  --c0: #0969da; --c1: #d1242f; --c2: #1a7f37; --c3: #8250df; --c4: #bc4c00; --c5: #1b7c83;
  --c6: #bf3989; --c7: #6e7781;
  --o0: #2da44e; --o1: #d4a72c; --o2: #cf222e; --o3: #8250df; --o4: #57606a; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #3d444d; --panel: #151b23;
    --think: #3b2e00; --mark: #9e6a03; --good: #3fb950; --bad: #f85149;
    --c0: #4493f8; --c1: #f85149; --c2: #3fb950; --c3: #ab7df8; --c4: #db6d28; --c5: #39c5cf;
    --c6: #db61a2; --c7: #9198a1;
    --o0: #3fb950; --o1: #d29922; --o2: #f85149; --o3: #ab7df8; --o4: #9198a1; }
}
body { background: var(--bg); color: var(--fg); margin: 0 auto; max-width: 1200px;
  padding: 1rem 1.5rem; font: 15px/1.45 system-ui, sans-serif; }
h1 { margin: 0.2rem 0; } h2 { border-bottom: 1px solid var(--line); padding-bottom: 0.2rem; }
.headline { font-size: 1.1rem; background: var(--panel); border-left: 4px solid var(--c0);
  padding: 0.6rem 0.9rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid var(--line); padding: 0.25rem 0.5rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.text, #qlist th:nth-child(2) { text-align: left; }
.note { color: var(--muted); font-size: 0.9rem; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 1rem; }
figure { margin: 0; background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
  padding: 0.5rem; }
figcaption { font-weight: 600; margin-bottom: 0.3rem; }
svg { width: 100%; height: auto; }
svg text { fill: var(--fg); font: 11px system-ui, sans-serif; }
svg .axis { stroke: var(--muted); stroke-width: 1; }
svg .grid { stroke: var(--line); stroke-width: 1; }
svg .whisker { stroke: var(--fg); stroke-width: 1.5; }
)"
    R"(.s0 { fill: var(--c0); stroke: var(--c0); } .s1 { fill: var(--c1); stroke: var(--c1); }
.s2 { fill: var(--c2); stroke: var(--c2); } .s3 { fill: var(--c3); stroke: var(--c3); }
.s4 { fill: var(--c4); stroke: var(--c4); } .s5 { fill: var(--c5); stroke: var(--c5); }
.s6 { fill: var(--c6); stroke: var(--c6); } .s7 { fill: var(--c7); stroke: var(--c7); }
.o0 { fill: var(--o0); } .o1 { fill: var(--o1); } .o2 { fill: var(--o2); }
.o3 { fill: var(--o3); } .o4 { fill: var(--o4); }
polyline.line { fill: none; stroke-width: 2; }
.controls { display: flex; flex-wrap: wrap; gap: 0.8rem; align-items: center;
  background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 0.5rem; }
select, button { font: inherit; color: var(--fg); background: var(--bg);
  border: 1px solid var(--line); border-radius: 4px; padding: 0.15rem 0.4rem; }
#qlist tbody tr { cursor: pointer; } #qlist tbody tr:hover, #qlist tr.open { background: var(--panel); }
#qlist td.text { max-width: 640px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.pager { margin: 0.3rem 0; }
#detail { margin-top: 1rem; }
.question { white-space: pre-wrap; background: var(--panel); padding: 0.5rem; border-radius: 6px; }
.gold { font-weight: 600; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.side h3 { margin: 0.5rem 0; }
.resp { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 0.8rem; padding: 0.4rem; }
.resp .meta { color: var(--muted); font-size: 0.85rem; }
.resp .body { white-space: pre-wrap; overflow-wrap: anywhere; font: 13px/1.4 ui-monospace, monospace;
  max-height: 28rem; overflow: auto; }
.think { background: var(--think); display: block; }
.think::before { content: "reasoning"; display: block; font: 600 11px system-ui; color: var(--muted); }
mark { background: var(--mark); color: inherit; }
.stop { display: inline-block; margin-top: 0.2rem; font: 600 12px system-ui; color: var(--bad); }
.stop.ok { color: var(--good); }
tr.differs td { background: var(--think); font-weight: 600; }
.conflict { color: var(--bad); border: 1px solid var(--bad); border-radius: 6px;
  padding: 0.4rem 0.6rem; margin: 0.4rem 0; }
.right { color: var(--good); font-weight: 600; } .wrong { color: var(--bad); font-weight: 600; }
@media print {
  .controls, .pager, nav { display: none; }
  .resp .body { max-height: none; overflow: visible; }
  figure, .resp { break-inside: avoid; }
  body { max-width: none; }
}
</style>
</head>
)";

// The explorer: reads #data, lists questions, filters to flips between two
// servers, pages, and opens two servers' responses side by side. Every piece
// of model text goes into the DOM through textContent.
const char k_script[] = R"JS(<script>
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('data').textContent);
  // The rows come in parts, each listing scores in the order its reader met
  // the scorers; bring every row to the order of D.scorers.
  let partStart = 0;
  for (const part of D.parts) {
    const to = part.scorers.map((n) => D.scorers.indexOf(n));
    if (!to.every((t, k) => t === k)) {
      for (let i = partStart; i < partStart + part.rows; i++) {
        const mine = D.responses[i][12] || [];
        const all = D.scorers.map(() => null);
        mine.forEach((v, k) => { if (to[k] >= 0) all[to[k]] = v; });
        D.responses[i][12] = all;
      }
    }
    partStart += part.rows;
  }
  const PAGE = 50;
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  };
  const VLLM = D.scorers.indexOf('vllm');
  const byQ = new Map();
  for (const r of D.responses) {
    let a = byQ.get(r[4]);
    if (!a) { a = []; byQ.set(r[4], a); }
    a.push(r);
  }
  for (const a of byQ.values()) a.sort((x, y) => x[1] - y[1] || x[2] - y[2] || x[3] - y[3]);
  const qids = Array.from(byQ.keys()).sort((a, b) => a - b);
  const selA = $('sel-a'), selB = $('sel-b'), selF = $('sel-f'), selShow = $('sel-show'),
        selSort = $('sel-sort');
  D.servers.forEach((s, i) => {
    selA.appendChild(new Option(s, i));
    selB.appendChild(new Option(s, i));
  });
  selF.appendChild(new Option('all framings', -1));
  D.framings.forEach((f, i) => selF.appendChild(new Option(f, i)));
  selA.value = Math.max(0, D.servers.indexOf(D.baseline));
  selB.value = D.servers.length > 1 ? (selA.value === '0' ? 1 : 0) : 0;
  let page = 0, openQ = null;

  const correct = (r) => { const s = r[12] && r[12][VLLM]; return s ? s[1] === 1 : false; };
  const pick = (q, s, f) => (byQ.get(q) || []).filter((r) => r[0] === s && (f < 0 || r[1] === f));
  function acc(q, s, f) {
    const rs = pick(q, s, f);
    if (!rs.length) return null;
    return rs.filter(correct).length / rs.length;
  }
  function rows() {
    const A = +selA.value, B = +selB.value, F = +selF.value, flipsOnly = selShow.value === 'flips';
    const out = [];
    for (const q of qids) {
      const a = acc(q, A, F), b = acc(q, B, F);
      const flip = a !== null && b !== null && a !== b;
      if (flipsOnly && !flip) continue;
      out.push({ q, a, b, d: (b === null || a === null) ? 0 : b - a });
    }
    const k = selSort.value;
    if (k === 'diff') out.sort((x, y) => Math.abs(y.d) - Math.abs(x.d) || x.q - y.q);
    else if (k === 'lost') out.sort((x, y) => x.d - y.d || x.q - y.q);
    else if (k === 'gained') out.sort((x, y) => y.d - x.d || x.q - y.q);
    return out;
  }
  const pct = (v) => v === null ? '-' : Math.round(100 * v) + '%';
  function renderList() {
    const list = rows();
    const pages = Math.max(1, Math.ceil(list.length / PAGE));
    page = Math.min(page, pages - 1);
    const tb = $('qbody');
    tb.replaceChildren();
    $('th-a').textContent = D.servers[+selA.value] + ' right';
    $('th-b').textContent = D.servers[+selB.value] + ' right';
    for (const row of list.slice(page * PAGE, page * PAGE + PAGE)) {
      const tr = el('tr');
      if (row.q === openQ) tr.className = 'open';
      tr.appendChild(el('td', '', row.q));
      const qt = D.questions[row.q];
      tr.appendChild(el('td', 'text', qt ? qt[0] : ''));
      tr.appendChild(el('td', '', pct(row.a)));
      tr.appendChild(el('td', '', pct(row.b)));
      tr.appendChild(el('td', '', row.d ? (row.d > 0 ? '+' : '') + Math.round(100 * row.d) : '0'));
      tr.addEventListener('click', () => { open(row.q); $('detail').scrollIntoView(); });
      tb.appendChild(tr);
    }
    $('count').textContent = list.length + ' questions' +
      (selShow.value === 'flips' ? ' flip between ' + D.servers[+selA.value] + ' and ' +
       D.servers[+selB.value] : '');
    $('pageinfo').textContent = 'page ' + (page + 1) + ' of ' + pages;
    $('prev').disabled = page === 0;
    $('next').disabled = page >= pages - 1;
    document.body.setAttribute('data-filter', selShow.value);
    document.body.setAttribute('data-servers', D.servers[+selA.value] + ',' + D.servers[+selB.value]);
  }
  // Text with the think block set apart and each scorer's extraction marked.
  function body(r) {
    const box = el('div', 'body');
    if (r[6]) box.appendChild(el('span', 'think', r[6]));
    let text = r[5] === null ? (r[11] || '') : r[5];
    // Reasoning that never closed runs to the end of the text.
    const close = text.lastIndexOf('</think>');
    const end = close >= 0 ? close + 8 : (text.indexOf('<think>') >= 0 ? text.length : 0);
    if (end > 0) {
      box.appendChild(el('span', 'think', text.slice(0, end)));
      text = text.slice(end);
    }
    let at = -1, len = 0;
    const ex = r[12] && r[12][VLLM] && r[12][VLLM][0];
    if (ex) { at = text.lastIndexOf(ex); len = ex.length; }
    if (at >= 0) {
      box.appendChild(document.createTextNode(text.slice(0, at)));
      box.appendChild(el('mark', '', text.slice(at, at + len)));
      box.appendChild(document.createTextNode(text.slice(at + len)));
    } else {
      box.appendChild(document.createTextNode(text));
    }
    const fin = r[7];
    const stop = r[8] === null ? 'EOS' : JSON.stringify(r[8]);
    const s = el('span', 'stop' + (r[10] === 'finished' ? ' ok' : ''),
      '\u25A0 ' + (fin === 'length' ? 'cut by max_tokens (finish_reason length)'
        : 'stopped: finish_reason ' + (fin || 'none') + ', stop_reason ' + stop) +
      ' \u2014 ' + (r[10] || 'unclassified'));
    box.appendChild(el('br'));
    box.appendChild(s);
    return box;
  }
  function side(q, s, F) {
    const div = el('div', 'side');
    div.appendChild(el('h3', '', D.servers[s] + ' (' + pct(acc(q, s, F)) + ' right)'));
    for (const r of pick(q, s, F)) {
      const card = el('div', 'resp');
      card.appendChild(el('div', 'meta', D.framings[r[1]] + '/' + r[2] + ', repeat ' + r[3] +
        ', ' + (r[9] === null ? '?' : r[9]) + ' tokens'));
      const sc = el('div', 'meta');
      D.scorers.forEach((name, k) => {
        const v = r[12] && r[12][k];
        if (!v) return;
        sc.appendChild(document.createTextNode(name + ': '));
        sc.appendChild(el('span', v[1] ? 'right' : 'wrong', (v[0] === null ? '(none)' : v[0]) +
          (v[1] ? ' \u2713' : ' \u2717')));
        sc.appendChild(document.createTextNode('  '));
      });
      card.appendChild(sc);
      card.appendChild(body(r));
      div.appendChild(card);
    }
    return div;
  }
  function open(q) {
    openQ = q;
    const d = $('detail');
    d.replaceChildren();
    const qt = D.questions[q] || ['', ''];
    d.appendChild(el('h3', '', 'Question ' + q));
    d.appendChild(el('div', 'question', qt[0]));
    const gold = qt[1].split('####');
    d.appendChild(el('p', 'gold', 'Gold answer: ' + gold[gold.length - 1].trim()));
    const F = +selF.value;
    const sides = el('div', 'sides');
    sides.appendChild(side(q, +selA.value, F));
    sides.appendChild(side(q, +selB.value, F));
    d.appendChild(sides);
    document.body.setAttribute('data-open', String(q));
    renderList();
    saveHash();
  }
  function saveHash() {
    const parts = [];
    if (selShow.value === 'flips') parts.push('flips=' + D.servers[+selA.value] + ',' + D.servers[+selB.value]);
    if (openQ !== null) parts.push('open=' + openQ);
    history.replaceState(null, '', parts.length ? '#' + parts.map(encodeURI).join('&') : '#explorer');
  }
  function readHash() {
    const h = decodeURI(location.hash.slice(1));
    if (h.indexOf('=') < 0) return;
    for (const kv of h.split('&')) {
      const [k, v] = kv.split('=');
      if (k === 'flips' && v) {
        const [a, b] = v.split(',');
        if (D.servers.indexOf(a) >= 0) selA.value = D.servers.indexOf(a);
        if (D.servers.indexOf(b) >= 0) selB.value = D.servers.indexOf(b);
        selShow.value = 'flips';
      } else if (k === 'open' && byQ.has(+v)) {
        openQ = +v;
      }
    }
  }
  const changed = () => { page = 0; renderList(); if (openQ !== null) open(openQ); else saveHash(); };
  [selA, selB, selF, selShow, selSort].forEach((s) => s.addEventListener('change', changed));
  $('prev').addEventListener('click', () => { page--; renderList(); });
  $('next').addEventListener('click', () => { page++; renderList(); });
  readHash();
  renderList();
  if (openQ !== null) open(openQ);
  document.body.setAttribute('data-ready', '1');
})();
</script>
)JS";

// ---- charts ----

struct Frame {
    double width = 640, height = 280, left = 52, right = 16, top = 14, bottom = 70;
    double plot_w() const { return width - left - right; }
    double plot_h() const { return height - top - bottom; }
};

std::string svg_open(const Frame& f, const std::string& label) {
    return fmt::format(R"(<svg viewBox="0 0 {} {}" role="img" aria-label="{}">)", f.width, f.height,
                       util::xml_escape(label));
}

// Horizontal grid lines and y labels for 0..`max` in `steps` steps.
std::string y_axis(const Frame& f, double max, int steps, const std::string& unit,
                   const std::string& title) {
    std::string out;
    for (int i = 0; i <= steps; ++i) {
        double v = max * i / steps;
        double y = f.top + f.plot_h() * (1 - static_cast<double>(i) / steps);
        out += fmt::format(R"(<line class="grid" x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}"/>)",
                           f.left, f.left + f.plot_w(), y, y);
        out += fmt::format(
            R"(<text x="{}" y="{:.1f}" text-anchor="end">{}{}</text>)", f.left - 4, y + 4,
            v >= 10 || v == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2g}", v), unit);
    }
    out += fmt::format(
        R"~(<text transform="translate(12,{:.1f}) rotate(-90)" text-anchor="middle">{}</text>)~",
        f.top + f.plot_h() / 2, util::xml_escape(title));
    out += fmt::format(R"(<line class="axis" x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}"/>)", f.left,
                       f.left + f.plot_w(), f.top + f.plot_h(), f.top + f.plot_h());
    return out;
}

// Group labels under bars: server on the first line, framing/max_tokens below.
std::string group_label(const analysis::GroupSummary& g, double x, double y) {
    return fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}<tspan x="{:.1f}" )"
                       R"(dy="13">{}/{}</tspan></text>)",
                       x, y, util::xml_escape(g.server), x, util::xml_escape(g.framing),
                       g.max_tokens);
}

std::string legend(const std::vector<std::string>& names, const std::string& cls_prefix, double x,
                   double y) {
    std::string out;
    double at = x;
    for (size_t i = 0; i < names.size(); ++i) {
        out += fmt::format(R"(<rect class="{}{}" x="{:.1f}" y="{:.1f}" width="10" height="10"/>)",
                           cls_prefix, i % k_series_colours, at, y - 9);
        out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", at + 14, y,
                           util::xml_escape(names[i]));
        at += 24 + 6.5 * static_cast<double>(names[i].size());
    }
    return out;
}

std::string score_chart(const ReportData& data) {
    const auto& groups = data.summary.groups;
    auto k = static_cast<size_t>(
        std::find(data.summary.scorers.begin(), data.summary.scorers.end(), "vllm") -
        data.summary.scorers.begin());
    Frame f;
    f.width = std::max(640.0, f.left + f.right + 70.0 * static_cast<double>(groups.size()));
    std::string out = svg_open(f, "accuracy per group with min-max over repeats");
    out += y_axis(f, 100, 5, "%", "accuracy (vllm), %");
    const double slot = f.plot_w() / static_cast<double>(std::max<size_t>(1, groups.size()));
    auto y_of = [&](double p) { return f.top + f.plot_h() * (1 - p); };
    for (size_t i = 0; i < groups.size(); ++i) {
        const auto& g = groups[i];
        const double cx = f.left + slot * (static_cast<double>(i) + 0.5);
        const double w = std::min(40.0, slot * 0.6);
        if (k < g.scorers.size()) {
            const auto& s = g.scorers[k].spread;
            out += fmt::format(
                R"(<rect class="s{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}"><title>{}: {}</title></rect>)",
                server_index(data, g.server) % k_series_colours, cx - w / 2, y_of(s.mean), w,
                f.top + f.plot_h() - y_of(s.mean), util::xml_escape(group_name(g)),
                util::xml_escape(pct_spread(s)));
            out += fmt::format(
                R"(<line class="whisker" x1="{0:.1f}" x2="{0:.1f}" y1="{1:.1f}" y2="{2:.1f}"/>)"
                R"(<line class="whisker" x1="{3:.1f}" x2="{4:.1f}" y1="{1:.1f}" y2="{1:.1f}"/>)"
                R"(<line class="whisker" x1="{3:.1f}" x2="{4:.1f}" y1="{2:.1f}" y2="{2:.1f}"/>)",
                cx, y_of(s.min), y_of(s.max), cx - 6, cx + 6);
            out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{:.1f}</text>)",
                               cx, y_of(s.max) - 4, 100.0 * s.mean);
        }
        out += group_label(g, cx, f.top + f.plot_h() + 16);
    }
    out += legend(data.results.servers, "s", f.left, f.height - 8);
    return out + "</svg>";
}

std::string outcome_chart(const ReportData& data) {
    const auto& groups = data.summary.groups;
    Frame f;
    f.width = std::max(640.0, f.left + f.right + 70.0 * static_cast<double>(groups.size()));
    std::string out = svg_open(f, "where the responses went, per group");
    out += y_axis(f, 100, 5, "%", "share of responses, %");
    const double slot = f.plot_w() / static_cast<double>(std::max<size_t>(1, groups.size()));
    for (size_t i = 0; i < groups.size(); ++i) {
        const auto& g = groups[i];
        const double cx = f.left + slot * (static_cast<double>(i) + 0.5);
        const double w = std::min(40.0, slot * 0.6);
        const double parts[] = {g.finished, g.stop_truncated, g.length_truncated, g.other,
                                g.errors};
        double total = 0;
        for (double p : parts) {
            total += p;
        }
        double y = f.top + f.plot_h();
        for (int o = 0; o < scorers::k_outcome_count; ++o) {
            if (total <= 0 || parts[o] <= 0) {
                continue;
            }
            const double h = f.plot_h() * parts[o] / total;
            y -= h;
            out += fmt::format(
                R"(<rect class="o{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}"><title>{}: {} {:.0f} of {:.0f}</title></rect>)",
                o, cx - w / 2, y, w, h, util::xml_escape(group_name(g)), scorers::outcome_name(o),
                parts[o], total);
        }
        out += group_label(g, cx, f.top + f.plot_h() + 16);
    }
    std::vector<std::string> outcomes;
    for (int o = 0; o < scorers::k_outcome_count; ++o) {
        outcomes.emplace_back(scorers::outcome_name(o));
    }
    out += legend(outcomes, "o", f.left, f.height - 8);
    return out + "</svg>";
}

// Overlaid step histograms, one line per server, as a share of its responses.
std::string histogram_chart(const ReportData& data, const std::vector<std::vector<double>>& values,
                            const std::string& label, const std::string& x_title) {
    double max_v = 0;
    for (const auto& v : values) {
        for (double x : v) {
            max_v = std::max(max_v, x);
        }
    }
    const double bin = std::max(1.0, std::ceil((max_v + 1) / k_histogram_bins));
    std::vector<std::vector<double>> share(values.size(), std::vector<double>(k_histogram_bins));
    double max_share = 0;
    for (size_t s = 0; s < values.size(); ++s) {
        for (double x : values[s]) {
            share[s][std::min<size_t>(k_histogram_bins - 1, static_cast<size_t>(x / bin))] += 1;
        }
        for (auto& c : share[s]) {
            c = values[s].empty() ? 0 : 100.0 * c / static_cast<double>(values[s].size());
            max_share = std::max(max_share, c);
        }
    }
    const double y_max = std::max(5.0, std::ceil(max_share / 5) * 5);
    Frame f;
    f.bottom = 56;
    std::string out = svg_open(f, label);
    out += y_axis(f, y_max, 5, "%", "share of responses, %");
    const double bw = f.plot_w() / k_histogram_bins;
    for (int i = 0; i <= k_histogram_bins; i += 4) {
        const double x = f.left + bw * i;
        out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{:.0f}</text>)", x,
                           f.top + f.plot_h() + 14, bin * i);
    }
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)",
                       f.left + f.plot_w() / 2, f.top + f.plot_h() + 30, util::xml_escape(x_title));
    for (size_t s = 0; s < share.size(); ++s) {
        if (values[s].empty()) {
            continue;
        }
        std::string pts;
        for (int i = 0; i < k_histogram_bins; ++i) {
            const double y = f.top + f.plot_h() * (1 - share[s][i] / y_max);
            pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", f.left + bw * i, y,
                               f.left + bw * (i + 1), y);
        }
        out += fmt::format(R"(<polyline class="line s{}" style="fill:none" points="{}"/>)",
                           s % k_series_colours, pts);
    }
    out += legend(data.results.servers, "s", f.left, f.height - 8);
    return out + "</svg>";
}

std::string charts(const ReportData& data) {
    const size_t n = data.results.servers.size();
    std::vector<std::vector<double>> tokens(n), latency(n);
    bool any_latency = false;
    for (const auto& r : data.results.rows) {
        if (r.completion_tokens) {
            tokens[static_cast<size_t>(r.server)].push_back(
                static_cast<double>(*r.completion_tokens));
        }
        if (r.latency_ms > 0) {
            latency[static_cast<size_t>(r.server)].push_back(r.latency_ms);
            any_latency = true;
        }
    }
    std::string out = "<h2 id=\"charts\">Charts</h2>\n<div class=\"charts\">\n";
    out += "<figure><figcaption>Accuracy per group (vllm scorer), bars = mean, whiskers = min-max "
           "over repeats</figcaption>" +
           score_chart(data) + "</figure>\n";
    out += "<figure><figcaption>Where the responses went (outcome per group)</figcaption>" +
           outcome_chart(data) + "</figure>\n";
    out += "<figure><figcaption>Completion tokens per server</figcaption>" +
           histogram_chart(data, tokens, "completion-token distribution per server",
                           "completion tokens") +
           "</figure>\n";
    if (any_latency) {
        out += "<figure><figcaption>Latency per server</figcaption>" +
               histogram_chart(data, latency, "latency distribution per server", "latency, ms") +
               "</figure>\n";
    } else {
        out += "<p class=\"note\">No latencies were recorded.</p>\n";
    }
    return out + "</div>\n";
}

// ---- tables ----

// Latency and tokens per group, then each comparison's tail difference.
std::string latency_tables(const ReportData& data) {
    std::string out = "<h2 id=\"latency\">Latency and tokens</h2>\n<p class=\"note\">Successful "
                      "responses over all repeats; ms, completion tokens, requests per second "
                      "achieved.</p>\n" +
                      latency_table(data.summary, Style::html);
    if (auto tails = tail_table(data, Style::html); !tails.empty()) {
        out += "<p class=\"note\">Tail against the baseline on the paired questions. From longer "
               "outputs: both sides' p99 predicted from their token counts at the baseline's "
               "speed (least squares latency ~ tokens); rest: the candidate being slower per "
               "request.</p>\n" +
               tails;
    }
    return out;
}

// What actually ran: facts by server, differing rows marked, conflicts red.
std::string what_ran(const ReportData& data) {
    std::string out = "<h2 id=\"servers\">What actually ran</h2>\n<table class=\"facts\">\n<tr>"
                      "<th>fact</th>";
    for (const auto& s : data.servers) {
        out += "<th>" + util::xml_escape(s.name) + "</th>";
    }
    out += "</tr>\n";
    for (const auto& f : analysis::fact_rows(data.servers)) {
        out += f.differs ? "<tr class=\"differs\" title=\"differs between servers\">" : "<tr>";
        out += "<td>" + util::xml_escape(f.name) + "</td>";
        for (const auto& v : f.values) {
            out += "<td>" + util::xml_escape(v.empty() ? "-" : v) + "</td>";
        }
        out += "</tr>\n";
    }
    out += "</table>\n";
    bool any_fingerprint = false;
    for (const auto& s : data.servers) {
        any_fingerprint = any_fingerprint || s.fingerprinted;
        for (const auto& c : s.conflicts) {
            out += "<div class=\"conflict\"><strong>CONFLICT</strong> on " +
                   util::xml_escape(s.name) + ": " + util::xml_escape(c.message) + " (" +
                   util::xml_escape(c.name) + ")";
            if (!c.evidence.empty()) {
                out += "<ul>";
                for (const auto& e : c.evidence) {
                    out += "<li><code>" + util::xml_escape(e) + "</code></li>";
                }
                out += "</ul>";
            }
            out += "</div>\n";
        }
    }
    if (!any_fingerprint) {
        out += "<p class=\"note\">No server log was fingerprinted; attach one with "
               "--server-log to see the engine's own facts.</p>\n";
    }
    return out;
}

std::string tables(const ReportData& data) {
    std::string out = "<h2 id=\"verdicts\">Harness verdicts</h2>\n<p class=\"note\">Accuracy "
                      "%, mean (min-max) over repeats.</p>\n" +
                      verdict_table(data.summary, Style::html);
    if (auto cmp = comparison_table(data, Style::html); !cmp.empty()) {
        out += "<h2 id=\"compare\">Against the baseline</h2>\n<p class=\"note\">Points, "
               "candidate minus baseline; paired bootstrap 95% interval; McNemar mid-p; noise "
               "floor = the baseline's largest difference between its own repeats.</p>\n" +
               cmp;
    }
    out += probe_html(data);
    out += latency_tables(data);
    out += what_ran(data);
    return out;
}

const char k_explorer[] = R"(<h2 id="explorer">Question explorer</h2>
<div class="controls">
<label>A <select id="sel-a"></select></label>
<label>B <select id="sel-b"></select></label>
<label>framing <select id="sel-f"></select></label>
<label>show <select id="sel-show"><option value="all">all questions</option><option value="flips">flips between A and B</option></select></label>
<label>sort <select id="sel-sort"><option value="q">question</option><option value="diff">largest difference</option><option value="lost">B lost most</option><option value="gained">B gained most</option></select></label>
</div>
<p class="pager"><span id="count"></span> &middot; <button id="prev" type="button">&larr; previous</button> <span id="pageinfo"></span> <button id="next" type="button">next &rarr;</button></p>
<table id="qlist"><thead><tr><th>q</th><th>question</th><th id="th-a">A right</th><th id="th-b">B right</th><th>B&minus;A</th></tr></thead><tbody id="qbody"></tbody></table>
<div id="detail"><p class="note">Click a question to see both servers' responses side by side.</p></div>
)";

// ---- data ----

// Rows are written in chunks of about this size.
constexpr size_t k_chunk_bytes = 1 << 20;

void json_text(std::string& buf, std::string_view text) {
    util::append_json_string(buf, text, util::JsonStringStyle::script);
}

void json_opt_text(std::string& buf, const std::optional<std::string_view>& text) {
    if (text) {
        json_text(buf, *text);
    } else {
        buf += "null";
    }
}

} // namespace

void ExplorerRows::Closer::operator()(std::FILE* f) const {
    std::fclose(f);
}

util::Result<void> ExplorerRows::open(const std::filesystem::path& temp_dir) {
    // The temporary files sit beside report.html (which needs the same space
    // anyway) and are unlinked at once, so nothing is left behind.
    for (auto& part : m_parts) {
        std::string name = (temp_dir / ".report.html.XXXXXX").string();
        const int fd = mkstemp(name.data());
        if (fd >= 0) {
            unlink(name.c_str());
            part.file.reset(fdopen(fd, "w+b"));
            if (!part.file) {
                close(fd);
            }
        }
        if (!part.file) {
            return util::make_error(util::ErrorKind::io,
                                    fmt::format("cannot create a temporary file in {}: {}",
                                                temp_dir.string(), std::strerror(errno)));
        }
    }
    return {};
}

util::Result<void> ExplorerRows::read_questions(const std::string& db_path) {
    auto st = store::Store::open(db_path, store::Store::Mode::read_only);
    if (!st) {
        return st.error();
    }
    // Questions asked, with the gold answer.
    store::Statement q((*st)->handle(),
                       "SELECT question_idx, question, answer FROM questions WHERE "
                       "(dataset, question_idx) IN (SELECT DISTINCT dataset, question_idx "
                       "FROM requests WHERE response_id IS NOT NULL) ORDER BY question_idx");
    if (!q.valid()) {
        return util::make_error(util::ErrorKind::data,
                                fmt::format("cannot read questions: {}", q.error()));
    }
    m_questions = "\"questions\":{";
    bool first = true;
    while (q.step()) {
        fmt::format_to(std::back_inserter(m_questions), "{}\"{}\":[", first ? "" : ",",
                       q.column_int(0));
        json_text(m_questions, q.column_view(1));
        m_questions += ',';
        json_text(m_questions, q.column_view(2));
        m_questions += ']';
        first = false;
    }
    m_questions += '}';
    return {};
}

std::array<analysis::ResponseVisitor, 2> ExplorerRows::visitors() {
    std::array<analysis::ResponseVisitor, 2> out;
    for (size_t i = 0; i < m_parts.size(); ++i) {
        out[i] = [this, i](const analysis::ResultRow& row, const analysis::ResponseDetail& d) {
            return add(m_parts[i], row, d);
        };
    }
    return out;
}

util::Result<void> ExplorerRows::flush(Part& part) {
    if (!part.buf.empty() &&
        std::fwrite(part.buf.data(), 1, part.buf.size(), part.file.get()) != part.buf.size()) {
        return util::make_error(util::ErrorKind::io,
                                fmt::format("cannot write report.html's rows to a temporary "
                                            "file: {}",
                                            std::strerror(errno)));
    }
    part.buf.clear();
    return {};
}

// One response: [server, framing, max_tokens, repeat, question, text,
// reasoning, finish_reason, stop_reason, completion_tokens, outcome, error,
// [[extracted, correct] or null per scorer of the part]], as the page's
// script reads it.
util::Result<void> ExplorerRows::add(Part& part, const analysis::ResultRow& row,
                                     const analysis::ResponseDetail& d) {
    auto& buf = part.buf;
    if (part.rows++ > 0) {
        buf += ',';
    }
    if (d.scorers && d.scorers->size() > part.scorers.size()) {
        part.scorers = *d.scorers;
    }
    fmt::format_to(std::back_inserter(buf), "[{},{},{},{},{},", row.server, row.framing,
                   row.max_tokens, row.repeat, row.question_idx);
    json_opt_text(buf, d.text);
    buf += ',';
    json_opt_text(buf, d.reasoning);
    buf += ',';
    json_opt_text(buf, d.finish_reason);
    buf += ',';
    if (const auto* id = std::get_if<int64_t>(&d.stop_reason)) {
        fmt::format_to(std::back_inserter(buf), "{}", *id);
    } else if (const auto* text = std::get_if<std::string_view>(&d.stop_reason)) {
        json_text(buf, *text);
    } else {
        buf += "null";
    }
    buf += ',';
    if (row.completion_tokens) {
        fmt::format_to(std::back_inserter(buf), "{},", *row.completion_tokens);
    } else {
        buf += "null,";
    }
    json_text(buf, scorers::outcome_name(row.outcome));
    buf += ',';
    json_opt_text(buf, d.error);
    buf += ",[";
    for (size_t k = 0; k < d.scored.size(); ++k) {
        buf += k ? "," : "";
        if (d.scored[k]) {
            buf += '[';
            json_text(buf, d.extracted[k]);
            buf += row.correct[k] ? ",1]" : ",0]";
        } else {
            buf += "null";
        }
    }
    buf += "]]";
    return buf.size() >= k_chunk_bytes ? flush(part) : util::Result<void>{};
}

std::string ExplorerRows::data_head(const ReportData& data) const {
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& part : m_parts) {
        parts.push_back({{"rows", part.rows}, {"scorers", part.scorers}});
    }
    nlohmann::json head = {{"servers", data.results.servers},
                           {"framings", data.results.framings},
                           {"scorers", data.results.scorers},
                           {"baseline", data.baseline},
                           {"parts", parts}};
    std::string h = script_safe_json(head);
    h.back() = ','; // reopen the object for the questions and responses
    return "<script type=\"application/json\" id=\"data\">" + h + m_questions + ",\"responses\":[";
}

namespace {

// Append the whole of `in_fd` to `out_fd`: in the kernel where the
// filesystem allows (the file sits beside the report), else via a buffer.
util::Result<void> append_file(int in_fd, int out_fd) {
    const off_t size = lseek(in_fd, 0, SEEK_END);
    off_t at = 0;
    while (at < size) {
        const ssize_t n =
            copy_file_range(in_fd, &at, out_fd, nullptr, static_cast<size_t>(size - at), 0);
        if (n > 0) {
            continue;
        }
        if (n < 0 && errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) {
            break;
        }
        std::vector<char> chunk(k_chunk_bytes);
        ssize_t got = 0;
        while (at < size && (got = pread(in_fd, chunk.data(), chunk.size(), at)) > 0) {
            for (ssize_t done = 0; done < got;) {
                const ssize_t w =
                    write(out_fd, chunk.data() + done, static_cast<size_t>(got - done));
                if (w <= 0) {
                    return util::make_error(
                        util::ErrorKind::io,
                        fmt::format("cannot write report.html: {}", std::strerror(errno)));
                }
                done += w;
            }
            at += got;
        }
        break;
    }
    if (at != size) {
        return util::make_error(util::ErrorKind::io,
                                fmt::format("cannot write report.html: {}", std::strerror(errno)));
    }
    return {};
}

} // namespace

util::Result<void> ExplorerRows::copy_to(int out_fd) {
    for (size_t i = 0; i < m_parts.size(); ++i) {
        auto& part = m_parts[i];
        if (!part.file) {
            return util::make_error(util::ErrorKind::internal,
                                    "report.html's rows were not collected");
        }
        if (auto f = flush(part); !f) {
            return f;
        }
        if (std::fflush(part.file.get()) != 0) {
            return util::make_error(util::ErrorKind::io, fmt::format("cannot write report.html: {}",
                                                                     std::strerror(errno)));
        }
        // Parts after a non-empty one start with the comma between them.
        if (i > 0 && part.rows > 0 && m_parts[0].rows > 0 && write(out_fd, ",", 1) != 1) {
            return util::make_error(util::ErrorKind::io, fmt::format("cannot write report.html: {}",
                                                                     std::strerror(errno)));
        }
        if (auto r = append_file(fileno(part.file.get()), out_fd); !r) {
            return r;
        }
    }
    return {};
}

std::string script_safe_json(const nlohmann::json& j) {
    // ensure_ascii turns U+2028/2029 into \u escapes; the rest we do here,
    // which is safe because < > & only ever occur inside JSON strings.
    const auto raw = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    std::string out;
    out.reserve(raw.size());
    for (char c : raw) {
        switch (c) {
        case '<':
            out += "\\u003c";
            break;
        case '>':
            out += "\\u003e";
            break;
        case '&':
            out += "\\u0026";
            break;
        default:
            out += c;
        }
    }
    return out;
}

util::Result<void> write_html(const ReportData& data, ExplorerRows& rows,
                              const std::filesystem::path& path) {
    // 1. Head, headline and navigation; charts and tables from the summary;
    // the explorer's frame and the start of its data.
    std::string before = k_head;
    before += "<body>\n<h1>diffeval report</h1>\n<p class=\"headline\">" +
              util::xml_escape(headline(data)) +
              "</p>\n<p class=\"note\">Baseline: " + util::xml_escape(data.baseline) +
              ". Accuracy by the vllm scorer unless a table says otherwise.</p>\n"
              "<nav><a href=\"#charts\">charts</a> &middot; <a href=\"#verdicts\">"
              "verdicts</a> &middot; <a href=\"#compare\">against the baseline</a> "
              "&middot; <a href=\"#latency\">latency</a> &middot; <a href=\"#servers\">what "
              "ran</a> &middot; <a href=\"#explorer\">question explorer</a></nav>\n";
    before += charts(data);
    before += tables(data);
    before += k_explorer;
    before += rows.data_head(data);
    // 2. The collected questions and responses, then the script.
    const std::string after = std::string("]}</script>\n") + k_script + "</body>\n</html>\n";
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(path.c_str(), "wb"),
                                                        &std::fclose);
    auto failed = [&] {
        return util::make_error(
            util::ErrorKind::io,
            fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
    };
    if (!out) {
        return failed();
    }
    if (std::fwrite(before.data(), 1, before.size(), out.get()) != before.size() ||
        std::fflush(out.get()) != 0) {
        return failed();
    }
    if (auto r = rows.copy_to(fileno(out.get())); !r) {
        return r;
    }
    if (std::fwrite(after.data(), 1, after.size(), out.get()) != after.size() ||
        std::fclose(out.release()) != 0) {
        return failed();
    }
    return {};
}

} // namespace diffeval::reports
