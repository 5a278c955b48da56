#include "torch_bridge/csrc/record/meta_check.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <string>

namespace vtpu::bridge {

namespace {

// A device tensor's meta twin: same sizes, strides and dtype. CPU scalars mix with any device.
at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

c10::IValue to_meta(const c10::IValue& v) {
  if (v.isTensor()) return to_meta(v.toTensor());
  if (v.isDevice() && v.toDevice().is_privateuseone()) return c10::Device(c10::kMeta);  // factories' device=tpu
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorList()) list.push_back(to_meta(t));
    return list;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> list;
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) list.push_back(t ? std::optional(to_meta(*t)) : t);
    return list;
  }
  return v;
}

// Errors that say nothing about the input: the meta kernel's own limits (they name meta tensors:
// no data, data-dependent shapes) and failures to bind the call to the schema. Only the first line
// counts: a Python meta kernel's error goes on with its traceback (_meta_registrations.py).
bool says_nothing_about_input(std::string message) {
  message = message.substr(0, message.find('\n'));
  std::transform(message.begin(), message.end(), message.begin(), [](unsigned char c) { return std::tolower(c); });
  return message.find("meta") != std::string::npos || message.find("failed to match any schema") != std::string::npos ||
         message.find("expected a value of type") != std::string::npos;
}

void rethrow_unless_about_meta(const std::function<void()>& run) {
  // A meta run that comes back to tpu (an argument this file does not convert) must not check
  // itself again, endlessly: the inner call learns nothing.
  thread_local bool checking = false;
  if (checking) return;
  checking = true;
  struct Reset {
    ~Reset() { checking = false; }
  } reset;
  try {
    run();
  } catch (const c10::NotImplementedError&) {  // no meta kernel: nothing learnt
  } catch (const c10::Error& e) {
    if (!says_nothing_about_input(e.what_without_backtrace())) throw;
  } catch (const std::exception& e) {  // (a Python meta kernel's exception)
    if (!says_nothing_about_input(e.what())) throw;
  }
}

}  // namespace

void raise_if_torch_rejects(const std::vector<at::Tensor>& inputs,
                            const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& op) {
  std::vector<at::Tensor> meta;
  for (const auto& t : inputs) meta.push_back(to_meta(t));
  rethrow_unless_about_meta([&] { op(meta); });
}

void raise_if_torch_rejects(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  torch::jit::Stack meta;
  for (const auto& v : stack) meta.push_back(to_meta(v));
  rethrow_unless_about_meta([&] { op.callBoxed(&meta); });
}

}  // namespace vtpu::bridge
