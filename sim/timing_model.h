// The analytic timing model of one core, separate from functional state so either can be tested
// alone. An in-order front end issues up to issue_width instructions per cycle; scalar, branch and
// sync instructions execute at issue (stalling it), the rest are dispatched to per-unit queues and
// start when their operands are ready and their unit is free. DMAs share the core's slice of HBM
// bandwidth on one FIFO timeline, which is what makes the roofline bound hold by construction.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "isa/instruction.h"
#include "sim/chip_config.h"
#include "sim/core_unit_names.h"
#include "sim/semantics.h"
#include "sim/slice_peers.h"
#include "traces/summary.h"
#include "traces/trace_recorder.h"

namespace vtpu::sim {

struct Scheduled {
  uint64_t start = 0;
  uint64_t end = 0;   // unit busy until
  uint64_t ready = 0; // results visible
};

class TimingModel {
 public:
  // hbm_share: fraction of the chip's HBM bandwidth this core gets (1/n when n cores move data).
  TimingModel(const ChipConfig& chip, double hbm_share, int core_index, traces::TraceRecorder* trace);

  // `wait_ready` is the cycle a sem.wait's signals landed (ignored for other instructions).
  Scheduled schedule(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t wait_ready = 0);
  uint64_t issue_cycle() const { return issue_; }
  // The cycle by which every unit, queue and DMA has finished.
  uint64_t finish_cycle() const;
  // Ends the span of the last `mark` in the trace at `cycle` (the run's end).
  void close_mark(uint64_t cycle);
  // Appends every unit's busy cycles and instructions, named "<chip> core<i> <unit>".
  void add_unit_usage(std::vector<traces::UnitUsage>& units) const;
  uint64_t hbm_read_bytes() const { return hbm_read_bytes_; }
  uint64_t hbm_write_bytes() const { return hbm_write_bytes_; }
  uint64_t local_dma_bytes() const { return local_dma_bytes_; }  // to or from VMEM held across launches
  uint64_t ici_bytes() const { return ici_bytes_; }              // sent to other chips
  // The chips of a slice launch, this core's being `chip_index` (dma.remote needs them).
  void set_peers(SlicePeers* peers, int chip_index) {
    peers_ = peers;
    chip_index_ = chip_index;
  }

 private:
  void mark(uint64_t cycle, int32_t value);
  int mark_track_ = -1;            // the trace's "marks" row, added at the first mark
  std::optional<std::pair<uint64_t, int32_t>> open_mark_;  // (start cycle, value) of the span being drawn

  struct Track {
    std::string_view full_name;  // "v5e core0 mxu1 weights" (sim/core_unit_names.h)
    uint64_t free_at = 0;
    uint64_t busy_cycles = 0;
    uint64_t instructions = 0;
    // The start cycles of the instructions still counted in the unit's queue, oldest first (for
    // back-pressure): a ring of unit_queue_depth slots in queue_starts_ from `ring` on.
    size_t ring = 0;
    int head = 0, queued = 0;
    int trace_id = -1;
  };
  struct MxuTiming {
    uint64_t weights_ready = 0;
    uint64_t buffer_last_use[2] = {0, 0};
    uint64_t buffer_loaded[2] = {0, 0};  // when each buffer's last load ends
    int active = 0;
  };

  void advance_issue_slot();
  Track& mxu_track(int mxu) { return tracks_[size_t(units_.mxu_first + 2 * mxu)]; }
  Track& mxu_weight_track(int mxu) { return tracks_[size_t(units_.mxu_first + 2 * mxu + 1)]; }
  Track& dma_track(int queue) { return tracks_[size_t(units_.dma_first + queue)]; }
  uint64_t dispatch(Track& track);
  void enqueue_start(Track& track, uint64_t start);
  uint64_t operands_ready(const isa::Instruction& ins) const;
  void mark_written(const isa::Instruction& ins, uint64_t ready);
  uint64_t vmem_ready(const Region& region) const;
  void vmem_written(const Region& region, uint64_t ready);
  template <typename F>
  void for_each_page(const Region& region, F f) const;
  void record(Track& track, uint64_t start, uint64_t end, const isa::Instruction& ins);
  Scheduled schedule_front_end(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t deps, uint64_t wait_ready);
  Scheduled schedule_mxu(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t deps);
  Scheduled schedule_dma(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t deps);
  std::pair<uint64_t, uint64_t> take_hbm_turn(Track& q, uint64_t accept, uint64_t bytes);
  Scheduled schedule_remote_dma(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t deps);
  Scheduled schedule_local_dma(const isa::Instruction& ins, const StepOutcome& outcome, Track& q, uint64_t accept);

  const ChipConfig& chip_;
  double hbm_bytes_per_cycle_;
  uint64_t hbm_latency_cycles_;
  double local_dma_bytes_per_cycle_;
  traces::TraceRecorder* trace_;
  // The core's units in track order, with where each family starts (sim/core_unit_names.h).
  const CoreUnitNames& units_;

  uint64_t issue_ = 0;
  int issued_this_cycle_ = 0;
  std::vector<Track> tracks_;
  // Every track's queue ring in one allocation: a std::deque per track cost two heap blocks each
  // at every launch (with the semaphores' deques, half of an 8-element add's allocations).
  std::vector<uint64_t> queue_starts_;
  std::vector<MxuTiming> mxus_;
  double hbm_free_ = 0;  // fractional cycles: small DMAs must not round up to whole cycles each
  uint64_t hbm_read_bytes_ = 0, hbm_write_bytes_ = 0;
  uint64_t local_dma_bytes_ = 0;
  uint64_t last_dma_done_ = 0;
  uint64_t remote_done_ = 0;  // when the last copy to another chip lands
  uint64_t ici_bytes_ = 0;
  SlicePeers* peers_ = nullptr;
  int chip_index_ = 0;
  int hbm_counter_ = -1;

  // Readiness, in cycles, of scalar, vector and mask registers and MXU accumulator slots.
  std::vector<uint64_t> sreg_ready_, vreg_ready_, mask_ready_, acc_ready_;
  // When each VMEM page's last write lands, in chunks of 512 pages made at a chunk's first write
  // (a page never written is ready at 0): a launch pays for the VMEM it touches, and a small one
  // touching a few pages far apart (an 8-element add's buffers lie 900 KiB apart) pays for two.
  static constexpr int kChunkShift = 9;
  static constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkShift) - 1;  // a page's place in its chunk
  using PageChunk = std::array<uint64_t, size_t{1} << kChunkShift>;
  std::vector<std::unique_ptr<PageChunk>> vmem_page_ready_;
  uint64_t vmem_pages_ = 0;
  static constexpr int kPageShift = 8;  // 256-byte granules: the narrowest tile row (128 bf16)
};

}  // namespace vtpu::sim
