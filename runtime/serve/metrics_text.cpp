#include "runtime/serve/metrics_text.h"

#include <sstream>

namespace layerstream::serve {
namespace {

// Writes one metric family: HELP and TYPE, then the samples `emit` writes.
class Writer {
 public:
  template <typename T>
  void metric(const std::string& name, const char* type, const char* help, T value, const std::string& labels = {}) {
    head(name, type, help);
    sample(name, labels, value);
  }
  void head(const std::string& name, const char* type, const char* help) {
    o_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  template <typename T>
  void sample(const std::string& name, const std::string& labels, T value) {
    o_ << name;
    if (!labels.empty()) o_ << '{' << labels << '}';
    o_ << ' ' << value << '\n';
  }
  void histogram(const std::string& name, const char* help, const LatencyHistogram& h, const std::string& labels) {
    head(name, "histogram", help);
    const std::string sep = labels.empty() ? "" : labels + ",";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      std::ostringstream le;
      le << h.bounds[i];
      sample(name + "_bucket", sep + "le=\"" + le.str() + "\"", cumulative);
    }
    sample(name + "_bucket", sep + "le=\"+Inf\"", h.count);
    sample(name + "_sum", labels, h.sum);
    sample(name + "_count", labels, h.count);
  }
  std::string str() const { return o_.str(); }

 private:
  std::ostringstream o_;
};

void layerstream_names(Writer& w, const SchedulerMetrics& m, const HttpCounters& http) {
  w.head("layerstream_requests_total", "counter", "Generation requests by outcome.");
  w.sample("layerstream_requests_total", "outcome=\"submitted\"", m.requests_submitted);
  w.sample("layerstream_requests_total", "outcome=\"finished\"", m.requests_finished);
  w.sample("layerstream_requests_total", "outcome=\"cancelled\"", m.requests_cancelled);
  w.sample("layerstream_requests_total", "outcome=\"failed\"", m.requests_failed);
  w.sample("layerstream_requests_total", "outcome=\"rejected\"", m.requests_rejected);
  w.metric("layerstream_http_requests_total", "counter", "HTTP requests received.", http.requests);
  w.metric("layerstream_http_errors_total", "counter", "HTTP responses with a 4xx/5xx status.", http.errors);
  w.metric("layerstream_queue_length", "gauge", "Requests waiting for a sequence.", m.queued);
  w.metric("layerstream_active_sequences", "gauge", "Sequences generating now.", m.active);
  w.metric("layerstream_sequences", "gauge", "Sequences (--parallel).", m.parallel);
  w.metric("layerstream_prompt_tokens_total", "counter", "Prompt tokens of submitted requests.", m.prompt_tokens);
  w.metric("layerstream_prefill_tokens_total", "counter",
           "Prompt tokens decoded (the others came from the prefix cache).", m.prefill_tokens);
  w.metric("layerstream_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
           m.prefix_cache_queries);
  w.metric("layerstream_prefix_cache_hits_total", "counter", "Prompt tokens whose KV the prefix cache supplied.",
           m.prefix_cache_hits);
  w.metric("layerstream_prefix_cache_tokens", "gauge", "KV positions held by finished requests (cache entries).",
           m.kv_cached_tokens);
  w.metric("layerstream_generated_tokens_total", "counter", "Tokens generated.", m.generated_tokens);
  w.metric("layerstream_passes_total", "counter", "Passes over the layers.", m.passes);
  w.metric("layerstream_pass_seconds_total", "counter", "Time spent in passes.", m.pass_seconds);
  w.metric("layerstream_tokens_per_second", "gauge", "Generated tokens per second of pass time.",
           m.pass_seconds > 0 ? m.generated_tokens / m.pass_seconds : 0.0);
  w.metric("layerstream_streamed_bytes_total", "counter", "Bytes streamed to the device.", m.streamed_bytes);
  w.metric("layerstream_bytes_streamed_per_token", "gauge", "Streamed bytes per generated token.",
           m.generated_tokens ? double(m.streamed_bytes) / m.generated_tokens : 0.0);
  w.metric("layerstream_overlap_efficiency", "gauge", "Mean pass lower bound / measured pass time.",
           m.passes ? m.efficiency_sum / m.passes : 0.0);
  w.metric("layerstream_uptime_seconds", "gauge", "Seconds since start.", http.uptime_s);
}

// vLLM's names and meanings: KV use is the fraction of the pool's positions
// that running requests hold (finished requests' cache entries can be
// evicted at any time, so they count as free, as in vLLM).
void vllm_names(Writer& w, const SchedulerMetrics& m, const std::string& model_id) {
  const std::string model = "model_name=\"" + model_id + "\"";
  const double capacity = double(m.sequences) * m.n_context;
  const double kv_use = capacity > 0 ? m.kv_busy_tokens / capacity : 0.0;
  w.metric("vllm:num_requests_running", "gauge", "Requests generating now.", m.active, model);
  w.metric("vllm:num_requests_waiting", "gauge", "Requests waiting for a sequence.", m.queued, model);
  w.metric("vllm:kv_cache_usage_perc", "gauge", "KV cache use (1 = full).", kv_use, model);
  w.metric("vllm:gpu_cache_usage_perc", "gauge", "KV cache use (1 = full; the older name).", kv_use, model);
  w.metric("vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
           m.prefix_cache_queries, model);
  w.metric("vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
           m.prefix_cache_hits, model);
  w.head("vllm:request_success_total", "counter", "Requests that finished, by finish reason.");
  w.sample("vllm:request_success_total", model + ",finished_reason=\"stop\"", m.finished_stop);
  w.sample("vllm:request_success_total", model + ",finished_reason=\"length\"", m.finished_length);
  w.metric("vllm:prompt_tokens_total", "counter", "Prompt tokens of submitted requests.", m.prompt_tokens, model);
  w.metric("vllm:generation_tokens_total", "counter", "Tokens generated.", m.generated_tokens, model);
  w.histogram("vllm:time_to_first_token_seconds", "Seconds from a request's arrival to its first token.",
              m.time_to_first_token, model);
  w.histogram("vllm:inter_token_latency_seconds", "Seconds between a request's consecutive tokens.",
              m.inter_token_latency, model);
}

}  // namespace

std::string render_metrics(const SchedulerMetrics& m, const HttpCounters& http, const std::string& model_id) {
  Writer w;
  layerstream_names(w, m, http);
  vllm_names(w, m, model_id);
  return w.str();
}

}  // namespace layerstream::serve
