#include "sim/timing_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "isa/instruction_info.h"
#include "sim/core_unit_names.h"

namespace vtpu::sim {
namespace {

using isa::OperandKind;
using isa::Opcode;

}  // namespace

TimingModel::TimingModel(const ChipConfig& chip, double hbm_share, int core_index, traces::TraceRecorder* trace)
    : chip_(chip),
      hbm_bytes_per_cycle_(chip.hbm_bytes_per_cycle() * hbm_share),
      hbm_latency_cycles_(static_cast<uint64_t>(std::llround(chip.hbm_latency_cycles()))),
      local_dma_bytes_per_cycle_(chip.local_dma_bytes_per_cycle() * hbm_share),
      trace_(trace),
      units_(core_unit_names(chip, core_index)),
      sreg_ready_(isa::kScalarRegs, 0),
      vreg_ready_(isa::kVectorRegs, 0),
      mask_ready_(isa::kMaskRegs, 0),
      acc_ready_(size_t(chip.mxu_per_core) * chip.mxu_acc_slots, 0),
      vmem_pages_((chip.vmem_bytes >> kPageShift) + 1) {
  tracks_.reserve(units_.units.size());
  for (const UnitNames& unit : units_.units) {
    Track t;
    t.full_name = unit.full_name;
    if (trace_) t.trace_id = trace_->add_track(std::string(unit.unit), std::string(units_.process));
    tracks_.push_back(t);
  }
  mxus_.resize(chip.mxu_per_core);
  queue_starts_.resize(tracks_.size() * size_t(chip.unit_queue_depth));
  for (size_t i = 0; i < tracks_.size(); ++i) tracks_[i].ring = i * size_t(chip.unit_queue_depth);
  if (trace_) hbm_counter_ = trace_->add_counter("HBM bandwidth (GB/s)", std::string(units_.process));
}

void TimingModel::advance_issue_slot() {
  if (issued_this_cycle_ >= chip_.issue_width) {
    ++issue_;
    issued_this_cycle_ = 0;
  }
  ++issued_this_cycle_;
}

// A unit's queue holds at most unit_queue_depth instructions that have not started; when full,
// the front end waits for the oldest to start.
uint64_t TimingModel::dispatch(Track& track) {
  if (track.queued >= chip_.unit_queue_depth) {
    const uint64_t oldest = queue_starts_[track.ring + size_t(track.head)];
    if (oldest > issue_) {
      issue_ = oldest;
      issued_this_cycle_ = 1;
    }
    track.head = (track.head + 1) % chip_.unit_queue_depth;
    --track.queued;
  }
  return issue_;
}

// After dispatch(), which left room for it.
void TimingModel::enqueue_start(Track& track, uint64_t start) {
  queue_starts_[track.ring + size_t((track.head + track.queued) % chip_.unit_queue_depth)] = start;
  ++track.queued;
}

uint64_t TimingModel::operands_ready(const isa::Instruction& ins) const {
  const auto& meta = isa::info(ins.opcode);
  const int group = chip_.mxu_dim / kLanes;
  uint64_t ready = 0;
  for (int i = 0; i < meta.operand_count; ++i) {
    const int r = ins.operands[i];
    switch (meta.operands[i]) {
      case OperandKind::SRegSrc: ready = std::max(ready, sreg_ready_[r]); break;
      case OperandKind::VRegSrc: ready = std::max(ready, vreg_ready_[r]); break;
      case OperandKind::VGroupSrc:
        for (int g = 0; g < group && r + g < isa::kVectorRegs; ++g) ready = std::max(ready, vreg_ready_[r + g]);
        break;
      case OperandKind::VBlockSrc:
        for (int g = 0; g < isa::kVBlockRegs && r + g < isa::kVectorRegs; ++g) ready = std::max(ready, vreg_ready_[r + g]);
        break;
      case OperandKind::MaskSrc: ready = std::max(ready, mask_ready_[r]); break;
      default: break;
    }
  }
  return ready;
}

void TimingModel::mark_written(const isa::Instruction& ins, uint64_t ready) {
  const auto& meta = isa::info(ins.opcode);
  const int group = chip_.mxu_dim / kLanes;
  for (int i = 0; i < meta.operand_count; ++i) {
    const int r = ins.operands[i];
    switch (meta.operands[i]) {
      case OperandKind::SRegDst: sreg_ready_[r] = ready; break;
      case OperandKind::VRegDst: vreg_ready_[r] = ready; break;
      case OperandKind::VGroupDst:
        for (int g = 0; g < group && r + g < isa::kVectorRegs; ++g) vreg_ready_[r + g] = ready;
        break;
      case OperandKind::VBlockDst:
        for (int g = 0; g < isa::kVBlockRegs && r + g < isa::kVectorRegs; ++g) vreg_ready_[r + g] = ready;
        break;
      case OperandKind::MaskDst: mask_ready_[r] = ready; break;
      default: break;
    }
  }
}

// Visits the VMEM pages each row of the region touches (rows of a strided region can skip pages,
// and a false dependency through a skipped page would serialise independent tiles).
template <typename F>
void TimingModel::for_each_page(const Region& region, F f) const {
  const uint64_t last_page = vmem_pages_ - 1;
  const bool contiguous = region.rows <= 1 || region.stride <= region.row_bytes;
  const uint64_t rows = contiguous ? (region.rows ? 1 : 0) : region.rows;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t lo = contiguous ? region.lo() : region.base + r * region.stride;
    const uint64_t hi = contiguous ? region.hi() : lo + region.row_bytes;
    if (hi <= lo) continue;
    for (uint64_t p = lo >> kPageShift; p <= std::min((hi - 1) >> kPageShift, last_page); ++p) f(p);
  }
}

uint64_t TimingModel::vmem_ready(const Region& region) const {
  uint64_t ready = 0;
  for_each_page(region, [&](uint64_t p) {
    const uint64_t chunk = p >> kChunkShift;
    if (chunk < vmem_page_ready_.size() && vmem_page_ready_[chunk]) {
      ready = std::max(ready, (*vmem_page_ready_[chunk])[p & kChunkMask]);
    }
  });
  return ready;
}

void TimingModel::vmem_written(const Region& region, uint64_t ready) {
  for_each_page(region, [&](uint64_t p) {
    const uint64_t chunk = p >> kChunkShift;
    if (chunk >= vmem_page_ready_.size()) vmem_page_ready_.resize(chunk + 1);
    if (!vmem_page_ready_[chunk]) vmem_page_ready_[chunk] = std::make_unique<PageChunk>();  // zeroed
    uint64_t& page = (*vmem_page_ready_[chunk])[p & kChunkMask];
    page = std::max(page, ready);
  });
}

void TimingModel::record(Track& track, uint64_t start, uint64_t end, const isa::Instruction& ins) {
  track.free_at = std::max(track.free_at, end);
  track.busy_cycles += end - start;
  ++track.instructions;
  enqueue_start(track, start);
  if (trace_) trace_->slice(track.trace_id, start, end, isa::info(ins.opcode).mnemonic.data());
}

Scheduled TimingModel::schedule(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t wait_ready) {
  const auto& meta = isa::info(ins.opcode);
  advance_issue_slot();
  const uint64_t deps = operands_ready(ins);
  Scheduled s;
  switch (meta.unit) {
    case isa::Unit::Scalar:
    case isa::Unit::Branch:
    case isa::Unit::Sync:
      return schedule_front_end(ins, outcome, deps, wait_ready);
    case isa::Unit::Vpu: {
      // Earliest-free ALU.
      int best = units_.vpu_first;
      for (int id = best; id < units_.vpu_first + chip_.vpu_alus; ++id) {
        if (tracks_[id].free_at < tracks_[best].free_at) best = id;
      }
      Track& t = tracks_[best];
      const uint64_t start = std::max({dispatch(t), deps, t.free_at});
      s = {start, start + 1, start + chip_.vpu_latency_cycles};
      record(t, s.start, s.end, ins);
      break;
    }
    case isa::Unit::Transc: {
      Track& t = tracks_[units_.transcendental];
      const uint64_t start = std::max({dispatch(t), deps, t.free_at});
      s = {start, start + uint64_t(chip_.transc_issue_cycles), start + chip_.transc_latency_cycles};
      record(t, s.start, s.end, ins);
      break;
    }
    case isa::Unit::Xlane: {
      Track& t = tracks_[units_.cross_lane];
      const uint64_t occupancy = uint64_t(chip_.xlane_issue_cycles) * (ins.opcode == Opcode::Vtrans ? isa::kVBlockRegs : 1);
      const uint64_t start = std::max({dispatch(t), deps, t.free_at});
      s = {start, start + occupancy, start + occupancy + chip_.xlane_latency_cycles};
      record(t, s.start, s.end, ins);
      break;
    }
    case isa::Unit::VLoad: {
      Track& t = tracks_[units_.vector_load];
      const uint64_t start = std::max({dispatch(t), deps, t.free_at, vmem_ready(outcome.vmem_read)});
      s = {start, start + 1, start + chip_.vld_latency_cycles};
      record(t, s.start, s.end, ins);
      break;
    }
    case isa::Unit::VStore: {
      Track& t = tracks_[units_.vector_store];
      const uint64_t start = std::max({dispatch(t), deps, t.free_at});
      s = {start, start + 1, start + chip_.vst_latency_cycles};
      record(t, s.start, s.end, ins);
      vmem_written(outcome.vmem_write, s.ready);
      break;
    }
    case isa::Unit::Mxu:
      return schedule_mxu(ins, outcome, deps);
    case isa::Unit::Dma:
      return schedule_dma(ins, outcome, deps);
  }
  mark_written(ins, s.ready);
  return s;
}

// Scalar, branch and sync instructions execute in the front end.
Scheduled TimingModel::schedule_front_end(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t deps,
                                          uint64_t wait_ready) {
  const auto& meta = isa::info(ins.opcode);
  Scheduled s;
  // Executes in the front end: issue stalls until its operands (or signals) are there.
  // A scalar load also waits for its VMEM word (a DMA that is still landing it).
  const uint64_t start = std::max({issue_, deps, meta.unit == isa::Unit::Sync ? wait_ready : 0,
                                   ins.opcode == Opcode::Sld ? vmem_ready(outcome.vmem_read) : 0});
  if (start > issue_) {
    issue_ = start;
    issued_this_cycle_ = 1;
  }
  s = {start, start + 1, start + 1};
  if (ins.opcode == Opcode::Sld) s.ready = start + chip_.vld_latency_cycles;  // a VMEM read, like vld
  Track& t = tracks_[units_.scalar];
  t.busy_cycles += 1;
  ++t.instructions;
  t.free_at = std::max(t.free_at, s.end);
  if (trace_ && meta.unit == isa::Unit::Sync && ins.opcode == Opcode::Semwait) {
    trace_->slice(t.trace_id, start, start + 1, meta.mnemonic.data());
  }
  mark_written(ins, s.ready);
  if (outcome.mark) mark(start, *outcome.mark);
  if (outcome.branch_taken) {
    issue_ += chip_.branch_taken_penalty_cycles;
    issued_this_cycle_ = 0;
  }
  return s;
}

// MXU weight loads (into the back buffer), buffer switches, matmul pushes and accumulator pops.
Scheduled TimingModel::schedule_mxu(const isa::Instruction& ins, const StepOutcome& outcome, uint64_t deps) {
  Scheduled s;
  const int x = ins.opcode == Opcode::Mxpop ? ins.operands[1] : ins.operands[0];
  MxuTiming& mt = mxus_[x];
  if (isa::is_weight_load(ins.opcode)) {
    // Loads the back buffer, which must be done serving matmuls issued before the last switch.
    // mxu.lw switches to it at once (matmuls after it wait for the load); mxu.lwb does not.
    Track& t = mxu_weight_track(x);
    const int back = 1 - mt.active;
    const uint64_t start = std::max({dispatch(t), deps, t.free_at, mt.buffer_last_use[back],
                                     vmem_ready(outcome.vmem_read)});
    s = {start, start + uint64_t(chip_.mxu_weight_load_cycles), start + uint64_t(chip_.mxu_weight_load_cycles)};
    record(t, s.start, s.end, ins);
    mt.buffer_loaded[back] = s.ready;
    if (ins.opcode != Opcode::Mxlwb && ins.opcode != Opcode::Mxlwbt) {
      mt.active = back;
      mt.weights_ready = s.ready;
    }
  } else if (ins.opcode == Opcode::Mxswap) {
    // In queue order with the matmuls: later ones wait for the back buffer's load.
    Track& t = mxu_track(x);
    const uint64_t start = std::max({dispatch(t), deps, t.free_at});
    s = {start, start, start};
    mt.active = 1 - mt.active;
    mt.weights_ready = std::max(start, mt.buffer_loaded[mt.active]);
  } else if (ins.opcode == Opcode::Mxpop) {
    Track& t = mxu_track(x);
    const int group = chip_.mxu_dim / kLanes;
    uint64_t& slot_ready = acc_ready_[size_t(x) * chip_.mxu_acc_slots + ins.operands[2]];
    const uint64_t start = std::max({dispatch(t), deps, t.free_at, slot_ready});
    const uint64_t occupancy = uint64_t(chip_.mxu_pop_cycles) * group;
    s = {start, start + occupancy, start + occupancy};
    record(t, s.start, s.end, ins);
    slot_ready = s.end;  // a later matmul into this slot must wait for the pop
  } else {
    Track& t = mxu_track(x);
    uint64_t& slot_ready = acc_ready_[size_t(x) * chip_.mxu_acc_slots + ins.operands[2]];
    // Accumulating into a slot pipelines behind the previous push; only pops wait for the fill.
    const uint64_t start = std::max({dispatch(t), deps, t.free_at, mt.weights_ready});
    s = {start, start + uint64_t(chip_.mxu_push_cycles), start + chip_.mxu_push_cycles + chip_.mxu_fill_cycles};
    record(t, s.start, s.end, ins);
    slot_ready = std::max(slot_ready, s.ready);
    mt.buffer_last_use[mt.active] = std::max(mt.buffer_last_use[mt.active], s.end);
  }
  mark_written(ins, s.ready);
  return s;
}

// Each mark's span, from it to the next mark (or the end of the run), is one slice on the trace's
// "marks" row: a kernel that marks its grid steps draws them.
void TimingModel::mark(uint64_t cycle, int32_t value) {
  if (!trace_) return;
  close_mark(cycle);
  if (mark_track_ < 0) mark_track_ = trace_->add_track("marks", std::string(units_.process));
  open_mark_ = {cycle, value};
}

void TimingModel::close_mark(uint64_t cycle) {
  if (!trace_ || !open_mark_) return;
  trace_->span(mark_track_, open_mark_->first, std::max(cycle, open_mark_->first + 1),
                   fmt::format("mark {}", open_mark_->second));
  open_mark_.reset();
}

uint64_t TimingModel::finish_cycle() const {
  uint64_t end = std::max<uint64_t>({issue_ + 1, last_dma_done_, remote_done_});
  for (const auto& t : tracks_) end = std::max(end, t.free_at);
  for (uint64_t r : vreg_ready_) end = std::max(end, r);
  return end;
}

void TimingModel::add_unit_usage(std::vector<traces::UnitUsage>& units) const {
  for (const auto& t : tracks_) units.push_back({t.full_name, t.busy_cycles, t.instructions});
}

}  // namespace vtpu::sim
