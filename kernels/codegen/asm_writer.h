// Kernel generators write vtpu assembly through this: one instruction per line, unique labels,
// declared arguments and scalar registers handed out by name. Text (not raw encodings) keeps
// generated kernels readable with vtpu-dis and lets the assembler's checks catch generator bugs.
#pragma once

#include <fmt/format.h>

#include <bitset>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "isa/opcode.h"
#include "isa/program.h"
#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/trap_code.h"

namespace vtpu::kernels {

// A pool of register numbers [first, last]; take() throws RegisterShortage naming `what` when
// empty.
class RegisterPool {
 public:
  RegisterPool(std::string what, int first, int last);
  int take();
  void release(int reg);
  // `count` consecutive registers starting at a multiple of `align` (MXU groups, 16-vreg blocks).
  int take_run(int count, int align = 1);
  void release_run(int first, int count);
  int available() const { return static_cast<int>(free_.count()); }

 private:
  std::string what_;
  std::bitset<64> free_;
};

// The scalar registers of a 2-D DMA: `rows` rows of `row_bytes` bytes each, `vmem_stride` bytes
// apart in VMEM and `hbm_stride` bytes apart in HBM, between the VMEM and HBM byte addresses in
// `vmem` and `hbm`. Named so a call site cannot swap two of the six.
struct DmaRegs {
  int vmem, hbm, rows, row_bytes, vmem_stride, hbm_stride;
};

class AsmWriter {
 public:
  explicit AsmWriter(std::string name);
  // Marks the program as written for `chip`'s MXU width (.mxu_dim): generators whose code
  // depends on it (MXU weights, register groups) call this, so a launch elsewhere is refused.
  void target_mxu(int mxu_dim);
  // Marks the program .multicore: its code takes its TensorCore's share of the work (see
  // core_share.h), so the device launches it on every TensorCore of the chip.
  void split_across_cores();

  // One instruction (or directive) line, formatted with fmt.
  template <typename... A>
  void line(fmt::format_string<A...> format, A&&... args) {
    *out_ += "  ";
    *out_ += fmt::format(format, std::forward<A>(args)...);
    *out_ += '\n';
  }
  // Emits what `body` writes out of line, after the program's final halt: code for rare paths
  // (a ragged last block, a trap), reached by a branch that is not taken on the common path, so
  // the common path never pays the taken-branch penalty. `body` must end in a jump or trap.
  void cold(const std::function<void()>& body);
  // Emits what each of `bodies` writes with their lines merged round-robin: independent
  // instruction streams (no labels) interleaved so that an in-order core overlaps their
  // latencies instead of waiting out each chain in turn. With `in_flight` > 0, body k starts
  // k * ceil(longest body / in_flight) lines late (a software pipeline: bodies at different
  // points of their chains keep different units busy), so at most `in_flight` bodies overlap and
  // bodies k and k + in_flight may share registers.
  void interleave(const std::vector<std::function<void()>>& bodies, int in_flight = 0);
  void comment(std::string_view text);
  // Declares the next kernel argument and returns its index (used with `sarg`).
  int argument(std::string_view name, isa::ArgumentKind kind);
  // An argument slot past the declared ones, for the program's own values (`sargw` writes it,
  // `sarg` reads it back); no argument may be declared after the first.
  int scratch_argument();
  std::string new_label(std::string_view stem);
  // A 2-D DMA HBM -> VMEM (`to_vmem`) or VMEM -> HBM on queue dq`queue`, signalling sem`sem`
  // when it has landed.
  void dma(bool to_vmem, int queue, int sem, const DmaRegs& r) {
    line("{} dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", to_vmem ? "dma.h2v" : "dma.v2h", queue, sem, r.vmem, r.hbm, r.rows,
         r.row_bytes, r.vmem_stride, r.hbm_stride);
  }
  void dma_to_vmem(int queue, int sem, const DmaRegs& r) { dma(true, queue, sem, r); }
  void dma_to_hbm(int queue, int sem, const DmaRegs& r) { dma(false, queue, sem, r); }
  // A `trap` with `code`: the kernel refuses its arguments (trap_code.h says why).
  void trap(TrapCode code) { line("trap {}", trap_number(code)); }
  void place(const std::string& label);

  // sd = 32-bit immediate; a float constant is written as its bit pattern.
  void load_immediate(int sreg, int64_t value);
  void load_float(int sreg, float value);
  // s`dst` += s`src` * factor, through s`scratch` (address arithmetic: base + index * stride).
  void add_scaled(int dst, int src, int64_t factor, int scratch);
  // s`dst` = ceil(kernel argument #arg / divisor), through s`scratch`: how many blocks of
  // `divisor` cover a size passed at launch.
  void ceil_div_argument(int dst, int arg, int64_t divisor, int scratch);

  RegisterPool& sregs() { return sregs_; }
  const std::string& text() const { return text_; }
  std::string source() const;      // the whole listing: header, code, halt, cold sections
  isa::Program assemble() const;  // throws KernelError with the listing's line on failure
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::string header_;
  std::string text_;
  std::string cold_;
  std::string* out_ = &text_;
  int arguments_ = 0;
  int scratch_arguments_ = 0;
  int labels_ = 0;
  RegisterPool sregs_;
};

}  // namespace vtpu::kernels
