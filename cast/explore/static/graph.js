// The turn's entity graph drawn as SVG in plain JavaScript (no library): a force-directed layout, nodes sized by
// their rank (PageRank for EG), query entities and the chosen passages' entities marked, nodes draggable.
// Entity names are set with textContent.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 800;
  const HEIGHT = 420;
  const MARGIN = 40;
  const ITERATIONS = 300;

  function svgEl(tag, attrs = {}) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
    return node;
  }

  // Fruchterman-Reingold from a circle (deterministic: the same graph always gets the same picture).
  function layout(nodes, edges) {
    const n = nodes.length;
    const pos = nodes.map((_, i) => ({
      x: WIDTH / 2 + (WIDTH / 3) * Math.cos((2 * Math.PI * i) / Math.max(n, 1)),
      y: HEIGHT / 2 + (HEIGHT / 3) * Math.sin((2 * Math.PI * i) / Math.max(n, 1)),
    }));
    if (n < 2) {
      if (n === 1) pos[0] = { x: WIDTH / 2, y: HEIGHT / 2 };
      return pos;
    }
    const index = new Map(nodes.map((node, i) => [node.id, i]));
    const links = edges
      .map((e) => [index.get(e.source), index.get(e.target)])
      .filter(([a, b]) => a !== undefined && b !== undefined);
    const k = Math.sqrt(((WIDTH - 2 * MARGIN) * (HEIGHT - 2 * MARGIN)) / n) * 0.8;
    let temperature = WIDTH / 8;
    for (let step = 0; step < ITERATIONS; step++) {
      const shift = pos.map(() => ({ x: 0, y: 0 }));
      for (let i = 0; i < n; i++) {
        for (let j = i + 1; j < n; j++) {
          const dx = pos[i].x - pos[j].x || 0.01 * (i - j);
          const dy = pos[i].y - pos[j].y || 0.01;
          const dist = Math.max(Math.hypot(dx, dy), 0.01);
          const force = (k * k) / dist;
          shift[i].x += (dx / dist) * force;
          shift[i].y += (dy / dist) * force;
          shift[j].x -= (dx / dist) * force;
          shift[j].y -= (dy / dist) * force;
        }
      }
      for (const [a, b] of links) {
        const dx = pos[a].x - pos[b].x;
        const dy = pos[a].y - pos[b].y;
        const dist = Math.max(Math.hypot(dx, dy), 0.01);
        const force = (dist * dist) / k;
        shift[a].x -= (dx / dist) * force;
        shift[a].y -= (dy / dist) * force;
        shift[b].x += (dx / dist) * force;
        shift[b].y += (dy / dist) * force;
      }
      for (let i = 0; i < n; i++) {
        // A weak pull to the centre keeps disconnected entities on the canvas.
        shift[i].x += (WIDTH / 2 - pos[i].x) * 0.05 * k / 10;
        shift[i].y += (HEIGHT / 2 - pos[i].y) * 0.05 * k / 10;
        const length = Math.max(Math.hypot(shift[i].x, shift[i].y), 0.01);
        pos[i].x += (shift[i].x / length) * Math.min(length, temperature);
        pos[i].y += (shift[i].y / length) * Math.min(length, temperature);
        pos[i].x = Math.min(WIDTH - MARGIN, Math.max(MARGIN, pos[i].x));
        pos[i].y = Math.min(HEIGHT - MARGIN, Math.max(MARGIN, pos[i].y));
      }
      temperature *= 0.98;
    }
    return pos;
  }

  function radius(node, maxRank) {
    if (node.rank === null || node.rank === undefined || !(maxRank > 0)) return 9;
    return 6 + 18 * Math.sqrt(Math.max(node.rank, 0) / maxRank);
  }

  function nodeClass(node) {
    const classes = ["node"];
    if (node.query) classes.push("query");
    else if (node.history) classes.push("history");
    if (node.chosen) classes.push("chosen");
    if (node.focus) classes.push("focus");
    return classes.join(" ");
  }

  function truncate(text, length) {
    return text.length > length ? text.slice(0, length - 1) + "…" : text;
  }

  function draw(svg, graph, { onSelect } = {}) {
    svg.replaceChildren();
    const nodes = graph.nodes;
    if (!nodes.length) return;
    const pos = layout(nodes, graph.edges);
    const index = new Map(nodes.map((node, i) => [node.id, i]));
    const maxRank = Math.max(0, ...nodes.map((n) => n.rank || 0));
    const maxWeight = Math.max(0, ...graph.edges.map((e) => e.weight));

    const edgeLayer = svgEl("g", { class: "edges" });
    const nodeLayer = svgEl("g", { class: "nodes" });
    svg.append(edgeLayer, nodeLayer);

    const lines = [];
    for (const edge of graph.edges) {
      const a = index.get(edge.source);
      const b = index.get(edge.target);
      if (a === undefined || b === undefined) continue;
      const width = maxWeight > 0 ? 0.8 + 3 * (edge.weight / maxWeight) : 1;
      const line = svgEl("line", { class: "edge", "stroke-width": width.toFixed(2) });
      const title = svgEl("title");
      title.textContent = `${nodes[a].label} — ${nodes[b].label}: weight ${edge.weight}`;
      line.append(title);
      edgeLayer.append(line);
      lines.push({ line, a, b });
    }

    const groups = nodes.map((node, i) => {
      const group = svgEl("g", { class: nodeClass(node), tabindex: 0 });
      const r = radius(node, maxRank);
      if (node.focus) group.append(svgEl("circle", { class: "focus-ring", r: r + 5 }));
      group.append(svgEl("circle", { class: "dot", r }));
      const label = svgEl("text", { y: r + 13, "text-anchor": "middle" });
      label.textContent = truncate(node.label, 28);
      group.append(label);
      const title = svgEl("title");
      const rank = node.rank === null || node.rank === undefined ? "no rank" : `rank ${node.rank.toFixed(4)}`;
      const marks = [node.query && "query entity", node.history && "earlier query entity", node.chosen && "in a chosen passage", node.focus && "focus entity"].filter(Boolean);
      title.textContent = `${node.label} (${rank}${marks.length ? "; " + marks.join(", ") : ""})\n${node.id}\npassages: ${node.passages.join(", ") || "none"}`;
      group.append(title);
      nodeLayer.append(group);
      return group;
    });

    function place() {
      for (const { line, a, b } of lines) {
        line.setAttribute("x1", pos[a].x.toFixed(1));
        line.setAttribute("y1", pos[a].y.toFixed(1));
        line.setAttribute("x2", pos[b].x.toFixed(1));
        line.setAttribute("y2", pos[b].y.toFixed(1));
      }
      groups.forEach((group, i) => group.setAttribute("transform", `translate(${pos[i].x.toFixed(1)},${pos[i].y.toFixed(1)})`));
    }
    place();

    let selected = null;
    function select(i) {
      selected = selected === i ? null : i;
      groups.forEach((group, j) => group.classList.toggle("selected", j === selected));
      if (onSelect) onSelect(selected === null ? null : nodes[selected]);
    }

    // Dragging moves a node (and its edges); a press without movement selects it.
    groups.forEach((group, i) => {
      let drag = null;
      group.addEventListener("pointerdown", (event) => {
        const point = svgPoint(svg, event);
        drag = { dx: pos[i].x - point.x, dy: pos[i].y - point.y, moved: false };
        group.setPointerCapture(event.pointerId);
      });
      group.addEventListener("pointermove", (event) => {
        if (!drag) return;
        const point = svgPoint(svg, event);
        pos[i] = { x: point.x + drag.dx, y: point.y + drag.dy };
        drag.moved = true;
        place();
      });
      group.addEventListener("pointerup", () => {
        if (drag && !drag.moved) select(i);
        drag = null;
      });
      group.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") select(i);
      });
    });
  }

  function svgPoint(svg, event) {
    const point = svg.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    return point.matrixTransform(svg.getScreenCTM().inverse());
  }

  function legend(container) {
    const items = [
      ["query", "query entity"],
      ["history", "earlier query entity"],
      ["chosen", "in a chosen passage"],
      ["focus", "focus entity"],
      ["plain", "other entity"],
    ];
    container.replaceChildren(
      ...items.map(([cls, text]) => {
        const item = document.createElement("span");
        item.className = "legend-item";
        const swatch = document.createElement("span");
        swatch.className = `swatch ${cls}`;
        item.append(swatch, text);
        return item;
      }),
    );
  }

  window.EntityGraph = { draw, legend, layout };
})();
