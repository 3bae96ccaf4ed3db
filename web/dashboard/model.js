// Pure functions of the dashboard: tenant colours, the slice layout of a GPU, chart
// geometry, totals and formatting. No DOM, no fetch, no clock: app.js passes the time in,
// and the unit tests (model.test.js, `node --test`) call these directly.
//
// Every function accepts the API's JSON defensively: a field that the controller does not
// send (yet) is treated as null or empty.

// Colours for tenants, distinguishable from each other and from the grey of free space.
export const PALETTE = Object.freeze([
  '#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#b07aa1',
  '#edc948', '#2f4b7c', '#ff9da7', '#9c755f', '#6b6ecf', '#d45087',
]);

// FNV-1a over the UTF-16 code units: a stable 32-bit hash of a name.
export function hashString(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

function hslToHex(h, s, l) {
  const a = s * Math.min(l, 1 - l);
  const f = (n) => {
    const k = (n + h / 30) % 12;
    const c = l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(255 * c).toString(16).padStart(2, '0');
  };
  return `#${f(0)}${f(8)}${f(4)}`;
}

// Assigns a colour to each tenant: the tenants, in name order, each take the palette
// entry their name hashes to, or the next one still free. A tenant's colour therefore
// depends only on its name and on the names that sort before it and collide with it,
// not on the order the API lists them in. Past the palette, a hashed hue.
export function assignTenantColors(tenants) {
  const names = [...new Set((tenants || []).filter((t) => typeof t === 'string' && t !== ''))].sort();
  const taken = new Array(PALETTE.length).fill(false);
  const colors = new Map();
  for (const name of names) {
    const h = hashString(name);
    let color = null;
    for (let probe = 0; probe < PALETTE.length; probe++) {
      const slot = (h + probe) % PALETTE.length;
      if (!taken[slot]) {
        taken[slot] = true;
        color = PALETTE[slot];
        break;
      }
    }
    colors.set(name, color ?? hslToHex(h % 360, 0.55, 0.45));
  }
  return colors;
}

// The colour of one tenant given the assignment (a tenant missing from it gets a hashed hue).
export function tenantColor(tenant, colors) {
  const name = tenant || '';
  if (colors && colors.has(name)) {
    return colors.get(name);
  }
  return hslToHex(hashString(name) % 360, 0.55, 0.45);
}

// Black or white, whichever reads better on `hex` (WCAG relative luminance).
export function textColorOn(hex) {
  const m = /^#?([0-9a-f]{6})$/i.exec(hex || '');
  if (!m) {
    return '#000000';
  }
  const v = parseInt(m[1], 16);
  const channel = (c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  const lum = 0.2126 * channel((v >> 16) & 255) + 0.7152 * channel((v >> 8) & 255) +
              0.0722 * channel(v & 255);
  // Contrast against white is (1.05)/(lum+0.05), against black (lum+0.05)/0.05.
  return 1.05 / (lum + 0.05) >= (lum + 0.05) / 0.05 ? '#ffffff' : '#000000';
}

// "3g.40gb" -> {compute: 3, memoryGb: 40, mediaExtensions: false}; null when unparseable.
export function parseMigProfile(profile) {
  const m = /^(\d+)g\.(\d+)gb(\+me)?$/i.exec(profile || '');
  if (!m) {
    return null;
  }
  return { compute: Number(m[1]), memoryGb: Number(m[2]), mediaExtensions: Boolean(m[3]) };
}

// The card's memory in GiB: gpu.memory_mib, else the model name's "-80GB", else null.
export function gpuMemoryGib(gpu) {
  if (gpu && Number.isFinite(gpu.memory_mib) && gpu.memory_mib > 0) {
    return gpu.memory_mib / 1024;
  }
  const m = /-(\d+)GB$/i.exec((gpu && gpu.model) || '');
  return m ? Number(m[1]) : null;
}

export const MIG_COMPUTE_SLICES = 7;
export const MIG_MEMORY_SLOTS = 8;

// Memory slots (of 8) that a profile's instance takes: 7g all 8, 3g and 4g 4, 2g 2, 1g
// one or two depending on its memory against the card's (1g.10gb vs 1g.20gb on 80 GB).
export function migMemorySlots(profile, cardGib) {
  const p = parseMigProfile(profile);
  if (!p) {
    return null;
  }
  if (p.compute >= 7) return 8;
  if (p.compute >= 3) return 4;
  if (p.compute === 2) return 2;
  if (cardGib && p.memoryGb * MIG_MEMORY_SLOTS / cardGib >= 1.5) return 2;
  return 1;
}

function byJob(a, b) {
  return (Number(a.job) || 0) - (Number(b.job) || 0) ||
         String(a.mig_start ?? '').localeCompare(String(b.mig_start ?? ''));
}

function fillGaps(used) {
  // `used`: segments with start/width in [0, 1], sorted by start, not overlapping.
  const out = [];
  let at = 0;
  const eps = 1e-9;
  for (const seg of used) {
    if (seg.start > at + eps) {
      out.push({ start: at, width: seg.start - at, holder: null });
    }
    out.push(seg);
    at = seg.start + seg.width;
  }
  if (at < 1 - eps) {
    out.push({ start: at, width: 1 - at, holder: null });
  }
  return out;
}

// The slices of one GPU as horizontal segments of its box: [{start, width, holder}], start
// and width fractions of the box, holder null for free space; they tile [0, 1] in order.
//  - exclusive: the holder takes the whole box (several holders, which the ledger never
//    gives, split it evenly);
//  - shared: each holder's milli / 1000, in job order; scaled down if they add past 1;
//  - mig: each instance at its memory slots (mig_start / 8, width slots / 8) when every
//    instance has a start and they do not overlap; else in job order by compute slices / 7.
export function layoutGpu(gpu) {
  const holders = [...((gpu && gpu.holders) || [])].filter((h) => h && typeof h === 'object');
  holders.sort(byJob);
  const mode = (gpu && gpu.mode) || 'exclusive';
  if (holders.length === 0) {
    return [{ start: 0, width: 1, holder: null }];
  }
  if (mode === 'mig') {
    const card = gpuMemoryGib(gpu);
    const placed = holders.map((h) => {
      const slots = migMemorySlots(h.mig_profile, card);
      const start = Number.isInteger(h.mig_start) ? h.mig_start : null;
      return { h, slots, start };
    });
    const positional = placed.every((p) => p.slots !== null && p.start !== null &&
                                           p.start >= 0 && p.start + p.slots <= MIG_MEMORY_SLOTS);
    if (positional) {
      const sorted = [...placed].sort((a, b) => a.start - b.start);
      let overlap = false;
      for (let i = 1; i < sorted.length; i++) {
        if (sorted[i].start < sorted[i - 1].start + sorted[i - 1].slots) {
          overlap = true;
        }
      }
      if (!overlap) {
        return fillGaps(sorted.map((p) => ({
          start: p.start / MIG_MEMORY_SLOTS, width: p.slots / MIG_MEMORY_SLOTS, holder: p.h })));
      }
    }
    const widths = holders.map((h) => {
      const p = parseMigProfile(h.mig_profile);
      if (p) return p.compute / MIG_COMPUTE_SLICES;
      return Math.max(0, Number(h.milli) || 0) / 1000;
    });
    return packSequential(holders, widths);
  }
  if (mode === 'shared') {
    return packSequential(holders, holders.map((h) => Math.max(0, Number(h.milli) || 0) / 1000));
  }
  return holders.map((h, i) => ({ start: i / holders.length, width: 1 / holders.length, holder: h }));
}

function packSequential(holders, widths) {
  const total = widths.reduce((a, b) => a + b, 0);
  const scale = total > 1 ? 1 / total : 1;
  const used = [];
  let at = 0;
  holders.forEach((h, i) => {
    const w = widths[i] * scale;
    used.push({ start: at, width: w, holder: h });
    at += w;
  });
  return fillGaps(used);
}

// What state a GPU is in for drawing: {state: 'ok'|'drained'|'lost'|'down', reason}.
export function gpuStatus(gpu, node) {
  const g = gpu || {};
  const n = node || {};
  if (n.state && n.state !== 'up') {
    return { state: 'down', reason: n.reason || `node ${n.name || ''} is ${n.state}`.trim() };
  }
  const tel = g.telemetry || null;
  if (g.health === 'lost' || (tel && tel.lost === true)) {
    return { state: 'lost', reason: (g.drain && g.drain.reason) || 'GPU lost' };
  }
  if (g.drain && typeof g.drain === 'object') {
    return { state: 'drained', reason: drainText(g.drain) };
  }
  if (g.health === 'drained') {
    return { state: 'drained', reason: 'drained' };
  }
  if (n.drain && typeof n.drain === 'object') {
    return { state: 'drained', reason: `node: ${drainText(n.drain)}` };
  }
  return { state: 'ok', reason: '' };
}

function drainText(drain) {
  const reason = drain.reason || 'drained';
  return drain.by ? `${reason} (by ${drain.by})` : reason;
}

// A node's labels as "block=b1 · rack=r1" (sorted by key); '' when it has none.
export function nodeLabelsText(node) {
  const labels = node && node.labels && typeof node.labels === 'object' ? node.labels : {};
  return Object.keys(labels).sort().map((k) => `${k}=${labels[k]}`).join(' · ');
}

// Cluster totals for the header: GPUs, GPUs with at least one slice held, GPU-equivalents
// in use (sum of used milli), and GPUs that cannot take work (drained, lost, node down).
export function clusterTotals(nodes) {
  const out = { nodes: 0, gpus: 0, inUse: 0, usedMilli: 0, drained: 0 };
  for (const node of nodes || []) {
    out.nodes++;
    for (const gpu of node.gpus || []) {
      out.gpus++;
      const holders = gpu.holders || [];
      if (holders.length > 0) out.inUse++;
      out.usedMilli += Number.isFinite(gpu.used_milli)
        ? gpu.used_milli
        : holders.reduce((a, h) => a + (Number(h.milli) || 0), 0);
      if (gpuStatus(gpu, node).state !== 'ok') out.drained++;
    }
  }
  return out;
}

// Every tenant named anywhere in the data, for the colours and the legend.
export function tenantsOf({ nodes, queues, jobs, series } = {}) {
  const out = new Set();
  for (const q of queues || []) if (q && q.tenant) out.add(q.tenant);
  for (const n of nodes || []) {
    for (const g of n.gpus || []) for (const h of g.holders || []) if (h.tenant) out.add(h.tenant);
  }
  for (const j of jobs || []) if (j && j.tenant) out.add(j.tenant);
  for (const s of (series && series.series) || []) if (s && s.key) out.add(s.key);
  return [...out].sort();
}

// GPUs in use per tenant right now (fractions for shares and MIG slices), from /v1/nodes.
export function liveTenantGpus(nodes) {
  const out = new Map();
  for (const n of nodes || []) {
    for (const g of n.gpus || []) {
      for (const h of g.holders || []) {
        const t = h.tenant || '';
        out.set(t, (out.get(t) || 0) + (Number(h.milli) || 0) / 1000);
      }
    }
  }
  return out;
}

// A tenant's nominal GPU quota summed over its queues (null when it has none), from /v1/queues.
export function tenantQuotaGpus(queues) {
  const out = new Map();
  for (const q of queues || []) {
    if (!q || q.kind === 'cohort' || !q.tenant) continue;
    for (const r of q.resources || []) {
      if (r.resource === 'gpu' && Number.isFinite(r.nominal)) {
        out.set(q.tenant, (out.get(q.tenant) || 0) + r.nominal / 1000);
      }
    }
  }
  return out;
}

// Quota table rows: one per queue and cohort, with each resource's nominal, used, and what
// is borrowed beyond the nominal quota.
export function queueRows(queues) {
  return (queues || []).filter((q) => q && q.name).map((q) => ({
    name: q.name,
    kind: q.kind || 'queue',
    parent: q.parent || '',
    tenant: q.tenant || '',
    weight: q.weight ?? null,
    pending: q.pending ?? 0,
    running: q.running ?? 0,
    resources: (q.resources || []).map((r) => ({
      resource: r.resource,
      nominal: r.nominal ?? 0,
      used: r.used ?? 0,
      // A cohort has no quota of its own: it lends its members', it does not borrow.
      borrowing: q.kind === 'cohort' ? 0 : Math.max(0, (r.used ?? 0) - (r.nominal ?? 0)),
      borrowingLimit: r.borrowing_limit ?? null,
      lendingLimit: r.lending_limit ?? null,
    })),
  }));
}

function lastEnd(j) {
  const h = Array.isArray(j.attempt_history) ? j.attempt_history : [];
  const a = h.length ? h[h.length - 1] : null;
  if (!a || !['gpu-fault', 'failed', 'node lost'].includes(a.ended)) return '';
  return a.detail ? `${a.ended}: ${a.detail}` : a.ended;
}

// The reason column: a pending job's reason; a running one's last fault or failure.
export function jobReasonText(r) {
  if (r.state === 'pending') return r.reason;
  return r.lastEnd ? `attempt ${r.attempts}, after ${r.lastEnd}` : '';
}

// The queue view: pending jobs first (oldest first), then running ones.
export function jobRows(jobs) {
  const rank = { pending: 0, running: 1 };
  return (jobs || [])
    .filter((j) => j && (j.state === 'pending' || j.state === 'running'))
    .map((j) => ({
      id: j.id,
      name: j.name || '',
      tenant: j.tenant || '',
      queue: j.queue || '',
      state: j.state,
      gpuMilli: Number(j.gpu_milli) || 0,
      mig: (j.spec && j.spec.resources && j.spec.resources.mig) || null,
      submitted: j.submit_time || null,
      started: j.start_time || null,
      nodes: [...new Set((j.tasks || []).map((t) => t.node).filter(Boolean))],
      reason: j.reason || '',
      eta: j.eta || null,
      etaNote: j.eta_note || '',
      position: Number.isFinite(j.position) ? j.position : null,
      // Flagged by its queue's idle policy: 'idle', 'hung' (idle and silent), or ''.
      idle: j.idle_since ? (j.hung ? 'hung' : 'idle') : '',
      // How its last attempt ended when that was a fault or a failure ('gpu-fault: XID 79
      // (...) on node n1 GPU 0'), for a job running or waiting again after it; '' otherwise.
      lastEnd: lastEnd(j),
      attempts: Number(j.attempts) || 0,
    }))
    .sort((a, b) => rank[a.state] - rank[b.state] || (Number(a.id) || 0) - (Number(b.id) || 0));
}

// A pending job's expected start (the controller's forecast) for the queue view:
// "in 12m (#3)", "now (#1)", or why there is none; '' before the first forecast.
export function etaText(row, now) {
  const pos = row.position !== null && row.position !== undefined ? ` (#${row.position})` : '';
  const at = row.eta ? Date.parse(row.eta) : NaN;
  if (Number.isFinite(at)) return `${at > now ? `in ${formatDuration(at - now)}` : 'now'}${pos}`;
  if (row.etaNote && row.etaNote.startsWith('no estimate')) return `${row.etaNote}${pos}`;
  return '';
}

// An amount of a queue resource in its unit: gpu and cpu come in milli, memory in MiB.
export function formatResource(resource, amount) {
  if (amount === null || amount === undefined) return '∞';
  if (resource === 'gpu') return formatGpus(amount);
  if (resource === 'cpu') return `${formatDecimal(amount / 1000)} cores`;
  if (resource === 'memory') return formatMib(amount);
  return String(amount);
}

// 1000 -> "1", 250 -> "0.25", 428 -> "0.428", 16000 -> "16".
// A GPU's sharing mode in words for its box: "MIG", "shared", "timeslice ×4, no isolation".
export function modeLabel(gpu) {
  const mode = (gpu && gpu.mode) || 'exclusive';
  if (mode === 'mig') return 'MIG';
  if (mode === 'timeslice') return `timeslice ×${gpu.replicas || '?'}, no isolation`;
  return mode;
}

export function formatGpus(milli) {
  return formatDecimal((Number(milli) || 0) / 1000);
}

export function formatDecimal(value, digits = 3) {
  if (!Number.isFinite(value)) return '';
  return String(Number(value.toFixed(digits)));
}

// 20480 -> "20 GiB", 512 -> "512 MiB", 1536 -> "1.5 GiB".
export function formatMib(mib) {
  const v = Number(mib);
  if (!Number.isFinite(v)) return '';
  if (Math.abs(v) >= 1024) return `${formatDecimal(v / 1024, 1)} GiB`;
  return `${formatDecimal(v, 0)} MiB`;
}

// Milliseconds since the epoch -> "2026-11-30T01:08:08Z" (what the API's since/until take).
export function formatRfc3339(ms) {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

// "5s", "3m", "2h 5m", "3d 4h" for a duration in milliseconds.
export function formatDuration(ms) {
  const s = Math.max(0, Math.floor((Number(ms) || 0) / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h}h ${m % 60}m` : `${h}h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d}d ${h % 24}h` : `${d}d`;
}

// The time of day of `ms` as HH:MM:SS in UTC.
export function formatClock(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

// Fills in what a holder lacks (job_name, queue) from the job list, for controllers that
// do not send them with the GPU map. Returns new node objects; the input is not changed.
export function enrichHolders(nodes, jobs) {
  const byId = new Map();
  for (const j of jobs || []) if (j && j.id !== undefined) byId.set(String(j.id), j);
  return (nodes || []).map((n) => ({
    ...n,
    gpus: (n.gpus || []).map((g) => ({
      ...g,
      holders: (g.holders || []).map((h) => {
        const j = jobHidden(h) ? undefined : byId.get(String(h.job));
        if (!j) return h;
        return { ...h, job_name: h.job_name || j.name || '', queue: h.queue || j.queue || '' };
      }),
    })),
  }));
}

// Another tenant's job in a tenant's view: the controller sends who holds the slice
// (tenant, queue) but not what (job null, a placeholder job_name).
function jobHidden(holder) {
  return holder.job === null || holder.job === undefined;
}

// The first part of a slice's label: "#3 notebook", or "other tenant: team-a" for a
// job withheld from this viewer (never "#null").
function jobLabel(holder) {
  if (jobHidden(holder)) return holder.tenant ? `other tenant: ${holder.tenant}` : 'other tenant';
  return holder.job_name ? `#${holder.job} ${holder.job_name}` : `#${holder.job}`;
}

// A slice's label as two lines, e.g. ["#3 notebook", "1g.10gb"] or ["#2 inference", "0.25"];
// the second is '' for a whole card.
export function sliceLabelLines(holder, mode) {
  if (!holder) return ['', ''];
  const first = jobLabel(holder);
  let second = '';
  if (mode === 'mig' && holder.mig_profile) second = holder.mig_profile;
  else if (mode === 'shared') second = `${formatGpus(holder.milli)} GPU`;
  return [first, second];
}

// A slice's label, e.g. "#3 notebook · 1g.10gb" or "#2 inference · 0.25".
export function sliceLabel(holder, mode) {
  if (!holder) return '';
  let label = jobLabel(holder);
  if (mode === 'mig' && holder.mig_profile) label += ` · ${holder.mig_profile}`;
  else if (mode === 'shared') label += ` · ${formatGpus(holder.milli)}`;
  return label;
}

// A slice's tooltip: tenant, job, queue, size and memory, one per line.
export function sliceTooltip(holder, gpu) {
  if (!holder) return '';
  const lines = [`tenant: ${holder.tenant || '?'}`,
                 jobHidden(holder)
                   ? `job: ${holder.job_name || '(another tenant\'s job)'}`
                   : `job: ${holder.job}${holder.job_name ? ` (${holder.job_name})` : ''}`];
  if (holder.queue) lines.push(`queue: ${holder.queue}`);
  if (holder.mig_profile) {
    lines.push(`MIG: ${holder.mig_profile}${Number.isInteger(holder.mig_start) ? ` at slot ${holder.mig_start}` : ''}`);
  } else {
    lines.push(`GPU: ${formatGpus(holder.milli)}`);
  }
  if (Number.isFinite(holder.memory_mib) && holder.memory_mib > 0) {
    lines.push(`memory: ${formatMib(holder.memory_mib)}`);
  } else if (gpu && gpu.mode === 'exclusive' && Number.isFinite(gpu.memory_mib)) {
    lines.push(`memory: ${formatMib(gpu.memory_mib)} (whole card)`);
  }
  if (holder.mig_uuid) lines.push(`instance: ${holder.mig_uuid}`);
  return lines.join('\n');
}

// Telemetry in words, e.g. "util 63% · mem 20/80 GiB · 54 °C"; '' when there is none.
export function telemetryText(gpu) {
  const t = gpu && gpu.telemetry;
  if (!t || typeof t !== 'object') return '';
  const parts = [];
  if (Number.isFinite(t.util_pct)) parts.push(`util ${Math.round(t.util_pct)}%`);
  if (Number.isFinite(t.fb_used_mib)) {
    const total = Number.isFinite(t.fb_free_mib) ? t.fb_used_mib + t.fb_free_mib : gpu.memory_mib;
    parts.push(Number.isFinite(total) && total > 0
      ? `mem ${formatDecimal(t.fb_used_mib / 1024, 1)}/${formatDecimal(total / 1024, 0)} GiB`
      : `mem ${formatMib(t.fb_used_mib)}`);
  }
  if (Number.isFinite(t.temp_c)) parts.push(`${Math.round(t.temp_c)} °C`);
  if (Number.isFinite(t.power_w)) parts.push(`${Math.round(t.power_w)} W`);
  if (Number.isFinite(t.xid_count) && t.xid_count > 0) parts.push(`XID ${t.last_xid ?? '?'} ×${t.xid_count}`);
  return parts.join(' · ');
}

// Reads a token from a URL fragment like "#token=abc" (other keys kept):
// {token: 'abc' or null, rest: the fragment without it, '' or '#...'}.
export function parseTokenFragment(hash) {
  const body = (hash || '').replace(/^#/, '');
  if (body === '') return { token: null, rest: '' };
  const params = new URLSearchParams(body);
  const token = params.get('token');
  params.delete('token');
  const rest = params.toString();
  return { token: token || null, rest: rest ? `#${rest}` : '' };
}

// A "nice" axis from 0 to at least `max` with about `target` steps of 1, 2, 2.5 or 5 x 10^k.
export function niceScale(max, target = 4) {
  const m = Number.isFinite(max) && max > 0 ? max : 1;
  const raw = m / target;
  const pow = 10 ** Math.floor(Math.log10(raw));
  let step = pow * 10;
  for (const f of [1, 2, 2.5, 5, 10]) {
    if (raw <= f * pow * (1 + 1e-9)) {
      step = f * pow;
      break;
    }
  }
  const top = Math.ceil(m / step - 1e-9) * step;
  const ticks = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(Number(v.toFixed(10)));
  return { max: top, step, ticks };
}

// Geometry of a usage chart: a line and an area for `values` at `times` (ms; a null value
// is a gap), a dashed line at `quota` (or null), y ticks and x ticks (every 15 minutes
// back from `until`), in a box of width x height with padding {left, right, top, bottom}.
export function chartGeometry({ times, values, quota = null, since, until, width = 420, height = 150,
                                pad = { left: 36, right: 10, top: 10, bottom: 22 } }) {
  const t0 = Number.isFinite(since) ? since : (times.length ? times[0] : 0);
  const t1 = Number.isFinite(until) ? until : (times.length ? times[times.length - 1] : t0 + 1);
  const span = t1 > t0 ? t1 - t0 : 1;
  let vmax = Number.isFinite(quota) ? quota : 0;
  for (const v of values) if (Number.isFinite(v) && v > vmax) vmax = v;
  const scale = niceScale(vmax * 1.05);
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const x = (t) => pad.left + ((t - t0) / span) * innerW;
  const y = (v) => pad.top + innerH - (v / scale.max) * innerH;
  const r = (n) => Number(n.toFixed(2));
  let line = '';
  let area = '';
  let run = [];
  const flush = () => {
    if (run.length === 0) return;
    line += run.map((p, i) => `${i === 0 ? 'M' : 'L'}${r(p[0])},${r(p[1])}`).join(' ') + ' ';
    const base = r(y(0));
    area += `M${r(run[0][0])},${base} ` + run.map((p) => `L${r(p[0])},${r(p[1])}`).join(' ') +
            ` L${r(run[run.length - 1][0])},${base} Z `;
    run = [];
  };
  times.forEach((t, i) => {
    const v = values[i];
    if (Number.isFinite(v) && Number.isFinite(t)) {
      run.push([x(t), y(v)]);
    } else {
      flush();
    }
  });
  flush();
  const xTicks = [];
  const quarter = 15 * 60 * 1000;
  for (let k = 0; t1 - k * quarter >= t0 - 1; k++) {
    const t = t1 - k * quarter;
    xTicks.push({ t, x: r(x(t)), label: k === 0 ? 'now' : `−${k * 15} min` });
  }
  return {
    width, height, pad,
    line: line.trim(),
    area: area.trim(),
    quotaY: Number.isFinite(quota) ? r(y(quota)) : null,
    yTicks: scale.ticks.map((v) => ({ v, y: r(y(v)), label: formatDecimal(v, 2) })),
    xTicks: xTicks.reverse(),
    yMax: scale.max,
  };
}

// /v1/usage/series -> {since, until (ms), times (ms), byTenant: Map key -> {gpus, quota}}.
export function parseUsageSeries(resp) {
  if (!resp || !Array.isArray(resp.times) || !Array.isArray(resp.series)) return null;
  const times = resp.times.map((t) => Date.parse(t));
  const byTenant = new Map();
  for (const s of resp.series) {
    if (!s || !s.key) continue;
    const gpus = (s.gpus || []).map((v) => (Number.isFinite(v) ? v : null));
    byTenant.set(s.key, { gpus, quota: Number.isFinite(s.quota_gpus) ? s.quota_gpus : null });
  }
  const step = Number(resp.step_s) > 0 ? Number(resp.step_s) * 1000 : 60000;
  // Each value stands for a bucket: draw it at the bucket's middle.
  return {
    since: Date.parse(resp.since),
    until: Date.parse(resp.until),
    times: times.map((t) => t + step / 2),
    byTenant,
  };
}

// Appends a live sample {t, perTenant: Map} and drops those older than `keepMs`.
export function addSample(samples, t, perTenant, keepMs = 3600 * 1000) {
  const out = samples.filter((s) => s.t >= t - keepMs);
  out.push({ t, perTenant: new Map(perTenant) });
  return out;
}

// Live samples as a series for one tenant: {times, values} (0 where a sample lacks it).
export function sampleSeries(samples, tenant) {
  return {
    times: samples.map((s) => s.t),
    values: samples.map((s) => s.perTenant.get(tenant) || 0),
  };
}
