// The schemagate dashboard's page. No framework and no build step: it renders each snapshot the
// server pushes (server-sent events) into plain DOM. Everything that comes from the cluster is
// inserted as text (text nodes, textContent, attribute values), never parsed as HTML.
'use strict';
(function () {
  const taken = takeKey();
  const dashKey = taken.key;
  const readOnly = meta('schemagate-read-only') === 'true';
  const app = document.getElementById('app');
  const conn = document.getElementById('conn');
  let snap = null;
  let skew = 0; // server clock minus this browser's, from the snapshot's time
  let lastResult = null; // the last control's answer: {key, state, text}

  // takeKey takes the key from the printed URL's fragment (#key=KEY, optionally followed by a
  // route such as /ns/name) and drops it from the address bar at once; without one, the key this
  // origin's localStorage holds from an earlier load ('' when none). localStorage is per origin,
  // port included: unlike a cookie, no other server on 127.0.0.1 ever receives it. A key from the
  // fragment is stored only once the server has accepted it (connect), so that a link with a
  // wrong key cannot replace a good one.
  function takeKey() {
    const m = /^#key=([^/]*)(\/.*)?$/.exec(location.hash);
    if (m) {
      history.replaceState(null, '', location.pathname + '#' + (m[2] || '/'));
      return {key: m[1], fresh: true};
    }
    try {
      return {key: localStorage.getItem('schemagate-key') || '', fresh: false};
    } catch (e) {
      return {key: '', fresh: false}; // storage disabled
    }
  }

  function meta(name) {
    const m = document.querySelector('meta[name="' + name + '"]');
    return m ? m.getAttribute('content') : '';
  }

  // el builds an element: attrs are attributes (data-*, id, class, href...), kids are nodes or
  // strings (made text nodes).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
    }
    for (const k of kids.flat()) {
      if (k === undefined || k === null || k === false) continue;
      e.appendChild(typeof k === 'object' ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const svgNS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs) {
    const e = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  function now() { return Date.now() + skew; }
  function dur(ms) {
    let s = Math.ceil(Math.abs(ms) / 1000);
    if (s < 60) return s + 's';
    const m = Math.floor(s / 60); s %= 60;
    if (m < 60) return m + 'm' + String(s).padStart(2, '0') + 's';
    const h = Math.floor(m / 60);
    if (h < 48) return h + 'h' + String(m % 60).padStart(2, '0') + 'm';
    return Math.floor(h / 24) + 'd' + (h % 24) + 'h';
  }
  // countdown is a span the clock below keeps up to date: "in 3m02s" until at, then "passed … ago".
  function countdown(at, before, after) {
    return el('span', {class: 'countdown', 'data-at': at, 'data-before': before || 'in ', 'data-after': after || 'passed '}, clockText(at, before, after));
  }
  function since(at) { return el('span', {class: 'since', 'data-since': at}, sinceText(at)); }
  function clockText(at, before, after) {
    const d = Date.parse(at) - now();
    return d > 0 ? (before || 'in ') + dur(d) : (after || 'passed ') + dur(d) + ' ago';
  }
  function sinceText(at) { return dur(now() - Date.parse(at)) + ' ago'; }
  // Only the texts tick here, from this browser's clock: the data come from the server's pushes.
  setInterval(function () {
    for (const e of document.querySelectorAll('.countdown')) e.textContent = clockText(e.dataset.at, e.dataset.before, e.dataset.after);
    for (const e of document.querySelectorAll('.since')) e.textContent = sinceText(e.dataset.since);
  }, 1000);

  function hue(s) {
    let h = 0;
    for (let i = 0; i < (s || '').length; i++) h = (h * 31 + s.charCodeAt(i)) % 360;
    return h;
  }
  // A revision's colour: a hue from teal to purple, away from the red and green of the states.
  function revColor(rev) { return rev ? 'hsl(' + (170 + hue(rev) % 140) + ' 50% 68%)' : '#ccc'; }
  function fmtTime(t) { return t ? new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : ''; }
  function key(v) { return v.namespace + '/' + v.name; }
  function link(v) { return '#/' + encodeURIComponent(v.namespace) + '/' + encodeURIComponent(v.name); }
  function badge(state) { return el('span', {class: 'badge', 'data-state': state}, state); }
  function section(id, title, ...kids) { return el('section', {id: id}, el('h2', null, title), ...kids); }
  function dl(rows) {
    const d = el('dl');
    for (const [k, v, id] of rows) {
      if (v === undefined || v === null || v === '' || (Array.isArray(v) && !v.length)) continue;
      d.appendChild(el('dt', null, k));
      d.appendChild(el('dd', id ? {id: id} : null, v));
    }
    return d;
  }
  function table(head, rows, attrs) {
    return el('table', attrs, el('thead', null, el('tr', null, head.map(h => el('th', null, h)))), el('tbody', null, rows));
  }

  // ---- overview ----
  function shardStrip(v) {
    return el('div', {class: 'strip'}, (v.shards || []).map(s => {
      const rev = s.servingRevision || s.stepRevision || '';
      const e = el('span', {class: 'region' + (s.current ? ' current' : ''), 'data-shard': s.name, 'data-step': s.step || 'Unknown',
        'data-revision': rev, title: s.name + ': ' + (s.step || 'no step') + (rev ? ', serving ' + rev : '')},
      el('b', null, s.name), ' ', s.step || '—');
      e.style.backgroundColor = revColor(rev);
      return e;
    }));
  }
  function overview() {
    const rows = snap.services.map(m => {
      const v = m.view;
      const sc = v.schema || {};
      return el('tr', {class: 'svc', id: 'svc-' + key(v), 'data-state': v.state, 'data-name': v.name, 'data-namespace': v.namespace},
        el('td', null, el('a', {href: link(v)}, v.namespace + '/' + v.name)),
        el('td', null, badge(v.state), ' ', v.reason || ''),
        el('td', {class: 'schema'}, 'required ' + (sc.required || '—') + ', confirmed ' + (sc.confirmed || '—')),
        el('td', null, (v.progress || {}).summary || ''),
        el('td', null, shardStrip(v)));
    });
    return el('div', {id: 'overview'},
      rows.length ? table(['RoutingService', 'Status', 'Schema', 'Progress', 'Shards'], rows, {id: 'services'})
        : el('p', {id: 'empty', class: 'muted'}, 'No RoutingService in ' + (snap.namespace ? 'namespace ' + snap.namespace : 'any namespace') + '.'));
  }

  // ---- detail ----
  // controls are the buttons of the RoutingService shown. A snapshot redraws the page, but the
  // buttons are kept when they are the same (same object, actions, enabled, last result): a
  // button replaced between the press and the release of the mouse would lose the click.
  function controls(m) {
    const v = m.view, k = key(v);
    const result = lastResult && lastResult.key === k ? lastResult : null;
    const sig = JSON.stringify([k, (m.controls || []).map(c => [c.action, !!c.enabled]), result && [result.state, result.text]]);
    const old = document.getElementById('controls');
    if (old && old.dataset.sig === sig) return old;
    const box = el('div', {id: 'controls', 'data-sig': sig});
    for (const c of m.controls || []) {
      const b = el('button', {type: 'button', 'data-action': c.action, disabled: !c.enabled}, c.action);
      b.addEventListener('click', () => runControl(v.namespace, v.name, c.action));
      box.appendChild(b);
    }
    if (result) box.appendChild(el('pre', {id: 'control-result', 'data-state': result.state}, result.text));
    return box;
  }
  // oneLine keeps a text from the cluster on one line of a confirm(), in its own reading order:
  // control, format (bidirectional overrides, zero-width) and separator characters become \u escapes.
  function oneLine(s) {
    return String(s).replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, ch => '\\u' + ch.codePointAt(0).toString(16).padStart(4, '0'));
  }
  // runControl asks before it acts, with the control as the latest snapshot has it (its
  // warning, whether it is enabled), not as it was when the button was drawn.
  function runControl(namespace, name, action) {
    const m = snap.services.find(x => x.view.namespace === namespace && x.view.name === name);
    const c = m && (m.controls || []).find(x => x.action === action);
    if (!c || !c.enabled) return;
    const v = m.view;
    let text = c.action + ' routingservice ' + oneLine(key(v)) + '?';
    if (c.warning) text += '\n\nWarning: ' + oneLine(c.warning);
    if (!window.confirm(text)) return;
    fetch('/api/control', {
      method: 'POST', credentials: 'omit',
      headers: {'Content-Type': 'application/json', 'X-Schemagate-Key': dashKey},
      body: JSON.stringify({namespace: v.namespace, name: v.name, action: c.action}),
    }).then(r => r.json().then(j => ({ok: r.ok, j: j}))).then(({ok, j}) => {
      lastResult = {key: key(v), state: ok ? 'ok' : 'error', text: [j.warning ? 'warning: ' + j.warning : '', j.output || '', j.error || ''].filter(Boolean).join('\n')};
      render();
    }).catch(err => { lastResult = {key: key(v), state: 'error', text: String(err)}; render(); });
  }

  function schemaSection(v) {
    const s = v.schema || {};
    const l = s.lifecycle;
    const rows = [
      ['Required', s.required, 'schema-required'], ['Confirmed', s.confirmed ? s.confirmed + (s.confirmedBy ? ' by ' + s.confirmedBy : '') : '—', 'schema-confirmed'],
      ['Reported', s.reported ? s.reported + (s.reportedBy ? ' by ' + s.reportedBy : '') : ''], ['Evidence', s.evidence],
      ['Gate', s.gate || 'not reported for this generation', 'schema-gate'],
      ['Migration Job', s.migrationJob ? s.migrationJob + (s.attempt ? ' (attempt ' + s.attempt + ')' : '') : ''], ['Check Job', s.checkJob],
    ];
    if (l) {
      rows.push(['Lifecycle', l.phase ? [l.phase, l.phaseSince ? ' since ' : '', l.phaseSince ? since(l.phaseSince) : ''] : '', 'lifecycle-phase']);
      if (l.rollbackSafe) rows.push(['Rollback', (l.rollbackSafe === 'True' ? 'safe' : 'unsafe') + ' (' + l.rollbackSafeReason + ')' + (l.rollbackSafeMessage ? ': ' + l.rollbackSafeMessage : ''), 'rollback-safe']);
      if (l.databaseAhead) rows.push(['Database', l.databaseAhead]);
      const c = l.contract;
      if (c) {
        const parts = ['to schema ' + c.version + ': '];
        if (c.eligibleTime && !c.startTime && Date.parse(c.eligibleTime) > now()) parts.push('earliest ', countdown(c.eligibleTime), '; ');
        parts.push(c.text || '');
        if (c.ready) parts.push(' (ContractReady=' + c.ready + ')');
        rows.push(['Contract', parts, 'contract']);
      }
      if ((l.revisions || []).length) {
        rows.push(['Ranges', el('ul', null, l.revisions.map(r => el('li', {'data-revision': r.revision, class: r.excludesReported ? 'bad' : ''},
          r.revision + ': [' + (r.min || '…') + ', ' + (r.max || '…') + ']' + (r.assumed ? ' (assumed: no range declared)' : '') +
          ((r.shards || []).length ? ' serving ' + r.shards.join(', ') : ''))))]);
      }
    }
    const jobs = (v.jobs || []).map(j => el('tr', {'data-job': j.name, 'data-status': j.status},
      el('td', null, j.name), el('td', null, j.component), el('td', null, j.schemaVersion || ''), el('td', null, j.attempt || ''),
      el('td', null, badge(j.status)), el('td', null, j.message || j.reason || ''), el('td', null, j.duration || '')));
    return section('schema', 'Schema', dl(rows),
      jobs.length ? table(['Job', 'Component', 'Schema', 'Attempt', 'Status', 'Message', 'Took'], jobs, {id: 'jobs'}) : '');
  }

  function pods(list) {
    return el('span', {class: 'pods'}, (list || []).map(p => el('span', {class: 'pod' + (p.isReady ? ' ready' : ''), 'data-pod': p.name,
      'data-status': p.status, title: p.name + ': ' + p.status + ', ' + p.ready + ' ready, ' + p.restarts + ' restarts'})));
  }
  function shardsSection(v) {
    const rows = (v.shards || []).map(s => {
      const timer = s.timer ? (s.timer.remainingSeconds > 0 && /^(deadline|bake ends)/.test(s.timer.text)
        ? [s.timer.kind === 'bake' ? 'bake ends ' : 'deadline ', countdown(s.timer.at)] : s.timer.text) : '';
      let cluster = '';
      if (s.cluster) {
        const c = s.cluster;
        cluster = el('div', {class: 'cluster', 'data-cluster': c.name, 'data-state': c.state},
          'cluster ' + c.name + ': ', badge(c.state), c.lastContactTime ? [' last contact ', since(c.lastContactTime)] : '',
          c.message ? ' — ' + c.message : '');
      }
      const rss = (s.replicaSets || []).map(rs => {
        const tag = el('span', {class: 'rev', 'data-revision': rs.revision}, rs.revision);
        tag.style.backgroundColor = revColor(rs.revision);
        return el('div', {class: 'rs', 'data-rs': rs.name}, tag, ' ', (rs.tags || []).join(', '),
          ' ' + rs.ready + '/' + rs.desired + ' ready ', pods(rs.pods));
      });
      return el('tr', {'data-shard': s.name, 'data-step': s.step || 'Unknown', class: s.current ? 'current' : ''},
        el('td', null, el('b', null, s.name), cluster),
        el('td', null, badge(s.step || 'Unknown'), s.failure ? ' ' + s.failure.reason : ''),
        el('td', null, s.stepRevision || ''), el('td', null, s.servingRevision || ''),
        el('td', null, s.readyReplicas + '/' + s.replicas + ' ready', s.scaling ? el('div', {class: 'scaling', 'data-scaled-by': s.scaling.scaledBy || ''},
          'autoscaled by ' + (s.scaling.scaledBy || 'nobody yet') + ' (RoutingShard ' + s.scaling.routingShard + ')',
          s.scaling.held ? ' — ' + s.scaling.desiredReplicas + ' asked, held: ' + s.scaling.held : '') : ''),
        el('td', {class: 'timer'}, timer),
        el('td', null, rss, (s.pods || []).length ? el('div', null, 'other pods ', pods(s.pods)) : ''));
    });
    return section('shards', 'Shards', table(['Shard', 'Step', 'Step revision', 'Serving', 'Replicas', 'Timer', 'ReplicaSets and pods'], rows));
  }

  // plot draws a check's measurements (a point each; no number: a mark on the axis) and its
  // thresholds (a line each).
  function plot(c) {
    const W = 360, H = 120, P = 28;
    const pts = c.points || [];
    const ths = (c.thresholds || []).filter(t => t.value !== null);
    const vals = pts.filter(p => p.value !== null).map(p => p.value).concat(ths.map(t => t.value));
    let lo = vals.length ? Math.min(...vals) : 0, hi = vals.length ? Math.max(...vals) : 1;
    if (lo === hi) { lo -= 1; hi += 1; }
    const times = pts.map(p => Date.parse(p.time));
    const t0 = times.length ? Math.min(...times) : 0, t1 = times.length ? Math.max(...times) : 1;
    const x = t => P + (t1 === t0 ? (W - 2 * P) / 2 : (t - t0) / (t1 - t0) * (W - 2 * P));
    const y = v => H - P + 10 - (v - lo) / (hi - lo) * (H - 2 * P);
    const s = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, class: 'plot', role: 'img'});
    s.appendChild(svg('line', {x1: P, y1: H - P + 10, x2: W - P, y2: H - P + 10, class: 'axis'}));
    for (const t of ths) {
      s.appendChild(svg('line', {x1: P, x2: W - P, y1: y(t.value), y2: y(t.value), class: 'threshold ' + t.kind, 'data-threshold': t.kind}));
      const lab = svg('text', {x: W - P, y: y(t.value) - 3, 'text-anchor': 'end', class: 'label'});
      lab.textContent = t.kind + ': result ' + t.op + ' ' + t.value;
      s.appendChild(lab);
    }
    pts.forEach((p, i) => {
      const dot = p.value === null ? svg('rect', {x: x(times[i]) - 3, y: H - P + 7, width: 6, height: 6})
        : svg('circle', {cx: x(times[i]), cy: y(p.value), r: 4});
      dot.setAttribute('class', 'point ' + p.phase);
      dot.setAttribute('data-phase', p.phase);
      const tip = svg('title');
      tip.textContent = fmtTime(p.time) + ' ' + p.phase + (p.raw ? ' ' + p.raw : '') + (p.message ? ': ' + p.message : '');
      dot.appendChild(tip);
      s.appendChild(dot);
    });
    for (const [v, yy] of [[hi, y(hi)], [lo, y(lo)]]) {
      const t = svg('text', {x: 2, y: yy + 4, class: 'label'});
      t.textContent = String(+v.toPrecision(4));
      s.appendChild(t);
    }
    return s;
  }
  function checksSection(m) {
    const list = m.checks || [];
    return section('checks', 'Checks', list.length ? list.map(c => el('figure', {class: 'check', 'data-shard': c.shard, 'data-check': c.check, 'data-phase': c.phase},
      el('figcaption', null, c.shard + ' / ' + c.check + ' (' + c.when + ') ', badge(c.phase), ' ' + (c.points || []).length + ' measurements'),
      plot(c))) : el('p', {class: 'muted'}, 'No check has measured yet.'));
  }

  function timelineSection(m) {
    const rows = (m.timeline || []).slice().reverse().map(t => el('tr', {'data-kind': t.kind, 'data-level': t.level},
      el('td', null, fmtTime(t.time)), el('td', null, t.kind), el('td', null, t.object || ''), el('td', null, t.text)));
    return section('timeline', 'Timeline (newest first)', rows.length ? table(['Time', 'Kind', 'Object', 'What'], rows) : el('p', {class: 'muted'}, 'Nothing yet.'));
  }
  function conditionsSection(v) {
    const rows = (v.conditions || []).map(c => el('tr', {'data-condition': c.type, 'data-status': c.status, class: c.current ? '' : 'stale'},
      el('td', null, c.type), el('td', null, c.status), el('td', null, c.reason || ''), el('td', null, c.message || ''),
      el('td', null, fmtTime(c.lastTransitionTime)), el('td', null, c.current ? '' : 'generation ' + c.observedGeneration)));
    return section('conditions', 'Conditions', table(['Type', 'Status', 'Reason', 'Message', 'Since', ''], rows));
  }
  function eventsSection(m) {
    const rows = (m.events || []).slice().reverse().map(e => el('tr', {'data-type': e.type, 'data-reason': e.reason},
      el('td', null, fmtTime(e.time)), el('td', null, e.type), el('td', null, e.reason), el('td', null, e.message),
      el('td', null, e.count > 1 ? '×' + e.count : '')));
    return section('events', 'Events', rows.length ? table(['Time', 'Type', 'Reason', 'Message', ''], rows) : el('p', {class: 'muted'}, 'No Event.'));
  }
  function planSection(m) {
    const p = m.plan || {};
    return section('plan', 'Plan of the live spec', el('pre', {id: 'plan-text', 'data-rollout': !!p.rollout}, p.error || p.text || ''));
  }

  function detail(ns, name) {
    const m = snap.services.find(x => x.view.namespace === ns && x.view.name === name);
    if (!m) return el('div', {id: 'detail', 'data-missing': 'true'}, el('p', null, 'RoutingService ' + ns + '/' + name + ' is not (or no longer) in the snapshot. '), el('a', {href: '#/'}, 'All RoutingServices'));
    const v = m.view;
    return el('div', {id: 'detail', 'data-state': v.state, 'data-name': v.name, 'data-namespace': v.namespace},
      el('h1', null, v.namespace + '/' + v.name + ' ', badge(v.state)),
      el('p', {id: 'status-line'}, (v.condition ? v.condition + ' ' : '') + (v.reason || '') + (v.message ? ': ' + v.message : '')),
      dl([['Generation', v.generation + ' (observed ' + v.observedGeneration + ')' + (v.paused ? ', paused' : '')],
        ['Revisions', revisionsText(v.revisions || {})],
        ['Strategy', (v.strategy || {}).summary], ['Progress', (v.progress || {}).summary, 'progress'],
        ['Failure', v.failure ? v.failure.reason + (v.failure.shard ? ' in shard ' + v.failure.shard : '') + ': ' + v.failure.message : '', 'failure'],
        ['GitOps', (m.gitops || []).join('; '), 'gitops']]),
      readOnly ? '' : controls(m),
      shardStrip(v), schemaSection(v), shardsSection(v), checksSection(m), timelineSection(m), conditionsSection(v), eventsSection(m), planSection(m));
  }

  function render() {
    if (!snap) return;
    document.getElementById('scope').textContent = snap.namespace ? 'namespace ' + snap.namespace : 'all namespaces';
    let parts;
    try {
      parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
    } catch (e) {
      parts = []; // a malformed %-escape in the address: the overview
    }
    const view = parts.length === 2 ? detail(parts[0], parts[1]) : overview();
    const notes = (snap.notes || []).map(n => el('p', {class: 'note'}, n));
    app.replaceChildren(...notes, view);
    app.dataset.route = parts.length === 2 ? 'detail' : 'overview';
    app.dataset.seq = snap.seq;
  }

  function state(name, text) { conn.dataset.state = name; conn.textContent = text; }

  // connect reads the server-sent event stream with fetch, which can send the key in a header
  // (EventSource cannot). A refused stream (401: the key of another run, or none) is not retried;
  // one refused for too many tabs (503) is, after the server's Retry-After; a dropped one after
  // 2 s. The request is aborted before any retry, so a stream this page stopped reading never
  // keeps its place among the server's streams.
  async function connect() {
    if (!dashKey) {
      state('closed', 'no key: open the URL the dashboard printed');
      return;
    }
    if (leaving) return;
    const abort = new AbortController();
    stream = abort;
    let wait = 2000;
    try {
      const r = await fetch('/events', {headers: {'X-Schemagate-Key': dashKey}, cache: 'no-store', credentials: 'omit', signal: abort.signal});
      if (r.status === 401) {
        state('closed', 'disconnected: open the URL the dashboard printed');
        return;
      }
      if (r.status === 503) {
        wait = 1000 * Math.min(60, Math.max(1, Number(r.headers.get('Retry-After')) || 10));
        state('reconnecting', 'too many open dashboard tabs: trying again in ' + wait / 1000 + ' s');
      } else if (r.ok && r.body) {
        if (taken.fresh) {
          try { localStorage.setItem('schemagate-key', dashKey); } catch (e) { /* this load only */ }
          taken.fresh = false;
        }
        state('live', 'live');
        await read(r.body.getReader());
        state('reconnecting', 'reconnecting…');
      } else {
        state('reconnecting', 'reconnecting… (HTTP ' + r.status + ')');
      }
    } catch (e) {
      state('reconnecting', 'reconnecting…');
    } finally {
      abort.abort();
    }
    if (!leaving) retry = setTimeout(connect, wait);
  }

  // A page left for another (or kept in the back/forward cache) lets its stream go and retries
  // nothing; brought back from that cache, it connects again.
  let leaving = false, stream = null, retry = null;
  window.addEventListener('pagehide', () => {
    leaving = true;
    clearTimeout(retry);
    if (stream) stream.abort();
  });
  window.addEventListener('pageshow', e => {
    if (e.persisted) {
      leaving = false;
      connect();
    }
  });

  // read hands each complete frame of the stream to frame until the stream ends.
  async function read(reader) {
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += dec.decode(value, {stream: true});
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        frame(buf.slice(0, end));
        buf = buf.slice(end + 2);
      }
    }
  }

  // frame handles one server-sent event: "event: snapshot" and its "data:" lines.
  function frame(text) {
    let event = 'message';
    const data = [];
    for (const line of text.split('\n')) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    if (event !== 'snapshot' || data.length === 0) return;
    try {
      snap = JSON.parse(data.join('\n'));
      skew = Date.parse(snap.now) - Date.now();
      render();
      if (conn.dataset.state === 'error') state('live', 'live');
    } catch (e) {
      // One snapshot this page cannot show must not end the stream: the next one may render.
      conn.dataset.state = 'error';
      conn.textContent = 'a snapshot could not be shown: ' + e;
      console.error(e);
    }
  }
  window.addEventListener('hashchange', render);
  connect();
})();

// revisionsText says which revision is stable and which is the update, each with its images (where
// people look for a version), as the plugin's Revisions line does.
function revisionsText(r) {
  const one = (rev, images) => (rev || '—') + ((images || []).length ? ' (' + images.join(', ') + ')' : '');
  return 'stable ' + one(r.stable, r.stableImages) + ', update ' + one(r.update, r.updateImages);
}
