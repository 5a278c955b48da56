#include "kernels/codegen/core_share.h"

namespace vtpu::kernels {

void emit_core_share(AsmWriter& w, int first, int end, int unit) {
  auto& s = w.sregs();
  const int core = s.take(), cores = s.take();
  if (unit >= 0) w.line("sdiv s{}, s{}, s{}", end, end, unit);
  w.line("score s{}", core);
  w.line("sncore s{}", cores);
  w.line("smul s{}, s{}, s{}", first, end, core);
  w.line("sdiv s{}, s{}, s{}", first, first, cores);
  w.line("saddi s{}, s{}, 1", core, core);
  w.line("smul s{}, s{}, s{}", end, end, core);
  w.line("sdiv s{}, s{}, s{}", end, end, cores);
  if (unit >= 0) {
    w.line("smul s{}, s{}, s{}", first, first, unit);
    w.line("smul s{}, s{}, s{}", end, end, unit);
  }
  s.release(core);
  s.release(cores);
}

void emit_core_share_or_halt(AsmWriter& w, int first, int end, int unit) {
  emit_core_share(w, first, end, unit);
  const std::string has_work = w.new_label("has_work");
  w.line("blt s{}, s{}, {}", first, end, has_work);
  w.line("halt");
  w.place(has_work);
}

}  // namespace vtpu::kernels
