// Training curves as a small hand-written SVG: one panel per axis kind (loss,
// accuracy), each with its axes, "nice" ticks (1/2/5 x 10^k) and a legend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "io/atomic_write.h"
#include "rlx/error.h"
#include "rlx/train.h"

namespace rlx::train {
namespace {

constexpr double kPanelW = 460, kPanelH = 320, kLeft = 64, kRight = 16, kTop = 48, kBottom = 44;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// Ticks covering [lo, hi] at a 1/2/5 x 10^k spacing; widens the range to them.
std::vector<double> nice_ticks(double& lo, double& hi) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / 5, mag = std::pow(10, std::floor(std::log10(raw)));
  const double frac = raw / mag, step = (frac < 1.5   ? 1
                                         : frac < 3.5 ? 2
                                         : frac < 7.5 ? 5
                                                      : 10) *
                                        mag;
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  std::vector<double> ticks;
  for (double t = lo; t <= hi + step * 1e-6; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

void panel(std::string& s, double ox, const std::string& axis, const std::vector<const Curve*>& cs,
           size_t& color) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const Curve* c : cs)
    for (size_t i = 0; i < c->x.size() && i < c->y.size(); ++i) {
      if (!std::isfinite(c->y[i])) continue;
      x0 = std::min(x0, c->x[i]), x1 = std::max(x1, c->x[i]);
      y0 = std::min(y0, c->y[i]), y1 = std::max(y1, c->y[i]);
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  const std::vector<double> xt = nice_ticks(x0, x1), yt = nice_ticks(y0, y1);
  const double w = kPanelW - kLeft - kRight, h = kPanelH - kTop - kBottom;
  auto px = [&](double x) { return ox + kLeft + (x - x0) / (x1 - x0) * w; };
  auto py = [&](double y) { return kTop + h - (y - y0) / (y1 - y0) * h; };

  s += "<g font-family=\"sans-serif\" font-size=\"11\">\n";
  for (double t : yt) {
    s += "<line x1=\"" + fmt(px(x0)) + "\" x2=\"" + fmt(px(x1)) + "\" y1=\"" + fmt(py(t)) +
         "\" y2=\"" + fmt(py(t)) + "\" stroke=\"#e5e5e5\"/>\n";
    s += "<text x=\"" + fmt(px(x0) - 6) + "\" y=\"" + fmt(py(t) + 4) + "\" text-anchor=\"end\">" +
         fmt(t) + "</text>\n";
  }
  for (double t : xt) {
    s += "<line x1=\"" + fmt(px(t)) + "\" x2=\"" + fmt(px(t)) + "\" y1=\"" + fmt(py(y0)) +
         "\" y2=\"" + fmt(py(y0) + 5) + "\" stroke=\"#333\"/>\n";
    s += "<text x=\"" + fmt(px(t)) + "\" y=\"" + fmt(py(y0) + 18) + "\" text-anchor=\"middle\">" +
         fmt(t) + "</text>\n";
  }
  // Axes, then their labels.
  s += "<polyline fill=\"none\" stroke=\"#333\" points=\"" + fmt(px(x0)) + "," + fmt(py(y1)) + " " +
       fmt(px(x0)) + "," + fmt(py(y0)) + " " + fmt(px(x1)) + "," + fmt(py(y0)) + "\"/>\n";
  s += "<text x=\"" + fmt(ox + kLeft + w / 2) + "\" y=\"" + fmt(kPanelH - 6) +
       "\" text-anchor=\"middle\">epoch</text>\n";
  s += "<text x=\"" + fmt(ox + 14) + "\" y=\"" + fmt(kTop + h / 2) + "\" text-anchor=\"middle\" " +
       "transform=\"rotate(-90 " + fmt(ox + 14) + " " + fmt(kTop + h / 2) + ")\">" + escape(axis) +
       "</text>\n";
  double ly = kTop + 4;
  for (const Curve* c : cs) {
    const std::string col = kColors[color++ % (sizeof kColors / sizeof *kColors)];
    std::string pts;
    for (size_t i = 0; i < c->x.size() && i < c->y.size(); ++i)
      if (std::isfinite(c->y[i])) pts += fmt(px(c->x[i])) + "," + fmt(py(c->y[i])) + " ";
    s += "<polyline fill=\"none\" stroke-width=\"" + fmt(c->width) + "\" stroke=\"" + col +
         (c->points ? "" : "\" stroke-opacity=\"0.45") + "\" points=\"" + pts + "\"/>\n";
    for (size_t i = 0; i < c->x.size() && i < c->y.size() && c->points && c->x.size() <= 64; ++i)
      if (std::isfinite(c->y[i]))
        s += "<circle r=\"3\" fill=\"" + col + "\" cx=\"" + fmt(px(c->x[i])) + "\" cy=\"" +
             fmt(py(c->y[i])) + "\"/>\n";
    // Legend, top right of the panel.
    const double lx = ox + kPanelW - kRight - 150;
    s += "<line x1=\"" + fmt(lx) + "\" x2=\"" + fmt(lx + 18) + "\" y1=\"" + fmt(ly) + "\" y2=\"" +
         fmt(ly) + "\" stroke-width=\"2\" stroke=\"" + col + "\"/>\n";
    s += "<text x=\"" + fmt(lx + 24) + "\" y=\"" + fmt(ly + 4) + "\">" + escape(c->name) +
         "</text>\n";
    ly += 16;
  }
  s += "</g>\n";
}

}  // namespace

std::string curves_svg(const std::vector<Curve>& curves, const std::string& title) {
  std::vector<std::string> axes;
  std::map<std::string, std::vector<const Curve*>> by_axis;
  for (const Curve& c : curves) {
    if (!by_axis.count(c.axis)) axes.push_back(c.axis);
    by_axis[c.axis].push_back(&c);
  }
  if (axes.empty()) axes.push_back("loss");
  const double width = kPanelW * double(axes.size());
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt(width) +
                  "\" height=\"" + fmt(kPanelH) + "\" viewBox=\"0 0 " + fmt(width) + " " +
                  fmt(kPanelH) + "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + fmt(width / 2) +
       "\" y=\"22\" font-family=\"sans-serif\" font-size=\"14\" "
       "text-anchor=\"middle\">" +
       escape(title) + "</text>\n";
  size_t color = 0;
  for (size_t i = 0; i < axes.size(); ++i)
    panel(s, kPanelW * double(i), axes[i], by_axis[axes[i]], color);
  return s + "</svg>\n";
}

void write_curves_svg(const std::string& path, const std::vector<Curve>& curves,
                      const std::string& title) {
  const std::string svg = curves_svg(curves, title);
  io::write_file_atomic(path, {svg});
}

}  // namespace rlx::train
