// Unit tests of the dashboard's pure functions: `node --test web/dashboard/`.
import assert from 'node:assert/strict';
import test from 'node:test';

import * as M from './model.js';

const near = (a, b, what) => assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} != ${b}`);

function assertTiles(segments) {
  let at = 0;
  for (const s of segments) {
    near(s.start, at, 'segments are contiguous');
    assert.ok(s.width > 0, 'every segment has a width');
    at += s.width;
  }
  near(at, 1, 'segments cover the box');
}

test('tenant colours are stable, distinct, and independent of listing order', () => {
  const a = M.assignTenantColors(['team-b', 'team-a', 'default']);
  const b = M.assignTenantColors(['default', 'team-a', 'team-b', 'team-a']);
  assert.deepEqual([...a.entries()].sort(), [...b.entries()].sort());
  assert.equal(new Set(a.values()).size, 3);
  for (const c of a.values()) assert.ok(M.PALETTE.includes(c));
  // Twelve tenants take all twelve palette colours; a thirteenth gets a hashed colour.
  const many = M.assignTenantColors(Array.from({ length: 13 }, (_, i) => `t${i}`));
  const colours = [...many.values()];
  assert.equal(new Set(colours).size, 13);
  assert.equal(colours.filter((c) => M.PALETTE.includes(c)).length, 12);
  for (const c of colours) assert.match(c, /^#[0-9a-f]{6}$/);
  // Unknown to the assignment: still a stable colour.
  assert.equal(M.tenantColor('zed', a), M.tenantColor('zed', new Map()));
  assert.equal(M.tenantColor('team-a', a), a.get('team-a'));
});

test('label colour contrasts with the slice colour', () => {
  assert.equal(M.textColorOn('#000000'), '#ffffff');
  assert.equal(M.textColorOn('#ffffff'), '#000000');
  assert.equal(M.textColorOn('#edc948'), '#000000');  // yellow
  assert.equal(M.textColorOn('#2f4b7c'), '#ffffff');  // navy
  assert.equal(M.textColorOn('bogus'), '#000000');
});

test('MIG profiles and their memory slots', () => {
  assert.deepEqual(M.parseMigProfile('3g.40gb'), { compute: 3, memoryGb: 40, mediaExtensions: false });
  assert.deepEqual(M.parseMigProfile('1g.10gb+me'), { compute: 1, memoryGb: 10, mediaExtensions: true });
  assert.equal(M.parseMigProfile('big'), null);
  assert.equal(M.parseMigProfile(null), null);
  assert.equal(M.gpuMemoryGib({ model: 'A100-80GB' }), 80);
  assert.equal(M.gpuMemoryGib({ model: 'H200-141GB' }), 141);
  assert.equal(M.gpuMemoryGib({ model: 'A100-80GB', memory_mib: 40960 }), 40);
  assert.equal(M.gpuMemoryGib({ model: 'L4' }), null);
  assert.equal(M.migMemorySlots('7g.80gb', 80), 8);
  assert.equal(M.migMemorySlots('4g.40gb', 80), 4);
  assert.equal(M.migMemorySlots('3g.40gb', 80), 4);
  assert.equal(M.migMemorySlots('2g.20gb', 80), 2);
  assert.equal(M.migMemorySlots('1g.10gb', 80), 1);
  assert.equal(M.migMemorySlots('1g.20gb', 80), 2);
  assert.equal(M.migMemorySlots('1g.10gb', 40), 2);   // the A100-40GB's two-slot 1g
  assert.equal(M.migMemorySlots('1g.5gb', 40), 1);
  assert.equal(M.migMemorySlots('1g.18gb', 141), 1);
  assert.equal(M.migMemorySlots('1g.35gb', 141), 2);
  assert.equal(M.migMemorySlots('nope', 80), null);
});

test('an idle GPU is one free segment', () => {
  const segs = M.layoutGpu({ mode: 'exclusive', holders: [] });
  assert.deepEqual(segs, [{ start: 0, width: 1, holder: null }]);
  assert.deepEqual(M.layoutGpu({}), [{ start: 0, width: 1, holder: null }]);
});

test('an exclusive GPU is one slice for its job', () => {
  const h = { job: 1, tenant: 'team-a', milli: 1000, mig_profile: null };
  const segs = M.layoutGpu({ mode: 'exclusive', holders: [h] });
  assert.equal(segs.length, 1);
  assert.equal(segs[0].holder, h);
  near(segs[0].width, 1, 'whole card');
});

test('a shared GPU is cut in proportion to milli, free space after', () => {
  const segs = M.layoutGpu({ mode: 'shared', holders: [
    { job: 7, tenant: 'team-b', milli: 500 },
    { job: 2, tenant: 'team-a', milli: 250 },
  ] });
  assertTiles(segs);
  assert.deepEqual(segs.map((s) => s.holder && s.holder.job), [2, 7, null]);
  near(segs[0].width, 0.25, 'job 2');
  near(segs[1].width, 0.5, 'job 7');
  near(segs[2].width, 0.25, 'free');
  // Over-committed input (never from the ledger) still fits the box.
  const over = M.layoutGpu({ mode: 'shared', holders: [{ job: 1, milli: 800 }, { job: 2, milli: 800 }] });
  assertTiles(over);
  near(over[0].width, 0.5, 'scaled down');
});

test('MIG slices sit at their memory slots when the starts are known', () => {
  const segs = M.layoutGpu({ mode: 'mig', model: 'A100-80GB', holders: [
    { job: 3, tenant: 'team-b', milli: 428, mig_profile: '3g.40gb', mig_start: 4 },
    { job: 5, tenant: 'team-a', milli: 142, mig_profile: '1g.10gb', mig_start: 1 },
  ] });
  assertTiles(segs);
  const shape = segs.map((s) => [s.holder ? s.holder.job : null, s.start * 8, s.width * 8]);
  assert.deepEqual(shape, [[null, 0, 1], [5, 1, 1], [null, 2, 2], [3, 4, 4]]);
});

test('MIG slices without starts are packed by compute slices out of 7', () => {
  const segs = M.layoutGpu({ mode: 'mig', model: 'A100-80GB', holders: [
    { job: 4, tenant: 'team-b', milli: 428, mig_profile: '3g.40gb', mig_start: null },
    { job: 3, tenant: 'team-a', milli: 142, mig_profile: '1g.10gb' },
  ] });
  assertTiles(segs);
  assert.deepEqual(segs.map((s) => s.holder && s.holder.job), [3, 4, null]);
  near(segs[0].width, 1 / 7, '1g');
  near(segs[1].width, 3 / 7, '3g');
  near(segs[2].width, 3 / 7, 'free');
  // Overlapping starts (inconsistent input) fall back to packing rather than overlapping.
  const bad = M.layoutGpu({ mode: 'mig', model: 'A100-80GB', holders: [
    { job: 1, mig_profile: '4g.40gb', mig_start: 0 }, { job: 2, mig_profile: '3g.40gb', mig_start: 2 }] });
  assertTiles(bad);
  near(bad[0].width, 4 / 7, 'packed 4g');
});

test('GPU status: node down, lost, drained, ok', () => {
  const up = { name: 'a', state: 'up' };
  assert.deepEqual(M.gpuStatus({}, up), { state: 'ok', reason: '' });
  assert.equal(M.gpuStatus({}, { name: 'a', state: 'down', reason: 'no heartbeat for 10s' }).reason,
               'no heartbeat for 10s');
  assert.equal(M.gpuStatus({}, { name: 'a', state: 'down' }).state, 'down');
  assert.deepEqual(M.gpuStatus({ health: 'lost' }, up), { state: 'lost', reason: 'GPU lost' });
  assert.equal(M.gpuStatus({ telemetry: { lost: true } }, up).state, 'lost');
  assert.deepEqual(M.gpuStatus({ drain: { reason: 'XID 79', by: 'health' } }, up),
                   { state: 'drained', reason: 'XID 79 (by health)' });
  assert.deepEqual(M.gpuStatus({ drain: null, health: 'ok' }, { ...up, drain: { reason: 'maintenance', by: 'admin' } }),
                   { state: 'drained', reason: 'node: maintenance (by admin)' });
});

const NODES = [
  { name: 'vm', state: 'up', gpus: [
    { index: 0, mode: 'exclusive', used_milli: 1000, holders: [{ job: 1, tenant: 'team-a', milli: 1000 }] },
    { index: 1, mode: 'exclusive', used_milli: 0, holders: [], drain: { reason: 'r', by: 'admin' } },
    { index: 2, mode: 'shared', used_milli: 750, holders: [
      { job: 2, tenant: 'team-b', milli: 250 }, { job: 4, tenant: 'team-a', milli: 500 }] },
    { index: 3, mode: 'mig', holders: [{ job: 3, tenant: 'team-b', milli: 142, mig_profile: '1g.10gb' }] },
  ] },
  { name: 'gone', state: 'down', gpus: [{ index: 0, mode: 'exclusive', used_milli: 0, holders: [] }] },
];

test('cluster totals', () => {
  assert.deepEqual(M.clusterTotals(NODES), { nodes: 2, gpus: 5, inUse: 3, usedMilli: 1892, drained: 2 });
  assert.deepEqual(M.clusterTotals(undefined), { nodes: 0, gpus: 0, inUse: 0, usedMilli: 0, drained: 0 });
});

test('tenants, live usage and quotas', () => {
  const queues = [
    { name: 'cluster', kind: 'cohort', resources: [{ resource: 'gpu', nominal: 0, used: 2000 }] },
    { name: 'team-a', kind: 'queue', tenant: 'team-a', resources: [{ resource: 'gpu', nominal: 8000, used: 1500 }] },
    { name: 'team-a-batch', kind: 'queue', tenant: 'team-a', resources: [{ resource: 'gpu', nominal: 2000, used: 0 },
                                                                      { resource: 'cpu', nominal: 64000, used: 0 }] },
    { name: 'default', kind: 'queue', tenant: 'default', resources: [] },
  ];
  assert.deepEqual(M.tenantsOf({ nodes: NODES, queues, jobs: [{ tenant: 'zeta' }] }),
                   ['default', 'team-a', 'team-b', 'zeta']);
  const live = M.liveTenantGpus(NODES);
  near(live.get('team-a'), 1.5, 'team-a');
  near(live.get('team-b'), 0.392, 'team-b');
  const quota = M.tenantQuotaGpus(queues);
  assert.equal(quota.get('team-a'), 10);
  assert.equal(quota.has('default'), false);
  assert.equal(quota.has(undefined), false);
});

test('queue rows show borrowing beyond the nominal quota', () => {
  const rows = M.queueRows([{ name: 'team-b', kind: 'queue', tenant: 'team-b', parent: 'cluster',
    resources: [{ resource: 'gpu', nominal: 8000, used: 11000, borrowing_limit: null, lending_limit: 2000 }] },
  { name: 'x', resources: [{ resource: 'gpu', nominal: 8000, used: 3000 }] },
  { name: 'cluster', kind: 'cohort', resources: [{ resource: 'gpu', nominal: 0, used: 7000 }] }]);
  assert.equal(rows[0].resources[0].borrowing, 3000);
  assert.equal(rows[0].resources[0].borrowingLimit, null);
  assert.equal(rows[0].resources[0].lendingLimit, 2000);
  assert.equal(rows[1].resources[0].borrowing, 0);
  assert.equal(rows[1].kind, 'queue');
  assert.equal(rows[2].resources[0].borrowing, 0);
});

test('holders get job names and queues from the job list when the map lacks them', () => {
  const nodes = [{ name: 'vm', gpus: [{ index: 0, holders: [
    { job: 1, tenant: 'team-a', milli: 1000 },
    { job: 2, tenant: 'team-b', milli: 250, job_name: 'own-name', queue: 'q-own' },
    { job: 9, tenant: 'team-b', milli: 250 }] }] }];
  const out = M.enrichHolders(nodes, [{ id: 1, name: 'train', queue: 'team-a' }, { id: 2, name: 'other', queue: 'q' }]);
  const h = out[0].gpus[0].holders;
  assert.deepEqual([h[0].job_name, h[0].queue], ['train', 'team-a']);
  assert.deepEqual([h[1].job_name, h[1].queue], ['own-name', 'q-own']);
  assert.equal(h[2].job_name, undefined);
  assert.equal(nodes[0].gpus[0].holders[0].job_name, undefined, 'input unchanged');
  assert.deepEqual(M.enrichHolders(undefined, undefined), []);
});

test('job rows: pending first with their reasons, then running; finished jobs dropped', () => {
  const rows = M.jobRows([
    { id: 1, state: 'running', tenant: 'team-a', queue: 'team-a', gpu_milli: 2000, tasks: [{ node: 'vm' }, { node: 'vm' }] },
    { id: 5, state: 'pending', tenant: 'team-a', reason: 'never fits: no node has 64 GPUs', tasks: [{ node: null }] },
    { id: 3, state: 'pending', tenant: 'team-b', reason: 'waiting for quota' },
    { id: 2, state: 'succeeded' },
  ]);
  assert.deepEqual(rows.map((r) => [r.id, r.state]), [[3, 'pending'], [5, 'pending'], [1, 'running']]);
  assert.equal(rows[1].reason, 'never fits: no node has 64 GPUs');
  assert.deepEqual(rows[2].nodes, ['vm']);
  assert.deepEqual(rows[1].nodes, []);
  assert.equal(rows[2].idle, '');
});

test('jobRows: a running job flagged idle or hung says so', () => {
  const rows = M.jobRows([
    { id: 1, state: 'running', idle_since: '2026-12-03T12:00:00Z', hung: false },
    { id: 2, state: 'running', idle_since: '2026-12-03T12:00:00Z', hung: true },
    { id: 3, state: 'running', idle_since: null, hung: false },
  ]);
  assert.deepEqual(rows.map((r) => r.idle), ['idle', 'hung', '']);
});

test('jobRows: a job requeued by a GPU fault says so while pending and once running again', () => {
  const history = [{ attempt: 1, ended: 'gpu-fault', detail: 'XID 79 (GPU has fallen off the bus) on node n1 GPU 0' }];
  const rows = M.jobRows([
    { id: 1, state: 'pending', attempts: 1, reason: 'requeued: gpu-fault: XID 79 (GPU has fallen off the bus) on node n1 GPU 0', attempt_history: history },
    { id: 2, state: 'running', attempts: 2, attempt_history: history },
    { id: 3, state: 'running', attempts: 2, attempt_history: [{ attempt: 1, ended: 'preempted' }] },
  ]);
  assert.equal(M.jobReasonText(rows[0]), 'requeued: gpu-fault: XID 79 (GPU has fallen off the bus) on node n1 GPU 0');
  assert.equal(M.jobReasonText(rows[1]), 'attempt 2, after gpu-fault: XID 79 (GPU has fallen off the bus) on node n1 GPU 0');
  assert.equal(M.jobReasonText(rows[2]), '');
});

test('etaText: the forecast start of a pending job, its position, or why there is none', () => {
  const now = Date.UTC(2026, 11, 3, 12, 0, 0);
  const [row] = M.jobRows([{ id: 7, state: 'pending', eta: '2026-12-03T12:12:00Z', position: 3 }]);
  assert.equal(M.etaText(row, now), 'in 12m (#3)');
  assert.equal(M.etaText({ ...row, eta: '2026-12-03T11:59:00Z' }, now), 'now (#3)');
  assert.equal(M.etaText({ ...row, eta: null, etaNote: 'no estimate before 2026-12-10T12:00:00Z' }, now),
    'no estimate before 2026-12-10T12:00:00Z (#3)');
  const [fresh] = M.jobRows([{ id: 8, state: 'pending', eta: null, eta_note: 'not estimated yet', position: null }]);
  assert.equal(M.etaText(fresh, now), '');
});

test('formatting', () => {
  assert.equal(M.formatGpus(1000), '1');
  assert.equal(M.formatGpus(250), '0.25');
  assert.equal(M.formatGpus(428), '0.428');
  assert.equal(M.formatGpus(16000), '16');
  assert.equal(M.formatMib(20480), '20 GiB');
  assert.equal(M.formatMib(1536), '1.5 GiB');
  assert.equal(M.formatMib(512), '512 MiB');
  assert.equal(M.formatResource('gpu', 8000), '8');
  assert.equal(M.formatResource('cpu', 2500), '2.5 cores');
  assert.equal(M.formatResource('memory', 4096), '4 GiB');
  assert.equal(M.formatResource('gpu', null), '∞');
  assert.equal(M.formatRfc3339(Date.UTC(2026, 10, 30, 1, 8, 8, 900)), '2026-11-30T01:08:08Z');
  assert.equal(M.formatDuration(5000), '5s');
  assert.equal(M.formatDuration(3 * 60000 + 999), '3m');
  assert.equal(M.formatDuration(125 * 60000), '2h 5m');
  assert.equal(M.formatDuration(76 * 3600000), '3d 4h');
  assert.equal(M.formatClock(Date.UTC(2026, 0, 2, 3, 4, 5)), '03:04:05');
});

test('slice labels, tooltips and telemetry text', () => {
  const h = { job: 3, job_name: 'nb', tenant: 'team-b', queue: 'team-b', milli: 142,
              mig_profile: '1g.10gb', mig_start: 6, memory_mib: 9728 };
  assert.equal(M.sliceLabel(h, 'mig'), '#3 nb · 1g.10gb');
  assert.equal(M.sliceLabel({ job: 2, milli: 250 }, 'shared'), '#2 · 0.25');
  assert.equal(M.sliceLabel({ job: 1, milli: 1000 }, 'exclusive'), '#1');
  assert.deepEqual(M.sliceLabelLines(h, 'mig'), ['#3 nb', '1g.10gb']);
  assert.deepEqual(M.sliceLabelLines({ job: 2, milli: 250 }, 'shared'), ['#2', '0.25 GPU']);
  assert.deepEqual(M.sliceLabelLines({ job: 1, job_name: 'x', milli: 1000 }, 'exclusive'), ['#1 x', '']);
  assert.equal(M.sliceTooltip(h, {}),
               'tenant: team-b\njob: 3 (nb)\nqueue: team-b\nMIG: 1g.10gb at slot 6\nmemory: 9.5 GiB');
  assert.equal(M.sliceTooltip({ job: 1, tenant: 'team-a', milli: 1000 }, { mode: 'exclusive', memory_mib: 81920 }),
               'tenant: team-a\njob: 1\nGPU: 1\nmemory: 80 GiB (whole card)');
  assert.equal(M.telemetryText({}), '');
  assert.equal(M.telemetryText({ telemetry: null }), '');
  assert.equal(M.telemetryText({ telemetry: { util_pct: 63.4, fb_used_mib: 20480, fb_free_mib: 61440, temp_c: 54 } }),
               'util 63% · mem 20/80 GiB · 54 °C');
  assert.equal(M.telemetryText({ telemetry: { xid_count: 2, last_xid: 79 } }), 'XID 79 ×2');
});

test("a tenant's view: other tenants' slices (job and name withheld) never read null", () => {
  // What /v1/nodes sends a tenant for another tenant's job (controller_views.cc).
  const other = { job: null, job_name: "(another tenant's job)", tenant: 'team-a', queue: 'team-a',
                  milli: 142, memory_mib: 9728, mig_profile: '1g.10gb', mig_start: 6 };
  const own = { job: 4, job_name: 'nb', tenant: 'team-b', milli: 1000 };
  const nodes = M.enrichHolders([{ name: 'vm', gpus: [{ index: 0, mode: 'mig', holders: [other, own] }] }],
                                [{ id: 4, name: 'nb', queue: 'team-b' }]);
  const holders = nodes[0].gpus[0].holders;
  assert.deepEqual(M.sliceLabelLines(holders[0], 'mig'), ['other tenant: team-a', '1g.10gb']);
  assert.equal(M.sliceLabel(holders[0], 'mig'), 'other tenant: team-a · 1g.10gb');
  assert.equal(M.sliceTooltip(holders[0], {}),
               "tenant: team-a\njob: (another tenant's job)\nqueue: team-a\nMIG: 1g.10gb at slot 6\nmemory: 9.5 GiB");
  assert.deepEqual(M.sliceLabelLines(holders[1], 'exclusive'), ['#4 nb', '']);
  // Without a tenant either, and with the job left out rather than null.
  assert.deepEqual(M.sliceLabelLines({ job_name: "(another tenant's job)", milli: 250 }, 'shared'),
                   ['other tenant', '0.25 GPU']);
  for (const h of [...holders, { milli: 1000 }]) {
    for (const text of [...M.sliceLabelLines(h, 'mig'), M.sliceLabel(h, 'shared'), M.sliceTooltip(h, {})]) {
      assert.doesNotMatch(text, /null|undefined/, text);
    }
  }
});

test('token in the URL fragment', () => {
  assert.deepEqual(M.parseTokenFragment('#token=tsr_admin_abc'), { token: 'tsr_admin_abc', rest: '' });
  assert.deepEqual(M.parseTokenFragment('#view=queue&token=t1'), { token: 't1', rest: '#view=queue' });
  assert.deepEqual(M.parseTokenFragment(''), { token: null, rest: '' });
  assert.deepEqual(M.parseTokenFragment('#other=1'), { token: null, rest: '#other=1' });
  assert.deepEqual(M.parseTokenFragment('#token='), { token: null, rest: '' });
});

test('nice chart scales', () => {
  assert.deepEqual(M.niceScale(8, 4), { max: 8, step: 2, ticks: [0, 2, 4, 6, 8] });
  assert.deepEqual(M.niceScale(9, 4).ticks, [0, 2.5, 5, 7.5, 10]);
  assert.deepEqual(M.niceScale(0.3, 4).ticks, [0, 0.1, 0.2, 0.3]);
  assert.equal(M.niceScale(0).max, 1);
  assert.equal(M.niceScale(NaN).max, 1);
  assert.equal(M.niceScale(16.8, 4).max, 20);
});

test('chart geometry: line, area, gaps, quota line and ticks', () => {
  const until = Date.UTC(2026, 0, 1, 1, 0, 0);
  const since = until - 3600 * 1000;
  const g = M.chartGeometry({ times: [since, since + 1800e3, since + 2700e3, until],
                              values: [0, 4, null, 2], quota: 8, since, until,
                              width: 200, height: 100, pad: { left: 0, right: 0, top: 0, bottom: 0 } });
  assert.equal(g.yMax, 10);  // 8 * 1.05 rounded up to a nice 10
  assert.equal(g.line, 'M0,100 L100,60 M200,80');
  assert.equal(g.area, 'M0,100 L0,100 L100,60 L100,100 Z M200,100 L200,80 L200,100 Z');
  assert.equal(g.quotaY, 20);
  assert.deepEqual(g.xTicks.map((t) => [t.x, t.label]),
                   [[0, '−60 min'], [50, '−45 min'], [100, '−30 min'], [150, '−15 min'], [200, 'now']]);
  assert.deepEqual(g.yTicks.map((t) => t.label), ['0', '2.5', '5', '7.5', '10']);
  const none = M.chartGeometry({ times: [], values: [], quota: null, since, until });
  assert.equal(none.line, '');
  assert.equal(none.quotaY, null);
});

test('usage series from the API and from live samples', () => {
  const s = M.parseUsageSeries({ since: '2026-01-01T00:00:00Z', until: '2026-01-01T00:02:00Z', step_s: 60,
    by: 'tenant', times: ['2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z'],
    series: [{ key: 'team-a', gpus: [1.5, null], quota_gpus: 8 }, { key: 'team-b', gpus: [0, 2] }] });
  assert.equal(s.until - s.since, 120000);
  assert.deepEqual(s.times.map((t) => t - s.since), [30000, 90000]);
  assert.deepEqual(s.byTenant.get('team-a'), { gpus: [1.5, null], quota: 8 });
  assert.deepEqual(s.byTenant.get('team-b'), { gpus: [0, 2], quota: null });
  assert.equal(M.parseUsageSeries({ error: {} }), null);

  let samples = [];
  samples = M.addSample(samples, 1000, new Map([['team-a', 1]]), 5000);
  samples = M.addSample(samples, 4000, new Map([['team-b', 2]]), 5000);
  samples = M.addSample(samples, 7000, new Map([['team-a', 3]]), 5000);
  assert.deepEqual(samples.map((x) => x.t), [4000, 7000]);
  assert.deepEqual(M.sampleSeries(samples, 'team-a'), { times: [4000, 7000], values: [0, 3] });
});

test('node labels read sorted by key, and nothing for a node without any', () => {
  assert.equal(M.nodeLabelsText({ labels: { rack: 'r1', block: 'b1' } }), 'block=b1 · rack=r1');
  assert.equal(M.nodeLabelsText({ labels: {} }), '');
  assert.equal(M.nodeLabelsText({}), '');
  assert.equal(M.nodeLabelsText(null), '');
});

test('mode labels say when a GPU is time-sliced without isolation', () => {
  assert.equal(M.modeLabel({ mode: 'mig' }), 'MIG');
  assert.equal(M.modeLabel({ mode: 'shared' }), 'shared');
  assert.equal(M.modeLabel({}), 'exclusive');
  assert.equal(M.modeLabel({ mode: 'timeslice', replicas: 4 }), 'timeslice ×4, no isolation');
});
