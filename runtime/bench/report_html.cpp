#include "runtime/bench/report_html.h"

#include <fmt/format.h>

#include <algorithm>

#include "layerstream/units.h"
#include "runtime/bench/trace_export.h"

namespace layerstream::bench {
namespace {

std::string esc(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

const char* kind_color(sched::TraceKind k) {
  switch (k) {
    case sched::TraceKind::kCompute: return "#3b7dd8";
    case sched::TraceKind::kCopy: return "#e8912d";
    case sched::TraceKind::kDiskRead: return "#7a5cc4";
    case sched::TraceKind::kDiskChunk: return "#a58be0";
    case sched::TraceKind::kStall: return "#d93c3c";
    case sched::TraceKind::kCopyWait: return "#bbbbbb";
    case sched::TraceKind::kHostCompute: return "#3aa655";
  }
  return "#888";
}

int row_of(sched::TraceKind k) {
  switch (k) {
    case sched::TraceKind::kCompute:
    case sched::TraceKind::kHostCompute: return 0;  // one pass order: device and host compute alternate
    case sched::TraceKind::kStall: return 1;
    case sched::TraceKind::kCopy:
    case sched::TraceKind::kCopyWait: return 2;
    case sched::TraceKind::kDiskRead:
    case sched::TraceKind::kDiskChunk: return 3;
  }
  return 0;
}

// A "nice" tick step (1, 2, 5 x 10^k) giving about `target` ticks over `span`.
double tick_step(double span, int target) {
  double raw = span / std::max(1, target);
  double p = 1;
  while (p * 10 <= raw) p *= 10;
  while (p > raw) p /= 10;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (p * m >= raw) return p * m;
  return p * 10;
}

constexpr int kWidth = 1300, kLabelW = 90, kRowH = 26, kAxisH = 22;

std::string timeline_svg(const StrategyResult& s, double span_us) {
  const char* rows[] = {"compute", "stall", "copy", "disk"};
  const int plot_w = kWidth - kLabelW - 10;
  const int h = 4 * kRowH + kAxisH + 8;
  const double scale = span_us > 0 ? plot_w / span_us : 0;
  std::string o = fmt::format(
      "<svg class=\"timeline\" data-strategy=\"{}\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">\n",
      esc(s.name), kWidth, h, kWidth, h);
  for (int r = 0; r < 4; ++r) {
    int y = r * kRowH;
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", kLabelW, y + 2, plot_w,
                     kRowH - 4, r % 2 ? "#f4f4f4" : "#fafafa");
    o += fmt::format("<text x=\"4\" y=\"{}\">{}</text>\n", y + kRowH / 2 + 4, rows[r]);
  }
  o += fmt::format("<g class=\"events\" data-strategy=\"{}\">\n", esc(s.name));
  for (const sched::TraceEvent& e : s.timeline) {
    const int r = row_of(e.kind);
    const double x = kLabelW + e.start_us * scale;
    const double w = std::max(0.75, (e.end_us - e.start_us) * scale);
    const std::string lname = e.layer >= 0 && static_cast<size_t>(e.layer) < s.layers.size()
                                  ? s.layers[e.layer].name
                                  : fmt::format("layer{}", e.layer);
    o += fmt::format(
        "<rect class=\"ev {}\" x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" stroke=\"#fff\" "
        "stroke-width=\"0.5\"><title>{} {}: {:.3f} ms at {:.3f} ms{}</title></rect>",
        sched::trace_kind_name(e.kind), x, r * kRowH + 4, w, kRowH - 8, kind_color(e.kind),
        sched::trace_kind_name(e.kind), esc(lname), (e.end_us - e.start_us) * 1e-3, e.start_us * 1e-3,
        e.bytes ? ", " + format_bytes(e.bytes) : std::string());
    if (w > 7 * static_cast<double>(lname.size()) + 4 && e.kind != sched::TraceKind::kStall)
      o += fmt::format("<text x=\"{:.2f}\" y=\"{}\" fill=\"#fff\" font-size=\"10\">{}</text>", x + 2,
                       r * kRowH + kRowH / 2 + 4, esc(lname));
    o += "\n";
  }
  o += "</g>\n";
  // Axis in milliseconds.
  const int ay = 4 * kRowH + 2;
  o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\"/>", kLabelW, ay,
                   kLabelW + plot_w, ay);
  const double span_ms = span_us * 1e-3;
  const double step = tick_step(span_ms, 10);
  for (double t = 0; step > 0 && t <= span_ms * 1.0001; t += step) {
    const double x = kLabelW + t * 1e3 * scale;
    o += fmt::format("<line x1=\"{:.2f}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\" stroke=\"#444\"/>", x, ay, x, ay + 4);
    o += fmt::format("<text x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\">{:g} ms</text>", x, ay + 16, t);
  }
  o += "\n</svg>\n";
  return o;
}

std::string layer_bars_svg(const StrategyResult& s, double link_gbps) {
  const int n = static_cast<int>(s.layers.size());
  const int bar_h = 7, group_h = 2 * bar_h + 6, label_w = 110, plot_w = kWidth - label_w - 150;
  const int h = n * group_h + 40;
  double max_ms = 0;
  std::vector<double> xfer_ms(n), comp_ms(n);
  std::vector<bool> estimated(n, false);
  for (int i = 0; i < n; ++i) {
    const LayerTiming& l = s.layers[i];
    comp_ms[i] = l.compute_s * 1e3;
    xfer_ms[i] = l.transfer_s * 1e3;
    if (xfer_ms[i] <= 0 && link_gbps > 0) {
      xfer_ms[i] = l.bytes / (link_gbps * 1e9) * 1e3;
      estimated[i] = true;
    }
    max_ms = std::max({max_ms, comp_ms[i], xfer_ms[i]});
  }
  const double scale = max_ms > 0 ? plot_w / max_ms : 0;
  std::string o = fmt::format(
      "<svg class=\"layer-bars\" data-strategy=\"{}\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">\n",
      esc(s.name), kWidth, h, kWidth, h);
  for (int i = 0; i < n; ++i) {
    const LayerTiming& l = s.layers[i];
    const int y = i * group_h + 4;
    o += fmt::format("<text x=\"4\" y=\"{}\">{} ({})</text>", y + bar_h + 3, esc(l.name),
                     esc(l.site == "host" ? l.tier + ", host compute" : l.site == "split" ? l.tier + ", split device/host" : l.tier));
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"#3b7dd8\"><title>{} compute "
                     "{:.3f} ms</title></rect>",
                     label_w, y, std::max(0.5, comp_ms[i] * scale), bar_h, esc(l.name), comp_ms[i]);
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"{}><title>{} transfer "
                     "{:.3f} ms{}</title></rect>",
                     label_w, y + bar_h + 1, std::max(0.5, xfer_ms[i] * scale), bar_h,
                     estimated[i] ? "#f3c58f" : "#e8912d", estimated[i] ? " fill-opacity=\"0.8\"" : "", esc(l.name),
                     xfer_ms[i], estimated[i] ? " (estimated: bytes / link; not streamed)" : "");
    o += fmt::format("<text x=\"{:.2f}\" y=\"{}\" font-size=\"10\" fill=\"#555\">{:.2f} / {:.2f} ms</text>\n",
                     label_w + std::max(comp_ms[i], xfer_ms[i]) * scale + 6, y + bar_h + 3, comp_ms[i], xfer_ms[i]);
  }
  o += "</svg>\n";
  return o;
}

}  // namespace

std::string render_html_report(const BenchResult& r) {
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  o += fmt::format("<title>layerstream bench: {} ({})</title>\n", esc(r.model.file), esc(r.workload.mode));
  o += R"(<style>
body { font-family: sans-serif; margin: 20px; color: #222; max-width: 1340px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; font-size: 13px; }
th { background: #eee; } td.name { text-align: left; font-weight: bold; }
tr.best td { background: #e8f5e9; } tr.skipped td { color: #888; }
.meta { font-size: 13px; line-height: 1.5; } h2 { margin-top: 28px; } h3 { margin: 16px 0 4px; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
.plan { font-size: 12px; color: #555; font-family: monospace; }
</style></head><body>
)";
  o += "<h1>layerstream bench</h1>\n<div class=\"meta\">\n";
  o += fmt::format("<b>box</b>: {} backend, {}; link {:.2f} GB/s ({}), disk {:.2f} GB/s ({}){}<br>\n",
                   esc(r.box.backend), esc(r.box.device), r.box.link_gbps, esc(r.box.link_source), r.box.disk_gbps,
                   esc(r.box.disk_source),
                   r.box.sim_link_gbps > 0 ? fmt::format("; sim link {:.2f} GB/s", r.box.sim_link_gbps) : "");
  o += fmt::format("<b>model</b>: {} ({}, {} layers, {})<br>\n", esc(r.model.file), format_bytes(r.model.bytes),
                   r.model.layers, esc(r.model.dtype));
  o += fmt::format("<b>budget</b>: VRAM {}, pinned RAM {}<br>\n", format_bytes(r.vram_budget),
                   format_bytes(r.ram_budget));
  o += fmt::format("<b>workload</b>: {} mode, {} tokens per pass, {} warm-up + {} measured passes per strategy, "
                   "I/O {}; schedule: {} ({})\n</div>\n",
                   esc(r.workload.mode), r.workload.tokens_per_pass, r.workload.warmup, r.workload.passes,
                   esc(r.workload.io), esc(r.schedule), esc(r.schedule_reason));

  o += "<h2>Summary</h2>\n<table class=\"summary\"><tr><th>strategy</th><th>min ms</th><th>median ms</th><th>max "
       "ms</th><th>tokens/s</th><th>stall ms</th><th>streamed / pass</th><th>lower bound ms</th><th>predicted "
       "ms</th><th>overlap efficiency</th><th>vs best</th></tr>\n";
  for (const StrategyResult& s : r.strategies) {
    if (s.skipped) {
      o += fmt::format("<tr class=\"skipped\"><td class=\"name\">{}</td><td colspan=\"10\" style=\"text-align:left\">"
                       "skipped: {}</td></tr>\n",
                       esc(s.name), esc(s.skip_reason));
      continue;
    }
    o += fmt::format(
        "<tr class=\"{}\" data-strategy=\"{}\"><td class=\"name\">{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}"
        "</td><td>{:.1f}</td><td>{:.2f}</td><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.0f}%</td><td>{:.2f}x"
        "</td></tr>\n",
        s.name == r.best ? "best" : "", esc(s.name), esc(s.name), s.pass_ms.min, s.pass_ms.median, s.pass_ms.max,
        s.tokens_per_s, s.stall_ms, format_bytes(s.streamed_bytes), s.lower_bound_ms, s.predicted_ms,
        s.overlap_efficiency * 100, s.ratio_to_best);
  }
  o += "</table>\n";
  if (!r.reference.empty())
    o += fmt::format("<p><b>{}</b>: lower bound {:.2f} ms (max of summed compute, streamed bytes / link, disk bytes / "
                     "disk), predicted {:.2f} ms, overlap efficiency {:.0f}% (bound / median). Best: <b>{}</b>.</p>\n",
                     esc(r.reference), r.lower_bound_ms, r.predicted_ms, r.overlap_efficiency * 100, esc(r.best));

  double span = 0;
  for (const StrategyResult& s : r.strategies)
    for (const auto& e : s.timeline) span = std::max(span, e.end_us);
  o += "<h2>Timeline of one pass (the median one), same time scale for every strategy</h2>\n";
  o += "<div class=\"legend\"><span style=\"background:#3b7dd8\"></span>compute<span "
       "style=\"background:#d93c3c\"></span>stall (compute waiting for a load)<span "
       "style=\"background:#e8912d\"></span>H2D copy<span style=\"background:#7a5cc4\"></span>disk read</div>\n";
  for (const StrategyResult& s : r.strategies) {
    if (s.skipped) continue;
    o += fmt::format("<h3>{} &mdash; median {:.2f} ms</h3>\n<div class=\"plan\">{}</div>\n", esc(s.name),
                     s.pass_ms.median, esc(s.plan));
    o += timeline_svg(s, span);
  }
  o += "<h2>Per-layer compute vs transfer</h2>\n";
  o += "<div class=\"legend\"><span style=\"background:#3b7dd8\"></span>compute (measured)<span "
       "style=\"background:#e8912d\"></span>transfer (measured)<span style=\"background:#f3c58f\"></span>transfer "
       "(not streamed in this plan: bytes / link)</div>\n";
  for (const StrategyResult& s : r.strategies) {
    if (s.skipped || s.name != r.reference) continue;
    o += fmt::format("<h3>{}</h3>\n", esc(s.name));
    o += layer_bars_svg(s, r.box.link_gbps);
  }
  o += "</body></html>\n";
  return o;
}

Status write_html_report(const std::string& path, const BenchResult& result) {
  return write_text_file(path, render_html_report(result));
}

}  // namespace layerstream::bench
