// A block kernel's reductions: a block's rows to a column (RowSum, RowMax: a row statistic, held
// lane-broadcast) or its columns to a row (ColumnSum, ColumnMax: a row vector). Both add the
// block's 8 x 128 tiles into one vreg on the VPU first, then reduce that vreg through the
// cross-lane unit once: across its lanes for rows, across its sublanes for columns.
#include <fmt/format.h>

#include "kernels/codegen/operand.h"
#include "kernels/codegen/vreg_shape.h"
#include "kernels/generators/block_kernel_body.h"

namespace vtpu::kernels {
namespace {

struct Reduction {
  bool rows = true;  // over each row (else down each column)
  bool sum = true;   // else max
};

Reduction reduction_of(BlockStatement::Kind kind) {
  switch (kind) {
    case BlockStatement::Kind::RowSum: return {true, true};
    case BlockStatement::Kind::RowMax: return {true, false};
    case BlockStatement::Kind::ColumnSum: return {false, true};
    default: return {false, false};
  }
}

}  // namespace

void emit_block_reduction(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const BlockStatement& st) {
  const BlockRef& x = spec.refs[st.operands.at(0)];
  const BlockRef& target = spec.refs[st.target];
  const Reduction r = reduction_of(st.kind);
  const char* what = r.rows ? "row" : "column";
  if (!dtype_is_float(x.dtype) || target.dtype != DType::F32) {
    fail_block_kernel(spec, fmt::format("{} reductions read and make float blocks", what));
  }
  // A block one row high is held once, not in 8 sublanes: the front end reduces it without a statement.
  if (x.block_rows % kSublanes) {
    fail_block_kernel(spec, fmt::format("{} reductions read blocks of whole 8-row tiles", what));
  }
  auto& s = w.sregs();
  const int src = s.take(), dst = s.take(), cursor = s.take(), outer = s.take(), inner = s.take(), limit = s.take();
  load_block_base(w, l, spec, st.operands[0], src);
  load_block_base(w, l, spec, st.target, dst);
  // Rows: the outer loop walks the row groups, the inner one the 128-lane chunks along them.
  // Columns: the outer loop walks the chunks, the inner one the row groups down them.
  const int64_t chunk_bytes = kLanes * dtype_bytes(x.dtype), group_bytes = kSublanes * row_stride_bytes(x);
  const int64_t outer_count = r.rows ? x.block_rows / kSublanes : stored_cols(x) / kLanes;
  const int64_t inner_count = r.rows ? stored_cols(x) / kLanes : x.block_rows / kSublanes;
  const std::string outer_loop = w.new_label("reduce_outer"), inner_loop = w.new_label("reduce_inner"),
                    reduced = w.new_label("reduced");
  w.line("sli s{}, 0", outer);
  w.place(outer_loop);
  w.line("{} v0, m0, s{}, 0, {}", load_mnemonic(x.dtype), src, row_stride_bytes(x));
  w.line("saddi s{}, s{}, {}", cursor, src, r.rows ? chunk_bytes : group_bytes);
  w.line("sli s{}, 1", inner);
  w.load_immediate(limit, inner_count);
  w.line("bge s{}, s{}, {}", inner, limit, reduced);
  w.place(inner_loop);
  w.line("{} v1, m0, s{}, 0, {}", load_mnemonic(x.dtype), cursor, row_stride_bytes(x));
  w.line("{} v0, v0, v1", r.sum ? "vadd" : "vmax");
  w.line("saddi s{}, s{}, {}", cursor, cursor, r.rows ? chunk_bytes : group_bytes);
  w.line("saddi s{}, s{}, 1", inner, inner);
  w.line("blt s{}, s{}, {}", inner, limit, inner_loop);
  w.place(reduced);
  w.line("{}.{} v2, v0", r.sum ? "vredsum" : "vredmax", r.rows ? "lane" : "sub");
  // A row statistic's 8 rows land in 8 rows; a row vector's 8 equal sublanes all land on its one row.
  w.line("vst v2, m0, s{}, 0, {}", dst, r.rows ? row_stride_bytes(target) : 0);
  w.line("saddi s{}, s{}, {}", src, src, r.rows ? group_bytes : chunk_bytes);
  w.line("saddi s{}, s{}, {}", dst, dst, r.rows ? kSublanes * row_stride_bytes(target) : kLanes * 4);
  w.line("saddi s{}, s{}, 1", outer, outer);
  w.load_immediate(limit, outer_count);
  w.line("blt s{}, s{}, {}", outer, limit, outer_loop);
  for (int reg : {src, dst, cursor, outer, inner, limit}) s.release(reg);
}

}  // namespace vtpu::kernels
