/* The schedule explorer's timeline in the browser (zyfa.webui; Dash serves this file from assets/).

The page draws the timeline itself (Plotly.react into #timeline-plot) instead of through dcc.Graph,
so a zoom or pan is drawn by plotly over the data the page already has, with no server round trip
(dcc.Graph copied every zoom back into its figure property and re-plotted the whole figure before
Dash even sent the view to the server: as long as a second redraw).

The server's figure carries data for more than the view (figures.schedule_figure: half a view
either side, at the view's resolution) and says so in layout.meta. After a zoom or pan the page
  - draws the new range at once (plotly's own redraw: the only work in the critical path),
  - writes the range into #view-info at once,
  - and 150 ms after the last zoom of a burst (debounced) sets the `view` store (the instruction
    grid and a metric window of 'view' follow it on the server) and, only when the level of detail
    must change, the `lod` store, which asks the server for a new figure: the view left the covered
    range, or zoomed in past twice the resolution the covered data was merged at.
The new figure is drawn at the view the page shows by then, so a late answer never moves the view.
The last few figures of the same content (traces, highlight, shading: layout.meta.content) are kept:
a view one of them can draw (back to the whole trace, out again after a zoom in) is drawn from it
without asking the server.
*/
(function () {
    'use strict';
    const IDS = {plot: 'timeline-plot', view: 'view', lod: 'lod', info: 'view-info', click: 'timeline-click'};
    const DEBOUNCE_MS = 150;
    const CACHED_FIGURES = 4;
    const state = {
        view: null,       // [x0, x1] drawn now
        committed: null,  // last view written to the `view` store from here (its echo changes nothing)
        requested: null,  // last view written to the `lod` store (a figure for it is on its way)
        meta: null,       // layout.meta of the figure drawn
        figure: null,     // the figure object drawn (to tell a selection-only change)
        shapes: [],       // the selection outline drawn
        cache: [],        // recent figures of the drawn figure's content, newest last
        drawing: 0,       // Plotly.react calls in flight
        timer: null,
    };

    function same(a, b) {
        return Array.isArray(a) && Array.isArray(b) && a.length === 2 && b.length === 2 && a[0] === b[0] && a[1] === b[1];
    }

    /* The x range a plotly relayout event sets: {range: [x0, x1]} for an x range of any linked axis,
       {range: extent, auto: true} for an autorange (the modebar's autoscale: the whole trace), else null. */
    function relayoutRange(rel, extent) {
        if (!rel || typeof rel !== 'object') { return null; }
        let x0 = null, x1 = null;
        for (const [key, value] of Object.entries(rel)) {
            if (/^xaxis\d*\.autorange$/.test(key) && value) {
                return Array.isArray(extent) && extent.length === 2 ? {range: [+extent[0], +extent[1]], auto: true} : null;
            }
            const m = /^xaxis\d*\.range\[([01])\]$/.exec(key);
            if (m && typeof value === 'number') { if (m[1] === '0') { x0 = value; } else { x1 = value; } }
            else if (/^xaxis\d*\.range$/.test(key) && Array.isArray(value) && value.length === 2) {
                [x0, x1] = value.map(Number);
            }
        }
        if (x0 === null || x1 === null || !isFinite(x0) || !isFinite(x1) || !(x1 > x0)) { return null; }
        return {range: [x0, x1], auto: false};
    }

    /* Whether the figure described by `meta` cannot draw `view` at the right level of detail: part of
       the trace in view lies outside the covered range, or the data is merged and the view zoomed in
       past twice its merge resolution (a merged bar would span two or more bins of the view). */
    function needsData(view, meta) {
        if (!Array.isArray(view) || !meta || typeof meta.x0 !== 'number' || !Array.isArray(meta.extent)) { return true; }
        const lo = Math.max(view[0], meta.extent[0]), hi = Math.min(view[1], meta.extent[1]);
        if (hi > lo && (lo < meta.x0 || hi > meta.x1)) { return true; }
        return Boolean(meta.decimated) && (view[1] - view[0]) / meta.bins < meta.resolution / 2;
    }

    function infoText() {
        const v = state.view, m = state.meta;
        if (!v || !m) { return ''; }
        const fmt = x => Math.round(x).toLocaleString('en-US');
        let text = `cycles ${fmt(v[0])}–${fmt(v[1])}: ` +
            (m.decimated ? 'merged segments (zoom in for single instructions)' : 'every instruction');
        if (needsData(v, m)) { text += ' · loading this view…'; }  // from the server, or a kept figure
        return text;
    }

    function setProps(id, props) {
        if (window.dash_clientside && window.dash_clientside.set_props) { window.dash_clientside.set_props(id, props); }
    }

    function showInfo() { setProps(IDS.info, {children: infoText()}); }

    function commit() {
        state.timer = null;
        const v = state.view;
        if (!v) { return; }
        if (!same(v, state.committed)) { state.committed = v; setProps(IDS.view, {data: v}); }
        if (!state.meta || !needsData(v, state.meta) || same(v, state.requested)) { return; }
        const kept = state.cache.find(f => f !== state.figure && !needsData(v, f.layout.meta));
        if (kept) { draw(kept); return; }
        state.requested = v;
        setProps(IDS.lod, {data: v});
    }

    function setView(range) {
        state.view = range;
        showInfo();
        if (state.timer !== null) { clearTimeout(state.timer); }
        state.timer = setTimeout(commit, DEBOUNCE_MS);
    }

    function onRelayout(rel) {
        const gd = document.getElementById(IDS.plot);
        const got = relayoutRange(rel, state.meta && state.meta.extent);
        if (!got || !gd) { return; }
        if (got.auto) {  // autoscale button: plotly autoranged to the data it has; show the whole trace
            window.Plotly.relayout(gd, {'xaxis.range': got.range});
            return;
        }
        if (!same(got.range, state.view)) { setView(got.range); }
    }

    /* A double click shows the whole trace in one redraw (plotly's own double click would first
       autorange to the data the page has, a second redraw). */
    function onDoubleClick() {
        const gd = document.getElementById(IDS.plot);
        const extent = state.meta && state.meta.extent;
        if (gd && Array.isArray(extent)) { window.Plotly.relayout(gd, {'xaxis.range': extent.slice()}); }
    }

    function onClick(ev) {
        const point = ev && ev.points && ev.points[0];
        if (!point || point.customdata === undefined || point.customdata === null) { return; }
        setProps(IDS.click, {data: {points: [{customdata: point.customdata}], timestamp: Date.now()}});
    }

    /* plotly.js is loaded by Dash beside the page's scripts; resolve once it is there. */
    function plotly() {
        if (window.Plotly) { return Promise.resolve(window.Plotly); }
        return new Promise(resolve => {
            const wait = () => (window.Plotly ? resolve(window.Plotly) : requestAnimationFrame(wait));
            wait();
        });
    }

    function withRange(layout, range) {
        const out = Object.assign({}, layout);
        for (const key of Object.keys(out)) {
            if (/^xaxis\d*$/.test(key)) { out[key] = Object.assign({}, out[key], {range: range.slice()}); }
        }
        return out;
    }

    /* Draw `figure` (the server's, or a kept one) at the view shown now, with the selection outline. */
    async function draw(figure) {
        const gd = document.getElementById(IDS.plot);
        const meta = figure.layout.meta || {};
        const range = figure.layout.xaxis && figure.layout.xaxis.range;
        let layout = figure.layout;
        if (Array.isArray(range) && Array.isArray(meta.extent)) {
            const fresh = state.meta === null || !same(meta.extent, state.meta.extent);
            if (fresh || !state.view) { state.view = range.slice(); }
            if (!state.meta || meta.content !== state.meta.content) { state.cache = []; }
            state.cache = state.cache.filter(f => f !== figure).concat([figure]).slice(-CACHED_FIGURES);
            state.meta = meta;
            if (same(meta.view, state.requested)) { state.requested = null; }  // the answer to the last request
            layout = Object.assign(withRange(figure.layout, state.view), {shapes: state.shapes});
        } else {  // no trace loaded: a figure without a timeline
            state.view = null;
            state.meta = null;
            state.cache = [];
        }
        state.figure = figure;
        state.drawing += 1;
        try {
            await window.Plotly.react(gd, {data: figure.data, layout: layout, config: figure.config || {}});
        } finally {
            state.drawing -= 1;
        }
        if (!gd.zyfaBound) {
            gd.zyfaBound = true;
            gd.on('plotly_relayout', onRelayout);
            gd.on('plotly_click', onClick);
            gd.on('plotly_doubleclick', onDoubleClick);
        }
        showInfo();
        if (state.meta && needsData(state.view, state.meta)) { setView(state.view); }  // zoomed again meanwhile
    }

    /* Clientside callback: draw the server's figure (`timeline-figure`) with the selection outline
       (`timeline-shapes`); a change of the outline alone is a relayout of the shapes only. */
    async function render(figure, shapes) {
        const ctx = window.dash_clientside.callback_context;
        const outlineOnly = Boolean(ctx && ctx.triggered && ctx.triggered.length &&
                                    ctx.triggered.every(t => t.prop_id === 'timeline-shapes.data'));
        const Plotly = await plotly();
        const gd = document.getElementById(IDS.plot);
        if (!gd || !figure || !figure.layout) { return window.dash_clientside.no_update; }
        state.shapes = shapes || [];
        if (outlineOnly && state.figure && gd.data) {
            await Plotly.relayout(gd, {shapes: state.shapes});
            return Date.now();
        }
        await draw(figure);
        return Date.now();
    }

    /* Clientside callback: the `view` store changed. From the server (zoom to an iteration, whole
       trace, A or B changed): show that range. The echo of this page's own commit changes nothing. */
    function syncView(view) {
        const none = window.dash_clientside.no_update;
        if (!Array.isArray(view) || view.length !== 2 || same(view, state.committed)) { return none; }
        state.committed = view;
        state.requested = view.slice();  // the server asked itself for this view's figure (update_view sets `lod` too)
        const gd = document.getElementById(IDS.plot);
        if (same(view, state.view)) { return none; }
        state.view = view.slice();
        showInfo();
        if (gd && gd.data && window.Plotly) { window.Plotly.relayout(gd, {'xaxis.range': view.slice()}); }
        return none;
    }

    window.zyfaTimeline = {relayoutRange: relayoutRange, needsData: needsData, state: state};
    window.dash_clientside = window.dash_clientside || {};
    window.dash_clientside.zyfa = {render: render, syncView: syncView};
})();
