// bioviz point cloud: two aligned panels of up to millions of points, fed binary arrays by a
// Streamlit custom component (components.v1).
//
// Why not WebGL: in headless chromium without a GPU (SwiftShader), deck.gl's ScatterplotLayer took
// 0.4 s a frame for 5k points and 10 s for 100k, and bare WebGL gl.POINTS 2-10 s for 2 x 1M; writing
// the points straight into an ImageData took 0.2-0.35 s for 2 x 1M on the same loaded CPU (see
// docs/scale.md). So points are splatted on the CPU into each panel's pixels, with a pick buffer
// (the point drawn at each pixel) that gives hover and click for free. During a pan or zoom the last
// full drawing is moved and scaled (cheap, so the gesture stays fluid); the exact drawing follows
// once the view rests for REST_MS.
//
// The Streamlit component protocol (apiVersion 1) is spoken by hand: the page posts "streamlit:render"
// with the arguments (bytes arguments arrive as Uint8Array, not JSON), and this frame posts
// componentReady, setFrameHeight and setComponentValue back. Opened on its own (the benchmark), the
// frame is its own parent and the same render message can be posted to it directly.
// The notebook widget (bioviz/notebook_widget.py) hosts this same file (inlined in index.html) in an iframe
// and speaks the same protocol, so a change to the messages here is a change there too.
"use strict";

(function () {
  const REST_MS = 140;            // full redraw once the view has not changed for this long
  const DIM = 0.15;               // share of a point's colour kept when others are selected
  const OUTLINE = [17, 17, 17];
  const WHITE = 0xffffffff;
  const decoder = new TextDecoder();
  const el = (id) => document.getElementById(id);
  const stage = el("stage"), brush = el("brush"), tooltip = el("tooltip"), lasso = el("lasso");
  const canvases = {a: el("panel-a"), b: el("panel-b")};
  const FRAME = Math.random().toString(36).slice(2);

  const S = {
    dataId: null, n: 0, pos: {a: null, b: null}, classes: null, names: null, offsets: null, classLabels: [],
    palette: null, dimmed: null, selected: new Uint32Array(0), seq: 0, view: null, drawnView: null,
    size: 2, width: 0, height: 0, snapshot: {}, pick: {}, args: null, filename: "projection",
  };
  const metrics = {loads: 0, fullDraws: 0, frames: 0, lastFullMs: null, lastLoadMs: null, firstFrameMs: null,
                   error: null};
  let restTimer = null, frameQueued = false, pendingFirstFrame = null;

  function post(type, data) {
    if (window.parent === window) return;  // opened on its own: no Streamlit page to talk to
    window.parent.postMessage(Object.assign({isStreamlitMessage: true, apiVersion: 1, type: type}, data), "*");
  }

  function typed(bytes, Type) {
    // A bytes argument as a typed array; copied when its offset in the message buffer is not aligned.
    let u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes.buffer || bytes);
    if (u8.byteOffset % Type.BYTES_PER_ELEMENT) u8 = u8.slice();
    return new Type(u8.buffer, u8.byteOffset, Math.floor(u8.byteLength / Type.BYTES_PER_ELEMENT));
  }

  const rgba32 = (r, g, b) => ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;  // ImageData is RGBA bytes
  const mix = (c, share) => Math.round(255 + (c - 255) * share);

  function nameOf(i) { return decoder.decode(S.names.subarray(S.offsets[i], S.offsets[i + 1])); }

  function stamp(size, width) {
    // Pixel offsets of a round point `size` pixels across, in a row-major buffer `width` wide.
    const out = [], c = (size - 1) / 2, r2 = (size / 2) ** 2 + 0.25;
    for (let dy = 0; dy < size; dy++) for (let dx = 0; dx < size; dx++) {
      if ((dx - c) ** 2 + (dy - c) ** 2 <= r2) out.push((dy - Math.floor(c)) * width + dx - Math.floor(c));
    }
    return Int32Array.from(out);
  }

  function fit(bounds, width, height) {
    const [x0, x1, y0, y1] = bounds;
    const scale = 0.96 * Math.min(width / Math.max(x1 - x0, 1e-9), height / Math.max(y1 - y0, 1e-9));
    return {cx: (x0 + x1) / 2, cy: (y0 + y1) / 2, scale: scale};
  }

  function splat(panel, view, width, height, factor) {
    // Every point of `panel` into RGBA pixels (and the pick buffer) at `view`; `factor` scales the
    // drawing for an export larger than the screen.
    const px = new Uint32Array(width * height).fill(WHITE);
    const pick = new Int32Array(width * height).fill(-1);
    const pos = S.pos[panel], cls = S.classes, n = S.n, size = Math.max(1, Math.round(S.size * factor));
    const s = view.scale * factor, hx = width / 2 - view.cx * s, hy = height / 2 + view.cy * s;
    const dim = S.selected.length > 0, colours = dim ? S.dimmed : S.palette;
    const offs = stamp(size, width), lo = Math.floor((size - 1) / 2), hi = size - lo;
    const xmax = width - hi, ymax = height - hi;
    for (let i = 0; i < n; i++) {
      const x = (pos[2 * i] * s + hx) | 0, y = (hy - pos[2 * i + 1] * s) | 0;
      if (x < lo || y < lo || x > xmax || y > ymax) continue;
      const o = y * width + x, colour = colours[cls[i]];
      for (let k = 0; k < offs.length; k++) { px[o + offs[k]] = colour; pick[o + offs[k]] = i; }
    }
    if (dim) {
      // Selected points over the dimmed rest: a dark ring, then the class colour.
      const ring = stamp(size + 4, width), fill = stamp(size + 2, width), outline = rgba32(...OUTLINE);
      for (let j = 0; j < S.selected.length; j++) {
        const i = S.selected[j];
        const x = (pos[2 * i] * s + hx) | 0, y = (hy - pos[2 * i + 1] * s) | 0;
        if (x < lo + 2 || y < lo + 2 || x > xmax - 3 || y > ymax - 3) continue;
        const o = y * width + x;
        for (let k = 0; k < ring.length; k++) { px[o + ring[k]] = outline; pick[o + ring[k]] = i; }
        for (let k = 0; k < fill.length; k++) px[o + fill[k]] = S.palette[cls[i]];
      }
    }
    return {pixels: new Uint8ClampedArray(px.buffer), pick: pick};
  }

  function fullDraw() {
    // The exact drawing of both panels at the current view; kept as the snapshot gestures move.
    const t0 = performance.now();
    for (const panel of ["a", "b"]) {
      const canvas = canvases[panel];
      const {pixels, pick} = splat(panel, S.view, S.width, S.height, 1);
      const image = new ImageData(pixels, S.width, S.height);
      canvas.getContext("2d").putImageData(image, 0, 0);
      const shot = S.snapshot[panel] || document.createElement("canvas");
      shot.width = S.width; shot.height = S.height;
      shot.getContext("2d").putImageData(image, 0, 0);
      S.snapshot[panel] = shot;
      S.pick[panel] = pick;
    }
    S.drawnView = Object.assign({}, S.view);
    metrics.fullDraws += 1;
    metrics.lastFullMs = performance.now() - t0;
    if (pendingFirstFrame !== null) {
      metrics.firstFrameMs = performance.now() - pendingFirstFrame;
      pendingFirstFrame = null;
    }
  }

  function movedFrame() {
    // The last exact drawing moved and scaled to the current view: what a gesture shows.
    const v = S.view, d = S.drawnView, k = v.scale / d.scale, W = S.width, H = S.height;
    const dx = W / 2 - (W / 2) * k + (d.cx - v.cx) * v.scale;
    const dy = H / 2 - (H / 2) * k - (d.cy - v.cy) * v.scale;
    for (const panel of ["a", "b"]) {
      const g = canvases[panel].getContext("2d");
      g.setTransform(1, 0, 0, 1, 0, 0);
      g.fillStyle = "#ffffff";
      g.fillRect(0, 0, W, H);
      g.setTransform(k, 0, 0, k, dx, dy);
      g.drawImage(S.snapshot[panel], 0, 0);
      g.setTransform(1, 0, 0, 1, 0, 0);
    }
    metrics.frames += 1;
  }

  function requestFrame() {
    if (frameQueued) return;
    frameQueued = true;
    requestAnimationFrame(() => { frameQueued = false; if (S.drawnView) movedFrame(); });
    clearTimeout(restTimer);
    restTimer = setTimeout(fullDraw, REST_MS);
  }

  function setView(view) {
    // One view for both panels: panning or zooming either moves both.
    S.view = view;
    tooltip.style.display = "none";
    requestFrame();
  }

  // --- input: drag pans, wheel zooms about the cursor, click picks, shift + drag selects a box,
  // alt + drag a lasso ---
  let drag = null;
  function local(event, canvas) {
    const r = canvas.getBoundingClientRect();
    return [event.clientX - r.left, event.clientY - r.top];
  }
  function toWorld(panel, x, y) {
    const v = S.view;
    return [(x - S.width / 2) / v.scale + v.cx, (S.height / 2 - y) / v.scale + v.cy];
  }
  for (const panel of ["a", "b"]) {
    const canvas = canvases[panel];
    canvas.addEventListener("pointerdown", (event) => {
      if (!S.view) return;
      canvas.setPointerCapture(event.pointerId);
      const [x, y] = local(event, canvas);
      drag = {panel: panel, x0: x, y0: y, x: x, y: y, box: event.shiftKey && !event.altKey, lasso: event.altKey,
              path: [[x, y]], view: Object.assign({}, S.view), moved: false};
    });
    canvas.addEventListener("pointermove", (event) => {
      const [x, y] = local(event, canvas);
      if (!drag) { hover(panel, x, y); return; }
      drag.moved = drag.moved || Math.abs(x - drag.x0) + Math.abs(y - drag.y0) > 3;
      drag.x = x; drag.y = y;
      if (drag.lasso) {
        drag.path.push([x, y]);
        const left = canvas.offsetLeft;
        lasso.style.display = "block";
        lasso.firstElementChild.setAttribute("points", drag.path.map(([px, py]) => `${left + px},${py}`).join(" "));
      } else if (drag.box) {
        const left = canvas.offsetLeft;
        Object.assign(brush.style, {display: "block", left: left + Math.min(drag.x0, x) + "px",
                                    top: Math.min(drag.y0, y) + "px", width: Math.abs(x - drag.x0) + "px",
                                    height: Math.abs(y - drag.y0) + "px"});
      } else if (drag.moved) {
        setView(Object.assign({}, drag.view, {cx: drag.view.cx - (x - drag.x0) / drag.view.scale,
                                              cy: drag.view.cy + (y - drag.y0) / drag.view.scale}));
      }
    });
    canvas.addEventListener("pointerup", (event) => {
      if (!drag) return;
      const d = drag; drag = null;
      brush.style.display = "none";
      lasso.style.display = "none";
      if (d.lasso && d.moved) selectLasso(panel, d.path);
      else if (d.box && d.moved) selectBox(panel, d.x0, d.y0, d.x, d.y);
      else if (!d.moved) onClick(panel, d.x, d.y, event.ctrlKey || event.metaKey);
    });
    canvas.addEventListener("pointerleave", () => { tooltip.style.display = "none"; });
    canvas.addEventListener("wheel", (event) => {
      if (!S.view) return;
      event.preventDefault();
      const [x, y] = local(event, canvas);
      const [wx, wy] = toWorld(panel, x, y);
      const scale = S.view.scale * Math.exp(-event.deltaY * 0.0015);
      // The world point under the cursor stays under it.
      setView({scale: scale, cx: wx - (x - S.width / 2) / scale, cy: wy - (S.height / 2 - y) / scale});
    }, {passive: false});
  }

  function pickAt(panel, x, y, reach) {
    // The point drawn nearest (x, y) in the last exact drawing, or -1 (also while the view moves).
    const pick = S.pick[panel];
    if (!pick || !S.drawnView || S.drawnView.scale !== S.view.scale || S.drawnView.cx !== S.view.cx ||
        S.drawnView.cy !== S.view.cy) return -1;
    let best = -1, bestD = Infinity;
    x = Math.round(x); y = Math.round(y);
    for (let dy = -reach; dy <= reach; dy++) for (let dx = -reach; dx <= reach; dx++) {
      const px = x + dx, py = y + dy;
      if (px < 0 || py < 0 || px >= S.width || py >= S.height) continue;
      const i = pick[py * S.width + px], d = dx * dx + dy * dy;
      if (i >= 0 && d < bestD) { best = i; bestD = d; }
    }
    return best;
  }

  function hover(panel, x, y) {
    const i = pickAt(panel, x, y, 3);
    if (i < 0) { tooltip.style.display = "none"; return; }
    tooltip.textContent = "";
    const name = document.createElement("b");
    name.textContent = nameOf(i);
    const cls = document.createElement("div");
    cls.textContent = S.classLabels[S.classes[i]] || "";
    tooltip.append(name, cls);
    tooltip.style.display = "block";
    const left = canvases[panel].offsetLeft + x + 12;
    tooltip.style.left = Math.min(left, stage.clientWidth - 240) + "px";
    tooltip.style.top = (y + 12) + "px";
  }

  function select(indices) {
    S.selected = Uint32Array.from(new Set(indices)).sort();
    fullDraw();
    S.seq += 1;
    // Positions in the payload; Python maps them back to the level's rows.
    answer();
  }

  function answer() {
    // `id` tells Python a new answer from the one it already took (a reloaded frame counts again from 1).
    post("streamlit:setComponentValue", {value: {points: Array.from(S.selected), seq: S.seq, id: FRAME + ":" + S.seq},
                                         dataType: "json"});
  }

  function onClick(panel, x, y, additive) {
    const i = pickAt(panel, x, y, 4);
    if (i < 0) { if (!additive && S.selected.length) select([]); return; }  // empty space clears
    select(additive ? [...S.selected, i] : [i]);
  }

  function selectBox(panel, x0, y0, x1, y1) {
    // Screen rectangle -> world rectangle -> every point inside, on the CPU: exact, and it finds
    // points hidden under others too.
    const [ax, ay] = toWorld(panel, x0, y0), [bx, by] = toWorld(panel, x1, y1);
    const lx = Math.min(ax, bx), hx = Math.max(ax, bx), ly = Math.min(ay, by), hy = Math.max(ay, by);
    const pos = S.pos[panel], hits = [];
    for (let i = 0; i < S.n; i++) {
      const x = pos[2 * i], y = pos[2 * i + 1];
      if (x >= lx && x <= hx && y >= ly && y <= hy) hits.push(i);
    }
    select(hits);
  }
  function selectLasso(panel, path) {
    // The lasso filled into a mask the size of the panel; a point is in when its pixel is.
    const mask = document.createElement("canvas");
    mask.width = S.width; mask.height = S.height;
    const g = mask.getContext("2d");
    g.beginPath();
    path.forEach(([x, y], k) => (k ? g.lineTo(x, y) : g.moveTo(x, y)));
    g.closePath();
    g.fill();
    const alpha = g.getImageData(0, 0, S.width, S.height).data;
    const v = S.view, pos = S.pos[panel], hits = [];
    const hx = S.width / 2 - v.cx * v.scale, hy = S.height / 2 + v.cy * v.scale;
    for (let i = 0; i < S.n; i++) {
      const x = (pos[2 * i] * v.scale + hx) | 0, y = (hy - pos[2 * i + 1] * v.scale) | 0;
      if (x >= 0 && y >= 0 && x < S.width && y < S.height && alpha[4 * (y * S.width + x) + 3] > 127) hits.push(i);
    }
    select(hits);
  }
  window.addEventListener("keydown", (event) => { if (event.key === "Escape" && S.selected.length) select([]); });

  function drawHeader(args) {
    el("title").textContent = args.title || "";
    el("caption").textContent = args.caption || "";
    ["a", "b"].forEach((panel, k) => {
      const node = el("title-" + panel);
      node.textContent = "";
      const mark = document.createElement("span");
      mark.textContent = "\u25A0 ";
      mark.style.color = (args.panel_colours || [])[k] || "#52606d";
      const label = document.createElement("b");
      label.textContent = (args.panel_titles || [])[k] || "";
      node.append(mark, label, document.createTextNode(k ? " (aligned)" : " (baseline)"));
    });
    const legend = el("legend");
    legend.textContent = "";
    for (const entry of args.legend || []) {
      const item = document.createElement("span");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = entry.colour;
      item.append(swatch, document.createTextNode(entry.label));
      legend.append(item);
    }
  }

  function load(args, arrived) {
    S.n = args.points | 0;
    S.pos.a = typed(args.positions_a, Float32Array);
    S.pos.b = typed(args.positions_b, Float32Array);
    S.classes = args.class_bytes === 2 ? typed(args.classes, Uint16Array) : typed(args.classes, Uint8Array);
    S.names = args.names ? typed(args.names, Uint8Array) : new Uint8Array(0);
    S.offsets = args.name_offsets ? typed(args.name_offsets, Uint32Array) : new Uint32Array(S.n + 1);
    S.classLabels = args.class_labels || [];
    const palette = args.palette || [];
    S.palette = Uint32Array.from(palette, (c) => rgba32(c[0], c[1], c[2]));
    S.dimmed = Uint32Array.from(palette, (c) => rgba32(mix(c[0], DIM), mix(c[1], DIM), mix(c[2], DIM)));
    S.size = args.point_size || 2;
    S.filename = args.filename || "projection";
    S.selected = new Uint32Array(0);
    S.dataId = args.data_id;
    metrics.loads += 1;
    metrics.lastLoadMs = performance.now() - arrived;
    pendingFirstFrame = arrived;
  }

  function render(args) {
    const arrived = performance.now();
    try {
      S.args = args;
      drawHeader(args);
      const width = Math.max(100, Math.floor((document.body.clientWidth - 24 - 8) / 2) - 2);
      const height = args.height || 560;
      const fresh = args.data_id !== S.dataId;
      const resized = width !== S.width || height !== S.height;
      const hadSelection = S.selected.length > 0;
      if (fresh) load(args, arrived);
      if (fresh && hadSelection) { S.seq += 1; answer(); }  // new points: the old selection is gone
      if (resized) {
        S.width = width; S.height = height;
        for (const panel of ["a", "b"]) { canvases[panel].width = width; canvases[panel].height = height; }
      }
      if (fresh || resized || !S.view) {
        S.view = fit(args.bounds || [-1, 1, -1, 1], width, height);
        fullDraw();
      }
      post("streamlit:setFrameHeight", {height: document.body.scrollHeight});
    } catch (error) {
      metrics.error = String(error && error.message || error);
      throw error;
    }
  }

  function exportPng(factor) {
    // One image as a paper wants it, at `factor` (2) times the screen: title, panel titles, both
    // panels drawn exactly at that size, legend and caption.
    factor = factor || 2;
    const W = S.width * factor, H = S.height * factor, pad = 12 * factor, line = 20 * factor, gap = 8 * factor;
    const legend = S.args.legend || [];
    const perRow = Math.max(1, Math.floor((2 * W) / (220 * factor)));
    const legendRows = Math.ceil(legend.length / perRow);
    const out = document.createElement("canvas");
    out.width = 2 * W + gap + 2 * pad;
    out.height = H + (4.2 + legendRows) * line + 2 * pad;
    const g = out.getContext("2d");
    const font = (px, bold) => `${bold ? "bold " : ""}${px * factor}px Inter, Helvetica Neue, Arial, sans-serif`;
    g.fillStyle = "#ffffff"; g.fillRect(0, 0, out.width, out.height);
    g.fillStyle = "#1f2933"; g.textBaseline = "top";
    g.font = font(17); g.fillText(S.args.title || "", pad, pad);
    g.font = font(14, true);
    (S.args.panel_titles || []).forEach((t, k) => g.fillText(t + (k ? " (aligned)" : " (baseline)"),
                                                            pad + k * (W + gap), pad + 1.5 * line));
    const top = pad + 2.7 * line;
    ["a", "b"].forEach((panel, k) => {
      const {pixels} = splat(panel, S.view, W, H, factor);
      const tile = document.createElement("canvas");
      tile.width = W; tile.height = H;
      tile.getContext("2d").putImageData(new ImageData(pixels, W, H), 0, 0);
      g.drawImage(tile, pad + k * (W + gap), top);
      g.strokeStyle = "#e6e8eb"; g.strokeRect(pad + k * (W + gap), top, W, H);
    });
    g.font = font(12);
    legend.forEach((entry, k) => {
      const x = pad + (k % perRow) * (2 * W) / perRow, y = top + H + 0.5 * line + Math.floor(k / perRow) * line;
      g.fillStyle = entry.colour; g.beginPath(); g.arc(x + 5 * factor, y + 6 * factor, 5 * factor, 0, 2 * Math.PI);
      g.fill();
      g.fillStyle = "#1f2933"; g.fillText(entry.label, x + 14 * factor, y);
    });
    g.fillStyle = "#52606d";
    g.fillText(S.args.caption || "", pad, top + H + (legendRows + 0.8) * line);
    const link = document.createElement("a");
    link.download = S.filename + ".png";
    link.href = out.toDataURL("image/png");
    link.click();
    return out;
  }
  el("png").addEventListener("click", () => exportPng(2));

  function measureFps(seconds) {
    // Programmatic pan and zoom for `seconds`: a new view every animation frame; the rate is frames
    // drawn per second. Resolves after the exact redraw that follows, with its time.
    return new Promise((resolve) => {
      const start = performance.now(), base = Object.assign({}, S.view), first = metrics.frames;
      const fulls = metrics.fullDraws;
      function step(now) {
        const t = (now - start) / 1000;
        setView({scale: base.scale * Math.exp(0.6 * Math.sin(t * 1.3)),
                 cx: base.cx + Math.sin(t * 2) * 60 / base.scale, cy: base.cy + Math.cos(t * 2) * 40 / base.scale});
        if (t < seconds) { requestAnimationFrame(step); return; }
        const frames = metrics.frames - first;
        const settle = () => (metrics.fullDraws > fulls ? resolve({frames: frames, seconds: t, fps: frames / t,
                                                                     fullDrawMs: metrics.lastFullMs})
                                                         : setTimeout(settle, 20));
        settle();
      }
      requestAnimationFrame(step);
    });
  }

  window.pointCloud = {metrics: metrics, state: S, select: select, selectBox: selectBox,
                       selectLasso: selectLasso, pickAt: pickAt,
                       exportPng: exportPng, measureFps: measureFps, setView: setView};

  window.addEventListener("message", (event) => {
    const data = event.data;
    if (data && data.type === "streamlit:render") render(data.args || {});
  });
  post("streamlit:componentReady", {apiVersion: 1});
})();
