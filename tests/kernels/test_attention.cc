// The fused attention kernel against a double-precision softmax(q k^T * scale) v written with
// loops: f32 (1, 3 and 6 MXU passes) and bf16 inputs, causal and not, ragged query and key
// counts (1, 7, 129, more than one 256-query chunk and one 128-key block), head dims below the
// MXU width, several heads; logsumexp too; simulated cycles never below the closed-form bound.
//
// Tolerances: with 6 passes the products are as accurate as f32 GEMMs and the softmax is f32, so
// 2e-6 absolute on outputs of magnitude <= 1 (inputs in [-1, 1]). One pass rounds q, k and p to
// bf16 (relative 2^-9 each), giving scores within ~2^-8 sum|q k| * scale and outputs within
// 1e-2; 3 passes leave the 2^-16 terms: 1e-4. bf16 inputs: one pass, and the output is rounded
// to bf16 (2^-9 relative): 1e-2.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "kernels/codegen/asm_writer.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_backward.h"
#include "kernels/roofline.h"
#include "sim/bf16.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::AttentionSpec;
using kernels::DType;

namespace {

struct Result {
  std::vector<float> out, lse;
  uint64_t cycles = 0;
};

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

testing::HostBuffer device_buffer(const std::vector<float>& v, DType dtype) {
  if (dtype == DType::F32) return testing::HostBuffer::of(v);
  std::vector<uint16_t> bits;
  for (float x : v) bits.push_back(sim::f32_to_bf16_bits(x));
  return testing::HostBuffer::of(bits);
}

std::vector<float> host_values(const testing::HostBuffer& b, DType dtype) {
  if (dtype == DType::F32) return b.as<float>();
  std::vector<float> out;
  for (uint16_t bits : b.as<uint16_t>()) out.push_back(sim::bf16_bits_to_f32(bits));
  return out;
}

Result run(const AttentionSpec& s, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
           const std::string& chip = "v5e") {
  std::vector<testing::Arg> args{testing::Arg::buf(device_buffer(q, s.dtype)), testing::Arg::buf(device_buffer(k, s.dtype)),
                                 testing::Arg::buf(device_buffer(v, s.dtype))};
  const size_t out_bytes = size_t(s.batch * s.q_len * s.head_dim) * dtype_bytes(s.dtype);
  const size_t lse_at = size_t(kernels::attention_lse_offset(s)), lse_bytes = s.write_lse ? size_t(s.batch * s.q_len) * 4 : 0;
  args.push_back(testing::Arg::buf(testing::HostBuffer{std::vector<uint8_t>(lse_at + lse_bytes, 0xff)}));
  const auto out = testing::run_program(kernels::make_attention(s, sim::load_chip(chip)), args, chip);
  const auto& bytes = out.buffers[3].bytes;
  Result r;
  r.out = host_values(testing::HostBuffer{std::vector<uint8_t>(bytes.begin(), bytes.begin() + out_bytes)}, s.dtype);
  if (s.write_lse) r.lse = testing::HostBuffer{std::vector<uint8_t>(bytes.begin() + lse_at, bytes.end())}.as<float>();
  r.cycles = out.result.cycles;
  return r;
}

// softmax(q k^T * scale) v in double, on the values the device holds (bf16-rounded for bf16).
void reference(const AttentionSpec& s, std::vector<float> q, std::vector<float> k, std::vector<float> v,
               std::vector<double>& out, std::vector<double>& lse) {
  if (s.dtype == DType::BF16) {
    for (auto* t : {&q, &k, &v}) for (auto& x : *t) x = sim::round_to_bf16(x);
  }
  const int64_t S = s.q_len, T = s.kv_len, D = s.head_dim;
  out.assign(size_t(s.batch * S * D), 0.0);
  lse.assign(size_t(s.batch * S), 0.0);
  std::vector<double> scores(T);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < S; ++i) {
      const int64_t seen = s.causal ? std::min(i + 1, T) : T;
      double mx = -INFINITY;
      for (int64_t j = 0; j < seen; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < D; ++c) dot += double(q[(b * S + i) * D + c]) * k[(b * T + j) * D + c];
        scores[j] = dot * s.scale;
        mx = std::max(mx, scores[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < seen; ++j) sum += std::exp(scores[j] - mx);
      lse[b * S + i] = mx + std::log(sum);
      for (int64_t j = 0; j < seen; ++j) {
        const double p = std::exp(scores[j] - mx) / sum;
        for (int64_t c = 0; c < D; ++c) out[(b * S + i) * D + c] += p * v[(b * T + j) * D + c];
      }
    }
  }
}

double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
  return worst;
}

double tolerance(const AttentionSpec& s) {
  if (s.dtype == DType::BF16 || s.passes == 1) return 1e-2;
  return s.passes == 3 ? 1e-4 : 2e-6;
}

void check(const AttentionSpec& s, const std::string& chip = "v5e") {
  const auto q = random_values(size_t(s.batch * s.q_len * s.head_dim), 1);
  const auto k = random_values(size_t(s.batch * s.kv_len * s.head_dim), 2);
  const auto v = random_values(size_t(s.batch * s.kv_len * s.head_dim), 3);
  std::vector<double> want, want_lse;
  reference(s, q, k, v, want, want_lse);
  const Result got = run(s, q, k, v, chip);
  const double err = max_error(got.out, want);
  CHECK(err <= tolerance(s));
  if (s.write_lse) CHECK(max_error(got.lse, want_lse) <= tolerance(s) * 4);
  const double bound_cycles = kernels::attention_bound(sim::load_chip(chip), s).seconds() * sim::load_chip(chip).clock_hz;
  CHECK(double(got.cycles) >= bound_cycles);
  MESSAGE(fmt::format("{}x{}x{}x{}{} {} passes {} on {}: max |error| {:.3g}, {} cycles (bound {:.0f})", s.batch, s.q_len,
                      s.kv_len, s.head_dim, s.causal ? " causal" : "", kernels::dtype_name(s.dtype), s.passes, chip, err,
                      got.cycles, bound_cycles));
}

AttentionSpec spec(int64_t batch, int64_t q_len, int64_t kv_len, int64_t head_dim, bool causal, DType dtype, int passes) {
  AttentionSpec s;
  s.batch = batch;
  s.q_len = q_len;
  s.kv_len = kv_len;
  s.head_dim = head_dim;
  s.causal = causal;
  s.dtype = dtype;
  s.passes = passes;
  s.scale = 1.0 / std::sqrt(double(head_dim));
  return s;
}


// dq, dk, dv of sum(out * dout) in double, with out and lse from the reference forward: dv = p^T
// dout, ds = p * (dout v^T - rowsum(dout * out)), dq = ds k * scale, dk = ds^T q * scale.
void reference_backward(const AttentionSpec& s, std::vector<float> q, std::vector<float> k, std::vector<float> v,
                        std::vector<float> dout, std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) {
  if (s.dtype == DType::BF16) {
    for (auto* t : {&q, &k, &v, &dout}) for (auto& x : *t) x = sim::round_to_bf16(x);
  }
  std::vector<double> out, lse;
  reference(s, q, k, v, out, lse);
  const int64_t S = s.q_len, T = s.kv_len, D = s.head_dim;
  dq.assign(q.size(), 0.0);
  dk.assign(k.size(), 0.0);
  dv.assign(v.size(), 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < S; ++i) {
      double delta = 0;
      for (int64_t c = 0; c < D; ++c) delta += double(dout[(b * S + i) * D + c]) * out[(b * S + i) * D + c];
      const int64_t seen = s.causal ? std::min(i + 1, T) : T;
      for (int64_t j = 0; j < seen; ++j) {
        double dot = 0, dp = 0;
        for (int64_t c = 0; c < D; ++c) {
          dot += double(q[(b * S + i) * D + c]) * k[(b * T + j) * D + c];
          dp += double(dout[(b * S + i) * D + c]) * v[(b * T + j) * D + c];
        }
        const double p = std::exp(dot * s.scale - lse[b * S + i]), ds = p * (dp - delta);
        for (int64_t c = 0; c < D; ++c) {
          dv[(b * T + j) * D + c] += p * dout[(b * S + i) * D + c];
          dq[(b * S + i) * D + c] += ds * k[(b * T + j) * D + c] * s.scale;
          dk[(b * T + j) * D + c] += ds * q[(b * S + i) * D + c] * s.scale;
        }
      }
    }
  }
}

// max |got - want| / max |want|: one MXU pass rounds q, k, v, dout, p and ds to bf16 (2^-9
// relative each) and the sums run over up to a few hundred terms of both signs. Where every
// wanted value is zero (one key: ds = dp - rowsum(dout * out) cancels exactly) the error is
// absolute: f32 leaves a rounding residue of the O(1) terms that cancel.
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  return max_error(got, want) / (scale < 1e-12 ? 1.0 : scale);
}

void check_backward(const AttentionSpec& s, const sim::ChipConfig& chip) {
  const auto q = random_values(size_t(s.batch * s.q_len * s.head_dim), 1);
  const auto k = random_values(size_t(s.batch * s.kv_len * s.head_dim), 2);
  const auto v = random_values(size_t(s.batch * s.kv_len * s.head_dim), 3);
  const auto dout = random_values(size_t(s.batch * s.q_len * s.head_dim), 4);
  std::vector<double> out, lse, dq, dk, dv;
  reference(s, q, k, v, out, lse);
  reference_backward(s, q, k, v, dout, dq, dk, dv);
  const std::vector<float> out_f(out.begin(), out.end()), lse_f(lse.begin(), lse.end());
  std::vector<testing::Arg> args;
  for (const auto* t : {&q, &k, &v, &out_f, &dout}) args.push_back(testing::Arg::buf(device_buffer(*t, s.dtype)));
  args.push_back(testing::Arg::buf(testing::HostBuffer::of(lse_f)));
  const size_t grads = q.size() + k.size() + v.size();
  args.push_back(testing::Arg::buf(testing::HostBuffer{std::vector<uint8_t>(grads * dtype_bytes(s.dtype), 0xff)}));
  const auto run = testing::run_program(kernels::make_attention_backward(s, chip), args, chip);
  const auto got = host_values(run.buffers[6], s.dtype);
  const std::vector<float> gq(got.begin(), got.begin() + q.size()), gk(got.begin() + q.size(), got.begin() + q.size() + k.size()),
      gv(got.begin() + q.size() + k.size(), got.end());
  const double eq = relative_error(gq, dq), ek = relative_error(gk, dk), ev = relative_error(gv, dv);
  const double tol = tolerance(s);
  CHECK(eq <= tol);
  CHECK(ek <= tol);
  CHECK(ev <= tol);
  MESSAGE(fmt::format("backward {}x{}x{}x{}{} {} on {}: relative errors dq {:.2g} dk {:.2g} dv {:.2g}, {} cycles", s.batch,
                      s.q_len, s.kv_len, s.head_dim, s.causal ? " causal" : "", kernels::dtype_name(s.dtype), chip.name, eq, ek, ev,
                      run.result.cycles));
}

void check_backward(const AttentionSpec& s, const std::string& chip = "v5e") { check_backward(s, sim::load_chip(chip)); }

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("attention matches softmax(q k^T * scale) v: f32 with 6 passes, causal and not, ragged sizes") {
    for (bool causal : {false, true}) {
      CAPTURE(causal);
      check(spec(1, 1, 1, 1, causal, DType::F32, 6));
      check(spec(2, 7, 129, 64, causal, DType::F32, 6));
      check(spec(1, 129, 7, 32, causal, DType::F32, 6));
      check(spec(2, 300, 300, 128, causal, DType::F32, 6));  // two query chunks, three key blocks
    }
  }

  TEST_CASE("attention with fewer passes and bf16 inputs stays within the stated tolerances") {
    for (bool causal : {false, true}) {
      CAPTURE(causal);
      check(spec(2, 40, 200, 64, causal, DType::F32, 1));
      check(spec(2, 40, 200, 64, causal, DType::F32, 3));
      check(spec(3, 130, 130, 128, causal, DType::BF16, 1));
    }
  }

  TEST_CASE("attention on a 256-wide MXU (v6e): two vregs per row, head dim below the width") {
    check(spec(2, 70, 300, 64, true, DType::F32, 6), "v6e");
    check(spec(1, 33, 257, 200, false, DType::BF16, 1), "v6e");
  }

  TEST_CASE("attention whose heads fit VMEM only one at a time: the next head's inputs come as this one frees them") {
    // v4's 12 MiB of kernel VMEM: two buffers of 3,500 f32 keys (with the weights' three bf16
    // parts) need 13.7 MB, one 9 MB. Three heads: fetches into the buffer in use, none after the
    // last. Causal, 2,000 queries and keys: 13 MB against 8 MB, several query chunks.
    check(spec(3, 64, 3500, 128, false, DType::F32, 6), "v4");
    check(spec(2, 2000, 2000, 128, true, DType::F32, 6), "v4");
  }

  TEST_CASE("attention without the logsumexp output, and a custom scale") {
    AttentionSpec s = spec(2, 20, 50, 16, false, DType::F32, 6);
    s.write_lse = false;
    s.scale = 0.37;
    check(s);
  }

  TEST_CASE("attention refuses what it does not serve, with reasons") {
    const auto chip = sim::load_chip("v5e");
    CHECK_THROWS_WITH_AS(kernels::make_attention(spec(1, 8, 8, 129, false, DType::F32, 1), chip),
                         doctest::Contains("head_dim 129 is wider than v5e's MXU (128)"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::make_attention(spec(1, 8, 8, 64, false, DType::I32, 1), chip),
                         doctest::Contains("i32 inputs are not supported"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::make_attention(spec(1, 1 << 17, 1 << 17, 128, false, DType::F32, 6), chip),
                         doctest::Contains("bytes of VMEM"), kernels::KernelError);
  }

  TEST_CASE("fused attention backward matches the double-precision gradients (one MXU pass)") {
    for (bool causal : {false, true}) {
      CAPTURE(causal);
      check_backward(spec(1, 1, 1, 8, causal, DType::BF16, 1));
      check_backward(spec(2, 7, 129, 64, causal, DType::BF16, 1));
      check_backward(spec(1, 130, 200, 128, causal, DType::BF16, 1));  // two query and two key blocks, ragged
      check_backward(spec(2, 300, 300, 32, causal, DType::F32, 1));    // three blocks each way
    }
  }

  TEST_CASE("fused attention backward on 256-wide MXUs: two 128-wide blocks per MXU, block-diagonal") {
    for (bool causal : {false, true}) {
      CAPTURE(causal);
      check_backward(spec(1, 1, 1, 8, causal, DType::BF16, 1), "v6e");
      check_backward(spec(2, 7, 129, 64, causal, DType::BF16, 1), "v6e");
      check_backward(spec(1, 130, 200, 128, causal, DType::BF16, 1), "v6e");
      check_backward(spec(2, 300, 300, 32, causal, DType::F32, 1), "v6e");
    }
    check_backward(spec(1, 260, 140, 96, true, DType::F32, 1), "v7");
  }

  TEST_CASE("fused attention backward at several MXU passes: f32 parts against weight parts") {
    for (const char* chip : {"v5e", "v6e"}) {
      for (bool causal : {false, true}) {
        CAPTURE(chip);
        CAPTURE(causal);
        for (int passes : {3, 6}) {
          check_backward(spec(1, 1, 1, 8, causal, DType::F32, passes), chip);
          check_backward(spec(2, 7, 129, 64, causal, DType::F32, passes), chip);
          check_backward(spec(1, 130, 200, 128, causal, DType::F32, passes), chip);  // two blocks each way, ragged
        }
      }
    }
  }

  TEST_CASE("fused attention backward on a long head writes its gradients over out, k and v when it must") {
    // v5e with 2.3 MB of kernel VMEM: a head of 512 bf16 queries and keys needs 2.62 MB with
    // buffers of its own for the gradients, 2.23 MB with dq over out and dk, dv over k and v.
    // Three heads, so each next head's inputs overwrite the gradients' buffers.
    auto small = sim::load_chip("v5e");
    small.vmem_bytes = small.vmem_held_bytes + 2300000;
    for (bool causal : {false, true}) {
      CAPTURE(causal);
      check_backward(spec(3, 512, 512, 128, causal, DType::BF16, 1), small);
    }
    // Padding (a narrower head, a ragged length) could let a stale gradient in: refused instead.
    CHECK(kernels::attention_backward_unsupported(spec(3, 512, 512, 96, false, DType::BF16, 1), small).find("bytes of VMEM") !=
          std::string::npos);
    CHECK(kernels::attention_backward_unsupported(spec(3, 500, 512, 128, false, DType::BF16, 1), small).find("bytes of VMEM") !=
          std::string::npos);
  }

  TEST_CASE("fused attention backward refuses what it does not serve, with reasons") {
    const auto v5e = sim::load_chip("v5e");
    auto narrow = v5e;
    narrow.mxu_dim = 64;
    CHECK(kernels::attention_backward_unsupported(spec(1, 8, 8, 64, false, DType::BF16, 1), v5e).empty());
    CHECK(kernels::attention_backward_unsupported(spec(1, 8, 8, 64, false, DType::BF16, 1), sim::load_chip("v6e")).empty());
    CHECK(kernels::attention_backward_unsupported(spec(1, 8, 8, 64, false, DType::F32, 6), v5e).empty());
    CHECK(kernels::attention_backward_unsupported(spec(1, 8, 8, 64, false, DType::F32, 2), v5e).find("2 MXU passes (1, 3 or 6)") !=
          std::string::npos);
    CHECK(kernels::attention_backward_unsupported(spec(1, 8, 8, 64, false, DType::BF16, 1), narrow).find("128- or 256-wide") !=
          std::string::npos);
    CHECK_THROWS_WITH_AS(kernels::make_attention_backward(spec(1, 8, 8, 129, false, DType::BF16, 1), v5e),
                         doctest::Contains("head_dim 129 is over 128"), kernels::KernelError);
  }
}
