// report.html's script (embedded into the page by diffeval; edit here): the
// question explorer over the embedded responses, and the outcome-transition
// chart between two groups the reader picks. Its whole state lives in the
// URL fragment, so a link opens exactly the same view. Every piece of model
// text goes into the DOM through textContent, never as markup.
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
  const SVG = 'http://www.w3.org/2000/svg';
  const OUTCOMES = ['finished', 'stop_truncated', 'length_truncated', 'other', 'error'];
  // Answers imported from lm-eval samples record no finish state: their
  // outcome gets a row and a column when some response has it.
  if (D.responses.some((r) => r[10] === 'unrecorded')) OUTCOMES.push('unrecorded');
  // Planned requests with no response stored (a run stopped first): their
  // own row and column, as in the comparisons' transition tables.
  if (D.responses.some((r) => r[10] === 'unsent')) OUTCOMES.push('unsent');
  const $ = (id) => document.getElementById(id);
  // Model text with each direction override, isolate, mark and zero-width
  // character shown as <U+XXXX>: raw, "\u202E21" reads "12", and the text
  // read is not the text scored (util::format_char_length).
  const FORMAT = /[\u061C\u200B-\u200F\u2028-\u202E\u2060-\u2069\uFEFF]/g;
  const shown = (text) => String(text).replace(FORMAT,
    (c) => '<U+' + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0') + '>');
  const textNode = (text) => document.createTextNode(shown(text));
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = shown(text);
    return e;
  };
  const svgEl = (tag, attrs, text) => {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  };
  // Right or wrong by the scorer picked (vllm until another is): the
  // explorer's and the transition chart's each, named beside them.
  const VLLM = Math.max(0, D.scorers.indexOf('vllm'));
  const byQ = new Map();
  const groupSet = new Map();
  for (const r of D.responses) {
    let a = byQ.get(r[4]);
    if (!a) { a = []; byQ.set(r[4], a); }
    a.push(r);
    const g = r[0] + ',' + r[1] + ',' + r[2];
    if (!groupSet.has(g)) groupSet.set(g, { s: r[0], f: r[1], mt: r[2] });
  }
  for (const a of byQ.values()) a.sort((x, y) => x[1] - y[1] || x[2] - y[2] || x[3] - y[3]);
  const qids = Array.from(byQ.keys()).sort((a, b) => a - b);
  const groups = Array.from(groupSet.values())
    .sort((x, y) => x.f - y.f || x.mt - y.mt || x.s - y.s);
  const groupName = (g) => D.servers[g.s] + '/' + D.framings[g.f] + '/' + g.mt;
  const limits = Array.from(new Set(D.responses.map((r) => r[2]))).sort((a, b) => a - b);

  const selA = $('sel-a'), selB = $('sel-b'), selF = $('sel-f'), selM = $('sel-m'),
        selShow = $('sel-show'), selSort = $('sel-sort'), trA = $('tr-a'), trB = $('tr-b'),
        selS = $('sel-s'), trS = $('tr-s');
  D.scorers.forEach((name, k) => {
    selS.appendChild(new Option(name, k));
    trS.appendChild(new Option(name, k));
  });
  selS.value = trS.value = VLLM;
  D.servers.forEach((s, i) => {
    selA.appendChild(new Option(s, i));
    selB.appendChild(new Option(s, i));
  });
  selF.appendChild(new Option('all framings', -1));
  D.framings.forEach((f, i) => selF.appendChild(new Option(f, i)));
  selM.appendChild(new Option('all max_tokens', -1));
  limits.forEach((m) => selM.appendChild(new Option(String(m), m)));
  groups.forEach((g, i) => {
    trA.appendChild(new Option(groupName(g), i));
    trB.appendChild(new Option(groupName(g), i));
  });
  selA.value = Math.max(0, D.servers.indexOf(D.baseline));
  selB.value = D.servers.length > 1 ? (selA.value === '0' ? 1 : 0) : 0;
  // The transition chart starts at the baseline's first group and the first
  // other server's group of the same framing and max_tokens.
  const base = Math.max(0, groups.findIndex((g) => g.s === +selA.value));
  const other = groups.findIndex((g) => g.s !== groups[base].s && g.f === groups[base].f &&
                                 g.mt === groups[base].mt);
  trA.value = base;
  trB.value = other >= 0 ? other : base;
  let page = 0, openQ = null;

  const correctBy = (r, k) => { const s = r[12] && r[12][k]; return s ? s[1] === 1 : false; };
  const correct = (r) => correctBy(r, +selS.value);
  // A request without a successful response (failed, or never sent) has an
  // error. As in the comparisons (statistics.md), the A side's are left out
  // of the pairing, unless its group answered nothing at all; the B side's
  // count as wrong answers. Counted, a killed baseline's unsent questions
  // read as the candidate's gains (an audit: "35 questions flip" where the
  // verdict counted 17, all lost).
  const answered = (r) => r[11] === null;
  const answeringGroups = new Set(D.responses.filter(answered)
    .map((r) => r[0] + ',' + r[1] + ',' + r[2]));
  const held = (r) => answered(r) || !answeringGroups.has(r[0] + ',' + r[1] + ',' + r[2]);
  const pick = (q, s, f, m) => (byQ.get(q) || [])
    .filter((r) => r[0] === s && (f < 0 || r[1] === f) && (m < 0 || r[2] === m));
  // `baseline`: the A side, whose requests without a response are left out.
  function acc(q, s, f, m, baseline) {
    const rs = pick(q, s, f, m).filter((r) => !baseline || held(r));
    if (!rs.length) return null;
    return rs.filter(correct).length / rs.length;
  }
  function rows() {
    const A = +selA.value, B = +selB.value, F = +selF.value, M = +selM.value;
    const flipsOnly = selShow.value === 'flips';
    const out = [];
    for (const q of qids) {
      const a = acc(q, A, F, M, true), b = acc(q, B, F, M, false);
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
  // A count and its noun, singular for 1 (util::counted's rule).
  const counted = (n, noun) => n + ' ' + noun + (n === 1 ? '' : 's');
  function renderList() {
    const list = rows();
    const pages = Math.max(1, Math.ceil(list.length / PAGE));
    page = Math.min(page, pages - 1);
    const tb = $('qbody');
    tb.replaceChildren();
    const by = ' right (' + D.scorers[+selS.value] + ')';
    $('th-a').textContent = D.servers[+selA.value] + by;
    $('th-b').textContent = D.servers[+selB.value] + by;
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
    $('count').textContent = counted(list.length, 'question') +
      (selShow.value === 'flips' ? (list.length === 1 ? ' flips' : ' flip') + ' between ' +
       D.servers[+selA.value] + ' and ' +
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
    // The block the classification found opened (by the text or its
    // prompt), to its last close or, never closed, to the end; a stray
    // `</think>` opens none and stays text.
    // A server that parsed the reasoning out (r[6]) left the answer in the
    // text: only a close there still ends a block.
    const close = text.lastIndexOf('</think>');
    const end = !r[14] ? 0 : close >= 0 ? close + 8 : r[6] ? 0 : text.length;
    if (end > 0) {
      box.appendChild(el('span', 'think', text.slice(0, end)));
      text = text.slice(end);
    }
    let at = -1, len = 0;
    const ex = r[12] && r[12][+selS.value] && r[12][+selS.value][0];
    if (ex) { at = text.lastIndexOf(ex); len = ex.length; }
    if (at >= 0) {
      box.appendChild(textNode(text.slice(0, at)));
      box.appendChild(el('mark', '', text.slice(at, at + len)));
      box.appendChild(textNode(text.slice(at + len)));
    } else {
      box.appendChild(textNode(text));
    }
    const fin = r[7];
    // A stop the server did not name is unknown, never taken for EOS.
    const stop = r[8] !== null ? JSON.stringify(r[8])
      : r[13] === 'unknown' ? 'unknown (the server names no stop)'
        : r[13] === 'eos' ? 'EOS' : (r[13] || 'none');
    // A request never sent, or one that failed, did not stop: say what it is.
    const how = r[10] === 'unsent' ? 'not sent: no response stored (a run stopped first)'
      : r[10] === 'error' ? 'failed: no answer to classify'
        : fin === 'length' ? 'cut by max_tokens (finish_reason length)'
          : 'stopped: finish_reason ' + (fin || 'none') + ', stop_reason ' + stop;
    const s = el('span', 'stop' + (r[10] === 'finished' ? ' ok' : ''),
      '\u25A0 ' + how + ' \u2014 ' + (r[10] || 'unclassified'));
    box.appendChild(el('br'));
    box.appendChild(s);
    return box;
  }
  // Repeats that said exactly the same thing are shown once, with their count.
  function sameAnswers(rs) {
    const seen = new Map();
    for (const r of rs) {
      const key = JSON.stringify([r[1], r[2], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12]]);
      const e = seen.get(key);
      if (e) e.repeats.push(r[3]); else seen.set(key, { r, repeats: [r[3]] });
    }
    return Array.from(seen.values());
  }
  function side(q, s, F, M) {
    const div = el('div', 'side');
    div.appendChild(el('h3', '', D.servers[s] + ' (' + pct(acc(q, s, F, M)) + ' right)'));
    for (const { r, repeats } of sameAnswers(pick(q, s, F, M))) {
      const card = el('div', 'resp');
      const which = repeats.length > 1
        ? 'repeats ' + repeats.join(', ') + ' (' + repeats.length + ' identical)'
        : 'repeat ' + repeats[0];
      card.appendChild(el('div', 'meta', D.framings[r[1]] + '/' + r[2] + ', ' + which +
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
    const F = +selF.value, M = +selM.value;
    const sides = el('div', 'sides');
    sides.appendChild(side(q, +selA.value, F, M));
    sides.appendChild(side(q, +selB.value, F, M));
    d.appendChild(sides);
    document.body.setAttribute('data-open', String(q));
    renderList();
    saveHash();
  }

  // ---- the outcome-transition chart ----
  // Per question, every pair of an A response and a B response weighs
  // 1 / (A's repeats x B's repeats), so each question counts once however
  // many repeats each side has; the repeat numbers are never paired.
  function transitions(ga, gb) {
    const n = OUTCOMES.length, k = +trS.value;
    const cells = Array.from({ length: n * n }, () => ({ count: 0, points: 0 }));
    let questions = 0;
    for (const q of qids) {
      const ra = pick(q, ga.s, ga.f, ga.mt).filter(held), rb = pick(q, gb.s, gb.f, gb.mt);
      if (!ra.length || !rb.length) continue;
      questions++;
      const w = 1 / (ra.length * rb.length);
      for (const a of ra) {
        for (const b of rb) {
          const ia = OUTCOMES.indexOf(a[10]), ib = OUTCOMES.indexOf(b[10]);
          if (ia < 0 || ib < 0) continue; // not classified
          const c = cells[ia * n + ib];
          c.count += w;
          c.points += w * ((correctBy(b, k) ? 1 : 0) - (correctBy(a, k) ? 1 : 0));
        }
      }
    }
    return { cells, questions };
  }
  // Whole counts as such, others with their one decimal at any size: "15"
  // for 14.5 questions read as a count the cells beside did not add up to.
  const fmtCount = (v) => Math.abs(v - Math.round(v)) < 0.05 ? v.toFixed(0) : v.toFixed(1);
  function renderTransitions() {
    const ga = groups[+trA.value], gb = groups[+trB.value];
    const host = $('tr-chart');
    host.replaceChildren();
    if (!ga || !gb) return;
    const { cells, questions } = transitions(ga, gb);
    const n = OUTCOMES.length, cw = 124, ch = 44, left = 170, top = 74;
    const w = left + n * cw + 20, h = top + n * ch + 58;
    const svg = svgEl('svg', { class: 'chart', width: w, height: h, viewBox: '0 0 ' + w + ' ' + h,
      role: 'img', 'aria-label': 'outcome transitions' });
    svg.appendChild(svgEl('text', { x: 4, y: 16, class: 'head' },
      'rows: ' + groupName(ga) + ' (from)'));
    svg.appendChild(svgEl('text', { x: 4, y: 34, class: 'head' },
      'columns: ' + groupName(gb) + ' (to)'));
    OUTCOMES.forEach((o, j) => svg.appendChild(svgEl('text', { x: left + j * cw + cw / 2,
      y: top - 10, 'text-anchor': 'middle' }, o)));
    OUTCOMES.forEach((o, i) => svg.appendChild(svgEl('text', { x: left - 8,
      y: top + i * ch + ch / 2 + 4, 'text-anchor': 'end' }, o)));
    const max = Math.max(1e-9, ...cells.map((c) => c.count));
    // A cell's sum is in questions; shown in points of accuracy over the
    // questions in both, as the report's differences are (the net is the
    // table's difference for the pair).
    const pts = (v) => (questions > 0 ? (v * 100) / questions : 0);
    let lost = 0, gained = 0;
    cells.forEach((c, k) => {
      const i = Math.floor(k / n), j = k % n;
      const x = left + j * cw, y = top + i * ch;
      svg.appendChild(svgEl('rect', { x: x + 1, y: y + 1, width: cw - 2, height: ch - 2,
        class: 'grid', fill: 'none' }));
      if (c.count <= 0) return;
      if (c.points < 0) lost -= c.points; else gained += c.points;
      const side = Math.max(6, Math.sqrt(c.count / max) * (ch - 8));
      const cls = c.points < -0.05 * c.count ? 'lost' : c.points > 0.05 * c.count ? 'gained' : 'same';
      const g = svgEl('g', {});
      g.appendChild(svgEl('title', {}, OUTCOMES[i] + ' \u2192 ' + OUTCOMES[j] + ': ' +
        fmtCount(c.count) + (fmtCount(c.count) === '1' ? ' question, ' : ' questions, ') +
        (c.points >= 0 ? '+' : '') + pts(c.points).toFixed(1) +
        ' points'));
      g.appendChild(svgEl('rect', { x: x + 8, y: y + (ch - side) / 2, width: side, height: side,
        class: cls }));
      g.appendChild(svgEl('text', { x: x + 14 + side, y: y + ch / 2 + 4 }, fmtCount(c.count)));
      svg.appendChild(g);
    });
    // Two lines: at 1,319 questions one ran past the chart's right edge.
    svg.appendChild(svgEl('text', { x: left, y: h - 30 }, counted(questions, 'question') +
      ' in both; ' +
      pts(lost).toFixed(1) + ' points lost, ' + pts(gained).toFixed(1) + ' gained'));
    svg.appendChild(svgEl('text', { x: left, y: h - 12 },
      '(squares: count; colour: points lost, gained or unchanged by ' + D.scorers[+trS.value] +
      ')'));
    host.appendChild(svg);
    document.body.setAttribute('data-transitions', groupName(ga) + ' -> ' + groupName(gb));
  }

  // ---- state in the URL fragment ----
  function state() {
    const s = [
      ['a', D.servers[+selA.value]], ['b', D.servers[+selB.value]],
      ['f', +selF.value < 0 ? 'all' : D.framings[+selF.value]],
      ['mt', +selM.value < 0 ? 'all' : selM.value],
      ['show', selShow.value], ['sort', selSort.value],
      ['ta', groupName(groups[+trA.value])], ['tb', groupName(groups[+trB.value])],
      ['sc', D.scorers[+selS.value]], ['ts', D.scorers[+trS.value]],
    ];
    if (openQ !== null) s.push(['q', String(openQ)]);
    return s.map(([k, v]) => k + '=' + encodeURIComponent(v)).join('&');
  }
  function saveHash() {
    const s = state();
    history.replaceState(null, '', '#' + s);
    document.body.setAttribute('data-state', s);
  }
  function readHash() {
    const h = location.hash.slice(1);
    if (h.indexOf('=') < 0) return false;
    const setTo = (sel, value) => {
      if (Array.from(sel.options).some((o) => o.value === value)) sel.value = value;
    };
    for (const kv of h.split('&')) {
      const at = kv.indexOf('=');
      if (at < 0) continue;
      const k = kv.slice(0, at);
      let v;
      try { v = decodeURIComponent(kv.slice(at + 1)); } catch (e) { continue; }
      if (k === 'a' || k === 'b') setTo(k === 'a' ? selA : selB, String(D.servers.indexOf(v)));
      else if (k === 'f') setTo(selF, v === 'all' ? '-1' : String(D.framings.indexOf(v)));
      else if (k === 'mt') setTo(selM, v === 'all' ? '-1' : v);
      else if (k === 'show') setTo(selShow, v);
      else if (k === 'sort') setTo(selSort, v);
      else if (k === 'sc' || k === 'ts') setTo(k === 'sc' ? selS : trS, String(D.scorers.indexOf(v)));
      else if (k === 'ta' || k === 'tb') {
        setTo(k === 'ta' ? trA : trB, String(groups.findIndex((g) => groupName(g) === v)));
      } else if (k === 'q' && byQ.has(+v)) openQ = +v;
      else if (k === 'flips' && v) { // links written by earlier reports
        const [a, b] = v.split(',');
        setTo(selA, String(D.servers.indexOf(a)));
        setTo(selB, String(D.servers.indexOf(b)));
        selShow.value = 'flips';
      } else if (k === 'open' && byQ.has(+v)) openQ = +v;
    }
    return true;
  }
  const changed = () => { page = 0; renderList(); if (openQ !== null) open(openQ); else saveHash(); };
  [selA, selB, selF, selM, selS, selShow, selSort].forEach((s) => s.addEventListener('change', changed));
  [trA, trB, trS].forEach((s) => s.addEventListener('change', () => { renderTransitions(); saveHash(); }));
  $('prev').addEventListener('click', () => { page--; renderList(); });
  $('next').addEventListener('click', () => { page++; renderList(); });
  const linked = readHash();
  renderTransitions();
  renderList();
  if (openQ !== null) {
    open(openQ);
    $('detail').scrollIntoView();
  } else if (linked) {
    saveHash();
  } else {
    document.body.setAttribute('data-state', state());
  }
  document.body.setAttribute('data-ready', '1');
})();
