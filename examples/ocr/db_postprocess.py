"""Text boxes from a DB (differentiable binarization) probability map, the way
PaddleOCR's DBPostProcess finds them, in NumPy and SciPy instead of OpenCV and
pyclipper: threshold, connected components, min-area rectangle, box score,
unclip, scale back to the image; then PaddleOCR's reading order.

Boxes are float arrays of 4 (x, y) corners: top-left, top-right, bottom-right,
bottom-left, in pixel-centre coordinates (as OpenCV's contours are).
"""
import numpy as np
from scipy import ndimage


def convex_hull(points):
    """Andrew's monotone chain; counter-clockwise in image coordinates' sense of
    the cross product, without repeated or collinear points."""
    pts = np.unique(np.asarray(points, np.float64), axis=0)  # sorted by x, then y
    if len(pts) < 3:
        return pts

    def half(seq):
        out = []
        for p in seq:
            while len(out) >= 2 and np.cross(out[-1] - out[-2], p - out[-2]) <= 0:
                out.pop()
            out.append(p)
        return out

    lower, upper = half(pts), half(pts[::-1])
    return np.array(lower[:-1] + upper[:-1])


def order_corners(rect):
    """PaddleOCR's get_mini_boxes order: of the two leftmost corners the upper is
    top-left, of the two rightmost the upper is top-right."""
    r = rect[np.lexsort((rect[:, 1], rect[:, 0]))]
    tl, bl = (r[0], r[1]) if r[0, 1] <= r[1, 1] else (r[1], r[0])
    tr, br = (r[2], r[3]) if r[2, 1] <= r[3, 1] else (r[3], r[2])
    return np.array([tl, tr, br, bl])


def min_area_rect(points):
    """The smallest-area rectangle around `points` (rotating calipers: one side
    of it lies on an edge of the convex hull) as ordered corners, and its
    shorter side."""
    hull = convex_hull(points)
    if len(hull) == 1:
        return np.repeat(hull, 4, axis=0), 0.0
    edges = np.roll(hull, -1, axis=0) - hull
    edges = edges[np.hypot(edges[:, 0], edges[:, 1]) > 0]
    u = edges / np.hypot(edges[:, 0], edges[:, 1])[:, None]   # one side's direction per edge
    v = np.stack([-u[:, 1], u[:, 0]], axis=1)                 # the other side's
    pu, pv = hull @ u.T, hull @ v.T                           # [points, edges]
    lo_u, hi_u, lo_v, hi_v = pu.min(0), pu.max(0), pv.min(0), pv.max(0)
    k = int(np.argmin((hi_u - lo_u) * (hi_v - lo_v)))
    rect = np.array([a * u[k] + b * v[k] for a, b in
                     ((lo_u[k], lo_v[k]), (hi_u[k], lo_v[k]), (hi_u[k], hi_v[k]), (lo_u[k], hi_v[k]))])
    return order_corners(rect), float(min(hi_u[k] - lo_u[k], hi_v[k] - lo_v[k]))


def box_score(prob, box):
    """Mean probability over the pixels inside the box (PaddleOCR's "fast"
    score: the box is filled with its corners truncated to integers)."""
    h, w = prob.shape
    x0, x1 = np.clip([np.floor(box[:, 0].min()), np.ceil(box[:, 0].max())], 0, w - 1).astype(int)
    y0, y1 = np.clip([np.floor(box[:, 1].min()), np.ceil(box[:, 1].max())], 0, h - 1).astype(int)
    corners = box.astype(np.int32).astype(np.float64)
    ys, xs = np.mgrid[y0:y1 + 1, x0:x1 + 1]
    cx, cy = corners[:, 0], corners[:, 1]
    # Inside is the same side of every edge (boundary included): which side, the winding says.
    sign = 1.0 if np.dot(cx, np.roll(cy, -1)) - np.dot(cy, np.roll(cx, -1)) >= 0 else -1.0
    inside = np.ones(xs.shape, bool)
    for i in range(4):
        a, b = corners[i], corners[(i + 1) % 4]
        inside &= sign * ((b[0] - a[0]) * (ys - a[1]) - (b[1] - a[1]) * (xs - a[0])) >= 0
    region = prob[y0:y1 + 1, x0:x1 + 1]
    return float(region[inside].mean()) if inside.any() else 0.0


def unclip(box, ratio):
    """The box grown by area * ratio / perimeter on every side. PaddleOCR offsets
    the polygon with pyclipper (rounded corners) and takes the min-area
    rectangle of that, which is exactly this rectangle."""
    x, y = box[:, 0], box[:, 1]
    area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    perimeter = np.hypot(*(np.roll(box, -1, axis=0) - box).T).sum()
    d = area * ratio / perimeter if perimeter > 0 else 0.0
    centre = box.mean(0)
    u, v = box[1] - box[0], box[3] - box[0]
    lu, lv = np.hypot(*u), np.hypot(*v)
    u = u / lu if lu > 0 else np.array([1.0, 0.0])
    v = v / lv if lv > 0 else np.array([0.0, 1.0])
    hu, hv = lu / 2 + d, lv / 2 + d
    return np.array([centre - hu * u - hv * v, centre + hu * u - hv * v,
                     centre + hu * u + hv * v, centre - hu * u + hv * v])


def boxes_from_map(prob, dest_w, dest_h, thresh=0.3, box_thresh=0.6, unclip_ratio=1.5,
                   min_size=3, max_candidates=1000):
    """Text boxes in a [H, W] probability map, in the coordinates of a
    dest_w x dest_h image, with their scores."""
    h, w = prob.shape
    # 8-connected, as OpenCV's contour tracing joins pixels.
    labels, n = ndimage.label(prob > thresh, structure=np.ones((3, 3), bool))
    boxes, scores = [], []
    for i, sl in enumerate(ndimage.find_objects(labels)[:max_candidates]):
        ys, xs = np.nonzero(labels[sl] == i + 1)
        pts = np.stack([xs + sl[1].start, ys + sl[0].start], axis=1)
        box, short = min_area_rect(pts)
        if short < min_size:
            continue
        score = box_score(prob, box)
        if score < box_thresh:
            continue
        box, short = min_area_rect(unclip(box, unclip_ratio))
        if short < min_size + 2:
            continue
        box[:, 0] = np.clip(np.round(box[:, 0] / w * dest_w), 0, dest_w)
        box[:, 1] = np.clip(np.round(box[:, 1] / h * dest_h), 0, dest_h)
        boxes.append(box)
        scores.append(score)
    return filter_boxes(boxes, scores, dest_w, dest_h)


def filter_boxes(boxes, scores, w, h):
    """PaddleOCR's filter_tag_det_res: corners clockwise from top-left, inside
    the image, and no box 3 pixels thin or less."""
    kept = []
    for box, score in zip(boxes, scores):
        s = box.sum(1)
        rest = np.delete(box, [np.argmin(s), np.argmax(s)], axis=0)
        d = rest[:, 1] - rest[:, 0]
        box = np.array([box[np.argmin(s)], rest[np.argmin(d)], box[np.argmax(s)], rest[np.argmax(d)]])
        box[:, 0] = np.clip(box[:, 0], 0, w - 1)
        box[:, 1] = np.clip(box[:, 1], 0, h - 1)
        if int(np.hypot(*(box[0] - box[1]))) <= 3 or int(np.hypot(*(box[0] - box[3]))) <= 3:
            continue
        kept.append((box, score))
    return kept


def reading_order(items):
    """PaddleOCR's sorted_boxes: by top-left corner, top to bottom, then left to
    right among boxes whose tops are within 10 pixels (one line)."""
    items = sorted(items, key=lambda it: (it[0][0][1], it[0][0][0]))
    for i in range(len(items) - 1):
        for j in range(i, -1, -1):
            a, b = items[j][0][0], items[j + 1][0][0]
            if abs(b[1] - a[1]) < 10 and b[0] < a[0]:
                items[j], items[j + 1] = items[j + 1], items[j]
            else:
                break
    return items
