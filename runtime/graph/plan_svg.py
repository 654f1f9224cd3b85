"""A JobGraph drawn as SVG, the way Flink's web UI draws a job plan: one box per JobVertex
(an operator chain, its operators listed head first, its parallelism), laid out left to
right by depth from the sources, with arrows labelled by ship strategy (HASH, FORWARD,
REBALANCE, ...).

Pure and server-side: the same JobGraph gives the same picture, no JavaScript needed to
read it. Every name is escaped; a name too long for its box is wrapped, and the box's
``<title>`` (a tooltip) carries the full vertex name.
"""
from __future__ import annotations

import textwrap
from html import escape

BOX_WIDTH = 300
LINE_HEIGHT = 16
PADDING = 10
COLUMN_GAP = 120        # room for an edge's label between two columns
ROW_GAP = 28
MARGIN = 16
CHAR_WIDTH = 7.4        # an average 12px sans-serif character, rounded up: how much text fits a line
LINES_PER_OPERATOR = 4

_STYLE = """
.vertex rect { fill: #f3f6fb; stroke: #4a6fa5; stroke-width: 1.5; }
.vertex.source rect { fill: #eef8f0; stroke: #3f8f57; }
.vertex.sink rect { fill: #fbf3ec; stroke: #b7773f; }
.vertex text { font: 12px sans-serif; fill: #1d2733; }
.vertex .parallelism { font-weight: bold; }
.vertex .chained { fill: #5b6775; }
.edge path { fill: none; stroke: #7b8794; stroke-width: 1.5; }
.edge rect { fill: #ffffff; }
.edge text { font: bold 11px sans-serif; fill: #364152; text-anchor: middle; }
"""


def job_graph_svg(job_graph) -> str:
    """The JobGraph as a standalone ``<svg>`` element."""
    depth = _depths(job_graph)
    columns: dict[int, list] = {}
    for vertex in job_graph.vertices:
        columns.setdefault(depth[vertex.id], []).append(vertex)
    lines = {v.id: _vertex_lines(v) for v in job_graph.vertices}
    heights = {vid: 2 * PADDING + LINE_HEIGHT * (len(ls) + 1) for vid, ls in lines.items()}
    column_heights = {c: sum(heights[v.id] for v in vs) + ROW_GAP * (len(vs) - 1) for c, vs in columns.items()}
    height = max(column_heights.values(), default=0) + 2 * MARGIN
    width = len(columns) * (BOX_WIDTH + COLUMN_GAP) - COLUMN_GAP + 2 * MARGIN

    boxes = {}      # vertex id -> (x, y, height); each column centred vertically
    for c, vertices in columns.items():
        x = MARGIN + c * (BOX_WIDTH + COLUMN_GAP)
        y = (height - column_heights[c]) / 2
        for v in vertices:
            boxes[v.id] = (x, y, heights[v.id])
            y += heights[v.id] + ROW_GAP

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="job-graph" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(job_graph.job_name)} job graph">',
           f"<style>{_STYLE}</style>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#7b8794"/></marker></defs>']
    out += _edges(job_graph, boxes)
    out += [_vertex(v, boxes[v.id], lines[v.id]) for v in job_graph.vertices]
    out.append("</svg>")
    return "\n".join(out)


def _depths(job_graph) -> dict[int, int]:
    """Each vertex's column: the longest path to it from a source (vertices are topologically sorted)."""
    depth: dict[int, int] = {}
    for v in job_graph.vertices:
        depth[v.id] = max((depth[e.source_vertex] + 1 for e in job_graph.inputs_of(v.id)), default=0)
    return depth


def _vertex_lines(vertex) -> list[tuple[str, str]]:
    """(css class, text) per line: the chained operators, head first, wrapped to the box."""
    width = int((BOX_WIDTH - 2 * PADDING) / CHAR_WIDTH)
    lines = []
    for i, op in enumerate(vertex.operators):
        prefix = "" if i == 0 else "\u2192 "       # "→": chained to the operator above
        wrapped = textwrap.wrap(prefix + op.operator_name, width, max_lines=LINES_PER_OPERATOR,
                                placeholder=" \u2026", subsequent_indent="  ")
        lines += [("operator" if i == 0 else "chained", text) for text in wrapped]
    return lines


def _vertex(vertex, box, lines) -> str:
    x, y, h = box
    kind = vertex.head.kind if vertex.head.kind in ("source", "sink") else "operator"
    parallelism = f"Parallelism: {vertex.parallelism}"
    if vertex.is_keyed:
        parallelism += f" (max {vertex.max_parallelism})"
    texts = [f'<text x="{x + PADDING}" y="{y + PADDING + LINE_HEIGHT * (i + 1) - 4}" class="{css}">{escape(t)}</text>'
             for i, (css, t) in enumerate(lines)]
    texts.append(f'<text x="{x + PADDING}" y="{y + PADDING + LINE_HEIGHT * (len(lines) + 1) - 4}" '
                 f'class="parallelism">{escape(parallelism)}</text>')
    return (f'<g class="vertex {kind}" data-vertex-id="{escape(vertex.vertex_id)}" '
            f'data-parallelism="{vertex.parallelism}">'
            f"<title>{escape(vertex.name)}</title>"
            f'<rect x="{x}" y="{y}" width="{BOX_WIDTH}" height="{h}" rx="6"/>' + "".join(texts) + "</g>")


def _edges(job_graph, boxes) -> list[str]:
    out = []
    for vertex in job_graph.vertices:
        inputs = job_graph.inputs_of(vertex.id)
        tx, ty, th = boxes[vertex.id]
        for i, edge in enumerate(inputs):
            sx, sy, sh = boxes[edge.source_vertex]
            x1, y1 = sx + BOX_WIDTH, sy + sh / 2
            x2, y2 = tx, ty + th * (i + 1) / (len(inputs) + 1)      # inputs spread over the left side
            bend = (x2 - x1) / 2
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
            label = escape(edge.ship_strategy)
            label_width = len(edge.ship_strategy) * 7.5 + 8
            out.append(
                f'<g class="edge" data-source="{escape(job_graph.vertex(edge.source_vertex).vertex_id)}" '
                f'data-target="{escape(vertex.vertex_id)}" data-ship-strategy="{label}">'
                f'<path d="M {x1} {y1} C {x1 + bend} {y1}, {x2 - bend} {y2}, {x2} {y2}" marker-end="url(#arrow)"/>'
                f'<rect x="{mx - label_width / 2}" y="{my - 9}" width="{label_width}" height="16" rx="3"/>'
                f'<text x="{mx}" y="{my + 3}">{label}</text></g>')
    return out
