// Jobs are (outer index, q tile, p strip), p fastest. A job's source is up to 128 source rows (q)
// of one strip of up to W * 128 contiguous elements (p): one 2-D DMA lands it in VMEM, then each
// of its W 128x128 tiles is loaded into 16 vregs, turned over in the cross-lane unit (vtrans) and
// stored into an output buffer whose rows are dst rows (p), which leaves by one 2-D DMA. Strips
// of several tiles make each DMA long enough that its HBM time, not its latency, sets the pace.
// Two buffer sets alternate so job j+1's input DMA overlaps job j (the body is emitted once per
// set because semaphores are immediates). Lanes and sublanes past a ragged tile's edge carry
// stale VMEM that is transposed along but never written back: only the valid region is DMA'd out.
#include "kernels/transpose.h"

#include <algorithm>

#include "kernels/asm_writer.h"
#include "kernels/elementwise.h"
#include "kernels/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int kSemIn = 0, kSemOut = 2;
constexpr int kTile = kLanes;                  // 128 x 128 elements, what vtrans turns over
constexpr int kTileRegs = kTile / kSublanes;   // 16 vregs
constexpr int64_t kStripBytes = 256 * 1024;    // source bytes per job at most (with 128 rows)

// The registers describing one job.
struct Job {
  int src, dst;     // element offsets into the source and destination
  int rows, cols;   // valid source rows (q) and columns (p) of the strip
};

class TransposeWriter {
 public:
  TransposeWriter(const TransposeSpec& spec, const sim::ChipConfig& chip) : spec_(spec), w_("transpose") {
    eb_ = dtype_bytes(spec.dtype);
    const int64_t p_tiles = (spec.p + kTile - 1) / kTile;
    strip_tiles_ = std::clamp<int64_t>(kStripBytes / (int64_t{kTile} * kTile * eb_), 1, p_tiles);
    strip_ = strip_tiles_ * kTile;
    p_strips_ = (spec.p + strip_ - 1) / strip_;
    q_tiles_ = (spec.q + kTile - 1) / kTile;
    outer_ = 1;
    for (int64_t s : spec.outer_sizes) outer_ *= s;
    buffer_bytes_ = int64_t{kTile} * strip_ * eb_;
    for (int set = 0; set < 2; ++set) {
      in_[set] = set * buffer_bytes_;
      out_[set] = (2 + set) * buffer_bytes_;
    }
    if (uint64_t(4 * buffer_bytes_) > chip.vmem_bytes) throw KernelError("transpose: VMEM cannot hold four strips");
  }

  isa::Program write() {
    auto& s = w_.sregs();
    src_arg_ = w_.argument("src", isa::ArgumentKind::Buffer);
    dst_arg_ = w_.argument("dst", isa::ArgumentKind::Buffer);
    const int job = s.take(), next = s.take(), jobs = s.take(), two = s.take();
    w_.load_immediate(jobs, outer_ * q_tiles_ * p_strips_);
    w_.load_immediate(two, 2);
    w_.line("sli s{}, 0", job);
    issue_input(job, 0);
    const std::string top = w_.new_label("tile"), done = w_.new_label("done");
    w_.place(top);
    for (int set = 0; set < 2; ++set) {
      const std::string no_prefetch = w_.new_label("no_prefetch"), out_free = w_.new_label("out_free");
      w_.line("saddi s{}, s{}, 1", next, job);
      w_.line("bge s{}, s{}, {}", next, jobs, no_prefetch);
      issue_input(next, 1 - set);
      w_.place(no_prefetch);
      w_.line("sem.wait sem{}, 1", kSemIn + set);
      w_.line("blt s{}, s{}, {}", job, two, out_free);  // this set's previous write-back has landed
      w_.line("sem.wait sem{}, 1", kSemOut + set);
      w_.place(out_free);
      turn_over(set);
      write_back(job, set);
      w_.line("smov s{}, s{}", job, next);
      w_.line("bge s{}, s{}, {}", job, jobs, done);
    }
    w_.line("jmp {}", top);
    w_.place(done);
    return w_.assemble();
  }

 private:
  // Decodes job index s`job` into offsets and the tile's valid extent.
  Job decode(int job) {
    auto& s = w_.sregs();
    const Job j{s.take(), s.take(), s.take(), s.take()};
    const int t = s.take(), idx = s.take(), o = s.take();
    // p strip = job % p_strips, q tile = (job / p_strips) % q_tiles, o = job / (p_strips * q_tiles)
    w_.load_immediate(t, p_strips_);
    w_.line("srem s{}, s{}, s{}", j.cols, job, t);
    w_.line("sdiv s{}, s{}, s{}", o, job, t);
    w_.load_immediate(t, q_tiles_);
    w_.line("srem s{}, s{}, s{}", j.rows, o, t);
    w_.line("sdiv s{}, s{}, s{}", o, o, t);
    w_.line("smuli s{}, s{}, {}", j.cols, j.cols, strip_);  // p0
    w_.line("smuli s{}, s{}, {}", j.rows, j.rows, kTile);  // q0
    // dst = o * p * q + p0 * q + q0
    w_.line("smuli s{}, s{}, {}", j.dst, o, spec_.p * spec_.q);
    w_.add_scaled(j.dst, j.cols, spec_.q, t);
    w_.line("sadd s{}, s{}, s{}", j.dst, j.dst, j.rows);
    // src = offset + outer offset of o + q0 * pitch + p0
    w_.load_immediate(j.src, spec_.offset);
    int64_t after = 1;
    for (size_t i = spec_.outer_sizes.size(); i-- > 0;) {
      w_.load_immediate(t, after);
      w_.line("sdiv s{}, s{}, s{}", idx, o, t);
      w_.load_immediate(t, spec_.outer_sizes[i]);
      w_.line("srem s{}, s{}, s{}", idx, idx, t);
      w_.add_scaled(j.src, idx, spec_.outer_strides[i], t);
      after *= spec_.outer_sizes[i];
    }
    w_.add_scaled(j.src, j.rows, spec_.pitch, t);
    w_.line("sadd s{}, s{}, s{}", j.src, j.src, j.cols);
    // valid extent: rows = min(128, q - q0), cols = min(strip, p - p0)
    w_.load_immediate(t, spec_.q);
    w_.line("ssub s{}, s{}, s{}", j.rows, t, j.rows);
    w_.load_immediate(t, spec_.p);
    w_.line("ssub s{}, s{}, s{}", j.cols, t, j.cols);
    w_.load_immediate(t, kTile);
    w_.line("smin s{}, s{}, s{}", j.rows, j.rows, t);
    w_.load_immediate(t, strip_);
    w_.line("smin s{}, s{}, s{}", j.cols, j.cols, t);
    for (int r : {t, idx, o}) s.release(r);
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
    w_.line("sarg s{}, {}", hb, src_arg_);
    w_.add_scaled(hb, j.src, eb_, bytes);
    w_.line("smuli s{}, s{}, {}", bytes, j.cols, eb_);
    w_.load_immediate(vs, strip_ * eb_);
    w_.load_immediate(hs, spec_.pitch * eb_);
    w_.line("dma.h2v dq0, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemIn + set, vm, hb, j.rows, bytes, vs, hs);
    for (int r : {vm, hb, bytes, vs, hs}) s.release(r);
    release(j);
  }

  // Each tile of the strip: source rows are strip_ elements apart in the input buffer; its
  // transpose lands as 128 dst rows of 128 elements in the output buffer, tile after tile.
  void turn_over(int set) {
    RegisterPool vregs("vector registers", 0, 63);
    const int block = vregs.take_run(kTileRegs, kTileRegs);
    auto& s = w_.sregs();
    const int in = s.take(), out = s.take(), at = s.take(), tile = s.take(), tiles = s.take();
    const int64_t in_step = int64_t{kSublanes} * strip_ * eb_, out_step = int64_t{kSublanes} * kTile * eb_;
    w_.load_immediate(in, in_[set]);
    w_.load_immediate(out, out_[set]);
    w_.line("sli s{}, 0", tile);
    w_.load_immediate(tiles, strip_tiles_);
    const std::string loop = w_.new_label("strip_tile");
    w_.place(loop);
    w_.line("smov s{}, s{}", at, in);
    for (int v = 0; v < kTileRegs; ++v) {
      w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(spec_.dtype), block + v, at, strip_ * eb_);
      if (v + 1 < kTileRegs) w_.line("saddi s{}, s{}, {}", at, at, in_step);
    }
    w_.line("vtrans v{}, v{}", block, block);
    for (int v = 0; v < kTileRegs; ++v) {
      w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(spec_.dtype), block + v, out, kTile * eb_);
      w_.line("saddi s{}, s{}, {}", out, out, out_step);
    }
    w_.line("saddi s{}, s{}, {}", in, in, kTile * eb_);
    w_.line("saddi s{}, s{}, 1", tile, tile);
    w_.line("blt s{}, s{}, {}", tile, tiles, loop);
    for (int r : {in, out, at, tile, tiles}) s.release(r);
  }

  // The tile's dst rows are its source columns: `cols` rows of `rows` elements, q apart in HBM.
  void write_back(int job, int set) {
    auto& s = w_.sregs();
    const Job j = decode(job);
    const int vm = s.take(), hb = s.take(), bytes = s.take(), vs = s.take(), hs = s.take();
    w_.load_immediate(vm, out_[set]);
    w_.line("sarg s{}, {}", hb, dst_arg_);
    w_.add_scaled(hb, j.dst, eb_, bytes);
    w_.line("smuli s{}, s{}, {}", bytes, j.rows, eb_);
    w_.load_immediate(vs, kTile * eb_);
    w_.load_immediate(hs, spec_.q * eb_);
    w_.line("dma.v2h dq1, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemOut + set, vm, hb, j.cols, bytes, vs, hs);
    for (int r : {vm, hb, bytes, vs, hs}) s.release(r);
    release(j);
  }

  const TransposeSpec& spec_;
  AsmWriter w_;
  int eb_ = 4;
  int64_t strip_tiles_ = 1, strip_ = kTile;  // tiles and elements along p per job
  int64_t p_strips_ = 1, q_tiles_ = 1, outer_ = 1, buffer_bytes_ = 0;
  uint64_t in_[2] = {0, 0}, out_[2] = {0, 0};
  int src_arg_ = 0, dst_arg_ = 0;
};

}  // namespace

isa::Program make_transpose(const TransposeSpec& spec, const sim::ChipConfig& chip) {
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
  return TransposeWriter(spec, chip).write();
}

}  // namespace vtpu::kernels
