#include "kernels/codegen/asm_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <sstream>

#include "isa/assembler.h"

namespace vtpu::kernels {

RegisterPool::RegisterPool(std::string what, int first, int last) : what_(std::move(what)) {
  for (int r = first; r <= last; ++r) free_.set(r);
}

int RegisterPool::take() {
  for (int r = 0; r < 64; ++r) {
    if (free_.test(r)) {
      free_.reset(r);
      return r;
    }
  }
  throw RegisterShortage(fmt::format("kernel needs more {} than the chip has", what_));
}

void RegisterPool::release(int reg) { free_.set(reg); }

int RegisterPool::take_run(int count, int align) {
  for (int first = 0; first + count <= 64; first += align) {
    bool ok = true;
    for (int r = first; r < first + count && ok; ++r) ok = free_.test(r);
    if (ok) {
      for (int r = first; r < first + count; ++r) free_.reset(r);
      return first;
    }
  }
  throw KernelError(fmt::format("kernel needs {} consecutive {} and they are not free", count, what_));
}

void RegisterPool::release_run(int first, int count) {
  for (int r = first; r < first + count; ++r) free_.set(r);
}

// s0 is never handed out: kernels use it as the constant zero (it is never written).
AsmWriter::AsmWriter(std::string name) : name_(std::move(name)), sregs_("scalar registers", 1, 31) {
  header_ = fmt::format(".name {}\n", name_);
}

void AsmWriter::comment(std::string_view text) { *out_ += fmt::format("  ; {}\n", text); }

int AsmWriter::argument(std::string_view name, isa::ArgumentKind kind) {
  if (scratch_arguments_ > 0) throw KernelError(fmt::format("{}: argument '{}' declared after a scratch slot", name_, name));
  header_ += fmt::format(".arg {} {}\n", name, kind == isa::ArgumentKind::Buffer ? "buffer" : "scalar");
  return arguments_++;
}

int AsmWriter::scratch_argument() { return arguments_ + scratch_arguments_++; }

std::string AsmWriter::new_label(std::string_view stem) { return fmt::format("{}_{}", stem, labels_++); }

void AsmWriter::place(const std::string& label) { *out_ += label + ":\n"; }

void AsmWriter::cold(const std::function<void()>& body) {
  if (out_ == &cold_) throw KernelError("cold sections do not nest");  // the inner one would split the outer
  out_ = &cold_;
  body();
  out_ = &text_;
}

void AsmWriter::interleave(const std::vector<std::function<void()>>& bodies, int in_flight) {
  std::string* const target = out_;
  std::vector<std::vector<std::string>> streams;
  for (const auto& body : bodies) {
    std::string text;
    out_ = &text;
    body();
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      if (l.ends_with(':')) throw KernelError("interleaved code may not place labels");
      lines.push_back(std::move(l));
    }
    streams.push_back(std::move(lines));
  }
  out_ = target;
  size_t longest = 0, end = 0;
  for (const auto& lines : streams) longest = std::max(longest, lines.size());
  const size_t skew = in_flight > 0 ? (longest + in_flight - 1) / in_flight : 0;
  for (size_t k = 0; k < streams.size(); ++k) end = std::max(end, k * skew + streams[k].size());
  for (size_t i = 0; i < end; ++i) {
    for (size_t k = 0; k < streams.size() && k * skew <= i; ++k) {
      if (i - k * skew >= streams[k].size()) continue;
      *out_ += streams[k][i - k * skew];
      *out_ += '\n';
    }
  }
}

void AsmWriter::load_immediate(int sreg, int64_t value) {
  if (value < INT32_MIN || value > UINT32_MAX) throw KernelError(fmt::format("immediate {} does not fit 32 bits", value));
  line("sli s{}, {}", sreg, static_cast<int32_t>(static_cast<uint32_t>(value)));
}

void AsmWriter::load_float(int sreg, float value) { line("sli s{}, {}", sreg, std::bit_cast<int32_t>(value)); }

void AsmWriter::add_scaled(int dst, int src, int64_t factor, int scratch) {
  line("smuli s{}, s{}, {}", scratch, src, factor);
  line("sadd s{}, s{}, s{}", dst, dst, scratch);
}

void AsmWriter::ceil_div_argument(int dst, int arg, int64_t divisor, int scratch) {
  line("sarg s{}, {}", dst, arg);
  line("saddi s{}, s{}, {}", dst, dst, divisor - 1);
  load_immediate(scratch, divisor);
  line("sdiv s{}, s{}, s{}", dst, dst, scratch);
}

void AsmWriter::target_mxu(int mxu_dim) { header_ += fmt::format(".mxu_dim {}\n", mxu_dim); }
void AsmWriter::split_across_cores() { header_ += ".multicore\n"; }

std::string AsmWriter::source() const { return header_ + text_ + "  halt\n" + cold_; }

isa::Program AsmWriter::assemble() const {
  const std::string source = this->source();
  try {
    return isa::assemble(source, name_);
  } catch (const isa::AsmError& e) {
    // A generator bug, not a user error: show the offending line so it can be fixed.
    std::istringstream in(source);
    std::string text;
    for (int i = 0; i < e.line() && std::getline(in, text); ++i) {
    }
    throw KernelError(fmt::format("kernel '{}' does not assemble: {} (line {}: `{}`)", name_, e.what(), e.line(), text));
  }
}

}  // namespace vtpu::kernels
