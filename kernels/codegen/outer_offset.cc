#include "kernels/codegen/outer_offset.h"

namespace vtpu::kernels {

void add_outer_offset(AsmWriter& w, int dst, int index, int rank, int first_arg, int after, int digit, int scratch) {
  w.line("sli s{}, 1", after);
  for (int i = rank; i-- > 0;) {
    w.line("sdiv s{}, s{}, s{}", digit, index, after);
    w.line("sarg s{}, {}", scratch, first_arg + i);
    w.line("srem s{}, s{}, s{}", digit, digit, scratch);
    w.line("smul s{}, s{}, s{}", after, after, scratch);
    w.line("sarg s{}, {}", scratch, first_arg + rank + i);
    w.line("smul s{}, s{}, s{}", digit, digit, scratch);
    w.line("sadd s{}, s{}, s{}", dst, dst, digit);
  }
}

}  // namespace vtpu::kernels
