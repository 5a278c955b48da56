// Random fills on the chip (Philox kernels, see kernels/generators/random.h): normal_, uniform_,
// random_ (torch.randint), bernoulli_ (a probability or a tensor of them), rrelu and dropout. Each call takes a fresh 64-bit Philox key
// from the device's generator (a CPU generator seeded by torch.tpu.manual_seed), so seeds,
// get_rng_state and set_rng_state work as on any device while the numbers themselves are made on
// the chip. The key reaches the kernel as an 8-byte input tensor, so a training step's graph (and
// its cached plan) does not change with it. Slices and dtypes without kernels are drawn on the
// host with the same generator.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <array>
#include <cstdlib>
#include <mutex>

#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/philox_generator.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RandomKind;

at::Generator device_generator(const at::Tensor& self, std::optional<at::Generator> gen) {
  if (gen && gen->defined()) return *gen;
  return at::globalContext().defaultGenerator(self.device());
}

// What the host draws for `self` (dtypes and views the chip's kernels do not fill) follows the
// device generator's state too.
at::Generator host_generator(const at::Tensor& self, std::optional<at::Generator> gen) {
  return host_generator_for(device_generator(self, gen), self.numel());
}

// This call's Philox key, on `self`'s device.
at::Tensor next_key(const at::Tensor& self, std::optional<at::Generator> gen) {
  at::Generator g = device_generator(self, gen);
  uint64_t key;
  {
    std::lock_guard lock(g.mutex());
    key = at::check_generator<PhiloxGenerator>(g)->next_key(self.numel());
  }
  const at::Tensor host = at::tensor({int32_t(uint32_t(key)), int32_t(uint32_t(key >> 32))}, at::kInt);
  return host.to(self.device());
}

bool on_chip(const at::Tensor& self) {
  return self.numel() > 0 && is_whole_buffer(self) && is_chip_float(self.scalar_type());
}

// Fills `self` with `build(graph, uniform-or-normal value)`; `build` may shape the numbers further.
// int64 tensors (whose values `build` makes as int32) are written as their int32 word pairs.
void record_fill(at::Tensor& self, RandomKind kind, double a, double b, std::optional<at::Generator> gen, const char* op,
                 const std::function<int(Graph&, int)>& build = nullptr) {
  const at::Tensor key = next_key(self, gen);
  auto& rt = Runtime::get();
  std::lock_guard lock(rt.mutex());
  Recorder& rec = Recorder::of(self.device().index());
  const int k = rec.values_of({key})[0];
  Graph& g = rec.graph();
  if (self.scalar_type() == at::kLong) {
    const int64_t n = self.numel();
    const int v = build(g, g.random({{n}, kernels::DType::F32}, kind, a, b, k, op));
    rec.define_output(self.reshape({n}).view(at::kInt), g.reshape(int64_words(g, v), {2 * n}, op), op);
  } else {
    const kernels::DType dtype = build ? kernels::DType::F32 : to_kernel_dtype(self.scalar_type());
    int v = g.random({std::vector<int64_t>(self.sizes().begin(), self.sizes().end()), dtype}, kind, a, b, k, op);
    if (build) v = g.cast(build(g, v), to_kernel_dtype(self.scalar_type()));
    rec.define_output(self, v, op);
  }
  rec.op_recorded();
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (on_chip(self)) {
    record_fill(self, RandomKind::Normal, mean, std, gen, "normal_");
  } else if (self.numel() > 0) {
    self.copy_(at::empty(self.sizes(), self.options().device(at::kCPU)).normal_(mean, std, host_generator(self, gen)));
  }
  return self;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  if (on_chip(self)) {
    record_fill(self, RandomKind::Uniform, from, to, gen, "uniform_");
  } else if (self.numel() > 0) {
    self.copy_(at::empty(self.sizes(), self.options().device(at::kCPU)).uniform_(from, to, host_generator(self, gen)));
  }
  return self;
}

// random_(from, to) for f32, int32 and int64 tensors: from + trunc(min(u * r, r - 1)) with
// r = to - from, exact in f32 for ranges and bounds up to 2^24. For r not a power of two the
// 2^24 grid points of u fall into r values unevenly: each value's probability is within 2^-24 of
// 1 / r. Wider ranges, other dtypes and random_() without a range are drawn on the host.
constexpr int64_t kExactInF32 = int64_t{1} << 24;

bool integers_on_chip(const at::Tensor& self, int64_t from, int64_t to) {
  const auto t = self.scalar_type();
  return self.numel() > 0 && is_whole_buffer(self) && (t == at::kFloat || t == at::kInt || t == at::kLong) &&
         to - from >= 1 && to - from <= kExactInF32 && std::llabs(from) <= kExactInF32 && std::llabs(to) <= kExactInF32;
}

void record_integers(at::Tensor& self, int64_t from, int64_t to, std::optional<at::Generator> gen) {
  const int64_t range = to - from;
  record_fill(self, RandomKind::Uniform, 0, 1, gen, "random_", [&](Graph& g, int u) {
    const int scaled = g.binary_scalar(ExprOp::Min, g.binary_scalar(ExprOp::Mul, u, double(range)), double(range - 1));
    return g.binary_scalar(ExprOp::Add, g.cast(scaled, kernels::DType::I32, "random_"), double(from));
  });
  if (self.scalar_type() == at::kLong) set_int64_bound(self, std::max(std::llabs(from), std::llabs(to)));
}

at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  if (to && integers_on_chip(self, from, *to)) {
    record_integers(self, from, *to, gen);
  } else if (self.numel() > 0) {  // torch's own checks (from < to, the dtype's range) apply here
    self.copy_(at::empty(self.sizes(), self.options().device(at::kCPU)).random_(from, to, host_generator(self, gen)));
  }
  return self;
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) { return random_from(self, 0, to, gen); }

at::Tensor& random_full(at::Tensor& self, std::optional<at::Generator> gen) {
  if (self.numel() > 0) self.copy_(at::empty(self.sizes(), self.options().device(at::kCPU)).random_(host_generator(self, gen)));
  return self;
}

// 1 with probability p: a uniform below p.
at::Tensor& bernoulli_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() > 0 && is_whole_buffer(self) && chip_dtype(self.scalar_type())) {
    record_fill(self, RandomKind::Uniform, 0, 1, gen, "bernoulli_",
                [p](Graph& g, int u) { return g.binary_scalar(ExprOp::Lt, u, p); });
  } else if (self.numel() > 0) {
    self.copy_(at::empty(self.sizes(), self.options().device(at::kCPU)).bernoulli_(p, host_generator(self, gen)));
  }
  return self;
}

// 1 where a uniform falls below each element of p (broadcast to self).
at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  if (self.numel() == 0) return self;
  at::Tensor u = at::empty(self.sizes(), self.options().dtype(at::kFloat));
  uniform_(u, 0, 1, gen);
  return self.copy_(u.lt(p.to(self.device())));
}

// RReLU: in training each non-positive element is scaled by a uniform draw from [lower, upper],
// kept in `noise` (1 elsewhere) for the backward; in eval, leaky_relu at their midpoint.
at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower, const at::Scalar& upper,
                            bool training, std::optional<at::Generator> gen) {
  if (!training) return at::leaky_relu(self, (lower.toDouble() + upper.toDouble()) / 2);
  at::Tensor draws = at::empty(self.sizes(), self.options());
  uniform_(draws, lower.toDouble(), upper.toDouble(), gen);
  noise.copy_(at::where(self.le(0), draws, at::ones_like(draws)));
  return self * noise;
}

// Training-mode dropout (torch routes nn.Dropout here on accelerators): keep each element with
// probability 1 - p, scaled by 1 / (1 - p); the mask is returned for the backward.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(0 <= p && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  const bool chip = input.numel() > 0 && is_chip_float(input.scalar_type());
  if (input.numel() == 0) return {at::empty_like(input), at::empty_like(input, input.options().dtype(at::kBool))};
  if (chip && (!train.value_or(true) || p == 0 || p == 1)) {  // the edge cases, on the chip
    const bool keep = !train.value_or(true) || p == 0;  // eval or p = 0: everything kept; p = 1: nothing
    return {keep ? input.clone() : at::zeros_like(input), at::full(input.sizes(), keep, input.options().dtype(at::kBool))};
  }
  if (!chip) {  // dtypes without kernels, as torch computes them
    const auto r = run_on_cpu_outputs("native_dropout", {input}, [p, train](const std::vector<at::Tensor>& c) {
      auto [out, mask] = at::native_dropout(c[0], p, train);
      return std::vector<at::Tensor>{out, mask};
    }, "dtypes without kernels");
    return {r[0], r[1]};
  }
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  bernoulli_(mask, 1 - p, std::nullopt);
  const double scale = 1 / (1 - p);
  at::Tensor out = record("native_dropout", {input, mask}, input.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return g.binary_scalar(ExprOp::Mul, g.binary(ExprOp::Mul, v[0], v[1]), scale);
  }, [scale](const std::vector<at::Tensor>& c) { return c[0] * c[1] * scale; });
  return {out, mask};
}

// grad * mask * scale: an integer grad times the Python float scale is float32, as on the CPU.
at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  if (grad.scalar_type() == at::kLong) return bridge::native_dropout_backward(grad.to(at::kFloat), mask, scale);  // words: converted first
  return record("native_dropout_backward", {grad, mask}, at::result_type(grad, scale), [&](Graph& g, const std::vector<int>& v) {
    return g.binary_scalar(ExprOp::Mul, g.binary(ExprOp::Mul, v[0], v[1]), scale);
  }, [scale](const std::vector<at::Tensor>& c) { return c[0] * c[1] * scale; });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", normal_);
  m.impl("uniform_", uniform_);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("random_", random_full);
  m.impl("bernoulli_.float", bernoulli_);
  m.impl("bernoulli_.Tensor", bernoulli_tensor_);
  m.impl("rrelu_with_noise", rrelu_with_noise);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
}

}  // namespace vtpu::bridge
