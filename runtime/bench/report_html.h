// The bench HTML report: one self-contained file (inline CSS and SVG, no
// scripts, no external resources) with the summary table, a copy/compute
// timeline per strategy for one pass (the median one), and per-layer compute
// vs transfer bars.
#pragma once

#include <string>

#include "layerstream/status.h"
#include "runtime/bench/bench_result.h"

namespace layerstream::bench {

std::string render_html_report(const BenchResult& result);
Status write_html_report(const std::string& path, const BenchResult& result);

}  // namespace layerstream::bench
