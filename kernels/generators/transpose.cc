// Jobs are (outer index, q tile, p strip), p fastest. A job's source is up to 128 source rows (q)
// of one strip of up to W * 128 contiguous elements (p): one 2-D DMA lands it in VMEM, then each
// of its 128x128 tiles is loaded into 16 vregs, turned over in the cross-lane unit (vtrans) and
// stored into an output buffer whose rows are dst rows (p), which leaves by one 2-D DMA. Strips
// of several tiles make each DMA long enough that its HBM time, not its latency, sets the pace.
// Two buffer sets alternate so job j+1's input DMA overlaps job j (kernels/codegen/job_loop.h). Lanes and sublanes past a ragged tile's edge carry
// stale VMEM that is transposed along but never written back: only the valid region is DMA'd out.
// Every size is a launch scalar, read with `sarg` where it is used.
#include "kernels/generators/transpose.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/job_loop.h"
#include "kernels/codegen/outer_offset.h"
#include "kernels/generators/elementwise.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int kSemIn = 0, kSemOut = 2;
constexpr int kTile = kLanes;                  // 128 x 128 elements, what vtrans turns over
constexpr int kTileRegs = kTile / kSublanes;   // 16 vregs
constexpr int64_t kStripBytes = 256 * 1024;    // source bytes per job at most (with 128 rows)

// Scalar argument positions after src (0) and dst (1).
constexpr int kOffsetArg = 2, kPArg = 3, kQArg = 4, kPitchArg = 5, kOuterArg = 6;

// The registers describing one job.
struct Job {
  int src, dst;     // element offsets into the source and destination
  int rows, cols;   // valid source rows (q) and columns (p) of the strip
};

class TransposeWriter {
 public:
  TransposeWriter(DType dtype, int outer_rank, const sim::ChipConfig& chip)
      : dtype_(dtype), outer_rank_(outer_rank), w_("transpose") {
    eb_ = dtype_bytes(dtype);
    strip_ = kStripBytes / (int64_t{kTile} * eb_) / kTile * kTile;
    buffer_bytes_ = int64_t{kTile} * strip_ * eb_;
    for (int set = 0; set < 2; ++set) {
      in_[set] = set * buffer_bytes_;
      out_[set] = (2 + set) * buffer_bytes_;
    }
    if (uint64_t(4 * buffer_bytes_) > chip.kernel_vmem_bytes()) throw KernelError("transpose: VMEM cannot hold four strips");
  }

  isa::Program write() {
    auto& s = w_.sregs();
    w_.argument("src", isa::ArgumentKind::Buffer);
    w_.argument("dst", isa::ArgumentKind::Buffer);
    for (const char* name : {"offset", "p", "q", "pitch"}) w_.argument(name, isa::ArgumentKind::Scalar);
    for (int i = 0; i < outer_rank_; ++i) w_.argument(fmt::format("size{}", i), isa::ArgumentKind::Scalar);
    for (int i = 0; i < outer_rank_; ++i) w_.argument(fmt::format("stride{}", i), isa::ArgumentKind::Scalar);
    const int job = s.take(), next = s.take(), jobs = s.take(), scratch = s.take();
    p_strips_ = s.take();
    q_tiles_ = s.take();
    // p_strips = ceil(p / strip), q_tiles = ceil(q / 128), jobs = outer * q_tiles * p_strips
    w_.ceil_div_argument(p_strips_, kPArg, strip_, scratch);
    w_.line("sarg s{}, {}", q_tiles_, kQArg);
    w_.line("saddi s{}, s{}, {}", q_tiles_, q_tiles_, kTile - 1);
    w_.line("sshri s{}, s{}, 7", q_tiles_, q_tiles_);
    w_.line("smul s{}, s{}, s{}", jobs, p_strips_, q_tiles_);
    for (int i = 0; i < outer_rank_; ++i) {
      w_.line("sarg s{}, {}", scratch, kOuterArg + i);
      w_.line("smul s{}, s{}, s{}", jobs, jobs, scratch);
    }
    // Each set's write-back semaphore starts as if a write-back had landed, so the first two jobs
    // wait for nothing.
    for (int set = 0; set < 2; ++set) w_.line("sem.signal sem{}, 1", kSemOut + set);
    s.release(scratch);
    emit_job_loop(w_, job, next, jobs, kSemIn, 1, [&](int j, int set) { issue_input(j, set); }, [&](int set) {
      w_.line("sem.wait sem{}, 1", kSemOut + set);  // this set's previous write-back has landed
      const Job j = decode(job);
      turn_over(set, j);
      write_back(set, j);
      release(j);
    }, {.across_cores = true});  // jobs are independent: each TensorCore takes a contiguous share
    w_.split_across_cores();
    return w_.assemble();
  }

 private:
  // Decodes job index s`job` into offsets and the strip's valid extent.
  Job decode(int job) {
    auto& s = w_.sregs();
    const Job j{s.take(), s.take(), s.take(), s.take()};
    const int t = s.take(), idx = s.take(), o = s.take(), after = s.take();
    // p strip = job % p_strips, q tile = (job / p_strips) % q_tiles, o = job / (p_strips * q_tiles)
    w_.line("srem s{}, s{}, s{}", j.cols, job, p_strips_);
    w_.line("sdiv s{}, s{}, s{}", o, job, p_strips_);
    w_.line("srem s{}, s{}, s{}", j.rows, o, q_tiles_);
    w_.line("sdiv s{}, s{}, s{}", o, o, q_tiles_);
    w_.line("smuli s{}, s{}, {}", j.cols, j.cols, strip_);  // p0
    w_.line("smuli s{}, s{}, {}", j.rows, j.rows, kTile);   // q0
    // dst = (o * p + p0) * q + q0
    w_.line("sarg s{}, {}", t, kPArg);
    w_.line("smul s{}, s{}, s{}", j.dst, o, t);
    w_.line("sadd s{}, s{}, s{}", j.dst, j.dst, j.cols);
    w_.line("sarg s{}, {}", t, kQArg);
    w_.line("smul s{}, s{}, s{}", j.dst, j.dst, t);
    w_.line("sadd s{}, s{}, s{}", j.dst, j.dst, j.rows);
    // src = offset + sum over outer dims of ((o / after) % size) * stride + q0 * pitch + p0
    w_.line("sarg s{}, {}", j.src, kOffsetArg);
    add_outer_offset(w_, j.src, o, outer_rank_, kOuterArg, after, idx, t);
    w_.line("sarg s{}, {}", t, kPitchArg);
    w_.line("smul s{}, s{}, s{}", t, t, j.rows);
    w_.line("sadd s{}, s{}, s{}", j.src, j.src, t);
    w_.line("sadd s{}, s{}, s{}", j.src, j.src, j.cols);
    // valid extent: rows = min(128, q - q0), cols = min(strip, p - p0)
    w_.line("sarg s{}, {}", t, kQArg);
    w_.line("ssub s{}, s{}, s{}", j.rows, t, j.rows);
    w_.line("sarg s{}, {}", t, kPArg);
    w_.line("ssub s{}, s{}, s{}", j.cols, t, j.cols);
    w_.load_immediate(t, kTile);
    w_.line("smin s{}, s{}, s{}", j.rows, j.rows, t);
    w_.load_immediate(t, strip_);
    w_.line("smin s{}, s{}, s{}", j.cols, j.cols, t);
    for (int r : {t, idx, o, after}) s.release(r);
    return j;
  }

  void release(const Job& j) {
    for (int r : {j.src, j.dst, j.rows, j.cols}) w_.sregs().release(r);
  }

  void issue_input(int job, int set) {
    auto& s = w_.sregs();
    const Job j = decode(job);
    const int vm = s.take(), hb = s.take(), bytes = s.take(), vs = s.take(), hs = s.take();
    w_.load_immediate(vm, in_[set]);
    w_.line("sarg s{}, 0", hb);
    w_.add_scaled(hb, j.src, eb_, bytes);
    w_.line("smuli s{}, s{}, {}", bytes, j.cols, eb_);
    w_.load_immediate(vs, strip_ * eb_);
    w_.line("sarg s{}, {}", hs, kPitchArg);
    w_.line("smuli s{}, s{}, {}", hs, hs, eb_);
    w_.dma_to_vmem(0, kSemIn + set, {.vmem = vm, .hbm = hb, .rows = j.rows, .row_bytes = bytes, .vmem_stride = vs, .hbm_stride = hs});
    for (int r : {vm, hb, bytes, vs, hs}) s.release(r);
    release(j);
  }

  // Each tile of the strip that holds valid columns: source rows are strip_ elements apart in the
  // input buffer; its transpose lands as 128 dst rows of 128 elements in the output buffer.
  void turn_over(int set, const Job& j) {
    RegisterPool vregs("vector registers", 0, 63);
    const int block = vregs.take_run(kTileRegs, kTileRegs);
    auto& s = w_.sregs();
    const int in = s.take(), out = s.take(), at = s.take(), tile = s.take(), tiles = s.take();
    const int64_t in_step = int64_t{kSublanes} * strip_ * eb_, out_step = int64_t{kSublanes} * kTile * eb_;
    w_.load_immediate(in, in_[set]);
    w_.load_immediate(out, out_[set]);
    w_.line("sli s{}, 0", tile);
    w_.line("saddi s{}, s{}, {}", tiles, j.cols, kTile - 1);
    w_.line("sshri s{}, s{}, 7", tiles, tiles);
    const std::string loop = w_.new_label("strip_tile");
    w_.place(loop);
    w_.line("smov s{}, s{}", at, in);
    for (int v = 0; v < kTileRegs; ++v) {
      w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(dtype_), block + v, at, strip_ * eb_);
      if (v + 1 < kTileRegs) w_.line("saddi s{}, s{}, {}", at, at, in_step);
    }
    w_.line("vtrans v{}, v{}", block, block);
    for (int v = 0; v < kTileRegs; ++v) {
      w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(dtype_), block + v, out, kTile * eb_);
      w_.line("saddi s{}, s{}, {}", out, out, out_step);
    }
    w_.line("saddi s{}, s{}, {}", in, in, kTile * eb_);
    w_.line("saddi s{}, s{}, 1", tile, tile);
    w_.line("blt s{}, s{}, {}", tile, tiles, loop);
    for (int r : {in, out, at, tile, tiles}) s.release(r);
  }

  // The strip's dst rows are its source columns: `cols` rows of `rows` elements, q apart in HBM.
  void write_back(int set, const Job& j) {
    auto& s = w_.sregs();
    const int vm = s.take(), hb = s.take(), bytes = s.take(), vs = s.take(), hs = s.take();
    w_.load_immediate(vm, out_[set]);
    w_.line("sarg s{}, 1", hb);
    w_.add_scaled(hb, j.dst, eb_, bytes);
    w_.line("smuli s{}, s{}, {}", bytes, j.rows, eb_);
    w_.load_immediate(vs, kTile * eb_);
    w_.line("sarg s{}, {}", hs, kQArg);
    w_.line("smuli s{}, s{}, {}", hs, hs, eb_);
    w_.dma_to_hbm(1, kSemOut + set, {.vmem = vm, .hbm = hb, .rows = j.cols, .row_bytes = bytes, .vmem_stride = vs, .hbm_stride = hs});
    for (int r : {vm, hb, bytes, vs, hs}) s.release(r);
  }

  DType dtype_;
  int outer_rank_;
  AsmWriter w_;
  int eb_ = 4;
  int64_t strip_ = kTile;  // elements along p per job, a multiple of 128
  int64_t buffer_bytes_ = 0;
  uint64_t in_[2] = {0, 0}, out_[2] = {0, 0};
  int p_strips_ = -1, q_tiles_ = -1;  // registers
};

int32_t scalar(int64_t v, const char* what) {
  if (v > std::numeric_limits<int32_t>::max()) throw KernelError(fmt::format("transpose: {} {} does not fit 32 bits", what, v));
  return static_cast<int32_t>(v);
}

}  // namespace

std::vector<int32_t> transpose_scalars(const TransposeSpec& spec) {
  if (!dtype_on_chip(spec.dtype)) throw KernelError(fmt::format("transpose: {} is not supported on the chip", dtype_name(spec.dtype)));
  if (spec.outer_sizes.size() != spec.outer_strides.size()) throw KernelError("transpose: outer sizes and strides differ in rank");
  if (spec.p < 1 || spec.q < 1 || spec.pitch < 1 || spec.offset < 0) throw KernelError("transpose: empty or negative extents");
  int64_t numel = spec.p * spec.q;
  for (int64_t s : spec.outer_sizes) {
    if (s < 1) throw KernelError("transpose: empty or negative extents");
    numel *= s;
  }
  for (int64_t st : spec.outer_strides) {
    if (st < 0) throw KernelError("transpose: negative strides");
  }
  if (numel >= (int64_t{1} << 31)) throw KernelError("transpose: tensor too large for one launch");
  std::vector<int32_t> out{scalar(spec.offset, "offset"), scalar(spec.p, "size"), scalar(spec.q, "size"), scalar(spec.pitch, "pitch")};
  for (int64_t s : spec.outer_sizes) out.push_back(scalar(s, "size"));
  for (int64_t s : spec.outer_strides) out.push_back(scalar(s, "stride"));
  return out;
}

isa::Program make_transpose(DType dtype, int outer_rank, const sim::ChipConfig& chip) {
  if (!dtype_on_chip(dtype)) throw KernelError(fmt::format("transpose: {} is not supported on the chip", dtype_name(dtype)));
  if (outer_rank < 0) throw KernelError("transpose: negative rank");
  return TransposeWriter(dtype, outer_rank, chip).write();
}

}  // namespace vtpu::kernels
