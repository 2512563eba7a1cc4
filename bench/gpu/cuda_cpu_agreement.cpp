// CUDA vs CPU kernel agreement (a test-backend-ops-style sweep; run by
// bench/gpu-check.sh on a lent GPU): every op of the Kernels interface, every
// weight type the type table marks supported (embedding, matmul), on the same
// fresh random inputs, through both backends. Per case: the largest
// difference, normalised, against the op's tolerance. matmul: CUDA against a
// float64 product (normalised by sum |w x| of that output), plus CPU against
// it and CUDA against CPU, which must agree within 1e-2 (the CPU's fast path
// may quantise activations to 8 bits); the other ops: CUDA against CPU,
// normalised by the largest |CPU value|.
//
//   cuda_cpu_agreement [--json FILE] [--seed N] [--backend cuda|host]
//
// Prints one line per case; exit 0 when every case agrees, 1 when one does
// not (or a CUDA op fails), 2 with "no CUDA device: <reason>" without a device.
// --backend host sweeps the host backend against the CPU kernels (a check of
// the sweep itself on a machine without a GPU).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu/gpu_bench_util.h"
#include "kernels/kernels.h"
#include "kernels/math/fp16.h"
#include "nlohmann/json.hpp"
#include "runtime/core/status_macros.h"

namespace layerstream::gpubench {
namespace {

// CUDA vs CPU matmul bound: the CPU's fast path rounds activations to 8 bits
// per block of 32 (about 1/254 of the block's largest |x| per element).
constexpr double kCpuFastTol = 1e-2;

struct Case {
  std::string op, type, shape;
  double err = 0, tol = 0;  // matmul: CUDA vs float64; other ops: CUDA vs CPU
  double err_cpu_ref = -1, err_cuda_cpu = -1;  // matmul only: CPU vs float64, CUDA vs CPU
  std::string error;  // a failed op
  bool ok() const { return error.empty() && err <= tol; }
};

// Buffers of one case in the swept backend's arena, filled and read through
// its stream (so the sweep runs on any backend); freed by clear().
class DevMem {
 public:
  DevMem(Arena& arena, Stream& stream) : arena_(arena), stream_(stream) {}
  ~DevMem() { clear(); }
  template <typename T>
  Result<void*> put(const std::vector<T>& v) {
    const uint64_t bytes = std::max<uint64_t>(v.size() * sizeof(T), 1);
    LS_ASSIGN_OR_RETURN(ArenaRegion r, arena_.allocate("sweep", bytes, 256));
    live_.push_back(r);
    LS_RETURN_IF_ERROR(stream_.copy_h2d(r.ptr, v.data(), v.size() * sizeof(T)));
    LS_RETURN_IF_ERROR(stream_.synchronize());
    return r.ptr;
  }
  template <typename T>
  Result<std::vector<T>> get(const void* p, size_t n) {
    std::vector<T> v(n);
    LS_RETURN_IF_ERROR(stream_.copy_d2h(v.data(), p, n * sizeof(T)));
    LS_RETURN_IF_ERROR(stream_.synchronize());
    return v;
  }
  void clear() {
    for (const ArenaRegion& r : live_) arena_.free(r);
    live_.clear();
  }

 private:
  Arena& arena_;
  Stream& stream_;
  std::vector<ArenaRegion> live_;
};

class Sweep {
 public:
  Sweep(kernels::Kernels& cpu, kernels::Kernels& gpu, Stream& gs, Arena& arena, uint64_t seed)
      : cpu_(cpu), gpu_(gpu), gs_(gs), mem_(arena, gs), rng_(seed) {}

  std::vector<Case> run() {
    for (GgmlType t : supported_weight_types()) {
      for (auto [o, i, n] : std::vector<std::array<int64_t, 3>>{{67, 256, 1}, {130, 512, 8}, {96, 768, 9}, {256, 1024, 64}})
        record(matmul(t, o, i, n));
      record(embedding(t));
    }
    record(rmsnorm());
    for (bool neox : {false, true}) record(rope(neox));
    record(elementwise(true));
    record(elementwise(false));
    for (GgmlType kv : {GgmlType::F32, GgmlType::F16}) {
      for (auto [start, n_tok, h, kvh, d] : std::vector<std::array<int64_t, 5>>{{0, 17, 8, 2, 64}, {200, 1, 8, 2, 128}, {31, 5, 4, 4, 96}})
        record(attention(kv, start, n_tok, h, kvh, d));
    }
    record(sample(0.0f, 0));
    record(sample(0.8f, 40));
    return cases_;
  }

 private:
  void record(Case c) {
    mem_.clear();
    std::string extra;
    if (c.err_cuda_cpu >= 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " [cpu vs f64 %.3g, cuda vs cpu %.3g]", c.err_cpu_ref, c.err_cuda_cpu);
      extra = buf;
    }
    std::printf("%-10s %-6s %-28s err %.3g tol %.3g %s%s%s\n", c.op.c_str(), c.type.c_str(), c.shape.c_str(), c.err,
                c.tol, c.ok() ? "ok" : "DISAGREE", extra.c_str(), c.error.empty() ? "" : (" (" + c.error + ")").c_str());
    std::fflush(stdout);
    cases_.push_back(std::move(c));
  }

  std::vector<float> rand(size_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }

  // max |g - c| / max |c| (relative to the output's scale).
  static double rel(const std::vector<float>& g, const std::vector<float>& c) {
    double m = 0, e = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      m = std::max(m, std::fabs(static_cast<double>(c[i])));
      e = std::max(e, std::fabs(static_cast<double>(g[i]) - c[i]));
      if (std::isnan(g[i]) != std::isnan(c[i])) return INFINITY;
    }
    return m > 0 ? e / m : e;
  }

  Status gsync() { return gs_.synchronize(); }

  Case matmul(GgmlType t, int64_t n_out, int64_t n_in, int64_t n_tok) {
    Case c{"matmul", ggml_type_traits(t).name, std::to_string(n_out) + "x" + std::to_string(n_in) + " tok " + std::to_string(n_tok)};
    c.err_cpu_ref = c.err_cuda_cpu = 0;
    c.tol = n_tok <= 8 || t == GgmlType::F32 ? 4e-5 : (t == GgmlType::BF16 ? 8e-3 : 2e-3);
    if (n_in % ggml_type_traits(t).block_elems != 0) n_in = ggml_type_traits(t).block_elems * 4;
    auto w = random_weight(t, n_out, n_in, rng_, n_out);
    if (!w.ok()) return fail(c, w.status());
    std::vector<float> wf(n_out * n_in);
    const uint64_t rb = ggml_row_bytes(ggml_type_traits(t), n_in);
    for (int64_t r = 0; r < n_out; ++r) {
      if (Status s = math::decode_row(t, w->data() + r * rb, n_in, wf.data() + r * n_in); !s.ok()) return fail(c, s);
    }
    const std::vector<float> x = rand(n_in * n_tok);
    std::vector<float> yc(n_out * n_tok);
    const uint64_t cs = cpu_.matmul_scratch_bytes(t, n_out, n_in, n_tok);
    std::vector<uint8_t> cscratch(cs);
    if (Status s = cpu_.matmul({w->data(), t, n_out, n_in, x.data(), n_tok, yc.data(), cscratch.data(), cs}, hs_); !s.ok())
      return fail(c, s);
    if (Status s = hs_.synchronize(); !s.ok()) return fail(c, s);
    const uint64_t gsb = gpu_.matmul_scratch_bytes(t, n_out, n_in, n_tok);
    auto dw = mem_.put(*w);
    auto dx = mem_.put(x);
    auto dy = mem_.put(std::vector<float>(n_out * n_tok, NAN));
    auto dsc = mem_.put(std::vector<uint8_t>(gsb));
    if (!dw.ok() || !dx.ok() || !dy.ok() || !dsc.ok()) return fail(c, Status::DeviceError("upload failed"));
    if (Status s = gpu_.matmul({(*dw), t, n_out, n_in, static_cast<float*>((*dx)), n_tok,
                                static_cast<float*>((*dy)), (*dsc), gsb}, gs_);
        !s.ok())
      return fail(c, s);
    if (Status s = gsync(); !s.ok()) return fail(c, s);
    auto yg = mem_.get<float>((*dy), yc.size());
    if (!yg.ok()) return fail(c, yg.status());
    // Both against a float64 product of the decoded weights: the CUDA result
    // must meet the CUDA tolerance; the CPU's (which may quantise the
    // activations to 8 bits on its fast path) is reported, and CUDA vs CPU
    // must agree within kCpuFastTol.
    for (int64_t tk = 0; tk < n_tok; ++tk) {
      for (int64_t o = 0; o < n_out; ++o) {
        double a = 0, ref = 0;
        for (int64_t i = 0; i < n_in; ++i) {
          const double p = static_cast<double>(wf[o * n_in + i]) * x[tk * n_in + i];
          ref += p;
          a += std::fabs(p);
        }
        a = std::max(a, 1e-30);
        const double g = (*yg)[tk * n_out + o], cp = yc[tk * n_out + o];
        auto worst = [](double& m, double e) { m = std::max(m, std::isnan(e) ? INFINITY : e); };
        worst(c.err, std::fabs(g - ref) / a);
        worst(c.err_cpu_ref, std::fabs(cp - ref) / a);
        worst(c.err_cuda_cpu, std::fabs(g - cp) / a);
      }
    }
    if (c.err_cuda_cpu > kCpuFastTol) c.error = "CUDA and CPU differ by more than " + std::to_string(kCpuFastTol);
    return c;
  }

  Case embedding(GgmlType t) {
    const int64_t n_vocab = 50, n_embd = ggml_type_traits(t).block_elems * 8;
    Case c{"embedding", ggml_type_traits(t).name, std::to_string(n_vocab) + "x" + std::to_string(n_embd), 0, 0};
    auto table = random_weight(t, n_vocab, n_embd, rng_, n_vocab);
    if (!table.ok()) return fail(c, table.status());
    const std::vector<int32_t> tok = {0, 49, 7, 7, 23};
    const int64_t n = static_cast<int64_t>(tok.size());
    std::vector<float> oc(n * n_embd);
    if (Status s = cpu_.embedding({table->data(), t, n_vocab, n_embd, tok.data(), n, oc.data()}, hs_); !s.ok()) return fail(c, s);
    if (Status s = hs_.synchronize(); !s.ok()) return fail(c, s);
    auto dt = mem_.put(*table);
    auto dk = mem_.put(tok);
    auto dout = mem_.put(std::vector<float>(oc.size(), NAN));
    if (!dt.ok() || !dk.ok() || !dout.ok()) return fail(c, Status::DeviceError("upload failed"));
    if (Status s = gpu_.embedding({(*dt), t, n_vocab, n_embd, static_cast<int32_t*>((*dk)), n,
                                   static_cast<float*>((*dout))}, gs_);
        !s.ok())
      return fail(c, s);
    return finish(c, (*dout), oc);
  }

  Case rmsnorm() {
    const int64_t rows = 7, cols = 4099;
    Case c{"rmsnorm", "f32", "7x4099", 0, 1e-5};
    const std::vector<float> x = rand(rows * cols, -3, 3), w = rand(cols, 0.5f, 1.5f);
    std::vector<float> oc(x.size());
    if (Status s = cpu_.rmsnorm({x.data(), w.data(), oc.data(), rows, cols, 1e-5f}, hs_); !s.ok()) return fail(c, s);
    if (Status s = hs_.synchronize(); !s.ok()) return fail(c, s);
    auto dx = mem_.put(x), dw = mem_.put(w), dout = mem_.put(std::vector<float>(x.size(), NAN));
    if (!dx.ok() || !dw.ok() || !dout.ok()) return fail(c, Status::DeviceError("upload failed"));
    if (Status s = gpu_.rmsnorm({static_cast<float*>((*dx)), static_cast<float*>((*dw)),
                                 static_cast<float*>((*dout)), rows, cols, 1e-5f}, gs_);
        !s.ok())
      return fail(c, s);
    return finish(c, (*dout), oc);
  }

  Case rope(bool neox) {
    const int64_t n_tok = 5, heads = 6, hd = 128, n_rot = 96;
    // Host and device sin/cos/pow differ by an ulp or two; at positions up to
    // 4000 an ulp of theta moves the rotated value by ~4e-7 * position.
    Case c{"rope", "f32", neox ? "neox 5x6x128 rot 96" : "llama 5x6x128 rot 96", 0, 1e-6 + 8e-7 * 4000};
    std::vector<float> xc = rand(n_tok * heads * hd);
    std::vector<int32_t> pos(n_tok);
    for (auto& p : pos) p = static_cast<int32_t>(rng_() % 4000);
    auto dx = mem_.put(xc), dp = mem_.put(pos);
    if (!dx.ok() || !dp.ok()) return fail(c, Status::DeviceError("upload failed"));
    if (Status s = cpu_.rope({xc.data(), n_tok, heads, hd, n_rot, pos.data(), 1e4f, 1.0f, neox}, hs_); !s.ok()) return fail(c, s);
    if (Status s = hs_.synchronize(); !s.ok()) return fail(c, s);
    if (Status s = gpu_.rope({static_cast<float*>((*dx)), n_tok, heads, hd, n_rot,
                              static_cast<int32_t*>((*dp)), 1e4f, 1.0f, neox}, gs_);
        !s.ok())
      return fail(c, s);
    return finish(c, (*dx), xc);
  }

  Case elementwise(bool silu) {
    const int64_t n = 100003;
    Case c{silu ? "silu_mul" : "add", "f32", std::to_string(n), 0, 1e-6};
    const std::vector<float> a = rand(n, -8, 8), b = rand(n, -2, 2);
    std::vector<float> oc(n);
    Status s = silu ? cpu_.silu_mul({a.data(), b.data(), oc.data(), n}, hs_) : cpu_.add({a.data(), b.data(), oc.data(), n}, hs_);
    if (s.ok()) s = hs_.synchronize();
    if (!s.ok()) return fail(c, s);
    auto da = mem_.put(a), db = mem_.put(b), dout = mem_.put(std::vector<float>(n, NAN));
    if (!da.ok() || !db.ok() || !dout.ok()) return fail(c, Status::DeviceError("upload failed"));
    auto* pa = static_cast<float*>((*da));
    auto* pb = static_cast<float*>((*db));
    auto* po = static_cast<float*>((*dout));
    s = silu ? gpu_.silu_mul({pa, pb, po, n}, gs_) : gpu_.add({pa, pb, po, n}, gs_);
    if (!s.ok()) return fail(c, s);
    return finish(c, (*dout), oc);
  }

  Case attention(GgmlType kv, int64_t start, int64_t n_tok, int64_t n_head, int64_t n_kv, int64_t d) {
    Case c{"attention", kv == GgmlType::F16 ? "F16" : "F32",
           "start " + std::to_string(start) + " tok " + std::to_string(n_tok) + " " + std::to_string(n_head) + "/" +
               std::to_string(n_kv) + "x" + std::to_string(d),
           0, 1e-4};
    const int64_t n_ctx = start + n_tok + 2, row = n_kv * d, esz = kv == GgmlType::F16 ? 2 : 4;
    const std::vector<float> k_old = rand(n_ctx * row), v_old = rand(n_ctx * row, -2, 2);
    std::vector<uint8_t> kc(n_ctx * row * esz), vc(n_ctx * row * esz);
    for (int64_t i = 0; i < n_ctx * row; ++i) {
      if (kv == GgmlType::F16) {
        const uint16_t kh = math::f32_to_f16(k_old[i]), vh = math::f32_to_f16(v_old[i]);
        std::memcpy(&kc[2 * i], &kh, 2);
        std::memcpy(&vc[2 * i], &vh, 2);
      } else {
        std::memcpy(&kc[4 * i], &k_old[i], 4);
        std::memcpy(&vc[4 * i], &v_old[i], 4);
      }
    }
    const std::vector<float> q = rand(n_tok * n_head * d, -2, 2), kn = rand(n_tok * row), vn = rand(n_tok * row, -2, 2);
    std::vector<uint8_t> kc_cpu = kc, vc_cpu = vc;
    std::vector<float> oc(q.size());
    // One shape; each backend's call gets its own buffers.
    const kernels::AttentionParams shape{.kv_type = kv,
                                         .n_ctx = n_ctx,
                                         .start_pos = start,
                                         .n_tokens = n_tok,
                                         .n_head = n_head,
                                         .n_kv_head = n_kv,
                                         .head_dim = d};
    const auto on = [&shape](const void* q, const void* k_new, const void* v_new, void* k_cache, void* v_cache,
                             void* out) {
      kernels::AttentionParams p = shape;
      p.q = static_cast<const float*>(q);
      p.k_new = static_cast<const float*>(k_new);
      p.v_new = static_cast<const float*>(v_new);
      p.k_cache = k_cache;
      p.v_cache = v_cache;
      p.out = static_cast<float*>(out);
      return p;
    };
    if (Status s = cpu_.attention(on(q.data(), kn.data(), vn.data(), kc_cpu.data(), vc_cpu.data(), oc.data()), hs_);
        !s.ok())
      return fail(c, s);
    if (Status s = hs_.synchronize(); !s.ok()) return fail(c, s);
    auto dq = mem_.put(q), dkn = mem_.put(kn), dvn = mem_.put(vn), dkc = mem_.put(kc), dvc = mem_.put(vc),
         dout = mem_.put(std::vector<float>(q.size(), NAN));
    if (!dq.ok() || !dkn.ok() || !dvn.ok() || !dkc.ok() || !dvc.ok() || !dout.ok())
      return fail(c, Status::DeviceError("upload failed"));
    if (Status s = gpu_.attention(on(*dq, *dkn, *dvn, *dkc, *dvc, *dout), gs_); !s.ok()) return fail(c, s);
    return finish(c, (*dout), oc);
  }

  Case sample(float temperature, int32_t top_k) {
    const int64_t n = 32000;
    Case c{"sample", "f32", temperature > 0 ? "temp 0.8 top-k 40 x20 seeds" : "greedy x20", 0, 0};
    for (int i = 0; i < 20; ++i) {
      std::vector<float> logits = rand(n, -5, 5);
      logits[rng_() % n] = NAN;
      auto dl = mem_.put(logits);
      if (!dl.ok()) return fail(c, dl.status());
      int32_t tc = -1, tg = -2;
      const uint64_t seed = rng_();
      if (Status s = cpu_.sample({logits.data(), n, temperature, top_k, 0.9f, seed, &tc}, hs_); !s.ok()) return fail(c, s);
      if (Status s = hs_.synchronize(); !s.ok()) return fail(c, s);
      if (Status s = gpu_.sample({static_cast<float*>((*dl)), n, temperature, top_k, 0.9f, seed, &tg}, gs_); !s.ok())
        return fail(c, s);
      if (Status s = gsync(); !s.ok()) return fail(c, s);
      if (tc != tg) c.err += 1;  // tokens that differ
    }
    return c;
  }

  Case finish(Case c, const void* dev_out, const std::vector<float>& cpu_out) {
    if (Status s = gsync(); !s.ok()) return fail(c, s);
    auto g = mem_.get<float>(dev_out, cpu_out.size());
    if (!g.ok()) return fail(c, g.status());
    c.err = rel(*g, cpu_out);
    return c;
  }

  static Case fail(Case c, const Status& s) {
    c.error = s.ToString();
    c.err = INFINITY;
    return c;
  }

  kernels::Kernels& cpu_;
  kernels::Kernels& gpu_;
  Stream& gs_;
  DevMem mem_;
  InlineStream hs_;
  std::mt19937_64 rng_;
  std::vector<Case> cases_;
};

}  // namespace
}  // namespace layerstream::gpubench

int main(int argc, char** argv) {
  using namespace layerstream;
  using namespace layerstream::gpubench;
  std::string json_path;
  uint64_t seed = std::random_device{}();
  BackendKind backend = BackendKind::kCuda;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else if (a == "--backend" && i + 1 < argc && (std::string(argv[i + 1]) == "host" || std::string(argv[i + 1]) == "cuda")) {
      backend = std::string(argv[++i]) == "host" ? BackendKind::kHost : BackendKind::kCuda;
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--seed N] [--backend cuda|host]\n", argv[0]);
      return 1;
    }
  }
  if (Status dev = cuda_device_available(); backend == BackendKind::kCuda && !dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.message().c_str());
    return kExitNoDevice;
  }
  DeviceOptions o;
  o.backend = backend;
  auto dev = open_device(o);
  auto cpu = kernels::make_kernels(BackendKind::kHost);
  auto gpu = kernels::make_kernels(backend);
  if (!dev.ok() || !cpu.ok() || !gpu.ok()) {
    std::fprintf(stderr, "cannot open the backends: %s %s %s\n", dev.status().ToString().c_str(),
                 cpu.status().ToString().c_str(), gpu.status().ToString().c_str());
    return 1;
  }
  auto stream = (*dev)->create_stream(StreamRole::kCompute);
  if (!stream.ok()) {
    std::fprintf(stderr, "cannot create a stream: %s\n", stream.status().ToString().c_str());
    return 1;
  }
  auto arena = (*dev)->create_arena(uint64_t{256} << 20);
  if (!arena.ok()) {
    std::fprintf(stderr, "cannot create the arena: %s\n", arena.status().ToString().c_str());
    return 1;
  }
  std::printf("seed %llu, device %s\n", static_cast<unsigned long long>(seed), (*dev)->info().name.c_str());
  Sweep sweep(**cpu, **gpu, **stream, **arena, seed);
  const std::vector<Case> cases = sweep.run();
  int bad = 0;
  nlohmann::json j = {{"seed", seed}, {"device", (*dev)->info().name}, {"cases", nlohmann::json::array()}};
  for (const Case& c : cases) {
    bad += c.ok() ? 0 : 1;
    auto num = [](double v) { return std::isfinite(v) ? v : -1.0; };
    nlohmann::json jc = {{"op", c.op},   {"type", c.type}, {"shape", c.shape}, {"err", num(c.err)},
                         {"tol", c.tol}, {"ok", c.ok()},   {"error", c.error}};
    if (c.err_cuda_cpu >= 0) {
      jc["err_cpu_vs_f64"] = num(c.err_cpu_ref);
      jc["err_cuda_vs_cpu"] = num(c.err_cuda_cpu);
    }
    j["cases"].push_back(jc);
  }
  j["cases_total"] = cases.size();
  j["cases_disagreeing"] = bad;
  if (!json_path.empty()) std::ofstream(json_path) << j.dump(1) << "\n";
  std::printf("%zu cases, %d disagree\n", cases.size(), bad);
  return bad == 0 ? 0 : 1;
}
