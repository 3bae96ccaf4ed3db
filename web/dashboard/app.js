// The dashboard page: asks for a token, then every 2 s reads /v1/nodes, /v1/jobs and
// /v1/queues (and each 30 s /v1/usage/series) and redraws what changed: the GPU map, the
// queue and the usage charts. All computation lives in model.js; this file only talks to
// the API and builds DOM. No external assets; the Content-Security-Policy allows 'self' only.
import * as M from './model.js';

const TOKEN_KEY = 'tessera.dashboard.token';
const REFRESH_MS = 2000;
const SERIES_REFRESH_MS = 30000;
const SERIES_WINDOW_MS = 3600 * 1000;
const SVG_NS = 'http://www.w3.org/2000/svg';

const $ = (id) => document.getElementById(id);

const state = {
  token: null,
  timer: null,
  generation: 0,        // bumped on sign-in/out so that a stale refresh stops
  colors: new Map(),
  tenantKey: '',
  samples: [],          // live samples, when the controller has no /v1/usage/series
  series: null,         // parsed /v1/usage/series
  seriesAvailable: null,
  seriesFetchedAt: 0,
  signatures: {},       // section -> JSON of what it was last drawn from
};

class AuthError extends Error {}

// ---------------------------------------------------------------- DOM helpers

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const c of children) {
    if (c !== null && c !== undefined && c !== false) {
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  for (const c of children) {
    if (c !== null && c !== undefined) {
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') node.setAttribute('class', v);
    else if (k === 'text') node.textContent = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
}

// Redraws a section only when its inputs changed, replacing its children in one step
// (no flicker, scroll position and open tooltips kept when nothing changed).
function redraw(name, container, inputs, build) {
  const sig = JSON.stringify(inputs);
  if (state.signatures[name] === sig) return;
  state.signatures[name] = sig;
  const frag = document.createDocumentFragment();
  build(frag);
  container.replaceChildren(frag);
}

// ---------------------------------------------------------------- API

async function api(path) {
  let res;
  try {
    res = await fetch(path, {
      headers: { Authorization: `Bearer ${state.token}`, Accept: 'application/json' },
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch (e) {
    throw new Error(`cannot reach the controller (${path}): ${e.message}`);
  }
  let body = null;
  const text = await res.text();
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  const message = body && body.error && body.error.message ? body.error.message : text.slice(0, 200);
  if (res.status === 401) {
    throw new AuthError(`The token was refused: ${message || 'unauthorized'}.`);
  }
  if (!res.ok) {
    const err = new Error(`${path}: HTTP ${res.status}${message ? `: ${message}` : ''}`);
    err.status = res.status;
    throw err;
  }
  if (body === null) throw new Error(`${path}: the answer is not JSON`);
  return body;
}

// ---------------------------------------------------------------- sign in and out

function showLogin(message) {
  stopRefresh();
  state.token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  for (const id of ['dashboard', 'sign-out', 'totals', 'refresh']) $(id).hidden = true;
  $('login').hidden = false;
  $('login-message').textContent = message || '';
  $('login-message').classList.toggle('error', Boolean(message));
  hideBanner();
  $('token-input').focus();
}

function signIn(token) {
  state.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  state.signatures = {};
  state.samples = [];
  state.series = null;
  state.seriesAvailable = null;
  state.seriesFetchedAt = 0;
  $('login').hidden = true;
  for (const id of ['dashboard', 'sign-out', 'totals', 'refresh']) $(id).hidden = false;
  startRefresh();
}

function stopRefresh() {
  state.generation++;
  if (state.timer !== null) clearTimeout(state.timer);
  state.timer = null;
}

function startRefresh() {
  stopRefresh();
  const gen = state.generation;
  const loop = async () => {
    await refresh(gen);
    if (gen === state.generation) state.timer = setTimeout(loop, REFRESH_MS);
  };
  loop();
}

// ---------------------------------------------------------------- refresh

function showBanner(messages) {
  const b = $('banner');
  b.replaceChildren(...messages.map((m) => el('p', {}, m)));
  b.hidden = false;
}

function hideBanner() {
  const b = $('banner');
  b.hidden = true;
  b.replaceChildren();
}

async function refresh(gen) {
  const now = Date.now();
  const errors = [];
  let nodes = null;
  let jobs = null;
  let queues = null;
  try {
    const results = await Promise.allSettled([
      api('/v1/nodes'), api('/v1/jobs?state=pending,running&limit=1000'), api('/v1/queues')]);
    if (gen !== state.generation) return;
    const auth = results.find((r) => r.status === 'rejected' && r.reason instanceof AuthError);
    if (auth) {
      showLogin(auth.reason.message);
      return;
    }
    for (const r of results) if (r.status === 'rejected') errors.push(r.reason.message);
    [nodes, jobs, queues] = results.map((r) => (r.status === 'fulfilled' ? r.value : null));
    nodes = nodes && Array.isArray(nodes.nodes) ? nodes.nodes : null;
    jobs = jobs && Array.isArray(jobs.jobs) ? jobs.jobs : null;
    queues = queues && Array.isArray(queues.queues) ? queues.queues : null;

    // Without the endpoint (an older controller), ask again only once a minute.
    const seriesEvery = state.seriesAvailable === false ? 60000 : SERIES_REFRESH_MS;
    if (now - state.seriesFetchedAt >= seriesEvery) {
      await fetchSeries(now, errors);
      if (gen !== state.generation) return;
    }
    if (nodes) state.samples = M.addSample(state.samples, now, M.liveTenantGpus(nodes), SERIES_WINDOW_MS);

    const seriesKeys = state.series ? [...state.series.byTenant.keys()].map((k) => ({ key: k })) : [];
    const tenants = M.tenantsOf({ nodes, queues, jobs, series: { series: seriesKeys } });
    const key = tenants.join('\n');
    if (key !== state.tenantKey) {
      state.tenantKey = key;
      state.colors = M.assignTenantColors(tenants);
    }

    if (nodes) {
      nodes = M.enrichHolders(nodes, jobs);
      renderTotals(nodes, jobs);
      renderLegend(tenants);
      renderGpuMap(nodes);
    }
    if (jobs) renderJobs(jobs, now);
    if (queues) renderQuotas(queues);
    renderUsage(tenants, queues, now);
    $('updated').textContent = M.formatClock(now);
    $('updated').setAttribute('datetime', new Date(now).toISOString());
  } catch (e) {
    if (e instanceof AuthError) {
      showLogin(e.message);
      return;
    }
    errors.push(`the dashboard failed to draw: ${e.message}`);
  }
  if (gen !== state.generation) return;
  if (errors.length) showBanner(errors);
  else hideBanner();
}

async function fetchSeries(now, errors) {
  const since = M.formatRfc3339(now - SERIES_WINDOW_MS);
  const until = M.formatRfc3339(now);
  state.seriesFetchedAt = now;
  try {
    const resp = await api(`/v1/usage/series?since=${encodeURIComponent(since)}&until=${encodeURIComponent(until)}&step=1m&by=tenant`);
    state.series = M.parseUsageSeries(resp);
    state.seriesAvailable = state.series !== null;
  } catch (e) {
    if (e instanceof AuthError) throw e;
    if (e.status === 404) {
      // An older controller: draw from what this page samples instead.
      state.seriesAvailable = false;
      state.series = null;
    } else {
      errors.push(e.message);
    }
  }
}

// ---------------------------------------------------------------- header

function renderTotals(nodes, jobs) {
  const t = M.clusterTotals(nodes);
  $('total-nodes').textContent = String(t.nodes);
  $('total-gpus').textContent = String(t.gpus);
  $('total-in-use').textContent = String(t.inUse);
  $('total-used').textContent = M.formatGpus(t.usedMilli);
  $('total-drained').textContent = String(t.drained);
  $('total-drained').classList.toggle('bad', t.drained > 0);
  $('total-pending').textContent = jobs ? String(jobs.filter((j) => j.state === 'pending').length) : '–';
}

function renderLegend(tenants) {
  redraw('legend', $('legend'), [tenants, [...state.colors]], (frag) => {
    for (const t of tenants) {
      frag.append(el('li', { 'data-legend-tenant': t },
        swatch(M.tenantColor(t, state.colors)), t));
    }
    frag.append(el('li', {}, el('span', { class: 'swatch free', 'aria-hidden': 'true' }), 'free'));
    frag.append(el('li', {}, el('span', { class: 'swatch drained', 'aria-hidden': 'true' }), 'drained, lost or down'));
  });
}

function swatch(color) {
  const s = el('span', { class: 'swatch', 'aria-hidden': 'true' });
  s.style.background = color;
  return s;
}

// ---------------------------------------------------------------- GPU map

function renderGpuMap(nodes) {
  redraw('gpus', $('gpu-map'), [nodes, [...state.colors]], (frag) => {
    if (nodes.length === 0) {
      frag.append(el('p', { class: 'empty' }, 'No node has registered yet.'));
      return;
    }
    for (const node of nodes) frag.append(nodeCard(node));
  });
}

function nodeCard(node) {
  const up = node.state === 'up';
  const gpus = node.gpus || [];
  const head = el('header', { class: 'node-head' },
    el('h3', {}, node.name),
    el('span', { class: `badge ${up ? 'ok' : 'bad'}` }, node.state || '?'),
    node.drain ? el('span', { class: 'badge warn', title: node.drain.reason || '' }, 'draining') : null,
    el('span', { class: 'node-facts' },
      `${gpus.length} GPU${gpus.length === 1 ? '' : 's'}`,
      Number.isFinite(node.cpu_milli) ? ` · CPU ${M.formatDecimal((node.cpu_used_milli || 0) / 1000, 1)}/${M.formatDecimal(node.cpu_milli / 1000, 1)}` : '',
      Number.isFinite(node.memory_mib) ? ` · memory ${M.formatMib(node.memory_used_mib || 0)}/${M.formatMib(node.memory_mib)}` : '',
      node.address ? ` · ${node.address}` : ''),
    M.nodeLabelsText(node) ? el('span', { class: 'node-labels', 'data-node-labels': node.name }, M.nodeLabelsText(node)) : null);
  const card = el('article', { class: `node${up ? '' : ' down'}`, 'data-node-card': node.name }, head);
  if (!up && node.reason) card.append(el('p', { class: 'node-reason' }, node.reason));
  if (node.drain && node.drain.reason) {
    card.append(el('p', { class: 'node-reason' }, `drained: ${node.drain.reason}${node.drain.by ? ` (by ${node.drain.by})` : ''}`));
  }
  const grid = el('div', { class: 'gpus' });
  for (const gpu of gpus) grid.append(gpuBox(node, gpu));
  card.append(grid);
  return card;
}

function gpuBox(node, gpu) {
  const status = M.gpuStatus(gpu, node);
  const mode = gpu.mode || 'exclusive';
  const box = el('div', {
    class: `gpu ${status.state}`,
    'data-node': node.name,
    'data-gpu': gpu.index,
    'data-uuid': gpu.uuid || '',
    'data-mode': mode,
    'data-state': status.state,
    role: 'group',
    'aria-label': `${node.name} GPU ${gpu.index}, ${gpu.model || ''} ${mode}${status.state !== 'ok' ? `, ${status.state}: ${status.reason}` : ''}`,
  });
  box.append(el('div', { class: 'gpu-head' },
    el('span', { class: 'gpu-index' }, `GPU ${gpu.index}`),
    el('span', { class: 'gpu-model', title: gpu.uuid || '' }, gpu.model || '')));
  const bar = el('div', { class: 'slices' });
  for (const seg of M.layoutGpu(gpu)) {
    const s = el('div', {});
    s.style.left = `${(seg.start * 100).toFixed(3)}%`;
    s.style.width = `${(seg.width * 100).toFixed(3)}%`;
    if (seg.holder) {
      const h = seg.holder;
      const color = M.tenantColor(h.tenant, state.colors);
      setAttrs(s, {
        class: 'slice',
        'data-job': h.job,
        'data-tenant': h.tenant || '',
        'data-gpu-node': node.name,
        'data-gpu-index': gpu.index,
        title: M.sliceTooltip(h, gpu),
      });
      s.style.background = color;
      s.style.color = M.textColorOn(color);
      const [first, second] = M.sliceLabelLines(h, mode);
      s.append(el('span', { class: 'slice-label' }, first));
      if (second) s.append(el('span', { class: 'slice-label minor' }, second));
    } else {
      setAttrs(s, { class: 'slice-free', title: 'free' });
    }
    bar.append(s);
  }
  box.append(bar);
  const foot = [];
  if (status.state !== 'ok') {
    const text = `${status.state}: ${status.reason}`;
    foot.push(el('span', { class: 'gpu-reason', title: text }, text));
  }
  const used = Number.isFinite(gpu.used_milli) && mode !== 'exclusive' ? ` · ${M.formatGpus(gpu.used_milli)} in use` : '';
  foot.push(el('span', { class: `mode mode-${mode}` }, `${M.modeLabel(gpu)}${used}`));
  const tel = M.telemetryText(gpu);
  if (tel) foot.push(el('span', { class: 'telemetry', title: tel }, tel));
  box.append(el('div', { class: 'gpu-foot' }, ...foot));
  return box;
}

// ---------------------------------------------------------------- queue

function renderJobs(jobs, now) {
  const rows = M.jobRows(jobs);
  // Ages change every refresh; redraw on a 10 s grain to keep the table calm.
  redraw('jobs', $('jobs-body'), [rows, [...state.colors], Math.floor(now / 10000)], (frag) => {
    if (rows.length === 0) {
      frag.append(el('tr', {}, el('td', { colspan: 10, class: 'empty' }, 'No job is pending or running.')));
      return;
    }
    for (const r of rows) {
      const since = Date.parse(r.state === 'running' ? r.started : r.submitted);
      const tenantCell = el('td', {}, swatch(M.tenantColor(r.tenant, state.colors)), r.tenant);
      frag.append(el('tr', { class: `job ${r.state}`, 'data-queue-job': r.id, 'data-state': r.state },
        el('td', { class: 'num' }, r.id),
        el('td', {}, r.name),
        tenantCell,
        el('td', {}, r.queue),
        el('td', {}, el('span', {
          class: `badge ${r.idle === 'hung' ? 'bad' : r.idle ? 'warn' : r.state === 'running' ? 'ok' : 'wait'}`,
          title: r.idle ? `GPU utilisation below its queue's idle threshold${r.idle === 'hung' ? ', and no output' : ''}` : '',
        }, r.idle ? `${r.state} (${r.idle})` : r.state)),
        el('td', { class: 'num' }, r.mig ? `${M.formatGpus(r.gpuMilli)} (${r.mig})` : M.formatGpus(r.gpuMilli)),
        el('td', {}, Number.isFinite(since) ? M.formatDuration(now - since) : ''),
        el('td', {}, r.nodes.join(', ')),
        el('td', { title: r.eta || r.etaNote }, r.state === 'pending' ? M.etaText(r, now) : ''),
        el('td', { class: 'reason' }, M.jobReasonText(r))));
    }
  });
}

// ---------------------------------------------------------------- usage

function renderQuotas(queues) {
  const rows = M.queueRows(queues);
  redraw('quotas', $('quota-body'), [rows], (frag) => {
    for (const q of rows) {
      const resources = q.resources.length ? q.resources : [null];
      resources.forEach((r, i) => {
        const tr = el('tr', { class: q.kind, 'data-quota-queue': q.name });
        if (i === 0) {
          const span = resources.length;
          tr.append(el('th', { scope: 'row', rowspan: span }, q.name),
            el('td', { rowspan: span }, q.kind),
            el('td', { rowspan: span }, q.tenant),
            el('td', { rowspan: span }, q.parent));
        }
        if (r) {
          tr.append(el('td', {}, r.resource),
            el('td', { class: 'num' }, M.formatResource(r.resource, r.nominal)),
            el('td', { class: 'num' }, M.formatResource(r.resource, r.used)),
            el('td', { class: `num${r.borrowing > 0 ? ' borrowing' : ''}` }, r.borrowing > 0 ? M.formatResource(r.resource, r.borrowing) : '–'),
            el('td', { class: 'num' }, M.formatResource(r.resource, r.borrowingLimit)),
            el('td', { class: 'num' }, M.formatResource(r.resource, r.lendingLimit)));
        } else {
          tr.append(el('td', { colspan: 6 }, 'no quota'));
        }
        if (i === 0) {
          tr.append(el('td', { class: 'num', rowspan: resources.length }, q.pending),
            el('td', { class: 'num', rowspan: resources.length }, q.running));
        }
        frag.append(tr);
      });
    }
  });
}

function renderUsage(tenants, queues, now) {
  const quotas = queues ? M.tenantQuotaGpus(queues) : new Map();
  const fromApi = state.series !== null;
  $('usage-note').textContent = fromApi
    ? 'GPUs in use per tenant over the last hour (1-minute averages); the dashed line is the tenant\'s guaranteed quota.'
    : 'GPUs in use per tenant, sampled by this page since it was opened (this controller has no usage history endpoint); the dashed line is the tenant\'s guaranteed quota.';
  // The history holds what this token may see (a tenant: itself only); live samples hold all.
  const charted = fromApi ? tenants.filter((t) => state.series.byTenant.has(t)) : tenants;
  const charts = charted.map((tenant) => {
    let times;
    let values;
    let quota = quotas.has(tenant) ? quotas.get(tenant) : null;
    let since;
    let until;
    if (fromApi) {
      const s = state.series.byTenant.get(tenant);
      times = state.series.times;
      values = s ? s.gpus : times.map(() => 0);
      if (s && s.quota !== null) quota = s.quota;
      since = state.series.since;
      until = state.series.until;
    } else {
      ({ times, values } = M.sampleSeries(state.samples, tenant));
      until = now;
      since = now - SERIES_WINDOW_MS;
    }
    const latest = state.samples[state.samples.length - 1];
    const last = latest ? latest.perTenant.get(tenant) || 0 : 0;
    return { tenant, geometry: M.chartGeometry({ times, values, quota, since, until }), quota, last };
  });
  redraw('usage', $('usage-charts'), [charts, [...state.colors]], (frag) => {
    if (charts.length === 0) {
      frag.append(el('p', { class: 'empty' }, 'No tenant yet.'));
      return;
    }
    for (const c of charts) frag.append(usageChart(c));
  });
}

function usageChart({ tenant, geometry: g, quota, last }) {
  const color = M.tenantColor(tenant, state.colors);
  const chart = svg('svg', {
    viewBox: `0 0 ${g.width} ${g.height}`, class: 'chart', role: 'img',
    'aria-label': `${tenant}: GPUs in use over the last hour${quota !== null ? `, quota ${M.formatDecimal(quota)}` : ''}`,
  });
  const left = g.pad.left;
  const right = g.width - g.pad.right;
  const bottom = g.height - g.pad.bottom;
  for (const t of g.yTicks) {
    chart.append(svg('line', { x1: left, x2: right, y1: t.y, y2: t.y, class: 'grid' }));
    chart.append(svg('text', { x: left - 4, y: t.y + 3, class: 'tick', 'text-anchor': 'end' }, t.label));
  }
  for (const t of g.xTicks) {
    chart.append(svg('text', { x: t.x, y: bottom + 14, class: 'tick',
      'text-anchor': t.label === 'now' ? 'end' : (t.x <= left + 1 ? 'start' : 'middle') }, t.label));
  }
  if (g.area) chart.append(svg('path', { d: g.area, fill: color, 'fill-opacity': '0.25', stroke: 'none' }));
  if (g.line) chart.append(svg('path', { d: g.line, fill: 'none', stroke: color, 'stroke-width': '2' }));
  if (g.quotaY !== null) {
    chart.append(svg('line', { x1: left, x2: right, y1: g.quotaY, y2: g.quotaY, class: 'quota' }));
    chart.append(svg('text', { x: right - 2, y: g.quotaY - 3, class: 'tick quota-label', 'text-anchor': 'end' },
      `quota ${M.formatDecimal(quota)}`));
  }
  chart.append(svg('line', { x1: left, x2: right, y1: bottom, y2: bottom, class: 'axis' }));
  return el('figure', { class: 'usage', 'data-tenant-chart': tenant },
    el('figcaption', {}, swatch(color), el('strong', {}, tenant),
      ` ${M.formatDecimal(last, 2)} GPU${last === 1 ? '' : 's'} in use now`,
      quota !== null ? `, quota ${M.formatDecimal(quota)}` : ', no quota'),
    chart);
}

// ---------------------------------------------------------------- start

function start() {
  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = $('token-input').value.trim();
    $('token-input').value = '';
    if (token) signIn(token);
  });
  $('sign-out').addEventListener('click', () => showLogin('Signed out.'));

  const { token: fromHash, rest } = M.parseTokenFragment(window.location.hash);
  if (fromHash) {
    sessionStorage.setItem(TOKEN_KEY, fromHash);
    // Keep the token out of the address bar, the history and any bookmark.
    history.replaceState(null, '', window.location.pathname + window.location.search + rest);
  }
  const token = fromHash || sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token);
  else showLogin('');
}

start();
