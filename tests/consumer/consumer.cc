// Uses the installed C++ package: builds a registry, a CPU platform and a selector, resolves the
// "cross" role and creates a "self" layer, runs one attention call on fresh random inputs and
// checks it against a naive computation. Exits nonzero with a message on any failure.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"

namespace {

constexpr int kBatch = 2, kSeqQ = 5, kSeqKv = 7, kHeads = 3, kHeadSize = 16;

int fail(const char* what, const diffattn::Status& status) {
  std::fprintf(stderr, "consumer_cxx: %s: %s\n", what, status.message().c_str());
  return 1;
}

// out[b, i, h, :] = softmax(q[b, i, h, :] . k[b, :, h, :] / sqrt(D)) v[b, :, h, :], in double.
std::vector<double> naive_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v) {
  std::vector<double> out(q.size());
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadSize));
  for (int b = 0; b < kBatch; ++b)
    for (int h = 0; h < kHeads; ++h)
      for (int i = 0; i < kSeqQ; ++i) {
        std::vector<double> score(kSeqKv);
        double top = -INFINITY, total = 0;
        for (int j = 0; j < kSeqKv; ++j) {
          double dot = 0;
          for (int d = 0; d < kHeadSize; ++d)
            dot += double(q[((b * kSeqQ + i) * kHeads + h) * kHeadSize + d]) *
                   k[((b * kSeqKv + j) * kHeads + h) * kHeadSize + d];
          score[j] = dot * scale;
          top = std::fmax(top, score[j]);
        }
        for (double& s : score) total += (s = std::exp(s - top));
        for (int d = 0; d < kHeadSize; ++d) {
          double acc = 0;
          for (int j = 0; j < kSeqKv; ++j) acc += score[j] * v[((b * kSeqKv + j) * kHeads + h) * kHeadSize + d];
          out[((b * kSeqQ + i) * kHeads + h) * kHeadSize + d] = acc / total;
        }
      }
  return out;
}

}  // namespace

int main() {
  diffattn::Registry registry;
  diffattn::register_builtin_backends(registry);
  diffattn::Selector selector(diffattn::make_platform(diffattn::probe_cpu_platform(), registry), &registry);
  const diffattn::AttentionConfig config;  // no choices: the CPU platform's default decides

  auto cross = selector.resolve("cross", kHeadSize, config, "cross");
  if (!cross.ok()) return fail("resolving role 'cross'", cross.status());
  diffattn::AttentionLayerDesc desc;
  desc.num_heads = kHeads;
  desc.head_size = kHeadSize;
  auto layer = diffattn::Attention::Create(desc, config, selector);
  if (!layer.ok()) return fail("creating the layer", layer.status());

  const std::uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> q(kBatch * kSeqQ * kHeads * kHeadSize), k(kBatch * kSeqKv * kHeads * kHeadSize), v(k.size());
  std::vector<float> out(q.size(), NAN);
  for (auto* values : {&q, &k, &v})
    for (float& x : *values) x = normal(rng);

  using diffattn::DType;
  using diffattn::TensorView;
  diffattn::AttentionProblem problem;
  problem.q = TensorView::Contiguous(q.data(), DType::kFloat32, {kBatch, kSeqQ, kHeads, kHeadSize});
  problem.k = TensorView::Contiguous(k.data(), DType::kFloat32, {kBatch, kSeqKv, kHeads, kHeadSize});
  problem.v = TensorView::Contiguous(v.data(), DType::kFloat32, {kBatch, kSeqKv, kHeads, kHeadSize});
  problem.out = TensorView::Contiguous(out.data(), DType::kFloat32, {kBatch, kSeqQ, kHeads, kHeadSize});
  if (auto status = layer->forward(problem); !status.ok()) return fail("running the layer", status);

  const std::vector<double> expected = naive_attention(q, k, v);
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double error = std::fabs(out[i] - expected[i]);
    if (std::isnan(error) || error > worst) worst = error;  // a NaN stays
  }
  if (!(worst < 1e-4)) {
    std::fprintf(stderr, "consumer_cxx: %s differs from the naive attention by %g (seed %u)\n",
                 layer->resolution().backend.c_str(), worst, seed);
    return 1;
  }
  std::printf("consumer_cxx: role cross -> %s, layer self -> %s, max |error| %.2g (seed %u)\n",
              cross->backend.c_str(), layer->resolution().backend.c_str(), worst, seed);
  return 0;
}
